/* redis_router.c -- see redis_router.h. */
#include "redis/redis_router.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/cluster_slots.h"
#include "redis/sentinel.h"
#include "base/log.h"

#define MAX_REDIRECTS 8

typedef enum { MODE_UNKNOWN = 0, MODE_SINGLE, MODE_CLUSTER } router_mode;

typedef struct router_node {
    cluster_node node;
    redis_conn *conn;
} router_node;

typedef struct router_req router_req;

struct redis_router {
    uv_loop_t *loop;
    const allocd_config *cfg;
    char name[96];
    redis_conn *seed;
    router_mode mode;
    cluster_map map;
    router_node *nodes;
    size_t n_nodes;
    int refresh_pending;
    router_req *reqs;            /* every command in flight or waiting to retry */
    redis_router_ready_fn on_ready;
    void *data;
    int closing;
    int handles_open;
    void (*done)(void *data);
    void *done_data;
    /* sentinel:// (sentinel.h): the seed connection follows the master */
    redis_sentinel *sentinel;
    redis_target master;
    redis_router_moved_fn on_moved;
    void *moved_data;
};

struct router_req {
    redis_router *r;
    router_req *next, *prev;
    redis_reply_fn fn;
    void *priv;
    int timeout_ms;
    const redis_script *script;
    int nkeys;
    int argc;
    char **argv;
    size_t *lens;
    uint16_t slot;
    int attempts;
    int asking;
    cluster_node ask_node;
    uv_timer_t timer;
    int timer_live;
};

static void refresh(redis_router *r);

/* ---- nodes ---- */

static redis_conn *node_conn(redis_router *r, const cluster_node *n)
{
    for (size_t i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].node.port == n->port && !strcmp(r->nodes[i].node.host, n->host))
            return r->nodes[i].conn;
    router_node *nodes = realloc(r->nodes, (r->n_nodes + 1) * sizeof *nodes);
    if (!nodes) return NULL;
    r->nodes = nodes;
    router_node *rn = &nodes[r->n_nodes];
    rn->node = *n;
    redis_target t;
    cluster_node_target(n, &r->cfg->redis, &t);
    char name[400];
    snprintf(name, sizeof name, "%s@%s:%d", r->name, n->host, n->port);
    redis_conn_options opt = { name, r->cfg->connect_timeout_ms, r->cfg->backoff_min_ms, r->cfg->backoff_max_ms };
    if (redis_conn_init(&rn->conn, r->loop, &t, &opt, NULL, r) < 0) return NULL;
    r->n_nodes++;
    return rn->conn;
}

static redis_conn *conn_for(redis_router *r, router_req *q)
{
    if (r->mode != MODE_CLUSTER) return r->seed;
    if (q->asking) return node_conn(r, &q->ask_node);
    const cluster_node *n = cluster_map_node(&r->map, q->slot);
    return n ? node_conn(r, n) : NULL;
}

/* ---- requests ---- */

static void req_free(router_req *q)
{
    for (int i = 0; i < q->argc; i++) free(q->argv[i]);
    free(q->argv);
    free(q->lens);
    free(q);
}

static void req_unlink(router_req *q)
{
    redis_router *r = q->r;
    if (q->prev) q->prev->next = q->next; else r->reqs = q->next;
    if (q->next) q->next->prev = q->prev;
}

static void on_req_timer_closed(uv_handle_t *h) { req_free(h->data); }

static void req_finish(router_req *q, redisReply *reply, const char *err)
{
    redis_conn *conn = q->r->seed;
    req_unlink(q);
    if (q->fn) q->fn(conn, reply, err, q->priv);
    if (q->timer_live) uv_close((uv_handle_t *)&q->timer, on_req_timer_closed);
    else req_free(q);
}

static void on_req_reply(redis_conn *c, redisReply *reply, const char *err, void *priv);

