/* chaos_core.c -- the chaos run of allocd (see chaos_core.h for what and why).
 *
 * Threads: N producers (seeded request mix, paced over the push phase), one
 * follower (reads results of buys and pushes confirms and cancels for the
 * granted ones, some late enough to meet an expiry), one admin thread
 * (set_capacity, pause/resume, DEBUG SLEEP) and the main thread, which runs
 * the fault schedule (kill -9 allocd, restart Redis, outage) and then the
 * drain and the checks. Every push retries until Redis acknowledges it, so
 * at the end every pushed id is known to be in Redis at least once.
 *
 * The checker trusts nothing allocd wrote about itself: it replays the event
 * log (P:{B}:log) from the first entry with the rules of docs/PROTOCOL.md
 * section 7, checking capacity and per-user limits at every step, and
 * compares the outcome with holders, free and capacity; it matches every
 * result and every log entry to a pushed request. *
 * Every Redis command goes through a small router (rconn, rcmd): one context
 * per node and a slot -> node map. A single Redis is node 0 and serves every
 * slot; in cluster mode the map comes from CLUSTER SLOTS and MOVED corrects
 * it, so the same producers and the same checker serve both topologies.
 */
#include "chaos_core.h"
#include "chaos_archive.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <jansson.h>

#include "core/answer_watch.h"
#include "redis/cluster_slots.h"
#include "allocctl/ctl_replay.h"
#include "harness.h"

/* ------------------------------------------------------------ basics -- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t rnd(uint64_t *s, uint32_t n) { return n ? (uint32_t)(splitmix(s) % n) : 0; }
static double rndf(uint64_t *s) { return (double)(splitmix(s) >> 11) / (double)(1ULL << 53); }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "chaos: out of memory\n"); abort(); }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) { fprintf(stderr, "chaos: out of memory\n"); abort(); }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}

static char *xmemdup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* ----------------------------------------------------------- batches -- */

enum { B_CS1, B_CS2, B_CR1, NB };
#define CHAOS_WAIT_MS 1200   /* cs2 and cr1: the longest a waiting request waits */
#define MAX_ITEMS 96

typedef struct batch_def {
    const char *name;
    int room;
    int per_user;
    int hold_ms;         /* stock reservations; rooms: held beds (contract 9.4) */
    int wait_ms;         /* > 0: some requests carry "wait":true (contract 9.5) */
    int max_group;
    int n_items;
    char items[MAX_ITEMS][16];
    long long caps[MAX_ITEMS];
    char attrs[MAX_ITEMS][96];
} batch_def;

#define STOCK_USERS 1500
#define ROOM_USERS 360

/* ---------------------------------------------------------- records -- */

enum { EXP_VALID = 0, EXP_INVALID = 1, EXP_CTL = 2 };

/* One pushed readable id (the first push; duplicates are not new records). */
typedef struct rec {
    char *id;
    char *json;          /* the bytes of the first push */
    char *user;          /* NULL for admin commands and invalid requests */
    char op[16];
    uint32_t len;
    uint8_t batch;
    uint8_t expect;
    /* filled by the checker */
    uint8_t seen;
    uint8_t status;      /* 1 granted 2 done 3 rejected 4 invalid */
    uint16_t want_grants;
    uint16_t ev_grant, ev_release, ev_confirm, ev_cancel, ev_capacity, ev_state;
    uint16_t ev_wait, ev_wait_served;
    char result_op[16];
} rec;

typedef struct recvec {
    rec *v;
    size_t n, cap;
} recvec;

static size_t recvec_add(recvec *rv, rec r)
{
    if (rv->n == rv->cap) {
        rv->cap = rv->cap ? rv->cap * 2 : 1024;
        rec *nv = realloc(rv->v, rv->cap * sizeof *nv);
        if (!nv) { fprintf(stderr, "chaos: out of memory\n"); abort(); }
        rv->v = nv;
    }
    rv->v[rv->n] = r;
    return rv->n++;
}

static void recvec_free(recvec *rv)
{
    for (size_t i = 0; i < rv->n; i++) {
        free(rv->v[i].id);
        free(rv->v[i].json);
        free(rv->v[i].user);
    }
    free(rv->v);
    memset(rv, 0, sizeof *rv);
}

/* ------------------------------------------------------- the context -- */

typedef struct chaos_ctx chaos_ctx;

/* A granted buy the follower may confirm or cancel. */
typedef struct candidate {
    char id[72];
    char user[72];
    uint8_t batch;
    uint8_t tries;
} candidate;

typedef struct counters {
    long pushed, attempts, retries, dups, dead_acked[NB], dead_attempts[NB], invalid;
} counters;

#define MAX_NODES 3
#define MAX_INST 8

/* Connections to Redis, routed by key slot: one context per node (a single
 * Redis is node 0 and every slot maps to it). */
typedef struct rconn {
    redisContext *c[MAX_NODES];
} rconn;

typedef struct producer {
    chaos_ctx *cx;
    int idx;
    uint64_t rng;
    rconn rc;
    recvec recs;
    long n;               /* entries to push */
    counters k;
    pthread_t th;
} producer;

struct chaos_ctx {
    const chaos_params *p;
    chaos_archive *arch;         /* --archive, else NULL */
    chaos_report *rep;
    batch_def b[NB];
    char names[NB][16];
    harness_redis redis;         /* the single Redis, or cluster node 0 (allocd's dir) */
    harness_redis node[MAX_NODES];   /* cluster nodes 1.. (node[0] unused) */
    int cluster, n_nodes;
    int port[MAX_NODES];
    _Atomic int16_t slot_node[CLUSTER_SLOTS];  /* slot -> node, updated on MOVED */
    uint16_t bslot[NB];
    int n_inst;
    harness_allocd allocd[MAX_INST];
    char inst_conf[MAX_INST][768];
    pid_t paused_pid;
    char allocd_conf[512];
    double t0;
    double seconds;
    atomic_int producers_running;
    atomic_int stop_helpers;
    atomic_int redis_down;       /* an outage is in progress */
    atomic_int answer_stop;      /* the answer watcher stops */
    pthread_t answer_th;
    atomic_long follow_pushed;
    /* follower input */
    pthread_mutex_t mu;
    candidate *cand;
    size_t n_cand, cap_cand;
    /* follower and admin records */
    producer follower, admin;
    int n_producers;
    producer *prod;
    pthread_mutex_t msg_mu;
};

static void violation(chaos_ctx *cx, long *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void violation(chaos_ctx *cx, long *counter, const char *fmt, ...)
{
    pthread_mutex_lock(&cx->msg_mu);
    chaos_report *r = cx->rep;
    if (counter) (*counter)++;
    r->violations++;
    if (r->n_msgs < CHAOS_MAX_MSGS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msgs[r->n_msgs], sizeof r->msgs[0], fmt, ap);
        va_end(ap);
        r->n_msgs++;
    }
    pthread_mutex_unlock(&cx->msg_mu);
}

static void progress(chaos_ctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void progress(chaos_ctx *cx, const char *fmt, ...)
{
    if (!cx->p->verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "chaos %7.2fs: ", now_s() - cx->t0);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ------------------------------------------------------ pushing, retry -- */

/* Sleeps (in small steps) until t seconds after the start. */
static void sleep_until(chaos_ctx *cx, double t)
{
    for (;;) {
        double left = t - (now_s() - cx->t0);
        if (left <= 0) return;
        harness_sleep_ms(left > 0.05 ? 50 : (int)(left * 1000) + 1);
    }
}

/* ---------------------------------------------- routing by key slot -- */

/* A single Redis is one node that serves every slot; in cluster mode each
 * node has a context and the slot map (from CLUSTER SLOTS, corrected by
 * every MOVED) says which one serves a key. All keys of a batch carry its
 * tag {B}, so a batch is one slot (cx->bslot). */

static redisContext *node_connect(chaos_ctx *cx, int node)
{
    struct timeval tv = { 5, 0 };
    redisContext *c = cx->cluster ? redisConnectWithTimeout("127.0.0.1", cx->port[node], tv)
                                  : redisConnectUnixWithTimeout(cx->redis.sock, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

static int slot_node(chaos_ctx *cx, uint16_t slot)
{
    int n = atomic_load(&cx->slot_node[slot]);
    return n >= 0 && n < cx->n_nodes ? n : 0;
}

static uint16_t key_slot(const char *key) { return cluster_key_slot(key, strlen(key)); }

static void rc_close(rconn *rc)
{
    for (int i = 0; i < MAX_NODES; i++) {
        if (rc->c[i]) redisFree(rc->c[i]);
        rc->c[i] = NULL;
    }
}

/* The context of `node`, connecting if needed (NULL if that fails). */
static redisContext *rc_node(chaos_ctx *cx, rconn *rc, int node)
{
    if (!rc->c[node]) rc->c[node] = node_connect(cx, node);
    return rc->c[node];
}

/* The same, retrying for up to 600 s (a Redis outage). */
static redisContext *rc_node_retry(chaos_ctx *cx, rconn *rc, int node, int who)
{
    double start = now_s();
    for (;;) {
        redisContext *c = rc_node(cx, rc, node);
        if (c) return c;
        if (now_s() - start > 600) {
            violation(cx, &cx->rep->other, "producer %d could not reach Redis node %d for 600 s", who, node);
            return NULL;
        }
        harness_sleep_ms(30);
    }
}

/* Reads a redirect out of an error reply: MOVED and ASK update the slot map
 * (ASK only for this one retry: *ask is set), TRYAGAIN and CLUSTERDOWN wait a
 * little. Returns 1 when the command should be sent again. */
static int rc_redirect(chaos_ctx *cx, const redisReply *r, int *ask_node)
{
    if (ask_node) *ask_node = -1;
    if (!r || r->type != REDIS_REPLY_ERROR || !r->str) return 0;
    if (!strncmp(r->str, "MOVED ", 6) || !strncmp(r->str, "ASK ", 4)) {
        uint16_t slot;
        cluster_node n;
        if (cluster_parse_redirect(r->str, &slot, &n) != 0) return 0;
        int idx = -1;
        for (int i = 0; i < cx->n_nodes; i++)
            if (cx->port[i] == n.port) idx = i;
        if (idx < 0) return 0;
        if (r->str[0] == 'M') atomic_store(&cx->slot_node[slot], (int16_t)idx);
        else if (ask_node) *ask_node = idx;
        return 1;
    }
    if (!strncmp(r->str, "TRYAGAIN", 8) || !strncmp(r->str, "CLUSTERDOWN", 11)) {
        harness_sleep_ms(20);
        return 1;
    }
    return 0;
}

/* One command on the node serving `slot`, following MOVED/ASK/TRYAGAIN; a
 * connection error drops that context and returns NULL. */
static redisReply *rcmdv(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, va_list ap)
{
    char *buf = NULL;
    int len = redisvFormatCommand(&buf, fmt, ap);
    if (len < 0) return NULL;
    int node = slot_node(cx, slot), asking = 0;
    redisReply *r = NULL;
    for (int attempt = 0; attempt < 50; attempt++) {
        redisContext *c = rc_node(cx, rc, node);
        if (!c) break;
        if (asking) redisAppendCommand(c, "ASKING");
        redisAppendFormattedCommand(c, buf, (size_t)len);
        if (asking) {
            redisReply *a = NULL;
            if (redisGetReply(c, (void **)&a) != REDIS_OK) a = NULL;
            if (a) freeReplyObject(a);
        }
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            redisFree(c);
            rc->c[node] = NULL;
            r = NULL;
            break;
        }
        int ask = -1;
        if (!rc_redirect(cx, r, &ask)) break;
        freeReplyObject(r);
        r = NULL;
        asking = ask >= 0;
        node = asking ? ask : slot_node(cx, slot);
    }
    redisFreeCommand(buf);
    return r;
}

static redisReply *rcmd(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = rcmdv(cx, rc, slot, fmt, ap);
    va_end(ap);
    return r;
}

/* proc_int over the router: integer or numeric string, 0 for nil, -1 else. */
static long long rint_(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = rcmdv(cx, rc, slot, fmt, ap);
    va_end(ap);
    return proc_reply_int(r);
}

#define GROUP 32
#define GROUP_MAX 32

typedef struct pending {
    uint8_t batch;
    uint8_t ctl;          /* push to P:{B}:ctl instead of the queue */
    uint8_t dead;         /* garbage without a readable id */
    const char *json;
    size_t len;
} pending;

/* RPUSHes every entry, pipelined; on any error (connection lost, LOADING,
 * timeout) reconnects and pushes the whole group again. Entries whose first
 * try did reach Redis are then pushed twice: allocd must treat the second as
 * a duplicate (or, for dead garbage, as another dead entry). */
static int push_group(producer *pr, const pending *g, size_t n)
{
    chaos_ctx *cx = pr->cx;
    if (n == 0) return 0;
    int node_of[GROUP_MAX];
    for (;;) {
        int ok = 1, io = 0;
        for (size_t i = 0; i < n; i++) {
            node_of[i] = slot_node(cx, cx->bslot[g[i].batch]);
            if (!rc_node_retry(cx, &pr->rc, node_of[i], pr->idx)) return -1;
        }
        for (size_t i = 0; i < n; i++) {
            redisAppendCommand(pr->rc.c[node_of[i]], "RPUSH alloc:{%s}:%s %b", cx->b[g[i].batch].name,
                               g[i].ctl ? "ctl" : "queue", g[i].json, g[i].len);
            pr->k.attempts++;
            if (g[i].dead) pr->k.dead_attempts[g[i].batch]++;
        }
        /* each context answers in the order it was asked */
        for (size_t i = 0; i < n; i++) {
            redisReply *r = NULL;
            if (redisGetReply(pr->rc.c[node_of[i]], (void **)&r) != REDIS_OK) { ok = 0; io = 1; break; }
            if (!r || r->type != REDIS_REPLY_INTEGER) {
                ok = 0;
                rc_redirect(cx, r, NULL);
            }
            if (r) freeReplyObject(r);
        }
        if (ok) {
            for (size_t i = 0; i < n; i++)
                if (g[i].dead) pr->k.dead_acked[g[i].batch]++;
            return 0;
        }
        if (io || cx->n_nodes == 1) rc_close(&pr->rc);
        pr->k.retries++;
        harness_sleep_ms(20);
    }
}

/* ------------------------------------------------- request generation -- */

typedef struct gen {
    char buf[8192];
    size_t len;
    char id[96];
    char user[72];
    char op[16];
    int expect;         /* EXP_VALID / EXP_INVALID, or -1 = dead (no id) */
} gen;

static void gen_set(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void gen_set(gen *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g->buf, sizeof g->buf, fmt, ap);
    va_end(ap);
    g->len = n < 0 ? 0 : (size_t)n < sizeof g->buf ? (size_t)n : sizeof g->buf - 1;
}

static const char *pick_item(uint64_t *rng, const batch_def *b)
{
    /* early items are the big ones; weight them */
    uint32_t r = rnd(rng, 100);
    int i = r < 45 ? 0 : r < 70 ? 1 : (int)(2 + rnd(rng, (uint32_t)b->n_items - 2));
    return b->items[i];
}

static void gen_stock(uint64_t *rng, const batch_def *b, gen *g)
{
    snprintf(g->user, sizeof g->user, "u%u", rnd(rng, STOCK_USERS));
    uint32_t r = rnd(rng, 100);
    if (r < 88) {
        snprintf(g->op, sizeof g->op, "buy");
        uint32_t q = rnd(rng, 10);
        int qty = q < 7 ? 1 : q < 9 ? 2 : 3;
        const char *item = rnd(rng, 50) == 0 ? "no-such-sku" : pick_item(rng, b);
        if (rnd(rng, 4) == 0)   /* qty left out: default 1 */
            gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"%s\"}",
                    g->id, g->user, item);
        else
            gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"%s\",\"qty\":%d,\"note\":{\"x\":[1,2]}%s}",
                    g->id, g->user, item, qty, b->wait_ms && rnd(rng, 3) == 0 ? ",\"wait\":true" : "");
    } else if (r < 94) {
        snprintf(g->op, sizeof g->op, r < 91 ? "confirm" : "cancel");
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"%s\",\"order\":\"%u\"}",
                g->id, g->user, g->op, 1000 + rnd(rng, 100000));
    } else if (r < 97) {
        snprintf(g->op, sizeof g->op, "choose");   /* wrong_kind */
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"R001\"}", g->id, g->user);
    } else {
        snprintf(g->op, sizeof g->op, "buy");       /* a big qty: sold_out or limit */
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"%s\",\"qty\":%u}",
                g->id, g->user, b->items[rnd(rng, (uint32_t)b->n_items)], 2 + rnd(rng, 1000));
    }
    g->expect = EXP_VALID;
}

