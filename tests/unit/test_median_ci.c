/* test_median_ci.c -- allocbench's interval for a median of paired ratios
 * (tools/bench/median_ci.c), on cases worked by hand from the binomial. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "bench/median_ci.h"

/* 15 rounds: P(B(15, 1/2) <= 3) = 576 / 32768, so [x(4), x(12)] covers
 * 1 - 1152 / 32768 = 96.48%; k = 5 would cover 88.2%. The ratios are
 * the first e2e run of 24 Nov 14:15, shuffled as they came. */
static void test_fifteen_rounds(void **state)
{
    double v[15] = { 1.44, 1.20, 1.13, 1.67, 1.34, 1.55, 1.64, 1.36, 1.42, 1.16, 1.24, 1.38, 1.40, 1.93, 1.14 };
    median_ci ci;
    median_ci_of(v, 15, 0.95, &ci);
    assert_int_equal(ci.n, 15);
    assert_true(ci.median == 1.38);
    assert_int_equal(ci.k, 4);
    assert_true(ci.lo == 1.20 && ci.hi == 1.55);
    assert_true(ci.coverage > 0.9648 && ci.coverage < 0.9649);
    assert_int_equal(median_ci_side(&ci, 1.5), 0);      /* 1.5 inside: not shown either way */
    assert_int_equal(median_ci_side(&ci, 1.6), 1);      /* the median is below 1.6 */
    assert_int_equal(median_ci_side(&ci, 1.1), -1);     /* and above 1.1 */
}

/* 10 rounds: P(B <= 1) = 11 / 1024 gives [x(2), x(9)] at 97.85%;
 * P(B <= 2) = 56 / 1024 would give 89.06%. Even n: the median is v[5],
 * as median_of() takes every median allocbench prints. */
static void test_ten_rounds(void **state)
{
    double v[10] = { 10, 9, 8, 7, 6, 5, 4, 3, 2, 1 };
    median_ci ci;
    median_ci_of(v, 10, 0.95, &ci);
    assert_true(ci.median == 6);
    assert_int_equal(ci.k, 2);
    assert_true(ci.lo == 2 && ci.hi == 9);
    assert_true(ci.coverage > 0.9785 && ci.coverage < 0.9786);
    assert_true(v[0] == 1 && v[9] == 10);                 /* sorted in place */
}

/* Five rounds (the drain's pairs): even [min, max] covers only
 * 1 - 2/32 = 93.75%, so no 95% interval exists and nothing is claimed;
 * six rounds reach 96.9% with [min, max]. */
static void test_too_few_rounds(void **state)
{
    double five[5] = { 2.1, 1.6, 1.8, 1.7, 1.9 };
    median_ci ci;
    median_ci_of(five, 5, 0.95, &ci);
    assert_true(ci.median == 1.8);
    assert_int_equal(ci.k, 0);
    assert_true(ci.coverage == 0);
    assert_int_equal(median_ci_side(&ci, 5.0), 0);
    double six[6] = { 3, 1, 2, 6, 5, 4 };
    median_ci_of(six, 6, 0.95, &ci);
    assert_int_equal(ci.k, 1);
    assert_true(ci.lo == 1 && ci.hi == 6);
    assert_true(ci.coverage > 0.9687 && ci.coverage < 0.9688);
    median_ci_of(six, 0, 0.95, &ci);
    assert_int_equal(ci.n, 0);
    assert_int_equal(ci.k, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifteen_rounds),
        cmocka_unit_test(test_ten_rounds),
        cmocka_unit_test(test_too_few_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