static int req_send(router_req *q)
{
    redis_router *r = q->r;
    redis_conn *c = conn_for(r, q);
    if (!c || !redis_conn_is_ready(c)) return -ENOTCONN;
    if (q->asking) {
        const char *asking[] = { "ASKING" };
        if (redis_conn_commandargv(c, NULL, NULL, q->timeout_ms, 1, asking, NULL) < 0) return -ENOTCONN;
    }
    if (q->script)
        return redis_conn_eval(c, q->script, on_req_reply, q, q->timeout_ms, q->nkeys, q->argc,
                               (const char **)q->argv, q->lens);
    return redis_conn_commandargv(c, on_req_reply, q, q->timeout_ms, q->argc,
                                  (const char **)q->argv, q->lens);
}

static void on_req_timer(uv_timer_t *t)
{
    router_req *q = t->data;
    if (q->r->closing) return;
    if (req_send(q) == 0) return;
    if (++q->attempts > MAX_REDIRECTS) { req_finish(q, NULL, "no connection to the cluster node"); return; }
    uv_timer_start(&q->timer, on_req_timer, 100, 0);
}

static void retry_later(router_req *q, uint64_t ms)
{
    if (!q->timer_live) {
        uv_timer_init(q->r->loop, &q->timer);
        q->timer.data = q;
        q->timer_live = 1;
    }
    uv_timer_start(&q->timer, on_req_timer, ms, 0);
}

static int starts(const redisReply *r, const char *p)
{
    return r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, p, strlen(p));
}

static void on_req_reply(redis_conn *c, redisReply *reply, const char *err, void *priv)
{
    router_req *q = priv;
    redis_router *r = q->r;
    if (r->closing || err || !(starts(reply, "MOVED ") || starts(reply, "ASK ") ||
                               starts(reply, "TRYAGAIN") || starts(reply, "CLUSTERDOWN"))) {
        req_finish(q, reply, r->closing ? "closed" : err);
        return;
    }
    if (++q->attempts > MAX_REDIRECTS) { req_finish(q, reply, NULL); return; }
    uint16_t slot;
    cluster_node node;
    q->asking = 0;
    if (starts(reply, "MOVED ") && cluster_parse_redirect(reply->str, &slot, &node) == 0) {
        /* connect to the new owner now and re-read the whole map; the
         * retry goes wherever the refreshed map says */
        node_conn(r, &node);
        refresh(r);
        retry_later(q, 20);
    } else if (starts(reply, "ASK ") && cluster_parse_redirect(reply->str, &slot, &node) == 0) {
        q->asking = 1;
        q->ask_node = node;
        node_conn(r, &node);
        retry_later(q, 0);
    } else {
        retry_later(q, 50u << (q->attempts < 5 ? q->attempts : 5));
    }
}

static router_req *req_new(redis_router *r, const char *key, redis_reply_fn fn, void *priv,
                           int timeout_ms, int argc, const char **argv, const size_t *lens)
{
    router_req *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->r = r;
    q->fn = fn;
    q->priv = priv;
    q->timeout_ms = timeout_ms;
    q->slot = cluster_key_slot(key, strlen(key));
    q->argv = calloc((size_t)argc, sizeof *q->argv);
    q->lens = calloc((size_t)argc, sizeof *q->lens);
    if (!q->argv || !q->lens) { req_free(q); return NULL; }
    for (int i = 0; i < argc; i++) {
        size_t n = lens ? lens[i] : strlen(argv[i]);
        q->argv[i] = malloc(n + 1);
        if (!q->argv[i]) { q->argc = i; req_free(q); return NULL; }
        memcpy(q->argv[i], argv[i], n);
        q->argv[i][n] = '\0';
        q->lens[i] = n;
        q->argc = i + 1;
    }
    return q;
}

static int submit(redis_router *r, router_req *q)
{
    int rc = req_send(q);
    if (rc < 0) { req_free(q); return rc; }
    q->next = r->reqs;
    if (r->reqs) r->reqs->prev = q;
    r->reqs = q;
    return 0;
}