static int gen_prefs(uint64_t *rng, const batch_def *b, char *out, size_t cap)
{
    int n = 1 + (int)rnd(rng, 3);
    size_t len = 0;
    out[len++] = '[';
    for (int i = 0; i < n; i++) {
        const char *room = rnd(rng, 30) == 0 ? "R999" : b->items[rnd(rng, (uint32_t)b->n_items)];
        len += (size_t)snprintf(out + len, cap - len, "%s\"%s\"", i ? "," : "", room);
    }
    snprintf(out + len, cap - len, "]");
    return n;
}

static const char *gen_filter(uint64_t *rng)
{
    static const char *const filters[] = {
        "{\"building\":\"A\"}", "{\"gender\":\"F\",\"floor\":2}", "{}",
        "{\"building\":\"B\",\"gender\":\"M\"}", "{\"building\":\"Z\"}", "{\"floor\":4}",
    };
    return filters[rnd(rng, sizeof filters / sizeof filters[0])];
}

/* auto (section 3): prefs, prefs and a filter, or a filter alone. */
static void gen_room_auto(uint64_t *rng, const batch_def *b, gen *g)
{
    char prefs[256];
    snprintf(g->op, sizeof g->op, "auto");
    uint32_t how = rnd(rng, 3);
    gen_prefs(rng, b, prefs, sizeof prefs);
    if (how == 0)
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"auto\",\"prefs\":%s%s}", g->id, g->user, prefs,
                b->wait_ms && rnd(rng, 3) == 0 ? ",\"wait\":true" : "");
    else if (how == 1)
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"auto\",\"prefs\":%s,\"filter\":%s}",
                g->id, g->user, prefs, gen_filter(rng));
    else
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"auto\",\"filter\":%s}",
                g->id, g->user, gen_filter(rng));
}

/* groups formed by consent (9.2): the members' own requests */
static void gen_room_consent(uint64_t *rng, const batch_def *b, gen *g)
{
    char prefs[256];
    uint32_t k = rnd(rng, 6), o = rnd(rng, ROOM_USERS), o2 = rnd(rng, ROOM_USERS);
    static const char *const ops[] = { "invite", "accept", "decline", "leave", "prefs", "group" };
    snprintf(g->op, sizeof g->op, "%s", ops[k]);
    gen_prefs(rng, b, prefs, sizeof prefs);
    switch (k) {
    case 0: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"invite\",\"to\":[\"s%u\",\"s%u\"]}",
                    g->id, g->user, o, o2); break;
    case 1: case 2: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"%s\",\"from\":\"s%u\"}",
                            g->id, g->user, ops[k], o); break;
    case 3: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"leave\"}", g->id, g->user); break;
    case 4: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"prefs\",\"prefs\":%s,\"version\":%u}",
                    g->id, g->user, prefs, rnd(rng, 3)); break;
    default: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"group\"}", g->id, g->user); break;
    }
}

/* A listed group of 2 - 4 distinct members with user u first, now and
 * then one too many (group_too_large). */
static void gen_room_group(uint64_t *rng, const batch_def *b, gen *g, uint32_t u)
{
    char prefs[256];
    snprintf(g->op, sizeof g->op, "group");
    int n = 2 + (int)rnd(rng, 3);
    if (rnd(rng, 12) == 0) n = b->max_group + 1;     /* group_too_large */
    char members[512];
    size_t len = (size_t)snprintf(members, sizeof members, "[\"%s\"", g->user);
    uint32_t used[16];
    used[0] = u;
    for (int i = 1; i < n; i++) {
        uint32_t m;
        int dup;
        do {
            m = rnd(rng, ROOM_USERS);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= used[j] == m;
        } while (dup);
        used[i] = m;
        len += (size_t)snprintf(members + len, sizeof members - len, ",\"s%u\"", m);
    }
    snprintf(members + len, sizeof members - len, "]");
    gen_prefs(rng, b, prefs, sizeof prefs);
    if (rnd(rng, 2))
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"group\",\"members\":%s,\"prefs\":%s%s}",
                g->id, g->user, members, prefs, b->wait_ms && rnd(rng, 4) == 0 ? ",\"wait\":true" : "");
    else
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"group\",\"members\":%s,\"prefs\":%s,\"filter\":%s}",
                g->id, g->user, members, prefs, gen_filter(rng));
}

static void gen_room(uint64_t *rng, const batch_def *b, gen *g)
{
    uint32_t u = rnd(rng, ROOM_USERS);
    snprintf(g->user, sizeof g->user, "s%u", u);
    uint32_t r = rnd(rng, 100);
    g->expect = EXP_VALID;
    if (r < 20) {
        snprintf(g->op, sizeof g->op, "choose");
        const char *room = rnd(rng, 40) == 0 ? "R999" : b->items[rnd(rng, (uint32_t)b->n_items)];
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"%s\"%s}", g->id, g->user, room,
                b->wait_ms && rnd(rng, 3) == 0 ? ",\"wait\":true" : "");
    } else if (r < 45) {
        gen_room_auto(rng, b, g);
    } else if (r < 55 && rnd(rng, 3)) {
        gen_room_consent(rng, b, g);
    } else if (r < 55) {
        gen_room_group(rng, b, g, u);
    } else if (r < 72) {
        snprintf(g->op, sizeof g->op, "switch");
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"switch\",\"room\":\"%s\"}", g->id, g->user,
                rnd(rng, 40) == 0 ? "R999" : b->items[rnd(rng, (uint32_t)b->n_items)]);
    } else if (r < 80) {
        /* swaps (9.3): half of the offers find their answer */
        snprintf(g->op, sizeof g->op, "swap");
        uint32_t w = rnd(rng, 8) ? rnd(rng, ROOM_USERS) : u + 1 >= ROOM_USERS ? 0 : u + 1;
        if (w == u) w = (u + 1) % ROOM_USERS;
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"swap\",\"with\":\"s%u\"}", g->id, g->user, w);
    } else if (r < 97) {
        snprintf(g->op, sizeof g->op, "release");
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"release\"}", g->id, g->user);
    } else {
        snprintf(g->op, sizeof g->op, "buy");   /* wrong_kind */
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"R001\"}", g->id, g->user);
    }
}

/* Garbage: unreadable (dead, expect = -1) or readable but invalid. */
static void gen_garbage(uint64_t *rng, int room, gen *g)
{
    uint32_t k = rnd(rng, 20);
    g->expect = EXP_INVALID;
    g->user[0] = '\0';
    snprintf(g->op, sizeof g->op, "?");
    switch (k) {
    case 0: gen_set(g, "this is not json"); g->expect = -1; break;
    case 1: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":", g->id); g->expect = -1; break;
    case 2: gen_set(g, "[\"%s\",\"buy\"]", g->id); g->expect = -1; break;
    case 3: gen_set(g, "{\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\"}"); g->expect = -1; break;
    case 4: gen_set(g, "{\"id\":%u,\"user\":\"u1\",\"op\":\"buy\"}", rnd(rng, 1000)); g->expect = -1; break;
    case 5: gen_set(g, "%s", ""); g->expect = -1; break;
    case 6: gen_set(g, "{\"id\":\"\xff\xfe%s\",\"user\":\"u1\"}", g->id); g->expect = -1; break;
    case 7: {
        size_t n = (size_t)snprintf(g->buf, sizeof g->buf, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\",\"pad\":\"", g->id);
        while (n < 5000) g->buf[n++] = 'x';
        n += (size_t)snprintf(g->buf + n, sizeof g->buf - n, "\"}");
        g->len = n;
        g->expect = -1;
        break;
    }
    case 8: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"steal\"}", g->id); break;
    case 9: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":0}", g->id); break;
    case 10: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":\"2\"}", g->id); break;
    case 11: gen_set(g, "{\"id\":\"%s\",\"op\":\"release\"}", g->id); break;
    case 12: {
        /* an id of 65 characters: readable, so it is answered (invalid) under that id */
        size_t n = strlen(g->id);
        while (n < 65) g->id[n++] = 'x';
        g->id[65] = '\0';
        gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"release\"}", g->id);
        break;
    }
    case 13: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\"}", g->id); break;
    case 14: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"group\",\"members\":[\"u2\"],\"prefs\":[\"R001\"]}", g->id); break;
    case 15: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"auto\"}", g->id); break;
    case 16: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"confirm\",\"order\":\"12ab\"}", g->id); break;
    case 17: gen_set(g, "{\"id\":\"%s\",\"user\":\"\",\"op\":\"release\"}", g->id); break;
    case 18: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"pause\"}", g->id); break;
    default: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":1e99}", g->id); break;
    }
    (void)room;
}

/* -------------------------------------------------------- producers -- */


static void publish_candidates(chaos_ctx *cx, const rec *const *buys, size_t n)
{
    if (n == 0) return;
    pthread_mutex_lock(&cx->mu);
    if (cx->n_cand + n > cx->cap_cand) {
        size_t cap = (cx->cap_cand ? cx->cap_cand : 1024);
        while (cap < cx->n_cand + n) cap *= 2;
        candidate *c = realloc(cx->cand, cap * sizeof *c);
        if (!c) abort();
        cx->cand = c;
        cx->cap_cand = cap;
    }
    for (size_t i = 0; i < n; i++) {
        candidate *c = &cx->cand[cx->n_cand++];
        memset(c, 0, sizeof *c);
        snprintf(c->id, sizeof c->id, "%s", buys[i]->id);
        snprintf(c->user, sizeof c->user, "%s", buys[i]->user);
        c->batch = buys[i]->batch;
    }
    pthread_mutex_unlock(&cx->mu);
}

/* The requests a producer pushes in one go, and what it owns until then. */
typedef struct push_group_buf {
    pending grp[GROUP];
    char *owned[GROUP];         /* bytes that belong to no rec (dups, dead) */
    size_t n, owned_n;
    size_t buys_idx[GROUP], n_buys;   /* recs of valid buys, for the follower */
} push_group_buf;

/* A duplicate id among the last 3000: the same bytes again, or other bytes
 * under the same id. */
