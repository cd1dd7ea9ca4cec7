/* request.c -- reading one request or admin command (see request.h).
 *
 * What this file is for: turning the bytes a producer pushed into the raw
 * value of each field that matters (request_fields.h) and handing them to
 * request_validate(), which alone knows the contract: which fields each
 * op needs, their types, limits and messages. This file knows JSON, not
 * the contract. Its own errors are the ones before any field is looked at
 * (too large, not JSON, not an object): those requests are dead.
 *
 * Two readers, one validator.
 *
 * The reference reader is jansson (json_loadb, then json_fields() below on
 * the json_t tree). It reads anything, but it costs: building the tree, a
 * malloc per key, value and string, a hash table per object, all thrown
 * away a microsecond later. It was ~22% of allocd's CPU in the hot path,
 * for requests that are nearly always the same flat shape:
 *
 *     {"id":"r-1","user":"u-9","op":"buy","item":"sku-17","qty":1}
 *     {"id":"r-2","user":"s1001","op":"auto","prefs":["R101","R102"]}
 *
 * So request_parse() first tries a hand-written fast reader (fast_*, at
 * the end of this file) that accepts only a strict subset of JSON:
 *   - one object, with whitespace (space, tab, LF, CR: jansson's set)
 *     around tokens and nothing but whitespace after it;
 *   - keys and string values of printable ASCII (0x20..0x7f) without
 *     escapes: such a string is its own bytes, and jansson would accept it
 *     as is (no UTF-8 to validate, no \u0000 to refuse);
 *   - integers of at most 18 digits, so they can never overflow (the
 *     overflow handling of parse_tolerating_overflow stays jansson's);
 *   - true, false, null, and arrays of such strings;
 *   - each key that matters at most once, and no `filter`.
 * Everything else -- escapes, non-ASCII bytes, NUL bytes, reals, exponents,
 * long numbers, nested objects, arrays of anything but strings, a repeated
 * key, `filter`, a syntax error, an array longer than REQUEST_MAX_LIST --
 * makes the fast reader give up before it has written anything, and
 * jansson reads the request from scratch. Giving up is always correct;
 * accepting is only correct when the raw values are the ones jansson
 * would find, so when in doubt the fast reader gives up. Syntax errors are
 * always jansson's: the fast reader never reports one itself.
 *
 * Both readers feed the same request_validate(), so the contract checks
 * exist once; what the differential test (tests/unit/test_request_fast.c)
 * still guards is that both read the same values from the same bytes.
 *
 * Repeated keys: jansson (without JSON_REJECT_DUPLICATES, as here) keeps
 * the last value. The fast reader gives up on a repeated key it reads and
 * ignores repeated unknown keys (their values never matter; a value that
 * could, such as a number too long to hold, already makes it give up).
 *
 * The fast reader copies the strings it keeps (id, user, op, item, room,
 * prefs, members) into the request's inline buffer, one malloc when they
 * do not fit, so a typical request costs no malloc at all and `doc` stays
 * NULL.
 */
#include "wire/request.h"

#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "wire/request_fields.h"

/* Where an empty array's (absent) elements are: raw_value.u.list is never
 * NULL, and an empty array needs no allocation. */
static const char *const no_elements[1];

/* ------------------------------------------------------- jansson path -- */

/* A number jansson cannot hold (an integer beyond 64 bits, a real that
 * overflows a double) makes the whole document unreadable, though its id
 * may be perfectly readable. Such numbers are replaced by 0 so the document
 * parses; the validator then answers `invalid` instead of sending a
 * readable id to dead. */
static int number_char(char c)
{
    return c && strchr("0123456789+-.eE", c) != NULL;
}

