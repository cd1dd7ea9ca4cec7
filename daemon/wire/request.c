/* request.c -- parse and validate one request or admin command (see request.h).
 *
 * The checks follow the order a producer would debug them in: size, JSON,
 * object, id; then op; then the op's own fields. The first problem found is
 * the one reported, so `detail` always names one concrete thing to fix.
 *
 * Two parsers, one behaviour.
 *
 * The reference is the jansson path (json_loadb, then the *_field checks
 * below on the json_t tree). It reads anything, but it costs: building the
 * tree, a malloc per key, value and string, a hash table per object, all
 * thrown away a microsecond later. It was ~22% of allocd's CPU in the hot
 * path, for requests that are nearly always the same flat shape:
 *
 *     {"id":"r-1","user":"u-9","op":"buy","item":"sku-17","qty":1}
 *     {"id":"r-2","user":"s1001","op":"auto","prefs":["R101","R102"]}
 *
 * So request_parse() first tries a hand-written fast path (fast_*, at the
 * end of this file) that accepts only a strict subset of JSON:
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
 * makes the fast path give up before it has written anything, and the
 * jansson path parses the request from scratch, exactly as before. Giving
 * up is always correct; accepting is only correct when the result is the
 * one jansson would give, so when in doubt the fast path gives up. Errors
 * are always the jansson path's: the fast path never reports a syntax
 * error itself, only the contract errors (missing field, wrong type, out
 * of range), with the same messages in the same order.
 *
 * Repeated keys: jansson (without JSON_REJECT_DUPLICATES, as here) keeps
 * the last value. The fast path gives up on a repeated key it reads and
 * ignores repeated unknown keys (their values never matter; a value that
 * could, such as a number too long to hold, already makes it give up).
 *
 * The fast path copies the strings it keeps (id, user, op, item, room,
 * prefs, members) into the request's inline buffer, one malloc when they
 * do not fit, so a typical request costs no malloc at all and `doc` stays
 * NULL. The jansson path hands the raw field values it found to the one
 * validator (wire/request_fields.h); the fast path still checks the
 * contract itself, on fast_val. The differential test
 * (tests/unit/test_request_fast.c) runs both paths over the request table,
 * the fuzz corpus and many generated variants and requires identical
 * outcomes, messages and fields, so the two cannot drift apart silently.
 */
#include "wire/request.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "wire/request_fields.h"

/* Where an empty array's (absent) elements are: raw_value.u.list is never
 * NULL, and an empty array needs no allocation. */
static const char *const no_elements[1];

#define QTY_MAX 1000000          /* units in one buy */
#define CAPACITY_MAX 2000000000LL

static void set_error(request *q, request_outcome o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_error(request *q, request_outcome o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->error, sizeof q->error, fmt, ap);
    va_end(ap);
    q->outcome = o;
}

/* 1 to 64 printable ASCII characters: safe as a hash field and in logs. */
static int valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > ENGINE_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e) return 0;
    return 1;
}

/* 1 to 64 characters (code points; jansson already checked UTF-8), no
 * control characters, at most ENGINE_ID_MAX * 4 bytes. */
static int valid_name(const char *s)
{
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) return 0;
        if ((*p & 0xc0) != 0x80) chars++;
    }
    return chars >= 1 && chars <= ENGINE_ID_MAX;
}

/* An order id given as a string: 1 to 20 decimal digits, not 0, that fit
 * in 64 bits. */
static int order_digits(request *q, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    int ok = n >= 1 && n <= 20 && strspn(s, "0123456789") == n;
    if (ok) {
        errno = 0;
        unsigned long long x = strtoull(s, NULL, 10);
        ok = errno == 0 && x > 0;
        q->r.order = x;
    }
    if (!ok) set_error(q, REQUEST_INVALID, "'order' must be a string of decimal digits");
    return ok ? 0 : -1;
}

char *request_canonical_json(const void *json_value)
{
    return json_dumps((const json_t *)json_value,
                      JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}


/* The fast path's: no member twice, and the requester among them. */
static int check_members(request *q)
{
    int has_user = 0;
    for (size_t i = 0; i < q->r.n_members; i++) {
        if (strcmp(q->r.members[i], q->r.user) == 0) has_user = 1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(q->r.members[i], q->r.members[j]) == 0) {
                set_error(q, REQUEST_INVALID, "'members' lists '%s' twice", q->r.members[i]);
                return -1;
            }
    }
    if (!has_user) { set_error(q, REQUEST_INVALID, "'members' must include 'user'"); return -1; }
    return 0;
}

