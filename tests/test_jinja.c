/* The Jinja interpreter on small templates: whitespace control, loop variables, scoping and
 * namespace, macros, filters, Python-like printing, undefined behaviour, errors with
 * line:column, and limits. Expected outputs are what jinja2 3.1.6 renders under transformers'
 * environment (trim_blocks, lstrip_blocks). */
#include "chat/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* Renders src with the JSON variables vars; want NULL means "must fail" and then err_has must be
 * in the message. */
static void check(int line, const char *src, const char *vars, const char *want, const char *err_has)
{
    celer_error     err = {0};
    celer_template *t   = NULL;
    cJSON          *v   = vars ? cJSON_Parse(vars) : NULL;
    char           *out = NULL;
    size_t          n   = 0;
    celer_status    st  = celer_template_parse(&t, src, strlen(src), "t", &err);
    if (!st) st = celer_template_render(t, v, &out, &n, &err);
    if (want && (st || n != strlen(want) || memcmp(out, want, n))) {
        fprintf(stderr, "test_jinja.c:%d: %s\n  want [%s]\n  got  [%s] %s\n", line, src, want, out ? out : "", st ? err.msg : "");
        failures++;
    } else if (!want && (!st || !strstr(err.msg, err_has))) {
        fprintf(stderr, "test_jinja.c:%d: %s\n  want an error with [%s]\n  got  [%s] (%s)\n", line, src, err_has, out ? out : "", err.msg);
        failures++;
    }
    free(out);
    celer_template_free(t);
    cJSON_Delete(v);
}
#define OK(src, vars, want) check(__LINE__, src, vars, want, NULL)
#define FAIL(src, vars, has) check(__LINE__, src, vars, NULL, has)