static void add_duplicate(producer *pr, push_group_buf *gb, gen *g)
{
    chaos_ctx *cx = pr->cx;
    size_t lo = pr->recs.n > 3000 ? pr->recs.n - 3000 : 0;
    const rec *o = &pr->recs.v[lo + rnd(&pr->rng, (uint32_t)(pr->recs.n - lo))];
    int batch = o->batch;
    if (rnd(&pr->rng, 2)) {
        gb->grp[gb->n++] = (pending){ .batch = (uint8_t)batch, .json = o->json, .len = o->len };
    } else {
        if (cx->b[batch].room)
            gen_set(g, "{\"id\":\"%s\",\"user\":\"dupuser\",\"op\":\"release\"}", o->id);
        else
            gen_set(g, "{\"id\":\"%s\",\"user\":\"dupuser\",\"op\":\"buy\",\"item\":\"%s\"}",
                    o->id, cx->b[batch].items[0]);
        gb->owned[gb->owned_n] = xmemdup(g->buf, g->len);
        gb->grp[gb->n++] = (pending){ .batch = (uint8_t)batch, .json = gb->owned[gb->owned_n++], .len = g->len };
    }
    pr->k.dups++;
}

/* A new request (garbage when r < 80) in one of the three batches: dead
 * ones are only pushed, the rest recorded for the checker. */
static void add_fresh(producer *pr, push_group_buf *gb, gen *g, long i, uint32_t r)
{
    chaos_ctx *cx = pr->cx;
    uint32_t bsel = rnd(&pr->rng, 100);
    int batch = bsel < 34 ? B_CS1 : bsel < 64 ? B_CS2 : B_CR1;
    snprintf(g->id, sizeof g->id, "p%d-%ld", pr->idx, i);
    if (r < 80) gen_garbage(&pr->rng, cx->b[batch].room, g);
    else if (cx->b[batch].room) gen_room(&pr->rng, &cx->b[batch], g);
    else gen_stock(&pr->rng, &cx->b[batch], g);
    if (g->expect < 0) {
        gb->owned[gb->owned_n] = xmemdup(g->buf, g->len);
        gb->grp[gb->n++] = (pending){ .batch = (uint8_t)batch, .dead = 1, .json = gb->owned[gb->owned_n++], .len = g->len };
        return;
    }
    rec rc;
    memset(&rc, 0, sizeof rc);
    rc.id = xstrdup(g->id);
    rc.json = xmemdup(g->buf, g->len);
    rc.len = (uint32_t)g->len;
    rc.user = g->expect == EXP_VALID ? xstrdup(g->user) : NULL;
    snprintf(rc.op, sizeof rc.op, "%s", g->op);
    rc.batch = (uint8_t)batch;
    rc.expect = (uint8_t)g->expect;
    size_t at = recvec_add(&pr->recs, rc);
    gb->grp[gb->n++] = (pending){ .batch = (uint8_t)batch, .json = pr->recs.v[at].json, .len = g->len };
    if (g->expect == EXP_INVALID) pr->k.invalid++;
    if (g->expect == EXP_VALID && !cx->b[batch].room && !strcmp(g->op, "buy"))
        gb->buys_idx[gb->n_buys++] = at;
}

/* Pushes the group, hands its buys to the follower, frees what it owned.
 * rec pointers may move on realloc: the group's json pointers are stable
 * (malloc'd per rec), only the array moves. */
static int flush_group(producer *pr, push_group_buf *gb)
{
    if (push_group(pr, gb->grp, gb->n) < 0) return -1;
    const rec *buys[GROUP];
    for (size_t j = 0; j < gb->n_buys; j++) buys[j] = &pr->recs.v[gb->buys_idx[j]];
    publish_candidates(pr->cx, buys, gb->n_buys);
    for (size_t j = 0; j < gb->owned_n; j++) free(gb->owned[j]);
    gb->n = gb->owned_n = gb->n_buys = 0;
    return 0;
}

static void *producer_main(void *arg)
{
    producer *pr = arg;
    chaos_ctx *cx = pr->cx;
    push_group_buf gb = { .n = 0 };
    gen g;
    for (long i = 0; i < pr->n; i++) {
        if (gb.n == 0) sleep_until(cx, cx->seconds * (double)i / (double)pr->n);
        uint32_t r = rnd(&pr->rng, 1000);
        if (r < 50 && pr->recs.n > 0) add_duplicate(pr, &gb, &g);
        else add_fresh(pr, &gb, &g, i, r);
        pr->k.pushed++;
        if ((gb.n == GROUP || i + 1 == pr->n) && flush_group(pr, &gb) < 0) break;
    }
    for (size_t j = 0; j < gb.owned_n; j++) free(gb.owned[j]);
    rc_close(&pr->rc);
    atomic_fetch_sub(&cx->producers_running, 1);
    return NULL;
}

/* --------------------------------------------------------- follower -- */

typedef struct action {
    double due;
    uint8_t batch;
    uint8_t cancel;
    char user[72];
    char order[32];
} action;

static void follower_push(producer *pr, const action *a)
{
    chaos_ctx *cx = pr->cx;
    char id[32];
    long n = atomic_fetch_add(&cx->follow_pushed, 1);
    snprintf(id, sizeof id, "f-%ld", n);
    gen g;
    snprintf(g.op, sizeof g.op, "%s", a->cancel ? "cancel" : "confirm");
    gen_set(&g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"%s\",\"order\":\"%s\"}", id, a->user, g.op, a->order);
    rec rc;
    memset(&rc, 0, sizeof rc);
    rc.id = xstrdup(id);
    rc.json = xmemdup(g.buf, g.len);
    rc.len = (uint32_t)g.len;
    rc.user = xstrdup(a->user);
    snprintf(rc.op, sizeof rc.op, "%s", g.op);
    rc.batch = a->batch;
    size_t at = recvec_add(&pr->recs, rc);
    pending p = { .batch = a->batch, .json = pr->recs.v[at].json, .len = g.len };
    pr->k.pushed++;
    push_group(pr, &p, 1);
}

/* The follower's own lists: requests whose result it waits for, and the
 * confirms and cancels it will push when they are due. */
typedef struct follower {
    candidate *mine;
    size_t n_mine, cap_mine;
    action *acts;
    size_t n_acts, cap_acts;
} follower;

/* Moves the producers' new candidates onto the follower's list. */
static void follower_take_candidates(chaos_ctx *cx, follower *f)
{
    pthread_mutex_lock(&cx->mu);
    if (f->n_mine + cx->n_cand > f->cap_mine) {
        f->cap_mine = (f->n_mine + cx->n_cand) * 2 + 64;
        f->mine = realloc(f->mine, f->cap_mine * sizeof *f->mine);
        if (!f->mine) abort();
    }
    if (cx->n_cand) memcpy(f->mine + f->n_mine, cx->cand, cx->n_cand * sizeof *f->mine);
    f->n_mine += cx->n_cand;
    cx->n_cand = 0;
    pthread_mutex_unlock(&cx->mu);
}

/* A granted order: confirmed or cancelled later (most holds, a few final
 * orders), sometimes by someone else, sometimes twice. */
static void follower_plan(producer *pr, follower *f, const candidate *c, const char *order)
{
    chaos_ctx *cx = pr->cx;
    uint32_t roll = rnd(&pr->rng, 100);
    int hold = cx->b[c->batch].hold_ms > 0;
    if (!(hold ? roll < 80 : roll < 15)) return;
    if (f->n_acts + 2 > f->cap_acts) {
        f->cap_acts = f->cap_acts ? f->cap_acts * 2 : 256;
        f->acts = realloc(f->acts, f->cap_acts * sizeof *f->acts);
        if (!f->acts) abort();
    }
    action *a = &f->acts[f->n_acts++];
    memset(a, 0, sizeof *a);
    a->batch = c->batch;
    a->cancel = hold ? roll < 20 : 1;
    snprintf(a->user, sizeof a->user, "%s", c->user);
    if (rnd(&pr->rng, 20) == 0)   /* someone else's order */
        snprintf(a->user, sizeof a->user, "u%u", rnd(&pr->rng, STOCK_USERS));
    snprintf(a->order, sizeof a->order, "%s", order);
    double delay = hold ? rndf(&pr->rng) * cx->b[c->batch].hold_ms * 1.6 / 1000.0 : 0.2;
    a->due = now_s() + delay;
    if (rnd(&pr->rng, 15) == 0) {   /* the same action once more */
        f->acts[f->n_acts] = *a;
        f->acts[f->n_acts].due += 0.3;
        f->n_acts++;
    }
}

/* One reply of the look-up: 1 if the candidate has its result. */
static int follower_resolve(producer *pr, follower *f, const candidate *c, redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_STRING) return 0;
    json_t *doc = json_loadb(r->str, r->len, 0, NULL);
    const char *st = json_string_value(json_object_get(doc, "status"));
    const char *order = json_string_value(json_object_get(doc, "order"));
    if (st && order && !strcmp(st, "granted")) follower_plan(pr, f, c, order);
    json_decref(doc);
    return 1;
}

/* Looks up at most 200 candidates' results, oldest first, pipelined; the
 * unresolved stay (up to 200 tries each). */
static void follower_look_up(producer *pr, follower *f)
{
    chaos_ctx *cx = pr->cx;
    size_t look = f->n_mine < 200 ? f->n_mine : 200;
    int reach = 1;
    for (size_t i = 0; i < look && reach; i++)
        reach = rc_node_retry(cx, &pr->rc, slot_node(cx, cx->bslot[f->mine[i].batch]), pr->idx) != NULL;
    if (!look || !reach) return;
    int node_of[200];
    for (size_t i = 0; i < look; i++) {
        node_of[i] = slot_node(cx, cx->bslot[f->mine[i].batch]);
        redisAppendCommand(pr->rc.c[node_of[i]], "HGET alloc:{%s}:results %s",
                           cx->b[f->mine[i].batch].name, f->mine[i].id);
    }
    size_t keep = 0;
    int ok = 1;
    for (size_t i = 0; i < look; i++) {
        redisReply *r = NULL;
        if (ok && redisGetReply(pr->rc.c[node_of[i]], (void **)&r) != REDIS_OK) ok = 0;
        if (ok && r && r->type == REDIS_REPLY_ERROR) rc_redirect(cx, r, NULL);
        candidate c = f->mine[i];
        int resolved = ok && follower_resolve(pr, f, &c, r);
        if (r) freeReplyObject(r);
        if (!resolved && ++c.tries < 200) f->mine[keep++] = c;
    }
    if (!ok) rc_close(&pr->rc);
    if (f->n_mine > look) memmove(f->mine + keep, f->mine + look, (f->n_mine - look) * sizeof *f->mine);
    f->n_mine = keep + (f->n_mine - look);
}

static void follower_push_due(producer *pr, follower *f)
{
    double t = now_s();
    size_t k = 0;
    for (size_t i = 0; i < f->n_acts; i++) {
        if (f->acts[i].due <= t) follower_push(pr, &f->acts[i]);
        else f->acts[k++] = f->acts[i];
    }
    f->n_acts = k;
}

/* Looks up results of buys; for granted ones schedules a confirm or a
 * cancel, some of them only after the reservation ran out (answer expired),
 * some twice, some from another user (unknown_order). */
static void *follower_main(void *arg)
{
    producer *pr = arg;
    chaos_ctx *cx = pr->cx;
    follower f = { 0 };
    for (;;) {
        int producers_done = atomic_load(&cx->producers_running) == 0;
        follower_take_candidates(cx, &f);
        if (producers_done && f.n_mine == 0 && f.n_acts == 0) break;
        if (atomic_load(&cx->stop_helpers)) break;
        follower_look_up(pr, &f);
        follower_push_due(pr, &f);
        harness_sleep_ms(40);
    }
    free(f.mine);
    free(f.acts);
    rc_close(&pr->rc);
    return NULL;
}

/* ------------------------------------------------------------ admin -- */

static void admin_push(producer *pr, int batch, const char *op, const char *extra)
{
    static atomic_long ctl_n;
    char id[32];
    snprintf(id, sizeof id, "c-%ld", atomic_fetch_add(&ctl_n, 1));
    gen g;
    gen_set(&g, "{\"id\":\"%s\",\"op\":\"%s\"%s}", id, op, extra ? extra : "");
    rec rc;
    memset(&rc, 0, sizeof rc);
    rc.id = xstrdup(id);
    rc.json = xmemdup(g.buf, g.len);
    rc.len = (uint32_t)g.len;
    snprintf(rc.op, sizeof rc.op, "%s", op);
    rc.batch = (uint8_t)batch;
    rc.expect = EXP_CTL;
    size_t at = recvec_add(&pr->recs, rc);
    pending p = { .batch = (uint8_t)batch, .ctl = 1, .json = pr->recs.v[at].json, .len = g.len };
    pr->k.pushed++;
    push_group(pr, &p, 1);
}

typedef struct adm_ev { double at; int what; } adm_ev;
enum { ADM_CAP_ROOM, ADM_CAP_STOCK, ADM_PAUSE, ADM_RESUME, ADM_SLEEP };

static int cmp_adm(const void *a, const void *b)
{
    double x = ((const adm_ev *)a)->at, y = ((const adm_ev *)b)->at;
    return x < y ? -1 : x > y;
}

