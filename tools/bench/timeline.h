/* timeline.h -- where a live run's latency builds up, window by window
 * (allocbench --timeline).
 *
 * A p99 over a whole row says how bad the tail is, not where it comes
 * from. A paced allocd request waits in two places before its result is
 * read: in the queue (due but not yet decided: `stats.dequeued` behind the
 * requests due so far) and at the poller (decided but not yet read). The
 * poller reads `dequeued` every round anyway; this module keeps those
 * readings, and with each request's due and read times prints, per window
 * of due time, the latency of the requests due in it and how far behind
 * each of the two stood at the window's end. A prepushed run's drain is
 * printed from the same samples (timeline_print_drain). Pure computation:
 * the reader collects (reader_note_timeline), this prints.
 */
#ifndef ALLOCBENCH_TIMELINE_H
#define ALLOCBENCH_TIMELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct timeline_sample {
    int64_t t_us;             /* wall */
    int64_t dequeued;         /* stats.dequeued read at t_us */
    long read;                /* results the poller had read by t_us */
    /* cumulative ns from /proc/<pid>/schedstat at t_us, or -1: Redis
     * running and runnable-but-waiting (its main thread), allocd running */
    int64_t redis_run_ns, redis_wait_ns, allocd_run_ns;
} timeline_sample;

typedef struct timeline {
    timeline_sample *s;
    size_t n, cap;
    int64_t every_us;         /* at most one sample per this interval */
} timeline;

void timeline_init(timeline *t, int64_t every_us);
void timeline_free(timeline *t);
/* Keeps the reading when every_us has passed since the last one. 0 or -1
 * (out of memory; the timeline stays as it was). */
int timeline_note(timeline *t, int64_t t_us, int64_t dequeued, long read);

/* Prints one line per window_ms of due time: requests due in it, the
 * p50/p99/max latency (due -> read) of those read, the longest a request
 * due in it waited in the load generator (due -> handed to the socket's
 * buffer: `sent_us`, or NULL for no column), and at the window's end the queue's
 * backlog (due so far - dequeued) and the poller's (dequeued - read).
 * When the samples carry schedstat readings, also the share of the
 * window Redis ran, Redis waited for a CPU, and allocd ran.
 * due_us and read_us are per request, wall; read_us 0 = never read. The
 * windows go on past the last due time up to the last reading: an unpaced
 * run (due = pushed) pushes everything early and drains long after. */
void timeline_print(FILE *out, const timeline *t, long n, const int64_t *due_us,
                    const int64_t *sent_us, const int64_t *read_us, int window_ms);

/* A prepushed run's drain: one line per sample after the first, the
 * results decided since the one before (the samples' `read`) and the
 * shares of the interval Redis ran, Redis waited for a CPU and allocd
 * ran. */
void timeline_print_drain(FILE *out, const timeline *t);

#endif
