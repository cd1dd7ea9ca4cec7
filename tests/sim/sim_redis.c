/* sim_redis.c -- the Redis model of the simulator (see sim_redis.h).
 *
 * Written for exactness over speed where Redis's behaviour shows in a
 * reply (error texts, nil versus empty, WATCH after an expiry), and kept to
 * the commands allocd sends: a command allocd starts sending fails here
 * loudly ("ERR unknown command") instead of being guessed at. Hashes keep
 * insertion order, as a small Redis hash (listpack) does.
 */
#include "sim/sim_redis.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/sha1.h"
#include "sim/sim_stream.h"
#include "worker/log_trim.h"
#include "worker/scripts.h"

/* ---------------------------------------------------------------- dict -- */

/* Insertion-ordered map of binary keys: entries in an array, an open
 * addressing index over it. Deleted entries leave a hole (k == NULL) that
 * a rebuild squeezes out. */
typedef struct dent {
    char *k;
    size_t kn;
    void *v;
    size_t vn;
    uint64_t ser;    /* insertion serial: an HSCAN cursor (c_hscan) */
} dent;

typedef struct dict {
    dent *e;
    size_t n, cap, live;
    uint32_t *idx;   /* 0 empty, else entry + 1 */
    size_t icap;
    uint64_t next_ser;
} dict;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "sim: out of memory\n"); abort(); }
    return p;
}

static char *xdup(const char *p, size_t n)
{
    char *d = xmalloc(n + 1);
    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

static uint32_t hash_bytes(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)p[i]; h *= 16777619u; }
    return h;
}

static void dict_reindex(dict *d)
{
    size_t j = 0;
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].k) d->e[j++] = d->e[i];
    d->n = j;
    size_t icap = 16;
    while (icap < d->n * 2 + 2) icap <<= 1;
    free(d->idx);
    d->idx = calloc(icap, sizeof *d->idx);
    if (!d->idx) abort();
    d->icap = icap;
    for (size_t i = 0; i < d->n; i++) {
        size_t b = hash_bytes(d->e[i].k, d->e[i].kn) & (icap - 1);
        while (d->idx[b]) b = (b + 1) & (icap - 1);
        d->idx[b] = (uint32_t)i + 1;
    }
}

static long dict_find(const dict *d, const char *k, size_t kn)
{
    if (!d->icap) return -1;
    size_t b = hash_bytes(k, kn) & (d->icap - 1);
    while (d->idx[b]) {
        const dent *e = &d->e[d->idx[b] - 1];
        if (e->k && e->kn == kn && !memcmp(e->k, k, kn)) return (long)(d->idx[b] - 1);
        b = (b + 1) & (d->icap - 1);
    }
    return -1;
}

/* Adds k (copied) with v; the caller checked it is absent. */
static void dict_add(dict *d, const char *k, size_t kn, void *v, size_t vn)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->e = realloc(d->e, d->cap * sizeof *d->e);
        if (!d->e) abort();
    }
    d->e[d->n] = (dent){ xdup(k, kn), kn, v, vn, ++d->next_ser };
    d->n++;
    d->live++;
    if (d->n * 2 + 2 > d->icap) { dict_reindex(d); return; }
    size_t b = hash_bytes(k, kn) & (d->icap - 1);
    while (d->idx[b]) b = (b + 1) & (d->icap - 1);
    d->idx[b] = (uint32_t)d->n;
}

/* Removes entry i; returns its value for the caller to free. */
static void *dict_remove(dict *d, long i)
{
    void *v = d->e[i].v;
    free(d->e[i].k);
    d->e[i].k = NULL;
    d->e[i].v = NULL;
    d->live--;
    dict_reindex(d); /* keeps probing chains intact; dicts are small */
    return v;
}

static void dict_free(dict *d, void (*fv)(void *))
{
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].k) { free(d->e[i].k); if (fv) fv(d->e[i].v); }
    free(d->e);
    free(d->idx);
    memset(d, 0, sizeof *d);
}

/* -------------------------------------------------------------- values -- */

enum { T_STR = 1, T_HASH, T_LIST, T_SET, T_STREAM };
static const char *const type_names[] = { "none", "string", "hash", "list", "set", "stream" };

typedef struct sbuf { char *p; size_t n; } sbuf;

typedef struct sval {
    int type;
    int64_t exp;            /* ms, 0 = none */
    sbuf s;                 /* string */
    dict h;                 /* hash (values: sbuf*) or set (no values) */
    sbuf *l; size_t lhead, ln, lcap;   /* list: items [lhead, lhead+ln) */
    xstream *xs;            /* stream (sim_stream.h) */
    int hash_table;         /* hash: past Redis's listpack limits (hash_encoding) */
} sval;

static void sbuf_free(void *p)
{
    sbuf *b = p;
    if (b) { free(b->p); free(b); }
}

static void sval_free(void *p)
{
    sval *v = p;
    if (!v) return;
    free(v->s.p);
    dict_free(&v->h, sbuf_free);
    for (size_t i = 0; i < v->ln; i++) free(v->l[v->lhead + i].p);
    free(v->l);
    xs_free(v->xs);
    free(v);
}

static sbuf *sbuf_new(const char *p, size_t n)
{
    sbuf *b = xmalloc(sizeof *b);
    b->p = xdup(p, n);
    b->n = n;
    return b;
}

static sval *sval_copy(const sval *v)
{
    sval *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->type = v->type;
    c->exp = v->exp;
    if (v->s.p) c->s = (sbuf){ xdup(v->s.p, v->s.n), v->s.n };
    for (size_t i = 0; i < v->h.n; i++) {
        const dent *e = &v->h.e[i];
        if (!e->k) continue;
        sbuf *b = e->v;
        dict_add(&c->h, e->k, e->kn, b ? sbuf_new(b->p, b->n) : NULL, 0);
    }
    if (v->ln) {
        c->lcap = v->ln;
        c->l = xmalloc(c->lcap * sizeof *c->l);
        for (size_t i = 0; i < v->ln; i++) {
            const sbuf *b = &v->l[v->lhead + i];
            c->l[i] = (sbuf){ xdup(b->p, b->n), b->n };
        }
        c->ln = v->ln;
    }
    if (v->xs) c->xs = xs_copy(v->xs);
    return c;
}

/* ---------------------------------------------------------- the server -- */

struct simr_db { dict keys; };

#define MAX_CLIENTS 256

struct simr {
    dict keys;            /* key -> sval* */
    dict vers;            /* key -> version (in vn), for WATCH */
    uint64_t ver;
    dict scripts;         /* sha -> source (a pointer to a script_*_src) */
    simr_observer obs;
    uint64_t commands;
    int replicas;         /* what WAIT answers */
    int oom;              /* used_memory > maxmemory (noeviction): simr_set_oom */
    int readonly;         /* a replica now (replica-read-only yes): simr_set_readonly */
    simr_route_fn route;  /* Redis Cluster's redirections (sim_cluster.c), or NULL */
    void *route_ud;
};

typedef struct watched { char *k; size_t kn; uint64_t ver; int64_t exp; } watched;
typedef struct queued { int argc; char **argv; size_t *lens; } queued;

struct simr_client {
    simr *s;
    int in_multi, multi_error;
    queued *q; size_t nq, qcap;
    watched *w; size_t nw;
    char fence_token[200], fence_epoch[40];
    int fenced;
    queued blocked; int is_blocked;
    int64_t block_deadline;
    int node;           /* the cluster node it is connected to (-1: no cluster) */
    int asking;         /* ASKING: the next command may be served by an importing node */
};

typedef struct ctx {
    simr *s;
    simr_client *c;
    int argc;
    const char **argv;
    const size_t *lens;
    int64_t now;
    redisReply *err;    /* a script: the error that stopped it */
    const char *src;    /* a script: its source (the OOM error names a line of it) */
    int dirty;          /* a script: it called a write command (Redis's SCRIPT_WRITE_DIRTY) */
    int allow_oom;      /* a script: its shebang says flags=allow-oom */
} ctx;

/* Redis 7.0's command flags the model needs: `write` (a script that
 * called one may no longer be refused for memory: SCRIPT_WRITE_DIRTY) and
 * `denyoom` (refused while used_memory > maxmemory). */
enum { F_WRITE = 1, F_DENYOOM = 2, F_W = F_WRITE, F_WD = F_WRITE | F_DENYOOM };

typedef struct cmd_def {
    const char *name;
    int arity;          /* argc, or -min */
    redisReply *(*fn)(ctx *x);
    int flags;
} cmd_def;

static const char OOM_ERR[] = "OOM command not allowed when used memory > 'maxmemory'.";
static const char READONLY_ERR[] = "READONLY You can't write against a read only replica.";

static const cmd_def *find_cmd(const char *p, size_t n);
static redisReply *arity_or_unknown(const cmd_def *d, int argc, const char **argv, const size_t *lens);

/* ------------------------------------------------------------- replies -- */

static redisReply *r_new(int type)
{
    redisReply *r = calloc(1, sizeof *r);
    if (!r) abort();
    r->type = type;
    return r;
}

static redisReply *r_strn(int type, const char *p, size_t n)
{
    redisReply *r = r_new(type);
    r->str = xdup(p, n);
    r->len = n;
    return r;
}

static redisReply *r_str(const char *p, size_t n) { return r_strn(REDIS_REPLY_STRING, p, n); }
static redisReply *r_status(const char *s) { return r_strn(REDIS_REPLY_STATUS, s, strlen(s)); }
static redisReply *r_ok(void) { return r_status("OK"); }
static redisReply *r_nil(void) { return r_new(REDIS_REPLY_NIL); }

static redisReply *r_err(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return r_strn(REDIS_REPLY_ERROR, buf, strlen(buf));
}

static redisReply *r_int(long long n)
{
    redisReply *r = r_new(REDIS_REPLY_INTEGER);
    r->integer = n;
    return r;
}

static redisReply *r_arr(size_t n)
{
    redisReply *r = r_new(REDIS_REPLY_ARRAY);
    r->elements = n;
    r->element = n ? calloc(n, sizeof *r->element) : NULL;
    if (n && !r->element) abort();
    return r;
}

static redisReply *r_wrongtype(void)
{
    return r_err("WRONGTYPE Operation against a key holding the wrong kind of value");
}

static redisReply *r_notint(void) { return r_err("ERR value is not an integer or out of range"); }

/* ---------------------------------------------------------------- keys -- */

static void touch(simr *s, const char *k, size_t kn)
{
    long i = dict_find(&s->vers, k, kn);
    if (i < 0) { dict_add(&s->vers, k, kn, NULL, 0); i = (long)s->vers.n - 1; }
    s->vers.e[i].vn = (size_t)++s->ver;
}

static uint64_t version(const simr *s, const char *k, size_t kn)
{
    long i = dict_find(&s->vers, k, kn);
    return i < 0 ? 0 : (uint64_t)s->vers.e[i].vn;
}