int redis_router_command(redis_router *r, const char *key, redis_reply_fn fn, void *priv,
                         int timeout_ms, int argc, const char **argv, const size_t *argvlen)
{
    if (!redis_router_ready(r)) return -ENOTCONN;
    router_req *q = req_new(r, key, fn, priv, timeout_ms, argc, argv, argvlen);
    return q ? submit(r, q) : -ENOMEM;
}

int redis_router_eval(redis_router *r, const char *key, const redis_script *s,
                      redis_reply_fn fn, void *priv, int timeout_ms, int nkeys, int argc,
                      const char **argv, const size_t *argvlen)
{
    if (!redis_router_ready(r)) return -ENOTCONN;
    router_req *q = req_new(r, key, fn, priv, timeout_ms, argc, argv, argvlen);
    if (!q) return -ENOMEM;
    q->script = s;
    q->nkeys = nkeys;
    return submit(r, q);
}

/* ---- the slot map ---- */

static void announce(redis_router *r)
{
    if (r->on_ready) r->on_ready(r, r->data);
}

static void on_slots(redis_conn *c, redisReply *reply, const char *err, void *priv)
{
    redis_router *r = priv;
    r->refresh_pending = 0;
    if (r->closing || err) return;
    int was_ready = redis_router_ready(r);
    if (reply->type == REDIS_REPLY_ERROR) {
        if (r->mode == MODE_UNKNOWN && strcmp(r->cfg->cluster, "yes")) {
            r->mode = MODE_SINGLE;
            log_info("redis %s: single server (%s)", r->name, reply->str);
            announce(r);
        } else if (r->mode == MODE_SINGLE) {
            /* every reconnect to a plain Redis asks again and gets the same
             * answer: nothing to warn about */
            log_debug("redis %s: still a single server (%s)", r->name, reply->str);
        } else {
            log_warn("redis %s: CLUSTER SLOTS: %s", r->name, reply->str);
        }
        return;
    }
    cluster_map fresh;
    cluster_map_init(&fresh);
    if (cluster_map_parse(&fresh, reply, r->cfg->redis.host) < 0) {
        log_warn("redis %s: cannot read the CLUSTER SLOTS reply", r->name);
        cluster_map_free(&fresh);
        return;
    }
    cluster_map_free(&r->map);
    r->map = fresh;
    if (r->mode != MODE_CLUSTER)
        log_notice("redis %s: Redis Cluster with %zu masters", r->name, r->map.n_nodes);
    r->mode = MODE_CLUSTER;
    for (size_t i = 0; i < r->map.n_nodes; i++) node_conn(r, &r->map.nodes[i]);
    if (!was_ready) announce(r);
}

static void refresh(redis_router *r)
{
    if (r->refresh_pending || r->closing || !strcmp(r->cfg->cluster, "no")) return;
    redis_conn *c = r->seed && redis_conn_is_ready(r->seed) ? r->seed : NULL;
    for (size_t i = 0; !c && i < r->n_nodes; i++)
        if (redis_conn_is_ready(r->nodes[i].conn)) c = r->nodes[i].conn;
    if (c && redis_conn_command(c, on_slots, r, r->cfg->redis_timeout_ms, "CLUSTER SLOTS") == 0)
        r->refresh_pending = 1;
}

void redis_router_refresh(redis_router *r) { refresh(r); }

void redis_router_on_moved(redis_router *r, redis_router_moved_fn fn, void *data)
{
    r->on_moved = fn;
    r->moved_data = data;
}

static void on_seed_ready(redis_conn *c, void *data)
{
    redis_router *r = data;
    if (!strcmp(r->cfg->cluster, "no") || r->sentinel) {
        if (r->mode == MODE_UNKNOWN) { r->mode = MODE_SINGLE; announce(r); }
        return;
    }
    refresh(r);
}

/* Sentinel named a (new) master: the seed connection goes there, and the
 * owner hears of a move at once (redis_router_on_moved), so batch workers
 * leave the old master now rather than at their next watch tick. */
