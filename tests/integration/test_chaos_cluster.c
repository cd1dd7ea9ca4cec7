/* test_chaos_cluster.c -- the chaos run of tests/chaos/chaos_core.c over a
 * 3-master Redis Cluster on loopback, short enough for `make test` (about
 * half a minute): the three batches on three different masters, three
 * allocd instances with fixed names, 8k requests, 4 kill -9 of random
 * instances (each restarted under its name) and one SIGSTOP of an instance
 * past its lease, then every check of the single-Redis run, each batch read
 * from the node owning its slot: nothing lost, nothing applied twice,
 * nothing oversold, the event log replays to holders/free, stats add up.
 * The long run is `make chaos-cluster`. CHAOS_SEED=N picks another seed.
 * Skipped (exit 0) without redis-cli. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "chaos/chaos_test.h"

static void test_chaos_cluster(void **state)
{
    (void)state;
    if (system("command -v redis-cli >/dev/null 2>&1") != 0) {
        print_message("redis-cli not found: skipping the cluster chaos run\n");
        skip();
    }
    chaos_params p;
    chaos_params_default(&p);
    p.cluster = 1;
    p.instances = 3;
    p.requests = 8000;
    p.kills = 4;
    p.pauses = 1;
    p.redis_restarts = 0;
    p.seconds = 14;
    p.verbose = getenv("CHAOS_VERBOSE") != NULL;
    p.seed = chaos_test_seed(20251122);
    chaos_report rep;
    chaos_test_run(&p, &rep);
    assert_int_equal(rep.nodes, 3);
    assert_int_equal(rep.instances, 3);
    assert_int_equal(rep.kills, 4);
    assert_int_equal(rep.pauses, 1);
    assert_true(rep.results > 6000);
    assert_true(rep.granted > 0 && rep.rejected > 0 && rep.done > 0 && rep.invalid > 0);
    assert_true(rep.dead_entries > 0 && rep.duplicates > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chaos_cluster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
