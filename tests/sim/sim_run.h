/* sim_run.h -- one simulated run from one seed (sim_run.c), shared by the
 * command-line simulator (sim_main.c, `make sim`) and the short sweep in
 * `make test` (test_sim_sweep.c).
 */
#ifndef ALLOCD_SIM_RUN_H
#define ALLOCD_SIM_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "sim/sim_cluster.h"

typedef struct sim_opts {
    uint64_t seed;
    unsigned faults;          /* SF_* (sim.h) */
    int instances;            /* 1..SIM_MAX_INST; 0 = drawn from the seed (2 or 3) */
    int duration_ms;          /* simulated time with faults, then a drain without */
    int verbose;              /* allocd's log and the simulator's on stderr */
} sim_opts;

typedef struct sim_result {
    int failed;
    char failure[1024];
    uint64_t events, requests, applies, resets, lost_replies, delays, restarts;
    uint64_t clock_jumps, pauses, taken_back, late_runs, crashes, ooms;
    int64_t sim_ms;
    int room;                 /* the batch was a room batch (beds), else stock */
    int64_t granted;          /* stats.granted at the end */
    int held_to_answer_ms;    /* liveness checked against answer_ms (not excused: 60 s) */
    /* contract 11 (sim_c11.h): grants checked against the profiles,
     * not_eligible results, staff placements, profile edits, drawn results
     * replayed, group grants checked */
    uint64_t c11_grants, c11_not_eligible, c11_staff, c11_edits, c11_draws, c11_groups;
    uint64_t c11_probes_refused;   /* edit-then-request probes refused for the edit */
    /* the log: entries the archive read, acknowledged, and entries trimmed */
    uint64_t log_archived, log_acked, log_trimmed;
    simc_counts cl;           /* the cluster fault: redirections, migrations (sim_cluster.h) */
} sim_result;

int sim_run(const sim_opts *o, sim_result *r);
/* Adds r's counts into sum (a sweep's totals; held_to_answer_ms counts
 * the runs held to answer_ms). */
void sim_result_add(sim_result *sum, const sim_result *r);
/* "--faults=reset,lost,..." names <-> bits; -1 on an unknown name. */
int sim_faults_parse(const char *s, unsigned *out);
void sim_faults_format(unsigned f, char *buf, size_t n);
/* The command that replays a run. */
void sim_replay_line(const sim_opts *o, char *buf, size_t n);

#endif
