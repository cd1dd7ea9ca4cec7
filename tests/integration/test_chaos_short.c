/* test_chaos_short.c -- the chaos run of tests/chaos/chaos_core.c, short
 * enough for `make test` (about half a minute): 20k requests of both kinds,
 * 8 kill -9 of allocd, 2 Redis restarts (SIGTERM and SIGKILL) and one
 * DEBUG SLEEP, with waitlists and held beds, and contract 11: profiles,
 * only_X/same_X rules, a room batch that fills rooms exactly and opens
 * with a draw by points, staff assign/unassign. Then every check of the
 * long run (`make chaos`): nothing lost, nothing applied twice, nothing
 * oversold, the event log replays to holders/free, stats add up, no holder
 * against a rule, groups whole, the draw by points (and lottery verify).
 * CHAOS_SEED=N picks another seed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "chaos/chaos_test.h"

static void test_chaos_short(void **state)
{
    chaos_params p;
    chaos_params_default(&p);
    p.requests = 20000;
    p.kills = 8;
    p.redis_restarts = 2;
    p.slow = 1;
    p.seconds = 20;
    p.seed = chaos_test_seed(20251122);
    chaos_report rep;
    chaos_test_run(&p, &rep);
    /* contract 9.6: nothing waited past answer_ms while its batch was open */
    assert_int_equal(rep.unanswered_late, 0);
    assert_true(rep.max_unanswered_s > 0);    /* the probe did see requests waiting */
    assert_int_equal(rep.kills, 8);
    assert_int_equal(rep.redis_restarts, 2);
    assert_true(rep.results > 15000);
    assert_true(rep.granted > 0 && rep.rejected > 0 && rep.done > 0 && rep.invalid > 0);
    assert_true(rep.expiries > 0);           /* reservations (and held beds) did run out */
    assert_true(rep.waits > 0);              /* waitlists were joined, each served once */
    assert_true(rep.dead_entries > 0 && rep.duplicates > 0);
    /* contract 11 was reached: refusals for eligibility, placements by
     * staff, an opening drawn by points, groups filling rooms exactly */
    assert_int_equal(rep.rule_breaches, 0);
    assert_true(rep.not_eligible > 0 && rep.staff_grants > 0 && rep.drawn > 0 && rep.exact_groups > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chaos_short),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
