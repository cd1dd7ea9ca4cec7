/* test_profiles.c -- profiles and eligibility (contract 11.2) as allocctl
 * handles them, against a real redis-server and allocd: `profiles load`
 * writes what the daemon's own reader accepts and refuses a bad file with
 * FILE:LINE before writing anything; `profiles show` says what a profile
 * counts as; `batch create --draw-by/--group-fill` write the meta; and
 * after the operator edits attrs and profiles under the holders (which an
 * edit never moves), `verify` prints every holder who breaks an only_X or
 * same_X rule and exits 1, and `status --user --room` names the rule and
 * the profile value. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "itest.h"

typedef itest fixture;

static void write_file(fixture *f, const char *name, const char *text, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", f->redis.dir, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* Runs allocctl (args: a shell fragment) and checks its exit code and
 * that its output holds needle. */
#define CTL_EXPECT(f, want_rc, needle, ...) do { \
        char *out_; \
        int rc_ = itest_ctl(f, &out_, __VA_ARGS__); \
        expect_out(rc_, want_rc, out_, needle); \
    } while (0)

static void expect_out(int rc, int want_rc, char *out, const char *needle)
{
    if (rc != want_rc || !strstr(out, needle)) fprintf(stderr, "exit %d, output:\n%s", rc, out);
    assert_int_equal(rc, want_rc);
    assert_non_null(strstr(out, needle));
    free(out);
}

static void test_load_and_show(void **state)
{
    fixture *f = *state;
    char csv[600];
    write_file(f, "p.csv", "user,gender,year,llc,points\ns1,F,4,stem,37\ns2,M,\"3\",,5\n", csv, sizeof csv);
    CTL_EXPECT(f, 0, "2 profiles written", "profiles load d --from %s", csv);
    char *p = harness_str(f->c, "HGET alloc:{d}:profiles s1");
    assert_string_equal(p, "{\"gender\":\"F\",\"year\":4,\"llc\":\"stem\",\"points\":37}");
    free(p);
    p = harness_str(f->c, "HGET alloc:{d}:profiles s2");   /* quoted: a string; empty: left out */
    assert_string_equal(p, "{\"gender\":\"M\",\"year\":\"3\",\"points\":5}");
    free(p);
    CTL_EXPECT(f, 0, "year = \"3\"", "profiles show d --user s2");
    CTL_EXPECT(f, 1, "no profile", "profiles show d --user nobody");
    itest_cmd(f->c, "HSET alloc:{d}:profiles s9 {\"year\":4.5}");
    CTL_EXPECT(f, 1, "counts as no profile", "profiles show d --user s9");
    /* a second load merges; --replace starts over */
    write_file(f, "q.csv", "user,gender\ns3,F\n", csv, sizeof csv);
    CTL_EXPECT(f, 0, "1 profiles written", "profiles load d --from %s", csv);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{d}:profiles"), 4);
    CTL_EXPECT(f, 0, "old ones deleted", "profiles load d --from %s --replace", csv);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{d}:profiles"), 1);
}