/* A number jansson cannot hold (an integer beyond 64 bits, a real that
 * overflows a double) makes the whole document unreadable, though its id
 * may be perfectly readable. Such numbers are replaced by 0 so the document
 * parses; the caller then answers `invalid` instead of sending a readable
 * id to dead. */
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
    set_error(q, REQUEST_DEAD, "invalid JSON at line %d column %d: %s", e->line, e->column, e->text);
}

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
    set_error(q, REQUEST_DEAD, "request is %zu bytes, more than max_request_bytes (%zu)", len, max_bytes);
    return 0;
}

static int fast_parse(request *q, const char *raw, size_t len, int admin);

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
        set_error(q, REQUEST_DEAD, "request is not a JSON object");
        return;
    }
    json_fields(q, doc, &f);
    request_validate(q, &f, admin);
}

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

/* What the fast path read for one key that matters. Strings point into the
 * raw bytes (not NUL-terminated) until fast_store() copies them. */
enum { FV_ABSENT = 0, FV_STRING, FV_INT, FV_TRUE, FV_FALSE, FV_NULL, FV_ARRAY };

typedef struct fast_val {
    int kind;
    const char *s;     /* FV_STRING: first byte; FV_ARRAY: just after '[' */
    size_t len;        /* FV_STRING: bytes; FV_ARRAY: elements */
    size_t bytes;      /* FV_ARRAY: bytes of all elements together */
    long long i;       /* FV_INT */
    const char *str;   /* FV_STRING: the NUL-terminated copy */
    const char **list; /* FV_ARRAY: the copies, in order */
} fast_val;

/* The keys the checks look at. `filter` is not among them: the fast path
 * gives up on it (it is an object, and its values need canonical JSON). */
enum { FK_ID, FK_USER, FK_OP, FK_ITEM, FK_QTY, FK_ORDER, FK_ROOM, FK_PREFS,
       FK_MEMBERS, FK_CAPACITY, FK_COUNT, FK_FILTER = -2, FK_OTHER = -1 };

static int fast_key(const char *k, size_t n)
{
#define FAST_KEY(name, id) if (n == sizeof name - 1 && !memcmp(k, name, n)) return id
    switch (n) {
    case 2: FAST_KEY("id", FK_ID); FAST_KEY("op", FK_OP); break;
    case 3: FAST_KEY("qty", FK_QTY); break;
    case 4: FAST_KEY("user", FK_USER); FAST_KEY("item", FK_ITEM); FAST_KEY("room", FK_ROOM); break;
    case 5: FAST_KEY("order", FK_ORDER); FAST_KEY("prefs", FK_PREFS); break;
    case 6: FAST_KEY("filter", FK_FILTER); break;
    case 7: FAST_KEY("members", FK_MEMBERS); break;
    case 8: FAST_KEY("capacity", FK_CAPACITY); break;
    }
#undef FAST_KEY
    return FK_OTHER;
}

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
 * it here too). */
static const char *fast_literal(const char *p, const char *end, int *kind)
{
    size_t left = (size_t)(end - p);
    if (left >= 4 && !memcmp(p, "true", 4)) { *kind = FV_TRUE; return p + 4; }
    if (left >= 5 && !memcmp(p, "false", 5)) { *kind = FV_FALSE; return p + 5; }
    if (left >= 4 && !memcmp(p, "null", 4)) { *kind = FV_NULL; return p + 4; }
    return NULL;
}

/* An array of fast strings at p (on '['): [] or ["a", "b"]. Counts the
 * elements and their bytes; gives up beyond REQUEST_MAX_LIST (an error the
 * jansson path words) or on any element that is not a fast string. */
static const char *fast_array(const char *p, const char *end, fast_val *v)
{
    p = fast_ws(p + 1, end);
    v->s = p;
    v->len = v->bytes = 0;
    if (p < end && *p == ']') return p + 1;
    for (;;) {
        const char *s;
        size_t n;
        if (p >= end || *p != '"' || !(p = fast_string(p, end, &s, &n))) return NULL;
        if (++v->len > REQUEST_MAX_LIST) return NULL;
        v->bytes += n;
        p = fast_ws(p, end);
        if (p >= end) return NULL;
        if (*p == ']') return p + 1;
        if (*p != ',') return NULL;
        p = fast_ws(p + 1, end);
    }
}

/* Reads the whole document into vals[] (kinds and spans); 0, or -1 to give
 * up. Writes nothing but vals. */
