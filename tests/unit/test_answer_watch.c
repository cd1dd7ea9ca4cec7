/* test_answer_watch.c -- the age of the oldest unanswered request from
 * probes (core/answer_watch.h): an upper bound within one probe interval,
 * dropped once stats.dequeued passes it, admin commands counted from the
 * first probe that saw ctl non-empty, and the "cannot serve" clock. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/answer_watch.h"

static void test_nothing_queued(void **state)
{
    answer_watch aw;
    answer_watch_init(&aw, 0);
    answer_watch_probe(&aw, 1000, 0, 0, 0);
    answer_watch_probe(&aw, 2000, 5, 0, 0);
    assert_int_equal(answer_watch_oldest_ms(&aw, 2500), 0);
}

static void test_oldest_is_bounded_by_the_probe_before(void **state)
{
    answer_watch aw;
    answer_watch_init(&aw, 0);
    answer_watch_probe(&aw, 1000, 10, 0, 0);       /* empty at 1000 */
    answer_watch_probe(&aw, 2000, 10, 3, 0);       /* 11..13 arrived after 1000 */
    assert_int_equal(answer_watch_oldest_ms(&aw, 2000), 1000);
    answer_watch_probe(&aw, 3000, 11, 4, 0);       /* 12..15: 14, 15 after 2000 */
    assert_int_equal(answer_watch_oldest_ms(&aw, 3500), 2500);   /* 12 is still from the first mark */
    answer_watch_probe(&aw, 4000, 13, 2, 0);       /* 11..13 answered */
    assert_int_equal(answer_watch_oldest_ms(&aw, 4000), 2000);   /* 14 arrived after 2000 */
    answer_watch_probe(&aw, 5000, 15, 0, 0);
    assert_int_equal(answer_watch_oldest_ms(&aw, 5000), 0);
}

static void test_first_probe_has_no_earlier_bound(void **state)
{
    answer_watch aw;
    answer_watch_init(&aw, 0);
    answer_watch_probe(&aw, 7000, 0, 2, 0);
    assert_int_equal(answer_watch_oldest_ms(&aw, 7300), 300);
}

static void test_ctl_and_reset(void **state)
{
    answer_watch aw;
    answer_watch_init(&aw, 0);
    answer_watch_probe(&aw, 1000, 0, 0, 0);
    answer_watch_probe(&aw, 2000, 0, 0, 1);
    answer_watch_probe(&aw, 3000, 0, 0, 1);
    assert_int_equal(answer_watch_oldest_ms(&aw, 3000), 2000);
    answer_watch_probe(&aw, 4000, 0, 0, 0);
    assert_int_equal(answer_watch_oldest_ms(&aw, 4000), 0);
    answer_watch_probe(&aw, 5000, 0, 3, 0);
    answer_watch_reset(&aw);
    assert_int_equal(answer_watch_oldest_ms(&aw, 6000), 0);
}

static void test_counter_reset_forgets(void **state)
{
    answer_watch aw;
    answer_watch_init(&aw, 0);
    answer_watch_probe(&aw, 1000, 100, 5, 0);
    answer_watch_probe(&aw, 2000, 0, 0, 0);         /* the batch was deleted and made again */
    assert_int_equal(answer_watch_oldest_ms(&aw, 2000), 0);
}

static void test_full_ring_keeps_the_oldest(void **state)
{
    answer_watch aw;
    answer_watch_init(&aw, 0);
    for (int i = 0; i < 3 * ANSWER_WATCH_MARKS; i++)
        answer_watch_probe(&aw, 1000 * (i + 1), 0, i + 1, 0);
    assert_true(aw.n <= ANSWER_WATCH_MARKS);
    assert_int_equal(answer_watch_oldest_ms(&aw, 1000 * 3 * ANSWER_WATCH_MARKS + 1000),
                     1000 * 3 * ANSWER_WATCH_MARKS);
}

static void test_unable_and_idle(void **state)
{
    answer_watch aw;
    answer_watch_init(&aw, 100);
    assert_int_equal(answer_watch_unable_ms(&aw, 600), 500);
    answer_watch_good(&aw, 600);
    assert_int_equal(answer_watch_unable_ms(&aw, 700), 100);
    assert_int_equal(answer_watch_idle_ms(&aw, 700), 600);
    answer_watch_applied(&aw, 800);
    assert_int_equal(answer_watch_idle_ms(&aw, 900), 100);
    assert_int_equal(answer_watch_unable_ms(&aw, 900), 100);
    answer_watch_good(&aw, 500);                      /* time never goes back */
    assert_int_equal(answer_watch_unable_ms(&aw, 900), 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_queued),
        cmocka_unit_test(test_oldest_is_bounded_by_the_probe_before),
        cmocka_unit_test(test_first_probe_has_no_earlier_bound),
        cmocka_unit_test(test_ctl_and_reset),
        cmocka_unit_test(test_counter_reset_forgets),
        cmocka_unit_test(test_full_ring_keeps_the_oldest),
        cmocka_unit_test(test_unable_and_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
