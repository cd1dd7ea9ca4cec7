/* reader.h -- the poller of the live end-to-end mode: every result read
 * once, inside the measured window, as a front end would read them.
 *
 * The Lua design hands each caller its answer inline; allocd writes it to
 * P:{B}:results and somebody has to read it. A throughput that leaves that
 * read out compares unlike work, so the headline mode runs this reader on
 * its own connection while the producers push and allocd serves: it asks
 * for the results of the requests whose push has returned, by HMGET of
 * many ids at a time (what a poller serving many users does), and the
 * clock stops at the last result it reads. Latency is "result visible to
 * the reader" minus the push (or, paced, the scheduled push).
 *
 * How it avoids asking for results that cannot exist yet (every nil field
 * is Redis work too, so it is counted and reported): each round reads
 * `stats.dequeued` (one HGET; what a status page polls anyway), which
 * counts the requests decided so far, all of them answered in the same
 * transaction;
 * - with ordinals (the position transaction gives each request its
 *   ordinal) that tells exactly which ids are decided: no id is asked for
 *   twice;
 * - without (plain RPUSH) it tells how many decided results are not read
 *   yet; requests of one producer connection are queued, decided and
 *   answered in their push order, so the answered ids of a producer are a
 *   prefix: the reader asks each producer for its share of that number
 *   plus a quarter and 8 (at most 1.25 times the last round's answer plus
 *   8) and moves over the prefix.
 */
#ifndef ALLOCBENCH_READER_H
#define ALLOCBENCH_READER_H

#include <stdio.h>

#include "bench.h"
#include "timeline.h"

typedef struct reader_job {
    const bench_target *target;
    const char *results;      /* P:{B}:results */
    const char *stats;        /* P:{B}:stats (for dequeued) */
    long n;                   /* requests; producer p has i = k * producers + p */
    int producers;
    const long *acked;        /* per producer: pushes returned (atomic reads) */
    const int64_t *push_us;   /* wall us of each push (paced: when it was due) */
    const int64_t *ordinal;   /* per request, or NULL (plain RPUSH); negative:
                               * only an upper bound is known (peek) */
    int64_t deadline_us;      /* mono */
    FILE *dump;               /* or NULL: "index push_ms read_ms at_ms" per result
                               * (at_ms: the result's `at`, when allocd decided it) */
    int64_t *read_us;         /* or NULL: per request, wall us when read */
    timeline *tl;             /* or NULL: dequeued and read, sampled (timeline.h) */
    pid_t redis_pid, allocd_pid; /* 0 or the processes whose schedstat the
                               * timeline's samples carry */
    /* results */
    latency lat;              /* ms, push -> read */
    outcome out;
    long read, hmgets, fields_asked, nil_fields, dequeued_polls;
    int64_t t_last;           /* wall us of the last result read */
    char err[160];
} reader_job;

/* Reads until all n results are read (0) or the deadline (-1, err set). */
int reader_run(reader_job *j);

/* A timeline reading (timeline_note) and, when it is kept, the schedstat
 * of Redis and allocd with it (a pid of 0 is not read): the e2e reader
 * takes one each round, a prepushed drain's poll every 100 ms (--timeline).
 * 0, or -1 out of memory (the timeline stays as it was). */
int reader_note_timeline(timeline *tl, int64_t t_us, int64_t dequeued, long read, pid_t redis_pid,
                         pid_t allocd_pid);

#endif
