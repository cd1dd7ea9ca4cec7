/* test_archive_log.c -- archive_log_entry_decode (tools/allocctl/
 * archive_log.c), the one reader of log entries for the archive, reconcile
 * and export: every field kept as written, known or not; an entry whose
 * fields are gone (trimmed while pending) adds no row; a reply that is not
 * an entry is refused; archive_log_entry_copy's rows of COPY's binary
 * format, read back field by field; and archive_results_copy's rows of a
 * page of results (archive_results.c), the same way. Replies are built by
 * hand, as hiredis would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "allocctl/archive_log.h"
#include "allocctl/archive_results.h"
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

/* A stream of COPY's binary format, read back as text: a line per row, its
 * fields by tabs, NULL as \N, integers in decimal, at as its microseconds
 * since 2000-01-01 (the format's timestamptz), fields as its JSON after
 * jsonb's version byte. Checks the header, the field counts and the
 * trailer. The caller frees. */
enum { T_TEXT, T_INT8, T_INT4, T_TIME, T_JSONB };
static const int event_types[16] = {
    T_TEXT, T_TEXT, T_INT8, T_INT8, T_INT4, T_TEXT, T_TEXT, T_TEXT,
    T_INT8, T_TEXT, T_TEXT, T_INT8, T_TIME, T_INT8, T_TEXT, T_JSONB,
};
/* alloc_results': batch, req_id, user_id, op, status, reason, item,
 * order_id, qty, seq, rank, at_ms, at, result */
static const int result_types[14] = {
    T_TEXT, T_TEXT, T_TEXT, T_TEXT, T_TEXT, T_TEXT, T_TEXT,
    T_TEXT, T_INT8, T_INT8, T_INT8, T_INT8, T_TIME, T_JSONB,
};

static long long be(const unsigned char *p, int n)
{
    unsigned long long v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return n == 8 ? (long long)v : n == 4 ? (long long)(int32_t)v : (long long)(int16_t)v;
}

