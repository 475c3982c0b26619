#include "tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"

/* ---- properties ---------------------------------------------------------------------------- */

static const celer_unicode_record *record(uint32_t cp)
{
    static const celer_unicode_record unassigned = {CELER_UCAT_CN, 0, 0};
    if (cp > 0x10FFFF) return &unassigned;
    unsigned block = celer_unicode_stage1[cp >> CELER_UNICODE_SHIFT];
    unsigned low = cp & ((1u << CELER_UNICODE_SHIFT) - 1);
    return &celer_unicode_records[celer_unicode_stage2[block << CELER_UNICODE_SHIFT | low]];
}

celer_ucat celer_unicode_category(uint32_t cp) { return (celer_ucat)record(cp)->cat; }

bool celer_unicode_is_space(uint32_t cp) { return (record(cp)->flags & CELER_UNICODE_F_WHITE_SPACE) != 0; }

uint8_t celer_unicode_ccc(uint32_t cp) { return record(cp)->ccc; }

const char *celer_unicode_version(void) { return celer_unicode_data_version; }

static const char cat_names[CELER_UCAT_COUNT][3] = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};

const char *celer_ucat_name(celer_ucat cat)
{
    return (unsigned)cat < CELER_UCAT_COUNT ? cat_names[cat] : "??";
}

/* Names of category sets, in loose form (lower case, no ' ', '-' or '_'). The 30 short names
 * come from cat_names. */
static const struct {
    const char *name;
    uint32_t    mask;
} class_names[] = {
    {"l", CELER_UCLASS_L},
    {"letter", CELER_UCLASS_L},
    {"lc", CELER_UCLASS_LU | CELER_UCLASS_LL | CELER_UCLASS_LT},
    {"l&", CELER_UCLASS_LU | CELER_UCLASS_LL | CELER_UCLASS_LT},
    {"casedletter", CELER_UCLASS_LU | CELER_UCLASS_LL | CELER_UCLASS_LT},
    {"uppercaseletter", CELER_UCLASS_LU},
    {"lowercaseletter", CELER_UCLASS_LL},
    {"titlecaseletter", CELER_UCLASS_LT},
    {"modifierletter", CELER_UCLASS_LM},
    {"otherletter", CELER_UCLASS_LO},
    {"m", CELER_UCLASS_M},
    {"mark", CELER_UCLASS_M},
    {"combiningmark", CELER_UCLASS_M},
    {"nonspacingmark", CELER_UCLASS(CELER_UCAT_MN)},
    {"spacingmark", CELER_UCLASS(CELER_UCAT_MC)},
    {"enclosingmark", CELER_UCLASS(CELER_UCAT_ME)},
    {"n", CELER_UCLASS_N},
    {"number", CELER_UCLASS_N},
    {"decimalnumber", CELER_UCLASS_ND},
    {"letternumber", CELER_UCLASS(CELER_UCAT_NL)},
    {"othernumber", CELER_UCLASS(CELER_UCAT_NO)},
    {"p", CELER_UCLASS_P},
    {"punctuation", CELER_UCLASS_P},
    {"connectorpunctuation", CELER_UCLASS(CELER_UCAT_PC)},
    {"dashpunctuation", CELER_UCLASS(CELER_UCAT_PD)},
    {"openpunctuation", CELER_UCLASS(CELER_UCAT_PS)},
    {"closepunctuation", CELER_UCLASS(CELER_UCAT_PE)},
    {"initialpunctuation", CELER_UCLASS(CELER_UCAT_PI)},
    {"finalpunctuation", CELER_UCLASS(CELER_UCAT_PF)},
    {"otherpunctuation", CELER_UCLASS(CELER_UCAT_PO)},
    {"s", CELER_UCLASS_S},
    {"symbol", CELER_UCLASS_S},
    {"mathsymbol", CELER_UCLASS(CELER_UCAT_SM)},
    {"currencysymbol", CELER_UCLASS(CELER_UCAT_SC)},
    {"modifiersymbol", CELER_UCLASS(CELER_UCAT_SK)},
    {"othersymbol", CELER_UCLASS(CELER_UCAT_SO)},
    {"z", CELER_UCLASS_Z},
    {"separator", CELER_UCLASS_Z},
    {"spaceseparator", CELER_UCLASS(CELER_UCAT_ZS)},
    {"lineseparator", CELER_UCLASS(CELER_UCAT_ZL)},
    {"paragraphseparator", CELER_UCLASS(CELER_UCAT_ZP)},
    {"c", CELER_UCLASS_C},
    {"other", CELER_UCLASS_C},
    {"control", CELER_UCLASS(CELER_UCAT_CC)},
    {"format", CELER_UCLASS(CELER_UCAT_CF)},
    {"surrogate", CELER_UCLASS(CELER_UCAT_CS)},
    {"privateuse", CELER_UCLASS(CELER_UCAT_CO)},
    {"unassigned", CELER_UCLASS(CELER_UCAT_CN)},
};

