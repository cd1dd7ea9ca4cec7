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

/* The COPY line of an entry: specials escaped for COPY and for JSON, an
 * empty user NULL, a number that is not one NULL, at as a UTC time, a value
 * that is not UTF-8 marked, a repeated key once (the last). */
static void test_copy_line(void **state)
{
    (void)state;
    redisReply *e = rtest_arr(2, rtest_str("1763800000123-4"),
                        rtest_arr(14, rtest_str("type"), rtest_str("grant"), rtest_str("user"), rtest_str(""),
                            rtest_str("item"), rtest_str("a\tb\\c\"d\n"), rtest_str("qty"), rtest_str("1x"),
                            rtest_str("at"), rtest_str("1763800000123"), rtest_str("note"), rtest_str("\xff"),
                            rtest_str("qty"), rtest_str("-2")));
    archive_buf b = { 0 };
    assert_int_equal(archive_log_entry_copy(e, "flash-1", &b), 1);
    assert_false(b.failed);
    const char *want = "flash-1\t1763800000123-4\t1763800000123\t4\t0\tgrant\t\\N\ta\\tb\\\\c\"d\\n\t-2\t"
                       "\\N\t\\N\t1763800000123\t2025-11-22 08:26:40.123+00\t\\N\t\\N\t"
                       "{\"type\":\"grant\",\"user\":\"\",\"item\":\"a\\\\u0009b\\\\\\\\c\\\\\"d\\\\u000a\","
                       "\"at\":\"1763800000123\",\"note\":\"(not utf-8)\",\"qty\":\"-2\"}\n";
    if (b.len != strlen(want) || memcmp(b.p, want, b.len))
        fail_msg("got:\n%.*s\nwant:\n%s", (int)b.len, b.p, want);
    archive_buf_free(&b);
    freeReplyObject(e);
}

/* A chunk entry: one line per event, ev_idx 0..n-1; times before 1970 and
 * out of range. */
static void test_copy_chunk_entry(void **state)
{
    (void)state;
    redisReply *e = rtest_arr(2, rtest_str("7-0"),
                        rtest_arr(6, rtest_str("format"), rtest_str("chunk"), rtest_str("n"), rtest_str("2"),
                            rtest_str("events"), rtest_str("[[\"grant\",\"u1\",\"s\",1,\"9\",\"r1\",-1500],"
                                                           "[\"grant\",\"u2\",\"s\",1,\"8\",\"r2\",999999999999999999]]")));
    archive_buf b = { 0 };
    assert_int_equal(archive_log_entry_copy(e, "b", &b), 2);
    char *second = memchr(b.p, '\n', b.len);
    assert_non_null(second);
    assert_non_null(strstr(b.p, "\t7\t0\t0\tgrant\tu1\t"));
    assert_non_null(strstr(b.p, "\t-1500\t1969-12-31 23:59:58.500+00\t"));
    assert_non_null(strstr(second, "\t7\t0\t1\tgrant\tu2\t"));
    assert_non_null(strstr(second, "\t999999999999999999\t\\N\t"));
    archive_buf_free(&b);
    freeReplyObject(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_kept_as_written),
        cmocka_unit_test(test_trimmed_entry_adds_nothing),
        cmocka_unit_test(test_not_an_entry),
        cmocka_unit_test(test_progress_key),
        cmocka_unit_test(test_copy_line),
        cmocka_unit_test(test_copy_chunk_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
