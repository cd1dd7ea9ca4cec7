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

static redisReply *str(const char *s)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_STRING;
    r->str = strdup(s);
    r->len = strlen(s);
    return r;
}

static redisReply *arr(size_t n, ...)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_ARRAY;
    r->elements = n;
    r->element = calloc(n ? n : 1, sizeof *r->element);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

static redisReply *nil(void)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_NIL;
    return r;
}

static void test_fields_kept_as_written(void **state)
{
    (void)state;
    redisReply *e = arr(2, str("1763800000123-4"),
                        arr(8, str("type"), str("wait_served"), str("user"), str("u1"),
                            str("pos"), str("17"), str("group"), str("g-\xc3\xa9")));
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
    redisReply *e = arr(2, str("5-0"), nil());
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
    redisReply *e = arr(1, str("5-0"));
    assert_int_equal(archive_log_entry_decode(e, rows), -1);
    assert_null(archive_log_entry_id(e));
    freeReplyObject(e);
    e = str("5-0");
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