static void on_master(const redis_target *t, void *data)
{
    redis_router *r = data;
    r->master = *t;
    if (r->seed) {
        redis_conn_retarget(r->seed, t);
        if (r->on_moved) r->on_moved(r, r->moved_data);
        return;
    }
    static const redis_conn_callbacks cb = { on_seed_ready, NULL };
    redis_conn_options opt = { r->name, r->cfg->connect_timeout_ms, r->cfg->backoff_min_ms, r->cfg->backoff_max_ms };
    if (redis_conn_init(&r->seed, r->loop, t, &opt, &cb, r) < 0) log_err("%s: cannot connect to the master", r->name);
}

int redis_router_init(redis_router **out, uv_loop_t *loop, const allocd_config *cfg,
                      const char *name, redis_router_ready_fn on_ready, void *data)
{
    redis_router *r = calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    r->loop = loop;
    r->cfg = cfg;
    r->on_ready = on_ready;
    r->data = data;
    snprintf(r->name, sizeof r->name, "%s", name);
    cluster_map_init(&r->map);
    if (cfg->redis.kind == REDIS_TARGET_SENTINEL) {
        int rc = redis_sentinel_init(&r->sentinel, loop, &cfg->redis, name, cfg->redis_timeout_ms,
                                     cfg->connect_timeout_ms, on_master, r);
        if (rc < 0) { free(r); return rc; }
        *out = r;
        return 0;
    }
    static const redis_conn_callbacks cb = { on_seed_ready, NULL };
    redis_conn_options opt = { name, cfg->connect_timeout_ms, cfg->backoff_min_ms, cfg->backoff_max_ms };
    int rc = redis_conn_init(&r->seed, loop, &cfg->redis, &opt, &cb, r);
    if (rc < 0) { free(r); return rc; }
    *out = r;
    return 0;
}

int redis_router_ready(const redis_router *r)
{
    if (r->mode == MODE_SINGLE) return r->seed && redis_conn_is_ready(r->seed);
    return r->mode == MODE_CLUSTER;
}

int redis_router_is_cluster(const redis_router *r) { return r->mode == MODE_CLUSTER; }

int redis_router_target(const redis_router *r, const char *key, redis_target *out)
{
    if (r->mode == MODE_SINGLE) { *out = r->sentinel ? r->master : r->cfg->redis; return 0; }
    if (r->mode != MODE_CLUSTER) return -EAGAIN;
    const cluster_node *n = cluster_map_node(&r->map, cluster_key_slot(key, strlen(key)));
    if (!n) return -EAGAIN;
    cluster_node_target(n, &r->cfg->redis, out);
    return 0;
}

/* ---- closing ---- */

static void maybe_done(redis_router *r)
{
    if (r->handles_open > 0) return;
    cluster_map_free(&r->map);
    free(r->nodes);
    void (*done)(void *) = r->done;
    void *data = r->done_data;
    free(r);
    if (done) done(data);
}

static void on_closed(redis_conn *c, void *data)
{
    redis_router *r = data;
    r->handles_open--;
    maybe_done(r);
}

static void on_sentinel_closed(void *data) { on_closed(NULL, data); }

void redis_router_close(redis_router *r, void (*done)(void *data), void *data)
{
    r->closing = 1;
    r->done = done;
    r->done_data = data;
    r->handles_open = !!r->seed + !!r->sentinel + (int)r->n_nodes;
    /* commands waiting on a retry timer are answered here; those on a
     * connection are answered by its close */
    router_req *q = r->reqs;
    while (q) {
        router_req *next = q->next;
        if (q->timer_live && uv_is_active((uv_handle_t *)&q->timer)) req_finish(q, NULL, "closed");
        q = next;
    }
    if (r->sentinel) redis_sentinel_close(r->sentinel, on_sentinel_closed, r);
    if (r->seed) redis_conn_close(r->seed, on_closed, r);
    for (size_t i = 0; i < r->n_nodes; i++) redis_conn_close(r->nodes[i].conn, on_closed, r);
}