static char *rows_as_text(const archive_buf *b, const int *column_types, int columns)
{
    const unsigned char *p = (const unsigned char *)b->p, *end = p + b->len;
    assert_true(b->len >= 21);
    assert_memory_equal(p, "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);
    p += 19;
    size_t cap = 2 * b->len + 64, len = 0;
    char *out = calloc(1, cap);
    assert_non_null(out);
    for (;;) {
        assert_true(p + 2 <= end);
        long long nf = be(p, 2);
        p += 2;
        if (nf == -1) break;
        assert_int_equal(nf, columns);
        for (int c = 0; c < columns; c++) {
            assert_true(p + 4 <= end);
            long long fl = be(p, 4);
            p += 4;
            const char *sep = c ? "\t" : "";
            if (fl == -1) { len += (size_t)snprintf(out + len, cap - len, "%s\\N", sep); continue; }
            assert_true(fl >= 0 && p + fl <= end);
            int t = column_types[c];
            if (t == T_INT8 || t == T_TIME) assert_int_equal(fl, 8);
            if (t == T_INT4) assert_int_equal(fl, 4);
            if (t == T_JSONB) assert_int_equal(p[0], 1);
            if (t == T_TEXT || t == T_JSONB)
                len += (size_t)snprintf(out + len, cap - len, "%s%.*s", sep, (int)fl - (t == T_JSONB),
                                        (const char *)p + (t == T_JSONB));
            else
                len += (size_t)snprintf(out + len, cap - len, "%s%lld", sep, be(p, (int)fl));
            p += fl;
        }
        len += (size_t)snprintf(out + len, cap - len, "\n");
    }
    assert_true(p == end);
    return out;
}

static char *copy_as_text(const archive_buf *b)
{
    return rows_as_text(b, event_types, 16);
}

/* The row of an entry: values as they are (a COPY in the binary format
 * escapes nothing), JSON's escapes in fields, an empty user NULL, a number
 * that is not one NULL, at as a time, a value that is not UTF-8 marked, a
 * repeated key once (the last), the keys in jsonb's order (shorter first). */
static void test_copy_row(void **state)
{
    (void)state;
    redisReply *e = rtest_arr(2, rtest_str("1763800000123-4"),
                        rtest_arr(14, rtest_str("type"), rtest_str("grant"), rtest_str("user"), rtest_str(""),
                            rtest_str("item"), rtest_str("a\tb\\c\"d\n"), rtest_str("qty"), rtest_str("1x"),
                            rtest_str("at"), rtest_str("1763800000123"), rtest_str("note"), rtest_str("\xff"),
                            rtest_str("qty"), rtest_str("-2")));
    archive_buf b = { 0 };
    archive_copy_begin(&b);
    assert_int_equal(archive_log_entry_copy(e, "flash-1", &b), 1);
    archive_copy_end(&b);
    assert_false(b.failed);
    char *got = copy_as_text(&b);
    /* 2025-11-22 08:26:40.123 UTC is 817,115,200.123 s after 2000-01-01 */
    const char *want = "flash-1\t1763800000123-4\t1763800000123\t4\t0\tgrant\t\\N\ta\tb\\c\"d\n\t-2\t"
                       "\\N\t\\N\t1763800000123\t817115200123000\t\\N\t\\N\t"
                       "{\"at\":\"1763800000123\",\"qty\":\"-2\",\"item\":\"a\\u0009b\\\\c\\\"d\\u000a\","
                       "\"note\":\"(not utf-8)\",\"type\":\"grant\",\"user\":\"\"}\n";
    if (strcmp(got, want)) fail_msg("got:\n%s\nwant:\n%s", got, want);
    free(got);
    archive_buf_free(&b);
    freeReplyObject(e);
}

/* A chunk entry: one row per event, ev_idx 0..n-1; times before 1970 and
 * out of range; two entries in one COPY. */
static void test_copy_chunk_entry(void **state)
{
    (void)state;
    redisReply *e = rtest_arr(2, rtest_str("7-0"),
                        rtest_arr(6, rtest_str("format"), rtest_str("chunk"), rtest_str("n"), rtest_str("2"),
                            rtest_str("events"), rtest_str("[[\"grant\",\"u1\",\"s\",1,\"9\",\"r1\",-1500],"
                                                           "[\"grant\",\"u2\",\"s\",1,\"8\",\"r2\",999999999999999999]]")));
    redisReply *gone = rtest_arr(2, rtest_str("8-1"), rtest_nil());
    archive_buf b = { 0 };
    archive_copy_begin(&b);
    assert_int_equal(archive_log_entry_copy(e, "b", &b), 2);
    assert_int_equal(archive_log_entry_copy(gone, "b", &b), 0);
    archive_copy_end(&b);
    char *got = copy_as_text(&b);
    char *second = strchr(got, '\n');
    assert_non_null(second);
    assert_non_null(strstr(got, "b\t7-0\t7\t0\t0\tgrant\tu1\t"));
    /* 1969-12-31 23:59:58.500 UTC */
    assert_non_null(strstr(got, "\t-1500\t-946684801500000\t"));
    assert_non_null(strstr(second, "b\t7-0\t7\t0\t1\tgrant\tu2\t"));
    assert_non_null(strstr(second, "\t999999999999999999\t\\N\t"));
    assert_true(strchr(second + 1, '\n') == got + strlen(got) - 1);   /* two rows, no more */
    free(got);
    archive_buf_free(&b);
    freeReplyObject(gone);
    freeReplyObject(e);
}

/* An entry of more fields than col_fields orders goes as it comes: every
 * key once, a repeated one with its last value. */
static void test_copy_many_fields(void **state)
{
    (void)state;
    enum { N = 70 };
    redisReply *fv = rtest_array_of(2 * N + 2);
    char k[16];
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "k%d", i);
        fv->element[2 * i] = rtest_str(k);
        fv->element[2 * i + 1] = rtest_str(i == 3 ? "first" : "v");
    }
    fv->element[2 * N] = rtest_str("k3");
    fv->element[2 * N + 1] = rtest_str("last");
    redisReply *e = rtest_arr(2, rtest_str("9-0"), fv);
    archive_buf b = { 0 };
    archive_copy_begin(&b);
    assert_int_equal(archive_log_entry_copy(e, "b", &b), 1);
    archive_copy_end(&b);
    char *got = copy_as_text(&b);
    json_t *fields = json_loads(strrchr(got, '\t') + 1, 0, NULL);
    assert_non_null(fields);
    assert_int_equal(json_object_size(fields), N);
    assert_string_equal(json_string_value(json_object_get(fields, "k3")), "last");
    json_decref(fields);
    free(got);
    archive_buf_free(&b);
    freeReplyObject(e);
}