static void del_key(simr *s, long i)
{
    touch(s, s->keys.e[i].k, s->keys.e[i].kn);
    sval_free(dict_remove(&s->keys, i));
}

/* The value of key, or NULL; an expired key is deleted on the way. */
static sval *lookup(simr *s, const char *k, size_t kn, int64_t now)
{
    long i = dict_find(&s->keys, k, kn);
    if (i < 0) return NULL;
    sval *v = s->keys.e[i].v;
    if (v->exp && v->exp <= now) { del_key(s, i); return NULL; }
    return v;
}

static sval *create(simr *s, const char *k, size_t kn, int type)
{
    sval *v = calloc(1, sizeof *v);
    if (!v) abort();
    v->type = type;
    if (type == T_STREAM) v->xs = xs_new();
    dict_add(&s->keys, k, kn, v, 0);
    return v;
}

/* key argv[i] of x, of type `type`: *out NULL when absent. Returns a
 * WRONGTYPE reply when it is another type. */
static redisReply *get_typed(ctx *x, int i, int type, sval **out)
{
    *out = lookup(x->s, x->argv[i], x->lens[i], x->now);
    if (*out && (*out)->type != type) return r_wrongtype();
    return NULL;
}

/* Deletes argv[i]'s key when its collection became empty (Redis does). */
static void drop_if_empty(ctx *x, int i, sval *v)
{
    int empty = (v->type == T_HASH || v->type == T_SET) ? v->h.live == 0 :
                v->type == T_LIST ? v->ln == 0 : 0;
    if (!empty) return;
    long j = dict_find(&x->s->keys, x->argv[i], x->lens[i]);
    if (j >= 0) sval_free(dict_remove(&x->s->keys, j));
}

static int parse_ll(const char *p, size_t n, long long *out)
{
    if (n == 0 || n > 20) return -1;
    char buf[24];
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (*end || (buf[0] == '0' && n > 1) || (buf[0] == '-' && (n == 1 || buf[1] == '0'))) return -1;
    if ((v == LLONG_MAX || v == LLONG_MIN) && n >= 19) {
        /* strtoll saturated: out of range unless the text is exactly the limit */
        char lim[24];
        snprintf(lim, sizeof lim, "%lld", v);
        if (strcmp(lim, buf)) return -1;
    }
    *out = v;
    return 0;
}

static int arg_eq(ctx *x, int i, const char *s)
{
    return x->lens[i] == strlen(s) && !strncasecmp(x->argv[i], s, x->lens[i]);
}

/* ------------------------------------------------------------- strings -- */

static redisReply *c_get(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_STR, &v);
    if (e) return e;
    return v ? r_str(v->s.p, v->s.n) : r_nil();
}

static redisReply *c_set(ctx *x)
{
    int nx = 0, xx = 0;
    int64_t px = 0;
    for (int i = 3; i < x->argc; i++) {
        long long n;
        if (arg_eq(x, i, "NX")) nx = 1;
        else if (arg_eq(x, i, "XX")) xx = 1;
        else if ((arg_eq(x, i, "PX") || arg_eq(x, i, "EX")) && i + 1 < x->argc) {
            int ex = arg_eq(x, i, "EX");
            if (parse_ll(x->argv[i + 1], x->lens[i + 1], &n) < 0) return r_notint();
            if (n <= 0) return r_err("ERR invalid expire time in 'set' command");
            px = ex ? n * 1000 : n;
            i++;
        } else return r_err("ERR syntax error");
    }
    if (nx && xx) return r_err("ERR syntax error");
    sval *v = lookup(x->s, x->argv[1], x->lens[1], x->now);
    if ((nx && v) || (xx && !v)) return r_nil();
    if (v) {
        long j = dict_find(&x->s->keys, x->argv[1], x->lens[1]);
        sval_free(dict_remove(&x->s->keys, j));
    }
    v = create(x->s, x->argv[1], x->lens[1], T_STR);
    v->s = (sbuf){ xdup(x->argv[2], x->lens[2]), x->lens[2] };
    v->exp = px ? x->now + px : 0;
    touch(x->s, x->argv[1], x->lens[1]);
    return r_ok();
}

static redisReply *c_incrby(ctx *x)
{
    long long by, cur = 0;
    if (parse_ll(x->argv[2], x->lens[2], &by) < 0) return r_notint();
    sval *v;
    redisReply *e = get_typed(x, 1, T_STR, &v);
    if (e) return e;
    if (v && parse_ll(v->s.p, v->s.n, &cur) < 0) return r_notint();
    if ((by > 0 && cur > LLONG_MAX - by) || (by < 0 && cur < LLONG_MIN - by))
        return r_err("ERR increment or decrement would overflow");
    cur += by;
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", cur);
    if (!v) v = create(x->s, x->argv[1], x->lens[1], T_STR);
    free(v->s.p);
    v->s = (sbuf){ xdup(buf, (size_t)n), (size_t)n };
    touch(x->s, x->argv[1], x->lens[1]);
    return r_int(cur);
}

/* ---------------------------------------------------------------- keys -- */

static redisReply *c_del(ctx *x)
{
    long long n = 0;
    for (int i = 1; i < x->argc; i++) {
        if (!lookup(x->s, x->argv[i], x->lens[i], x->now)) continue;
        del_key(x->s, dict_find(&x->s->keys, x->argv[i], x->lens[i]));
        n++;
    }
    return r_int(n);
}

static redisReply *c_exists(ctx *x)
{
    long long n = 0;
    for (int i = 1; i < x->argc; i++) n += lookup(x->s, x->argv[i], x->lens[i], x->now) != NULL;
    return r_int(n);
}

static redisReply *c_type(ctx *x)
{
    sval *v = lookup(x->s, x->argv[1], x->lens[1], x->now);
    return r_status(type_names[v ? v->type : 0]);
}

static redisReply *c_pexpire(ctx *x)
{
    long long ms;
    if (parse_ll(x->argv[2], x->lens[2], &ms) < 0) return r_notint();
    sval *v = lookup(x->s, x->argv[1], x->lens[1], x->now);
    if (!v) return r_int(0);
    if (ms <= 0) { del_key(x->s, dict_find(&x->s->keys, x->argv[1], x->lens[1])); return r_int(1); }
    v->exp = x->now + ms;
    touch(x->s, x->argv[1], x->lens[1]);
    return r_int(1);
}

static redisReply *c_pttl(ctx *x)
{
    sval *v = lookup(x->s, x->argv[1], x->lens[1], x->now);
    if (!v) return r_int(-2);
    return r_int(v->exp ? v->exp - x->now : -1);
}

static redisReply *c_rename(ctx *x)
{
    sval *v = lookup(x->s, x->argv[1], x->lens[1], x->now);
    if (!v) return r_err("ERR no such key");
    if (x->lens[1] == x->lens[2] && !memcmp(x->argv[1], x->argv[2], x->lens[1])) return r_ok();
    long i = dict_find(&x->s->keys, x->argv[1], x->lens[1]);
    x->s->keys.e[i].v = NULL;
    dict_remove(&x->s->keys, i);
    long j = dict_find(&x->s->keys, x->argv[2], x->lens[2]);
    if (j >= 0) sval_free(dict_remove(&x->s->keys, j));
    dict_add(&x->s->keys, x->argv[2], x->lens[2], v, 0);
    touch(x->s, x->argv[1], x->lens[1]);
    touch(x->s, x->argv[2], x->lens[2]);
    return r_ok();
}

static redisReply *c_ping(ctx *x) { return r_status("PONG"); }

static redisReply *c_time(ctx *x)
{
    char s[24], us[24];
    snprintf(s, sizeof s, "%" PRId64, x->now / 1000);
    snprintf(us, sizeof us, "%" PRId64, (x->now % 1000) * 1000);
    redisReply *r = r_arr(2);
    r->element[0] = r_str(s, strlen(s));
    r->element[1] = r_str(us, strlen(us));
    return r;
}

/* -------------------------------------------------------------- hashes -- */

/* Redis keeps a hash as a listpack up to its defaults hash-max-listpack-
 * entries 128 and -value 64 (HSET checks the lengths, every write the
 * count), and as a hash table from then on for the key's life: which
 * decides how HSCAN pages it (c_hscan). */
static void hash_encoding(sval *v, size_t field_len, size_t value_len)
{
    if (field_len > 64 || value_len > 64 || v->h.live > 128) v->hash_table = 1;
}

static redisReply *c_hset(ctx *x)
{
    if (x->argc % 2) return r_err("ERR wrong number of arguments for 'hset' command");
    sval *v;
    redisReply *e = get_typed(x, 1, T_HASH, &v);
    if (e) return e;
    if (!v) v = create(x->s, x->argv[1], x->lens[1], T_HASH);
    long long added = 0;
    for (int i = 2; i + 1 < x->argc; i += 2) {
        long j = dict_find(&v->h, x->argv[i], x->lens[i]);
        sbuf *b = sbuf_new(x->argv[i + 1], x->lens[i + 1]);
        if (j >= 0) { sbuf_free(v->h.e[j].v); v->h.e[j].v = b; }
        else { dict_add(&v->h, x->argv[i], x->lens[i], b, 0); added++; }
        hash_encoding(v, x->lens[i], x->lens[i + 1]);
    }
    touch(x->s, x->argv[1], x->lens[1]);
    return r_int(added);
}

static redisReply *c_hget(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_HASH, &v);
    if (e) return e;
    long j = v ? dict_find(&v->h, x->argv[2], x->lens[2]) : -1;
    if (j < 0) return r_nil();
    sbuf *b = v->h.e[j].v;
    return r_str(b->p, b->n);
}

static redisReply *c_hmget(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_HASH, &v);
    if (e) return e;
    redisReply *r = r_arr((size_t)x->argc - 2);
    for (int i = 2; i < x->argc; i++) {
        long j = v ? dict_find(&v->h, x->argv[i], x->lens[i]) : -1;
        sbuf *b = j >= 0 ? v->h.e[j].v : NULL;
        r->element[i - 2] = b ? r_str(b->p, b->n) : r_nil();
    }
    return r;
}

static redisReply *hash_pairs(const sval *v)
{
    redisReply *r = r_arr(v ? v->h.live * 2 : 0);
    size_t k = 0;
    for (size_t i = 0; v && i < v->h.n; i++) {
        const dent *d = &v->h.e[i];
        if (!d->k) continue;
        const sbuf *b = d->v;
        r->element[k++] = r_str(d->k, d->kn);
        r->element[k++] = r_str(b->p, b->n);
    }
    return r;
}

static redisReply *c_hgetall(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_HASH, &v);
    return e ? e : hash_pairs(v);
}

