/* test_room_holds.c -- holds for rooms end to end (contract 9.4) against a
 * real redis-server: with hold_ms a granted bed has an order and
 * expires_at (in the result and in holders); confirm makes it final;
 * cancel frees it; a hold that runs out while allocd is down is expired
 * at the restart, exactly once, and a late confirm says `expired`;
 * allocctl verify rebuilds all of it from the log. */
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

static void start(fixture *f)
{
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"rh\";"), 0);
}

static void dorm(fixture *f, int hold_ms)
{
    itest_cmd(f->c, "HSET alloc:{h}:meta kind room hold_ms %d", hold_ms);
    itest_cmd(f->c, "HSET alloc:{h}:capacity R1 1 R2 2");
    itest_cmd(f->c, "SADD alloc:batches h");
}

/* Chooses a room and returns the order (malloc'd). */
static char *choose(fixture *f, const char *id, const char *user, const char *room, int hold_ms)
{
    int64_t before = harness_now_ms();
    itest_push(f, "h", "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"%s\"}", id, user, room);
    json_t *r = itest_result(f, "h", id);
    assert_string_equal(itest_jstr(r, "status"), "granted");
    assert_true(itest_jint(r, "expires_at") >= before + hold_ms);
    assert_true(itest_jint(r, "expires_at") <= itest_jint(r, "at") + hold_ms);
    char *o = strdup(itest_jstr(r, "order"));
    assert_true(strlen(o) > 0);
    json_decref(r);
    return o;
}

static long long free_of(fixture *f, const char *room)
{
    return proc_int(f->c, "HGET alloc:{h}:free %s", room);
}

static void verify(fixture *f)
{
    assert_int_equal(itest_sh("%s/allocctl --redis %s verify h >&2", harness_build_dir(), f->redis.url), 0);
}

