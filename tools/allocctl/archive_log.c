/* archive_log.c -- see archive_log.h. */
#include "allocctl/archive_log.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/log_entry.h"

/* room for batch, stream id and its two numbers as COPY text (a batch id
 * is at most 64 bytes, BATCH_ID_MAX; escaped, twice that) */
#define BATCH_HEAD_MAX 512

const char *archive_log_entry_id(const redisReply *e)
{
    if (!e || e->type != REDIS_REPLY_ARRAY || e->elements != 2) return NULL;
    const redisReply *id = e->element[0];
    return id->type == REDIS_REPLY_STRING ? id->str : NULL;
}

typedef struct rows_ctx {
    json_t *rows;
    const char *id;
    int i;
} rows_ctx;

/* One event (wire/log_entry.h) -> one row; every field kept as a string. */
static int add_row(void *ud, const log_field *f, size_t n)
{
    rows_ctx *c = ud;
    json_t *fields = json_object();
    if (!fields) return -2;
    for (size_t j = 0; j < n; j++) {
        /* the daemon writes UTF-8 (its input passed a JSON parser); a value
         * that is not is marked rather than dropped */
        json_t *jv = json_stringn(f[j].val, f[j].vlen);
        if (!jv) jv = json_string("(not utf-8)");
        if (json_object_set_new(fields, f[j].key, jv) < 0) { json_decref(fields); return -2; }
    }
    /* "o" hands fields over, also on failure */
    json_t *row = json_pack("{s:s, s:i, s:o}", "id", c->id, "i", c->i++, "f", fields);
    if (!row || json_array_append_new(c->rows, row) < 0) return -2;
    return 0;
}

/* Calls fn for every event of the entry (wire/log_entry.h decodes both
 * formats); the number of events, 0 for an entry whose fields are gone, or
 * -1 for a reply that is not an entry, a malformed chunk entry, or without
 * memory. */
static int entry_events(const redisReply *e, log_event_fn fn, void *ud)
{
    if (!archive_log_entry_id(e)) return -1;
    const redisReply *f = e->element[1];
    if (f->type == REDIS_REPLY_NIL) return 0;
    if (f->type != REDIS_REPLY_ARRAY) return -1;
    size_t n = 0;
    log_field *fields = calloc(f->elements / 2 + 1, sizeof *fields);
    char (*keys)[256] = calloc(f->elements / 2 + 1, sizeof *keys);
    if (!fields || !keys) { free(fields); free(keys); return -1; }
    for (size_t j = 0; j + 1 < f->elements; j += 2) {
        const redisReply *k = f->element[j], *v = f->element[j + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        snprintf(keys[n], sizeof keys[n], "%.*s", (int)k->len, k->str);
        fields[n] = (log_field){ keys[n], v->str, v->len };
        n++;
    }
    char err[160];
    int rc = log_entry_decode(fields, n, fn, ud, err, sizeof err);
    free(fields);
    free(keys);
    return rc < 0 ? -1 : rc;
}

int archive_log_entry_decode(const redisReply *e, json_t *rows)
{
    rows_ctx c = { rows, archive_log_entry_id(e), 0 };
    return entry_events(e, add_row, &c) < 0 ? -1 : c.i;
}

void archive_progress_key(char *out, size_t len, const char *prefix, const char *batch)
{
    snprintf(out, len, "%s:{%s}:archive", prefix, batch);
}

/* ------------------------------------------------------ COPY text rows -- */

static void buf_grow(archive_buf *b, size_t more)
{
    if (b->failed || b->len + more <= b->cap) return;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + more) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->failed = 1; return; }
    b->p = p;
    b->cap = cap;
}

static inline void buf_put(archive_buf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        buf_grow(b, n);
        if (b->failed) return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

/* What a byte asks of the encoders: COPY text escapes a backslash, tab,
 * newline or carriage return; a JSON string escapes '"', '\\' and control
 * bytes; NUL and bytes >= 0x80 need the UTF-8 check. A value none of
 * whose bytes asks anything (almost every value) is copied as it is. */
enum { K_COPY = 1, K_JSON = 2, K_UTF = 4 };

static unsigned kind_of(unsigned char c)
{
    if (c == 0 || c >= 0x80) return K_UTF;
    unsigned k = c < 0x20 || c == '"' || c == '\\' ? K_JSON : 0;
    return k | (c == '\\' || c == '\t' || c == '\n' || c == '\r' ? K_COPY : 0);
}

static unsigned kinds(const char *s, size_t n)
{
    unsigned k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') k |= kind_of(c);
    }
    return k;
}

/* COPY's text format: a backslash, tab, newline or carriage return in a
 * value is escaped; nothing else is special. */
