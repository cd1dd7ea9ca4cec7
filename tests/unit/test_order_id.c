/* test_order_id.c -- order ids: the permutation is a bijection, ids are
 * unique and time-ordered, and consecutive counters do not give
 * consecutive-looking ids. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/order_id.h"

static void test_permutation_roundtrip(void **state)
{
    uint64_t key = 0x0123456789abcdefULL;
    for (uint32_t x = 0; x < 200000; x++)
        assert_int_equal(order_id_unpermute(order_id_permute(x, key), key), x);
    for (uint32_t x = 0xffffffffu - 1000; x != 0; x++)
        assert_int_equal(order_id_unpermute(order_id_permute(x, key), key), x);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void test_no_collisions_in_a_range(void **state)
{
    size_t n = 1 << 20;
    uint32_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = order_id_permute((uint32_t)i, 42);
    qsort(v, n, sizeof *v, cmp_u32);
    for (size_t i = 1; i < n; i++) assert_true(v[i] != v[i - 1]);
    free(v);
}

static void test_consecutive_counters_look_unrelated(void **state)
{
    /* The gap between ids of consecutive counter values should be large and
     * varied: count how often it is below 2^16 (a random pair: ~1/32768). */
    int small = 0;
    for (uint32_t x = 0; x < 100000; x++) {
        uint32_t a = order_id_permute(x, 7), b = order_id_permute(x + 1, 7);
        uint32_t gap = a > b ? a - b : b - a;
        if (gap < 65536) small++;
    }
    assert_true(small < 50);
}

static void test_layout(void **state)
{
    int64_t now = 1763800000123LL; /* 2025-11-22 */
    uint64_t id = order_id_make(99, now, 5);
    assert_true(id >> 63 == 0);
    assert_int_equal(order_id_seconds(id), now / 1000);
    assert_true(order_id_make(99, now + 1000, 0) > order_id_make(99, now, 0xffffffff));
    order_block b = { .key = 1, .next = 10, .end = 12, .now_ms = now };
    assert_int_equal(order_block_left(&b), 2);
    assert_true(order_block_mint(&b) != 0);
    assert_true(order_block_mint(&b) != 0);
    assert_int_equal(order_block_mint(&b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permutation_roundtrip),
        cmocka_unit_test(test_no_collisions_in_a_range),
        cmocka_unit_test(test_consecutive_counters_look_unrelated),
        cmocka_unit_test(test_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
