/* batch_lease.h -- the right to serve one batch, held by one instance.
 *
 * This is where the distributed lock of the usual designs belongs: once per
 * batch, not once per request. A lease is the key P:{B}:lease holding a
 * token unique to this worker (instance/pid/random), set with NX PX and
 * renewed every third of its TTL. Each new holder increments P:{B}:internal
 * epoch, and every script that writes batch state checks token and epoch
 * first (fencing), so an instance that was paused or cut off and lost its
 * lease can never write for that batch again. The holder also stops on its
 * own clock: when no renewal succeeded for 90% of the TTL (measured on the
 * monotonic clock from the moment the last successful renewal was sent),
 * the lease counts as lost even if Redis cannot be reached to say so.
 */
#ifndef ALLOCD_BATCH_LEASE_H
#define ALLOCD_BATCH_LEASE_H

#include <stdint.h>
#include <uv.h>

#include "worker/batch_keys.h"
#include "redis/redis_conn.h"
#include "worker/scripts.h"

typedef struct batch_lease batch_lease;

typedef struct batch_lease_callbacks {
    void (*on_acquired)(batch_lease *l, void *data);
    /* Another instance holds it; it expires in pttl ms (-1: no expiry). */
    void (*on_busy)(batch_lease *l, int64_t pttl, const char *holder, void *data);
    /* The lease is gone (renewal refused, expired on our clock, FENCED) or
     * an acquire/renew command failed; `why` says which. */
    void (*on_lost)(batch_lease *l, const char *why, void *data);
    void (*on_released)(batch_lease *l, void *data);
} batch_lease_callbacks;

struct batch_lease {
    redis_conn *conn;
    const allocd_scripts *scripts;
    const batch_keys *keys;
    int ttl_ms;
    char token[128];
    char instance[80];
    char epoch[24];
    int held;
    int closing;
    uint64_t valid_until;      /* uv_hrtime() ns */
    uint64_t renew_sent_at;
    int renew_pending;
    uv_timer_t timer;
    const batch_lease_callbacks *cb;
    void *data;
};

void batch_lease_init(batch_lease *l, uv_loop_t *loop, redis_conn *conn,
                      const allocd_scripts *scripts, const batch_keys *keys,
                      int ttl_ms, const char *instance,
                      const batch_lease_callbacks *cb, void *data);
/* Async: exactly one of on_acquired, on_busy, on_lost. Returns 0 or
 * -ENOTCONN (then no callback). */
int batch_lease_acquire(batch_lease *l);
/* 1 when `holder` is a token of this instance name whose process is gone
 * from this host (our own previous run, killed): its lease can be taken
 * over at once instead of after the TTL. */
int batch_lease_holder_dead(const batch_lease *l, const char *holder);
/* As batch_lease_acquire, but takes the lease over if `holder` still holds it. */
int batch_lease_acquire_from(batch_lease *l, const char *holder);
/* Held, and not yet expired by our own clock. */
int batch_lease_valid(const batch_lease *l);
/* Forget the lease without telling Redis (after FENCED). */
void batch_lease_drop(batch_lease *l);
/* Async compare-and-delete; on_released follows (also when not held or
 * Redis fails: the TTL then frees it). */
void batch_lease_release(batch_lease *l);
/* Stops renewing and closes the timer; no callback runs afterwards. */
void batch_lease_close(batch_lease *l, uv_close_cb done);

#endif