static void *admin_main(void *arg)
{
    producer *pr = arg;
    chaos_ctx *cx = pr->cx;
    double S = cx->seconds;
    int n_cap = 4 + (int)(S / 4);
    adm_ev ev[256];
    int n = 0;
    for (int i = 0; i < n_cap && n < 200; i++)
        ev[n++] = (adm_ev){ S * (0.05 + 0.9 * rndf(&pr->rng)), i % 4 == 3 ? ADM_CAP_STOCK : ADM_CAP_ROOM };
    for (int i = 0; i < 2; i++) {
        double t = S * (0.1 + 0.8 * rndf(&pr->rng));
        ev[n++] = (adm_ev){ t, ADM_PAUSE };
        ev[n++] = (adm_ev){ t + 0.2 + 0.4 * rndf(&pr->rng), ADM_RESUME };
    }
    for (int i = 0; i < cx->p->slow && n < 256; i++)
        ev[n++] = (adm_ev){ S * (0.05 + 0.9 * rndf(&pr->rng)), ADM_SLEEP };
    qsort(ev, (size_t)n, sizeof ev[0], cmp_adm);
    const batch_def *room = &cx->b[B_CR1];
    for (int i = 0; i < n && !atomic_load(&cx->stop_helpers); i++) {
        sleep_until(cx, ev[i].at);
        char extra[128];
        switch (ev[i].what) {
        case ADM_CAP_ROOM:
            snprintf(extra, sizeof extra, ",\"item\":\"%s\",\"capacity\":%u",
                     room->items[rnd(&pr->rng, (uint32_t)room->n_items)], 1 + rnd(&pr->rng, 5));
            admin_push(pr, B_CR1, "set_capacity", extra);
            break;
        case ADM_CAP_STOCK:
            snprintf(extra, sizeof extra, ",\"item\":\"%s\",\"capacity\":%u",
                     cx->b[B_CS1].items[2], 100 + rnd(&pr->rng, 100));
            admin_push(pr, B_CS1, "set_capacity", extra);
            break;
        case ADM_PAUSE:
            admin_push(pr, B_CS1, "pause", NULL);
            break;
        case ADM_RESUME:
            admin_push(pr, B_CS1, "resume", NULL);
            break;
        case ADM_SLEEP: {
            /* a restart of Redis may cut the connection: try again then;
             * only an error reply (debug commands disabled) is a failure */
            double secs = 0.5 + 2.0 * rndf(&pr->rng);
            int node = (int)rnd(&pr->rng, (uint32_t)cx->n_nodes);
            for (int tries = 0; tries < 100; tries++) {
                redisContext *c = node_connect(cx, node);
                if (!c) { harness_sleep_ms(100); continue; }
                struct timeval tv = { 10, 0 };
                redisSetTimeout(c, tv);
                progress(cx, "DEBUG SLEEP %.2f (node %d)", secs, node);
                redisReply *r = redisCommand(c, "DEBUG SLEEP %.3f", secs);
                int done = r != NULL;
                if (r && r->type == REDIS_REPLY_STATUS) cx->rep->slow_sleeps++;
                else if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LOADING", 7))
                    violation(cx, &cx->rep->other, "DEBUG SLEEP failed: %s (start Redis with --enable-debug-command yes)", r->str);
                else done = 0;
                if (r) freeReplyObject(r);
                redisFree(c);
                if (done) break;
                harness_sleep_ms(100);
            }
            break;
        }
        }
    }
    /* the last word on cs1 is a resume, whatever happened */
    admin_push(pr, B_CS1, "resume", NULL);
    rc_close(&pr->rc);
    return NULL;
}

/* ---------------------------------------------------- allocd, Redis -- */

/* Starts instance i. With several instances each has its own name, and a
 * killed one comes back under that name (it takes over its own leases). */
static void allocd_start(chaos_ctx *cx, int i)
{
    if (harness_allocd_start(&cx->allocd[i], &cx->redis, cx->inst_conf[i]) < 0)
        violation(cx, &cx->rep->other, "could not start allocd instance %d", i);
    cx->rep->allocd_starts++;
}

/* Notices an allocd that died on its own (a crash) and starts a new one. */
static void allocd_watch(chaos_ctx *cx)
{
    for (int i = 0; i < cx->n_inst; i++) {
        harness_allocd *a = &cx->allocd[i];
        if (a->pid <= 0) { allocd_start(cx, i); continue; }
        int st;
        if (!proc_exited(a->pid, &st)) continue;   /* reaped and forgotten by the harness */
        cx->rep->allocd_unexpected_exits++;
        violation(cx, &cx->rep->other, "allocd instance %d pid %d exited by itself (%s %d); log %s", i,
                  (int)a->pid, WIFEXITED(st) ? "status" : "signal",
                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), a->log);
        a->pid = 0;
        allocd_start(cx, i);
    }
}

static void allocd_kill(chaos_ctx *cx, uint64_t *rng)
{
    allocd_watch(cx);
    int i = (int)rnd(rng, (uint32_t)cx->n_inst);
    /* a paused instance stays paused for the whole pause */
    if (cx->n_inst > 1 && cx->paused_pid > 0 && cx->allocd[i].pid == cx->paused_pid)
        i = (i + 1) % cx->n_inst;
    if (cx->allocd[i].pid == cx->paused_pid) cx->paused_pid = 0;
    harness_allocd_kill(&cx->allocd[i]);
    cx->rep->kills++;
    progress(cx, "kill -9 allocd instance %d (%d)", i, cx->rep->kills);
    harness_sleep_ms((int)rnd(rng, 300));
    allocd_start(cx, i);
}

/* SIGSTOP of one instance for longer than its lease: others take its
 * batches over, and when it wakes up fencing must keep it from writing. */
static void allocd_pause(chaos_ctx *cx, uint64_t *rng)
{
    allocd_watch(cx);
    if (cx->paused_pid > 0) return;
    int i = (int)rnd(rng, (uint32_t)cx->n_inst);
    /* prefer the holder of a batch's lease (token "instance/pid/random") */
    if (cx->n_inst > 1) {
        rconn c = { { NULL } };
        int bi = (int)rnd(rng, NB);
        redisReply *r = rcmd(cx, &c, cx->bslot[bi], "GET alloc:{%s}:lease", cx->b[bi].name);
        for (int j = 0; r && r->type == REDIS_REPLY_STRING && j < cx->n_inst; j++) {
            char pfx[32];
            snprintf(pfx, sizeof pfx, "chaos-%d/", j);
            if (!strncmp(r->str, pfx, strlen(pfx))) i = j;
        }
        if (r) freeReplyObject(r);
        rc_close(&c);
    }
    if (cx->allocd[i].pid <= 0 || kill(cx->allocd[i].pid, SIGSTOP) != 0) return;
    cx->paused_pid = cx->allocd[i].pid;
    cx->rep->pauses++;
    progress(cx, "SIGSTOP allocd instance %d (pid %d)", i, (int)cx->paused_pid);
}

static void allocd_resume(chaos_ctx *cx)
{
    if (cx->paused_pid <= 0) return;
    progress(cx, "SIGCONT pid %d", (int)cx->paused_pid);
    kill(cx->paused_pid, SIGCONT);
    cx->paused_pid = 0;
}

static void redis_restart(chaos_ctx *cx, int hard)
{
    progress(cx, "restarting Redis (%s)", hard ? "SIGKILL" : "SIGTERM");
    if (hard) harness_redis_kill(&cx->redis);
    for (int tries = 0; harness_redis_restart(&cx->redis) < 0; tries++) {
        if (tries == 3) { violation(cx, &cx->rep->other, "Redis does not restart (%s/redis.log)", cx->redis.dir); return; }
        harness_sleep_ms(500);
    }
    cx->rep->redis_restarts++;
}

static void redis_stop(chaos_ctx *cx)
{
    progress(cx, "Redis outage begins (%d ms)", cx->p->outage_ms);
    harness_reap(cx->redis.pid, SIGTERM);
    cx->redis.pid = 0;
    atomic_store(&cx->redis_down, 1);
}

static void redis_back(chaos_ctx *cx)
{
    for (int tries = 0; harness_redis_restart(&cx->redis) < 0; tries++) {
        if (tries == 3) { violation(cx, &cx->rep->other, "Redis does not come back after the outage"); return; }
        harness_sleep_ms(500);
    }
    atomic_store(&cx->redis_down, 0);
    cx->rep->outages++;
    progress(cx, "Redis outage ends");
}

/* ---------------------------------------------------------- answers -- */

/* Contract 9.6, from outside: every 200 ms each batch's stats.dequeued,
 * stats.state and queue/ctl lengths, read atomically (one script), feed an
 * answer_watch; the oldest unanswered request must never be older than
 * answer_ms. Exempt, as the contract and physics say: a batch that is
 * paused or waiting (its watch forgets what it saw), and Redis being down
 * (a failed probe forgets too, so the time Redis was away is not counted). */
static const char ANSWER_PROBE[] =
    "return {redis.call('HGET', KEYS[1], 'dequeued') or false, redis.call('HGET', KEYS[1], 'state') or false,"
    " redis.call('LLEN', KEYS[2]), redis.call('LLEN', KEYS[3])}";

static void answer_probe(chaos_ctx *cx, rconn *rc, int bi, answer_watch *aw)
{
    const char *b = cx->b[bi].name;
    int64_t sent = harness_now_ms();
    redisReply *r = rcmd(cx, rc, cx->bslot[bi], "EVAL %s 3 alloc:{%s}:stats alloc:{%s}:queue alloc:{%s}:ctl",
                         ANSWER_PROBE, b, b, b);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
             r->element[2]->type == REDIS_REPLY_INTEGER && r->element[3]->type == REDIS_REPLY_INTEGER;
    const char *state = ok && r->element[1]->type == REDIS_REPLY_STRING ? r->element[1]->str : "";
    if (!ok || !strcmp(state, "paused") || !strcmp(state, "waiting") || atomic_load(&cx->redis_down)) {
        answer_watch_reset(aw);
        if (!r) rc_close(rc);
    } else {
        long long dequeued = r->element[0]->type == REDIS_REPLY_STRING ? atoll(r->element[0]->str) : 0;
        answer_watch_probe(aw, sent, dequeued, r->element[2]->integer, r->element[3]->integer);
        double age = answer_watch_oldest_ms(aw, harness_now_ms()) / 1000.0;
        pthread_mutex_lock(&cx->msg_mu);
        if (age > cx->rep->max_unanswered_s) {
            cx->rep->max_unanswered_s = age;
            snprintf(cx->rep->max_unanswered_batch, sizeof cx->rep->max_unanswered_batch, "%s", b);
        }
        pthread_mutex_unlock(&cx->msg_mu);
    }
    if (r) freeReplyObject(r);
}

static void *answer_main(void *arg)
{
    chaos_ctx *cx = arg;
    answer_watch aw[NB];
    for (int bi = 0; bi < NB; bi++) answer_watch_init(&aw[bi], harness_now_ms());
    rconn rc = { { NULL } };
    while (!atomic_load(&cx->answer_stop)) {
        for (int bi = 0; bi < NB; bi++) answer_probe(cx, &rc, bi, &aw[bi]);
        harness_sleep_ms(200);
    }
    rc_close(&rc);
    return NULL;
}

/* -------------------------------------------------------- schedule -- */

typedef struct fault { double at; int what; } fault;
enum { F_KILL, F_REDIS, F_OUTAGE_START, F_OUTAGE_END, F_PAUSE, F_CONT };

/* a pause lasts longer than lease_ttl_ms (2000 in cluster mode) */
#define PAUSE_SECONDS 3.5

static int cmp_fault(const void *a, const void *b)
{
    double x = ((const fault *)a)->at, y = ((const fault *)b)->at;
    return x < y ? -1 : x > y;
}

static void run_faults(chaos_ctx *cx, uint64_t *rng)
{
    const chaos_params *p = cx->p;
    size_t n = 0, cap = (size_t)p->kills + (size_t)p->redis_restarts + 2 + 2 * (size_t)p->pauses;
    fault *f = xmalloc(cap * sizeof *f);
    double S = cx->seconds;
    double o_start = S * 0.3, o_end = o_start + p->outage_ms / 1000.0;
    for (int i = 0; i < p->kills; i++) f[n++] = (fault){ S * (0.03 + 0.94 * rndf(rng)), F_KILL };
    for (int i = 0; i < p->redis_restarts; i++) {
        double t = S * (0.05 + 0.9 * rndf(rng));
        if (p->outage_ms && t > o_start - 1 && t < o_end + 1) t = o_end + 1 + rndf(rng);
        f[n++] = (fault){ t, F_REDIS };
    }
    for (int i = 0; i < p->pauses; i++) {
        double t = S * (0.1 + 0.7 * rndf(rng));
        f[n++] = (fault){ t, F_PAUSE };
        f[n++] = (fault){ t + PAUSE_SECONDS, F_CONT };
    }
    if (p->outage_ms) {
        f[n++] = (fault){ o_start, F_OUTAGE_START };
        f[n++] = (fault){ o_end, F_OUTAGE_END };
    }
    qsort(f, n, sizeof *f, cmp_fault);
    size_t next = 0;
    int hard = 0;
    while (next < n || atomic_load(&cx->producers_running) > 0) {
        allocd_watch(cx);
        if (next < n && now_s() - cx->t0 >= f[next].at) {
            switch (f[next].what) {
            case F_KILL:
                allocd_kill(cx, rng);
                if (cx->arch) chaos_archive_kill(cx->arch);
                break;
            case F_REDIS: redis_restart(cx, hard); hard = !hard; break;
            case F_OUTAGE_START: redis_stop(cx); break;
            case F_OUTAGE_END: redis_back(cx); break;
            case F_PAUSE: allocd_pause(cx, rng); break;
            case F_CONT: allocd_resume(cx); break;
            }
            next++;
            continue;
        }
        harness_sleep_ms(20);
    }
    allocd_resume(cx);
    free(f);
}