static json_t *parse_tolerating_overflow(const char *raw, size_t len, json_error_t *jerr,
                                         int *overflowed)
{
    json_t *doc = json_loadb(raw, len, JSON_DECODE_ANY, jerr);
    if (doc || json_error_code(jerr) != json_error_numeric_overflow) return doc;
    char *copy = malloc(len ? len : 1);
    if (!copy) return NULL;
    memcpy(copy, raw, len);
    for (int tries = 0; tries < 64 && !doc && json_error_code(jerr) == json_error_numeric_overflow; tries++) {
        size_t pos = jerr->position > 0 ? (size_t)jerr->position : 0;
        size_t end = pos < len ? pos : len, start = end;
        while (start > 0 && number_char(copy[start - 1])) start--;
        while (end < len && number_char(copy[end])) end++;
        if (start == end) break;
        copy[start] = '0';
        memset(copy + start + 1, ' ', end - start - 1);
        *overflowed = 1;
        doc = json_loadb(copy, len, JSON_DECODE_ANY, jerr);
    }
    free(copy);
    return doc;
}

char *request_canonical_json(const void *json_value)
{
    return json_dumps((const json_t *)json_value,
                      JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

/* A jansson value as the validator sees it: its kind and, for strings and
 * integers, its value. Arrays and the filter are completed by
 * json_lists() and json_filter(). */
static raw_value json_raw(const json_t *v)
{
    raw_value r = { .kind = RAW_ABSENT };
    if (!v) return r;
    switch (json_typeof(v)) {
    case JSON_STRING: r.kind = RAW_STRING; r.u.str = json_string_value(v); break;
    case JSON_INTEGER: r.kind = RAW_INT; r.u.i = json_integer_value(v); break;
    case JSON_ARRAY: r.kind = RAW_ARRAY; r.n = json_array_size(v); r.u.list = no_elements; break;
    case JSON_OBJECT: r.kind = RAW_OBJECT; r.n = json_object_size(v); break;
    case JSON_TRUE: r.kind = RAW_BOOL; r.u.i = 1; break;
    case JSON_FALSE: r.kind = RAW_BOOL; r.u.i = 0; break;
    default: r.kind = RAW_OTHER; break;
    }
    return r;
}

/* The elements of every array among the fields, in one allocation
 * (q->lists, freed by request_clear): each element's string, or NULL for
 * one that is not a string (the validator refuses it, naming its index).
 * Arrays are laid out whatever the op, as the fast reader does: the
 * validator decides which it reads. */
static void json_lists(request *q, json_t *const *vals, request_fields *f)
{
    size_t elements = 0;
    for (int k = 0; k < FIELD_COUNT; k++)
        if (f->v[k].kind == RAW_ARRAY) elements += f->v[k].n;
    if (elements == 0) return; /* every array is empty: no_elements */
    const char **next = q->lists = malloc(elements * sizeof *q->lists);
    for (int k = 0; k < FIELD_COUNT; k++) {
        if (f->v[k].kind != RAW_ARRAY || f->v[k].n == 0) continue;
        if (!q->lists) {
            f->v[k].kind = RAW_NOMEM;
            continue;
        }
        f->v[k].u.list = next;
        for (size_t i = 0; i < f->v[k].n; i++) {
            const json_t *e = json_array_get(vals[k], i);
            *next++ = json_is_string(e) ? json_string_value(e) : NULL;
        }
    }
}

/* The filter's values as canonical JSON, the form the engine compares
 * with attrs. The only value whose reading needs jansson's writer, so it
 * is done here, whatever the op (the validator decides whether it is
 * read; a filter sent with another op costs the slow path a little work
 * and changes nothing). Not done for what the validator refuses anyway:
 * a filter that is not an object or has too many keys. */
static void json_filter(request *q, json_t *obj, raw_value *v)
{
    if (v->kind != RAW_OBJECT || v->n > REQUEST_MAX_LIST) return;
    size_t n = v->n;
    q->filter = calloc(n ? n : 1, sizeof *q->filter);
    q->filter_values = calloc(n ? n : 1, sizeof *q->filter_values);
    if (!q->filter || !q->filter_values) {
        v->kind = RAW_NOMEM;
        return;
    }
    size_t i = 0;
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        q->filter_values[i] = request_canonical_json(val);
        if (!q->filter_values[i]) {
            v->kind = RAW_NOMEM;
            return;
        }
        q->n_filter_values = i + 1;
        q->filter[i].key = key;
        q->filter[i].value = q->filter_values[i];
        i++;
    }
    v->u.filter = q->filter;
}

/* The raw value of every field of the document (an object). One pass
 * over its keys, looked up as the fast reader does, costs less than a
 * hash lookup per field. jansson keeps one value per key (the last), so
 * each field is met at most once, and refuses NUL bytes in keys, so a
 * key's strlen is its length. */
static void json_fields(request *q, json_t *doc, request_fields *f)
{
    json_t *vals[FIELD_COUNT] = { 0 };
    const char *key;
    json_t *val;
    json_object_foreach(doc, key, val) {
        int field = request_field_lookup(key, strlen(key));
        if (field >= 0) vals[field] = val;
    }
    for (int k = 0; k < FIELD_COUNT; k++) f->v[k] = json_raw(vals[k]);
    json_lists(q, vals, f);
    json_filter(q, vals[FIELD_FILTER], &f->v[FIELD_FILTER]);
}

static void describe_json_error(request *q, const json_error_t *e)
{
    request_fail(q, REQUEST_DEAD, "invalid JSON at line %d column %d: %s", e->line, e->column, e->text);
}

/* The jansson path, on a zeroed request within the size limit. */
static void parse_slow(request *q, const char *raw, size_t len, int admin)
{
    json_error_t jerr;
    request_fields f;
    f.number_overflowed = 0;
    json_t *doc = parse_tolerating_overflow(raw, len, &jerr, &f.number_overflowed);
    if (!doc) {
        describe_json_error(q, &jerr);
        return;
    }
    q->doc = doc;
    if (!json_is_object(doc)) {
        request_fail(q, REQUEST_DEAD, "request is not a JSON object");
        return;
    }
    json_fields(q, doc, &f);
    request_validate(q, &f, admin);
}

/* ---------------------------------------------------------- the parse -- */

/* Clears everything but the fast path's inline buffer, whose bytes are
 * meaningless until the fast path writes them: REQUEST_INLINE_BYTES less
 * to zero on every request. */
static void zero_request(request *q)
{
    memset(q, 0, offsetof(request, inline_buf));
}

static int size_ok(request *q, size_t len, size_t max_bytes)
{
    if (len <= max_bytes) return 1;
    request_fail(q, REQUEST_DEAD, "request is %zu bytes, more than max_request_bytes (%zu)", len, max_bytes);
    return 0;
}

static int fast_parse(request *q, const char *raw, size_t len, int admin);

void request_parse(request *q, const char *raw, size_t len, size_t max_bytes, int admin)
{
    zero_request(q);
    if (!size_ok(q, len, max_bytes)) return;
    if (fast_parse(q, raw, len, admin) == 0) return;
    parse_slow(q, raw, len, admin); /* q is still all zero: fast_parse gave up untouched */
}

void request_parse_slow(request *q, const char *raw, size_t len, size_t max_bytes, int admin)
{
    zero_request(q);
    if (!size_ok(q, len, max_bytes)) return;
    parse_slow(q, raw, len, admin);
}

void request_clear(request *q)
{
    for (size_t i = 0; i < q->n_filter_values; i++) free(q->filter_values[i]);
    free(q->filter_values);
    free(q->filter);
    free(q->lists);
    free(q->heap);
    if (q->doc) json_decref((json_t *)q->doc);
    zero_request(q);
}

/* ------------------------------------------------------------ fast path -- */

/* Where the fast reader found a string or array it keeps, in the raw
 * bytes (not NUL-terminated), until fast_store() copies it. */
typedef struct fast_span {
    const char *s;  /* string: first byte; array: just after '[' */
    size_t bytes;   /* string: its bytes; array: all elements' together */
} fast_span;

/* JSON whitespace as jansson's lexer has it: nothing else (no form feed,
 * no vertical tab). */
static const char *fast_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* A string at p (on its opening quote) made only of bytes 0x20..0x7f other
 * than '"' and '\\': no escapes, no UTF-8, no control characters. Such a
 * string decodes to exactly its bytes in jansson too (0x7f is not a control
 * character to JSON). Returns the byte after the closing quote, or NULL to
 * give up. */
static const char *fast_string(const char *p, const char *end, const char **s, size_t *n)
{
    const char *start = ++p;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            *s = start;
            *n = (size_t)(p - start);
            return p + 1;
        }
        if (c < 0x20 || c > 0x7f || c == '\\') return NULL;
        p++;
    }
    return NULL; /* unterminated */
}

