/* redis_router.h -- commands on keys, sent to whichever server owns them.
 *
 * Against a single Redis it is one connection. Against Redis Cluster
 * (detected with CLUSTER SLOTS, or forced by the `cluster` setting) it
 * keeps the slot map and one connection per master, sends each command to
 * the node of its key's slot, follows MOVED (and refreshes the map) and ASK
 * (ASKING first), and retries TRYAGAIN and CLUSTERDOWN with backoff. It is
 * for the daemon's low-rate global commands (registry, heartbeat, order id
 * blocks); a batch worker asks it for its node once and then talks to that
 * node on connections of its own.
 *
 * Same callback rules as redis_conn: one callback per accepted command,
 * none when the call returned an error.
 */
#ifndef ALLOCD_REDIS_ROUTER_H
#define ALLOCD_REDIS_ROUTER_H

#include <uv.h>

#include "base/config.h"
#include "redis/redis_conn.h"

typedef struct redis_router redis_router;
typedef void (*redis_router_ready_fn)(redis_router *r, void *data);

int redis_router_init(redis_router **out, uv_loop_t *loop, const allocd_config *cfg,
                      const char *name, redis_router_ready_fn on_ready, void *data);
/* The mode is known (and, in a cluster, a slot map is loaded). */
int redis_router_ready(const redis_router *r);
int redis_router_is_cluster(const redis_router *r);
/* Where commands on `key` go. 0, or -EAGAIN while the map is not loaded
 * or does not cover the key's slot. */
int redis_router_target(const redis_router *r, const char *key, redis_target *out);
/* Re-reads the slot map (a worker saw MOVED). */
void redis_router_refresh(redis_router *r);
/* Sentinel (sentinel.h) named a new master: fn runs once the router's own
 * connection was pointed there, so redis_router_target already answers
 * the new address; not for the first address. One listener: the owner
 * of the workers tells each of them. */
typedef void (*redis_router_moved_fn)(redis_router *r, void *data);
void redis_router_on_moved(redis_router *r, redis_router_moved_fn fn, void *data);

int redis_router_command(redis_router *r, const char *key, redis_reply_fn fn, void *priv,
                         int timeout_ms, int argc, const char **argv, const size_t *argvlen);
/* A script whose keys (nkeys of them, first in argv) share key's slot. */
int redis_router_eval(redis_router *r, const char *key, const redis_script *s,
                      redis_reply_fn fn, void *priv, int timeout_ms, int nkeys, int argc,
                      const char **argv, const size_t *argvlen);

/* Pending commands get err "closed"; done runs once everything is freed. */
void redis_router_close(redis_router *r, void (*done)(void *data), void *data);

#endif
