/* test_archive_seen.c -- the set of request ids a run of the archiver has
 * committed (tools/allocctl/archive_seen.c): an id is there once added and
 * not before, ids that differ in one byte or only in length are told
 * apart, and nothing is lost as the arena and the map grow. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "allocctl/archive_seen.h"

static void test_added_and_not(void **state)
{
    (void)state;
    assert_false(archive_seen_has(NULL, "r-1"));
    archive_seen *s = archive_seen_new();
    assert_non_null(s);
    assert_false(archive_seen_has(s, "r-1"));
    assert_int_equal(archive_seen_add(s, "r-1"), 0);
    assert_true(archive_seen_has(s, "r-1"));
    assert_false(archive_seen_has(s, "r-2"));
    assert_false(archive_seen_has(s, "r-"));
    assert_false(archive_seen_has(s, "r-10"));
    assert_int_equal(archive_seen_add(s, "r-1"), 0);     /* twice: once */
    assert_int_equal(archive_seen_count(s), 1);
    assert_int_equal(archive_seen_add(s, ""), 0);
    assert_true(archive_seen_has(s, ""));
    assert_int_equal(archive_seen_count(s), 2);
    archive_seen_free(s);
    archive_seen_free(NULL);
}

/* 200,000 ids of growing length (the arena moves many times, the map
 * rehashes): every added id is found, every other id of the same shape
 * is not. */
static void test_grows(void **state)
{
    (void)state;
    enum { N = 200000 };
    archive_seen *s = archive_seen_new();
    assert_non_null(s);
    char id[64];
    for (int i = 0; i < N; i += 2) {
        snprintf(id, sizeof id, "r-%d-%.*s", i, i % 40, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        assert_int_equal(archive_seen_add(s, id), 0);
    }
    assert_int_equal(archive_seen_count(s), N / 2);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "r-%d-%.*s", i, i % 40, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        if (archive_seen_has(s, id) != !(i % 2)) fail_msg("%s: has %d", id, !!(i % 2));
    }
    archive_seen_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_added_and_not),
        cmocka_unit_test(test_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
