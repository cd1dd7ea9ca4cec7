/* batch_worker.h -- the one writer of one batch.
 *
 * A batch worker owns a batch while allocd serves it: it loads the batch's
 * state from Redis into an engine, then loops take -> decide -> apply, one
 * chunk per atomic step, and waits on the queue and ctl lists (one blocking
 * connection each) when there is nothing to do. Any failure (Redis down, a
 * timeout, a script error) throws the engine away and starts again from
 * Redis after a backoff. Requests leave the queue only in the transaction
 * that applies their decisions, so a chunk in flight is neither lost nor
 * applied twice. See docs/DESIGN.md.
 */
#ifndef ALLOCD_BATCH_WORKER_H
#define ALLOCD_BATCH_WORKER_H

#include <stdint.h>
#include <uv.h>

#include "base/config.h"
#include "core/engine.h"
#include "core/metrics_hist.h"
#include "redis/redis_router.h"
#include "worker/scripts.h"

typedef struct batch_worker batch_worker;
typedef void (*batch_worker_stopped_fn)(batch_worker *w, void *data);

/* What the worker has done, for metrics. Counters only grow with applied
 * chunks, so a chunk that failed and was decided again counts once. */
typedef struct batch_worker_stats {
    uint64_t chunks;          /* applied chunks */
    uint64_t requests;        /* queue requests and admin commands applied */
    uint64_t failures;        /* steps that failed and caused a reload */
    int loaded;               /* state is loaded and being served */
    int64_t queue_len;        /* P:{B}:queue length after the last take */
    uint64_t last_chunk;      /* requests in the last applied chunk */
    uint64_t by_status[STATUS_INVALID + 1];
    uint64_t rejects[REASON_LAST + 1];
    uint64_t dead, duplicates;
    metrics_hist decide;      /* seconds the engine spent on a chunk */
    metrics_hist apply;       /* seconds from sending the apply to its reply */
    metrics_hist latency;     /* seconds from take reply to apply reply */
    uint64_t reconnects;      /* failures of the worker's four connections */
    double oldest_unanswered_seconds; /* age of the oldest request not answered (an upper
                                         bound within 1 s; 0 when not holding the lease) */
} batch_worker_stats;

/* Starts serving `batch` (connects, loads, serves). Returns 0 or -EINVAL
 * (bad batch id) / -EAGAIN (the router does not know the batch's node yet)
 * / -ENOMEM; on error nothing was started and on_stopped is never called.
 * cfg, scripts and router must outlive the worker. The router finds the
 * node of the batch's slot and carries the global order-id commands. */
int batch_worker_start(batch_worker **out, uv_loop_t *loop,
                       const allocd_config *cfg, const allocd_scripts *scripts,
                       redis_router *router, const char *batch,
                       batch_worker_stopped_fn on_stopped, void *data);
/* Drains: the chunks in flight are decided and applied, nothing new is
 * taken, then the worker closes and on_stopped is called. */
void batch_worker_stop(batch_worker *w);
/* Stops at once: what was not applied stays at the head of the queue for
 * the next start. on_stopped is still called. */
void batch_worker_abort(batch_worker *w);

/* Sentinel moved the master (redis_router_on_moved): a worker still on
 * the old address fails over to the new one now, as its watch tick would
 * within a second; one already there, backing off or stopping is left
 * alone. */
void batch_worker_follow_master(batch_worker *w);

const char *batch_worker_batch(const batch_worker *w);
/* 1 when it stopped because it could not serve the batch (answer_ms):
 * the owner should let another instance have the batch for a while. */
int batch_worker_gave_up(const batch_worker *w);
/* Refreshes the connection counters, then returns the stats. */
const batch_worker_stats *batch_worker_get_stats(batch_worker *w);

#endif
