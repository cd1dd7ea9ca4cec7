/* test_profile.c -- a P:{B}:profiles value read by wire/profile.c: the
 * pairs in the canonical form attrs use, `points`, and every shape that
 * is not a profile refused with a message (the user then has none). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "wire/profile.h"

static int parse(profile *p, const char *json, char *err, size_t errlen)
{
    return profile_parse(p, json, strlen(json), err, errlen);
}

static void test_strings_and_integers_become_canonical_pairs(void **state)
{
    (void)state;
    profile p;
    char err[200];
    assert_int_equal(parse(&p, "{\"gender\":\"F\",\"year\":4,\"llc\":\"stem\",\"points\":37}",
                           err, sizeof err), 0);
    assert_int_equal(p.n, 4);
    assert_string_equal(p.kv[0].key, "gender");
    assert_string_equal(p.kv[0].value, "\"F\"");
    assert_string_equal(p.kv[1].key, "year");
    assert_string_equal(p.kv[1].value, "4");
    assert_string_equal(p.kv[3].value, "37");
    assert_int_equal(p.points, 37);
    profile_free(&p);
    assert_int_equal(parse(&p, "{}", err, sizeof err), 0);     /* a profile of nothing */
    assert_int_equal(p.n, 0);
    assert_int_equal(p.points, 0);
    profile_free(&p);
}

static void test_points_that_are_no_integer_count_as_zero(void **state)
{
    (void)state;
    profile p;
    char err[200];
    assert_int_equal(parse(&p, "{\"points\":\"37\"}", err, sizeof err), 0);
    assert_int_equal(p.points, 0);
    profile_free(&p);
}

static void test_other_shapes_are_no_profile(void **state)
{
    (void)state;
    static const struct { const char *json, *why; } cases[] = {
        { "not json", "not JSON" },
        { "[1,2]", "not a JSON object" },
        { "{\"year\":4.5}", "neither a string nor an integer" },
        { "{\"ok\":true}", "neither a string nor an integer" },
        { "{\"x\":null}", "neither a string nor an integer" },
        { "{\"x\":[\"a\"]}", "neither a string nor an integer" },
        { "{\"x\":{\"a\":1}}", "neither a string nor an integer" },
        { "{\"a\":1,\"a\":2}", "not JSON" },
        { "{\"\":1}", "1 to 64 characters" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        profile p;
        char err[200] = "";
        assert_int_equal(parse(&p, cases[i].json, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, cases[i].why));
        assert_int_equal(p.n, 0);
        profile_free(&p);
    }
}

static void test_limits(void **state)
{
    (void)state;
    char big[PROFILE_VALUE_MAX + 40], many[PROFILE_MAX_ATTRS * 12 + 20];
    snprintf(big, sizeof big, "{\"x\":\"%0*d\"}", PROFILE_VALUE_MAX + 1, 0);
    size_t at = (size_t)snprintf(many, sizeof many, "{");
    for (int i = 0; i <= PROFILE_MAX_ATTRS; i++)
        at += (size_t)snprintf(many + at, sizeof many - at, "%s\"k%d\":%d", i ? "," : "", i, i);
    snprintf(many + at, sizeof many - at, "}");
    profile p;
    char err[200];
    assert_int_equal(parse(&p, big, err, sizeof err), -EINVAL);
    profile_free(&p);
    assert_int_equal(parse(&p, many, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "more than"));
    profile_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings_and_integers_become_canonical_pairs),
        cmocka_unit_test(test_points_that_are_no_integer_count_as_zero),
        cmocka_unit_test(test_other_shapes_are_no_profile),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
