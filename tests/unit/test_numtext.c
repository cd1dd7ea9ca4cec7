/* test_numtext.c -- the shared integer text and base64 helpers of the core:
 * every edge of the range both ways, strictness of the parsers, and base64
 * round trips of every length around a group boundary. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/base64.h"
#include "core/numtext.h"

static void expect_u64(uint64_t v, const char *text)
{
    char buf[NUMTEXT_MAX + 1];
    size_t n = numtext_u64(buf, v);
    buf[n] = '\0';
    assert_string_equal(buf, text);
    uint64_t back = 0;
    assert_int_equal(numtext_parse_u64(text, &back), 0);
    assert_true(back == v);
}

static void expect_i64(int64_t v, const char *text)
{
    char buf[NUMTEXT_MAX + 1];
    size_t n = numtext_i64(buf, v);
    buf[n] = '\0';
    assert_string_equal(buf, text);
    int64_t back = 0;
    assert_int_equal(numtext_parse_i64(text, &back), 0);
    assert_true(back == v);
}

static void test_round_trips(void **state)
{
    expect_u64(0, "0");
    expect_u64(7, "7");
    expect_u64(1000, "1000");
    expect_u64(9, "9");
    expect_u64(10, "10");
    expect_u64(99, "99");
    expect_u64(100, "100");
    expect_u64(101, "101");
    expect_u64(1209845770283447512ULL, "1209845770283447512");
    expect_u64(1763800000123ULL, "1763800000123");
    expect_u64(10000000000000000000ULL, "10000000000000000000");
    expect_u64(UINT64_MAX, "18446744073709551615");
    expect_i64(0, "0");
    expect_i64(-1, "-1");
    expect_i64(INT64_MAX, "9223372036854775807");
    expect_i64(INT64_MIN, "-9223372036854775808");
}

/* Against printf: every value below 100,000, every power of ten and its
 * neighbours, and 100,000 mixed values of every length. */
static void test_u64_matches_printf(void **state)
{
    (void)state;
    char want[32], got[NUMTEXT_MAX + 1];
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (uint64_t i = 0; i < 300000; i++) {
        uint64_t v;
        if (i < 100000) {
            v = i;
        } else if (i < 100060) {
            uint64_t p = 1;
            for (uint64_t k = 0; k < (i - 100000) / 3; k++) p *= 10;
            v = p + (i % 3) - 1;
        } else {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            v = x >> (x % 64);
        }
        snprintf(want, sizeof want, "%llu", (unsigned long long)v);
        size_t n = numtext_u64(got, v);
        got[n] = '\0';
        assert_string_equal(got, want);
    }
}

static void test_parsers_are_strict(void **state)
{
    const char *bad[] = { "", "-", "+1", " 1", "1 ", "1x", "0x10", "1.0", "--1",
                          "9223372036854775808", "-9223372036854775809",
                          "99999999999999999999", NULL };
    int64_t v = 42;
    for (int i = 0; bad[i]; i++) {
        if (numtext_parse_i64(bad[i], &v) == 0) fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(v, 42);                /* untouched on refusal */
    }
    uint64_t u = 42;
    assert_int_equal(numtext_parse_u64("-1", &u), -1);
    assert_int_equal(numtext_parse_u64("18446744073709551616", &u), -1);
    assert_int_equal(numtext_parse_i64(NULL, &v), -1);
    assert_true(u == 42);
    uint64_t h;
    assert_int_equal(numtext_parse_hex_u64("00ff00FF00ff00Ff", &h), 0);
    assert_true(h == UINT64_C(0x00ff00ff00ff00ff));
    assert_int_equal(numtext_parse_hex_u64("a", &h), 0);
    assert_true(h == 10);
    assert_int_equal(numtext_parse_hex_u64("", &h), -1);
    assert_int_equal(numtext_parse_hex_u64("0x1", &h), -1);
    assert_int_equal(numtext_parse_hex_u64("1g", &h), -1);
    assert_int_equal(numtext_parse_hex_u64(" 1", &h), -1);
    assert_int_equal(numtext_parse_hex_u64("10000000000000000", &h), -1);
}

static void test_base64(void **state)
{
    char out[64];
    size_t n = base64_encode(out, (const unsigned char *)"foobar", 6);
    assert_int_equal(n, 8);
    assert_memory_equal(out, "Zm9vYmFy", 8);
    n = base64_encode(out, (const unsigned char *)"fo", 2);
    assert_memory_equal(out, "Zm8=", n);
    unsigned char in[40];
    for (size_t len = 0; len < sizeof in; len++) {
        for (size_t i = 0; i < len; i++) in[i] = (unsigned char)(i * 37 + len);
        n = base64_encode(out, in, len);
        assert_int_equal(n, BASE64_LEN(len));
        out[n] = '\0';
        size_t back_len = 0;
        char *back = base64_decode(out, &back_len);
        assert_non_null(back);
        assert_int_equal(back_len, len);
        assert_memory_equal(back, in, len);
        free(back);
    }
    size_t len;
    char *unpadded = base64_decode("Zm8", &len);     /* padding is optional */
    assert_non_null(unpadded);
    assert_int_equal(len, 2);
    free(unpadded);
    assert_null(base64_decode("Zm9v!", &len));
    assert_null(base64_decode("Zm8=x", &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_u64_matches_printf),
        cmocka_unit_test(test_parsers_are_strict),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
