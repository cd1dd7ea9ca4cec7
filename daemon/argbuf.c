/* argbuf.c -- see argbuf.h. */
#include "argbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void args_reset(argbuf *a)
{
    a->n = 0;
    a->failed = 0;
    jsonw_reset(&a->data);
}

void args_free(argbuf *a)
{
    free(a->refs);
    free(a->argv);
    free(a->lens);
    jsonw_free(&a->data);
    memset(a, 0, sizeof *a);
}

static arg_ref *args_push(argbuf *a)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        arg_ref *r = realloc(a->refs, cap * sizeof *r);
        if (!r) { a->failed = 1; return NULL; }
        a->refs = r;
        a->cap = cap;
    }
    return &a->refs[a->n++];
}

void arg_ext(argbuf *a, const char *s, size_t len)
{
    arg_ref *r = args_push(a);
    if (r) { r->ext = s; r->len = len; }
}

void arg_str(argbuf *a, const char *s) { arg_ext(a, s, strlen(s)); }

/* Starts a value written into data; arg_end() closes it. */
size_t arg_begin(argbuf *a)
{
    a->data.depth = 0;
    a->data.first[0] = 1;
    return jsonw_len(&a->data);
}

void arg_end(argbuf *a, size_t start)
{
    arg_ref *r = args_push(a);
    if (r) { r->ext = NULL; r->off = start; r->len = jsonw_len(&a->data) - start; }
}

void arg_int(argbuf *a, int64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRId64, v);
    size_t start = arg_begin(a);
    jsonw_raw(&a->data, buf, (size_t)n);
    arg_end(a, start);
}

void arg_u64(argbuf *a, uint64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRIu64, v);
    size_t start = arg_begin(a);
    jsonw_raw(&a->data, buf, (size_t)n);
    arg_end(a, start);
}

/* A section count, patched when the section is complete. */
size_t arg_count_begin(argbuf *a)
{
    arg_ext(a, "0", 1);
    return a->n - 1;
}

void arg_count_end(argbuf *a, size_t at, size_t count)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%zu", count);
    size_t start = arg_begin(a);
    jsonw_raw(&a->data, buf, (size_t)n);
    if (at < a->n) {
        a->refs[at].ext = NULL;
        a->refs[at].off = start;
        a->refs[at].len = (size_t)n;
    }
}

int args_resolve(argbuf *a)
{
    if (a->failed || a->data.failed) return -ENOMEM;
    if (a->argv_cap < a->n) {
        const char **v = realloc(a->argv, a->n * sizeof *v);
        if (v) a->argv = v;
        size_t *l = realloc(a->lens, a->n * sizeof *l);
        if (l) a->lens = l;
        if (!v || !l) return -ENOMEM;
        a->argv_cap = a->n;
    }
    for (size_t i = 0; i < a->n; i++) {
        const arg_ref *r = &a->refs[i];
        a->argv[i] = r->ext ? r->ext : a->data.buf + r->off;
        a->lens[i] = r->len;
    }
    return 0;
}