/* HSCAN key cursor [COUNT n]. A hash Redis keeps as a listpack comes back
 * whole in one page with cursor 0, as Redis answers. A hash table
 * (hash_encoding) pages COUNT fields (default 10) at a time; the cursor is the
 * insertion serial of the next field: a field present for the whole scan
 * is returned exactly once, fields added meanwhile may be, deleted ones are
 * not -- Redis's guarantee, with other cursor numbers and page sizes.
 * test_sim_model checks both shapes against a real Redis. */
static redisReply *c_hscan(ctx *x)
{
    long long cursor, count = 10;
    if (parse_ll(x->argv[2], x->lens[2], &cursor) < 0 || cursor < 0) return r_err("ERR invalid cursor");
    for (int i = 3; i < x->argc; i += 2) {
        if (i + 1 >= x->argc || x->lens[i] != 5 || strncasecmp(x->argv[i], "count", 5))
            return r_err("ERR syntax error");
        if (parse_ll(x->argv[i + 1], x->lens[i + 1], &count) < 0) return r_notint();
        if (count < 1) return r_err("ERR syntax error");
    }
    sval *v;
    redisReply *e = get_typed(x, 1, T_HASH, &v);
    if (e) return e;
    redisReply *r = r_arr(2);
    if (!v || !v->hash_table) {
        r->element[0] = r_str("0", 1);
        r->element[1] = hash_pairs(v);
        return r;
    }
    size_t first = 0, k = 0;
    while (first < v->h.n && (!v->h.e[first].k || v->h.e[first].ser < (uint64_t)cursor)) first++;
    size_t end = first, taken = 0;
    for (; end < v->h.n && taken < (size_t)count; end++) taken += v->h.e[end].k != NULL;
    while (end < v->h.n && !v->h.e[end].k) end++;
    char next[24] = "0";
    if (end < v->h.n) snprintf(next, sizeof next, "%" PRIu64, v->h.e[end].ser);
    r->element[0] = r_str(next, strlen(next));
    redisReply *page = r->element[1] = r_arr(taken * 2);
    for (size_t i = first; i < end; i++) {
        const dent *d = &v->h.e[i];
        if (!d->k) continue;
        const sbuf *b = d->v;
        page->element[k++] = r_str(d->k, d->kn);
        page->element[k++] = r_str(b->p, b->n);
    }
    return r;
}

static redisReply *c_hdel(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_HASH, &v);
    if (e) return e;
    long long n = 0;
    for (int i = 2; v && i < x->argc; i++) {
        long j = dict_find(&v->h, x->argv[i], x->lens[i]);
        if (j >= 0) { sbuf_free(dict_remove(&v->h, j)); n++; }
    }
    if (n) { touch(x->s, x->argv[1], x->lens[1]); drop_if_empty(x, 1, v); }
    return r_int(n);
}

static redisReply *c_hlen(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_HASH, &v);
    return e ? e : r_int(v ? (long long)v->h.live : 0);
}

static redisReply *c_hincrby(ctx *x)
{
    long long by, cur = 0;
    if (parse_ll(x->argv[3], x->lens[3], &by) < 0) return r_notint();
    sval *v;
    redisReply *e = get_typed(x, 1, T_HASH, &v);
    if (e) return e;
    long j = v ? dict_find(&v->h, x->argv[2], x->lens[2]) : -1;
    if (j >= 0) {
        sbuf *b = v->h.e[j].v;
        if (parse_ll(b->p, b->n, &cur) < 0) return r_err("ERR hash value is not an integer");
    }
    if ((by > 0 && cur > LLONG_MAX - by) || (by < 0 && cur < LLONG_MIN - by))
        return r_err("ERR increment or decrement would overflow");
    cur += by;
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", cur);
    if (!v) v = create(x->s, x->argv[1], x->lens[1], T_HASH);
    if (j >= 0) { sbuf_free(v->h.e[j].v); v->h.e[j].v = sbuf_new(buf, (size_t)n); }
    else dict_add(&v->h, x->argv[2], x->lens[2], sbuf_new(buf, (size_t)n), 0);
    hash_encoding(v, 0, 0);     /* HINCRBY converts on the count alone */
    touch(x->s, x->argv[1], x->lens[1]);
    return r_int(cur);
}

/* ---------------------------------------------------------------- sets -- */

static redisReply *c_sadd(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_SET, &v);
    if (e) return e;
    if (!v) v = create(x->s, x->argv[1], x->lens[1], T_SET);
    long long n = 0;
    for (int i = 2; i < x->argc; i++)
        if (dict_find(&v->h, x->argv[i], x->lens[i]) < 0) { dict_add(&v->h, x->argv[i], x->lens[i], NULL, 0); n++; }
    if (n) touch(x->s, x->argv[1], x->lens[1]);   /* as Redis: a set left as it was is not modified */
    return r_int(n);
}

static redisReply *c_srem(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_SET, &v);
    if (e) return e;
    long long n = 0;
    for (int i = 2; v && i < x->argc; i++) {
        long j = dict_find(&v->h, x->argv[i], x->lens[i]);
        if (j >= 0) { dict_remove(&v->h, j); n++; }
    }
    if (n) { touch(x->s, x->argv[1], x->lens[1]); drop_if_empty(x, 1, v); }
    return r_int(n);
}

static redisReply *c_smembers(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_SET, &v);
    if (e) return e;
    redisReply *r = r_arr(v ? v->h.live : 0);
    size_t k = 0;
    for (size_t i = 0; v && i < v->h.n; i++)
        if (v->h.e[i].k) r->element[k++] = r_str(v->h.e[i].k, v->h.e[i].kn);
    return r;
}

/* --------------------------------------------------------------- lists -- */

static void list_push(sval *v, int left, const char *p, size_t n)
{
    if (left && v->lhead > 0) {
        v->l[--v->lhead] = (sbuf){ xdup(p, n), n };
        v->ln++;
        return;
    }
    if (v->lhead + v->ln == v->lcap || left) {
        size_t need = v->ln + 1 + (left ? 1 : 0);
        if (v->lhead > 0 && need <= v->lcap) {
            memmove(v->l, v->l + v->lhead, v->ln * sizeof *v->l);
            v->lhead = 0;
        } else {
            v->lcap = v->lcap ? v->lcap * 2 : 8;
            while (v->lcap < need) v->lcap *= 2;
            sbuf *nl = xmalloc(v->lcap * sizeof *nl);
            if (v->ln) memcpy(nl, v->l + v->lhead, v->ln * sizeof *nl);
            free(v->l);
            v->l = nl;
            v->lhead = 0;
        }
    }
    if (left) {
        memmove(v->l + 1, v->l, v->ln * sizeof *v->l);
        v->l[0] = (sbuf){ xdup(p, n), n };
    } else {
        v->l[v->lhead + v->ln] = (sbuf){ xdup(p, n), n };
    }
    v->ln++;
}

static redisReply *push(ctx *x, int left)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_LIST, &v);
    if (e) return e;
    if (!v) v = create(x->s, x->argv[1], x->lens[1], T_LIST);
    for (int i = 2; i < x->argc; i++) list_push(v, left, x->argv[i], x->lens[i]);
    touch(x->s, x->argv[1], x->lens[1]);
    return r_int((long long)v->ln);
}

static redisReply *c_rpush(ctx *x) { return push(x, 0); }
static redisReply *c_lpush(ctx *x) { return push(x, 1); }

static redisReply *c_llen(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_LIST, &v);
    return e ? e : r_int(v ? (long long)v->ln : 0);
}

/* Redis's range rule: negative from the end, clamped; empty when crossed. */
static int list_range(long long n, long long start, long long stop, long long *from, long long *to)
{
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    if (start < 0) start = 0;
    if (start > stop || start >= n) return 0;
    if (stop >= n) stop = n - 1;
    *from = start;
    *to = stop;
    return 1;
}

static redisReply *c_lrange(ctx *x)
{
    long long a, b, from, to;
    if (parse_ll(x->argv[2], x->lens[2], &a) < 0 || parse_ll(x->argv[3], x->lens[3], &b) < 0) return r_notint();
    sval *v;
    redisReply *e = get_typed(x, 1, T_LIST, &v);
    if (e) return e;
    if (!v || !list_range((long long)v->ln, a, b, &from, &to)) return r_arr(0);
    redisReply *r = r_arr((size_t)(to - from + 1));
    for (long long i = from; i <= to; i++) {
        sbuf *it = &v->l[v->lhead + (size_t)i];
        r->element[i - from] = r_str(it->p, it->n);
    }
    return r;
}

static redisReply *c_ltrim(ctx *x)
{
    long long a, b, from, to;
    if (parse_ll(x->argv[2], x->lens[2], &a) < 0 || parse_ll(x->argv[3], x->lens[3], &b) < 0) return r_notint();
    sval *v;
    redisReply *e = get_typed(x, 1, T_LIST, &v);
    if (e) return e;
    if (!v) return r_ok();
    if (!list_range((long long)v->ln, a, b, &from, &to)) from = (long long)v->ln, to = from - 1;
    for (long long i = 0; i < from; i++) free(v->l[v->lhead + (size_t)i].p);
    for (long long i = to + 1; i < (long long)v->ln; i++) free(v->l[v->lhead + (size_t)i].p);
    v->lhead += (size_t)from;
    v->ln = (size_t)(to - from + 1);
    if (v->ln == 0) v->lhead = 0;
    touch(x->s, x->argv[1], x->lens[1]);
    drop_if_empty(x, 1, v);
    return r_ok();
}

static redisReply *c_lindex(ctx *x)
{
    long long i;
    if (parse_ll(x->argv[2], x->lens[2], &i) < 0) return r_notint();
    sval *v;
    redisReply *e = get_typed(x, 1, T_LIST, &v);
    if (e) return e;
    if (!v) return r_nil();
    if (i < 0) i += (long long)v->ln;
    if (i < 0 || i >= (long long)v->ln) return r_nil();
    sbuf *it = &v->l[v->lhead + (size_t)i];
    return r_str(it->p, it->n);
}

/* BLMOVE src dst LEFT|RIGHT LEFT|RIGHT timeout: NULL (blocked) when src is
 * empty, outside MULTI. */
static redisReply *c_blmove(ctx *x)
{
    int from_left = arg_eq(x, 3, "LEFT"), to_left = arg_eq(x, 4, "LEFT");
    if ((!from_left && !arg_eq(x, 3, "RIGHT")) || (!to_left && !arg_eq(x, 4, "RIGHT")))
        return r_err("ERR syntax error");
    char *end;
    char tb[32];
    size_t tn = x->lens[5] < sizeof tb - 1 ? x->lens[5] : sizeof tb - 1;
    memcpy(tb, x->argv[5], tn);
    tb[tn] = '\0';
    double t = strtod(tb, &end);
    if (*end || t < 0) return r_err("ERR timeout is not a float or out of range");
    sval *v;
    redisReply *e = get_typed(x, 1, T_LIST, &v);
    if (e) return e;
    sval *d;
    e = get_typed(x, 2, T_LIST, &d);
    if (e) return e;
    if (!v) return x->c && !x->c->in_multi ? NULL : r_nil();
    sbuf it = from_left ? v->l[v->lhead] : v->l[v->lhead + v->ln - 1];
    if (from_left) v->lhead++;
    v->ln--;
    redisReply *r = r_str(it.p, it.n);
    int same = x->lens[1] == x->lens[2] && !memcmp(x->argv[1], x->argv[2], x->lens[1]);
    if (!same) { touch(x->s, x->argv[1], x->lens[1]); drop_if_empty(x, 1, v); }
    if (!same && !d) d = create(x->s, x->argv[2], x->lens[2], T_LIST);
    list_push(same ? v : d, to_left, it.p, it.n);
    free(it.p);
    touch(x->s, x->argv[2], x->lens[2]);
    return r;
}

