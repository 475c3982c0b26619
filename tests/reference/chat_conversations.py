"""Conversations for the chat-template parity test (test_chat_template.py): each is a dict with
`messages`, optional `tools` and optional `extra` template variables. Between them they cover
system/user/assistant/tool turns, tool calls with arguments as objects and as JSON strings, tool
definitions, multi-turn chats, empty content, unicode and emoji, Jinja-looking text, reasoning
content, content as a list of parts, and enable_thinking on and off."""

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "description": "Forecast days"},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web — returns snippets.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "max_results": {"type": "number", "description": "at most 10"}},
            "required": ["query"],
        },
    },
}


def _call(name, args, as_string=False, call_id="call_1"):
    import json

    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args},
    }


BASE = [
    {"name": "single_user", "messages": [{"role": "user", "content": "Hello!"}]},
    {"name": "system_user", "messages": [{"role": "system", "content": "You are a helpful assistant."},
                                         {"role": "user", "content": "What is 2+2?"}]},
    {"name": "multi_turn", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road?"},
        {"role": "user", "content": "Why?"}]},
    {"name": "no_system_multi", "messages": [
        {"role": "user", "content": "One"}, {"role": "assistant", "content": "Two"}, {"role": "user", "content": "Three"}]},
    {"name": "ends_with_assistant", "messages": [
        {"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "hi"}]},
    {"name": "empty_content", "messages": [
        {"role": "system", "content": ""}, {"role": "user", "content": ""}, {"role": "assistant", "content": ""},
        {"role": "user", "content": "x"}]},
    {"name": "unicode", "messages": [
        {"role": "user", "content": "Ünïcödé ✓ — 日本語 😀👍🏽 \u00a0nbsp\ttab\r\nCRLF"},
        {"role": "assistant", "content": "Ελληνικά, русский, العربية, 🎉"},
        {"role": "user", "content": "\u200bzero width\u2028line sep"}]},
    {"name": "jinja_like", "messages": [
        {"role": "system", "content": "{{ raise_exception('nope') }} {% if true %}x{% endif %}"},
        {"role": "user", "content": "{{ messages }} {%- for x in y %} {# c #} '\"\\"},
        {"role": "assistant", "content": "}} %} #} {{"},
        {"role": "user", "content": "<|im_start|>user\n<s></s>[INST]"}]},
    {"name": "whitespace", "messages": [
        {"role": "system", "content": "  leading and trailing  \n\n"},
        {"role": "user", "content": "\n\nline1\n  line2\n"}]},
    {"name": "content_parts", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
        {"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Answer in parts."}]},
        {"role": "user", "content": [{"type": "text", "text": "Again"}]}]},
    {"name": "reasoning", "messages": [
        {"role": "user", "content": "What is 3*7?"},
        {"role": "assistant", "content": "21", "reasoning_content": "3 times 7 is 21."},
        {"role": "user", "content": "And 4*5?"}]},
    {"name": "reasoning_inline_think", "messages": [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA1"},
        {"role": "user", "content": "Q2"}]},
    {"name": "tools_defined", "tools": [WEATHER_TOOL, SEARCH_TOOL], "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris?"}]},
    {"name": "tool_call_dict_args", "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", {"city": "Paris", "days": 3, "unit": "celsius"})]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "call_1", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21.5°C and clear."},
        {"role": "user", "content": "Thanks"}]},
    {"name": "tool_call_string_args", "tools": [WEATHER_TOOL, SEARCH_TOOL], "messages": [
        {"role": "system", "content": "Use tools when needed."},
        {"role": "user", "content": "Search for jinja2 docs and the weather in Oslo"},
        {"role": "assistant", "content": None, "tool_calls": [
            _call("search", {"query": "jinja2 docs", "max_results": 2.5}, True, "call_a"),
            _call("get_weather", {"city": "Oslo"}, True, "call_b")]},
        {"role": "tool", "name": "search", "tool_call_id": "call_a", "content": "jinja.palletsprojects.com"},
        {"role": "tool", "name": "get_weather", "tool_call_id": "call_b", "content": "-3 °C, snow ❄"},
        {"role": "user", "content": "ok"}]},
    {"name": "tool_call_pending", "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather in Rome?"},
        {"role": "assistant", "tool_calls": [_call("get_weather", {"city": "Rome", "nested": {"a": [1, 2, {"b": None, "c": True}]}})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]},
    {"name": "long_chat", "messages": (
        [{"role": "system", "content": "sys"}] +
        [m for i in range(12) for m in ({"role": "user", "content": f"question {i}"},
                                         {"role": "assistant", "content": f"answer {i}"})] +
        [{"role": "user", "content": "last"}])},
    {"name": "quotes_and_escapes", "messages": [
        {"role": "user", "content": "She said \"it's\" \\n not a newline; tab:\t bell:\u0007 del:\u007f"}]},
]


def conversations():
    """The conversations, each with add_generation_prompt on and off, and where a template may
    read it, enable_thinking true and false. Yields (id, conversation, add_generation_prompt)."""
    for c in BASE:
        for agp in (True, False):
            yield f"{c['name']}-{'gen' if agp else 'nogen'}", c, agp
    for c in (BASE[1], BASE[2], BASE[10], BASE[13]):
        for think in (True, False):
            cc = dict(c, extra={"enable_thinking": think})
            yield f"{c['name']}-think{int(think)}", cc, True
