/* allocbench.h -- what the three files of allocbench share: its options,
 * its rows of results, and the run's state (struct bench); args.c parses
 * the command line into options, tools/allocbench.c sequences the runs,
 * report.c prints the tables, RESULT and TARGET lines. */
#ifndef ALLOCD_BENCH_ALLOCBENCH_H
#define ALLOCD_BENCH_ALLOCBENCH_H

#include "bench/tickets.h"
#include "bench/designs.h"
#include "bench/cluster.h"
#include "bench/e2e.h"
#include "bench/median_ci.h"
#include "bench/floor.h"
#include "bench/floor_contract.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define MAX_ROWS 64
#define MAX_SWEEP 8
#define MAX_CLUSTER 8
#define MAX_CL_RUNS 10
#define MAX_HOUSING_PAIRS 16
#define RT_PRIO_REDIS 20 /* --rt: Redis above allocd; both above the load generator */
#define RT_PRIO_ALLOCD 10

enum { D_ALLOCD = 1, D_LUA = 2, D_LOCK = 4 };

typedef struct options {
    const char *redis_url, *allocd_bin, *prefix;
    int no_daemon;
    pid_t daemon_pid;
    int chunk, registry_ms;
    int scenarios[SC_COUNT];
    int prepushed, live;
    long requests, users, items;
    int hold_ms, producers, depth, timeout_s, batches, tick_us;
    double rate;
    int designs, lua_seconds, lock_threads, lock_sleep_us, lock_seconds, lock_precheck;
    int probe, rate_test, targets, memory;
    int lua_pairs;                /* --lua-pairs: stock allocd+Lua pairs for the target */
    int tickets;                  /* --tickets: the waitlist scenario (bench/tickets.h) */
    int tickets_seconds;          /* --tickets-seconds: each design's run after its first wave (12) */
    int dry_run;                  /* --dry-run: check the options, run nothing */
    int scenarios_given;          /* --scenario or --mode given */
    int e2e_pairs;                /* --e2e-pairs: live end-to-end rounds (e2e.c) */
    int open_loop;                /* --open-loop: offered vs accepted at 25..90% */
    int timeline;                 /* --timeline: each allocd e2e or paced row, window by window */
    int aof;                      /* --aof: private Redis with appendfsync everysec */
    int pin;                      /* --pin: Redis on CPU 0, the rest on the others */
    int rt;                       /* --rt: Redis and allocd under SCHED_FIFO */
    const char *redis_args;       /* --redis-args: more redis-server arguments */
    int targets_e2e;              /* --targets-e2e: the TARGET lines of e2e and open loop */
    int peek;                     /* --peek: e2e rounds also run the HGET/RPUSH/HGET producers */
    const char *log_format;       /* --log-format: allocd's log_format (its default: chunk) */
    const char *heap_reserve_mb;  /* --heap-reserve-mb: allocd's heap_reserve_mb (NULL: allocd's
                                     default; "0" under --memory and --profile-memory) */
    double saturation;            /* --saturation: open loop's 100% for both designs */
    int ol_pcts[8], n_ol_pcts;    /* --open-loop-pcts (25,50,75,90) */
    int ol_runs;                  /* --open-loop-runs: runs per open-loop row (3) */
    int same_pairs;               /* --same-rate-pairs: open loop, both at Lua's 50% rate */
    const char *ol_designs;       /* --open-loop-designs (allocd,lua) */
    int housing_pairs;            /* --scenario housing-elig: pairs of rows, eligibility off/on */
    long profile_memory;          /* --profile-memory U: U users with and without profiles */
    int sweep[MAX_SWEEP], n_sweep;
    int cl_masters[MAX_CLUSTER], cl_instances[MAX_CLUSTER], n_cluster, runs;
    uint64_t seed;
} options;

typedef struct row {
    char mode[32];
    scenario_id sc;
    int chunk, sweep;
    double load;              /* 1-minute load average when the row started */
    workload w;
    run_result a;
    alt_result lua, lock;
    int has_a, a_ok, lua_ok, lock_ok, has_lua, has_lock;
} row;

typedef struct bench {
    options opt;
    proc_redis redis;
    bench_target target;
    bench_daemon daemon;
    int own_redis;
    pid_t redis_pid;
    char dir[256];
    int batch_seq;
    row *rows;
    int n_rows;
    probe_result probe;
    int probe_ok;
    double max_live;          /* rate-test: unpaced live throughput */
    char redis_ver[64];
    char durability[64];
    double load_start;
    double fault_us;                     /* one page fault here (bench_fault_cost_us) */
    e2e_pair pairs[MAX_E2E];
    int n_pairs;
    ol_row ol[MAX_OL];
    int n_ol;
    double same_rate;                    /* offered to both: Lua's 50% of saturation */
    double same_p99[2][MAX_OL_RUNS];     /* allocd, Lua: p99 ms of each pair (-1 failed) */
    int n_same;
    double housing_engine[MAX_HOUSING_PAIRS][2]; /* housing-elig: the engine alone,
                                                    decisions/s without, with eligibility */
    int n_housing_engine;
    floor_result floor;                  /* with --e2e-pairs (floor.h) */
    int floor_ok;
    floor_contract_runs floor_e2e, floor_txn; /* with --e2e-pairs (floor_contract.h) */
    floor_contract_runs floor_drain;     /* beside the drain pairs */
    char floor_err[160];
} bench;

/* Parses argv into o (defaults first); -1 after printing why. */
int args_parse(options *o, int argc, char **argv);
/* Whether the daemon keeps a heap reserve (heap_reserve_mb, its default
 * unless --heap-reserve-mb 0): then its RSS says nothing of what it holds. */
int args_heap_reserved(const options *o);

/* The median over the e2e rounds of which: 0 plain/Lua, 1 txn/Lua, 2
 * allocd plain req/s, 3 Lua req/s, 4 allocd txn req/s. */
double report_e2e_median(const bench *b, int which);
/* A row of the drain comparison: stock prepushed, allocd beside Lua,
 * not a chunk sweep (the drain target's pairs and its floor). */
int report_drain_pair(const row *r);
void report_cpu_model(char *buf, size_t len);
void report_redis_version(const bench *b, char *buf, size_t len);
const char *report_sched_name(const bench *b);
/* Every table, RESULT line and TARGET line of the run. */
void report_print(const bench *b);
/* One TARGET line (MET / NOT MET / NOT MEASURED) saying what. */
void report_target(const bench *b, const char *name, int measured, int met, const char *what);
/* housing.c: the TARGET lines of --scenario housing-elig and
 * --profile-memory, when they ran. */
void housing_targets(const bench *b);
/* housing.c: one pair of the round decided by the engine alone (no Redis),
 * without and with eligibility, into b->housing_engine. */
void housing_engine_pair(bench *b, const workload *w);

#endif