/* ------------------------------------------------------------- streams -- */

static redisReply *c_xadd(ctx *x)
{
    int i = 2;
    long long maxlen = -1;
    int approx = 0;
    if (arg_eq(x, 2, "MAXLEN")) {
        i = 3;
        if (i < x->argc && (arg_eq(x, i, "~") || arg_eq(x, i, "="))) { approx = arg_eq(x, i, "~"); i++; }
        if (i >= x->argc || parse_ll(x->argv[i], x->lens[i], &maxlen) < 0 || maxlen < 0)
            return r_err("ERR The MAXLEN argument must be >= 0.");
        i++;
    }
    if (i >= x->argc) return r_err("ERR wrong number of arguments for 'xadd' command");
    int autoid = x->lens[i] == 1 && x->argv[i][0] == '*';
    xid id = { 0, 0 };
    if (!autoid && (!memchr(x->argv[i], '-', x->lens[i]) || xid_parse(x->argv[i], x->lens[i], 0, &id) < 0))
        return r_err("ERR Invalid stream ID specified as stream command argument");
    if (!autoid && !id.ms && !id.seq) return r_err("ERR The ID specified in XADD must be greater than 0-0");
    i++;
    if (x->argc - i < 2 || (x->argc - i) % 2) return r_err("ERR wrong number of arguments for 'xadd' command");
    sval *v;
    redisReply *e = get_typed(x, 1, T_STREAM, &v);
    if (e) return e;
    if (!autoid && v && xid_cmp(id, xs_last_id(v->xs)) <= 0)
        return r_err("ERR The ID specified in XADD is equal or smaller than the target stream top item");
    if (!v) v = create(x->s, x->argv[1], x->lens[1], T_STREAM);
    const xentry *en = autoid ? xs_add(v->xs, (uint64_t)x->now, (size_t)(x->argc - i), x->argv + i, x->lens + i)
                              : xs_add_id(v->xs, id, (size_t)(x->argc - i), x->argv + i, x->lens + i);
    if (x->s->obs.stream_added)
        x->s->obs.stream_added(x->s->obs.ud, x->argv[1], x->lens[1], en->text, en->nf, (const char *const *)en->f,
                               en->fl);
    redisReply *r = r_str(en->text, strlen(en->text));
    /* with `~` only whole nodes go, at most 100 nodes' worth (the default LIMIT) */
    if (maxlen >= 0) xs_trim(v->xs, (uint64_t)maxlen, NULL, approx, approx ? 100 * 100 : 0);
    touch(x->s, x->argv[1], x->lens[1]);
    return r;
}

static redisReply *c_xlen(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_STREAM, &v);
    return e ? e : r_int(v ? (long long)xs_len(v->xs) : 0);
}

/* XRANGE key - +: every entry (the only form the tests use). */
/* WAIT n timeout: the model's replicas are always in sync, so it answers
 * at once (a real server without enough replicas blocks until timeout and
 * answers the same count). */
static redisReply *c_wait(ctx *x)
{
    long long n, ms;
    if (x->s->readonly)   /* waitCommand, Redis 7.0: server.masterhost set */
        return r_err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a "
                     "replica is configured to be writable (which is not the default) writes to replicas are just "
                     "local and are not propagated.");
    if (parse_ll(x->argv[1], x->lens[1], &n) < 0) return r_notint();
    if (parse_ll(x->argv[2], x->lens[2], &ms) < 0) return r_err("ERR timeout is not an integer or out of range");
    if (ms < 0) return r_err("ERR timeout is negative");
    if (x->s->replicas > 0 && x->s->obs.replicas_synced) x->s->obs.replicas_synced(x->s->obs.ud, x->s);
    return r_int(x->s->replicas);
}

static redisReply *entry_reply(const xentry *en)
{
    redisReply *r = r_arr(2), *f = r_arr(en->nf);
    r->element[0] = r_str(en->text, strlen(en->text));
    for (size_t j = 0; j < en->nf; j++) f->element[j] = r_str(en->f[j], en->fl[j]);
    r->element[1] = f;
    return r;
}

static redisReply *c_xrange(ctx *x)
{
    sval *v;
    redisReply *e = get_typed(x, 1, T_STREAM, &v);
    if (e) return e;
    if (!arg_eq(x, 2, "-") || !arg_eq(x, 3, "+")) return r_err("ERR sim: only XRANGE - + is modelled");
    size_t n = v ? xs_len(v->xs) : 0;
    redisReply *r = r_arr(n);
    for (size_t i = 0; i < n; i++) r->element[i] = entry_reply(xs_at(v->xs, i));
    return r;
}

/* XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT n]: Redis 7.0's argument
 * checks, then the trim (sim_stream.c). */
static redisReply *c_xtrim(ctx *x)
{
    int minid = arg_eq(x, 2, "MINID"), i = 3, approx = 0, limited = 0;
    if (!minid && !arg_eq(x, 2, "MAXLEN")) return r_err("ERR syntax error");
    if (i < x->argc && (arg_eq(x, i, "~") || arg_eq(x, i, "="))) approx = arg_eq(x, i++, "~");
    if (i >= x->argc) return r_err("ERR syntax error");
    long long maxlen = 0, limit = 0;
    xid id = { 0, 0 };
    if (minid ? xid_parse(x->argv[i], x->lens[i], 0, &id) < 0 : parse_ll(x->argv[i], x->lens[i], &maxlen) < 0)
        return minid ? r_err("ERR Invalid stream ID specified as stream command argument") : r_notint();
    if (maxlen < 0) return r_err("ERR The MAXLEN argument must be >= 0.");
    for (i++; i < x->argc; i += 2) {
        if (!arg_eq(x, i, "LIMIT") || i + 1 >= x->argc) return r_err("ERR syntax error");
        if (parse_ll(x->argv[i + 1], x->lens[i + 1], &limit) < 0) return r_notint();
        if (limit < 0) return r_err("ERR The LIMIT argument must be >= 0.");
        limited = 1;
    }
    if (limited && !approx) return r_err("ERR syntax error, LIMIT cannot be used without the special ~ option");
    if (approx && !limited) limit = 100 * 100;
    sval *v;
    redisReply *e = get_typed(x, 1, T_STREAM, &v);
    if (e || !v) return e ? e : r_int(0);
    long long n = xs_trim(v->xs, (uint64_t)maxlen, minid ? &id : NULL, approx, limit);
    if (n) touch(x->s, x->argv[1], x->lens[1]);
    return r_int(n);
}

static redisReply *invalid_id(void) { return r_err("ERR Invalid stream ID specified as stream command argument"); }

/* XGROUP CREATE key group id|$ [MKSTREAM] */
static redisReply *c_xgroup(ctx *x)
{
    if (!arg_eq(x, 1, "CREATE")) return r_err("ERR sim: only XGROUP CREATE is modelled");
    if (x->argc < 5 || x->argc > 6 || (x->argc == 6 && !arg_eq(x, 5, "MKSTREAM")))
        return r_err("ERR syntax error");
    sval *v;
    redisReply *e = get_typed(x, 2, T_STREAM, &v);
    if (e) return e;
    if (!v && x->argc < 6)
        return r_err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use "
                     "the MKSTREAM option to create an empty stream automatically.");
    xid id;
    int last = x->lens[4] == 1 && x->argv[4][0] == '$';
    if (!last && xid_parse(x->argv[4], x->lens[4], 0, &id) < 0) return invalid_id();
    if (!v) v = create(x->s, x->argv[2], x->lens[2], T_STREAM);
    char name[72];
    snprintf(name, sizeof name, "%.*s", (int)x->lens[3], x->argv[3]);
    if (xs_group_create(v->xs, name, last ? xs_last_id(v->xs) : id) < 0)
        return r_err("BUSYGROUP Consumer Group name already exists");
    touch(x->s, x->argv[2], x->lens[2]);
    return r_ok();
}

/* The stream argv[key] (*v NULL when absent) and its group argv[group]
 * (NULL when either is): a WRONGTYPE reply, else NULL. */
static redisReply *stream_group(ctx *x, int key, int group, sval **v, xgroup **g)
{
    redisReply *e = get_typed(x, key, T_STREAM, v);
    if (e) return e;
    char name[72];
    snprintf(name, sizeof name, "%.*s", (int)x->lens[group], x->argv[group]);
    *g = *v ? xs_group((*v)->xs, name) : NULL;
    return NULL;
}

static redisReply *nogroup(ctx *x, int key, int group, const char *cmd)
{
    return r_err("NOGROUP No such key '%.*s' or consumer group '%.*s'%s", (int)x->lens[key], x->argv[key],
                 (int)x->lens[group], x->argv[group], cmd);
}

/* XREADGROUP GROUP g consumer [COUNT n] STREAMS key id: one stream, `>`
 * (new entries, nil when none) or an id (the consumer's pending entries
 * after it; a trimmed one comes back with nil fields). */
