/* test_request.c -- the request parser against the table in
 * tests/data/requests.txt, plus the cases a text file cannot hold
 * (NUL bytes, invalid UTF-8, size limits, deep nesting), and the field
 * lookup both readers share. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "wire/request.h"
#include "wire/request_fields.h"

#define MAX_BYTES 4096

static const char *outcome_name(request_outcome o)
{
    return o == REQUEST_OK ? "ok" : o == REQUEST_DEAD ? "dead" : "invalid";
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n')) s[--n] = '\0';
    return s;
}

static void test_table(void **state)
{
    FILE *f = fopen("tests/data/requests.txt", "r");
    assert_non_null(f);
    char line[8192];
    int cases = 0, lineno = 0, failures = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        char *fields[4], *p = line;
        for (int i = 0; i < 3; i++) {
            char *bar = strstr(p, " | ");
            assert_non_null(bar);
            *bar = '\0';
            fields[i] = trim(p);
            p = bar + 3;
        }
        size_t n = strlen(p);
        if (n && p[n - 1] == '\n') p[--n] = '\0';
        fields[3] = p;
        request q;
        request_parse(&q, p, n, MAX_BYTES, fields[1][0] == 'c');
        int ok = !strcmp(outcome_name(q.outcome), fields[0]) &&
                 (!strcmp(fields[2], "-") || strstr(q.error, fields[2]));
        if (!ok) {
            fprintf(stderr, "requests.txt:%d: expected %s '%s', got %s '%s'\n", lineno,
                    fields[0], fields[2], outcome_name(q.outcome), q.error);
            failures++;
        }
        if (q.outcome != REQUEST_DEAD) assert_non_null(q.r.id);
        request_clear(&q);
        cases++;
    }
    fclose(f);
    assert_true(cases >= 60);
    assert_int_equal(failures, 0);
}

static void test_fields_of_valid_requests(void **state)
{
    request q;
    const char *raw = "{\"id\":\"g1\",\"user\":\"a\",\"op\":\"group\",\"members\":[\"a\",\"b\"],"
                      "\"prefs\":[\"R1\",\"R2\"],\"filter\":{\"floor\":3,\"b\":{\"y\":1,\"x\":2}}}";
    request_parse(&q, raw, strlen(raw), MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_OK);
    assert_int_equal(q.r.op, OP_GROUP);
    assert_int_equal(q.r.n_prefs, 2);
    assert_string_equal(q.r.prefs[1], "R2");
    assert_int_equal(q.r.n_members, 2);
    assert_string_equal(q.r.members[1], "b");
    assert_int_equal(q.r.n_filter, 2);
    assert_true(q.r.has_filter);
    for (size_t i = 0; i < q.r.n_filter; i++) {
        if (!strcmp(q.r.filter[i].key, "floor")) assert_string_equal(q.r.filter[i].value, "3");
        else assert_string_equal(q.r.filter[i].value, "{\"x\":2,\"y\":1}"); /* keys sorted */
    }
    request_clear(&q);

    raw = "{\"id\":\"b1\",\"user\":\"a\",\"op\":\"buy\",\"item\":\"sku\"}";
    request_parse(&q, raw, strlen(raw), MAX_BYTES, 0);
    assert_int_equal(q.r.qty, 1); /* default */
    request_clear(&q);

    raw = "{\"id\":\"c1\",\"user\":\"a\",\"op\":\"confirm\",\"order\":\"18446744073709551615\"}";
    request_parse(&q, raw, strlen(raw), MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_OK);
    assert_true(q.r.order == UINT64_MAX);
    request_clear(&q);
}

static void test_size_limit(void **state)
{
    size_t n = 1 << 20;
    char *big = malloc(n + 64);
    int k = snprintf(big, 64, "{\"id\":\"r1\",\"user\":\"u\",\"op\":\"buy\",\"item\":\"");
    memset(big + k, 'x', n);
    strcpy(big + k + n - 2, "\"}");
    request q;
    request_parse(&q, big, n + (size_t)k, MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_DEAD);
    assert_non_null(strstr(q.error, "max_request_bytes"));
    request_clear(&q);
    /* exactly at the limit is fine */
    char exact[MAX_BYTES];
    memset(exact, ' ', sizeof exact);
    const char *body = "{\"id\":\"r1\",\"user\":\"u\",\"op\":\"release\"}";
    memcpy(exact, body, strlen(body));
    request_parse(&q, exact, sizeof exact, MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_OK);
    request_clear(&q);
    free(big);
}