/* An integer: -?(0|[1-9][0-9]*), at most 18 digits so it fits a long long
 * with room to spare (jansson's range is the full 64 bits; longer numbers
 * go to the jansson path, which also handles their overflow). What follows
 * is the caller's business: anything but whitespace, ',' or '}' (a '.', an
 * exponent, another digit after a leading 0) makes it give up. */
static const char *fast_int(const char *p, const char *end, long long *out)
{
    int neg = 0;
    if (*p == '-') { neg = 1; p++; }
    if (p >= end || *p < '0' || *p > '9') return NULL;
    long long x = 0;
    if (*p == '0') {
        p++;
    } else {
        const char *start = p;
        while (p < end && *p >= '0' && *p <= '9') {
            if (p - start >= 18) return NULL;
            x = x * 10 + (*p - '0');
            p++;
        }
    }
    *out = neg ? -x : x;
    return p;
}

/* true, false or null, spelled exactly (jansson reads a whole run of
 * letters: "truex" is one bad token; the caller's delimiter check rejects
 * it here too). To the validator all three are just not a string, number
 * or array. */
static const char *fast_literal(const char *p, const char *end)
{
    size_t left = (size_t)(end - p);
    if (left >= 4 && (!memcmp(p, "true", 4) || !memcmp(p, "null", 4))) return p + 4;
    if (left >= 5 && !memcmp(p, "false", 5)) return p + 5;
    return NULL;
}

