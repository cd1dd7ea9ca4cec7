/* test_partition.c -- the short form of the partition run
 * (tests/partition/partition.h) in `make test`: two allocd instances in
 * network namespaces of their own, the serving one cut off from Redis
 * (both directions, then one direction each way) while a producer pushes
 * and a poller reads; the other must take over within lease TTL + 1 s and
 * the history must hold (part_check.h). `make partition` runs every
 * scenario at length.
 *
 * It needs root and iproute2 with ifb, clsact and mirred; without them it
 * says why and is counted as a skip, never as a pass. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "partition/part_net.h"
#include "partition/partition.h"

static void part_short(part_scenario scenario, int rounds)
{
    char why[200];
    part_net_missing(why, sizeof why);
    if (why[0]) {
        print_message("SKIPPED: partition test: %s\n", why);
        skip();
    }
    part_params p;
    part_params_default(&p, scenario);
    p.rounds = rounds;
    p.fault_ms = 3500;
    p.rate = 200;
    p.verbose = getenv("PARTITION_VERBOSE") != NULL;
    part_report rep;
    int rc = part_run(&p, &rep);
    part_print_report(stdout, &p, &rep);
    part_report_free(&rep);
    assert_int_equal(rc, 0);
    assert_int_equal(rep.takeovers, rounds);
    assert_true(rep.takeover_max_ms <= rep.takeover_limit_ms);
    assert_true(rep.pushed > 1000);
    assert_true(rep.granted > 0 && rep.rejected > 0);
    assert_true(rep.waits_served > 0);     /* waiting -> final happened, and was allowed */
    assert_int_equal(rep.violations, 0);
}

/* the serving instance loses Redis in both directions, twice (a, then
 * whichever serves after the first takeover) */
static void test_full_cut(void **state) { part_short(PART_CUT, 2); }

/* replies dropped, then requests dropped */
static void test_one_way_cut(void **state) { part_short(PART_ONEWAY, 2); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_cut),
        cmocka_unit_test(test_one_way_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