static void test_bad_files_write_nothing(void **state)
{
    fixture *f = *state;
    char csv[600];
    static const struct { const char *text, *msg; } bad[] = {
        { "id,gender\ns1,F\n", "p.csv:1: the header line must be user" },
        { "user,gender\ns1,F\ns1,M\n", "p.csv:3: user 's1' appears twice" },
        { "user,points\ns1,4.5\n", "p.csv:2: points '4.5' is not an integer" },
        { "user,gender\ns1,F,x\n", "p.csv:2: expected as many fields" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(f, "p.csv", bad[i].text, csv, sizeof csv);
        CTL_EXPECT(f, 4, bad[i].msg, "profiles load d --from %s", csv);
    }
    assert_int_equal(proc_int(f->c, "EXISTS alloc:{d}:profiles"), 0);
}

static void test_batch_create_flags(void **state)
{
    fixture *f = *state;
    char csv[600];
    write_file(f, "rooms.csv", "id,capacity,only_gender\nR1,2,F\nR2,1,\n", csv, sizeof csv);
    CTL_EXPECT(f, 0, "draw_by=points group_fill=exact",
               "batch create d --kind room --from %s --early shuffle --draw-by points --group-fill exact", csv);
    char *v = harness_str(f->c, "HGET alloc:{d}:meta draw_by");
    assert_string_equal(v, "points");
    free(v);
    v = harness_str(f->c, "HGET alloc:{d}:attrs R1");
    assert_string_equal(v, "{\"only_gender\":\"F\"}");
    free(v);
    CTL_EXPECT(f, 2, "for a room batch", "batch create s --kind stock --from %s --group-fill exact", csv);
    CTL_EXPECT(f, 2, "--draw-by must be none or points", "batch create s --kind room --from %s --draw-by best", csv);
}

/* Holders the daemon placed before any rule existed; then the office
 * restricts the rooms and edits profiles. Nobody moves; verify says who
 * now breaks which rule. */
static void test_verify_audits_holders(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "d", "kind room", "R1 2 R2 3 R3 1", NULL);
    itest_start(f, NULL);
    const char *moves[][3] = { { "a", "s1", "R1" }, { "b", "s2", "R1" }, { "c", "s1b", "R2" },
                               { "e", "s2b", "R2" }, { "g", "s3", "R3" } };
    for (size_t i = 0; i < 5; i++) {
        itest_push(f, "d", "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"%s\"}", moves[i][0],
                   moves[i][1], moves[i][2]);
        itest_expect(f, "d", moves[i][0], "granted", moves[i][2]);
    }
    char *out;
    CTL_EXPECT(f, 0, "no item has only_X or same_X rules", "verify d");
    itest_cmd(f->c, "HSET alloc:{d}:attrs R1 {\"only_gender\":\"F\"} R2 {\"same_gender\":true} "
                    "R3 {\"only_year\":[3,4]}");
    itest_cmd(f->c, "HSET alloc:{d}:profiles s1 {\"gender\":\"F\"} s2 {\"gender\":\"M\"} "
                    "s1b {\"gender\":\"F\"} s2b {\"gender\":\"M\"} s3 {\"year\":2}");
    int rc = itest_ctl(f, &out, "verify d");
    if (rc != 1) fprintf(stderr, "%s", out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "BREAK R1 s2: only_gender is \"F\", s2's gender is \"M\""));
    assert_non_null(strstr(out, "BREAK R2 s2b: same_gender: s2b's gender is \"M\", holder s1b's is \"F\""));
    assert_non_null(strstr(out, "BREAK R3 s3: only_year is [3,4], s3's year is 2"));
    assert_null(strstr(out, "BREAK R1 s1:"));
    assert_non_null(strstr(out, "FAIL: eligibility: 3 of 5 holders"));
    free(out);
    /* the office fixes the profiles: clean again */
    itest_cmd(f->c, "HSET alloc:{d}:profiles s2 {\"gender\":\"F\"} s2b {\"gender\":\"F\"} s3 {\"year\":3}");
    CTL_EXPECT(f, 0, "OK: eligibility: the 5 holders", "verify d");
    /* why a user may not have a room */
    itest_cmd(f->c, "HSET alloc:{d}:profiles s7 {\"gender\":\"M\",\"year\":4}");
    CTL_EXPECT(f, 1, "s7 may not be given R1: only_gender is \"F\", s7's gender is \"M\"",
               "status d --user s7 --room R1");
    CTL_EXPECT(f, 1, "same_gender: s7's gender is \"M\", holder s1b's is \"F\"", "status d --user s7 --room R2");
    CTL_EXPECT(f, 0, "s7 may be given R3", "status d --user s7 --room R3");
    CTL_EXPECT(f, 1, "s7 may be given 1 of the 3 items with rules", "status d --user s7");  /* holds nothing: 1 */
    CTL_EXPECT(f, 1, "nobody has no profile", "status d --user nobody --room R1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_load_and_show),
        ITEST_CASE(test_bad_files_write_nothing),
        ITEST_CASE(test_batch_create_flags),
        ITEST_CASE(test_verify_audits_holders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
