/* archive_results.c -- see archive_results.h. */
#include "allocctl/archive_results.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#define RESULT_COLUMNS_N 14

enum { AS_TEXT, AS_INT, AS_TIME };

static void col_as(archive_buf *b, const char *s, size_t n, int as)
{
    if (as == AS_INT) archive_copy_int_text(b, s, n);
    else if (as == AS_TIME) archive_copy_time_text(b, s, n);
    else archive_copy_text(b, s, n, 0);
}

/* The column of member key of the result o (NULL when o is not an object):
 * what `result->>'key'` gives (archive_results.h), as text, an integer or
 * a time. */
static void col_member(archive_buf *b, const json_t *o, const char *key, int as)
{
    const json_t *v = o ? json_object_get(o, key) : NULL;
    char digits[24];
    if (!v || json_is_null(v)) archive_copy_null(b);
    else if (json_is_string(v)) col_as(b, json_string_value(v), json_string_length(v), as);
    else if (json_is_integer(v)) {
        int n = snprintf(digits, sizeof digits, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        col_as(b, digits, (size_t)n, as);
    } else {
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text) { b->failed = 1; return; }
        col_as(b, text, strlen(text), as);
        free(text);
    }
}

/* The status as `->>` gives it, NULL when there is none. */
static const char *status_of(const json_t *o)
{
    const json_t *v = o ? json_object_get(o, "status") : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static void result_row(archive_buf *b, const char *batch, const redisReply *k, const redisReply *v,
                       const json_t *r)
{
    const json_t *o = json_is_object(r) ? r : NULL;
    const json_t *status = o ? json_object_get(o, "status") : NULL;
    archive_copy_row(b, RESULT_COLUMNS_N);
    archive_copy_text(b, batch, strlen(batch), 0);
    archive_copy_text(b, k->str, k->len, 0);
    col_member(b, o, "user", AS_TEXT);
    col_member(b, o, "op", AS_TEXT);
    if (!status || json_is_null(status)) archive_copy_text(b, "", 0, 0);   /* NOT NULL: "" */
    else col_member(b, o, "status", AS_TEXT);
    col_member(b, o, "reason", AS_TEXT);
    col_member(b, o, "item", AS_TEXT);
    col_member(b, o, "order", AS_TEXT);
    col_member(b, o, "qty", AS_INT);
    col_member(b, o, "seq", AS_INT);
    col_member(b, o, "rank", AS_INT);
    col_member(b, o, "at", AS_INT);
    col_member(b, o, "at", AS_TIME);
    size_t start = archive_copy_jsonb_begin(b);
    if (r) archive_buf_put(b, v->str, v->len);            /* JSON as it was written */
    else archive_copy_json_string(b, v->str, v->len);     /* not JSON: a string */
    archive_copy_jsonb_end(b, start);
}

int archive_results_copy(const redisReply *page, const char *batch, const archive_seen *seen,
                         unsigned char *sent, archive_buf *out)
{
    if (!page || page->type != REDIS_REPLY_ARRAY || page->elements % 2) return -1;
    int rows = 0;
    for (size_t i = 0; i + 1 < page->elements; i += 2) {
        const redisReply *k = page->element[i], *v = page->element[i + 1];
        if (sent) sent[i / 2] = 0;
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return -1;
        /* an id with a NUL is never in the set, and refused below */
        if (strlen(k->str) == k->len && archive_seen_has(seen, k->str)) continue;
        if (!archive_copy_is_text(k->str, k->len)) return -1;
        json_t *r = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
        const char *status = status_of(json_is_object(r) ? r : NULL);
        if (!status || strcmp(status, "waiting")) {
            result_row(out, batch, k, v, r);
            rows++;
            if (sent) sent[i / 2] = 1;
        }
        json_decref(r);
        if (out->failed) return -1;
    }
    return rows;
}
