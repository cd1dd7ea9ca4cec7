/* test_watch.c -- the watcher's pure part: the age of the oldest queued
 * request estimated from (time, dequeued, queue length) snapshots, and the
 * rate from its history. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "service/watch.h"

static void test_oldest_age(void **state)
{
    watch_batch *b = calloc(1, sizeof *b);
    watch_observe(b, 1000, 0, 0);
    assert_int_equal(b->oldest_age_ms, 0);
    watch_observe(b, 2000, 0, 5);      /* 5 pushed between 1000 and 2000 */
    assert_int_equal(b->oldest_age_ms, 0);
    watch_observe(b, 3000, 0, 8);      /* 3 more; the head is still from 2000 */
    assert_int_equal(b->oldest_age_ms, 1000);
    watch_observe(b, 4000, 5, 3);      /* first 5 taken: the head was seen at 3000 */
    assert_int_equal(b->oldest_age_ms, 1000);
    watch_observe(b, 9000, 5, 3);      /* stuck */
    assert_int_equal(b->oldest_age_ms, 6000);
    watch_observe(b, 10000, 8, 0);     /* drained */
    assert_int_equal(b->oldest_age_ms, 0);
    watch_observe(b, 11000, 8, 2);
    watch_observe(b, 12000, 8, 2);
    assert_int_equal(b->oldest_age_ms, 1000);
    watch_observe(b, 13000, 0, 0);     /* keys deleted, batch re-created: a reset */
    assert_int_equal(b->oldest_age_ms, 0);
    free(b);
}

/* More steps than kept: merged, the estimate only gets younger. */
static void test_steps_compact(void **state)
{
    watch_batch *b = calloc(1, sizeof *b);
    watch_observe(b, 0, 0, 0);
    for (int i = 1; i <= 3 * WATCH_STEPS; i++) watch_observe(b, (int64_t)i * 1000, 0, i);
    assert_true(b->n_steps <= WATCH_STEPS);
    int64_t now = (int64_t)(3 * WATCH_STEPS + 1) * 1000;
    watch_observe(b, now, 0, 3 * WATCH_STEPS);
    assert_true(b->oldest_age_ms <= now - 1000);
    assert_true(b->oldest_age_ms > 0);
    free(b);
}

static void test_rate(void **state)
{
    watch_batch *b = calloc(1, sizeof *b);
    assert_true(watch_rate(b, 60) < 0);
    for (int i = 0; i <= 700; i++) watch_observe(b, (int64_t)i * 1000, (int64_t)i * 50, 0);
    assert_int_equal(b->hist_n, WATCH_HISTORY);
    double r = watch_rate(b, 60);
    assert_true(r > 49.9 && r < 50.1);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oldest_age),
        cmocka_unit_test(test_steps_compact),
        cmocka_unit_test(test_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