/* An array of fast strings at p (on '['): [] or ["a", "b"]. Counts the
 * elements (v->n) and their bytes; gives up beyond REQUEST_MAX_LIST (an
 * error the validator words, from jansson's reading) or on any element
 * that is not a fast string. */
static const char *fast_array(const char *p, const char *end, raw_value *v, fast_span *sp)
{
    p = fast_ws(p + 1, end);
    sp->s = p;
    sp->bytes = v->n = 0;
    if (p < end && *p == ']') return p + 1;
    for (;;) {
        const char *s;
        size_t n;
        if (p >= end || *p != '"' || !(p = fast_string(p, end, &s, &n))) return NULL;
        if (++v->n > REQUEST_MAX_LIST) return NULL;
        sp->bytes += n;
        p = fast_ws(p, end);
        if (p >= end) return NULL;
        if (*p == ']') return p + 1;
        if (*p != ',') return NULL;
        p = fast_ws(p + 1, end);
    }
}

/* One value at p (not at end): its kind in v, where it lies in sp. Returns
 * the byte after it, or NULL to give up. */
static const char *fast_value(const char *p, const char *end, raw_value *v, fast_span *sp)
{
    char c = *p;
    if (c == '"') {
        v->kind = RAW_STRING;
        return fast_string(p, end, &sp->s, &sp->bytes);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        v->kind = RAW_INT;
        return fast_int(p, end, &v->u.i);
    }
    if (c == '[') {
        v->kind = RAW_ARRAY;
        return fast_array(p, end, v, sp);
    }
    v->kind = c == 't' || c == 'f' ? RAW_BOOL : RAW_OTHER;
    v->u.i = c == 't';
    return fast_literal(p, end);
}

/* Reads the whole document into f and spans (kinds, integers, where the
 * strings and arrays are). Returns the set of fields found (bit i for
 * field i), or -1 to give up. Writes nothing else. */
