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

typedef struct e2e_pair {
    run_result plain, txn, peek;  /* peek: only with --peek */
    alt_result lua;
    int ok_plain, ok_txn, ok_lua, ok_peek, has_peek;
    double load;
} e2e_pair;

typedef struct ol_row {
    const char *design;       /* "allocd" or "lua" */
    int pct;                  /* of saturation */
    double saturation, offered, accepted;
    double p50, p99, pmax;
    double redis_us;          /* Redis commandstats usec per request */
    cmdstats cmds;            /* the row's Redis commands (print_open_loop) */
    long n;                   /* requests they are divided by */
    int ok;
    double load;
} ol_row;

#endif
