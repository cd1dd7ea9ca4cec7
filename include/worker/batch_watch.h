/* batch_watch.h -- the worker's watchdog: every request answered in time.
 *
 * A timer per worker. Each tick it probes the batch (MULTI; HGET stats
 * dequeued; LLEN queue; LLEN ctl; EXEC, on a connection the worker names)
 * into an answer_watch (core/answer_watch.h: the age of the oldest
 * unanswered request), then asks the worker to judge itself (the check
 * callback), which gives the batch up when it cannot serve. Kept out of
 * batch_worker.c so the control flow there stays the control flow.
 */
#ifndef ALLOCD_BATCH_WATCH_H
#define ALLOCD_BATCH_WATCH_H

#include <stdint.h>
#include <uv.h>

#include "core/answer_watch.h"
#include "redis/redis_conn.h"
#include "worker/batch_keys.h"

typedef struct batch_watch_callbacks {
    /* The connection to probe on now (NULL: skip the probe). */
    redis_conn *(*probe_conn)(void *data);
    /* Runs every tick, after the probe was sent: the worker's judgement. */
    void (*check)(void *data, int64_t now_ms);
} batch_watch_callbacks;

typedef struct batch_watch {
    uv_timer_t timer;
    answer_watch aw;
    const batch_keys *keys;
    int timeout_ms;
    int probe_pending;
    int closing;
    int64_t probe_sent_ms;
    const batch_watch_callbacks *cb;
    void *data;
} batch_watch;

/* The tick for a given answer_ms: a tenth of it, from 100 ms to 1 s. */
int batch_watch_tick_ms(int answer_ms);
/* Every time given to the watch is clock_mono_ms() (base/clock.h). */
void batch_watch_init(batch_watch *bw, uv_loop_t *loop, const batch_keys *keys,
                      int answer_ms, int timeout_ms,
                      const batch_watch_callbacks *cb, void *data);
/* Closes the timer; no callback runs afterwards (a probe still out is
 * answered by its connection's close and dropped). */
void batch_watch_close(batch_watch *bw, uv_close_cb done);

#endif
