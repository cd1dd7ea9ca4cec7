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

/* A text column from a field: NULL when absent (or empty and empty_null). */
static void col_text(archive_buf *b, const log_field *v, int empty_null)
{
    archive_copy_text(b, v ? v->val : NULL, v ? v->vlen : 0, empty_null);
}

static void col_int(archive_buf *b, const log_field *v)
{
    archive_copy_int_text(b, v ? v->val : NULL, v ? v->vlen : 0);
}

static void col_time(archive_buf *b, const log_field *v)
{
    archive_copy_time_text(b, v ? v->val : NULL, v ? v->vlen : 0);
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
    if (!*first) archive_buf_put(b, ",", 1);
    *first = 0;
    archive_copy_json_string(b, v->key, strlen(v->key));
    archive_buf_put(b, ":", 1);
    archive_copy_json_string(b, v->val, v->vlen);
}

static void col_fields(archive_buf *b, const log_field *f, size_t n)
{
    size_t start = archive_copy_jsonb_begin(b);
    int first = 1;
    archive_buf_put(b, "{", 1);
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
    archive_buf_put(b, "}", 1);
    archive_copy_jsonb_end(b, start);
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
    archive_buf_put(b, c->head, c->headlen);
    archive_copy_int4(b, c->i++);
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
    archive_copy_row(&h, EVENT_COLUMNS_N);
    archive_copy_text(&h, batch, blen, 0);
    archive_copy_text(&h, id, idlen, 0);
    archive_copy_int8(&h, strtoll(id, NULL, 10));
    archive_copy_int8(&h, dash ? strtoll(dash + 1, NULL, 10) : 0);
    assert(!h.failed && h.p == c.head);
    c.headlen = h.len;
    return entry_events(e, copy_row, &c);
}