static int fast_scan(const char *raw, size_t len, fast_val *vals)
{
    const char *p = raw, *end = raw + len;
    unsigned seen = 0;
    p = fast_ws(p, end);
    if (p >= end || *p != '{') return -1;
    p = fast_ws(p + 1, end);
    if (p < end && *p == '}') {
        p++;
    } else {
        for (;;) {
            const char *k;
            size_t kn;
            if (p >= end || *p != '"' || !(p = fast_string(p, end, &k, &kn))) return -1;
            p = fast_ws(p, end);
            if (p >= end || *p != ':') return -1;
            p = fast_ws(p + 1, end);
            if (p >= end) return -1;
            fast_val v = { 0 };
            char c = *p;
            if (c == '"') {
                v.kind = FV_STRING;
                p = fast_string(p, end, &v.s, &v.len);
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                v.kind = FV_INT;
                p = fast_int(p, end, &v.i);
            } else if (c == '[') {
                v.kind = FV_ARRAY;
                p = fast_array(p, end, &v);
            } else {
                p = fast_literal(p, end, &v.kind);
            }
            if (!p) return -1;
            int key = fast_key(k, kn);
            if (key == FK_FILTER) return -1;
            if (key >= 0) {
                if (seen & (1u << key)) return -1; /* repeated: jansson keeps the last */
                seen |= 1u << key;
                vals[key] = v;
            }
            p = fast_ws(p, end);
            if (p >= end) return -1;
            if (*p == '}') { p++; break; }
            if (*p != ',') return -1;
            p = fast_ws(p + 1, end);
        }
    }
    return fast_ws(p, end) == end ? 0 : -1; /* jansson: "end of file expected" */
}

/* Copies the strings the checks may keep into the inline buffer (or one
 * malloc): list pointers first (aligned), then the bytes. 0, or -1 when
 * malloc fails (the jansson path then has its turn). */