static void test_confirm_and_cancel(void **state)
{
    fixture *f = *state;
    dorm(f, 60000);
    start(f);
    char *o1 = choose(f, "c1", "s1", "R1", 60000);
    char *h = harness_str(f->c, "HGET alloc:{h}:holders s1");
    assert_non_null(strstr(h, "\"state\":\"held\""));
    assert_non_null(strstr(h, o1));
    free(h);
    itest_push(f, "h", "{\"id\":\"x\",\"user\":\"s2\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    itest_expect(f, "h", "x", "rejected", "unknown_order");     /* not s2's bed */
    itest_push(f, "h", "{\"id\":\"k1\",\"user\":\"s1\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    itest_expect(f, "h", "k1", "done", "R1");
    h = harness_str(f->c, "HGET alloc:{h}:holders s1");
    assert_non_null(strstr(h, "\"state\":\"confirmed\""));
    assert_null(strstr(h, "expires_at"));
    free(h);
    /* a switch keeps the confirmed order */
    itest_push(f, "h", "{\"id\":\"sw\",\"user\":\"s1\",\"op\":\"switch\",\"room\":\"R2\"}");
    itest_expect(f, "h", "sw", "granted", "R2");
    char *o2 = choose(f, "c2", "s2", "R1", 60000);
    itest_push(f, "h", "{\"id\":\"x2\",\"user\":\"s2\",\"op\":\"cancel\",\"order\":\"%s\"}", o2);
    itest_expect(f, "h", "x2", "done", "R1");
    assert_int_equal(free_of(f, "R1"), 1);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{h}:holders s2"), 0);
    itest_push(f, "h", "{\"id\":\"x3\",\"user\":\"s1\",\"op\":\"cancel\",\"order\":\"%s\"}", o1);
    itest_expect(f, "h", "x3", "done", "R2");
    assert_int_equal(free_of(f, "R2"), 2);
    verify(f);
    free(o1);
    free(o2);
}

/* A hold that runs out while allocd is down: expired at the restart (the
 * bed goes to the student waiting for it), once; a late confirm says
 * `expired`, also after another restart. */
static void test_expiry_while_down(void **state)
{
    fixture *f = *state;
    /* the hold outlasts the confirm and the waiting check below on a
     * loaded machine, and runs out while the daemon is down */
    dorm(f, 3000);
    start(f);
    char *o1 = choose(f, "c1", "s1", "R1", 3000);
    char *o2 = choose(f, "c2", "s2", "R2", 3000);
    itest_push(f, "h", "{\"id\":\"k2\",\"user\":\"s2\",\"op\":\"confirm\",\"order\":\"%s\"}", o2);
    itest_expect(f, "h", "k2", "done", "R2");
    itest_push(f, "h", "{\"id\":\"w\",\"user\":\"s3\",\"op\":\"choose\",\"room\":\"R1\",\"wait\":true}");
    json_t *r = itest_result(f, "h", "w");
    assert_string_equal(itest_jstr(r, "status"), "waiting");
    json_decref(r);
    harness_allocd_kill(&f->allocd);
    harness_sleep_ms(3300);
    assert_int_equal(free_of(f, "R1"), 0);                   /* nobody expired it yet */
    start(f);
    int64_t t0 = harness_now_ms();
    for (;;) {
        r = itest_result(f, "h", "w");
        int done = strcmp(itest_jstr(r, "status"), "waiting") != 0;
        if (done) break;
        json_decref(r);
        assert_true(harness_now_ms() - t0 < 5000);
        harness_sleep_ms(10);
    }
    assert_string_equal(itest_jstr(r, "status"), "granted");   /* s3 got the bed */
    json_decref(r);
    itest_push(f, "h", "{\"id\":\"k1\",\"user\":\"s1\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    itest_expect(f, "h", "k1", "rejected", "expired");
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    start(f);
    itest_push(f, "h", "{\"id\":\"k3\",\"user\":\"s1\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    itest_expect(f, "h", "k3", "rejected", "expired");          /* still known */
    assert_int_equal(itest_log_count(f->c, "h", "expire"), 1);
    assert_int_equal(free_of(f, "R2"), 1);                   /* s2's confirmed bed stays */
    verify(f);
    free(o1);
    free(o2);
}

/* A group formed by consent (9.2, the default) names no members in its
 * `group` request: with hold_ms every member still gets a held bed with an
 * order of their own, so the chunk must draw ids for the group's size. */
static void test_formed_group_holds(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "h", "kind room hold_ms 60000 max_group 3", "R1 1 R3 3", NULL);
    start(f);
    itest_push(f, "h", "{\"id\":\"i1\",\"user\":\"g1\",\"op\":\"invite\",\"to\":[\"g2\",\"g3\"]}");
    itest_expect(f, "h", "i1", "done", NULL);
    itest_push(f, "h", "{\"id\":\"a2\",\"user\":\"g2\",\"op\":\"accept\",\"from\":\"g1\"}");
    itest_push(f, "h", "{\"id\":\"a3\",\"user\":\"g3\",\"op\":\"accept\",\"from\":\"g1\"}");
    itest_push(f, "h", "{\"id\":\"gr\",\"user\":\"g2\",\"op\":\"group\",\"prefs\":[\"R3\"]}");
    itest_expect(f, "h", "gr", "granted", "R3");
    char *orders[3];
    for (int i = 0; i < 3; i++) {
        char *h = harness_str(f->c, "HGET alloc:{h}:holders g%d", i + 1);
        assert_non_null(strstr(h, "\"state\":\"held\""));
        const char *o = strstr(h, "\"order\":\"");
        assert_non_null(o);
        orders[i] = strndup(o + 9, strcspn(o + 9, "\""));
        assert_true(strlen(orders[i]) > 0);
        for (int j = 0; j < i; j++) assert_string_not_equal(orders[i], orders[j]);
        free(h);
    }
    assert_int_equal(free_of(f, "R3"), 0);
    itest_push(f, "h", "{\"id\":\"k3\",\"user\":\"g3\",\"op\":\"confirm\",\"order\":\"%s\"}", orders[2]);
    itest_expect(f, "h", "k3", "done", "R3");
    for (int i = 0; i < 3; i++) free(orders[i]);
    verify(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_confirm_and_cancel),
        ITEST_CASE(test_expiry_while_down),
        ITEST_CASE(test_formed_group_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