bool celer_unicode_class_parse(const char *name, size_t n, uint32_t *mask)
{
    char loose[32];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c == ' ' || c == '-' || c == '_') continue;
        if (k + 1 >= sizeof loose) return false;
        loose[k++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    loose[k] = '\0';
    for (int c = 0; c < CELER_UCAT_COUNT; c++) {
        if (k == 2 && loose[0] == (cat_names[c][0] | 0x20) && loose[1] == cat_names[c][1]) {
            *mask = CELER_UCLASS(c);
            return true;
        }
    }
    for (size_t i = 0; i < sizeof class_names / sizeof class_names[0]; i++) {
        if (strcmp(loose, class_names[i].name) == 0) {
            *mask = class_names[i].mask;
            return true;
        }
    }
    return false;
}

/* ---- Hangul syllables: decomposition and composition by arithmetic (Unicode 3.12) ----------- */

enum {
    S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
    L_COUNT = 19, V_COUNT = 21, T_COUNT = 28,
    N_COUNT = V_COUNT * T_COUNT, /* 588 */
    S_COUNT = L_COUNT * N_COUNT, /* 11172 */
};

static bool is_hangul_syllable(uint32_t cp) { return cp - S_BASE < S_COUNT; }

/* ---- decomposition ------------------------------------------------------------------------- */

static const celer_unicode_decomp *find_decomp(uint32_t cp)
{
    size_t lo = 0, hi = celer_unicode_n_decomps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (celer_unicode_decomps[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    CELER_ASSERT(lo < celer_unicode_n_decomps && celer_unicode_decomps[lo].cp == cp);
    return &celer_unicode_decomps[lo];
}

/* Number of code points cp fully decomposes to; writes them to out when out is not NULL. */
static size_t decompose(uint32_t cp, uint32_t *out)
{
    if (is_hangul_syllable(cp)) {
        uint32_t s = cp - S_BASE, t = s % T_COUNT;
        if (out) {
            out[0] = L_BASE + s / N_COUNT;
            out[1] = V_BASE + (s % N_COUNT) / T_COUNT;
            if (t) out[2] = T_BASE + t;
        }
        return t ? 3 : 2;
    }
    if (!(record(cp)->flags & CELER_UNICODE_F_DECOMP)) {
        if (out) out[0] = cp;
        return 1;
    }
    const celer_unicode_decomp *d = find_decomp(cp);
    if (out) memcpy(out, &celer_unicode_decomp_pool[d->start], d->len * sizeof *out);
    return d->len;
}

/* Stable sort of one run of non-starters (cps, n) by combining class. Short runs (all real
 * text) go by insertion; long runs by counting sort so that crafted input stays linear. */
static void sort_run(uint32_t *cps, size_t n, uint32_t *tmp)
{
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t c = cps[i];
            uint8_t k = celer_unicode_ccc(c);
            size_t j = i;
            while (j > 0 && celer_unicode_ccc(cps[j - 1]) > k) {
                cps[j] = cps[j - 1];
                j--;
            }
            cps[j] = c;
        }
        return;
    }
    size_t start[257] = {0};
    for (size_t i = 0; i < n; i++) start[celer_unicode_ccc(cps[i]) + 1]++;
    for (int k = 1; k <= 256; k++) start[k] += start[k - 1];
    for (size_t i = 0; i < n; i++) tmp[start[celer_unicode_ccc(cps[i])]++] = cps[i];
    memcpy(cps, tmp, n * sizeof *cps);
}

/* Validates in[0..n), then writes its full canonical decomposition, canonically ordered, to a
 * malloc'd *cps (*n_cps code points). */
static celer_status decompose_text(const char *in, size_t n, uint32_t **cps, size_t *n_cps, const char *form,
                                   celer_error *err)
{
    *cps = NULL;
    *n_cps = 0;
    size_t bad = celer_utf8_validate(in, n);
    if (bad < n) {
        return celer_fail(err, CELER_ERR_INVALID,
                          "unicode: %s: invalid UTF-8 at byte %zu (0x%02X) of %zu; normalization takes valid "
                          "UTF-8 only, as HF tokenizers' strings are: decode the bytes with U+FFFD "
                          "replacement first",
                          form, bad, (unsigned)(unsigned char)in[bad], n);
    }
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += celer_utf8_decode(in + i, n - i, &cp);
        count += decompose(cp, NULL);
    }
    if (count > SIZE_MAX / sizeof **cps)
        return celer_fail(err, CELER_ERR_OOM, "unicode: %s: %zu bytes of text decompose to too many code points", form, n);
    uint32_t *buf = malloc((count ? count : 1) * sizeof *buf);
    uint32_t *tmp = NULL;
    if (!buf) return celer_fail(err, CELER_ERR_OOM, "unicode: %s: out of memory for %zu code points", form, count);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += celer_utf8_decode(in + i, n - i, &cp);
        k += decompose(cp, buf + k);
    }
    CELER_ASSERT(k == count);
    for (size_t i = 0; i < count;) {
        if (celer_unicode_ccc(buf[i]) == 0) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < count && celer_unicode_ccc(buf[j]) != 0) j++;
        if (j - i > 32 && !tmp && !(tmp = malloc(count * sizeof *tmp))) {
            free(buf);
            return celer_fail(err, CELER_ERR_OOM, "unicode: %s: out of memory for %zu code points", form, count);
        }
        sort_run(buf + i, j - i, tmp);
        i = j;
    }
    free(tmp);
    *cps = buf;
    *n_cps = count;
    return CELER_OK;
}