/* ------------------------------------------------------------ drain -- */

static long long hget_ll(chaos_ctx *cx, rconn *rc, int bi, const char *key, const char *field)
{
    return rint_(cx, rc, cx->bslot[bi], "HGET alloc:{%s}:%s %s", cx->b[bi].name, key, field);
}

/* 1 when drained, 0 when not (yet), -1 on a connection error. */
static int drained(chaos_ctx *cx, rconn *rc)
{
    for (int b = 0; b < NB; b++) {
        const char *n = cx->b[b].name;
        uint16_t sl = cx->bslot[b];
        long long q = rint_(cx, rc, sl, "LLEN alloc:{%s}:queue", n);
        long long ct = rint_(cx, rc, sl, "LLEN alloc:{%s}:ctl", n);
        if (q < 0 || ct < 0) return -1;
        if (q != 0 || ct != 0) return 0;
        long long d = hget_ll(cx, rc, b, "stats", "dequeued"), p = hget_ll(cx, rc, b, "stats", "processed"),
                  dd = hget_ll(cx, rc, b, "stats", "dead"), du = hget_ll(cx, rc, b, "stats", "duplicates");
        /* open swap offers and waitlist places are in processed (9.5) */
        if (d < 0 || p < 0 || dd < 0 || du < 0 || d != p + dd + du) return 0;
    }
    return 1;
}

static int wait_drain(chaos_ctx *cx)
{
    double start = now_s();
    int limit = cx->p->drain_seconds;
    rconn rc = { { NULL } };
    while (now_s() - start < limit) {
        allocd_watch(cx);
        int d = drained(cx, &rc);
        if (d < 0) rc_close(&rc);
        else if (d) { rc_close(&rc); return 0; }
        harness_sleep_ms(200);
    }
    rc_close(&rc);
    return -1;
}

/* ---------------------------------------------------------- checker -- */

typedef struct idmap {
    rec **slot;
    size_t cap;
} idmap;

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
    return h;
}

static void idmap_init(idmap *m, size_t n)
{
    m->cap = 16;
    while (m->cap < n * 2) m->cap *= 2;
    m->slot = xcalloc(m->cap, sizeof *m->slot);
}

static void idmap_put(idmap *m, rec *r)
{
    size_t i = hash_str(r->id, strlen(r->id)) & (m->cap - 1);
    while (m->slot[i]) i = (i + 1) & (m->cap - 1);
    m->slot[i] = r;
}

static rec *idmap_get(const idmap *m, const char *s, size_t n)
{
    size_t i = hash_str(s, n) & (m->cap - 1);
    while (m->slot[i]) {
        rec *r = m->slot[i];
        if (strlen(r->id) == n && !memcmp(r->id, s, n)) return r;
        i = (i + 1) & (m->cap - 1);
    }
    return NULL;
}

typedef struct checker {
    chaos_ctx *cx;
    rconn rc;
    idmap ids;
    chaos_report *rep;
} checker;

/* A command on the node of batch bi (every key of the batch is there). */
static redisReply *cmd(checker *k, int bi, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = rcmdv(k->cx, &k->rc, k->cx->bslot[bi], fmt, ap);
    va_end(ap);
    if (!r) violation(k->cx, &k->rep->other, "checker: Redis error on the node of batch %s", k->cx->b[bi].name);
    return r;
}

#define KINT(k, bi, ...) rint_((k)->cx, &(k)->rc, (k)->cx->bslot[bi], __VA_ARGS__)

static const char *js(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static int item_index(const batch_def *b, const char *item)
{
    for (int i = 0; i < b->n_items; i++)
        if (!strcmp(b->items[i], item)) return i;
    return -1;
}

/* What check_results counts across a batch's results. */
typedef struct result_tally {
    size_t n;                  /* results in the hash */
    long long dequeued;        /* stats.dequeued: the highest seq */
    long long max_rank, n_granted;
    unsigned char *ranks;      /* [1..n]: how often each rank was seen */
    unsigned char *seqs;       /* [1..dequeued]: how often each seq was seen */
} result_tally;

/* One result against its first push: the id, user and op it answers, the
 * kind of status its push calls for. Returns the status as check_results
 * counts it (1 granted, 2 done, 3 rejected, 4 invalid, 5 an open swap
 * offer) or 0 for a status no result may have. */
static int result_status(checker *k, const batch_def *b, rec *rc, json_t *doc, const redisReply *vr)
{
    chaos_ctx *cx = k->cx;
    const char *status = js(doc, "status");
    if (strcmp(js(doc, "id"), rc->id))
        violation(cx, &k->rep->other, "%s: result under '%s' carries id '%s'", b->name, rc->id, js(doc, "id"));
    snprintf(rc->result_op, sizeof rc->result_op, "%s", js(doc, "op"));
    if (rc->expect == EXP_VALID &&
        (strcmp(js(doc, "user"), rc->user) || strcmp(js(doc, "op"), rc->op)))
        violation(cx, &k->rep->applied_twice,
                  "%s: result of '%s' is not that of its first push (user %s op %s), a duplicate was applied: %.200s",
                  b->name, rc->id, rc->user, rc->op, vr->str);
    if (rc->expect == EXP_INVALID && strcmp(status, "invalid"))
        violation(cx, &k->rep->other, "%s: '%s' must be invalid: pushed %.120s, got %.200s",
                  b->name, rc->id, rc->json, vr->str);
    if (rc->expect == EXP_VALID && !strcmp(status, "invalid"))
        violation(cx, &k->rep->other, "%s: valid request '%s' answered invalid: pushed %.160s, got %.200s",
                  b->name, rc->id, rc->json, vr->str);
    if (rc->expect == EXP_CTL && strcmp(status, "done") && strcmp(status, "rejected"))
        violation(cx, &k->rep->other, "%s: admin command '%s' answered %s", b->name, rc->id, status);
    int st = !strcmp(status, "granted") ? 1 : !strcmp(status, "done") ? 2
           : !strcmp(status, "rejected") ? 3 : !strcmp(status, "invalid") ? 4
           : !strcmp(status, "waiting") && !strcmp(rc->op, "swap") ? 5 : 0;
    if (!st) violation(cx, &k->rep->other, "%s: result of '%s' has status '%s'", b->name, rc->id, status);
    rc->status = (uint8_t)st;
    return st;
}

/* A grant's rank (1..n, each once) and members; every request's seq
 * (1..dequeued, each once). */
static void tally_result(checker *k, const batch_def *b, rec *rc, json_t *doc, result_tally *t)
{
    chaos_ctx *cx = k->cx;
    if (rc->status == 1) {
        json_t *members = json_object_get(doc, "members");
        rc->want_grants = (uint16_t)(json_is_array(members) ? json_array_size(members) : 1);
        if (!strcmp(rc->op, "group") && !json_is_array(members))
            violation(cx, &k->rep->other, "%s: granted group '%s' lists no members", b->name, rc->id);
        long long rank = json_integer_value(json_object_get(doc, "rank"));
        t->n_granted++;
        if (rank < 1 || (size_t)rank > t->n) violation(cx, &k->rep->other, "%s: '%s' has rank %lld", b->name, rc->id, rank);
        else if (t->ranks[rank]++) violation(cx, &k->rep->applied_twice, "%s: rank %lld given twice (again to '%s')", b->name, rank, rc->id);
        if (rank > t->max_rank) t->max_rank = rank;
    }
    if (rc->expect != EXP_CTL) {
        long long seq = json_integer_value(json_object_get(doc, "seq"));
        if (seq < 1 || seq > t->dequeued)
            violation(cx, &k->rep->other, "%s: '%s' has seq %lld, dequeued is %lld", b->name, rc->id, seq, t->dequeued);
        else if (t->seqs[seq]++)
            violation(cx, &k->rep->applied_twice, "%s: seq %lld answered twice (again for '%s')", b->name, seq, rc->id);
    }
}

/* Results of batch b: each must belong to a pushed id of this batch, be the
 * result of the first push (user and op), have the right kind of status,
 * and together they must show ranks 1..granted and distinct seqs. */
static void check_results(checker *k, int bi, long long *granted_out, long long *counts)
{
    chaos_ctx *cx = k->cx;
    const batch_def *b = &cx->b[bi];
    redisReply *r = cmd(k, bi, "HGETALL alloc:{%s}:results", b->name);
    if (!r) return;
    result_tally t = { .n = r->elements / 2 };
    t.ranks = xcalloc(t.n + 2, 1);
    t.dequeued = hget_ll(cx, &k->rc, bi, "stats", "dequeued");
    t.seqs = xcalloc((size_t)(t.dequeued > 0 ? t.dequeued : 0) + 2, 1);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        redisReply *kr = r->element[i], *vr = r->element[i + 1];
        rec *rc = idmap_get(&k->ids, kr->str, kr->len);
        if (!rc || rc->batch != bi) {
            violation(cx, &k->rep->phantom, "%s: result for id '%.80s' that was never pushed to this batch: %.200s",
                      b->name, kr->str, vr->str);
            continue;
        }
        rc->seen = 1;
        k->rep->results++;
        json_t *doc = json_loadb(vr->str, vr->len, 0, NULL);
        if (!json_is_object(doc)) {
            violation(cx, &k->rep->other, "%s: result of '%s' is not a JSON object: %.200s", b->name, rc->id, vr->str);
            json_decref(doc);
            continue;
        }
        int st = result_status(k, b, rc, doc, vr);
        /* an open swap offer (waiting, 9.3) is counted in processed and in
         * stats.swap_offers, not in stats.waiting (the waitlist, 9.5) */
        if (rc->expect != EXP_CTL && st) counts[st]++;
        tally_result(k, b, rc, doc, &t);
        json_decref(doc);
    }
    if (t.max_rank != t.n_granted)
        violation(cx, &k->rep->stats_errors, "%s: %lld granted results but the highest rank is %lld", b->name,
                  t.n_granted, t.max_rank);
    *granted_out = t.n_granted;
    free(t.ranks);
    free(t.seqs);
    freeReplyObject(r);
}

/* The replay of one batch's log: the rules are core/replay.h's, run by
 * allocctl's ctl_replay (both log formats); the checker adds what only it
 * knows -- which request each event names and the batch's items. */
typedef struct replay {
    checker *k;
    const batch_def *b;
    ctl_replay *cr;
} replay;

/* A rule of the replay the log broke, counted by what it means. */
static void replay_finding_seen(void *ud, replay_kind kind, const char *msg)
{
    replay *rp = ud;
    chaos_report *rep = rp->k->rep;
    long *counter = kind == REPLAY_OVERSOLD ? &rep->oversold : kind == REPLAY_MISMATCH ? &rep->mismatches
                  : &rep->other;
    violation(rp->k->cx, counter, "%s: %s", rp->b->name, msg);
}

/* Entries that change no holding: a phase change, a waitlist join or
 * service (contract 9.5). Returns 1 if `e` was one. */
static int replay_bookkeeping(replay *rp, const char *sid, const replay_event *e, rec *rc)
{
    if (e->type == EV_STATE) { if (rc) rc->ev_state++; return 1; }
    if (e->type != EV_WAIT && e->type != EV_WAIT_SERVED) return 0;
    if (!rc) return 1;
    if (e->type == EV_WAIT_SERVED) rc->ev_wait_served++;
    else rc->ev_wait++;
    if (rc->ev_wait_served > rc->ev_wait)
        violation(rp->k->cx, &rp->k->rep->mismatches, "%s: log %s: '%s' served from the waitlist without joining it",
                  rp->b->name, sid, e->req);
    rp->k->rep->waits += e->type == EV_WAIT;
    return 1;
}

/* Every event before the replay applies it: the request it names was
 * pushed to this batch, its item is one of the batch's, and each request's
 * events are counted for check_effects. */
static void replay_seen(void *ud, const char *sid, const replay_event *e)
{
    replay *rp = ud;
    checker *k = rp->k;
    const batch_def *b = rp->b;
    k->rep->log_entries++;
    rec *rc = *e->req ? idmap_get(&k->ids, e->req, strlen(e->req)) : NULL;
    if (*e->req && (!rc || rc->batch != (uint8_t)(b - k->cx->b)))
        violation(k->cx, &k->rep->phantom, "%s: log %s (%s) names request '%s' that was never pushed here", b->name, sid,
                  e->type_name, e->req);
    if (replay_bookkeeping(rp, sid, e, rc) || e->type == REPLAY_TYPE_OTHER) return;
    if (item_index(b, e->item) < 0)
        violation(k->cx, &k->rep->mismatches, "%s: log %s (%s) names unknown item '%s'", b->name, sid, e->type_name,
                  e->item);
    if (e->type == EV_GRANT) k->rep->grants_logged++;
    if (e->type == EV_EXPIRE) k->rep->expiries++;
    if (!rc) return;
    switch (e->type) {
    case EV_GRANT: rc->ev_grant++; break;
    case EV_RELEASE: rc->ev_release++; break;
    case EV_CONFIRM: rc->ev_confirm++; break;
    case EV_CANCEL: rc->ev_cancel++; break;
    case EV_CAPACITY: rc->ev_capacity++; break;
    default: break;
    }
}

