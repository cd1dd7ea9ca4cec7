/* chaos.c -- command-line driver of the chaos run (`make chaos`).
 *
 * Everything happens in chaos_core.c and its siblings (chaos_int.h); this
 * file only reads the flags, runs it and prints the figures. It exists so
 * that a long run (hundreds of thousands of requests, dozens of kills, a
 * one-minute Redis outage) can be started by hand or from make with any
 * seed, while `make test` runs the same core briefly through
 * tests/integration/test_chaos_short.c.
 *
 *   chaos [--requests N] [--kills N] [--redis-restarts N] [--seconds N]
 *         [--seed N] [--outage-seconds N] [--slow N] [--producers N]
 *         [--drain-seconds N] [--keep] [--quiet]
 *         [--cluster] [--instances N] [--pauses N] [--answer-ms N] [--archive]
 *
 * --log-chunk runs allocd with log_format = "chunk" (one log entry per chunk).
 * --cluster runs the same checks over a 3-master Redis Cluster on loopback
 * (needs redis-cli): each batch on another master, --instances allocd
 * instances (default 3) with fixed names, killed and restarted under their
 * names, and --pauses SIGSTOPs of one instance past its lease.
 *
 * --archive adds `allocctl archive --follow` into a private PostgreSQL,
 * killed with every kill of allocd and riding out the Redis restarts and
 * the outage; at the end `reconcile` of every batch must find nothing
 * (tests/chaos/chaos_archive.c).
 *
 * Exit status: 0 when no violation was found, 1 on a violation, 2 on a bad
 * command line or a run that could not be set up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_core.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: chaos [--requests N] [--kills N] [--redis-restarts N] [--seconds N]\n"
            "             [--seed N] [--outage-seconds N] [--slow N] [--producers N]\n"
            "             [--drain-seconds N] [--keep] [--quiet]\n"
            "             [--cluster] [--instances N] [--pauses N] [--log-chunk] [--answer-ms N]\n"
            "             [--archive]\n"
            "Runs allocd ($ALLOCD_BIN or $BUILD/allocd) against a private redis-server\n"
            "while killing and restarting both, then checks every guarantee of the\n"
            "contract against what was pushed. Exit 0 = no violation.\n");
}

static int num(const char *flag, const char *v, long long lo, long long *out)
{
    char *end;
    if (!v) { fprintf(stderr, "chaos: %s needs a value\n", flag); return -1; }
    long long x = strtoll(v, &end, 10);
    if (*end || end == v || x < lo) {
        fprintf(stderr, "chaos: %s wants an integer >= %lld, not '%s'\n", flag, lo, v);
        return -1;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv)
{
    chaos_params p;
    chaos_params_default(&p);
    p.verbose = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long v = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "--keep")) { p.keep = 1; continue; }
        if (!strcmp(a, "--quiet")) { p.verbose = 0; continue; }
        if (!strcmp(a, "--cluster")) { p.cluster = 1; continue; }
        if (!strcmp(a, "--log-chunk")) { p.log_chunk = 1; continue; }
        if (!strcmp(a, "--archive")) { p.archive = 1; continue; }
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--requests")) { if (num(a, val, 1, &v)) return 2; p.requests = v; }
        else if (!strcmp(a, "--kills")) { if (num(a, val, 0, &v)) return 2; p.kills = (int)v; }
        else if (!strcmp(a, "--redis-restarts")) { if (num(a, val, 0, &v)) return 2; p.redis_restarts = (int)v; }
        else if (!strcmp(a, "--seconds")) { if (num(a, val, 1, &v)) return 2; p.seconds = (int)v; }
        else if (!strcmp(a, "--seed")) { if (num(a, val, 0, &v)) return 2; p.seed = (uint64_t)v; }
        else if (!strcmp(a, "--outage-seconds")) { if (num(a, val, 0, &v)) return 2; p.outage_ms = (int)v * 1000; }
        else if (!strcmp(a, "--slow")) { if (num(a, val, 0, &v)) return 2; p.slow = (int)v; }
        else if (!strcmp(a, "--producers")) { if (num(a, val, 1, &v)) return 2; p.producers = (int)v; }
        else if (!strcmp(a, "--instances")) { if (num(a, val, 1, &v)) return 2; p.instances = (int)v; }
        else if (!strcmp(a, "--pauses")) { if (num(a, val, 0, &v)) return 2; p.pauses = (int)v; }
        else if (!strcmp(a, "--answer-ms")) { if (num(a, val, 1000, &v)) return 2; p.answer_ms = (int)v; }
        else if (!strcmp(a, "--drain-seconds")) { if (num(a, val, 1, &v)) return 2; p.drain_seconds = (int)v; }
        else { fprintf(stderr, "chaos: unknown argument '%s'\n", a); usage(stderr); return 2; }
        i++;
    }
    chaos_report rep;
    int rc = chaos_run(&p, &rep);
    chaos_print_report(stdout, &p, &rep);
    return rc < 0 ? 2 : rc ? 1 : 0;
}
