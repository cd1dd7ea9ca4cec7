/* chaos_route.c -- Redis commands of the chaos run routed by key slot:
 * one context per node and the slot map (from CLUSTER SLOTS, corrected by
 * every MOVED), so the same producers and checker serve a single Redis
 * (node 0, every slot) and a Cluster; and a producer's pushes, retried
 * until Redis acknowledges them. */
#include "chaos_int.h"

/* ---------------------------------------------- routing by key slot -- */

/* A single Redis is one node that serves every slot; in cluster mode each
 * node has a context and the slot map (from CLUSTER SLOTS, corrected by
 * every MOVED) says which one serves a key. All keys of a batch carry its
 * tag {B}, so a batch is one slot (cx->bslot). */

redisContext *chaos__node_connect(chaos_ctx *cx, int node)
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

int chaos__slot_node(chaos_ctx *cx, uint16_t slot)
{
    int n = atomic_load(&cx->slot_node[slot]);
    return n >= 0 && n < cx->n_nodes ? n : 0;
}

uint16_t chaos__key_slot(const char *key) { return cluster_key_slot(key, strlen(key)); }

void chaos__rc_close(rconn *rc)
{
    for (int i = 0; i < MAX_NODES; i++) {
        if (rc->c[i]) redisFree(rc->c[i]);
        rc->c[i] = NULL;
    }
}

/* The context of `node`, connecting if needed (NULL if that fails). */
redisContext *chaos__rc_node(chaos_ctx *cx, rconn *rc, int node)
{
    if (!rc->c[node]) rc->c[node] = chaos__node_connect(cx, node);
    return rc->c[node];
}

/* The same, retrying for up to 600 s (a Redis outage). */
redisContext *chaos__rc_node_retry(chaos_ctx *cx, rconn *rc, int node, int who)
{
    double start = chaos__now_s();
    for (;;) {
        redisContext *c = chaos__rc_node(cx, rc, node);
        if (c) return c;
        if (chaos__now_s() - start > 600) {
            chaos__violation(cx, &cx->rep->other, "producer %d could not reach Redis node %d for 600 s", who, node);
            return NULL;
        }
        harness_sleep_ms(30);
    }
}

/* Reads a redirect out of an error reply: MOVED and ASK update the slot map
 * (ASK only for this one retry: *ask is set), TRYAGAIN and CLUSTERDOWN wait a
 * little. Returns 1 when the command should be sent again. */
int chaos__rc_redirect(chaos_ctx *cx, const redisReply *r, int *ask_node)
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
redisReply *chaos__rcmdv(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, va_list ap)
{
    char *buf = NULL;
    int len = redisvFormatCommand(&buf, fmt, ap);
    if (len < 0) return NULL;
    int node = chaos__slot_node(cx, slot), asking = 0;
    redisReply *r = NULL;
    for (int attempt = 0; attempt < 50; attempt++) {
        redisContext *c = chaos__rc_node(cx, rc, node);
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
        if (!chaos__rc_redirect(cx, r, &ask)) break;
        freeReplyObject(r);
        r = NULL;
        asking = ask >= 0;
        node = asking ? ask : chaos__slot_node(cx, slot);
    }
    redisFreeCommand(buf);
    return r;
}

redisReply *chaos__rcmd(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = chaos__rcmdv(cx, rc, slot, fmt, ap);
    va_end(ap);
    return r;
}

/* proc_int over the router: integer or numeric string, 0 for nil, -1 else. */
long long chaos__rint_(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = chaos__rcmdv(cx, rc, slot, fmt, ap);
    va_end(ap);
    return proc_reply_int(r);
}



/* RPUSHes every entry, pipelined; on any error (connection lost, LOADING,
 * timeout) reconnects and pushes the whole group again. Entries whose first
 * try did reach Redis are then pushed twice: allocd must treat the second as
 * a duplicate (or, for dead garbage, as another dead entry). */
int chaos__push_group(producer *pr, const pending *g, size_t n)
{
    chaos_ctx *cx = pr->cx;
    if (n == 0) return 0;
    int node_of[GROUP_MAX];
    for (;;) {
        int ok = 1, io = 0;
        for (size_t i = 0; i < n; i++) {
            node_of[i] = chaos__slot_node(cx, cx->bslot[g[i].batch]);
            if (!chaos__rc_node_retry(cx, &pr->rc, node_of[i], pr->idx)) return -1;
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
                chaos__rc_redirect(cx, r, NULL);
            }
            if (r) freeReplyObject(r);
        }
        if (ok) {
            for (size_t i = 0; i < n; i++)
                if (g[i].dead) pr->k.dead_acked[g[i].batch]++;
            return 0;
        }
        if (io || cx->n_nodes == 1) chaos__rc_close(&pr->rc);
        pr->k.retries++;
        harness_sleep_ms(20);
    }
}
