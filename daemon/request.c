/* request.c -- parse and validate one request or admin command (see request.h).
 *
 * The checks follow the order a producer would debug them in: size, JSON,
 * object, id; then op; then the op's own fields. The first problem found is
 * the one reported, so `detail` always names one concrete thing to fix.
 */
#include "request.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

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

/* Fetches a required name field; on failure sets an invalid detail. */
static const char *name_field(request *q, json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!v) { set_error(q, REQUEST_INVALID, "missing field '%s'", key); return NULL; }
    if (!json_is_string(v)) { set_error(q, REQUEST_INVALID, "'%s' must be a string", key); return NULL; }
    const char *s = json_string_value(v);
    if (!valid_name(s)) {
        set_error(q, REQUEST_INVALID, "'%s' must be 1 to %d characters without control characters",
                  key, ENGINE_ID_MAX);
        return NULL;
    }
    return s;
}

/* Optional integer in [lo, hi]; returns 0 and *out (dflt when absent) or -1. */
static int int_field(request *q, json_t *obj, const char *key, long long dflt,
                     long long lo, long long hi, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v) { *out = dflt; return 0; }
    if (!json_is_integer(v)) {
        set_error(q, REQUEST_INVALID, "'%s' must be an integer", key);
        return -1;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        set_error(q, REQUEST_INVALID, "'%s' must be between %lld and %lld", key, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* An order id: a string of 1 to 20 decimal digits, or a positive integer. */
static int order_field(request *q, json_t *obj)
{
    json_t *v = json_object_get(obj, "order");
    if (!v) { set_error(q, REQUEST_INVALID, "missing field 'order'"); return -1; }
    if (json_is_integer(v) && json_integer_value(v) > 0) {
        q->r.order = (uint64_t)json_integer_value(v);
        return 0;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
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

/* A JSON array of names into q->lists[at..]; returns the count or -1. */
static long list_field(request *q, json_t *obj, const char *key, size_t at, int required)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required) { set_error(q, REQUEST_INVALID, "missing field '%s'", key); return -1; }
        return 0;
    }
    if (!json_is_array(v)) { set_error(q, REQUEST_INVALID, "'%s' must be an array of strings", key); return -1; }
    size_t n = json_array_size(v);
    if (n > REQUEST_MAX_LIST) {
        set_error(q, REQUEST_INVALID, "'%s' has %zu entries, at most %d are allowed", key, n, REQUEST_MAX_LIST);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || !valid_name(json_string_value(e))) {
            set_error(q, REQUEST_INVALID, "'%s'[%zu] must be a string of 1 to %d characters",
                      key, i, ENGINE_ID_MAX);
            return -1;
        }
        q->lists[at + i] = json_string_value(e);
    }
    return (long)n;
}