/* ---- composition --------------------------------------------------------------------------- */

/* The primary composite of a + b, or 0 when they do not compose. */
static uint32_t compose_pair(uint32_t a, uint32_t b)
{
    if (a - L_BASE < L_COUNT && b - V_BASE < V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (is_hangul_syllable(a) && (a - S_BASE) % T_COUNT == 0 && b - T_BASE - 1 < T_COUNT - 1)
        return a + (b - T_BASE);
    if (!(record(b)->flags & CELER_UNICODE_F_COMP_SECOND)) return 0;
    size_t lo = 0, hi = celer_unicode_n_pairs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const celer_unicode_pair *p = &celer_unicode_pairs[mid];
        if (p->first < a || (p->first == a && p->second < b)) lo = mid + 1;
        else hi = mid;
    }
    if (lo < celer_unicode_n_pairs && celer_unicode_pairs[lo].first == a && celer_unicode_pairs[lo].second == b)
        return celer_unicode_pairs[lo].composite;
    return 0;
}

/* Canonical composition of cps[0..n) in place (UAX #15, 1.3): each character not blocked from
 * the last starter and forming a primary composite with it is merged into it. Returns the
 * new length. */
static size_t compose_text(uint32_t *cps, size_t n)
{
    if (n == 0) return 0;
    size_t starter = 0;
    bool have_starter = celer_unicode_ccc(cps[0]) == 0;
    int last_ccc = have_starter ? 0 : 256; /* ccc of the last kept character */
    size_t k = 1;
    for (size_t i = 1; i < n; i++) {
        uint32_t c = cps[i];
        int ccc = celer_unicode_ccc(c);
        /* Not blocked: adjacent to the starter (last_ccc 0), or every character in between has
         * a lower, non-zero class (canonical order makes the last one the highest). */
        if (have_starter && (last_ccc == 0 || last_ccc < ccc)) {
            uint32_t comp = compose_pair(cps[starter], c);
            if (comp) {
                cps[starter] = comp;
                continue;
            }
        }
        if (ccc == 0) {
            starter = k;
            have_starter = true;
        }
        last_ccc = ccc;
        cps[k++] = c;
    }
    return k;
}

/* ---- NFC / NFD ----------------------------------------------------------------------------- */

static celer_status encode_text(const uint32_t *cps, size_t n, char **out, size_t *out_n, const char *form,
                                celer_error *err)
{
    size_t bytes = 0;
    char tmp[CELER_UTF8_MAX];
    for (size_t i = 0; i < n; i++) bytes += celer_utf8_encode(cps[i], tmp);
    char *s = malloc(bytes + 1);
    if (!s) return celer_fail(err, CELER_ERR_OOM, "unicode: %s: out of memory for %zu bytes", form, bytes);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += celer_utf8_encode(cps[i], s + k);
    s[k] = '\0';
    *out = s;
    *out_n = k;
    return CELER_OK;
}

/* Copies in when every byte is below `below`, which for valid UTF-8 bounds the code points. */
static bool copy_if_below(const char *in, size_t n, unsigned below, char **out, size_t *out_n, celer_status *st,
                          celer_error *err)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)in[i] >= below) return false;
    if (celer_utf8_validate(in, n) < n) return false; /* let decompose_text name the byte */
    *st = CELER_OK;
    if (!(*out = malloc(n + 1))) {
        *st = celer_fail(err, CELER_ERR_OOM, "unicode: out of memory for %zu bytes", n);
        return true;
    }
    memcpy(*out, in, n);
    (*out)[n] = '\0';
    *out_n = n;
    return true;
}

static celer_status normalize(const char *in, size_t n, bool compose, char **out, size_t *out_n, celer_error *err)
{
    const char *form = compose ? "nfc" : "nfd";
    *out = NULL;
    *out_n = 0;
    /* Fast path. Below U+0300 every character is NFC (quick check Yes, class 0): bytes below
     * 0xCC. Below U+00C0 none decomposes: bytes below 0xC3. */
    celer_status st;
    if (copy_if_below(in, n, compose ? 0xCC : 0xC3, out, out_n, &st, err)) return st;
    uint32_t *cps;
    size_t n_cps;
    if ((st = decompose_text(in, n, &cps, &n_cps, form, err)) != CELER_OK) return st;
    if (compose) n_cps = compose_text(cps, n_cps);
    st = encode_text(cps, n_cps, out, out_n, form, err);
    free(cps);
    return st;
}

celer_status celer_unicode_nfc(const char *in, size_t n, char **out, size_t *out_n, celer_error *err)
{
    return normalize(in, n, true, out, out_n, err);
}

celer_status celer_unicode_nfd(const char *in, size_t n, char **out, size_t *out_n, celer_error *err)
{
    return normalize(in, n, false, out, out_n, err);
}
