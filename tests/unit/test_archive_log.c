/* test_archive_log.c -- archive_log_entry_decode (tools/allocctl/
 * archive_log.c), the one reader of log entries for the archive, reconcile
 * and export: every field kept as written, known or not; an entry whose
 * fields are gone (trimmed while pending) adds no row; a reply that is not
 * an entry is refused. Replies are built by hand, as hiredis would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "allocctl/archive_log.h"
#include "rtest.h"

static void test_fields_kept_as_written(void **state)
{
    (void)state;
    redisReply *e = rtest_arr(2, rtest_str("1763800000123-4"),
                        rtest_arr(8, rtest_str("type"), rtest_str("wait_served"), rtest_str("user"), rtest_str("u1"),
                            rtest_str("pos"), rtest_str("17"), rtest_str("group"), rtest_str("g-\xc3\xa9")));
    json_t *rows = json_array();
    assert_int_equal(archive_log_entry_decode(e, rows), 1);
    char *got = json_dumps(json_array_get(rows, 0), JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(got, "{\"f\":{\"group\":\"g-\xc3\xa9\",\"pos\":\"17\",\"type\":\"wait_served\","
                             "\"user\":\"u1\"},\"i\":0,\"id\":\"1763800000123-4\"}");
    free(got);
    assert_string_equal(archive_log_entry_id(e), "1763800000123-4");
    json_decref(rows);
    freeReplyObject(e);
}

static void test_trimmed_entry_adds_nothing(void **state)
{
    (void)state;
    redisReply *e = rtest_arr(2, rtest_str("5-0"), rtest_nil());
    json_t *rows = json_array();
    assert_int_equal(archive_log_entry_decode(e, rows), 0);
    assert_int_equal(json_array_size(rows), 0);
    json_decref(rows);
    freeReplyObject(e);
}

static void test_not_an_entry(void **state)
{
    (void)state;
    json_t *rows = json_array();
    redisReply *e = rtest_arr(1, rtest_str("5-0"));
    assert_int_equal(archive_log_entry_decode(e, rows), -1);
    assert_null(archive_log_entry_id(e));
    freeReplyObject(e);
    e = rtest_str("5-0");
    assert_int_equal(archive_log_entry_decode(e, rows), -1);
    freeReplyObject(e);
    assert_int_equal(json_array_size(rows), 0);
    json_decref(rows);
}

static void test_progress_key(void **state)
{
    (void)state;
    char k[64];
    archive_progress_key(k, sizeof k, "alloc", "flash-1");
    assert_string_equal(k, "alloc:{flash-1}:archive");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_kept_as_written),
        cmocka_unit_test(test_trimmed_entry_adds_nothing),
        cmocka_unit_test(test_not_an_entry),
        cmocka_unit_test(test_progress_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
