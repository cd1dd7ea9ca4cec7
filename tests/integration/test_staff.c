/* test_staff.c -- staff placements (contract 11.5) end to end against a
 * real redis-server and allocd: `assign` gives a bed whatever the batch's
 * state (before its opening, paused, closed), the capacity and one bed per
 * student still hold, eligibility only with check; the result, the holder
 * and the log's grant say by=staff (in both log formats); `unassign` takes
 * the bed back and serves the waitlist; a placement made without check
 * that breaks a rule is a staff exception in `verify`, not a failure; and
 * `allocctl assign`/`unassign` push the commands and wait for them. */
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

static void ctl(fixture *f, const char *b, const char *json)
{
    itest_cmd(f->c, "RPUSH alloc:{%s}:ctl %s", b, json);
}

static void expect_by_staff(fixture *f, const char *b, const char *id)
{
    json_t *r = itest_result(f, b, id);
    assert_string_equal(itest_jstr(r, "by"), "staff");
    json_decref(r);
}

/* The whole log as one string (both formats hold every field's text). */
static char *log_text(fixture *f, const char *b)
{
    redisReply *x = redisCommand(f->c, "XRANGE alloc:{%s}:log - +", b);
    assert_non_null(x);
    size_t cap = 1 << 16, len = 0;
    char *s = calloc(1, cap);
    for (size_t i = 0; i < x->elements; i++) {
        const redisReply *fl = x->element[i]->element[1];
        for (size_t j = 0; j < fl->elements; j++) {
            len += (size_t)snprintf(s + len, cap - len, "%s%s", fl->element[j]->str, j % 2 ? "\n" : "=");
            assert_true(len < cap);
        }
    }
    freeReplyObject(x);
    return s;
}

static void run_round(fixture *f, const char *conf, const char *by_text)
{
    long long later = harness_now_ms() + 3600000;
    char meta[100];
    snprintf(meta, sizeof meta, "kind room opens_at %lld", later);
    itest_batch(f->c, "d", meta, "R1 1 R2 2 A1 1", "R1 {\"only_gender\":\"F\"} A1 {\"only_access\":\"yes\"}");
    itest_cmd(f->c, "HSET alloc:{d}:profiles f1 {\"gender\":\"F\"} m1 {\"gender\":\"M\"} a1 {\"access\":\"yes\"}");
    itest_start(f, conf);
    /* before the opening: students wait, staff place */
    itest_push(f, "d", "{\"id\":\"r1\",\"user\":\"f1\",\"op\":\"choose\",\"room\":\"R2\"}");
    itest_expect(f, "d", "r1", "rejected", "not_open");
    ctl(f, "d", "{\"id\":\"c1\",\"op\":\"assign\",\"user\":\"a1\",\"item\":\"A1\"}");
    itest_expect(f, "d", "c1", "granted", "A1");
    expect_by_staff(f, "d", "c1");
    /* no check: staff may place anyone; with check, the rules hold */
    ctl(f, "d", "{\"id\":\"c2\",\"op\":\"assign\",\"user\":\"m1\",\"item\":\"R1\",\"check\":true}");
    itest_expect(f, "d", "c2", "rejected", "not_eligible");
    ctl(f, "d", "{\"id\":\"c3\",\"op\":\"assign\",\"user\":\"m1\",\"item\":\"R1\"}");
    itest_expect(f, "d", "c3", "granted", "R1");
    /* capacity and one bed per student */
    ctl(f, "d", "{\"id\":\"c4\",\"op\":\"assign\",\"user\":\"f1\",\"item\":\"R1\"}");
    itest_expect(f, "d", "c4", "rejected", "room_full");
    ctl(f, "d", "{\"id\":\"c5\",\"op\":\"assign\",\"user\":\"m1\",\"item\":\"R2\"}");
    itest_expect(f, "d", "c5", "rejected", "already_holding");
    /* paused, then closed: still served */
    ctl(f, "d", "{\"id\":\"p\",\"op\":\"pause\"}");
    ctl(f, "d", "{\"id\":\"c6\",\"op\":\"assign\",\"user\":\"f1\",\"item\":\"R2\"}");
    itest_expect(f, "d", "c6", "granted", "R2");
    ctl(f, "d", "{\"id\":\"x\",\"op\":\"close\"}");
    ctl(f, "d", "{\"id\":\"c7\",\"op\":\"unassign\",\"user\":\"f1\"}");
    itest_expect(f, "d", "c7", "done", "R2");
    ctl(f, "d", "{\"id\":\"c8\",\"op\":\"unassign\",\"user\":\"f1\"}");
    itest_expect(f, "d", "c8", "rejected", "not_holding");
    char *h = harness_str(f->c, "HGET alloc:{d}:holders m1");
    assert_non_null(h);
    assert_non_null(strstr(h, "\"req\":\"c3\""));
    free(h);
    assert_int_equal(proc_int(f->c, "HGET alloc:{d}:stats granted"), 3);
    /* staff placements are no queue requests: in granted and staff_granted,
     * not in processed, so dequeued = processed + dead + duplicates holds
     * (the simulator found processed counting them) */
    assert_int_equal(proc_int(f->c, "HGET alloc:{d}:stats staff_granted"), 3);
    assert_int_equal(proc_int(f->c, "HGET alloc:{d}:stats processed"), 1);
    assert_int_equal(proc_int(f->c, "HGET alloc:{d}:stats dequeued"), 1);
    char *log = log_text(f, "d");
    assert_non_null(strstr(log, by_text));
    free(log);
    /* m1 breaks R1's rule, placed by staff without check: an exception */
    char *out;
    int rc = itest_ctl(f, &out, "verify d");
    if (rc != 0) fprintf(stderr, "%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "STAFF R1 m1: only_gender is \"F\", m1's gender is \"M\" (placed by staff without check)"));
    free(out);
}

