/* sentinel.h -- where the master is, as Redis Sentinel says.
 *
 * For `redis = "sentinel://h:p,h:p/name"` (base/redis_url.h). One client
 * per process (the router owns it): it asks a sentinel `SENTINEL MASTER
 * name` every half second and at once after any change, and keeps a
 * subscription to `+switch-master` on a sentinel so a failover is known the
 * moment the sentinels decide it. An address is taken only with a config
 * epoch at least the highest seen (a lagging sentinel cannot send allocd
 * back to the old master); a +switch-master counts as a newer epoch. When
 * a sentinel does not answer, the next one in the list is asked. Every
 * change of address is reported through on_master; the owner moves its
 * connections.
 */
#ifndef ALLOCD_SENTINEL_H
#define ALLOCD_SENTINEL_H

#include <uv.h>

#include "base/redis_url.h"

typedef struct redis_sentinel redis_sentinel;
typedef void (*redis_sentinel_master_fn)(const redis_target *master, void *data);

/* spec: a REDIS_TARGET_SENTINEL target (its user and password are the
 * master's, copied into every address reported). 0, -EINVAL or -ENOMEM. */
int redis_sentinel_init(redis_sentinel **out, uv_loop_t *loop, const redis_target *spec,
                        const char *name, int timeout_ms, int connect_timeout_ms,
                        redis_sentinel_master_fn on_master, void *data);
/* The master last reported; 0, or -EAGAIN before the first answer. */
int redis_sentinel_master(const redis_sentinel *s, redis_target *out);
/* Stops; done runs once every handle is closed. */
void redis_sentinel_close(redis_sentinel *s, void (*done)(void *data), void *data);

#endif
