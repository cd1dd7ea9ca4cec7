/* test_idfilter.c -- the Bloom filter of answered ids: never a false "no",
 * few false "maybe"s, and growth past the first part. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/idfilter.h"
#include "core/splitmix64.h"

/* well-spread 64-bit values, like the keyed hashes */
static uint64_t next(uint64_t *s) { return splitmix64_next(s); }

static void test_empty_says_no(void **state)
{
    idfilter f;
    idfilter_init(&f);
    uint64_t s = 1;
    for (int i = 0; i < 1000; i++) assert_int_equal(idfilter_maybe(&f, next(&s)), 0);
    assert_int_equal(idfilter_bytes(&f), 0);
    idfilter_free(&f);
}

/* 300,000 ids span several parts; every one is still found, and ids never
 * added are reported "maybe" rarely. */
static void test_no_false_negatives_and_few_false_positives(void **state)
{
    idfilter f;
    idfilter_init(&f);
    uint64_t s = 42;
    for (int i = 0; i < 300000; i++) assert_int_equal(idfilter_add(&f, next(&s)), 0);
    assert_true(f.nparts >= 3);
    s = 42;
    for (int i = 0; i < 300000; i++) assert_int_equal(idfilter_maybe(&f, next(&s)), 1);
    uint64_t o = 7777;
    int fp = 0;
    for (int i = 0; i < 200000; i++) fp += idfilter_maybe(&f, next(&o));
    /* the parts are sized for 32+ bits per id, 7 bits set in one block:
     * about 1e-5 when full, so a handful in 200,000 at most */
    assert_true(fp < 20);
    assert_true(idfilter_bytes(&f) < 300000 * 16);  /* at most 128 bits per id */
    idfilter_free(&f);
    assert_int_equal(f.nparts, 0);
    assert_int_equal(idfilter_maybe(&f, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_says_no),
        cmocka_unit_test(test_no_false_negatives_and_few_false_positives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
