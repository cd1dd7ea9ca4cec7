/* archive_log.c -- see archive_log.h. */
#include "allocctl/archive_log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/log_entry.h"

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

static void buf_put(archive_buf *b, const char *s, size_t n)
{
    buf_grow(b, n);
    if (b->failed) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
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

/* The value of field key, or NULL. */
static const log_field *field(const log_field *f, size_t n, const char *key)
{
    const log_field *found = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(f[i].key, key)) found = &f[i];     /* the last one, as in the JSON */
    return found;
}

/* A text column: \N when absent (or empty and empty_null). */
static void col_text(archive_buf *b, const log_field *v, int empty_null)
{
    buf_put(b, "\t", 1);
    if (!v || (empty_null && !v->vlen)) buf_put(b, "\\N", 2);
    else if (!is_text(v->val, v->vlen)) buf_put(b, "(not utf-8)", 11);
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

/* A timestamptz column: the milliseconds since the epoch of v as UTC, or
 * \N when v is not an integer or falls outside the years 1 - 9999. */
static void col_time(archive_buf *b, const log_field *v)
{
    long long ms;
    struct tm tm;
    char out[48];
    buf_put(b, "\t", 1);
    if (!int_of(v, &ms) || ms < -62135596800000LL || ms > 253402300799999LL) {
        buf_put(b, "\\N", 2);
        return;
    }
    long long sec = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    time_t t = (time_t)sec;
    if (!gmtime_r(&t, &tm)) { buf_put(b, "\\N", 2); return; }
    int n = snprintf(out, sizeof out, "%04d-%02d-%02d %02d:%02d:%02d.%03lld+00", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms - sec * 1000);
    buf_put(b, out, (size_t)n);
}

typedef struct copy_ctx {
    archive_buf *out;
    const char *batch, *id;
    size_t idlen;
    int i;
} copy_ctx;

/* One event -> one line of the staging table (archive_pg.c's STAGE). */
static int copy_row(void *ud, const log_field *f, size_t n)
{
    copy_ctx *c = ud;
    archive_buf *b = c->out;
    char head[64];
    const char *dash = memchr(c->id, '-', c->idlen);
    buf_copy_text(b, c->batch, strlen(c->batch));
    buf_put(b, "\t", 1);
    buf_put(b, c->id, c->idlen);
    int hl = snprintf(head, sizeof head, "\t%lld\t%lld\t%d", strtoll(c->id, NULL, 10),
                      dash ? strtoll(dash + 1, NULL, 10) : 0LL, c->i++);
    buf_put(b, head, (size_t)hl);
    const log_field *type = field(f, n, "type");
    if (type) col_text(b, type, 0);
    else buf_put(b, "\t", 1);                            /* type is NOT NULL: "" */
    col_text(b, field(f, n, "user"), 1);
    col_text(b, field(f, n, "item"), 1);
    col_int(b, field(f, n, "qty"));
    col_text(b, field(f, n, "order"), 1);
    col_text(b, field(f, n, "req"), 1);
    col_int(b, field(f, n, "at"));
    col_time(b, field(f, n, "at"));
    col_int(b, field(f, n, "expires_at"));
    col_text(b, field(f, n, "state"), 1);
    buf_put(b, "\t{", 2);
    for (size_t j = 0, first = 1; j < n; j++) {
        if (field(f, n, f[j].key) != &f[j]) continue;    /* a repeated key: the last one */
        if (!first) buf_put(b, ",", 1);
        first = 0;
        size_t klen = strlen(f[j].key);
        if (is_text(f[j].key, klen)) buf_json_string(b, f[j].key, klen);
        else buf_put(b, "\"(not utf-8)\"", 13);
        buf_put(b, ":", 1);
        if (is_text(f[j].val, f[j].vlen)) buf_json_string(b, f[j].val, f[j].vlen);
        else buf_put(b, "\"(not utf-8)\"", 13);
    }
    buf_put(b, "}\n", 2);
    return b->failed ? -2 : 0;
}

int archive_log_entry_copy(const redisReply *e, const char *batch, archive_buf *out)
{
    const char *id = archive_log_entry_id(e);
    if (!id || strspn(id, "0123456789-") != strlen(id)) return -1;
    copy_ctx c = { out, batch, id, strlen(id), 0 };
    return entry_events(e, copy_row, &c);
}

void archive_buf_free(archive_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