static long fast_scan(const char *raw, size_t len, request_fields *f, fast_span *spans)
{
    const char *p = fast_ws(raw, raw + len), *end = raw + len;
    unsigned seen = 0;
    if (p >= end || *p != '{') return -1;
    p = fast_ws(p + 1, end);
    if (p < end && *p == '}') return fast_ws(p + 1, end) == end ? 0 : -1;
    for (;;) {
        const char *k;
        size_t kn;
        if (p >= end || *p != '"' || !(p = fast_string(p, end, &k, &kn))) return -1;
        p = fast_ws(p, end);
        if (p >= end || *p != ':') return -1;
        p = fast_ws(p + 1, end);
        int field = request_field_lookup(k, kn);
        /* the filter's values need canonical JSON: jansson's job */
        if (field == FIELD_FILTER) return -1;
        /* a key of no meaning: its value is read, and dropped */
        raw_value ignored;
        fast_span ignored_span;
        raw_value *v = &ignored;
        fast_span *sp = &ignored_span;
        if (field >= 0) {
            if (seen & (1u << field)) return -1; /* repeated: jansson keeps the last */
            seen |= 1u << field;
            v = &f->v[field];
            sp = &spans[field];
        }
        if (p >= end || !(p = fast_value(p, end, v, sp))) return -1;
        p = fast_ws(p, end);
        if (p >= end) return -1;
        if (*p == '}') break;
        if (*p != ',') return -1;
        p = fast_ws(p + 1, end);
    }
    return fast_ws(p + 1, end) == end ? (long)seen : -1; /* jansson: "end of file expected" */
}

/* Copies the strings the validator may keep into the inline buffer (or one
 * malloc): list pointers first (aligned), then the bytes, and points the
 * raw values at the copies. Only the fields in `seen` can hold any. 0, or
 * -1 when malloc fails (the jansson path then has its turn). */
static int fast_store(request *q, request_fields *f, const fast_span *spans, unsigned seen,
                      const char *end)
{
    size_t ptrs = 0, bytes = 0;
    for (unsigned left = seen; left; left &= left - 1) {
        int k = __builtin_ctz(left);
        if (f->v[k].kind == RAW_STRING) bytes += spans[k].bytes + 1;
        else if (f->v[k].kind == RAW_ARRAY) {
            ptrs += f->v[k].n;
            bytes += spans[k].bytes + f->v[k].n;
        }
    }
    size_t need = ptrs * sizeof(char *) + bytes;
    char *base = q->inline_buf.bytes;
    if (need > sizeof q->inline_buf.bytes) {
        if (!(base = malloc(need))) return -1;
        q->heap = base;
    }
    const char **lp = (const char **)(void *)base;
    char *sp = base + ptrs * sizeof(char *);
    for (unsigned left = seen; left; left &= left - 1) {
        raw_value *v = &f->v[__builtin_ctz(left)];
        const fast_span *span = &spans[__builtin_ctz(left)];
        if (v->kind == RAW_STRING) {
            memcpy(sp, span->s, span->bytes);
            sp[span->bytes] = '\0';
            v->u.str = sp;
            sp += span->bytes + 1;
        } else if (v->kind == RAW_ARRAY) {
            /* fast_array checked the shape: quoted strings without escapes,
             * so each element runs from one quote to the next. */
            const char *p = span->s;
            v->u.list = lp;
            for (size_t i = 0; i < v->n; i++) {
                const char *s = (const char *)memchr(p, '"', (size_t)(end - p)) + 1;
                const char *e = memchr(s, '"', (size_t)(end - s));
                memcpy(sp, s, (size_t)(e - s));
                sp[e - s] = '\0';
                *lp++ = sp;
                sp += e - s + 1;
                p = e + 1;
            }
        }
    }
    return 0;
}

/* The fast path: 0 when it read the request (any outcome), -1 when it gave
 * up, with q untouched (still as zero_request() left it). */
static int fast_parse(request *q, const char *raw, size_t len, int admin)
{
    request_fields f;
    fast_span spans[FIELD_COUNT];
    memset(&f, 0, sizeof f); /* all absent; numbers never overflow here */
    long seen = fast_scan(raw, len, &f, spans);
    if (seen < 0) return -1;
    if (fast_store(q, &f, spans, (unsigned)seen, raw + len) < 0) return -1;
    request_validate(q, &f, admin);
    return 0;
}