static void test_binary_garbage(void **state)
{
    const char nul[] = "{\"id\":\"r1\",\0\"user\":\"u\",\"op\":\"release\"}";
    request q;
    request_parse(&q, nul, sizeof nul - 1, MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_DEAD);
    request_clear(&q);
    const char bad_utf8[] = "{\"id\":\"r1\",\"user\":\"\xff\xfe\",\"op\":\"release\"}";
    request_parse(&q, bad_utf8, sizeof bad_utf8 - 1, MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_DEAD);
    request_clear(&q);
}

static void test_deep_nesting(void **state)
{
    char buf[4000];
    size_t n = 0;
    n += (size_t)sprintf(buf, "{\"id\":\"r1\",\"user\":\"u\",\"op\":\"release\",\"x\":");
    while (n < 3000) buf[n++] = '[';
    request q;
    request_parse(&q, buf, n, MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_DEAD);
    request_clear(&q);
}

/* The messages of values too long for a line of requests.txt, given
 * whole like the others there: lists and filters over REQUEST_MAX_LIST,
 * on both readers (a list of plain strings is the fast reader's, a filter
 * always jansson's). */
static void test_messages_of_long_values(void **state)
{
    size_t cap = 16384, n;
    char *buf = malloc(cap);
    assert_non_null(buf);
    request q;
    for (int members = 0; members < 2; members++) {
        n = (size_t)sprintf(buf, "{\"id\":\"r1\",\"user\":\"u0\",\"op\":\"%s\",\"%s\":[",
                            members ? "group" : "auto", members ? "members" : "prefs");
        for (int i = 0; i <= REQUEST_MAX_LIST; i++) n += (size_t)sprintf(buf + n, "%s\"u%d\"", i ? "," : "", i);
        n += (size_t)sprintf(buf + n, "]}");
        request_parse(&q, buf, n, cap, 0);
        assert_int_equal(q.outcome, REQUEST_INVALID);
        assert_string_equal(q.error, members ? "'members' has 257 entries, at most 256 are allowed"
                                             : "'prefs' has 257 entries, at most 256 are allowed");
        request_clear(&q);
    }
    n = (size_t)sprintf(buf, "{\"id\":\"r1\",\"user\":\"u0\",\"op\":\"auto\",\"filter\":{");
    for (int i = 0; i <= REQUEST_MAX_LIST; i++) n += (size_t)sprintf(buf + n, "%s\"k%d\":1", i ? "," : "", i);
    n += (size_t)sprintf(buf + n, "}}");
    request_parse(&q, buf, n, cap, 0);
    assert_int_equal(q.outcome, REQUEST_INVALID);
    assert_string_equal(q.error, "'filter' has too many keys");
    request_clear(&q);
    request_parse(&q, buf, n, 100, 0);
    assert_int_equal(q.outcome, REQUEST_DEAD);
    char expected[100];
    snprintf(expected, sizeof expected, "request is %zu bytes, more than max_request_bytes (100)", n);
    assert_string_equal(q.error, expected);
    request_clear(&q);
    free(buf);
}

/* request_field_lookup() dispatches on the key's length by hand (it runs
 * for every key on the fast path); every field must still be found by its
 * own name, and nothing else may be taken for one. A field filed under
 * the wrong length would be ignored by both readers. */
static void test_field_lookup(void **state)
{
    for (int f = 0; f < FIELD_COUNT; f++) {
        const char *name = request_field_name((request_field)f);
        assert_non_null(name);
        assert_int_equal(request_field_lookup(name, strlen(name)), f);
        /* a prefix, and the name with one more byte, are other keys */
        assert_int_equal(request_field_lookup(name, strlen(name) - 1), -1);
        char longer[32];
        snprintf(longer, sizeof longer, "%sx", name);
        assert_int_equal(request_field_lookup(longer, strlen(longer)), -1);
    }
    static const char *const others[] = { "", "x", "ID", "Id", "iD", "oq", "usr", "users", "Item",
                                          "rooms", "qtys", "filters", "capacit", "member" };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        assert_int_equal(request_field_lookup(others[i], strlen(others[i])), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_fields_of_valid_requests),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_binary_garbage),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_messages_of_long_values),
        cmocka_unit_test(test_field_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
