/* test_outage.c -- Redis going away and Redis answering slowly, with the
 * real allocd and the checks of the chaos run (tests/chaos/chaos_core.c).
 *
 * - A 10 s outage (redis-server stopped, its AOF kept) in the middle of a
 *   stream of requests: producers keep retrying their pushes until Redis is
 *   back, allocd keeps running (it is never restarted here), logs the lost
 *   connection, reconnects and finishes; every request gets its one result.
 * - A slow Redis: DEBUG SLEEPs of 0.5..2.5 s while allocd's command deadline
 *   is 1 s, so deadlines fire mid-chunk (an apply may run after allocd gave
 *   up on its reply); allocd must neither exit nor apply anything twice.
 *
 * The one-minute outage runs only in `make chaos` (--outage-seconds 60):
 * too long for `make test`. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "chaos/chaos_test.h"

/* 6000 requests for `seconds` with a fixed seed, and no kill or restart of
 * allocd or Redis: what each test adds is the trouble. */
static chaos_params steady_params(int seconds, uint64_t seed)
{
    chaos_params p;
    chaos_params_default(&p);
    p.requests = 6000;
    p.kills = 0;
    p.redis_restarts = 0;
    p.seconds = seconds;
    p.seed = seed;
    return p;
}

static void run(chaos_params *p, chaos_report *rep)
{
    chaos_test_run(p, rep);
    /* one allocd for the whole run: it never gave up or crashed */
    assert_int_equal(rep->allocd_starts, 1);
    assert_int_equal(rep->allocd_unexpected_exits, 0);
    assert_int_equal(rep->allocd_final_exit, 0);
}

static void test_redis_outage_10s(void **state)
{
    chaos_params p = steady_params(16, 7);   /* the outage runs from 4.8 s to 14.8 s */
    p.outage_ms = 10000;
    chaos_report rep;
    run(&p, &rep);
    assert_int_equal(rep.outages, 1);
    assert_true(rep.push_retries > 0);          /* producers did wait for Redis */
    assert_true(rep.log_connection_lost >= 1);  /* allocd logged the outage */
    assert_true(rep.log_connected >= 2);        /* ... and reconnected */
    assert_true(rep.results > 5000);
}

static void test_slow_redis(void **state)
{
    chaos_params p = steady_params(12, 11);
    p.slow = 5;
    chaos_report rep;
    run(&p, &rep);
    assert_int_equal(rep.slow_sleeps, 5);
    assert_true(rep.log_timeouts >= 1);         /* deadlines did fire */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_outage_10s),
        cmocka_unit_test(test_slow_redis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
