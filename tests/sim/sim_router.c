/* sim_router.c -- redis/redis_router.h in the simulator.
 *
 * Against Redis Cluster (the `cluster` fault: sim_w->cluster) every call
 * goes to the real daemon/redis/redis_router.c, linked unchanged under the
 * names sim_real_redis_router_* (mk/sim.mk renames its symbols with
 * objcopy, since this file must define the public ones): CLUSTER SLOTS
 * discovery, a connection per master, MOVED -> refresh and retry, ASK ->
 * ASKING and retry, TRYAGAIN and CLUSTERDOWN retried on a timer, all over
 * sim_net.c's connections and sim_loop.c's timers.
 *
 * Otherwise the router is one connection, like the real one's non-cluster
 * mode, to the master its instance knows (sim_w->inst_master): Sentinel's
 * +switch-master moves it (sim_net_master_moved), as redis_router.c's
 * on_master does, and tells its owner -- Sentinel itself (its polls and
 * subscription) is not simulated.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis_conn.h"
#include "redis/redis_router.h"
#include "sim/sim.h"

/* redis_router.c itself, renamed at link time (mk/sim.mk) */
typedef struct sim_real_router sim_real_router;
typedef void (*real_ready_fn)(sim_real_router *r, void *data);
int sim_real_redis_router_init(sim_real_router **out, uv_loop_t *loop, const allocd_config *cfg, const char *name,
                               real_ready_fn on_ready, void *data);
int sim_real_redis_router_ready(const sim_real_router *r);
int sim_real_redis_router_is_cluster(const sim_real_router *r);
int sim_real_redis_router_target(const sim_real_router *r, const char *key, redis_target *out);
void sim_real_redis_router_refresh(sim_real_router *r);
void sim_real_redis_router_on_moved(sim_real_router *r, real_ready_fn fn, void *data);
int sim_real_redis_router_command(sim_real_router *r, const char *key, redis_reply_fn fn, void *priv,
                                  int timeout_ms, int argc, const char **argv, const size_t *argvlen);
int sim_real_redis_router_eval(sim_real_router *r, const char *key, const redis_script *s, redis_reply_fn fn,
                               void *priv, int timeout_ms, int nkeys, int argc, const char **argv,
                               const size_t *argvlen);
void sim_real_redis_router_close(sim_real_router *r, void (*done)(void *data), void *data);

struct redis_router {
    sim_real_router *real;      /* cluster: the real router does everything */
    redis_conn *conn;
    int inst;
    redis_router_ready_fn on_ready;
    void *data;
    redis_router_moved_fn on_moved;
    void *moved_data;
    int closed;
};

static struct redis_router **routers;   /* every router made, closed ones too */
static size_t nrouters;

static void router_ready(redis_conn *c, void *data)
{
    redis_router *r = data;
    if (r->on_ready) { redis_router_ready_fn f = r->on_ready; r->on_ready = NULL; f(r, r->data); }
}

/* The real router announces each time its mode becomes known again. */
static void real_ready(sim_real_router *real, void *data)
{
    redis_router *r = data;
    if (r->on_ready && !r->closed) r->on_ready(r, r->data);
}

static void real_moved(sim_real_router *real, void *data)
{
    redis_router *r = data;
    if (r->on_moved && !r->closed) r->on_moved(r, r->moved_data);
}

int redis_router_init(redis_router **out, uv_loop_t *loop, const allocd_config *cfg, const char *name,
                      redis_router_ready_fn on_ready, void *data)
{
    redis_router *r = calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    r->inst = sim_w->cur;
    r->on_ready = on_ready;
    r->data = data;
    redis_router **n = realloc(routers, (nrouters + 1) * sizeof *routers);
    if (!n) { free(r); return -ENOMEM; }
    routers = n;
    if (sim_w->cluster) {
        int rc = sim_real_redis_router_init(&r->real, loop, cfg, name, real_ready, r);
        if (rc < 0) { free(r); return rc; }
    } else {
        static const redis_conn_callbacks cb = { router_ready, NULL };
        redis_conn_options opt = { .name = name, .backoff_min_ms = 100, .backoff_max_ms = 1000 };
        if (redis_conn_init(&r->conn, loop, &cfg->redis, &opt, &cb, r) < 0) { free(r); return -ENOMEM; }
    }
    routers[nrouters++] = r;   /* listed once it stands: sim_router_free_all frees what is listed */
    *out = r;
    return 0;
}

