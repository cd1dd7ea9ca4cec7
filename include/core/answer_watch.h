/* answer_watch.h -- is every request of a batch answered in bounded time?
 *
 * Contract 9.6: a request gets its final result within answer_ms of being
 * dequeued. A worker can fail that without failing any step: a connection
 * that never comes back (file descriptors exhausted), a load that keeps
 * failing, an idle wait that cannot be parked. This module holds the two
 * measures the worker acts on, as pure state with time passed in (ms, any
 * monotonic clock):
 *
 * - the age of the oldest unanswered request. Requests carry no timestamp,
 *   so the worker probes the batch now and then (stats.dequeued and the
 *   queue's length, read atomically): at a probe every request with
 *   seq <= dequeued + length exists, and one not seen by the probe before
 *   arrived after that earlier probe was sent. A mark (that earlier probe's
 *   time, the end seq) is kept until stats.dequeued passes it, so the age
 *   reported is an upper bound, at most one probe interval above the truth.
 *   Admin commands (ctl, which has no counter) count from the first probe
 *   that found ctl non-empty until one finds it empty.
 * - since when the worker has not been able to serve: the worker reports
 *   good moments (a chunk applied, parked idle with its waits, a load in
 *   progress after no failure) and the time since the last one is its
 *   "cannot serve" time.
 */
#ifndef ALLOCD_ANSWER_WATCH_H
#define ALLOCD_ANSWER_WATCH_H

#include <stddef.h>
#include <stdint.h>

#define ANSWER_WATCH_MARKS 64

typedef struct answer_mark {
    int64_t since_ms;         /* requests up to `end` arrived after this */
    int64_t end;              /* seq of the last request then in the queue */
} answer_mark;

typedef struct answer_watch {
    answer_mark marks[ANSWER_WATCH_MARKS]; /* oldest first, both fields rising */
    size_t n;
    int64_t answered;         /* stats.dequeued at the last probe */
    int64_t last_probe_ms;    /* when the last probe that answered was sent; -1: none */
    int64_t ctl_since_ms;     /* -1: ctl empty at the last probe */
    int64_t last_good_ms;     /* the last moment the worker could serve */
    int64_t last_apply_ms;    /* the last chunk applied, or init */
} answer_watch;

void answer_watch_init(answer_watch *aw, int64_t now_ms);
/* Forget what the probes saw (the worker stopped being the batch's writer);
 * the good and apply times are kept. */
void answer_watch_reset(answer_watch *aw);
/* A probe sent at sent_ms read stats.dequeued, LLEN queue and LLEN ctl. */
void answer_watch_probe(answer_watch *aw, int64_t sent_ms, int64_t dequeued,
                        int64_t queue_len, int64_t ctl_len);
/* Age of the oldest unanswered request (or admin command) in ms; 0: none. */
int64_t answer_watch_oldest_ms(const answer_watch *aw, int64_t now_ms);
/* The worker could serve at now_ms. */
void answer_watch_good(answer_watch *aw, int64_t now_ms);
/* A chunk was applied at now_ms (also a good moment). */
void answer_watch_applied(answer_watch *aw, int64_t now_ms);
/* ms since the worker last could serve. */
int64_t answer_watch_unable_ms(const answer_watch *aw, int64_t now_ms);
/* ms since the last chunk applied (or since init). */
int64_t answer_watch_idle_ms(const answer_watch *aw, int64_t now_ms);

#endif
