/* designs.h -- the three designs allocbench measures, each behind one call.
 *
 * allocd_run() drives the real daemon through the wire contract only
 * (RPUSH requests, read results), in one of two modes: `prepushed` (the
 * whole queue is pushed before the batch is served, then timed from the
 * SADD to P:batches to the last result -- how the checker measures)
 * and `live` (producers push with the queue-position transaction while the
 * daemon serves, optionally paced, which is what gives enqueue-to-result
 * latencies). alt_lua_run() and alt_lock_run() implement the two usual
 * alternatives faithfully in the bench itself, on the same Redis, with the
 * same request mix, so that each report is a ratio.
 */
#ifndef ALLOCBENCH_DESIGNS_H
#define ALLOCBENCH_DESIGNS_H

#include "bench.h"

typedef struct run_opts {
    const bench_target *target;
    const workload *w;
    const char *prefix;       /* the daemon's key prefix */
    const char *batch;        /* with batches > 1: batch.0, batch.1, ... */
    int batches;              /* request i goes to batch i % batches (0 = 1) */
    int live;                 /* 0: prepushed, 1: live producers */
    int producers;            /* live: connections pushing */
    int depth;                /* live: transactions in flight per connection */
    double rate;              /* live: total req/s, 0 = unpaced */
    int tick_us;              /* live, paced: producers send every tick_us */
    int plain;                /* live: plain RPUSH, not the position transaction */
    int peek;                 /* live: HGET dequeued; RPUSH; HGET dequeued, pipelined
                               * without MULTI: the ordinal is exact when the two
                               * reads agree (git show f74d6ce:docs/PERFORMANCE.md) */
    int e2e;                  /* live: a poller reads every result once (reader.h);
                               * the clock stops at the last result read */
    int open_loop;            /* live, paced: no cap on pushes in flight, and
                               * latency from when each push was due */
    int timeline;             /* e2e, paced: print where the latency built up
                               * (timeline.h); prepushed: the drain per 100 ms
                               * (allocd_run.c, poll_until) */
    int timeout_s;
    int chunk;                /* the daemon's chunk, for round trips per chunk */
    pid_t allocd_pid;         /* 0: unknown (--no-daemon) */
    pid_t redis_pid;          /* 0: unknown (--redis) */
    int settle_rss;           /* read allocd's RSS once served (rss_end_kb) */
    int heap_reserved;        /* allocd touched a heap reserve at start: its RSS
                                 does not grow with what it holds until the reserve
                                 is used up, so no bytes per participant */
    int preloaded;            /* prepushed, one batch, loaded and paused first: the
                                 window is the decisions, opened by `resume` (load_ms) */
} run_opts;

typedef struct run_result {
    long n, results, missing;
    outcome out;
    long pos_checked, pos_mismatch; /* live: ordinal from the transaction vs seq */
    long pos_inexact;         /* peek: the two reads differed (ordinal a range) */
    long participants;
    double secs, secs_drain;  /* from SADD/first push; from the first take */
    double tput, tput_drain;  /* requests decided per second */
    double p50, p99, p999, pmax; /* enqueue -> result, ms (live; -1 otherwise) */
    double rate;              /* live: the pacing asked for (0 = unpaced) */
    cmdstats cmds;            /* the daemon's commands in the window */
    double cmds_per_req;      /* every command, including those inside scripts */
    double rt_per_req;        /* round trips: top-level commands of the daemon */
    double rt_per_chunk;
    double redis_usec_per_req;/* Redis's own time in those commands */
    long chunks;
    long rss_base_kb, hwm_kb;
    long rss_end_kb;          /* settle_rss: VmRSS once served, -1 otherwise */
    double bytes_per_participant;
    double cpu_redis_us, cpu_allocd_us, cpu_bench_us; /* per request, -1 unknown */
    double faults_redis, faults_allocd; /* page faults per request, -1 unknown */
    /* e2e: the poller's work (reader.h) */
    long hmgets, fields_asked, nil_fields, dequeued_polls;
    double offered;           /* paced: the rate asked for */
    double load_ms;           /* preloaded: from SADD to the batch loaded and paused */
} run_result;

int allocd_run(const run_opts *o, run_result *res, char *err, size_t errlen);

typedef struct probe_result {
    long samples;
    double p50, p99, max;     /* push -> result visible, ms */
} probe_result;

/* A lone request at a time on an idle batch: push, then poll its result. */
int allocd_probe(const run_opts *o, int samples, probe_result *pr,
                 char *err, size_t errlen);

/* Deletes every key of a batch (all designs): SCAN + UNLINK. */
void batch_cleanup(redisContext *c, const char *prefix, const char *batch);

typedef struct alt_opts {
    const bench_target *target;
    const workload *w;
    const char *batch;
    int conns, depth;         /* lua: pipelined connections, depth each */
    int threads;              /* lock: client threads */
    int max_seconds;          /* stop (and report what was decided) after */
    int lock_sleep_us;        /* lock: base sleep before retrying a taken lock */
    int lock_precheck;        /* lock: read state before locking too */
    double rate;              /* lua: pace calls at rate req/s in total (0 = unpaced) */
    int tick_us;              /* lua, paced: send what is due every tick_us */
    int open_loop;            /* lua, paced: no cap in flight, latency from due time */
    pid_t redis_pid;
} alt_opts;

typedef struct alt_result {
    long n, decided;
    outcome out;
    long lock_retries;
    double secs, tput;
    cmdstats cmds;
    double cmds_per_req, rt_per_req, redis_usec_per_req, cpu_redis_us, cpu_bench_us;
    double faults_redis;      /* Redis's page faults per request, -1 unknown */
    double p50, p99, p999, pmax; /* lua: call -> reply, ms */
} alt_result;

int alt_lua_run(const alt_opts *o, alt_result *res, char *err, size_t errlen);
int alt_lock_run(const alt_opts *o, alt_result *res, char *err, size_t errlen);

/* Key of a design's state: bench:{B}:<design>:<name>. */
int alt_key(char *buf, size_t len, const char *batch, const char *design, const char *name);
/* The free units of every item into the design's `free` hash. */
int alt_seed_free(redisContext *c, const workload *w, const char *batch, const char *design);

#endif
