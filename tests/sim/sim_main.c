/* sim_main.c -- the simulator's command line (`make sim`).
 *
 *   sim --seed N [--faults=LIST] [--instances K] [--duration-ms D] [-v]
 *       one run; on failure prints what broke and the line that replays it
 *   sim --seeds N [--first S] ...
 *       N runs from seed S (default: from the clock, printed), then the
 *       seeds per second and every failing seed's replay line
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
    fprintf(stderr, "usage: %s (--seed N | --seeds N [--first S]) [--faults=all|none|reset,lost,delay,"
                    "restart,aof,failover,clock,pause,crash] [--instances K] [--duration-ms D] [-v]\n", argv0);
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
           PRIu64 " pauses, %" PRIu64 " crashes\n", o->seed, rc ? "FAILED" : "ok", r.room ? "room" : "stock", r.requests, r.granted, r.applies, r.sim_ms, r.events,
           r.resets, r.lost_replies, r.delays, r.late_runs, r.restarts, r.taken_back, r.clock_jumps, r.pauses, r.crashes);
    if (rc) printf("  %s\n  replay: %s\n", r.failure, line);
    return rc ? 1 : 0;
}

/* --seeds N [--first S]: N seeds in a row, each failure with its replay
 * line, then the totals. */
static int run_sweep(sim_opts *o, uint64_t seeds, uint64_t first)
{
    char line[512];
    printf("sim: %" PRIu64 " seeds from %" PRIu64 "\n", seeds, first);
    fflush(stdout);
    double t0 = now_s();
    uint64_t failed = 0, requests = 0, applies = 0, restarts = 0, lost = 0, taken_back = 0, late = 0, held = 0;
    for (uint64_t s = first; s < first + seeds; s++) {
        o->seed = s;
        sim_result r;
        fflush(stdout);
        arm_crash_line(o);
        if (sim_run(o, &r) < 0) {
            failed++;
            sim_replay_line(o, line, sizeof line);
            printf("FAILED seed %" PRIu64 ": %s\n  replay: %s\n", s, r.failure, line);
            fflush(stdout);
        }
        requests += r.requests;
        applies += r.applies;
        restarts += r.restarts;
        lost += r.lost_replies;
        taken_back += r.taken_back;
        late += r.late_runs;
        held += (uint64_t)r.held_to_answer_ms;
    }
    double dt = now_s() - t0;
    printf("sim: %" PRIu64 " seeds, %" PRIu64 " failed, %.1f s, %.2f seeds/s; %" PRIu64 " requests, %" PRIu64
           " applies, %" PRIu64 " lost replies, %" PRIu64 " commands run after their client gave up, %" PRIu64
           " restarts, %" PRIu64 " results taken back by restarts; %" PRIu64 " seeds drained within answer_ms "
           "(the rest excused by contract 9.6 or a poison request: 60 s)\n",
           seeds, failed, dt, (double)seeds / dt, requests, applies, lost, late, restarts, taken_back, held);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    sim_opts o = { .faults = SF_ALL, .instances = 0, .duration_ms = 10000 };
    uint64_t seeds = 0, first = 0;
    int have_seed = 0, have_first = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--seed") && i + 1 < argc) { o.seed = strtoull(argv[++i], NULL, 10); have_seed = 1; }
        else if (!strcmp(a, "--seeds") && i + 1 < argc) seeds = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--first") && i + 1 < argc) { first = strtoull(argv[++i], NULL, 10); have_first = 1; }
        else if (!strncmp(a, "--faults=", 9)) { if (sim_faults_parse(a + 9, &o.faults) < 0) return usage(argv[0]); }
        else if (!strcmp(a, "--instances") && i + 1 < argc) o.instances = atoi(argv[++i]);
        else if (!strcmp(a, "--duration-ms") && i + 1 < argc) o.duration_ms = atoi(argv[++i]);
        else if (!strcmp(a, "-v")) o.verbose = 1;
        else return usage(argv[0]);
    }
    if (!have_seed && !seeds) return usage(argv[0]);
    sim_process_init();
    if (have_seed) return run_one_seed(&o);
    return run_sweep(&o, seeds, have_first ? first : (uint64_t)time(NULL) * 1000);
}