int main(void)
{
    /* whitespace control, trim_blocks, lstrip_blocks, trailing newline */
    OK("a\n  {% if true %}\n  b\n  {% endif %}\nc\n", NULL, "a\n  b\nc");
    OK("a  {%- if true -%}  b  {%- endif %}", NULL, "ab");
    OK("x {{- ' y ' -}} z", NULL, "x y z");
    OK("  {%+ if true %}k{% endif %}", NULL, "  k");
    OK("a {# c #}\nb", NULL, "a b");
    OK("{% raw %}{{ x }}{% endraw %}", NULL, "{{ x }}");
    OK("l1\r\nl2\r\n", NULL, "l1\nl2");
    /* loops */
    OK("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
       NULL, "103TrueFalse3;212FalseFalse3;321FalseTrue3;");
    OK("{% for x in 'abc' %}{{ loop.previtem }}{{ x }}{{ loop.nextitem }}{{ loop.cycle('-', '+') }}{% endfor %}", NULL, "ab-abc+bc-");
    OK("{% for x in [] %}x{% else %}empty{% endfor %}", NULL, "empty");
    OK("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}", "{\"d\":{\"b\":1,\"a\":2}}", "b=1 a=2 ");
    OK("{% for x in range(10) if x is odd %}{{ x }}{% if x > 4 %}{% break %}{% endif %}{% endfor %}", NULL, "135");
    OK("{% for x in range(5) %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", NULL, "0134");
    /* scoping: a set in a loop does not escape it; a namespace does */
    OK("{% set v = 0 %}{% for i in range(3) %}{{ v }}{% set v = v + 1 %}{% endfor %}{{ v }}", NULL, "0000");
    OK("{% set ns = namespace(v=0) %}{% for i in range(3) %}{% set ns.v = ns.v + i %}{% endfor %}{{ ns.v }}", NULL, "3");
    OK("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}x{{ a }}{% endset %}[{{ c }}]", NULL, "12[x1]");
    /* macros */
    OK("{% macro m(a, b='d') %}<{{ a }}|{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", NULL, "<1|d><2|3>");
    OK("{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}in{% endcall %}", NULL, "[in]");
    OK("{% generation %}gen{% endgeneration %}", NULL, "gen");
    /* printing like Python */
    OK("{{ 1.0 }} {{ 1e-5 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 3 / 2 }} {{ true }} {{ none }}",
       NULL, "1.0 1e-05 1e+16 0.30000000000000004 -4 2 1024 1.5 True None");
    OK("{{ [1, 'a\\'b', none, true, 2.5] }} {{ {'k': 'v\\n'} }} {{ (1,) }}", NULL, "[1, \"a'b\", None, True, 2.5] {'k': 'v\\n'} (1,)");
    OK("{{ 1 ~ 2.0 ~ none ~ true }} {{ 'ab' * 2 }} {{ [1] + [2] }}", NULL, "12.0NoneTrue abab [1, 2]");
    /* filters */
    OK("{{ '  x  '|trim }}|{{ 'héllo'|length }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}",
       NULL, "x|5|ABC|abc|Hello World|Hello");
    OK("{{ [1, 'a', none]|join(',') }}|{{ [3, 1, 2]|sort|list }}|{{ [1, 1, 2]|unique|list }}|{{ [1, 2]|first }}{{ [1, 2]|last }}",
       NULL, "1,a,None|[1, 2, 3]|[1, 2]|12");
    OK("{{ x|default('d') }}|{{ none|default('d') }}|{{ ''|default('d', true) }}|{{ '3'|int + 1 }}|{{ '2.5'|float }}|{{ 5|string }}",
       NULL, "d|None|d|4|2.5|5");
    OK("{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ 'é<'|tojson }}|{{ 'é'|tojson(ensure_ascii=true) }}",
       "{\"d\":{\"b\":[1,2.5,null],\"a\":\"x\"}}", "{\"b\": [1, 2.5, null], \"a\": \"x\"}|{\n  \"b\": [\n    1,\n    2.5,\n    null\n  ],\n  \"a\": \"x\"\n}|\"é<\"|\"\\u00e9\"");
    OK("{{ d|tojson(separators=(',', ':'), sort_keys=true) }}", "{\"d\":{\"b\":1,\"a\":2}}", "{\"a\":2,\"b\":1}");
    OK("{{ l|map(attribute='n')|join }}|{{ l|selectattr('n', 'equalto', 2)|list|length }}|{{ l|rejectattr('n')|list }}",
       "{\"l\":[{\"n\":1},{\"n\":2},{\"n\":0}]}", "120|1|[{'n': 0}]");
    OK("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, first=true) }}", NULL, "a\n  b\n\n  c|  a\n  b");
    OK("{{ [1, 2, 3]|select('odd')|list }}{{ ['a', 'b']|reject('equalto', 'a')|list }}{{ d|items|list }}",
       "{\"d\":{\"k\":1}}", "[1, 3]['b'][('k', 1)]");
    /* methods and slicing */
    OK("{{ ' a b '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}",
       NULL, "a b|['a', 'b', '', 'c']|['a', 'b']|True|True");
    OK("{{ 'abcdef'[1:3] }}{{ 'abcdef'[::-1] }}{{ [1, 2, 3][-1] }}{{ [1, 2, 3, 4][::2] }}{{ 'héllo'[1] }}", NULL, "bcfedcba3[1, 3]é");
    OK("{{ d.get('a') }}{{ d.get('z', 0) }}{{ d.keys()|list }}{{ d['a'] }}{{ d.a }}", "{\"d\":{\"a\":1}}", "10['a']11");
    OK("{{ 'x {} {}'.format(1, 'y') }}|{{ 'aXbX'.replace('X', '-') }}|{{ 'banana'.count('a') }}|{{ 'banana'.find('n') }}",
       NULL, "x 1 y|a-b-|3|2");
    /* tests */
    OK("{{ x is defined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ d is mapping }}{{ [] is iterable }}{{ 4 is divisibleby 2 }}{{ 1 is not even }}",
       "{\"d\":{}}", "FalseTrueTrueTrueTrueTrueTrueTrue");
    OK("{{ 'a' in 'cat' }}{{ 2 not in [1] }}{{ 'k' in d }}{{ 1 if false }}{{ 'y' if 0 else 'n' }}", "{\"d\":{\"k\":1}}", "TrueTrueTruen");
    /* undefined */
    OK("[{{ nothere }}]{{ nothere|length }}{% for x in nothere %}x{% endfor %}{{ none.attr }}{{ d.missing }}", "{\"d\":{}}", "[]0");
    FAIL("{{ nothere.attr }}", NULL, "'nothere' is undefined");
    FAIL("{{ nothere + 1 }}", NULL, "is undefined");
    FAIL("{{ d.a.b }}", "{\"d\":{}}", "undefined");
    /* errors name line:column */
    FAIL("line1\n{{ 1 + }}", NULL, "t:2:");
    FAIL("{% if true %}x", NULL, "endif");
    FAIL("{% include 'x' %}", NULL, "not supported");
    FAIL("{% frobnicate %}", NULL, "unknown tag 'frobnicate'");
    FAIL("{{ raise_exception('custom message') }}", NULL, "raise_exception: custom message");
    FAIL("a\n  {{ 'a' + 1 }}", NULL, "t:2:");
    FAIL("{{ x|nosuchfilter }}", NULL, "no filter named 'nosuchfilter'");
    FAIL("{{ [].append(1) }}", NULL, "undefined");
    FAIL("{% set x = namespace(_p=1) %}", NULL, "underscore");
    /* limits */
    FAIL("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", NULL, "deeper than 100");
    FAIL("{% for a in range(100000) %}{% for b in range(100) %}{% endfor %}{% endfor %}", NULL, "iterations");
    FAIL("{{ range(1000000)|length }}", NULL, "range too big");
    FAIL("{% for i in range(100000) %}{% for j in range(3) %}{{ 'x' * 100 }}{% endfor %}{% endfor %}", NULL, "16 MiB");
    FAIL("{% set ns = namespace(s='xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
         NULL, "MiB");
    FAIL("{{ ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
         "(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((1", NULL, "deep");
    /* strftime_now under SOURCE_DATE_EPOCH */
    setenv("SOURCE_DATE_EPOCH", "1717243200", 1);
    OK("{{ strftime_now('%d %b %Y %H:%M') }}", NULL, "01 Jun 2024 12:00");

    /* the context transformers builds: None keys dropped, reasoning aliased */
    cJSON *msgs = cJSON_Parse("[{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"r\"}]"), *ctx = NULL;
    celer_error err = {0};
    if (celer_chat_context(msgs, NULL, NULL, true, "<s>", NULL, NULL, &ctx, &err)) failures++, fprintf(stderr, "context: %s\n", err.msg);
    char *s = cJSON_PrintUnformatted(ctx);
    const char *want = "{\"messages\":[{\"thinking\":\"r\",\"role\":\"assistant\",\"reasoning\":\"r\",\"reasoning_content\":\"r\"}],"
                       "\"tools\":null,\"documents\":null,\"add_generation_prompt\":true,\"bos_token\":\"<s>\"}";
    if (!s || strcmp(s, want)) failures++, fprintf(stderr, "context:\n  want %s\n  got  %s\n", want, s ? s : "");
    free(s);
    cJSON_Delete(ctx);
    char  *cat;
    size_t n;
    cJSON *m2 = cJSON_Parse("[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"b\"}]}]");
    if (celer_chat_concat(m2, &cat, &n, &err) || strcmp(cat, "ab")) failures++, fprintf(stderr, "concat failed\n");
    else free(cat);
    cJSON_Delete(m2);
    cJSON_Delete(msgs);
    celer_template_free(NULL);

    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures != 0;
}
