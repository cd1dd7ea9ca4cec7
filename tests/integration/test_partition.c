/* test_partition.c -- the short form of the partition run
 * (tests/partition/partition.h) in `make test`: two allocd instances in
 * network namespaces of their own, the serving one cut off from Redis
 * (both directions, then one direction each way) while a producer pushes
 * and a poller reads; the other must take over within lease TTL + 1 s and
 * the history must hold (part_check.h). `make partition` runs every
 * scenario at length.
 *
 * It needs root and iproute2 with ifb, clsact and mirred; without them it
 * says why and is counted as a skip, never as a pass. The checker itself is
 * shown to catch each kind of violation on a history written by hand
 * (test_checker_catches, no root needed). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "harness.h"
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
    assert_int_equal(rep.fault_checks, 2 * rounds); /* each cut seen from both sides */
    assert_int_equal(rep.slow_takeover, 0);   /* each within its bound (partition.h) */
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

static void cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

/* A checker that cannot fail proves nothing: each check, fed the violation
 * it exists for. */
static void test_checker_catches(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    redisContext *c = harness_redis_connect(&redis);
    part_report rep;
    part_report_init(&rep);
    part_history h;
    part_history_init(&h, 10);
    cmd(c, "HSET alloc:{k}:results r0 {\"status\":\"waiting\"}");
    cmd(c, "HSET alloc:{k}:stats processed 10 dequeued 10");
    part_history_poll(&h, &rep, c, "k");
    cmd(c, "HSET alloc:{k}:results r0 {\"status\":\"granted\",\"rank\":1}");
    part_history_poll(&h, &rep, c, "k");
    assert_int_equal(rep.waits_served, 1);          /* waiting -> final: allowed */
    assert_int_equal(rep.changed + rep.backwards, 0);
    cmd(c, "HSET alloc:{k}:results r0 {\"status\":\"rejected\"}");
    cmd(c, "HSET alloc:{k}:stats processed 9");
    part_history_poll(&h, &rep, c, "k");
    assert_int_equal(rep.changed, 1);               /* final -> another final */
    assert_int_equal(rep.backwards, 1);             /* processed 10 -> 9 */
    part_history_free(&h);
    /* the end: r0 and r1 granted with one rank, r2 never answered, one unit,
     * r0's grant twice in the log and r1's not at all */
    cmd(c, "HSET alloc:{k}:results r0 {\"status\":\"granted\",\"rank\":1} r1 {\"status\":\"granted\",\"rank\":1}");
    cmd(c, "HSET alloc:{k}:capacity sku 1");
    cmd(c, "HSET alloc:{k}:free sku 0");
    cmd(c, "HSET alloc:{k}:stats granted 2");
    for (int i = 0; i < 2; i++)
        cmd(c, "XADD alloc:{k}:log * type grant user u0 item sku qty 1 order 1 req r0 at 1");
    rep.pushed = 3;
    part_check_final(&rep, c, "k", 2);
    part_print_report(stdout, &(part_params){ .scenario = PART_CUT }, &rep);
    assert_int_equal(rep.lost, 1);
    assert_int_equal(rep.doubled, 2);               /* the rank and the log */
    assert_true(rep.oversold >= 1);                 /* 2 granted of 1 */
    assert_int_equal(rep.other, 1);                 /* r1 granted, not in the log */
    assert_true(rep.violations >= 6);
    part_report_free(&rep);
    redisFree(c);
    harness_redis_stop(&redis);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_catches),
        cmocka_unit_test(test_full_cut),
        cmocka_unit_test(test_one_way_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
