/* archive_log.c -- see archive_log.h. */
#include "allocctl/archive_log.h"

#include <stdio.h>

const char *archive_log_entry_id(const redisReply *e)
{
    if (!e || e->type != REDIS_REPLY_ARRAY || e->elements != 2) return NULL;
    const redisReply *id = e->element[0];
    return id->type == REDIS_REPLY_STRING ? id->str : NULL;
}

int archive_log_entry_decode(const redisReply *e, json_t *rows)
{
    const char *id = archive_log_entry_id(e);
    if (!id) return -1;
    const redisReply *f = e->element[1];
    if (f->type == REDIS_REPLY_NIL) return 0;
    if (f->type != REDIS_REPLY_ARRAY) return -1;
    json_t *fields = json_object();
    if (!fields) return -1;
    for (size_t j = 0; j + 1 < f->elements; j += 2) {
        const redisReply *k = f->element[j], *v = f->element[j + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        /* the daemon writes UTF-8 (its input passed a JSON parser); a value
         * that is not is marked rather than dropped */
        json_t *jv = json_stringn(v->str, v->len);
        if (!jv) jv = json_string("(not utf-8)");
        char key[256];
        int kn = snprintf(key, sizeof key, "%.*s", (int)k->len, k->str);
        if (kn <= 0 || json_object_set_new(fields, key, jv) < 0) {
            json_decref(fields);
            return -1;
        }
    }
    /* "o" hands fields over, also on failure */
    json_t *row = json_pack("{s:s, s:i, s:o}", "id", id, "i", 0, "f", fields);
    if (!row || json_array_append_new(rows, row) < 0) return -1;
    return 1;
}

void archive_progress_key(char *out, size_t len, const char *prefix, const char *batch)
{
    snprintf(out, len, "%s:{%s}:archive", prefix, batch);
}
