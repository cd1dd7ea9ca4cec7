/* round_io.c -- the round's hands (round_int.h): requests pushed the way a
 * producer pushes them (RPUSH, pipelined), results read back from the
 * contract's hashes, and allocctl run as an operator runs it. */
#include "round_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/redis_url.h"
#include "proc/proc.h"

static void vline(const char *tag, const char *fmt, va_list ap)
{
    fputs(tag, stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
}

void rio_say(rctx *r, const char *fmt, ...)
{
    if (r->o->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vline("housing: ", fmt, ap);
    va_end(ap);
}

void rio_fact(rctx *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("housing: ", fmt, ap);
    va_end(ap);
}

void rio_fail(rctx *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("housing: FAIL: ", fmt, ap);
    va_end(ap);
    r->failed = 1;
}

double rio_elapsed(const rctx *r)
{
    return (double)(proc_mono_us() - r->t0) / 1e6;
}

int rio_connect(rctx *r)
{
    redis_target t;
    char err[200];
    if (redis_url_parse(r->url, &t, err, sizeof err) < 0 || t.kind == REDIS_TARGET_SENTINEL) {
        fprintf(stderr, "alloccampus: %s\n", t.kind == REDIS_TARGET_SENTINEL ? "a sentinel:// URL is not supported" : err);
        return -1;
    }
    struct timeval tv = { 10, 0 };
    r->c = t.kind == REDIS_TARGET_UNIX ? redisConnectUnixWithTimeout(t.path, tv)
                                       : redisConnectWithTimeout(t.host, t.port, tv);
    if (!r->c || r->c->err) {
        fprintf(stderr, "alloccampus: cannot connect to %s: %s\n", r->url, r->c ? r->c->errstr : "out of memory");
        return -1;
    }
    redisSetTimeout(r->c, tv);
    if (t.password[0]) {
        redisReply *a = t.user[0] ? redisCommand(r->c, "AUTH %s %s", t.user, t.password)
                                  : redisCommand(r->c, "AUTH %s", t.password);
        int bad = !a || a->type == REDIS_REPLY_ERROR;
        if (a) freeReplyObject(a);
        if (bad) {
            fprintf(stderr, "alloccampus: AUTH refused by %s\n", r->url);
            return -1;
        }
    }
    static const char *const names[RK_COUNT] = { "queue", "ctl", "results", "stats", "holders", "groups", "capacity" };
    for (int k = 0; k < RK_COUNT; k++)
        snprintf(r->key[k], sizeof r->key[k], "%s:{%s}:%s", r->o->prefix, r->o->batch, names[k]);
    return 0;
}

int rio_load(rctx *r, const char *name, rlines *l)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", r->o->dir, name);
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "alloccampus: %s: %s (run `alloccampus gen` first)\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0, room = 0;
    ssize_t len;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n') line[--len] = '\0';
        if (!len) continue;
        if (l->n == room) {
            room = room ? 2 * room : 1024;
            char **t = realloc(l->text, room * sizeof *t);
            json_t **j = t ? realloc(l->json, room * sizeof *j) : NULL;
            if (t) l->text = t;
            if (!t || !j) { rc = -1; break; }
            l->json = j;
        }
        json_error_t je;
        l->json[l->n] = json_loads(line, 0, &je);
        l->text[l->n] = strdup(line);
        if (!l->json[l->n] || !l->text[l->n]) {
            fprintf(stderr, "alloccampus: %s:%zu: not JSON: %s\n", path, l->n + 1, je.text);
            json_decref(l->json[l->n]);
            free(l->text[l->n]);
            rc = -1;
            break;
        }
        l->n++;
    }
    free(line);
    fclose(f);
    if (rc < 0) rio_lines_free(l);
    return rc;
}

void rio_lines_free(rlines *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->text[i]);
        json_decref(l->json[i]);
    }
    free(l->text);
    free(l->json);
    memset(l, 0, sizeof *l);
}

long long rio_campus(const rctx *r, const char *name)
{
    return json_integer_value(json_object_get(r->campus, name));
}

