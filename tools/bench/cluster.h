/* cluster.h -- allocbench's scaling scenario: allocd over a Redis Cluster.
 *
 * One run starts M Redis masters on loopback TCP (M = 1: one plain Redis,
 * the single-Redis baseline; M >= 2: a cluster built with CLUSTER
 * ADDSLOTSRANGE + CLUSTER MEET), N allocd instances with distinct names
 * (cluster = "yes" and the first master as seed when M >= 2), and K stock
 * batches whose names are chosen so that they spread evenly over the
 * masters (by key slot) and over the instances (by allocd's rendezvous
 * placement). The same request mix is pre-pushed into the K queues, each on
 * the node that owns it, then the K batches are SADDed to P:batches at once
 * and the aggregate decided requests per second is timed until every
 * result exists. CPU time (utime + stime) of every redis-server and allocd
 * is read from /proc around that window.
 */
#ifndef ALLOCBENCH_CLUSTER_H
#define ALLOCBENCH_CLUSTER_H

#include "bench.h"

#define CB_MAX_NODES 16
#define CB_MAX_INST 16

typedef struct cluster_opts {
    const char *allocd_bin;
    const char *prefix;
    const workload *w;        /* request i goes to batch i % batches */
    int masters, instances, batches;
    int chunk, registry_ms, timeout_s;
    int run;                  /* run number, for distinct batch names */
} cluster_opts;

typedef struct cluster_result {
    int masters, instances, batches, run;
    long n, results, missing, granted, rejected;
    double secs, tput, load;
    double secs_drain, tput_drain;  /* from the first result seen (polled every ms) */
    double cpu_redis_s, cpu_allocd_s, cpu_bench_s;   /* over the window */
    double redis_us_per_req, allocd_us_per_req;
    double redis_cores, allocd_cores;                /* CPU seconds / wall second */
    int per_master[CB_MAX_NODES], per_instance[CB_MAX_INST];
    double node_cpu_s[CB_MAX_NODES], inst_cpu_s[CB_MAX_INST];
    int misplaced;            /* batches whose lease holder was not the expected instance */
    long log_lines;           /* lines in the allocd logs (log_level warning) */
    int ok;
} cluster_result;

/* Starts everything, measures, stops everything. Returns 0 or -1 (err). */
int cluster_bench_run(const cluster_opts *o, cluster_result *res, char *err, size_t errlen);

#endif