/* A page of results: each field a row, the typed columns as `->>` gives
 * them (a string's value, an integer's digits, another type's JSON, NULL
 * for null or missing, status "" then), an integer text taken, a number
 * that is not an integer NULL, a time out of range NULL, the result's JSON
 * as written; a `waiting` result skipped; a value that is not JSON kept
 * as a JSON string, marked when it is not UTF-8 either. */
static void test_results_page(void **state)
{
    (void)state;
    redisReply *page = rtest_arr(12,
        rtest_str("r-1"), rtest_str("{\"id\":\"r-1\",\"user\":\"u1\",\"op\":\"buy\",\"status\":\"granted\","
                                     "\"item\":\"sku-1\",\"qty\":1,\"order\":\"2567\",\"seq\":5,\"rank\":3,"
                                     "\"at\":1763800000123}"),
        rtest_str("r-2"), rtest_str("{\"id\":\"r-2\",\"status\":\"waiting\"}"),
        rtest_str("r-3"), rtest_str("not \"json\""),
        rtest_str("r-4"), rtest_str("{\"user\":42,\"status\":null,\"item\":{\"a\":1},\"qty\":\"2\",\"seq\":1.5,"
                                     "\"at\":999999999999999999,\"reason\":true}"),
        rtest_str("r-5"), rtest_str("123"),
        rtest_str("r-6"), rtest_str("\xff"));
    archive_buf b = { 0 };
    archive_copy_begin(&b);
    assert_int_equal(archive_results_copy(page, "flash-1", NULL, NULL, &b), 5);
    archive_copy_end(&b);
    assert_false(b.failed);
    char *got = rows_as_text(&b, result_types, 14);
    const char *want =
        "flash-1\tr-1\tu1\tbuy\tgranted\t\\N\tsku-1\t2567\t1\t5\t3\t1763800000123\t817115200123000\t"
        "{\"id\":\"r-1\",\"user\":\"u1\",\"op\":\"buy\",\"status\":\"granted\",\"item\":\"sku-1\",\"qty\":1,"
        "\"order\":\"2567\",\"seq\":5,\"rank\":3,\"at\":1763800000123}\n"
        "flash-1\tr-3\t\\N\t\\N\t\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\"not \\\"json\\\"\"\n"
        "flash-1\tr-4\t42\t\\N\t\ttrue\t{\"a\":1}\t\\N\t2\t\\N\t\\N\t999999999999999999\t\\N\t"
        "{\"user\":42,\"status\":null,\"item\":{\"a\":1},\"qty\":\"2\",\"seq\":1.5,"
        "\"at\":999999999999999999,\"reason\":true}\n"
        "flash-1\tr-5\t\\N\t\\N\t\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t123\n"
        "flash-1\tr-6\t\\N\t\\N\t\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\"(not utf-8)\"\n";
    if (strcmp(got, want)) fail_msg("got:\n%s\nwant:\n%s", got, want);
    free(got);
    archive_buf_free(&b);
    freeReplyObject(page);
}

/* A request id that is not UTF-8 text (no daemon answers one) refuses the
 * page rather than archiving it under another key; so does a reply that
 * is not a page. */
static void test_results_page_refused(void **state)
{
    (void)state;
    redisReply *page = rtest_arr(2, rtest_str("r-\xc3"), rtest_str("{\"status\":\"granted\"}"));
    redisReply *odd = rtest_arr(1, rtest_str("r-1"));
    archive_buf b = { 0 };
    archive_copy_begin(&b);
    assert_int_equal(archive_results_copy(page, "b", NULL, NULL, &b), -1);
    assert_int_equal(archive_results_copy(odd, "b", NULL, NULL, &b), -1);
    assert_int_equal(archive_results_copy(NULL, "b", NULL, NULL, &b), -1);
    archive_buf_free(&b);
    freeReplyObject(odd);
    freeReplyObject(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_kept_as_written),
        cmocka_unit_test(test_trimmed_entry_adds_nothing),
        cmocka_unit_test(test_not_an_entry),
        cmocka_unit_test(test_progress_key),
        cmocka_unit_test(test_copy_row),
        cmocka_unit_test(test_copy_chunk_entry),
        cmocka_unit_test(test_copy_many_fields),
        cmocka_unit_test(test_results_page),
        cmocka_unit_test(test_results_page_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
