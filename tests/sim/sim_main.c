/* sim_main.c -- the simulator's command line (`make sim`).
 *
 *   sim --seed N [--faults=LIST] [--instances K] [--duration-ms D] [-v]
 *       one run; on failure prints what broke and the line that replays it
 *   sim --seeds N [--first S] ...
 *       N runs from seed S (default: from the clock, printed), then the
 *       seeds per second and every failing seed's replay line
 *   sim --hours H [--first S] ...
 *       runs from seed S on until H hours (a fraction too: 0.01 is 36 s)
 *       of the machine's time have passed (`make sim-long HOURS=H`); the
 *       same report, with seeds per hour
 */
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/sim.h"
#include "sim/sim_run.h"

/* the machine's clock: clock_gettime itself is the simulated one here
 * (sim_loop.c, --wrap) */
int __real_clock_gettime(clockid_t id, struct timespec *ts);

static double now_s(void)
{
    struct timespec ts;
    __real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A seed that crashes (an assertion, a fault in allocd or here) prints its
 * replay line too: it is prepared before each run, and the handler only
 * write()s it and lets the signal kill the process as before. */
static char crash_line[600];

static void on_crash(int sig)
{
    ssize_t n = write(STDOUT_FILENO, crash_line, strlen(crash_line));
    (void)n;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void arm_crash_line(const sim_opts *o)
{
    char line[512];
    sim_replay_line(o, line, sizeof line);
    snprintf(crash_line, sizeof crash_line, "CRASHED seed %" PRIu64 "\n  replay: %s\n", o->seed, line);
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s (--seed N | --seeds N [--first S] | --hours H [--first S]) [--faults=all|none|reset,lost,delay,"
                    "restart,aof,failover,clock,pause,crash,oom,switch] [--instances K] [--duration-ms D] [-v]\n", argv0);
    return 2;
}

/* jansson seeds its hash tables from /dev/urandom: fixed here, so that
 * object iteration orders are the same in every run of a seed; and a
 * crash prints the seed's replay line. */
static void sim_process_init(void)
{
    json_object_seed(0x5eed);
    signal(SIGABRT, on_crash);
#ifndef __SANITIZE_ADDRESS__
    /* under ASan its own handler reports a fault, then aborts: SIGABRT */
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGFPE, on_crash);
#endif
}

static void print_cluster(const char *prefix, const simc_counts *k)
{
    printf("%scluster: %" PRIu64 " slot moves finished, %" PRIu64 " keys migrated; answered %" PRIu64 " MOVED, %" PRIu64
           " ASK, %" PRIu64 " TRYAGAIN, %" PRIu64 " CROSSSLOT; %" PRIu64 " commands served after ASKING\n",
           prefix, k->slots_moved, k->migrated, k->moved, k->ask, k->tryagain, k->crossslot, k->asking_served);
}

/* --seed N: one run, its figures, and on failure how to replay it. */
static int run_one_seed(sim_opts *o)
{
    char line[512];
    sim_result r;
    arm_crash_line(o);
    int rc = sim_run(o, &r);
    sim_replay_line(o, line, sizeof line);
    printf("seed %" PRIu64 ": %s: %s batch, %" PRIu64 " requests, %" PRId64 " granted, %" PRIu64 " applies, %" PRId64 " ms simulated, "
           "%" PRIu64 " events; faults: %" PRIu64 " resets, %" PRIu64 " lost replies, %" PRIu64
           " delayed, %" PRIu64 " run after their client gave up, %" PRIu64 " restarts (%" PRIu64 " results taken back), %" PRIu64 " clock jumps, %"
           PRIu64 " pauses, %" PRIu64 " crashes, %" PRIu64 " spells out of memory\n", o->seed, rc ? "FAILED" : "ok", r.room ? "room" : "stock", r.requests, r.granted, r.applies, r.sim_ms, r.events,
           r.resets, r.lost_replies, r.delays, r.late_runs, r.restarts, r.taken_back, r.clock_jumps, r.pauses, r.crashes, r.ooms);
    printf("  contract 11: %" PRIu64 " grants checked against the profiles, %" PRIu64 " not_eligible, %" PRIu64
           " staff placements, %" PRIu64 " profile edits, %" PRIu64 " drawn results replayed, %" PRIu64 " group grants\n",
           r.c11_grants, r.c11_not_eligible, r.c11_staff, r.c11_edits, r.c11_draws, r.c11_groups);
    printf("  log: %" PRIu64 " entries read by the archive, %" PRIu64 " acknowledged, %" PRIu64 " trimmed\n",
           r.log_archived, r.log_acked, r.log_trimmed);
    if (o->faults & SF_CLUSTER) print_cluster("  ", &r.cl);
    if (rc) printf("  %s\n  replay: %s\n", r.failure, line);
    return rc ? 1 : 0;
}

/* A sweep's totals. */
typedef struct sweep {
    uint64_t seeds, failed;
    sim_result sum;           /* the runs' counts added up (sim_result_add) */
    char **lines;             /* every failing seed's replay line, for the end */
} sweep;

static void sweep_report(sweep *w, double dt)
{
    const sim_result *t = &w->sum;
    printf("sim: %" PRIu64 " seeds, %" PRIu64 " failed, %.1f s, %.2f seeds/s (%.0f seeds/hour); %" PRIu64
           " requests, %" PRIu64 " applies, %" PRIu64 " lost replies, %" PRIu64 " commands run after their client gave "
           "up, %" PRIu64 " restarts, %" PRIu64 " results taken back by restarts; %" PRIu64 " seeds drained within "
           "answer_ms (the rest excused by contract 9.6 or a poison request: 60 s)\n",
           w->seeds, w->failed, dt, (double)w->seeds / dt, (double)w->seeds * 3600.0 / dt, t->requests, t->applies,
           t->lost_replies, t->late_runs, t->restarts, t->taken_back, (uint64_t)t->held_to_answer_ms);
    printf("sim: contract 11: %" PRIu64 " grants checked against the profiles, %" PRIu64 " not_eligible, %" PRIu64
           " staff placements, %" PRIu64 " profile edits, %" PRIu64 " drawn results replayed, %" PRIu64
           " group grants checked; log: %" PRIu64 " entries read by the archive, %" PRIu64 " trimmed\n", t->c11_grants,
           t->c11_not_eligible, t->c11_staff, t->c11_edits, t->c11_draws, t->c11_groups, t->log_archived, t->log_trimmed);
    if (t->cl.slots_moved || t->cl.migrated) print_cluster("sim: ", &t->cl);
    if (w->failed) printf("sim: %" PRIu64 " failing seeds; replay each with:\n", w->failed);
    for (uint64_t i = 0; i < w->failed; i++) {
        printf("  %s\n", w->lines[i]);
        free(w->lines[i]);
    }
    free(w->lines);
}

/* --seeds N or --hours H from seed `first`: each failure with its replay
 * line as it happens, then the totals and the replay lines again. */
static int run_sweep(sim_opts *o, uint64_t seeds, double hours, uint64_t first)
{
    char line[512];
    if (hours > 0) printf("sim: seeds from %" PRIu64 " for %g hours\n", first, hours);
    else printf("sim: %" PRIu64 " seeds from %" PRIu64 "\n", seeds, first);
    fflush(stdout);
    double t0 = now_s(), until = t0 + hours * 3600.0;
    sweep w = { 0 };
    for (uint64_t s = first; hours > 0 ? now_s() < until : s < first + seeds; s++) {
        o->seed = s;
        sim_result r;
        fflush(stdout);
        arm_crash_line(o);
        if (sim_run(o, &r) < 0) {
            sim_replay_line(o, line, sizeof line);
            printf("FAILED seed %" PRIu64 ": %s\n  replay: %s\n", s, r.failure, line);
            fflush(stdout);
            char **l = realloc(w.lines, (w.failed + 1) * sizeof *l);
            if (!l || !(l[w.failed] = strdup(line))) abort();
            w.lines = l;
            w.failed++;
        }
        w.seeds++;
        sim_result_add(&w.sum, &r);
    }
    uint64_t failed = w.failed;
    sweep_report(&w, now_s() - t0);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    sim_opts o = { .faults = SF_ALL, .instances = 0, .duration_ms = 10000 };
    uint64_t seeds = 0, first = 0;
    double hours = 0;
    int have_seed = 0, have_first = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--seed") && i + 1 < argc) { o.seed = strtoull(argv[++i], NULL, 10); have_seed = 1; }
        else if (!strcmp(a, "--seeds") && i + 1 < argc) seeds = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--hours") && i + 1 < argc) {
            char *end;
            hours = strtod(argv[++i], &end);
            if (*end || !(hours > 0)) return usage(argv[0]);
        }
        else if (!strcmp(a, "--first") && i + 1 < argc) { first = strtoull(argv[++i], NULL, 10); have_first = 1; }
        else if (!strncmp(a, "--faults=", 9)) { if (sim_faults_parse(a + 9, &o.faults) < 0) return usage(argv[0]); }
        else if (!strcmp(a, "--instances") && i + 1 < argc) o.instances = atoi(argv[++i]);
        else if (!strcmp(a, "--duration-ms") && i + 1 < argc) o.duration_ms = atoi(argv[++i]);
        else if (!strcmp(a, "-v")) o.verbose = 1;
        else return usage(argv[0]);
    }
    if (!have_seed && !seeds && !(hours > 0)) return usage(argv[0]);
    sim_process_init();
    if (have_seed) return run_one_seed(&o);
    return run_sweep(&o, seeds, hours, have_first ? first : (uint64_t)time(NULL) * 1000);
}
