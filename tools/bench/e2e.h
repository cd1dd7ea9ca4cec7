/* e2e.h -- the rows of allocbench's headline comparison: live end to end.
 *
 * One round of the comparison runs, on a fresh daemon and an emptied Redis
 * each time, allocd with plain RPUSH producers, allocd with the contract's
 * position transaction, and the Lua design, all on the `stock` mix, with
 * producers pushing while the design serves and every result read once
 * (allocd: by the poller of reader.h; Lua: inline in its reply). Ratios
 * are taken within a round and the targets judged on their median, since
 * one round on a shared machine can be 10-20% off either way.
 *
 * The open-loop rows pace allocd (plain RPUSH, poller) and Lua at a share
 * of the saturation each reached in the rounds, with no cap on requests in
 * flight, and count every latency from when its request was due.
 */
#ifndef ALLOCBENCH_E2E_H
#define ALLOCBENCH_E2E_H

#include "designs.h"

#define MAX_E2E 20
#define MAX_OL 16
#define MAX_OL_RUNS 9

typedef struct e2e_pair {
    run_result plain, txn, peek;  /* peek: only with --peek */
    alt_result lua;
    int ok_plain, ok_txn, ok_lua, ok_peek, has_peek;
    double load;
} e2e_pair;

/* One row of the open-loop table: a design at a share of its saturation,
 * run `runs` times. accepted, p50, p99, pmax and redis_us are the medians
 * of the runs that succeeded (each on its own), cmds and n those of the run
 * whose p99 is the median; p99_run lists every run's p99 in run order. A
 * single run's p99 on a shared 2-core machine swings several-fold from
 * one run to the next, so the target is judged on the median. */
typedef struct ol_row {
    const char *design;       /* "allocd" or "lua" */
    int pct;                  /* of saturation */
    double saturation, offered, accepted;
    double p50, p99, pmax;
    double redis_us;          /* Redis commandstats usec per request */
    cmdstats cmds;            /* the median run's Redis commands (print_open_loop) */
    long n;                   /* requests they are divided by */
    int ok;                   /* every run succeeded */
    int runs;                 /* runs made */
    double p99_run[MAX_OL_RUNS]; /* each run's p99, ms (-1: the run failed) */
    double load;              /* load average before the first run */
} ol_row;

#endif