int rio_push(rctx *r, int k, char *const *text, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        redisAppendCommand(r->c, "RPUSH %s %s", r->key[k], text[i]);
        if (k == RK_QUEUE && r->requests) fprintf(r->requests, "%s\n", text[i]);
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *x = NULL;
        if (redisGetReply(r->c, (void **)&x) != REDIS_OK || !x || x->type != REDIS_REPLY_INTEGER) rc = -1;
        if (x) freeReplyObject(x);
    }
    if (rc < 0) fprintf(stderr, "alloccampus: RPUSH %s failed\n", r->key[k]);
    r->expected += (long long)n;
    return rc;
}

int rio_wait(rctx *r, const char *what, int timeout_s)
{
    int64_t until = proc_mono_us() + (int64_t)timeout_s * 1000000;
    long long have = 0;
    for (int pause = 5;; pause = pause < 100 ? pause * 2 : 100) {
        have = proc_int(r->c, "HLEN %s", r->key[RK_RESULTS]);
        if (have >= r->expected) return 0;
        if (proc_mono_us() > until) break;
        proc_sleep_ms(pause);
    }
    fprintf(stderr, "alloccampus: %s: %lld of %lld results after %d s (is allocd serving %s?)\n", what, have,
            r->expected, timeout_s, r->o->batch);
    return -1;
}

long long rio_stat(rctx *r, const char *field)
{
    return proc_int(r->c, "HGET %s %s", r->key[RK_STATS], field);
}

char *rio_stat_str(rctx *r, const char *field)
{
    redisReply *x = redisCommand(r->c, "HGET %s %s", r->key[RK_STATS], field);
    char *s = x && x->type == REDIS_REPLY_STRING ? strdup(x->str) : NULL;
    if (x) freeReplyObject(x);
    return s;
}

static json_t *parse_value(const redisReply *v)
{
    json_t *j = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
    return j ? j : json_stringn(v->str, v->len);
}

json_t *rio_hash(rctx *r, int k)
{
    redisReply *x = redisCommand(r->c, "HGETALL %s", r->key[k]);
    if (!x || x->type != REDIS_REPLY_ARRAY) {
        fprintf(stderr, "alloccampus: HGETALL %s failed\n", r->key[k]);
        if (x) freeReplyObject(x);
        return NULL;
    }
    json_t *h = json_object();
    for (size_t i = 0; i + 1 < x->elements; i += 2)
        json_object_set_new(h, x->element[i]->str, parse_value(x->element[i + 1]));
    freeReplyObject(x);
    return h;
}

json_t *rio_hmget(rctx *r, int k, const char *const *fields, size_t n)
{
    json_t *h = json_object();
    enum { PAGE = 1000 };
    const char *argv[PAGE + 2];
    for (size_t at = 0; at < n; at += PAGE) {
        size_t m = n - at < PAGE ? n - at : PAGE;
        argv[0] = "HMGET";
        argv[1] = r->key[k];
        for (size_t i = 0; i < m; i++) argv[2 + i] = fields[at + i];
        redisReply *x = redisCommandArgv(r->c, (int)m + 2, argv, NULL);
        for (size_t i = 0; x && x->type == REDIS_REPLY_ARRAY && i < x->elements; i++)
            if (x->element[i]->type == REDIS_REPLY_STRING)
                json_object_set_new(h, fields[at + i], parse_value(x->element[i]));
        if (x) freeReplyObject(x);
    }
    return h;
}

int rio_allocctl(rctx *r, char **out, int show, const char *const *args)
{
    const char *argv[32] = { r->o->allocctl, "--redis", r->url, "--prefix", r->o->prefix };
    size_t n = 5;
    for (size_t i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    if (show && !r->o->quiet) {
        printf("\n  $ allocctl");
        for (size_t i = 5; i < n; i++) printf(" %s", argv[i]);
        printf("\n");
    }
    int rc = proc_run_capture((char *const *)argv, out);
    if (rc < 0 || !*out) {
        fprintf(stderr, "alloccampus: cannot run %s\n", r->o->allocctl);
        return -1;
    }
    if (show && !r->o->quiet) {
        for (const char *p = *out; *p;) {
            size_t len = strcspn(p, "\n");
            printf("    %.*s\n", (int)len, p);
            p += len + (p[len] == '\n');
        }
        printf("\n");
    }
    fflush(stdout);
    return rc;
}
