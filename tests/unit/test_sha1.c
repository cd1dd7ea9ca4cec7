/* test_sha1.c -- SHA-1 against published and independently computed vectors.
 *
 * The FIPS 180 examples ("", "abc", the 448-bit message, a million 'a'),
 * lengths around the padding edges (55/56 bytes need one or two final
 * blocks, 64/65 and 119/120 cross block boundaries; values from sha1sum),
 * and a Lua script whose SHA was read back from `redis-cli SCRIPT LOAD`, so
 * EVALSHA names match what Redis computes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/sha1.h"

static void check(const char *data, size_t len, const char *want)
{
    char hex[41];
    memset(hex, 'x', sizeof hex);
    sha1_hex(data, len, hex);
    assert_string_equal(hex, want);
}

static void check_repeat(char ch, size_t n, const char *want)
{
    char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    memset(buf, ch, n);
    check(buf, n, want);
    free(buf);
}

static void test_fips_vectors(void **state)
{
    (void)state;
    check("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    check("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check(m448, strlen(m448), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    check_repeat('a', 1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

static void test_padding_edges(void **state)
{
    (void)state;
    check_repeat('a', 55, "c1c8bbdc22796e28c0e15163d20899b65621d65a");
    check_repeat('a', 56, "c2db330f6083854c99d4b5bfb6e8f29f201be699");
    check_repeat('a', 63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5");
    check_repeat('a', 64, "0098ba824b5c16427bd7a1122a5a442a25ec644d");
    check_repeat('a', 65, "11655326c708d70319be2610e8a57d9a5b959d3b");
    check_repeat('a', 119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56");
    check_repeat('a', 120, "f34c1488385346a55709ba056ddd08280dd4c6d6");
}

static void test_redis_script(void **state)
{
    (void)state;
    /* redis-cli SCRIPT LOAD "return redis.call('GET', KEYS[1])" */
    const char *src = "return redis.call('GET', KEYS[1])";
    check(src, strlen(src), "d3c21d0c2b9ca22f82737626a27bcaf5d288f99f");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),
        cmocka_unit_test(test_padding_edges),
        cmocka_unit_test(test_redis_script),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