int redis_router_ready(const redis_router *r) { return r->real ? sim_real_redis_router_ready(r->real) : 1; }
int redis_router_is_cluster(const redis_router *r) { return r->real ? sim_real_redis_router_is_cluster(r->real) : 0; }

static void master_target(int inst, redis_target *out)
{
    memset(out, 0, sizeof *out);
    out->kind = REDIS_TARGET_UNIX;
    snprintf(out->path, sizeof out->path, "sim%d", inst >= 0 ? sim_w->inst_master[inst] : sim_w->master);
}

int redis_router_target(const redis_router *r, const char *key, redis_target *out)
{
    if (r->real) return sim_real_redis_router_target(r->real, key, out);
    master_target(r->inst, out);
    return 0;
}

void redis_router_refresh(redis_router *r)
{
    if (r->real) sim_real_redis_router_refresh(r->real);
}

void redis_router_on_moved(redis_router *r, redis_router_moved_fn fn, void *data)
{
    r->on_moved = fn;
    r->moved_data = data;
    if (r->real) sim_real_redis_router_on_moved(r->real, real_moved, r);
}

static void ev_router_moved(void *a, void *b, uint64_t x)
{
    redis_router *r = a;
    if (r->closed) return;
    redis_target t;
    master_target(r->inst, &t);
    redis_conn_retarget(r->conn, &t);
    if (r->on_moved) r->on_moved(r, r->moved_data);
}

void sim_net_master_moved(int inst)
{
    for (size_t i = 0; i < nrouters; i++)
        if (routers[i]->inst == inst && !routers[i]->closed && !routers[i]->real)
            sim_at(sim_w->now, inst, ev_router_moved, routers[i], NULL, 0);
}

int redis_router_command(redis_router *r, const char *key, redis_reply_fn fn, void *priv, int timeout_ms,
                         int argc, const char **argv, const size_t *argvlen)
{
    if (r->real) return sim_real_redis_router_command(r->real, key, fn, priv, timeout_ms, argc, argv, argvlen);
    return redis_conn_commandargv(r->conn, fn, priv, timeout_ms, argc, argv, argvlen);
}

int redis_router_eval(redis_router *r, const char *key, const redis_script *s, redis_reply_fn fn, void *priv,
                      int timeout_ms, int nkeys, int argc, const char **argv, const size_t *argvlen)
{
    if (r->real)
        return sim_real_redis_router_eval(r->real, key, s, fn, priv, timeout_ms, nkeys, argc, argv, argvlen);
    return redis_conn_eval(r->conn, s, fn, priv, timeout_ms, nkeys, argc, argv, argvlen);
}

typedef struct router_close { void (*done)(void *); void *data; } router_close;

static void router_closed(redis_conn *c, void *data)
{
    router_close *rc = data;
    if (rc->done) rc->done(rc->data);
    free(rc);
}

/* The router's memory stays until sim_router_free_all: a move event may
 * still name it. The real router frees itself once its connections and
 * timers are closed. */
void redis_router_close(redis_router *r, void (*done)(void *data), void *data)
{
    r->closed = 1;
    if (r->real) {
        sim_real_router *real = r->real;
        sim_real_redis_router_close(real, done, data);
        return;
    }
    router_close *rc = malloc(sizeof *rc);
    if (!rc) abort();
    *rc = (router_close){ done, data };
    redis_conn_close(r->conn, router_closed, rc);
}

void sim_router_free_all(void)
{
    for (size_t i = 0; i < nrouters; i++) free(routers[i]);
    free(routers);
    routers = NULL;
    nrouters = 0;
}