static int fast_store(request *q, fast_val *vals, const char *end, const char ***lists)
{
    size_t ptrs = 0, bytes = 0;
    for (int k = 0; k < FK_COUNT; k++) {
        if (vals[k].kind == FV_STRING) bytes += vals[k].len + 1;
        else if (vals[k].kind == FV_ARRAY) {
            ptrs += vals[k].len;
            bytes += vals[k].bytes + vals[k].len;
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
    *lists = lp;
    for (int k = 0; k < FK_COUNT; k++) {
        fast_val *v = &vals[k];
        if (v->kind == FV_STRING) {
            memcpy(sp, v->s, v->len);
            sp[v->len] = '\0';
            v->str = sp;
            sp += v->len + 1;
        } else if (v->kind == FV_ARRAY) {
            /* fast_array checked the shape: quoted strings without escapes,
             * so each element runs from one quote to the next. */
            const char *p = v->s;
            v->list = lp;
            for (size_t i = 0; i < v->len; i++) {
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

/* The contract checks again, on fast_val: the same order, messages and
 * fields set on failure as request_validate() (the differential test fails
 * when they are not). Strings here are printable ASCII by construction,
 * but valid_id()/valid_name() still decide. */
static const char *fast_name_field(request *q, const fast_val *v, const char *key)
{
    if (v->kind == FV_ABSENT) { set_error(q, REQUEST_INVALID, "missing field '%s'", key); return NULL; }
    if (v->kind != FV_STRING) { set_error(q, REQUEST_INVALID, "'%s' must be a string", key); return NULL; }
    if (!valid_name(v->str)) {
        set_error(q, REQUEST_INVALID, "'%s' must be 1 to %d characters without control characters",
                  key, ENGINE_ID_MAX);
        return NULL;
    }
    return v->str;
}

static int fast_int_field(request *q, const fast_val *v, const char *key, long long dflt,
                          long long lo, long long hi, int64_t *out)
{
    if (v->kind == FV_ABSENT) { *out = dflt; return 0; }
    if (v->kind != FV_INT) {
        set_error(q, REQUEST_INVALID, "'%s' must be an integer", key);
        return -1;
    }
    if (v->i < lo || v->i > hi) {
        set_error(q, REQUEST_INVALID, "'%s' must be between %lld and %lld", key, lo, hi);
        return -1;
    }
    *out = v->i;
    return 0;
}

static int fast_order_field(request *q, const fast_val *v)
{
    if (v->kind == FV_ABSENT) { set_error(q, REQUEST_INVALID, "missing field 'order'"); return -1; }
    if (v->kind == FV_INT && v->i > 0) {
        q->r.order = (uint64_t)v->i;
        return 0;
    }
    return order_digits(q, v->kind == FV_STRING ? v->str : NULL);
}

/* Unlike list_field() this does not copy pointers: fast_store() already
 * laid the elements out as the list. Returns the count or -1. */
static long fast_list_field(request *q, const fast_val *v, const char *key, int required)
{
    if (v->kind == FV_ABSENT) {
        if (required) { set_error(q, REQUEST_INVALID, "missing field '%s'", key); return -1; }
        return 0;
    }
    if (v->kind != FV_ARRAY) { set_error(q, REQUEST_INVALID, "'%s' must be an array of strings", key); return -1; }
    /* more than REQUEST_MAX_LIST entries: fast_array() gave up already */
    for (size_t i = 0; i < v->len; i++) {
        if (!valid_name(v->list[i])) {
            set_error(q, REQUEST_INVALID, "'%s'[%zu] must be a string of 1 to %d characters",
                      key, i, ENGINE_ID_MAX);
            return -1;
        }
    }
    return (long)v->len;
}

static int fast_prefs_members(request *q, const fast_val *vals, const char **lists, int group)
{
    long np = fast_list_field(q, &vals[FK_PREFS], "prefs", 0);
    if (np < 0) return -1;
    /* Like q->lists on the jansson path: never NULL once prefs are read. */
    q->r.prefs = np ? vals[FK_PREFS].list : lists;
    q->r.n_prefs = (size_t)np;
    /* no filter here: fast_scan() gave up on it */
    if (!group) {
        if (np == 0) {
            set_error(q, REQUEST_INVALID, "'auto' needs 'prefs' or 'filter'");
            return -1;
        }
        return 0;
    }
    long nm = fast_list_field(q, &vals[FK_MEMBERS], "members", 1);
    if (nm < 0) return -1;
    q->r.members = nm ? vals[FK_MEMBERS].list : lists;
    q->r.n_members = (size_t)nm;
    return check_members(q);
}

static int fast_user_op(request *q, const fast_val *vals, const char **lists)
{
    engine_request *r = &q->r;
    if (!(r->user = fast_name_field(q, &vals[FK_USER], "user"))) return -1;
    switch (r->op) {
    case OP_BUY:
        if (!(r->item = fast_name_field(q, &vals[FK_ITEM], "item"))) return -1;
        return fast_int_field(q, &vals[FK_QTY], "qty", 1, 1, QTY_MAX, &r->qty);
    case OP_CONFIRM:
    case OP_CANCEL:
        return fast_order_field(q, &vals[FK_ORDER]);
    case OP_CHOOSE:
    case OP_SWITCH:
        return (r->item = fast_name_field(q, &vals[FK_ROOM], "room")) ? 0 : -1;
    case OP_AUTO:
        return fast_prefs_members(q, vals, lists, 0);
    case OP_GROUP:
        return fast_prefs_members(q, vals, lists, 1);
    case OP_RELEASE:
        return 0;
    default:
        set_error(q, REQUEST_INVALID, "op '%s' is an admin command: push it to the ctl list", q->op_name);
        return -1;
    }
}

static int fast_admin_op(request *q, const fast_val *vals)
{
    engine_request *r = &q->r;
    switch (r->op) {
    case OP_PAUSE:
    case OP_RESUME:
    case OP_CLOSE:
        return 0;
    case OP_SET_CAPACITY:
        if (!(r->item = fast_name_field(q, &vals[FK_ITEM], "item"))) return -1;
        if (vals[FK_CAPACITY].kind == FV_ABSENT) {
            set_error(q, REQUEST_INVALID, "missing field 'capacity'");
            return -1;
        }
        return fast_int_field(q, &vals[FK_CAPACITY], "capacity", 0, 0, CAPACITY_MAX, &r->qty);
    default:
        set_error(q, REQUEST_INVALID, "op '%s' is not an admin command (pause, resume, close, set_capacity)",
                  q->op_name);
        return -1;
    }
}

/* The fast path: 0 when it parsed (any outcome), -1 when it gave up, with q
 * untouched (still as zero_request() left it). The tail mirrors
 * request_validate(). */
static int fast_parse(request *q, const char *raw, size_t len, int admin)
{
    fast_val vals[FK_COUNT];
    memset(vals, 0, sizeof vals);
    if (fast_scan(raw, len, vals) < 0) return -1;
    const char **lists;
    if (fast_store(q, vals, raw + len, &lists) < 0) return -1;
    /* From here on the fast path owns the request: no more giving up. */
    if (vals[FK_ID].kind != FV_STRING) { set_error(q, REQUEST_DEAD, "missing or non-string 'id'"); return 0; }
    q->r.id = vals[FK_ID].str;
    if (vals[FK_USER].kind == FV_STRING && valid_name(vals[FK_USER].str)) q->r.user = vals[FK_USER].str;
    if (!valid_id(q->r.id)) {
        set_error(q, REQUEST_INVALID, "'id' must be 1 to %d printable ASCII characters", ENGINE_ID_MAX);
        return 0;
    }
    /* no overflow to report: fast_int() never reads a number that could */
    if (vals[FK_OP].kind != FV_STRING) { set_error(q, REQUEST_INVALID, "missing or non-string 'op'"); return 0; }
    q->op_name = vals[FK_OP].str;
    q->r.op = engine_op_parse(q->op_name);
    if (q->r.op == OP_NONE) {
        set_error(q, REQUEST_INVALID, "unknown op '%.40s'", q->op_name);
        return 0;
    }
    int rc = admin ? fast_admin_op(q, vals) : fast_user_op(q, vals, lists);
    if (rc == 0) q->outcome = REQUEST_OK;
    return 0;
}
