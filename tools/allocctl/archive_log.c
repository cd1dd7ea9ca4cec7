/* archive_log.c -- see archive_log.h. */
#include "allocctl/archive_log.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/log_entry.h"

/* room for a row's start: its field count, batch, stream id and its two
 * numbers (a batch id is at most 64 bytes, BATCH_ID_MAX) */
#define BATCH_HEAD_MAX 512
/* alloc_events' columns but archived_at (archive_log.h) */
#define EVENT_COLUMNS_N 16

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

/* ---------------------------------------------------- COPY binary rows -- */

/* COPY's binary format rather than its text: PostgreSQL then parses no
 * integers and no times, only the JSON of `fields`, and a value is sent as
 * it is, without escapes. The copy is what limits the archive
 * (docs/ARCHIVE.md, Throughput; the figures in docs/PERFORMANCE.md). */

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

static inline void buf_put(archive_buf *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        buf_grow(b, n);
        if (b->failed) return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

/* Network byte order, as every integer of the format. */
static void buf_be(archive_buf *b, uint64_t v, int bytes)
{
    unsigned char o[8];
    for (int i = 0; i < bytes; i++) o[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    buf_put(b, o, (size_t)bytes);
}

/* A field's length word; -1 is NULL. */
static void field_len(archive_buf *b, int32_t n) { buf_be(b, (uint32_t)n, 4); }
static void field_null(archive_buf *b) { field_len(b, -1); }

static void field_int8(archive_buf *b, long long v)
{
    field_len(b, 8);
    buf_be(b, (uint64_t)v, 8);
}

/* The stream's header: signature, flags (no OIDs), no extension. */
static const char COPY_HEADER[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";

void archive_log_copy_begin(archive_buf *out)
{
    out->len = 0;
    buf_put(out, COPY_HEADER, sizeof COPY_HEADER);
}

void archive_log_copy_end(archive_buf *out)
{
    buf_be(out, 0xffff, 2);   /* the trailer: a field count of -1 */
}

/* A JSON string escapes '"', '\\' and control bytes; NUL and bytes >= 0x80
 * need the UTF-8 check. A value none of whose bytes asks anything (almost
 * every value) is copied as it is. */
enum { K_JSON = 1, K_UTF = 2 };

static unsigned kinds(const char *s, size_t n)
{
    unsigned k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0 || c >= 0x80) k |= K_UTF;
        else if (c < 0x20 || c == '"' || c == '\\') k |= K_JSON;
    }
    return k;
}

/* A JSON string of s, with its quotes and escapes. */
static void buf_json_string(archive_buf *b, const char *s, size_t n)
{
    char tmp[8];
    buf_put(b, "\"", 1);
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        buf_put(b, s + from, i - from);
        if (c == '"') buf_put(b, "\\\"", 2);
        else if (c == '\\') buf_put(b, "\\\\", 2);
        else {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            buf_put(b, tmp, 6);
        }
        from = i + 1;
    }
    buf_put(b, s + from, n - from);
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

/* A text column: NULL when absent (or empty and empty_null). */
static void col_text(archive_buf *b, const log_field *v, int empty_null)
{
    if (!v || (empty_null && !v->vlen)) { field_null(b); return; }
    if ((kinds(v->val, v->vlen) & K_UTF) && !is_text(v->val, v->vlen)) {
        field_len(b, 11);
        buf_put(b, "(not utf-8)", 11);
        return;
    }
    field_len(b, (int32_t)v->vlen);
    buf_put(b, v->val, v->vlen);
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
 * (a hand-written or future entry must not make the chunk fail), else NULL. */
static void col_int(archive_buf *b, const log_field *v)
{
    long long x;
    if (int_of(v, &x)) field_int8(b, x);
    else field_null(b);
}

/* A timestamptz column: the milliseconds since the epoch of v, or NULL when
 * v is not an integer or falls outside the years 1 - 9999. The format's
 * timestamptz is microseconds since 2000-01-01 00:00 UTC. */
#define PG_EPOCH_MS 946684800000LL
static void col_time(archive_buf *b, const log_field *v)
{
    long long ms;
    if (!int_of(v, &ms) || ms < -62135596800000LL || ms > 253402300799999LL) field_null(b);
    else field_int8(b, (ms - PG_EPOCH_MS) * 1000);
}

typedef struct copy_ctx {
    archive_buf *out;
    char head[BATCH_HEAD_MAX];   /* field count, batch, stream_id, id_ms, id_seq: every row's start */
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

/* Whether key a goes before key b in a jsonb object: shorter first, then
 * by bytes (PostgreSQL's lengthCompareJsonbPair). */
static int jsonb_key_before(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen) return alen < blen;
    return memcmp(a, b, alen) < 0;
}

/* Whether f[j] is the last field of its key (a repeated key is written
 * once, with its last value, as a JSON object keeps it). */
static int last_of_key(const log_field *f, size_t n, size_t j)
{
    for (size_t later = j + 1; later < n; later++)
        if (f[later].key[0] == f[j].key[0] && !strcmp(f[later].key, f[j].key)) return 0;
    return 1;
}

/* The fields column: jsonb's binary form is a version byte (1) and the
 * JSON text; its length word is written once the object is. The keys go
 * in the order jsonb keeps them, so that the server's sort of each object
 * finds it sorted; an entry of more than ORDER_MAX fields goes as it comes
 * and the server sorts it. */
enum { ORDER_MAX = 64 };

static void put_pair(archive_buf *b, const log_field *v, int *first)
{
    if (!*first) buf_put(b, ",", 1);
    *first = 0;
    col_json_string(b, v->key, strlen(v->key));
    buf_put(b, ":", 1);
    col_json_string(b, v->val, v->vlen);
}

static void col_fields(archive_buf *b, const log_field *f, size_t n)
{
    size_t start = b->len;
    int first = 1;
    buf_put(b, "\0\0\0\0\1{", 6);
    if (n > ORDER_MAX) {
        for (size_t j = 0; j < n; j++)
            if (last_of_key(f, n, j)) put_pair(b, &f[j], &first);
    } else {
        size_t order[ORDER_MAX], klen[ORDER_MAX], m = 0;
        for (size_t j = 0; j < n; j++) {             /* insertion: n is small */
            if (!last_of_key(f, n, j)) continue;
            size_t len = strlen(f[j].key), at = m++;
            for (; at > 0 && jsonb_key_before(f[j].key, len, f[order[at - 1]].key, klen[at - 1]); at--) {
                order[at] = order[at - 1];
                klen[at] = klen[at - 1];
            }
            order[at] = j;
            klen[at] = len;
        }
        for (size_t i = 0; i < m; i++) put_pair(b, &f[order[i]], &first);
    }
    buf_put(b, "}", 1);
    if (b->failed) return;
    uint32_t len = (uint32_t)(b->len - start - 4);
    for (int i = 0; i < 4; i++) b->p[start + (size_t)i] = (char)(len >> (8 * (3 - i)));
}

/* One event -> one row of alloc_events (or of the staging table). */
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
    buf_put(b, c->head, c->headlen);
    field_len(b, 4);
    buf_be(b, (uint32_t)c->i++, 4);
    static const log_field no_type = { "type", "", 0 };  /* type is NOT NULL: "" */
    col_text(b, known[F_TYPE] ? known[F_TYPE] : &no_type, 0);
    col_text(b, known[F_USER], 1);
    col_text(b, known[F_ITEM], 1);
    col_int(b, known[F_QTY]);
    col_text(b, known[F_ORDER], 1);
    col_text(b, known[F_REQ], 1);
    col_int(b, known[F_AT]);
    col_time(b, known[F_AT]);
    col_int(b, known[F_EXPIRES]);
    col_text(b, known[F_STATE], 1);
    col_fields(b, f, n);
    return b->failed ? -2 : 0;
}

int archive_log_entry_copy(const redisReply *e, const char *batch, archive_buf *out)
{
    const char *id = archive_log_entry_id(e);
    size_t idlen = id ? strlen(id) : 0, blen = strlen(batch);
    if (!id || strspn(id, "0123456789-") != idlen || blen + idlen + 40 > BATCH_HEAD_MAX) return -1;
    copy_ctx c = { out, "", 0, 0 };
    /* the columns every event of the entry shares, once per entry */
    archive_buf h = { c.head, 0, sizeof c.head, 0 };
    const char *dash = memchr(id, '-', idlen);
    buf_be(&h, EVENT_COLUMNS_N, 2);
    field_len(&h, (int32_t)blen);
    buf_put(&h, batch, blen);
    field_len(&h, (int32_t)idlen);
    buf_put(&h, id, idlen);
    field_int8(&h, strtoll(id, NULL, 10));
    field_int8(&h, dash ? strtoll(dash + 1, NULL, 10) : 0);
    assert(!h.failed && h.p == c.head);
    c.headlen = h.len;
    return entry_events(e, copy_row, &c);
}

void archive_buf_free(archive_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