char *request_canonical_json(const void *json_value)
{
    return json_dumps((const json_t *)json_value,
                      JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

static int filter_field(request *q, json_t *obj)
{
    json_t *f = json_object_get(obj, "filter");
    if (!f) return 0;
    if (!json_is_object(f)) { set_error(q, REQUEST_INVALID, "'filter' must be an object"); return -1; }
    size_t n = json_object_size(f);
    if (n > REQUEST_MAX_LIST) { set_error(q, REQUEST_INVALID, "'filter' has too many keys"); return -1; }
    q->filter = calloc(n ? n : 1, sizeof *q->filter);
    q->filter_values = calloc(n ? n : 1, sizeof *q->filter_values);
    if (!q->filter || !q->filter_values) { set_error(q, REQUEST_INVALID, "out of memory"); return -1; }
    size_t i = 0;
    const char *key;
    json_t *val;
    json_object_foreach(f, key, val) {
        q->filter_values[i] = request_canonical_json(val);
        if (!q->filter_values[i]) { set_error(q, REQUEST_INVALID, "out of memory"); return -1; }
        q->n_filter_values = i + 1;
        q->filter[i].key = key;
        q->filter[i].value = q->filter_values[i];
        i++;
    }
    q->r.filter = q->filter;
    q->r.n_filter = n;
    q->r.has_filter = 1;
    return 0;
}

static int parse_prefs_members(request *q, json_t *obj, int group)
{
    json_t *p = json_object_get(obj, "prefs"), *m = json_object_get(obj, "members");
    size_t cap = (json_is_array(p) ? json_array_size(p) : 0) +
                 (json_is_array(m) ? json_array_size(m) : 0);
    q->lists = calloc(cap ? cap : 1, sizeof *q->lists);
    if (!q->lists) { set_error(q, REQUEST_INVALID, "out of memory"); return -1; }
    long np = list_field(q, obj, "prefs", 0, 0);
    if (np < 0) return -1;
    q->r.prefs = q->lists;
    q->r.n_prefs = (size_t)np;
    if (filter_field(q, obj) < 0) return -1;
    if (!group) {
        if (np == 0 && !q->r.has_filter) {
            set_error(q, REQUEST_INVALID, "'auto' needs 'prefs' or 'filter'");
            return -1;
        }
        return 0;
    }
    long nm = list_field(q, obj, "members", (size_t)np, 1);
    if (nm < 0) return -1;
    q->r.members = q->lists + np;
    q->r.n_members = (size_t)nm;
    int has_user = 0;
    for (long i = 0; i < nm; i++) {
        if (strcmp(q->r.members[i], q->r.user) == 0) has_user = 1;
        for (long j = 0; j < i; j++)
            if (strcmp(q->r.members[i], q->r.members[j]) == 0) {
                set_error(q, REQUEST_INVALID, "'members' lists '%s' twice", q->r.members[i]);
                return -1;
            }
    }
    if (!has_user) { set_error(q, REQUEST_INVALID, "'members' must include 'user'"); return -1; }
    return 0;
}

static int parse_user_op(request *q, json_t *obj)
{
    engine_request *r = &q->r;
    if (!(r->user = name_field(q, obj, "user"))) return -1;
    switch (r->op) {
    case OP_BUY:
        if (!(r->item = name_field(q, obj, "item"))) return -1;
        return int_field(q, obj, "qty", 1, 1, QTY_MAX, &r->qty);
    case OP_CONFIRM:
    case OP_CANCEL:
        return order_field(q, obj);
    case OP_CHOOSE:
    case OP_SWITCH:
        return (r->item = name_field(q, obj, "room")) ? 0 : -1;
    case OP_AUTO:
        return parse_prefs_members(q, obj, 0);
    case OP_GROUP:
        return parse_prefs_members(q, obj, 1);
    case OP_RELEASE:
        return 0;
    default:
        set_error(q, REQUEST_INVALID, "op '%s' is an admin command: push it to the ctl list", q->op_name);
        return -1;
    }
}

static int parse_admin_op(request *q, json_t *obj)
{
    engine_request *r = &q->r;
    switch (r->op) {
    case OP_PAUSE:
    case OP_RESUME:
    case OP_CLOSE:
        return 0;
    case OP_SET_CAPACITY:
        if (!(r->item = name_field(q, obj, "item"))) return -1;
        if (!json_object_get(obj, "capacity")) {
            set_error(q, REQUEST_INVALID, "missing field 'capacity'");
            return -1;
        }
        return int_field(q, obj, "capacity", 0, 0, CAPACITY_MAX, &r->qty);
    default:
        set_error(q, REQUEST_INVALID, "op '%s' is not an admin command (pause, resume, close, set_capacity)",
                  q->op_name);
        return -1;
    }
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

static void describe_json_error(request *q, const json_error_t *e)
{
    set_error(q, REQUEST_DEAD, "invalid JSON at line %d column %d: %s", e->line, e->column, e->text);
}

void request_parse(request *q, const char *raw, size_t len, size_t max_bytes, int admin)
{
    memset(q, 0, sizeof *q);
    if (len > max_bytes) {
        set_error(q, REQUEST_DEAD, "request is %zu bytes, more than max_request_bytes (%zu)", len, max_bytes);
        return;
    }
    json_error_t jerr;
    int overflowed = 0;
    json_t *doc = parse_tolerating_overflow(raw, len, &jerr, &overflowed);
    if (!doc) { describe_json_error(q, &jerr); return; }
    q->doc = doc;
    if (!json_is_object(doc)) { set_error(q, REQUEST_DEAD, "request is not a JSON object"); return; }
    json_t *id = json_object_get(doc, "id");
    if (!json_is_string(id)) { set_error(q, REQUEST_DEAD, "missing or non-string 'id'"); return; }
    q->r.id = json_string_value(id);
    /* From here on the id is readable: every problem is an `invalid` result. */
    json_t *user = json_object_get(doc, "user");
    if (json_is_string(user) && valid_name(json_string_value(user))) q->r.user = json_string_value(user);
    if (!valid_id(q->r.id)) {
        set_error(q, REQUEST_INVALID, "'id' must be 1 to %d printable ASCII characters", ENGINE_ID_MAX);
        return;
    }
    if (overflowed) {
        set_error(q, REQUEST_INVALID, "a number is out of range (beyond a 64-bit integer or a double)");
        return;
    }
    json_t *op = json_object_get(doc, "op");
    if (!json_is_string(op)) { set_error(q, REQUEST_INVALID, "missing or non-string 'op'"); return; }
    q->op_name = json_string_value(op);
    q->r.op = engine_op_parse(q->op_name);
    if (q->r.op == OP_NONE) {
        set_error(q, REQUEST_INVALID, "unknown op '%.40s'", q->op_name);
        return;
    }
    int rc = admin ? parse_admin_op(q, doc) : parse_user_op(q, doc);
    if (rc == 0) q->outcome = REQUEST_OK;
}

void request_clear(request *q)
{
    for (size_t i = 0; i < q->n_filter_values; i++) free(q->filter_values[i]);
    free(q->filter_values);
    free(q->filter);
    free(q->lists);
    if (q->doc) json_decref((json_t *)q->doc);
    memset(q, 0, sizeof *q);
}