static void test_staff_event_log(void **state)
{
    run_round(*state, "log_format = \"event\";", "by=staff");
}

static void test_staff_chunk_log(void **state)
{
    run_round(*state, "log_format = \"chunk\";", "{\"by\":\"staff\"}");
}

/* unassign returns a bed: the waitlist is served in the same step */
static void test_unassign_serves_the_waitlist(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "w", "kind room", "R1 1", NULL);
    itest_start(f, NULL);
    ctl(f, "w", "{\"id\":\"c1\",\"op\":\"assign\",\"user\":\"ra\",\"item\":\"R1\"}");
    itest_expect(f, "w", "c1", "granted", "R1");
    itest_push(f, "w", "{\"id\":\"r1\",\"user\":\"s1\",\"op\":\"choose\",\"room\":\"R1\",\"wait\":true}");
    itest_expect(f, "w", "r1", "waiting", NULL);
    ctl(f, "w", "{\"id\":\"c2\",\"op\":\"unassign\",\"user\":\"ra\"}");
    itest_expect(f, "w", "c2", "done", NULL);
    harness_sleep_ms(300);
    itest_expect(f, "w", "r1", "granted", "R1");
}

static void test_allocctl_assign_and_unassign(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "s", "kind stock per_user 2", "sku 3", NULL);
    itest_start(f, NULL);
    char *out;
    int rc = itest_ctl(f, &out, "assign s --user u1 --item sku --qty 2 --id c-1");
    if (rc) fprintf(stderr, "%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "staff"));            /* by: staff */
    free(out);
    rc = itest_ctl(f, &out, "assign s --user u1 --item sku --id c-2");     /* per_user 2 */
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "limit"));
    free(out);
    rc = itest_ctl(f, &out, "unassign s --user u1 --id c-3");
    assert_int_equal(rc, 0);
    free(out);
    rc = itest_ctl(f, &out, "assign s --user u1 --item sku --qty 0");      /* refused before the push */
    assert_int_equal(rc, 2);
    free(out);
    assert_int_equal(proc_int(f->c, "HGET alloc:{s}:free sku"), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_staff_event_log),
        ITEST_CASE(test_staff_chunk_log),
        ITEST_CASE(test_unassign_serves_the_waitlist),
        ITEST_CASE(test_allocctl_assign_and_unassign),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
