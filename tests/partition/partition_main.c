/* partition_main.c -- `make partition`: every scenario of the partition
 * run (tests/partition/partition.h) at length, one after another, with the
 * report of each; exit 1 on any violation, 2 when it cannot run here.
 *
 *   partition [--scenario cut|oneway|delay|flap|all] [--rounds N]
 *             [--fault-ms MS] [--rate N] [--ttl-ms MS] [--seed N] [-v]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/part_net.h"
#include "partition/partition.h"

static int usage(void)
{
    fprintf(stderr, "usage: partition [--scenario cut|oneway|delay|flap|all] [--rounds N] [--fault-ms MS]\n"
                    "                 [--rate N] [--ttl-ms MS] [--seed N] [-v]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *which = "all";
    int rounds = 0, fault_ms = 0, rate = 0, ttl_ms = 0, verbose = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-v")) { verbose = 1; continue; }
        if (!v) return usage();
        if (!strcmp(a, "--scenario")) which = v;
        else if (!strcmp(a, "--rounds")) rounds = atoi(v);
        else if (!strcmp(a, "--fault-ms")) fault_ms = atoi(v);
        else if (!strcmp(a, "--rate")) rate = atoi(v);
        else if (!strcmp(a, "--ttl-ms")) ttl_ms = atoi(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else return usage();
        i++;
    }
    char why[200];
    part_net_missing(why, sizeof why);
    if (why[0]) { fprintf(stderr, "partition: cannot run here: %s\n", why); return 2; }
    int failed = 0, ran = 0;
    for (int s = PART_CUT; s <= PART_FLAP; s++) {
        if (strcmp(which, "all") && strcmp(which, part_scenario_name((part_scenario)s))) continue;
        part_params p;
        part_params_default(&p, (part_scenario)s);
        if (rounds > 0) p.rounds = rounds;
        if (fault_ms > 0) p.fault_ms = fault_ms;
        if (rate > 0) p.rate = rate;
        if (ttl_ms > 0) p.ttl_ms = ttl_ms;
        p.seed = seed;
        p.verbose = verbose;
        part_report rep;
        int rc = part_run(&p, &rep);
        part_print_report(stdout, &p, &rep);
        fflush(stdout);
        part_report_free(&rep);
        if (rc != 0) failed++;
        ran++;
    }
    if (!ran) return usage();
    printf("partition: %d scenario(s), %d failed\n", ran, failed);
    return failed ? 1 : 0;
}
