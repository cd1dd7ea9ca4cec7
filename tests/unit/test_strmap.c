/* test_strmap.c -- the string -> index map: finds what was inserted, refuses
 * a second insert of a key, keeps working across growth, and the hashed
 * variants agree with the plain ones; a reserve makes room once, keeping
 * what is in. */
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

/* Room reserved for n keys: the n inserts never rehash (the slots stay
 * where they are), and a reserve over a full map keeps every key. */
static void test_reserve(void **state)
{
    (void)state;
    strmap m;
    strmap_init(&m, 9, key_of, NULL);
    assert_int_equal(strmap_reserve(&m, 1000), 0);
    strmap_slot *slots = m.slots;
    uint32_t mask = m.mask;
    assert_true((uint64_t)1000 * 4 <= (uint64_t)(mask + 1) * 3);
    for (uint32_t i = 0; i < 1000; i++) {
        snprintf(keys[i], sizeof keys[i], "r%u", i);
        assert_int_equal(strmap_insert(&m, keys[i], i), 0);
    }
    assert_ptr_equal(m.slots, slots);
    assert_int_equal(m.mask, mask);
    assert_int_equal(strmap_reserve(&m, 10), 0);        /* less than there is room for: nothing */
    assert_ptr_equal(m.slots, slots);
    assert_int_equal(strmap_reserve(&m, 20000), 0);
    assert_true(m.mask > mask);
    for (uint32_t i = 0; i < 1000; i++) assert_int_equal(strmap_find(&m, keys[i]), i);
    assert_int_equal(m.count, 1000);
    strmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insert_find_grow),
        cmocka_unit_test(test_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