static redisReply *c_xreadgroup(ctx *x)
{
    long long count = 0;
    int i = 4;
    if (!arg_eq(x, 1, "GROUP")) return r_err("ERR syntax error");
    if (i + 1 < x->argc && arg_eq(x, i, "COUNT")) {
        if (parse_ll(x->argv[i + 1], x->lens[i + 1], &count) < 0) return r_notint();
        if (count < 0) count = 0;
        i += 2;
    }
    if (i + 3 != x->argc || !arg_eq(x, i, "STREAMS")) return r_err("ERR sim: only XREADGROUP of one stream is modelled");
    int k = i + 1, idx = i + 2;
    sval *v;
    xgroup *g;
    redisReply *e = stream_group(x, k, 2, &v, &g);
    if (e) return e;
    char cname[72];
    snprintf(cname, sizeof cname, "%.*s", (int)x->lens[3], x->argv[3]);
    int fresh = x->lens[idx] == 1 && x->argv[idx][0] == '>';
    xid after;
    if (!fresh && xid_parse(x->argv[idx], x->lens[idx], 0, &after) < 0) return invalid_id();
    if (!g) return nogroup(x, k, 2, " in XREADGROUP with GROUP option");
    redisReply *list;
    if (fresh) {
        size_t *at, n = xs_read_new(v->xs, g, cname, (size_t)count, &at);
        if (!n) { free(at); return r_nil(); }
        list = r_arr(n);
        for (size_t j = 0; j < n; j++) list->element[j] = entry_reply(xs_at(v->xs, at[j]));
        free(at);
    } else {
        xid *ids;
        size_t n = xs_read_pending(g, cname, after, (size_t)count, &ids);
        list = r_arr(n);
        for (size_t j = 0; j < n; j++) {
            const xentry *en = xs_find(v->xs, ids[j]);
            if (en) { list->element[j] = entry_reply(en); continue; }
            char t[48];
            snprintf(t, sizeof t, "%llu-%llu", (unsigned long long)ids[j].ms, (unsigned long long)ids[j].seq);
            list->element[j] = r_arr(2);
            list->element[j]->element[0] = r_str(t, strlen(t));
            list->element[j]->element[1] = r_nil();
        }
        free(ids);
    }
    touch(x->s, x->argv[k], x->lens[k]);
    redisReply *r = r_arr(1), *one = r_arr(2);
    one->element[0] = r_str(x->argv[k], x->lens[k]);
    one->element[1] = list;
    r->element[0] = one;
    return r;
}

static redisReply *c_xack(ctx *x)
{
    xid ids[64];
    if (x->argc - 3 > 64) return r_err("ERR sim: XACK of at most 64 ids is modelled");
    for (int i = 3; i < x->argc; i++)
        if (xid_parse(x->argv[i], x->lens[i], 0, &ids[i - 3]) < 0) return invalid_id();
    sval *v;
    xgroup *g;
    redisReply *e = stream_group(x, 1, 2, &v, &g);
    if (e) return e;
    long long n = 0;
    for (int i = 3; g && i < x->argc; i++) n += xs_ack(g, ids[i - 3]);
    return r_int(n);
}

/* XPENDING key group: the summary form, [count, min, max, [[consumer,
 * "n"], ...]] or [0, nil, nil, nil]. */
static redisReply *c_xpending(ctx *x)
{
    if (x->argc != 3) return r_err("ERR sim: only XPENDING key group is modelled");
    sval *v;
    xgroup *g;
    redisReply *e = stream_group(x, 1, 2, &v, &g);
    if (e) return e;
    if (!g) return nogroup(x, 1, 2, "");
    redisReply *r = r_arr(4);
    r->element[0] = r_int((long long)g->npel);
    if (!g->npel) {
        for (int i = 1; i < 4; i++) r->element[i] = r_nil();
        return r;
    }
    char t[48];
    for (int i = 1; i <= 2; i++) {
        xid id = g->pel[i == 1 ? 0 : g->npel - 1].id;
        snprintf(t, sizeof t, "%llu-%llu", (unsigned long long)id.ms, (unsigned long long)id.seq);
        r->element[i] = r_str(t, strlen(t));
    }
    size_t nc = 0;
    for (size_t c = 0; c < g->ncons; c++)
        for (size_t p = 0; p < g->npel; p++)
            if (!strcmp(g->pel[p].consumer, g->consumers[c])) { nc++; break; }
    redisReply *cs = r_arr(nc);
    size_t at = 0;
    for (size_t c = 0; c < g->ncons; c++) {
        size_t cnt = 0;
        for (size_t p = 0; p < g->npel; p++) cnt += !strcmp(g->pel[p].consumer, g->consumers[c]);
        if (!cnt) continue;
        snprintf(t, sizeof t, "%zu", cnt);
        cs->element[at] = r_arr(2);
        cs->element[at]->element[0] = r_str(g->consumers[c], strlen(g->consumers[c]));
        cs->element[at]->element[1] = r_str(t, strlen(t));
        at++;
    }
    r->element[3] = cs;
    return r;
}

/* ------------------------------------------------------------- scripts -- */

static redisReply *dispatch(ctx *x);

/* redis.call from a script: a command on plain C strings. An error reply
 * stops the script (Redis raises it): it is kept in x->err, this call and
 * every later one answer nil and run nothing, and run_script returns it. */
/* Redis 7.0 (scriptVerifyOOM): a script without allow-oom is refused for
 * memory at its first denyoom call made before any write call -- after a
 * write it cannot stop halfway -- with the line of that call. On a read-only
 * replica (scriptVerifyWriteCommandAllow) its first write call is refused
 * with -READONLY, whatever ran before it. */
static redisReply *script_oom(ctx *x, const char *name, size_t n)
{
    const cmd_def *d = find_cmd(name, n);
    int ro = d && (d->flags & F_WRITE) && x->s->readonly;
    if (!ro && (!d || !x->s->oom || x->allow_oom || x->dirty || !(d->flags & F_DENYOOM))) {
        if (d && (d->flags & F_WRITE)) x->dirty = 1;
        return NULL;
    }
    char call[64], sha[41];
    snprintf(call, sizeof call, "redis.call('%s'", d->name);
    for (char *c = call + 12; *c; c++) *c = (char)toupper((unsigned char)*c);
    const char *at = x->src ? strstr(x->src, call) : NULL;
    int line = 1;
    for (const char *c = x->src; at && c < at; c++) line += *c == '\n';
    sha1_hex(x->src ? x->src : "", x->src ? strlen(x->src) : 0, sha);
    return r_err("%s script: %s, on @user_script:%d.", ro ? READONLY_ERR : OOM_ERR, sha, line);
}

static redisReply *rcall_len(ctx *x, int argc, const char **argv, const size_t *lens)
{
    if (x->err) return r_nil();
    if ((x->err = script_oom(x, argv[0], lens[0]))) return r_nil();
    ctx y = { x->s, NULL, argc, argv, lens, x->now, NULL, NULL, 0, 0 };
    redisReply *r = dispatch(&y);
    if (r->type == REDIS_REPLY_ERROR) { x->err = r; return r_nil(); }
    return r;
}

static redisReply *rcall(ctx *x, int argc, const char **argv)
{
    size_t lens[24];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    return rcall_len(x, argc, argv, lens);
}

/* Lua's view of a reply: the string, or NULL for nil/false. */
static int rstr_eq(const redisReply *r, const char *s)
{
    return r->type == REDIS_REPLY_STRING && s && strlen(s) == r->len && !memcmp(r->str, s, r->len);
}

static redisReply *call_owned(ctx *x, redisReply **keep, int argc, const char **argv)
{
    if (*keep) freeReplyObject(*keep);
    *keep = rcall(x, argc, argv);
    return *keep;
}

static void run_quiet(ctx *x, int argc, const char **argv)
{
    freeReplyObject(rcall(x, argc, argv));
}

/* FENCE (scripts.h): the types of the keys its `written` argument marks,
 * the lease and epoch, chunks_applied; any refusal writes the trip key. */
static redisReply *script_fence(ctx *x, const char **K, const char **A)
{
    static const char *const types[] = { "string", "hash", "string", "hash", "hash", "hash", "hash", "stream",
                                         "list", "hash", "list", "hash", "list", "list", "list", "hash", "hash" };
    const char *written = A[4];
    char msg[600];
    msg[0] = '\0';
    redisReply *r = NULL;
    for (size_t i = 0; i < strlen(written) && i < FENCE_NKEYS && !msg[0]; i++) {
        if (written[i] != '1') continue;
        const char *t = call_owned(x, &r, 2, (const char *[]){ "TYPE", K[i] })->str;
        if (strcmp(t, "none") && strcmp(t, types[i]))
            snprintf(msg, sizeof msg, "WRONGTYPE %s is a %s, allocd needs a %s", K[i], t, types[i]);
    }
    if (!msg[0]) {
        int ok = !strcmp(call_owned(x, &r, 2, (const char *[]){ "TYPE", K[0] })->str, "string") &&
                 rstr_eq(call_owned(x, &r, 2, (const char *[]){ "GET", K[0] }), A[0]);
        if (!ok) snprintf(msg, sizeof msg, "FENCED this instance no longer holds the batch lease");
    }
    if (!msg[0]) {
        redisReply *st = call_owned(x, &r, 4, (const char *[]){ "HMGET", K[1], "epoch", "chunks_applied" });
        /* internal of another type, unmarked (allocd always marks it): the
         * call raises, and the script's pcall turns that into the trip */
        const redisReply *c = x->err ? NULL : st->element[1];
        const char *have = c && c->type == REDIS_REPLY_STRING ? c->str : "0";
        if (!c) {
            snprintf(msg, sizeof msg, "ERR fence: %s", x->err->str);
            freeReplyObject(x->err);
            x->err = NULL;
        } else if (!rstr_eq(st->element[0], A[1]))
            snprintf(msg, sizeof msg, "FENCED this instance no longer holds the batch lease");
        else if (strcmp(have, A[2])) snprintf(msg, sizeof msg, "STALE an earlier chunk was not applied");
        else if (!strcmp(A[3], "1")) snprintf(msg, sizeof msg, "FAULT injected by ALLOCD_FAULT_APPLY_ID");
    }
    if (r) freeReplyObject(r);
    if (msg[0]) {
        run_quiet(x, 5, (const char *[]){ "SET", K[2], "1", "PX", "60000" });
        return r_err("%s", msg);
    }
    if (x->c) {
        x->c->fenced = 1;
        snprintf(x->c->fence_token, sizeof x->c->fence_token, "%s", A[0]);
        snprintf(x->c->fence_epoch, sizeof x->c->fence_epoch, "%s", A[1]);
    }
    return r_str("OK", 2);
}

static redisReply *script_lease_acquire(ctx *x, const char **K, const char **A)
{
    redisReply *cur = rcall(x, 2, (const char *[]){ "GET", K[0] });
    if (cur->type == REDIS_REPLY_ERROR) return cur;
    redisReply *r;
    if (rstr_eq(cur, A[0])) {
        run_quiet(x, 3, (const char *[]){ "PEXPIRE", K[0], A[1] });
        redisReply *ep = rcall(x, 3, (const char *[]){ "HGET", K[1], "epoch" });
        r = r_arr(2);
        r->element[0] = r_int(1);
        r->element[1] = ep->type == REDIS_REPLY_STRING ? r_str(ep->str, ep->len) : r_str("0", 1);
        freeReplyObject(ep);
    } else if (cur->type == REDIS_REPLY_STRING && !rstr_eq(cur, A[2])) {
        r = r_arr(3);
        r->element[0] = r_int(0);
        r->element[1] = rcall(x, 2, (const char *[]){ "PTTL", K[0] });
        r->element[2] = r_str(cur->str, cur->len);
    } else {
        run_quiet(x, 5, (const char *[]){ "SET", K[0], A[0], "PX", A[1] });
        redisReply *ep = rcall(x, 4, (const char *[]){ "HINCRBY", K[1], "epoch", "1" });
        if (ep->type == REDIS_REPLY_ERROR) { freeReplyObject(cur); return ep; }
        char buf[24];
        snprintf(buf, sizeof buf, "%lld", ep->integer);
        freeReplyObject(ep);
        r = r_arr(2);
        r->element[0] = r_int(1);
        r->element[1] = r_str(buf, strlen(buf));
    }
    freeReplyObject(cur);
    return r;
}

