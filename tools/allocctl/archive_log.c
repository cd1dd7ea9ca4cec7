/* archive_log.c -- see archive_log.h. */
#include "allocctl/archive_log.h"

#include <stdio.h>
#include <stdlib.h>

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

int archive_log_entry_decode(const redisReply *e, json_t *rows)
{
    const char *id = archive_log_entry_id(e);
    if (!id) return -1;
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
    rows_ctx c = { rows, id, 0 };
    char err[160];
    int rc = log_entry_decode(fields, n, add_row, &c, err, sizeof err);
    free(fields);
    free(keys);
    return rc < 0 ? -1 : c.i;
}

void archive_progress_key(char *out, size_t len, const char *prefix, const char *batch)
{
    snprintf(out, len, "%s:{%s}:archive", prefix, batch);
}