static void buf_copy_text(archive_buf *b, const char *s, size_t n)
{
    buf_grow(b, 2 * n);
    if (b->failed) return;
    char *o = b->p + b->len;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\' || c == '\t' || c == '\n' || c == '\r') {
            *o++ = '\\';
            c = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
        }
        *o++ = c;
    }
    b->len = (size_t)(o - b->p);
}

/* A JSON string of s (quotes and escapes), as COPY text. */
static void buf_json_string(archive_buf *b, const char *s, size_t n)
{
    char tmp[8];
    buf_put(b, "\"", 1);
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        buf_copy_text(b, s + from, i - from);
        if (c == '"') buf_put(b, "\\\\\"", 3);
        else if (c == '\\') buf_put(b, "\\\\\\\\", 4);
        else {
            snprintf(tmp, sizeof tmp, "\\\\u%04x", c);
            buf_put(b, tmp, 7);
        }
        from = i + 1;
    }
    buf_copy_text(b, s + from, n - from);
    buf_put(b, "\"", 1);
}

/* Well-formed UTF-8 without NUL (what PostgreSQL's text and jsonb take). */
static int is_text(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
        if (!c || k == 9 || (k && i + k >= n)) return 0;
        if (k == 1 && c < 0xc2) return 0;
        for (size_t j = 1; j <= k; j++)
            if ((u[i + j] & 0xc0) != 0x80) return 0;
        uint32_t cp = k == 0 ? c : k == 1 ? c & 0x1f : k == 2 ? c & 0x0f : c & 0x07;
        for (size_t j = 1; j <= k; j++) cp = cp << 6 | (u[i + j] & 0x3f);
        if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* A text column: \N when absent (or empty and empty_null). */
static void col_text(archive_buf *b, const log_field *v, int empty_null)
{
    buf_put(b, "\t", 1);
    unsigned k = v ? kinds(v->val, v->vlen) : 0;
    if (!v || (empty_null && !v->vlen)) buf_put(b, "\\N", 2);
    else if (!k) buf_put(b, v->val, v->vlen);
    else if ((k & K_UTF) && !is_text(v->val, v->vlen)) buf_put(b, "(not utf-8)", 11);
    else buf_copy_text(b, v->val, v->vlen);
}

/* The integer value of v when col_int takes it; 0 when it does not. */
static int int_of(const log_field *v, long long *out)
{
    size_t i = v && v->vlen && v->val[0] == '-' ? 1 : 0, digits = 0;
    while (v && i < v->vlen && v->val[i] >= '0' && v->val[i] <= '9') { i++; digits++; }
    if (!v || i != v->vlen || digits < 1 || digits > 18) return 0;
    *out = strtoll(v->val, NULL, 10);
    return 1;
}

/* An integer column: the value when it is an integer of at most 18 digits
 * (a hand-written or future entry must not make the chunk fail), else \N. */
static void col_int(archive_buf *b, const log_field *v)
{
    long long x;
    buf_put(b, "\t", 1);
    if (int_of(v, &x)) buf_put(b, v->val, v->vlen);
    else buf_put(b, "\\N", 2);
}

/* n as decimal digits, zero-padded to width. */
static char *put_digits(char *o, long long n, int width)
{
    char tmp[24];
    int k = 0;
    if (n < 0) {
        *o++ = '-';
        n = n == LLONG_MIN ? LLONG_MAX : -n;   /* an id part strtoll clamped */
    }
    do { tmp[k++] = (char)('0' + n % 10); n /= 10; } while (n);
    while (k < width) tmp[k++] = '0';
    while (k) *o++ = tmp[--k];
    return o;
}

/* A timestamptz column: the milliseconds since the epoch of v as UTC, or
 * \N when v is not an integer or falls outside the years 1 - 9999. The
 * civil date from the day number is Howard Hinnant's days-to-civil (the
 * proleptic Gregorian calendar, as PostgreSQL's), without gmtime and
 * snprintf: this runs once per archived event. */
static void col_time(archive_buf *b, const log_field *v)
{
    long long ms;
    buf_put(b, "\t", 1);
    if (!int_of(v, &ms) || ms < -62135596800000LL || ms > 253402300799999LL) {
        buf_put(b, "\\N", 2);
        return;
    }
    long long sec = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    long long days = sec >= 0 ? sec / 86400 : -((-sec + 86399) / 86400), sod = sec - days * 86400;
    long long z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    long long doe = z - era * 146097, yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    long long y = yoe + era * 400 + (m <= 2);
    char out[48], *o = out;
    o = put_digits(o, y, 4);
    *o++ = '-';
    o = put_digits(o, m, 2);
    *o++ = '-';
    o = put_digits(o, d, 2);
    *o++ = ' ';
    o = put_digits(o, sod / 3600, 2);
    *o++ = ':';
    o = put_digits(o, sod / 60 % 60, 2);
    *o++ = ':';
    o = put_digits(o, sod % 60, 2);
    *o++ = '.';
    o = put_digits(o, ms - sec * 1000, 3);
    memcpy(o, "+00", 3);
    buf_put(b, out, (size_t)(o + 3 - out));
}

typedef struct copy_ctx {
    archive_buf *out;
    char head[BATCH_HEAD_MAX];   /* batch, stream_id, id_ms, id_seq, as COPY text with tabs */
    size_t headlen;
    int i;
} copy_ctx;

/* The columns of the alloc_events row taken from known fields. */
enum { F_TYPE, F_USER, F_ITEM, F_QTY, F_ORDER, F_REQ, F_AT, F_EXPIRES, F_STATE, F_KNOWN };
static const char *const known_keys[F_KNOWN] = {
    "type", "user", "item", "qty", "order", "req", "at", "expires_at", "state"
};

/* A key or value as a JSON string in the fields column. */
static void col_json_string(archive_buf *b, const char *s, size_t n)
{
    unsigned k = kinds(s, n);
    if (!k) {
        buf_grow(b, n + 2);
        if (b->failed) return;
        b->p[b->len] = '"';
        memcpy(b->p + b->len + 1, s, n);
        b->p[b->len + 1 + n] = '"';
        b->len += n + 2;
    } else if ((k & K_UTF) && !is_text(s, n)) buf_put(b, "\"(not utf-8)\"", 13);
    else buf_json_string(b, s, n);
}

/* One event -> one line of the staging table (archive_pg.c's STAGE). */
static int copy_row(void *ud, const log_field *f, size_t n)
{
    copy_ctx *c = ud;
    archive_buf *b = c->out;
    const log_field *known[F_KNOWN] = { NULL };
    for (size_t j = 0; j < n; j++)
        for (int k = 0; k < F_KNOWN; k++)
            if (f[j].key[0] == known_keys[k][0] && !strcmp(f[j].key, known_keys[k])) {
                known[k] = &f[j];     /* the last one, as in the JSON */
                break;
            }
    char idx[16], *o = idx;
    *o++ = '\t';
    o = put_digits(o, c->i++, 1);
    buf_put(b, c->head, c->headlen);
    buf_put(b, idx, (size_t)(o - idx));
    if (known[F_TYPE]) col_text(b, known[F_TYPE], 0);
    else buf_put(b, "\t", 1);                            /* type is NOT NULL: "" */
    col_text(b, known[F_USER], 1);
    col_text(b, known[F_ITEM], 1);
    col_int(b, known[F_QTY]);
    col_text(b, known[F_ORDER], 1);
    col_text(b, known[F_REQ], 1);
    col_int(b, known[F_AT]);
    col_time(b, known[F_AT]);
    col_int(b, known[F_EXPIRES]);
    col_text(b, known[F_STATE], 1);
    buf_put(b, "\t{", 2);
    for (size_t j = 0, first = 1; j < n; j++) {
        size_t later = j + 1;                            /* a repeated key: the last one */
        while (later < n && (f[later].key[0] != f[j].key[0] || strcmp(f[later].key, f[j].key))) later++;
        if (later < n) continue;
        if (!first) buf_put(b, ",", 1);
        first = 0;
        col_json_string(b, f[j].key, strlen(f[j].key));
        buf_put(b, ":", 1);
        col_json_string(b, f[j].val, f[j].vlen);
    }
    buf_put(b, "}\n", 2);
    return b->failed ? -2 : 0;
}

int archive_log_entry_copy(const redisReply *e, const char *batch, archive_buf *out)
{
    const char *id = archive_log_entry_id(e);
    size_t idlen = id ? strlen(id) : 0, blen = strlen(batch);
    if (!id || strspn(id, "0123456789-") != idlen || 2 * blen + idlen + 48 > BATCH_HEAD_MAX) return -1;
    copy_ctx c = { out, "", 0, 0 };
    /* the columns every event of the entry shares, once per entry (the
     * bound above leaves room for every byte of batch escaped) */
    char *o = c.head;
    for (size_t i = 0; i < blen; i++) {
        char ch = batch[i];
        if (ch == '\\' || ch == '\t' || ch == '\n' || ch == '\r') {
            *o++ = '\\';
            ch = ch == '\t' ? 't' : ch == '\n' ? 'n' : ch == '\r' ? 'r' : '\\';
        }
        *o++ = ch;
    }
    *o++ = '\t';
    memcpy(o, id, idlen);
    o += idlen;
    const char *dash = memchr(id, '-', idlen);
    *o++ = '\t';
    o = put_digits(o, strtoll(id, NULL, 10), 1);
    *o++ = '\t';
    o = put_digits(o, dash ? strtoll(dash + 1, NULL, 10) : 0, 1);
    c.headlen = (size_t)(o - c.head);
    return entry_events(e, copy_row, &c);
}

void archive_buf_free(archive_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