/* renew (PEXPIRE) and release (DEL): only for the holder of the token. */
static redisReply *script_lease_own(ctx *x, const char **K, const char **A, int renew)
{
    redisReply *cur = rcall(x, 2, (const char *[]){ "GET", K[0] });
    int mine = rstr_eq(cur, A[0]);
    freeReplyObject(cur);
    if (!mine) return r_int(0);
    if (renew) return rcall(x, 3, (const char *[]){ "PEXPIRE", K[0], A[1] });
    return rcall(x, 2, (const char *[]){ "DEL", K[0] });
}

static redisReply *script_order_block(ctx *x, const char **K, const char **A)
{
    run_quiet(x, 4, (const char *[]){ "SET", K[1], A[0], "NX" });
    redisReply *r = r_arr(2);
    r->element[0] = rcall(x, 2, (const char *[]){ "GET", K[1] });
    r->element[1] = rcall(x, 3, (const char *[]){ "INCRBY", K[0], A[1] });
    return r;
}

/* tonumber(s or '0') as Lua gives it back to Redis: an integer */
static long long lua_num(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
}

/* The lottery pool read back after a load (scripts.c): fenced like FENCE,
 * then {'done'}, or {'pool', served, seed or '', LRANGE early}; a pool of
 * allocd version 1 (internal.early_base set) is refused by name. */
static redisReply *script_lottery(ctx *x, const char **K, const char **A)
{
    redisReply *lease = rcall(x, 2, (const char *[]){ "GET", K[2] });
    int mine = rstr_eq(lease, A[0]);
    freeReplyObject(lease);
    if (mine) {
        redisReply *ep = rcall(x, 3, (const char *[]){ "HGET", K[1], "epoch" });
        mine = rstr_eq(ep, A[1]);
        freeReplyObject(ep);
    }
    if (x->err) return r_nil();
    if (!mine) return r_err("FENCED this instance no longer holds the batch lease");
    redisReply *st = rcall(x, 6, (const char *[]){ "HMGET", K[1], "lottery_done", "early_served", "lottery_seed",
                                                  "early_base" });
    if (x->err || st->type != REDIS_REPLY_ARRAY) return st;
    redisReply *r;
    if (rstr_eq(st->element[0], "1")) {
        r = r_arr(1);
        r->element[0] = r_str("done", 4);
    } else if (st->element[3]->type == REDIS_REPLY_STRING) {
        r = r_err("ERR %s holds a lottery pool of allocd version 1: finish it with that version", K[0]);
    } else {
        r = r_arr(4);
        r->element[0] = r_str("pool", 4);
        r->element[1] = r_int(lua_num(st->element[1]));
        r->element[2] = st->element[2]->type == REDIS_REPLY_STRING ? r_str(st->element[2]->str, st->element[2]->len)
                                                                   : r_str("", 0);
        r->element[3] = rcall(x, 4, (const char *[]){ "LRANGE", K[0], "0", "-1" });
    }
    freeReplyObject(st);
    return r;
}

/* give_back of load_prepare: from's items back at the head of to. */
static long long give_back(ctx *x, const char *from, const char *to)
{
    sval *f = lookup(x->s, from, strlen(from), x->now);
    if (!f || f->type != T_LIST) return 0;
    redisReply *items = rcall(x, 4, (const char *[]){ "LRANGE", from, "0", "-1" });
    for (size_t i = items->elements; i-- > 0;) {
        const char *argv[] = { "LPUSH", to, items->element[i]->str };
        size_t lens[] = { 5, strlen(to), items->element[i]->len };
        freeReplyObject(rcall_len(x, 3, argv, lens));
    }
    long long n = (long long)items->elements;
    freeReplyObject(items);
    run_quiet(x, 2, (const char *[]){ "DEL", from });
    return n;
}

static redisReply *script_load_prepare(ctx *x, const char **K, const char **A)
{
    long long converted = 0;
    sval *p = lookup(x->s, K[0], strlen(K[0]), x->now);
    if (p && p->type == T_SET) {
        redisReply *m = rcall(x, 2, (const char *[]){ "SMEMBERS", K[0] });
        run_quiet(x, 2, (const char *[]){ "DEL", K[0] });
        for (size_t i = 0; i < m->elements; i++)
            run_quiet(x, 3, (const char *[]){ "RPUSH", K[0], m->element[i]->str });
        freeReplyObject(m);
        converted = 1;
    }
    long long q = give_back(x, K[1], K[2]);
    if (q > 0) {
        char by[24];
        snprintf(by, sizeof by, "%lld", -q);
        run_quiet(x, 4, (const char *[]){ "HINCRBY", K[3], "dequeued", by });
    }
    long long c = give_back(x, K[4], K[5]);
    run_quiet(x, 2, (const char *[]){ "DEL", K[6] });
    redisReply *r = r_arr(3);
    r->element[0] = r_int(converted);
    r->element[1] = r_int(q);
    r->element[2] = r_int(c);
    return r;
}

/* LOG_TRIM (worker/log_trim.c): at most XLEN - log_maxlen entries, and
 * only below the archive group's position -- its oldest pending entry,
 * or with none pending its last-delivered-id -- with XTRIM MINID ~ ...
 * LIMIT; nothing without the group. XLEN raises WRONGTYPE on a key of
 * another type (the script's answer); the group's XINFO runs under pcall,
 * so no failure of its own escapes. */
static redisReply *script_log_trim(ctx *x, const char **K, const char **A)
{
    redisReply *len = rcall(x, 2, (const char *[]){ "XLEN", K[0] });
    if (len->type != REDIS_REPLY_INTEGER) return len;   /* x->err: the script's answer */
    long long excess = len->integer - strtoll(A[1], NULL, 10);
    freeReplyObject(len);
    sval *v = excess > 0 ? lookup(x->s, K[0], strlen(K[0]), x->now) : NULL;
    xgroup *g = v && v->type == T_STREAM ? xs_group(v->xs, A[0]) : NULL;
    if (!g) return r_int(0);
    xid safe = g->npel ? g->pel[0].id : g->last;
    char id[48], lim[24];
    snprintf(id, sizeof id, "%llu-%llu", (unsigned long long)safe.ms, (unsigned long long)safe.seq);
    snprintf(lim, sizeof lim, "%lld", excess);
    return rcall(x, 7, (const char *[]){ "XTRIM", K[0], "MINID", "~", id, "LIMIT", lim });
}

static redisReply *run_script_body(ctx *x, const char *src);

/* A script with a shebang and without no-writes is a write command
 * (evalGetCommandFlags): a read-only replica refuses it before it runs,
 * in a MULTI at queue time too. */
static int script_writes(const char *src)
{
    const char *nl = strchr(src, '\n'), *nw = strstr(src, "no-writes");
    return !strncmp(src, "#!lua", 5) && !(nw && (!nl || nw < nl));
}

/* EVAL/EVALSHA: the script's effect, by which source it is; an error a
 * command raised inside it is the script's answer (what ran before stays). */
static redisReply *run_script(ctx *x, const char *src)
{
    x->err = NULL;
    x->src = src;
    x->dirty = 0;
    x->allow_oom = !strncmp(src, "#!lua", 5) && strstr(src, "allow-oom") && strstr(src, "allow-oom") < strchr(src, '\n');
    if (x->s->readonly && script_writes(src)) return r_err("%s", READONLY_ERR);
    redisReply *r = run_script_body(x, src);
    if (!x->err) return r;
    freeReplyObject(r);
    redisReply *e = x->err;
    x->err = NULL;
    return e;
}

static redisReply *run_script_body(ctx *x, const char *src)
{
    long long nk;
    if (parse_ll(x->argv[2], x->lens[2], &nk) < 0 || nk < 0)
        return r_err("ERR value is not an integer or out of range");
    if (nk > x->argc - 3) return r_err("ERR Number of keys can't be greater than number of args");
    const char *K[24] = { 0 }, *A[24] = { 0 };
    int na = x->argc - 3 - (int)nk;
    if (nk > 24 || na > 24) return r_err("ERR sim: too many script arguments");
    for (int i = 0; i < nk; i++) K[i] = x->argv[3 + i];
    for (int i = 0; i < na; i++) A[i] = x->argv[3 + nk + i];
    if (src == script_fence_src && nk == FENCE_NKEYS && na == 5) return script_fence(x, K, A);
    if (src == script_lease_acquire_src && nk == 2 && na == 3) return script_lease_acquire(x, K, A);
    if (src == script_lease_renew_src && nk == 1 && na == 2) return script_lease_own(x, K, A, 1);
    if (src == script_lease_release_src && nk == 1 && na == 1) return script_lease_own(x, K, A, 0);
    if (src == script_order_block_src && nk == 2 && na == 2) return script_order_block(x, K, A);
    if (src == script_load_prepare_src && nk == 7) return script_load_prepare(x, K, A);
    if (src == script_lottery_src && nk == 3 && na == 2) return script_lottery(x, K, A);
    if (src == log_trim_src && nk == 1 && na == 2) return script_log_trim(x, K, A);
    return r_err("ERR sim: script not modelled (%d keys, %d args)", (int)nk, na);
}

static const char *const known_scripts[] = {
    script_fence_src, script_lottery_src, script_lease_acquire_src, script_lease_renew_src,
    script_lease_release_src, script_order_block_src, script_load_prepare_src, log_trim_src,
};

static const char *script_by_source(const char *p, size_t n)
{
    for (size_t i = 0; i < sizeof known_scripts / sizeof known_scripts[0]; i++)
        if (strlen(known_scripts[i]) == n && !memcmp(known_scripts[i], p, n)) return known_scripts[i];
    return NULL;
}

static redisReply *c_eval(ctx *x)
{
    const char *src = script_by_source(x->argv[1], x->lens[1]);
    if (!src) return r_err("ERR sim: unknown script");
    char sha[41];
    sha1_hex(src, strlen(src), sha);
    if (dict_find(&x->s->scripts, sha, 40) < 0) dict_add(&x->s->scripts, sha, 40, (void *)src, 0);
    return run_script(x, src);
}

static redisReply *c_evalsha(ctx *x)
{
    long i = x->lens[1] == 40 ? dict_find(&x->s->scripts, x->argv[1], 40) : -1;
    if (i < 0) return r_err("NOSCRIPT No matching script. Please use EVAL.");
    return run_script(x, x->s->scripts.e[i].v);
}

/* Whether EVAL or EVALSHA of argv names a script that writes
 * (script_writes): an unknown one does not, until it runs. */
