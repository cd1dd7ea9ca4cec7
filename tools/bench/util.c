/* util.c -- Redis connections, command accounting and latency quantiles
 * for allocbench (see bench.h).
 *
 * Command accounting reads INFO commandstats, which counts every command
 * Redis executes, including those called from inside Lua scripts. A delta
 * around a measured window, minus the commands the bench itself sent in it,
 * is what the daemon (or an alternative design) made Redis do.
 */
#include "bench.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* --------------------------------------------------------------- mix -- */

uint64_t bench_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------ redis -- */

int bench_target_parse(bench_target *t, const char *url)
{
    memset(t, 0, sizeof *t);
    snprintf(t->url, sizeof t->url, "%s", url);
    if (!strncmp(url, "unix://", 7)) {
        t->is_unix = 1;
        snprintf(t->path, sizeof t->path, "%s", url + 7);
        return t->path[0] ? 0 : -1;
    }
    if (strncmp(url, "redis://", 8)) return -1;
    const char *hp = url + 8;
    const char *at = strrchr(hp, '@');
    if (at) return -1; /* no AUTH support: point the bench at an open Redis */
    const char *colon = strrchr(hp, ':');
    size_t hl = colon ? (size_t)(colon - hp) : strlen(hp);
    if (hl == 0 || hl >= sizeof t->host) return -1;
    memcpy(t->host, hp, hl);
    t->port = colon ? atoi(colon + 1) : 6379;
    return t->port > 0 ? 0 : -1;
}

redisContext *bench_connect(const bench_target *t)
{
    redisContext *c = t->is_unix ? redisConnectUnix(t->path) : redisConnect(t->host, t->port);
    if (c && !c->err) return c;
    if (c) redisFree(c);
    return NULL;
}

redisContext *bench_connect_nb(const bench_target *t)
{
    redisContext *c = t->is_unix ? redisConnectUnixNonBlock(t->path)
                                 : redisConnectNonBlock(t->host, t->port);
    if (!c || c->err) goto fail;
    struct pollfd p = { .fd = c->fd, .events = POLLOUT };
    if (poll(&p, 1, 5000) != 1) goto fail;
    int so = 0;
    socklen_t sl = sizeof so;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so, &sl) < 0 || so) goto fail;
    return c;
fail:
    if (c) redisFree(c);
    return NULL;
}

static int reply_ok(redisReply *r)
{
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r && r->type == REDIS_REPLY_ERROR) fprintf(stderr, "allocbench: redis: %s\n", r->str);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

int bench_ok(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    return reply_ok(r);
}

int bench_ok_argv(redisContext *c, int argc, const char **argv, const size_t *lens)
{
    return reply_ok(redisCommandArgv(c, argc, argv, lens));
}

static size_t put_count(char *out, char tag, size_t v)
{
    char t[24];
    size_t n = 0, k = 0;
    do { t[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    out[k++] = tag;
    while (n) out[k++] = t[--n];
    out[k++] = '\r';
    out[k++] = '\n';
    return k;
}

size_t resp_append(char *out, size_t at, size_t cap, int argc, const char **argv, const size_t *lens)
{
    size_t need = 24;
    for (int i = 0; i < argc; i++) need += (lens ? lens[i] : strlen(argv[i])) + 26;
    if (at + need > cap) return 0;
    at += put_count(out + at, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        at += put_count(out + at, '$', l);
        memcpy(out + at, argv[i], l);
        at += l;
        out[at++] = '\r';
        out[at++] = '\n';
    }
    return at;
}

int bench_script_load(redisContext *c, const char *src, char *sha)
{
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", src);
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok) memcpy(sha, r->str, 41);
    else fprintf(stderr, "allocbench: SCRIPT LOAD failed: %s\n", r && r->str ? r->str : "no reply");
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* --------------------------------------------------------- cmdstats -- */

static long find_entry(const cmdstats *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->e[i].name, name)) return (long)i;
    return -1;
}