static void replay_log(checker *k, replay *rp)
{
    const batch_def *b = rp->b;
    char start[64] = "-";
    for (;;) {
        redisReply *r = cmd(k, (int)(b - k->cx->b), "XRANGE alloc:{%s}:log %s + COUNT 5000", b->name, start);
        if (!r) return;
        if (r->type != REDIS_REPLY_ARRAY) { freeReplyObject(r); return; }
        for (size_t i = 0; i < r->elements; i++) {
            redisReply *e = r->element[i];
            const char *sid = e->element[0]->str;
            redisReply *f = e->element[1];
            ctl_kv fields[32];
            size_t nf = 0;
            for (size_t j = 0; j + 1 < f->elements && nf < 32; j += 2)
                fields[nf++] = (ctl_kv){ f->element[j]->str, f->element[j + 1]->str, f->element[j + 1]->len };
            ctl_replay_entry(rp->cr, sid, fields, nf);
            snprintf(start, sizeof start, "(%s", sid);
        }
        size_t n = r->elements;
        freeReplyObject(r);
        if (n < 5000) break;
    }
}

/* A stock holder's orders: held units per item into held_h, the units
 * field equal to their sum and within per_user, no held order long past
 * its expiry. */
static void check_stock_holder(checker *k, const batch_def *b, const char *user, json_t *h, long long *held_h,
                               long long now_ms)
{
    chaos_ctx *cx = k->cx;
    long long units = 0;
    size_t j;
    json_t *o;
    json_array_foreach(json_object_get(h, "orders"), j, o) {
        int it = item_index(b, js(o, "item"));
        long long q = json_integer_value(json_object_get(o, "qty"));
        if (it >= 0) held_h[it] += q;
        units += q;
        if (!strcmp(js(o, "state"), "held") &&
            json_integer_value(json_object_get(o, "expires_at")) < now_ms - 1500)
            violation(cx, &k->rep->other, "%s: order %s of %s is still held %lld ms after it expired",
                      b->name, js(o, "order"), user,
                      now_ms - json_integer_value(json_object_get(o, "expires_at")));
    }
    if (units != json_integer_value(json_object_get(h, "units")))
        violation(cx, &k->rep->mismatches, "%s: holders[%s] says %lld units, its orders sum to %lld", b->name, user,
                  (long long)json_integer_value(json_object_get(h, "units")), units);
    if (units > b->per_user)
        violation(cx, &k->rep->oversold, "%s: %s holds %lld units, per_user is %d", b->name, user, units, b->per_user);
}

/* free and capacity of every item against the replay, and free + held
 * (from the holders hash) == capacity. */
static void compare_items(checker *k, replay *rp, const long long *held_h, long long *free_sum)
{
    chaos_ctx *cx = k->cx;
    const batch_def *b = rp->b;
    int bi = (int)(b - cx->b);
    *free_sum = 0;
    for (int it = 0; it < b->n_items; it++) {
        long long fr = KINT(k, bi, "HGET alloc:{%s}:free %s", b->name, b->items[it]);
        long long cap = KINT(k, bi, "HGET alloc:{%s}:capacity %s", b->name, b->items[it]);
        *free_sum += fr;
        const replay_item *ri = replay_item_get(ctl_replay_state(rp->cr), b->items[it]);
        long long rcap = ri ? ri->cap : 0, rheld = ri ? ri->held : 0;
        if (cap != rcap)
            violation(cx, &k->rep->mismatches, "%s: capacity[%s] = %lld, the log replays to %lld", b->name, b->items[it], cap, rcap);
        if (fr != rcap - rheld)
            violation(cx, &k->rep->mismatches, "%s: free[%s] = %lld, the log replays to %lld - %lld held",
                      b->name, b->items[it], fr, rcap, rheld);
        if (fr + held_h[it] != cap || fr < 0)
            violation(cx, &k->rep->oversold, "%s: %s: free %lld + held %lld != capacity %lld",
                      b->name, b->items[it], fr, held_h[it], cap);
    }
    long long n_free = KINT(k, bi, "HLEN alloc:{%s}:free", b->name);
    if (n_free != b->n_items)
        violation(cx, &k->rep->mismatches, "%s: free has %lld fields for %d items", b->name, n_free, b->n_items);
}

/* holders, free and capacity in Redis against the replay; free + held ==
 * capacity with held counted from the holders hash itself. */
static void compare_state(checker *k, replay *rp, long long *free_sum)
{
    chaos_ctx *cx = k->cx;
    const batch_def *b = rp->b;
    long long held_h[MAX_ITEMS] = { 0 };
    long long now_ms = harness_now_ms();
    int bi = (int)(b - cx->b);
    redisReply *r = cmd(k, bi, "HGETALL alloc:{%s}:holders", b->name);
    size_t n_holders = 0;
    for (size_t i = 0; r && i + 1 < r->elements; i += 2) {
        const char *user = r->element[i]->str;
        json_t *h = json_loadb(r->element[i + 1]->str, r->element[i + 1]->len, 0, NULL);
        n_holders++;
        if (!h) { violation(cx, &k->rep->other, "%s: holder %s is not JSON", b->name, user); continue; }
        json_t *want = ctl_replay_holder_json(rp->cr, user);
        /* the log rebuilds the bed; a group and open swap offers are not
         * log events (P:{B}:groups, 9.2 and 9.3) */
        json_object_del(h, "group");
        json_object_del(h, "swap_offers");
        if (!want || !json_equal(h, want)) {
            char *w = want ? json_dumps(want, JSON_COMPACT) : NULL;
            violation(cx, &k->rep->mismatches, "%s: holders[%s] = %.150s but the log replays to %.150s",
                      b->name, user, r->element[i + 1]->str, w ? w : "nothing");
            free(w);
        }
        json_decref(want);
        if (b->room) {
            int it = item_index(b, js(h, "item"));
            if (it >= 0) held_h[it]++;
        } else {
            check_stock_holder(k, b, user, h, held_h, now_ms);
        }
        json_decref(h);
    }
    size_t n_replayed = replay_holding_count(ctl_replay_state(rp->cr));
    if (r && n_holders != n_replayed)
        violation(cx, &k->rep->mismatches, "%s: %zu holders in Redis, the log replays to %zu",
                  b->name, n_holders, n_replayed);
    if (r) freeReplyObject(r);
    compare_items(k, rp, held_h, free_sum);
}

/* Every result against its log entries: a granted request has exactly one
 * grant per unit holder it created, a done cancel/release exactly one
 * event, and nothing else left a trace. */
static void check_effects(checker *k, rec *rc)
{
    chaos_ctx *cx = k->cx;
    const char *bn = cx->b[rc->batch].name;
    const char *op = rc->expect == EXP_VALID ? rc->op : rc->result_op;
    int g = rc->ev_grant, rel = rc->ev_release, conf = rc->ev_confirm, can = rc->ev_cancel, cap = rc->ev_capacity;
    int want_g = 0, want_rel = 0, max_conf = 0, want_can = 0, want_cap = 0;
    if (rc->status == 1) {
        want_g = rc->want_grants;
        if (!strcmp(op, "switch") || !strcmp(op, "swap")) want_rel = 1;
    } else if (rc->status == 2) {
        if (!strcmp(op, "cancel")) want_can = 1;
        if (!strcmp(op, "release")) want_rel = 1;
        if (!strcmp(op, "confirm")) max_conf = 1;
        if (!strcmp(op, "set_capacity")) want_cap = 1;
    }
    if (rc->ev_wait > 1 || rc->ev_wait != rc->ev_wait_served)   /* joined once, served once */
        violation(cx, &k->rep->applied_twice, "%s: '%s' has %d wait and %d wait_served entries", bn, rc->id,
                  rc->ev_wait, rc->ev_wait_served);
    if (g > want_g || rel > want_rel || conf > max_conf || can > want_can || cap > want_cap)
        violation(cx, &k->rep->applied_twice,
                  "%s: '%s' (%s, status %d) left grant %d release %d confirm %d cancel %d capacity %d in the log (%.120s)",
                  bn, rc->id, op, rc->status, g, rel, conf, can, cap, rc->json);
    else if (g < want_g || rel < want_rel || can < want_can || cap < want_cap)
        violation(cx, &k->rep->mismatches,
                  "%s: '%s' (%s) was answered status %d but the log has grant %d release %d cancel %d capacity %d",
                  bn, rc->id, op, rc->status, g, rel, can, cap);
}

static void check_stats(checker *k, int bi, long long granted_results, const long long *counts,
                        long long free_sum, long long dead_acked, long long dead_attempts)
{
    chaos_ctx *cx = k->cx;
    const char *n = cx->b[bi].name;
    rconn *rc = &k->rc;
    long long d = hget_ll(cx, rc, bi, "stats", "dequeued"), p = hget_ll(cx, rc, bi, "stats", "processed"),
              dd = hget_ll(cx, rc, bi, "stats", "dead"), du = hget_ll(cx, rc, bi, "stats", "duplicates"),
              g = hget_ll(cx, rc, bi, "stats", "granted"), dn = hget_ll(cx, rc, bi, "stats", "done"),
              rj = hget_ll(cx, rc, bi, "stats", "rejected"), iv = hget_ll(cx, rc, bi, "stats", "invalid"),
              ctl = hget_ll(cx, rc, bi, "stats", "ctl"), fu = hget_ll(cx, rc, bi, "stats", "free_units"),
              pa = hget_ll(cx, rc, bi, "stats", "participants"),
              so = hget_ll(cx, rc, bi, "stats", "swap_offers"), w = hget_ll(cx, rc, bi, "stats", "waiting");
    k->rep->dead_entries += dd;
    k->rep->duplicates += du;
    k->rep->granted += g;
    k->rep->done += dn;
    k->rep->rejected += rj;
    k->rep->invalid += iv;
    if (d != p + dd + du)
        violation(cx, &k->rep->stats_errors, "%s: dequeued %lld != processed %lld + dead %lld + duplicates %lld",
                  n, d, p, dd, du);
    if (p != g + dn + rj + iv + w + so)
        violation(cx, &k->rep->stats_errors, "%s: processed %lld != granted %lld + done %lld + rejected %lld + invalid %lld"
                  " + waiting %lld + swap_offers %lld", n, p, g, dn, rj, iv, w, so);
    /* every wait has ended by now (wait_ms): the waitlist (stats.waiting,
     * contract 9.5) is empty, only open swap offers (9.3) still wait */
    long long wl = KINT(k, bi, "HLEN alloc:{%s}:waitlist", n);
    if (w != 0 || wl != 0 || so != counts[5])
        violation(cx, &k->rep->stats_errors, "%s: stats.waiting %lld, waitlist %lld (want 0 and 0), swap_offers %lld,"
                  " waiting swap results %lld", n, w, wl, so, counts[5]);
    if (g != counts[1] || dn != counts[2] || rj != counts[3] || iv != counts[4])
        violation(cx, &k->rep->stats_errors, "%s: stats granted/done/rejected/invalid %lld/%lld/%lld/%lld, results say %lld/%lld/%lld/%lld",
                  n, g, dn, rj, iv, counts[1], counts[2], counts[3], counts[4]);
    if (g != granted_results)
        violation(cx, &k->rep->stats_errors, "%s: stats.granted %lld, granted results %lld", n, g, granted_results);
    long long hlen = KINT(k, bi, "HLEN alloc:{%s}:results", n);
    if (hlen != p + ctl)
        violation(cx, &k->rep->stats_errors, "%s: %lld results but processed %lld + ctl %lld", n, hlen, p, ctl);
    if (fu != free_sum)
        violation(cx, &k->rep->stats_errors, "%s: stats.free_units %lld, sum of free %lld", n, fu, free_sum);
    long long dl = KINT(k, bi, "LLEN alloc:{%s}:dead", n);
    if (dl != dd)
        violation(cx, &k->rep->stats_errors, "%s: dead list has %lld entries, stats.dead %lld", n, dl, dd);
    if (dl < dead_acked || dl > dead_attempts)
        violation(cx, &k->rep->lost, "%s: dead list has %lld entries; %lld unreadable pushes were acknowledged (%lld sent)",
                  n, dl, dead_acked, dead_attempts);
    long long sp = KINT(k, bi, "LLEN alloc:{%s}:participants", n);
    if (pa != sp)
        violation(cx, &k->rep->stats_errors, "%s: stats.participants %lld, participants list %lld", n, pa, sp);
    const char *lists[] = { "queue", "ctl" };
    for (size_t i = 0; i < 2; i++) {
        long long l = KINT(k, bi, "LLEN alloc:{%s}:%s", n, lists[i]);
        if (l != 0) violation(cx, &k->rep->lost, "%s: %lld entries left in %s", n, l, lists[i]);
    }
}

/* CHAOS_TAMPER=N damages Redis just before the checks, to show that the
 * checker sees each kind of violation (a checker that passes everything
 * proves nothing): 1 free+1, 2 a second grant of a granted request, 3 a
 * result deleted, 4 a result nobody asked for, 5 a holder changed, 6 a
 * request left in the queue, 7 stats.processed+1, 8 a stock order over
 * per_user in the log. */