static int eval_writes(const simr *s, int argc, const char **argv, const size_t *lens)
{
    if (argc < 2) return 0;
    if (lens[0] == 4 && !strncasecmp(argv[0], "eval", 4)) {
        const char *src = script_by_source(argv[1], lens[1]);
        return src && script_writes(src);
    }
    if (lens[0] != 7 || strncasecmp(argv[0], "evalsha", 7) || lens[1] != 40) return 0;
    long i = dict_find(&s->scripts, argv[1], 40);
    return i >= 0 && script_writes(s->scripts.e[i].v);
}

/* ------------------------------------------------------- the dispatcher -- */

static const cmd_def commands[] = {
    { "get", 2, c_get, 0 }, { "set", -3, c_set, F_WD }, { "incrby", 3, c_incrby, F_WD },
    { "del", -2, c_del, F_W }, { "exists", -2, c_exists, 0 }, { "type", 2, c_type, 0 },
    { "pexpire", 3, c_pexpire, F_W }, { "pttl", 2, c_pttl, 0 }, { "rename", 3, c_rename, F_W },
    { "ping", 1, c_ping, 0 }, { "time", 1, c_time, 0 },
    { "hset", -4, c_hset, F_WD }, { "hget", 3, c_hget, 0 }, { "hmget", -3, c_hmget, 0 },
    { "hgetall", 2, c_hgetall, 0 }, { "hscan", -3, c_hscan, 0 }, { "hdel", -3, c_hdel, F_W },
    { "hlen", 2, c_hlen, 0 }, { "hincrby", 4, c_hincrby, F_WD },
    { "sadd", -3, c_sadd, F_WD }, { "srem", -3, c_srem, F_W }, { "smembers", 2, c_smembers, 0 },
    { "rpush", -3, c_rpush, F_WD }, { "lpush", -3, c_lpush, F_WD }, { "llen", 2, c_llen, 0 },
    { "lrange", 4, c_lrange, 0 }, { "ltrim", 4, c_ltrim, F_W }, { "lindex", 3, c_lindex, 0 },
    { "blmove", 6, c_blmove, F_WD },
    { "xadd", -5, c_xadd, F_WD }, { "xlen", 2, c_xlen, 0 }, { "xrange", 4, c_xrange, 0 },
    { "xtrim", -4, c_xtrim, F_W }, { "xgroup", -2, c_xgroup, F_WD }, { "xreadgroup", -7, c_xreadgroup, F_W },
    { "xack", -4, c_xack, F_W }, { "xpending", -3, c_xpending, 0 },
    { "eval", -3, c_eval, 0 }, { "evalsha", -3, c_evalsha, 0 }, { "wait", 3, c_wait, 0 },
};


static const cmd_def *find_cmd(const char *p, size_t n)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strlen(commands[i].name) == n && !strncasecmp(commands[i].name, p, n)) return &commands[i];
    return NULL;
}

static redisReply *arity_or_unknown(const cmd_def *d, int argc, const char **argv, const size_t *lens)
{
    if (!d) {
        char name[64];
        size_t n = lens[0] < 63 ? lens[0] : 63;
        memcpy(name, argv[0], n);
        name[n] = '\0';
        return r_err("ERR unknown command '%s', with args beginning with: ", name);
    }
    if ((d->arity > 0 && argc != d->arity) || (d->arity < 0 && argc < -d->arity))
        return r_err("ERR wrong number of arguments for '%s' command", d->name);
    return NULL;
}

static redisReply *dispatch(ctx *x)
{
    const cmd_def *d = find_cmd(x->argv[0], x->lens[0]);
    redisReply *e = arity_or_unknown(d, x->argc, x->argv, x->lens);
    if (e) return e;
    x->s->commands++;
    return d->fn(x);
}

/* -------------------------------------------------- MULTI, EXEC, WATCH -- */

static void queued_free(queued *q)
{
    for (int i = 0; i < q->argc; i++) free(q->argv[i]);
    free(q->argv);
    free(q->lens);
    memset(q, 0, sizeof *q);
}

static queued queued_copy(int argc, const char **argv, const size_t *lens)
{
    queued q = { argc, xmalloc((size_t)argc * sizeof(char *)), xmalloc((size_t)argc * sizeof(size_t)) };
    for (int i = 0; i < argc; i++) { q.argv[i] = xdup(argv[i], lens[i]); q.lens[i] = lens[i]; }
    return q;
}

static void unwatch(simr_client *c)
{
    for (size_t i = 0; i < c->nw; i++) free(c->w[i].k);
    free(c->w);
    c->w = NULL;
    c->nw = 0;
}

static void discard(simr_client *c)
{
    for (size_t i = 0; i < c->nq; i++) queued_free(&c->q[i]);
    free(c->q);
    c->q = NULL;
    c->nq = c->qcap = 0;
    c->in_multi = c->multi_error = 0;
    unwatch(c);
    c->fenced = 0;
}

static redisReply *c_watch(ctx *x)
{
    simr_client *c = x->c;
    for (int i = 1; i < x->argc; i++) {
        c->w = realloc(c->w, (c->nw + 1) * sizeof *c->w);
        if (!c->w) abort();
        sval *v = lookup(x->s, x->argv[i], x->lens[i], x->now);
        c->w[c->nw++] = (watched){ xdup(x->argv[i], x->lens[i]), x->lens[i],
                                   version(x->s, x->argv[i], x->lens[i]), v ? v->exp : 0 };
    }
    return r_ok();
}

/* A watched key changed since WATCH, or expired since (Redis >= 6.0.9
 * counts an expiry as a change). */
static int watch_broken(ctx *x)
{
    simr_client *c = x->c;
    for (size_t i = 0; i < c->nw; i++) {
        if (version(x->s, c->w[i].k, c->w[i].kn) != c->w[i].ver) return 1;
        if (c->w[i].exp && c->w[i].exp <= x->now) return 1;
    }
    return 0;
}

static redisReply *c_exec(ctx *x)
{
    simr_client *c = x->c;
    if (!c->in_multi) return r_err("ERR EXEC without MULTI");
    /* out of memory since a denyoom command was queued: refused before it
     * runs (processCommand), whatever else is wrong with it */
    for (size_t i = 0; x->s->oom && i < c->nq; i++) {
        const cmd_def *d = find_cmd(c->q[i].argv[0], c->q[i].lens[0]);
        if (d && (d->flags & F_DENYOOM)) {
            discard(c);
            return r_err("EXECABORT Transaction discarded because of: %s", OOM_ERR);
        }
    }
    /* a replica now, and a write was queued: EXEC is a write command
     * (mstate.cmd_flags), refused by processCommand */
    for (size_t i = 0; x->s->readonly && i < c->nq; i++) {
        const cmd_def *d = find_cmd(c->q[i].argv[0], c->q[i].lens[0]);
        if (d && (d->flags & F_WRITE)) {
            discard(c);
            return r_err("EXECABORT Transaction discarded because of: %s", READONLY_ERR);
        }
    }
    if (c->multi_error) {
        discard(c);
        return r_err("EXECABORT Transaction discarded because of previous errors.");
    }
    if (watch_broken(x)) { discard(c); return r_nil(); }
    if (x->s->obs.exec_pre) {
        int argc[c->nq ? c->nq : 1];
        char **argv[c->nq ? c->nq : 1];
        size_t *lens[c->nq ? c->nq : 1];
        for (size_t i = 0; i < c->nq; i++) { argc[i] = c->q[i].argc; argv[i] = c->q[i].argv; lens[i] = c->q[i].lens; }
        x->s->obs.exec_pre(x->s->obs.ud, x->s, c, (int)c->nq, argc, argv, lens);
    }
    redisReply *r = r_arr(c->nq);
    for (size_t i = 0; i < c->nq; i++) {
        ctx y = { x->s, c, c->q[i].argc, (const char **)c->q[i].argv, c->q[i].lens, x->now, NULL, NULL, 0, 0 };
        r->element[i] = dispatch(&y);
        if (!r->element[i]) r->element[i] = r_nil();   /* BLMOVE inside MULTI */
    }
    if (x->s->obs.exec_post) x->s->obs.exec_post(x->s->obs.ud, x->s, c);
    discard(c);
    return r;
}

/* Redis Cluster (sim_cluster.c): ASKING sets the client's flag, which
 * lasts for the next command only -- or, in a transaction, to its EXEC
 * (resetClient); the route hook answers a command of another node's slot
 * with its redirection, and one queued in MULTI flags the transaction as
 * processCommand's flagTransaction does. */
static redisReply *route(simr *s, simr_client *c, int argc, const char **argv, const size_t *lens, int64_t now)
{
    if (lens[0] == 6 && !strncasecmp(argv[0], "ASKING", 6)) {
        if (argc != 1) return r_err("ERR wrong number of arguments for 'asking' command");
        if (c->in_multi) return r_err("ERR sim: ASKING inside MULTI is not modelled");
        c->asking = 1;
        return r_ok();
    }
    int is_exec = lens[0] == 4 && !strncasecmp(argv[0], "EXEC", 4);
    if (is_exec) return NULL;   /* simr_exec checks the queue */
    redisReply *rr = s->route(s->route_ud, c->node, c->asking, 1, &argc, (const char *const *const *)&argv,
                              (const size_t *const *)&lens, now);
    if (!c->in_multi && !(lens[0] == 5 && !strncasecmp(argv[0], "MULTI", 5))) c->asking = 0;
    if (rr && c->in_multi && rr->type == REDIS_REPLY_ERROR) c->multi_error = 1;
    return rr;
}

static redisReply *route_queue(simr *s, simr_client *c, int64_t now)
{
    if (!c->nq) return NULL;
    int argc[c->nq];
    const char *const *argv[c->nq];
    const size_t *lens[c->nq];
    for (size_t i = 0; i < c->nq; i++) {
        argc[i] = c->q[i].argc;
        argv[i] = (const char *const *)c->q[i].argv;
        lens[i] = c->q[i].lens;
    }
    return s->route(s->route_ud, c->node, c->asking, (int)c->nq, argc, argv, lens, now);
}

redisReply *simr_reply_str(int type, const char *s) { return r_strn(type, s, strlen(s)); }
redisReply *simr_reply_int(long long v) { return r_int(v); }
redisReply *simr_reply_arr(size_t n) { return r_arr(n); }

void simr_set_route(simr *s, simr_route_fn fn, void *ud)
{
    s->route = fn;
    s->route_ud = ud;
}

void simr_client_set_node(simr_client *c, int node) { c->node = node; }
int simr_client_node(const simr_client *c) { return c->node; }

int simr_exists(simr *s, const char *key, size_t len, int64_t now_ms) { return lookup(s, key, len, now_ms) != NULL; }

void simr_touch(simr *s, const char *key, size_t len) { touch(s, key, len); }

