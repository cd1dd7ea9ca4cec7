/* test_profiles_scan.c -- what a read of P:{B}:profiles installs
 * (worker/profiles_scan.h): every profile at the first read, only the
 * changed ones after, nothing for a field HSCAN returns twice, the
 * profile taken away from a user gone from the hash, a bad value counted
 * and logged once, a field named by no user id logged once and
 * ignored, and a read of many users that grows the arrays. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/engine.h"
#include "core/engine_elig.h"
#include "worker/profiles_scan.h"

static engine *rooms(void)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_ROOM;
    engine *e = engine_new(&m, 3);
    assert_non_null(e);
    return e;
}

static const char *year(const engine *e, const char *user)
{
    return engine_profile_get(e, user, "year");
}

static void test_changes_and_gone(void **state)
{
    engine *e = rooms();
    profiles_report r;
    profiles_report_init(&r);
    profiles_begin(&r, 1);
    profiles_pair(&r, e, "b", "s1", "{\"year\":1}");
    profiles_pair(&r, e, "b", "s2", "{\"year\":2}");
    profiles_pair(&r, e, "b", "s3", "[1]");          /* no profile: none, counted */
    profiles_end(&r, e);
    assert_string_equal(year(e, "s1"), "1");
    assert_string_equal(year(e, "s2"), "2");
    assert_null(year(e, "s3"));
    assert_int_equal(r.bad, 1);
    assert_int_equal(r.logged, 1);
    /* the next read: s1 changed, s2 gone, s3 still bad (not logged again),
     * s4 new, and s1 returned twice by the scan */
    profiles_begin(&r, 0);
    profiles_pair(&r, e, "b", "s1", "{\"year\":4}");
    profiles_pair(&r, e, "b", "s3", "[1]");
    profiles_pair(&r, e, "b", "s4", "{\"year\":3}");
    profiles_pair(&r, e, "b", "s1", "{\"year\":4}");
    profiles_end(&r, e);
    assert_string_equal(year(e, "s1"), "4");
    assert_null(year(e, "s2"));
    assert_string_equal(year(e, "s4"), "3");
    assert_int_equal(r.bad, 1);
    assert_int_equal(r.logged, 1);
    /* s3 fixed, then the whole hash deleted */
    profiles_begin(&r, 0);
    profiles_pair(&r, e, "b", "s3", "{\"year\":2}");
    profiles_end(&r, e);
    assert_string_equal(year(e, "s3"), "2");
    assert_null(year(e, "s1"));
    assert_int_equal(r.bad, 0);
    profiles_begin(&r, 0);
    profiles_end(&r, e);
    assert_null(year(e, "s3"));
    assert_int_equal(engine_profile_count(e), 0);
    profiles_report_free(&r);
    engine_free(e);
}

/* 5,000 users: the arrays grow, and a second read of the same values
 * changes nothing. */
static void test_many(void **state)
{
    engine *e = rooms();
    profiles_report r;
    profiles_report_init(&r);
    char user[32], value[64];
    for (int pass = 0; pass < 2; pass++) {
        profiles_begin(&r, pass == 0);
        for (int i = 0; i < 5000; i++) {
            snprintf(user, sizeof user, "u%d", i);
            snprintf(value, sizeof value, "{\"year\":%d}", i % 5);
            profiles_pair(&r, e, "b", user, value);
        }
        profiles_end(&r, e);
        assert_int_equal(r.n, 5000);
        assert_int_equal(engine_profile_count(e), 5000);
    }
    assert_string_equal(year(e, "u4999"), "4");
    assert_int_equal(r.bad, 0);
    profiles_report_free(&r);
    engine_free(e);
}

/* A field whose name is no user id (longer than ENGINE_ID_MAX): logged the
 * first time, not again at the next reads; the others go in. */
static void test_bad_user_id_logged_once(void **state)
{
    (void)state;
    engine *e = rooms();
    profiles_report r;
    profiles_report_init(&r);
    char longid[ENGINE_ID_MAX + 8];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    for (int pass = 0; pass < 3; pass++) {
        profiles_begin(&r, pass == 0);
        profiles_pair(&r, e, "b", longid, "{\"year\":1}");
        profiles_pair(&r, e, "b", "", "{\"year\":1}");
        profiles_pair(&r, e, "b", "s1", "{\"year\":2}");
        profiles_end(&r, e);
    }
    assert_int_equal(r.logged, 2);
    assert_int_equal(r.bad, 0);
    assert_string_equal(year(e, "s1"), "2");
    assert_int_equal(engine_profile_count(e), 1);
    profiles_report_free(&r);
    engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_changes_and_gone),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_bad_user_id_logged_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