static void tamper(chaos_ctx *cx)
{
    const char *t = getenv("CHAOS_TAMPER");
    if (!t || !*t) return;
    rconn c = { { NULL } };
    redisReply *r = NULL;
    const rec *g = NULL;
    const char *s1 = cx->b[B_CS1].name, *s2 = cx->b[B_CS2].name, *r1 = cx->b[B_CR1].name;
    uint16_t l1 = cx->bslot[B_CS1], l2 = cx->bslot[B_CS2], lr = cx->bslot[B_CR1];
    for (size_t i = 0; i < cx->prod[0].recs.n && !g; i++) {
        const rec *rc = &cx->prod[0].recs.v[i];
        if (rc->batch != B_CS1 || rc->expect != EXP_VALID || strcmp(rc->op, "buy")) continue;
        redisReply *gr = rcmd(cx, &c, l1, "HGET alloc:{%s}:results %s", s1, rc->id);
        if (gr && gr->type == REDIS_REPLY_STRING && strstr(gr->str, "\"granted\"")) g = rc;
        if (gr) freeReplyObject(gr);
    }
    switch (atoi(t)) {
    case 1: r = rcmd(cx, &c, l1, "HINCRBY alloc:{%s}:free sku1 1", s1); break;
    case 2:
        if (g) r = rcmd(cx, &c, l1, "XADD alloc:{%s}:log * type grant user %s item sku1 qty 1 order 42 req %s at 1",
                        s1, g->user, g->id);
        break;
    case 3: if (g) r = rcmd(cx, &c, l1, "HDEL alloc:{%s}:results %s", s1, g->id); break;
    case 4: r = rcmd(cx, &c, l1, "HSET alloc:{%s}:results nobody {\"id\":\"nobody\",\"status\":\"done\"}", s1); break;
    case 5: r = rcmd(cx, &c, lr, "HSET alloc:{%s}:holders s1 {\"item\":\"R002\",\"since\":1,\"req\":\"x\"}", r1); break;
    case 6: r = rcmd(cx, &c, l2, "RPUSH alloc:{%s}:queue {}", s2); break;
    case 7: r = rcmd(cx, &c, l2, "HINCRBY alloc:{%s}:stats processed 1", s2); break;
    case 8:
        r = rcmd(cx, &c, l1, "XADD alloc:{%s}:log * type grant user zz item sku4 qty 5 order 43 req p0-0 at 1", s1);
        break;
    }
    if (r) freeReplyObject(r);
    rc_close(&c);
}

static void run_checks(chaos_ctx *cx)
{
    checker k = { .cx = cx, .rep = cx->rep };
    struct timeval tv = { 60, 0 };
    for (int i = 0; i < cx->n_nodes; i++) {
        if (!rc_node(cx, &k.rc, i)) {
            violation(cx, &cx->rep->other, "checker: cannot connect to Redis node %d", i);
            rc_close(&k.rc);
            return;
        }
        redisSetTimeout(k.rc.c[i], tv);
    }
    size_t total = cx->follower.recs.n + cx->admin.recs.n;
    for (int i = 0; i < cx->n_producers; i++) total += cx->prod[i].recs.n;
    idmap_init(&k.ids, total);
    producer *all[66];
    int n_all = 0;
    for (int i = 0; i < cx->n_producers && n_all < 64; i++) all[n_all++] = &cx->prod[i];
    all[n_all++] = &cx->follower;
    all[n_all++] = &cx->admin;
    for (int i = 0; i < n_all; i++)
        for (size_t j = 0; j < all[i]->recs.n; j++) idmap_put(&k.ids, &all[i]->recs.v[j]);
    cx->rep->distinct_ids = (long)total;
    for (int bi = 0; bi < NB; bi++) {
        long long counts[6] = { 0 }, granted = 0, free_sum = 0, dead_acked = 0, dead_attempts = 0;
        check_results(&k, bi, &granted, counts);
        const batch_def *b = &cx->b[bi];
        replay rp = { .k = &k, .b = b };
        rp.cr = ctl_replay_new(b->room, b->per_user, replay_finding_seen, &rp);
        if (!rp.cr) { fprintf(stderr, "chaos: out of memory\n"); abort(); }
        ctl_replay_observe(rp.cr, replay_seen, &rp);
        for (int it = 0; it < b->n_items; it++) ctl_replay_capacity(rp.cr, b->items[it], b->caps[it]);
        replay_log(&k, &rp);
        compare_state(&k, &rp, &free_sum);
        ctl_replay_free(rp.cr);
        for (int i = 0; i < n_all; i++) {
            dead_acked += all[i]->k.dead_acked[bi];
            dead_attempts += all[i]->k.dead_attempts[bi];
        }
        check_stats(&k, bi, granted, counts, free_sum, dead_acked, dead_attempts);
    }
    for (int i = 0; i < n_all; i++)
        for (size_t j = 0; j < all[i]->recs.n; j++) {
            rec *rc = &all[i]->recs.v[j];
            if (!rc->seen) {
                violation(cx, &cx->rep->lost, "%s: '%s' was pushed (acknowledged) but has no result: %.160s",
                          cx->b[rc->batch].name, rc->id, rc->json);
                continue;
            }
            check_effects(&k, rc);
        }
    free(k.ids.slot);
    rc_close(&k.rc);
}

/* ------------------------------------------------------------ setup -- */

static void define_batches(chaos_ctx *cx)
{
    long R = cx->p->requests;
    batch_def *b = &cx->b[B_CS1];
    b->name = "cs1";
    b->per_user = 3;
    b->n_items = 5;
    long long caps1[] = { R / 25 + 20, R / 60 + 10, 150, 3, 0 };
    for (int i = 0; i < b->n_items; i++) {
        snprintf(b->items[i], sizeof b->items[i], "sku%d", i + 1);
        b->caps[i] = caps1[i];
    }
    b = &cx->b[B_CS2];
    b->name = "cs2";
    b->per_user = 2;
    b->hold_ms = 700;
    b->wait_ms = CHAOS_WAIT_MS;
    b->n_items = 4;
    long long caps2[] = { R / 60 + 20, R / 150 + 10, 40, 2 };
    for (int i = 0; i < b->n_items; i++) {
        snprintf(b->items[i], sizeof b->items[i], "hold%d", i + 1);
        b->caps[i] = caps2[i];
    }
    b = &cx->b[B_CR1];
    b->name = "cr1";
    b->room = 1;
    b->per_user = 1;
    b->hold_ms = 900;            /* held beds; nobody confirms them here (the follower
                                  * is for stock), so every bed turns over for the waitlist */
    b->wait_ms = CHAOS_WAIT_MS;
    b->max_group = 4;
    b->n_items = 80;
    static const char *const building[] = { "A", "B", "C" };
    for (int i = 0; i < b->n_items; i++) {
        snprintf(b->items[i], sizeof b->items[i], "R%03d", i + 1);
        b->caps[i] = 1 + i % 4;
        snprintf(b->attrs[i], sizeof b->attrs[i], "{\"building\":\"%s\",\"floor\":%d,\"gender\":\"%s\"}",
                 building[i % 3], 1 + (i / 3) % 4, i % 2 ? "M" : "F");
    }
}

static int create_batches(chaos_ctx *cx)
{
    rconn c = { { NULL } };
    int bad = 0;
    for (int bi = 0; bi < NB; bi++) {
        const batch_def *b = &cx->b[bi];
        uint16_t sl = cx->bslot[bi];
        redisReply *r = rcmd(cx, &c, sl, "HSET alloc:{%s}:meta kind %s per_user %d hold_ms %d max_group %d groups formed wait_ms %d",
                             b->name, b->room ? "room" : "stock", b->per_user, b->hold_ms,
                             b->max_group ? b->max_group : 8, b->wait_ms);
        bad |= !r || r->type == REDIS_REPLY_ERROR;
        if (r) freeReplyObject(r);
        for (int i = 0; i < b->n_items; i++) {
            r = rcmd(cx, &c, sl, "HSET alloc:{%s}:capacity %s %lld", b->name, b->items[i], b->caps[i]);
            bad |= !r || r->type == REDIS_REPLY_ERROR;
            if (r) freeReplyObject(r);
            if (b->room) {
                r = rcmd(cx, &c, sl, "HSET alloc:{%s}:attrs %s %s", b->name, b->items[i], b->attrs[i]);
                bad |= !r || r->type == REDIS_REPLY_ERROR;
                if (r) freeReplyObject(r);
            }
        }
        r = rcmd(cx, &c, key_slot("alloc:batches"), "SADD alloc:batches %s", b->name);
        bad |= !r || r->type == REDIS_REPLY_ERROR;
        if (r) freeReplyObject(r);
    }
    rc_close(&c);
    return bad ? -1 : 0;
}

/* ---------------------------------------------------------- cluster -- */

static harness_redis *node_redis(chaos_ctx *cx, int i) { return i == 0 ? &cx->redis : &cx->node[i]; }

/* Reads CLUSTER SLOTS from node 0 into cx->slot_node. */
static int load_slot_map(chaos_ctx *cx)
{
    redisContext *c = node_connect(cx, 0);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    cluster_map m;
    cluster_map_init(&m);
    int rc = r && cluster_map_parse(&m, r, "127.0.0.1") == 0 ? 0 : -1;
    for (int s = 0; rc == 0 && s < CLUSTER_SLOTS; s++) {
        const cluster_node *n = cluster_map_node(&m, (uint16_t)s);
        int idx = -1;
        for (int i = 0; n && i < cx->n_nodes; i++)
            if (n->port == cx->port[i]) idx = i;
        if (idx < 0) rc = -1;
        else atomic_store(&cx->slot_node[s], (int16_t)idx);
    }
    cluster_map_free(&m);
    if (r) freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* Three masters on loopback, no replicas, made a cluster by redis-cli. */
static int cluster_start(chaos_ctx *cx)
{
    cx->n_nodes = MAX_NODES;
    int p = 17000 + (int)(getpid() % 1000) * 3;
    for (int i = 0; i < cx->n_nodes; i++) {
        cx->port[i] = p = harness_cluster_port(p + 1);
        if (p < 0) return -1;
        char extra[320];
        snprintf(extra, sizeof extra, "--port %d --bind 127.0.0.1 --cluster-enabled yes "
                 "--cluster-config-file nodes.conf --cluster-node-timeout 5000 --appendonly no "
                 "--enable-debug-command yes", p);
        if (harness_redis_start(node_redis(cx, i), extra) < 0) return -1;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d "
             "--cluster-replicas 0 --cluster-yes >/dev/null 2>&1", cx->port[0], cx->port[1], cx->port[2]);
    if (system(cmd) != 0) return -1;
    for (int waited = 0; waited < 20000; waited += 100) {
        int ok = 0;
        for (int i = 0; i < cx->n_nodes; i++) {
            redisContext *c = node_connect(cx, i);
            char *info = c ? harness_str(c, "CLUSTER INFO") : NULL;
            if (info && strstr(info, "cluster_state:ok")) ok++;
            free(info);
            if (c) redisFree(c);
        }
        if (ok == cx->n_nodes) return load_slot_map(cx);
        harness_sleep_ms(100);
    }
    return -1;
}

static void nodes_stop(chaos_ctx *cx)
{
    for (int i = cx->n_nodes - 1; i >= 0; i--)
        if (node_redis(cx, i)->dir[0]) harness_redis_stop(node_redis(cx, i));
}

/* Names the batches so that each lives on another master: cs1, cs2, cr1 or,
 * when their slots share a node, the first of cs1-a, cs1-b, ... that does
 * not. */
static void place_batches(chaos_ctx *cx)
{
    static const char *const base[NB] = { "cs1", "cs2", "cr1" };
    int used[MAX_NODES] = { 0 };
    for (int bi = 0; bi < NB; bi++) {
        for (int v = 0; v < 27; v++) {
            if (v == 0) snprintf(cx->names[bi], sizeof cx->names[bi], "%s", base[bi]);
            else snprintf(cx->names[bi], sizeof cx->names[bi], "%s-%c", base[bi], 'a' + v - 1);
            int node = slot_node(cx, key_slot(cx->names[bi]));
            if (!cx->cluster || !used[node] || bi >= cx->n_nodes) break;
        }
        cx->b[bi].name = cx->names[bi];
        cx->bslot[bi] = key_slot(cx->names[bi]);
        used[slot_node(cx, cx->bslot[bi])] = 1;
    }
}

static void scan_logs(chaos_ctx *cx)
{
    DIR *d = opendir(cx->redis.dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "allocd-", 7) || !strstr(de->d_name, ".log")) continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", cx->redis.dir, de->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char line[2048];
        while (fgets(line, sizeof line, f)) {
            if (strstr(line, "connection lost") || strstr(line, "cannot connect")) cx->rep->log_connection_lost++;
            if (strstr(line, "timeout") || strstr(line, "timed out")) cx->rep->log_timeouts++;
            if (strstr(line, ": connected to ")) cx->rep->log_connected++;
        }
        fclose(f);
    }
    closedir(d);
}

void chaos_params_default(chaos_params *p)
{
    memset(p, 0, sizeof *p);
    p->requests = 20000;
    p->kills = 8;
    p->redis_restarts = 2;
    p->seed = 1;
    p->producers = 3;
}

/* Fills in what the caller left zero, within the limits. */
static void params_settle(chaos_params *p)
{
    if (p->producers <= 0) p->producers = 3;
    if (p->producers > 64) p->producers = 64;
    if (p->seconds <= 0) p->seconds = (int)(p->requests / 2500) + 10;
    if (p->drain_seconds <= 0) p->drain_seconds = 90 + (int)(p->requests / 1000);
    if (p->instances <= 0) p->instances = p->cluster ? 3 : 1;
    if (p->answer_ms <= 0) p->answer_ms = 15000;
    if (p->instances > MAX_INST) p->instances = MAX_INST;
    if (p->cluster) {   /* the cluster's nodes are not restarted in this mode */
        p->redis_restarts = 0;
        p->outage_ms = 0;
    }
}

/* Redis (one node, or a 3-master cluster) with the batches on it. Returns
 * -1, the reason recorded as a violation and every node stopped, if not. */
