/* floor_contract.h -- what Redis itself does for the contract's own work,
 * with no allocd: the producers' RPUSH of every request, a take of each
 * chunk off the queue, the result HSET of every request, the holder HSET
 * of every user granted, `free`, `stats`, one chunk-format log entry (the
 * take and the writes in one MULTI/EXEC, as sections 6 and 7 ask), and
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

/* One timed pass: requests/s, Redis doing nothing else; Redis's CPU per
 * request (its main thread's run time, else the process's utime +
 * stime) and page faults per request, -1 unknown; its commands. */
typedef struct fc_pass {
    double rate, cpu_us, faults;
    cmdstats cmds;      /* INFO commandstats over the pass */
} fc_pass;

/* What a floor's clock covers. E2E: every chunk's pushes (one RPUSH a
 * request), its take, its writes and the poller's read of its results,
 * as in allocbench's e2e rounds; E2E_TXN: the same with the contract's
 * position transaction for every push (MULTI, RPUSH, HGET stats dequeued,
 * EXEC); DRAIN: every request pushed first, outside the clock, then each
 * chunk's take and writes (the drain pairs: the queue full before the
 * clock, no reads). */
typedef enum { FLOOR_E2E, FLOOR_E2E_TXN, FLOOR_DRAIN, FLOOR_KINDS } floor_kind;

typedef struct floor_contract_result {
    long n, granted;
    int chunk;
    floor_kind kind;
    fc_pass pass;
} floor_contract_result;

/* Runs w (a stock mix) through Redis at t in chunks of `chunk`, timing
 * what `kind` says; redis_pid (0: not known) is where its CPU and faults
 * are read. The keys are deleted after. Returns 0, or -1 with err set. */
int floor_contract_measure(const bench_target *t, pid_t redis_pid, const workload *w, int chunk, floor_kind kind,
                           floor_contract_result *out, char *err, size_t errlen);

/* One floor measured several times, each on a new Redis (allocbench).
 * Redis's CPU per request for the same writes moved from 2.8 to 6.5 us
 * between runs on the shared 2-core machine: a neighbour on the other
 * core, a costlier page fault, only ever add to it. So the run reported
 * is the one with the least, the nearest to the work's own cost; the
 * ceiling it gives errs high, as a bound on every design should. */
#define FLOOR_CONTRACT_RUNS 3
typedef struct floor_contract_runs {
    floor_contract_result run[FLOOR_CONTRACT_RUNS];
    int n;                    /* runs that succeeded */
    char err[160];            /* why the last one failed */
} floor_contract_runs;

/* The run with the least cpu_us (NULL when none succeeded); *lo and *hi
 * get the least and most cpu_us. */
const floor_contract_result *floor_contract_best(const floor_contract_runs *r, double *lo, double *hi);

#endif
