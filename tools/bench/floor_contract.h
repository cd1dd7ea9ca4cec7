/* floor_contract.h -- what Redis itself does for the contract's own work,
 * with no allocd: the producers' RPUSH of every request, a take of each
 * chunk off the queue, the result HSET of every request, the holder HSET
 * of every user granted, `free`, `stats`, one chunk-format log entry, and
 * the poller's HMGET of every result (contract sections 3, 4, 6, 7, 11.1),
 * on a new Redis, pipelined from one connection. The decisions are the
 * stock mix's (units per item, per_user), made in the bench.
 *
 * floor.h's floor is Redis's least work for a request (push and read);
 * this one adds what any design that keeps the contract's results and
 * holders must have Redis write, so the rate it reaches -- Redis busy on
 * nothing else, its CPU per request measured -- is the most any such
 * design can serve on this machine's Redis core. Set beside the Lua
 * design's rate in the same run, it says how high the end-to-end ratio
 * can go at all here (docs/PERFORMANCE.md, "The contract's floor"). */
#ifndef ALLOCBENCH_FLOOR_CONTRACT_H
#define ALLOCBENCH_FLOOR_CONTRACT_H

#include <sys/types.h>

#include "bench/bench.h"

/* One timed pass: requests/s, Redis doing nothing else; Redis's CPU
 * (utime + stime) and page faults per request, -1 unknown; its commands. */
typedef struct fc_pass {
    double rate, cpu_us, faults;
    cmdstats cmds;      /* INFO commandstats over the pass */
} fc_pass;

typedef struct floor_contract_result {
    long n, granted;
    int chunk, drain;
    fc_pass pass;
} floor_contract_result;

/* Runs w (a stock mix) through Redis at t in chunks of `chunk`; redis_pid
 * (0: not known) is where its CPU and faults are read. With drain, every
 * request is pushed first, outside the measure, and a chunk is the take
 * and the writes (allocbench's drain: the queue full before the clock);
 * else the pushes and the poller's reads are in it (the e2e rounds). The
 * keys are deleted after. Returns 0, or -1 with err set. */
int floor_contract_measure(const bench_target *t, pid_t redis_pid, const workload *w, int chunk, int drain,
                           floor_contract_result *out, char *err, size_t errlen);

/* One floor measured several times, each on a new Redis (allocbench):
 * Redis's CPU per request for the same writes moves by a quarter from one
 * run to the next on a shared machine, so the run reported is the median
 * by it, with the range. */
#define FLOOR_CONTRACT_RUNS 3
typedef struct floor_contract_runs {
    floor_contract_result run[FLOOR_CONTRACT_RUNS];
    int n;                    /* runs that succeeded */
    char err[160];            /* why the last one failed */
} floor_contract_runs;

/* The median run by cpu_us (NULL when none succeeded); *lo and *hi get the
 * least and most cpu_us. */
const floor_contract_result *floor_contract_median(const floor_contract_runs *r, double *lo, double *hi);

#endif