static void add_entry(cmdstats *s, const char *name, long long calls, long long usec)
{
    long i = find_entry(s, name);
    if (i < 0) {
        if (s->n == CMDSTAT_MAX) return;
        i = (long)s->n++;
        snprintf(s->e[i].name, sizeof s->e[i].name, "%s", name);
        s->e[i].calls = s->e[i].usec = 0;
    }
    s->e[i].calls += calls;
    s->e[i].usec += usec;
}

void cmdstats_add(cmdstats *s, const char *name, long long calls)
{
    add_entry(s, name, calls, 0);
}

void cmdstats_merge(cmdstats *into, const cmdstats *from)
{
    for (size_t i = 0; i < from->n; i++)
        add_entry(into, from->e[i].name, from->e[i].calls, from->e[i].usec);
}

/* One line: cmdstat_hget:calls=1,usec=5,usec_per_call=5.00,... */
static void parse_line(cmdstats *s, const char *line)
{
    char name[40];
    long long calls, usec;
    if (sscanf(line, "cmdstat_%39[^:]:calls=%lld,usec=%lld", name, &calls, &usec) == 3)
        add_entry(s, name, calls, usec);
}

int cmdstats_read(redisContext *c, cmdstats *s)
{
    memset(s, 0, sizeof *s);
    redisReply *r = redisCommand(c, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r) freeReplyObject(r);
        return -1;
    }
    char *save = NULL;
    for (char *line = strtok_r(r->str, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save))
        parse_line(s, line);
    freeReplyObject(r);
    return 0;
}

void cmdstats_delta(const cmdstats *after, const cmdstats *before,
                    const cmdstats *own, cmdstats *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < after->n; i++) {
        const char *name = after->e[i].name;
        if (!strcmp(name, "info")) continue;
        long b = find_entry(before, name), o = own ? find_entry(own, name) : -1;
        long long calls = after->e[i].calls - (b >= 0 ? before->e[b].calls : 0)
                          - (o >= 0 ? own->e[o].calls : 0);
        long long all = after->e[i].calls - (b >= 0 ? before->e[b].calls : 0);
        long long usec = after->e[i].usec - (b >= 0 ? before->e[b].usec : 0);
        /* the bench's own share of the time, pro rata of the calls */
        if (all > 0) usec = calls > 0 ? usec * calls / all : 0;
        if (calls > 0 || usec > 0) add_entry(out, name, calls > 0 ? calls : 0, usec);
    }
}

long long cmdstats_calls(const cmdstats *s, const char *name)
{
    long i = find_entry(s, name);
    return i >= 0 ? s->e[i].calls : 0;
}

long long cmdstats_total_calls(const cmdstats *s)
{
    long long t = 0;
    for (size_t i = 0; i < s->n; i++) t += s->e[i].calls;
    return t;
}

long long cmdstats_total_usec(const cmdstats *s)
{
    long long t = 0;
    for (size_t i = 0; i < s->n; i++) t += s->e[i].usec;
    return t;
}

/* ---------------------------------------------------------- latency -- */

int latency_add(latency *l, double ms)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        double *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = ms;
    l->sorted = 0;
    return 0;
}

void latency_free(latency *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double latency_quantile(latency *l, double q)
{
    if (l->n == 0) return -1;
    if (!l->sorted) qsort(l->v, l->n, sizeof *l->v, cmp_double);
    l->sorted = 1;
    size_t i = (size_t)(q * (double)(l->n - 1) + 0.5);
    return l->v[i < l->n ? i : l->n - 1];
}

/* ---------------------------------------------------------- outcome -- */

void outcome_note(outcome *o, const char *status, size_t len)
{
    if (len >= 7 && !strncmp(status, "granted", 7)) __atomic_add_fetch(&o->granted, 1, __ATOMIC_RELAXED);
    else if (len >= 4 && !strncmp(status, "done", 4)) __atomic_add_fetch(&o->granted, 1, __ATOMIC_RELAXED);
    else if (len >= 8 && !strncmp(status, "rejected", 8)) __atomic_add_fetch(&o->rejected, 1, __ATOMIC_RELAXED);
    else __atomic_add_fetch(&o->other, 1, __ATOMIC_RELAXED);
}
