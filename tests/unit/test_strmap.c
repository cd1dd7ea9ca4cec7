/* test_strmap.c -- the string -> index map: finds what was inserted, refuses
 * a second insert of a key, keeps working across growth, and the hashed
 * variants agree with the plain ones. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <cmocka.h>

#include "core/strmap.h"

#define N 50000

static char keys[N][16];

static const char *key_of(const void *ctx, uint32_t idx)
{
    (void)ctx;
    return keys[idx];
}

static void test_insert_find_grow(void **state)
{
    strmap m;
    strmap_init(&m, 7, key_of, NULL);
    for (uint32_t i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "u%u", i);
        if (i % 2) assert_int_equal(strmap_insert(&m, keys[i], i), 0);
        else assert_int_equal(strmap_insert_hashed(&m, keys[i], i, strmap_hash32(&m, keys[i])), 0);
    }
    assert_int_equal(m.count, N);
    assert_true((uint64_t)m.count * 4 <= (uint64_t)(m.mask + 1) * 3);
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(strmap_find(&m, keys[i]), i);
        assert_int_equal(strmap_find_hashed(&m, keys[i], strmap_hash32(&m, keys[i])), i);
    }
    assert_int_equal(strmap_find(&m, "nobody"), STRMAP_NONE);
    /* strmap_guess: right for almost every key (the first two probes), and
     * never an index that is not in the map */
    uint32_t guessed = 0;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t g = strmap_guess(&m, strmap_hash32(&m, keys[i]));
        assert_true(g == STRMAP_NONE || g < N);
        guessed += g == i;
    }
    assert_true(guessed >= N * 9 / 10);
    assert_int_equal(strmap_guess(&m, strmap_hash32(&m, "nobody")) == STRMAP_NONE ||
                     strmap_guess(&m, strmap_hash32(&m, "nobody")) < N, 1);
    assert_int_equal(strmap_insert(&m, "u123", 9), -EEXIST);
    assert_int_equal(strmap_insert_hashed(&m, "u124", 9, strmap_hash32(&m, "u124")), -EEXIST);
    assert_int_equal(strmap_find(&m, "u123"), 123);
    assert_int_equal(m.count, N);
    assert_int_equal(strmap_insert(&m, NULL, 1), -EINVAL);
    assert_int_equal(strmap_insert(&m, "x", STRMAP_NONE), -EINVAL);
    strmap_free(&m);
    assert_int_equal(strmap_find(&m, "u1"), STRMAP_NONE);
    assert_int_equal(strmap_guess(&m, 1), STRMAP_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insert_find_grow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