void simr_keys_each(simr *s, void (*fn)(void *ud, const char *k, size_t kn), void *ud)
{
    for (size_t i = 0; i < s->keys.n; i++)
        if (s->keys.e[i].k) fn(ud, s->keys.e[i].k, s->keys.e[i].kn);
}

redisReply *simr_exec(simr *s, simr_client *c, int argc, const char **argv, const size_t *lens, int64_t now)
{
    if (argc < 1) return r_err("ERR empty command");
    ctx x = { s, c, argc, argv, lens, now, NULL, NULL, 0, 0 };
    const char *n = argv[0];
    size_t nl = lens[0];
#define IS(name) (nl == sizeof name - 1 && !strncasecmp(n, name, nl))
    if (s->route && c->node >= 0) {
        redisReply *rr = route(s, c, argc, argv, lens, now);
        if (rr) return rr;
    }
    /* out of memory, a transaction queues nothing (the queue itself
     * grows): every command but EXEC and DISCARD is refused, after the
     * checks of the command's name and arity */
    if (s->oom && c->in_multi && !IS("EXEC") && !IS("DISCARD")) {
        int known = IS("MULTI") || IS("WATCH") || IS("UNWATCH");
        redisReply *e = known ? NULL : arity_or_unknown(find_cmd(n, nl), argc, argv, lens);
        c->multi_error = 1;
        return e ? e : r_err("%s", OOM_ERR);
    }
    if (IS("MULTI")) {
        if (argc != 1) return r_err("ERR wrong number of arguments for 'multi' command");
        if (c->in_multi) return r_err("ERR MULTI calls can not be nested");
        c->in_multi = 1;
        return r_ok();
    }
    if (IS("EXEC")) {
        /* processCommand checks the queue's keys as one command: a
         * redirection discards the transaction */
        redisReply *rr = s->route && c->node >= 0 && c->in_multi ? route_queue(s, c, now) : NULL;
        if (rr) { discard(c); c->asking = 0; return rr; }
        rr = c_exec(&x);
        c->asking = 0;
        return rr;
    }
    if (IS("DISCARD")) {
        if (!c->in_multi) return r_err("ERR DISCARD without MULTI");
        discard(c);
        return r_ok();
    }
    if (IS("WATCH")) {
        if (c->in_multi) return r_err("ERR WATCH inside MULTI is not allowed");
        if (argc < 2) return r_err("ERR wrong number of arguments for 'watch' command");
        return c_watch(&x);
    }
    if (IS("UNWATCH")) { unwatch(c); return r_ok(); }
#undef IS
    if (c->in_multi) {
        const cmd_def *d = find_cmd(n, nl);
        redisReply *e = arity_or_unknown(d, argc, argv, lens);
        if (e) { c->multi_error = 1; return e; }
        if (s->readonly && ((d->flags & F_WRITE) || eval_writes(s, argc, argv, lens))) {
            c->multi_error = 1;
            return r_err("%s", READONLY_ERR);
        }
        if (c->nq == c->qcap) {
            c->qcap = c->qcap ? c->qcap * 2 : 16;
            c->q = realloc(c->q, c->qcap * sizeof *c->q);
            if (!c->q) abort();
        }
        c->q[c->nq++] = queued_copy(argc, argv, lens);
        return r_status("QUEUED");
    }
    const cmd_def *d = find_cmd(n, nl);
    /* OOM and READONLY come after the unknown-command and arity checks,
     * whose error dispatch gives */
    redisReply *bad = (s->oom || s->readonly) && d ? arity_or_unknown(d, argc, argv, lens) : NULL;
    if (bad) freeReplyObject(bad);
    else if (s->oom && d && (d->flags & F_DENYOOM)) return r_err("%s", OOM_ERR);
    else if (s->readonly && d && (d->flags & F_WRITE)) return r_err("%s", READONLY_ERR);
    redisReply *r = dispatch(&x);
    if (!r) {   /* blocked */
        c->blocked = queued_copy(argc, argv, lens);
        c->is_blocked = 1;
    }
    return r;
}

redisReply *simr_retry_blocked(simr *s, simr_client *c, int64_t now)
{
    if (!c->is_blocked) return NULL;
    if (s->route && c->node >= 0) {
        /* clusterRedirectBlockedClientIfNeeded: MOVED once the slot is
         * another node's (and not being imported here); while it migrates
         * the client stays blocked */
        int argc = c->blocked.argc;
        redisReply *rr = s->route(s->route_ud, c->node, 0, 1, &argc, (const char *const *const *)&c->blocked.argv,
                                  (const size_t *const *)&c->blocked.lens, now);
        if (rr && rr->type == REDIS_REPLY_ERROR && !strncmp(rr->str, "MOVED ", 6)) {
            c->is_blocked = 0;
            queued_free(&c->blocked);
            return rr;
        }
        if (rr) { freeReplyObject(rr); return NULL; }
    }
    ctx x = { s, c, c->blocked.argc, (const char **)c->blocked.argv, c->blocked.lens, now, NULL, NULL, 0, 0 };
    redisReply *r = dispatch(&x);
    if (r) { c->is_blocked = 0; queued_free(&c->blocked); }
    return r;
}

int simr_client_blocked(const simr_client *c) { return c->is_blocked; }

redisReply *simr_block_timeout(simr_client *c)
{
    if (!c->is_blocked) return NULL;
    c->is_blocked = 0;
    queued_free(&c->blocked);
    return r_nil();
}

/* ------------------------------------------------------------- clients -- */

simr_client *simr_client_new(simr *s)
{
    simr_client *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->s = s;
    c->node = -1;
    return c;
}

void simr_client_reset(simr_client *c)
{
    discard(c);
    c->asking = 0;
    if (c->is_blocked) { c->is_blocked = 0; queued_free(&c->blocked); }
}

void simr_client_free(simr_client *c)
{
    if (!c) return;
    simr_client_reset(c);
    free(c);
}

const char *simr_client_fence_token(const simr_client *c) { return c->fenced ? c->fence_token : NULL; }
const char *simr_client_fence_epoch(const simr_client *c) { return c->fenced ? c->fence_epoch : NULL; }

/* ------------------------------------------------------------- servers -- */

simr *simr_new(void)
{
    simr *s = calloc(1, sizeof *s);
    if (!s) abort();
    return s;
}

void simr_free(simr *s)
{
    if (!s) return;
    dict_free(&s->keys, sval_free);
    dict_free(&s->vers, NULL);
    dict_free(&s->scripts, NULL);
    free(s);
}

void simr_set_observer(simr *s, const simr_observer *o) { s->obs = *o; }
void simr_set_replicas(simr *s, int n) { s->replicas = n; }
void simr_set_oom(simr *s, int oom) { s->oom = oom; }
void simr_set_readonly(simr *s, int ro) { s->readonly = ro; }
uint64_t simr_commands(const simr *s) { return s->commands; }

simr_db *simr_snapshot(simr *s)
{
    simr_db *d = calloc(1, sizeof *d);
    if (!d) abort();
    for (size_t i = 0; i < s->keys.n; i++)
        if (s->keys.e[i].k) dict_add(&d->keys, s->keys.e[i].k, s->keys.e[i].kn, sval_copy(s->keys.e[i].v), 0);
    return d;
}

void simr_restore(simr *s, const simr_db *d)
{
    for (size_t i = 0; i < s->keys.n; i++)
        if (s->keys.e[i].k) touch(s, s->keys.e[i].k, s->keys.e[i].kn);
    dict_free(&s->keys, sval_free);
    for (size_t i = 0; i < d->keys.n; i++)
        if (d->keys.e[i].k) {
            dict_add(&s->keys, d->keys.e[i].k, d->keys.e[i].kn, sval_copy(d->keys.e[i].v), 0);
            touch(s, d->keys.e[i].k, d->keys.e[i].kn);
        }
    simr_flush_scripts(s);
}

void simr_db_free(simr_db *d)
{
    if (!d) return;
    dict_free(&d->keys, sval_free);
    free(d);
}

void simr_flush_scripts(simr *s) { dict_free(&s->scripts, NULL); }

/* ------------------------------------------------------------- reading -- */

static sval *peek(simr *s, const char *key, int type)
{
    long i = dict_find(&s->keys, key, strlen(key));
    sval *v = i < 0 ? NULL : s->keys.e[i].v;
    return v && v->type == type ? v : NULL;
}

const char *simr_get_str(simr *s, const char *key, size_t *len, int64_t now)
{
    sval *v = peek(s, key, T_STR);
    if (!v || (v->exp && v->exp <= now)) return NULL;
    if (len) *len = v->s.n;
    return v->s.p;
}

const char *simr_hget(simr *s, const char *key, const char *field, size_t *len)
{
    sval *v = peek(s, key, T_HASH);
    long j = v ? dict_find(&v->h, field, strlen(field)) : -1;
    if (j < 0) return NULL;
    sbuf *b = v->h.e[j].v;
    if (len) *len = b->n;
    return b->p;
}

size_t simr_llen(simr *s, const char *key)
{
    sval *v = peek(s, key, T_LIST);
    return v ? v->ln : 0;
}

size_t simr_hlen(simr *s, const char *key)
{
    sval *v = peek(s, key, T_HASH);
    return v ? v->h.live : 0;
}

const char *simr_lindex(simr *s, const char *key, size_t i, size_t *len)
{
    sval *v = peek(s, key, T_LIST);
    if (!v || i >= v->ln) return NULL;
    *len = v->l[v->lhead + i].n;
    return v->l[v->lhead + i].p;
}

void simr_hash_each(simr *s, const char *key, simr_pair_fn fn, void *ud)
{
    sval *v = peek(s, key, T_HASH);
    for (size_t i = 0; v && i < v->h.n; i++) {
        const dent *d = &v->h.e[i];
        if (d->k) fn(ud, d->k, d->kn, ((sbuf *)d->v)->p, ((sbuf *)d->v)->n);
    }
}

void simr_stream_each(simr *s, const char *key, simr_entry_fn fn, void *ud)
{
    sval *v = peek(s, key, T_STREAM);
    for (size_t i = 0; v && i < xs_len(v->xs); i++) {
        const xentry *en = xs_at(v->xs, i);
        fn(ud, en->text, en->nf, (const char *const *)en->f, en->fl);
    }
}

int simr_stream_bounds(simr *s, const char *key, uint64_t *first_ms, uint64_t *first_seq, uint64_t *last_ms,
                       uint64_t *last_seq, size_t *len)
{
    sval *v = peek(s, key, T_STREAM);
    if (!v) return -1;
    const xentry *f = xs_at(v->xs, 0);
    xid l = xs_last_id(v->xs);
    if (first_ms) *first_ms = f ? f->id.ms : 0;
    if (first_seq) *first_seq = f ? f->id.seq : 0;
    if (last_ms) *last_ms = l.ms;
    if (last_seq) *last_seq = l.seq;
    if (len) *len = xs_len(v->xs);
    return 0;
}