static int start_redis(chaos_ctx *cx)
{
    chaos_report *rep = cx->rep;
    cx->cluster = cx->p->cluster;
    cx->n_nodes = 1;
    if (cx->cluster) {
        if (cluster_start(cx) < 0) {
            violation(cx, &rep->other, "could not start a 3-master Redis Cluster (redis-server, redis-cli --cluster create)");
            nodes_stop(cx);
            return -1;
        }
    } else if (harness_redis_start(&cx->redis, "--appendonly yes --appendfsync always --enable-debug-command yes") < 0) {
        violation(cx, &rep->other, "redis-server did not start");
        return -1;
    }
    rep->nodes = cx->n_nodes;
    place_batches(cx);
    snprintf(rep->dir, sizeof rep->dir, "%s", cx->redis.dir);
    if (create_batches(cx) < 0) {
        violation(cx, &rep->other, "could not create the batches");
        nodes_stop(cx);
        return -1;
    }
    for (int bi = 0; bi < NB && cx->cluster; bi++)
        progress(cx, "batch %s: slot %u on node %d (port %d)", cx->b[bi].name, cx->bslot[bi],
                 slot_node(cx, cx->bslot[bi]), cx->port[slot_node(cx, cx->bslot[bi])]);
    return 0;
}

/* Each instance's config: the common part and, with several instances or
 * a cluster, a fixed name (one instance keeps the harness's naming, a new
 * name per start; several come back under theirs), the lease and the
 * registry's pace, and in a cluster the node it starts from. */
static void write_instance_confs(chaos_ctx *cx)
{
    const chaos_params *p = cx->p;
    snprintf(cx->allocd_conf, sizeof cx->allocd_conf,
             "chunk = 64;\nredis_timeout_ms = 1000;\nconnect_timeout_ms = 1000;\n"
             "backoff_min_ms = 20;\nbackoff_max_ms = 400;\nidle_wait_ms = 200;\nanswer_ms = %d;\n%s",
             p->answer_ms, p->log_chunk ? "log_format = \"chunk\";\n" : "");
    for (int i = 0; i < cx->n_inst; i++) {
        if (p->cluster)
            snprintf(cx->inst_conf[i], sizeof cx->inst_conf[i],
                     "%sredis = \"redis://127.0.0.1:%d\";\ncluster = \"yes\";\ninstance = \"chaos-%d\";\n"
                     "lease_ttl_ms = 2000;\nregistry_interval_ms = 200;\n",
                     cx->allocd_conf, cx->port[i % cx->n_nodes], i);
        else if (cx->n_inst > 1)
            snprintf(cx->inst_conf[i], sizeof cx->inst_conf[i],
                     "%sinstance = \"chaos-%d\";\nlease_ttl_ms = 2000;\nregistry_interval_ms = 200;\n",
                     cx->allocd_conf, i);
        else
            snprintf(cx->inst_conf[i], sizeof cx->inst_conf[i], "%s", cx->allocd_conf);
    }
}

/* --archive: PostgreSQL and the archiver beside the run (one Redis only). */
static void start_archive(chaos_ctx *cx, chaos_archive *arch)
{
    if (!cx->p->archive || cx->p->cluster) return;
    if (chaos_archive_start(arch, cx->redis.url, cx->redis.dir) < 0) {
        violation(cx, &cx->rep->other, "--archive: PostgreSQL or the archiver did not start");
        chaos_archive_stop(arch);
        return;
    }
    cx->arch = arch;
}

/* The producers, the follower, the admin and the answer watcher. */
static void start_clients(chaos_ctx *cx)
{
    const chaos_params *p = cx->p;
    cx->n_producers = p->producers;
    cx->prod = xcalloc((size_t)p->producers, sizeof *cx->prod);
    atomic_store(&cx->producers_running, p->producers);
    for (int i = 0; i < p->producers; i++) {
        producer *pr = &cx->prod[i];
        pr->cx = cx;
        pr->idx = i;
        pr->rng = p->seed * 1000003ULL + (uint64_t)i * 7919ULL + 1;
        pr->n = p->requests / p->producers + (i < p->requests % p->producers ? 1 : 0);
        pthread_create(&pr->th, NULL, producer_main, pr);
    }
    cx->follower = (producer){ .cx = cx, .idx = 100, .rng = p->seed * 31ULL + 17 };
    cx->admin = (producer){ .cx = cx, .idx = 101, .rng = p->seed * 131ULL + 29 };
    pthread_create(&cx->follower.th, NULL, follower_main, &cx->follower);
    pthread_create(&cx->admin.th, NULL, admin_main, &cx->admin);
    pthread_create(&cx->answer_th, NULL, answer_main, cx);
    progress(cx, "pushing %ld requests over %d s with %d producers", p->requests, p->seconds, p->producers);
}

/* allocd drains what was pushed; reservations still held must run out and
 * be expired, and waits end by wait_ms (a request served at the last
 * moment holds for hold_ms more); then every instance stops on SIGTERM. */
static void drain_and_stop(chaos_ctx *cx)
{
    chaos_report *rep = cx->rep;
    double dstart = now_s();
    allocd_watch(cx);
    if (wait_drain(cx) < 0)
        violation(cx, &rep->lost, "allocd did not drain within %d s (queue or ctl not empty, or stats do not add up)",
                  cx->p->drain_seconds);
    harness_sleep_ms(CHAOS_WAIT_MS + cx->b[B_CR1].hold_ms + 1500);
    if (wait_drain(cx) < 0) violation(cx, &rep->lost, "allocd busy again after the expiry wait");
    rep->drain_seconds = now_s() - dstart;
    atomic_store(&cx->answer_stop, 1);
    pthread_join(cx->answer_th, NULL);
    if (rep->max_unanswered_s * 1000 > cx->p->answer_ms)
        violation(cx, &rep->unanswered_late, "%s: a request stayed unanswered %.1f s while the batch was open "
                  "(answer_ms %d, contract 9.6)", rep->max_unanswered_batch, rep->max_unanswered_s, cx->p->answer_ms);
    allocd_watch(cx);
    for (int i = 0; i < cx->n_inst; i++) {
        int st = harness_allocd_stop(&cx->allocd[i]);
        if (st != 0) {
            rep->allocd_final_exit = st;
            violation(cx, &rep->other, "allocd instance %d exited %d after SIGTERM (expected 0: drain and exit); log %s",
                      i, st, cx->allocd[i].log);
        }
    }
}

/* Every client's push counters, summed into the report. */
static void sum_pushes(chaos_ctx *cx)
{
    chaos_report *rep = cx->rep;
    for (int i = 0; i < cx->n_producers; i++) {
        producer *pr = &cx->prod[i];
        rep->pushed += pr->k.pushed;
        rep->push_attempts += pr->k.attempts;
        rep->push_retries += pr->k.retries;
        rep->dup_pushes += pr->k.dups;
        rep->garbage_invalid += pr->k.invalid;
        for (int b = 0; b < NB; b++) rep->garbage_dead += pr->k.dead_acked[b];
    }
    rep->pushed += cx->follower.k.pushed + cx->admin.k.pushed;
    rep->push_attempts += cx->follower.k.attempts + cx->admin.k.attempts;
    rep->push_retries += cx->follower.k.retries + cx->admin.k.retries;
    rep->ctl_pushed = cx->admin.k.pushed;
}

/* --archive: the archiver catches up and the archive reconciles with Redis. */
static void check_archive(chaos_ctx *cx)
{
    if (!cx->arch) return;
    chaos_report *rep = cx->rep;
    const char *names[NB];
    char msg[400];
    for (int bi = 0; bi < NB; bi++) names[bi] = cx->b[bi].name;
    progress(cx, "archiving and reconciling");
    rep->reconcile_failed = chaos_archive_check(cx->arch, names, NB, msg, sizeof msg);
    rep->archiver_kills = cx->arch->kills;
    if (rep->reconcile_failed) violation(cx, &rep->mismatches, "archive: %s", msg);
    chaos_archive_stop(cx->arch);
    cx->arch = NULL;
}

static void ctx_free(chaos_ctx *cx)
{
    for (int i = 0; i < cx->n_producers; i++) recvec_free(&cx->prod[i].recs);
    recvec_free(&cx->follower.recs);
    recvec_free(&cx->admin.recs);
    free(cx->prod);
    free(cx->cand);
    pthread_mutex_destroy(&cx->mu);
    pthread_mutex_destroy(&cx->msg_mu);
    free(cx);
}

int chaos_run(const chaos_params *params, chaos_report *rep)
{
    chaos_params p = *params;
    params_settle(&p);
    memset(rep, 0, sizeof *rep);
    signal(SIGPIPE, SIG_IGN);   /* a write to a Redis that just died must not kill us */

    chaos_ctx *cx = calloc(1, sizeof *cx);
    if (!cx) return -1;
    cx->p = &p;
    cx->rep = rep;
    cx->seconds = p.seconds;
    pthread_mutex_init(&cx->mu, NULL);
    pthread_mutex_init(&cx->msg_mu, NULL);
    define_batches(cx);
    uint64_t rng = p.seed * 0x9e3779b97f4a7c15ULL + 12345;
    cx->t0 = now_s();
    cx->n_inst = p.instances;
    rep->instances = p.instances;
    if (start_redis(cx) < 0) {
        ctx_free(cx);
        return -1;
    }
    write_instance_confs(cx);
    cx->t0 = now_s();
    for (int i = 0; i < cx->n_inst; i++) allocd_start(cx, i);
    chaos_archive arch;
    start_archive(cx, &arch);
    start_clients(cx);

    run_faults(cx, &rng);
    for (int i = 0; i < p.producers; i++) pthread_join(cx->prod[i].th, NULL);
    pthread_join(cx->admin.th, NULL);
    pthread_join(cx->follower.th, NULL);
    rep->push_seconds = now_s() - cx->t0;
    progress(cx, "all pushed; draining");
    drain_and_stop(cx);
    progress(cx, "checking");
    sum_pushes(cx);
    check_archive(cx);
    tamper(cx);
    run_checks(cx);
    scan_logs(cx);
    rep->total_seconds = now_s() - cx->t0;

    if (p.keep) setenv("HARNESS_KEEP", "1", 1);
    nodes_stop(cx);
    ctx_free(cx);
    return rep->violations ? 1 : 0;
}

void chaos_print_report(FILE *f, const chaos_params *p, const chaos_report *r)
{
    fprintf(f,
            "---- chaos report (seed %" PRIu64 ") ----\n"
            "requests pushed   %ld   (RPUSHes incl. retries %ld, connection retries %ld)\n"
            "  of which        %ld duplicate ids, %ld dead garbage, %ld invalid garbage, %ld admin commands\n"
            "distinct ids      %ld\n"
            "topology          %d Redis node%s, %d allocd instance%s\n"
            "kills             %d   (allocd starts %d, unexpected exits %d, final exit %d)\n"
            "pauses            %d   (SIGSTOP past the lease, then SIGCONT)\n"
            "redis restarts    %d   (outages %d, DEBUG SLEEPs %d)\n"
            "results           %ld   (granted %ld, done %ld, rejected %ld, invalid %ld)\n"
            "dead entries      %ld   duplicates %ld\n"
            "log entries       %ld   (grants %ld, expiries %ld, waits %ld)\n"
            "allocd log        %d connection-lost, %d timeout, %d connected lines\n"
            "time              push %.1f s, drain %.1f s, total %.1f s\n"
            "oldest unanswered %.1f s   (batch %s; bound answer_ms %d ms, late %ld)\n"
            "lost              %ld\n"
            "applied twice     %ld\n"
            "oversold          %ld\n"
            "phantom results   %ld\n"
            "replay mismatches %ld\n"
            "stats errors      %ld\n"
            "other             %ld\n"
            "dir               %s%s\n",
            p->seed, r->pushed, r->push_attempts, r->push_retries, r->dup_pushes, r->garbage_dead,
            r->garbage_invalid, r->ctl_pushed, r->distinct_ids, r->nodes, r->nodes == 1 ? "" : "s",
            r->instances, r->instances == 1 ? "" : "s", r->kills, r->allocd_starts,
            r->allocd_unexpected_exits, r->allocd_final_exit, r->pauses, r->redis_restarts, r->outages,
            r->slow_sleeps, r->results, r->granted, r->done, r->rejected, r->invalid,
            r->dead_entries, r->duplicates, r->log_entries, r->grants_logged, r->expiries, r->waits,
            r->log_connection_lost, r->log_timeouts, r->log_connected, r->push_seconds,
            r->drain_seconds, r->total_seconds, r->max_unanswered_s,
            r->max_unanswered_batch[0] ? r->max_unanswered_batch : "-", p->answer_ms ? p->answer_ms : 15000,
            r->unanswered_late, r->lost, r->applied_twice, r->oversold,
            r->phantom, r->mismatches, r->stats_errors, r->other, r->dir,
            p->keep ? " (kept)" : " (removed)");
    if (p->archive)
        fprintf(f, "archive           %d archiver kills, %d batches reconcile found different\n",
                r->archiver_kills, r->reconcile_failed);
    for (int i = 0; i < r->n_msgs; i++) fprintf(f, "VIOLATION: %s\n", r->msgs[i]);
    if (r->violations > r->n_msgs)
        fprintf(f, "... and %ld more violations\n", r->violations - r->n_msgs);
    fprintf(f, "chaos: %s (%ld violations)\n", r->violations ? "FAILED" : "PASSED", r->violations);
}
