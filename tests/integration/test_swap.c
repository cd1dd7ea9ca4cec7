/* test_swap.c -- swaps of beds (contract 9.3) end to end: the real allocd
 * against a real redis-server.
 *
 * Both orders; an offer overtaken by a release and by a switch; the batch
 * closed with an offer open; and kill -9 between the two halves: the offer
 * is in the offerer's holders entry, the next daemon loads it, and the
 * answer exchanges the beds and replaces the `waiting` result once.
 */
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

#define CONF "instance = \"swp\"; "

static void dorm(fixture *f, const char *b)
{
    itest_batch(f->c, b, "kind room", "R1 2 R2 2 R3 2", NULL);
}

static void take(fixture *f, const char *b, const char *user, const char *room)
{
    char id[32];
    snprintf(id, sizeof id, "c-%s", user);
    itest_push(f, b, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"%s\"}", id, user, room);
    itest_expect(f, b, id, "granted", room);
}

static void swap(fixture *f, const char *b, const char *id, const char *user, const char *with)
{
    itest_push(f, b, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"swap\",\"with\":\"%s\"}", id, user, with);
}

static void expect_room(fixture *f, const char *b, const char *user, const char *room)
{
    char *h = harness_str(f->c, "HGET alloc:{%s}:holders %s", b, user);
    assert_non_null(h);
    char want[64];
    snprintf(want, sizeof want, "\"item\":\"%s\"", room);
    if (!strstr(h, want)) fail_msg("holders[%s] = %s, expected %s", user, h, room);
    free(h);
}

/* P:{B}:stats with `open` swap offers and nothing on the waitlist:
 * `waiting` is the waitlist's length (contract 9.5), and an open offer is
 * no waitlist place: it is in `swap_offers`; processed counts both. */
static void expect_offers(fixture *f, const char *b, long long open)
{
    long long p = proc_int(f->c, "HGET alloc:{%s}:stats processed", b),
              w = proc_int(f->c, "HGET alloc:{%s}:stats waiting", b),
              so = proc_int(f->c, "HGET alloc:{%s}:stats swap_offers", b),
              sum = proc_int(f->c, "HGET alloc:{%s}:stats granted", b) +
                    proc_int(f->c, "HGET alloc:{%s}:stats done", b) +
                    proc_int(f->c, "HGET alloc:{%s}:stats rejected", b) +
                    proc_int(f->c, "HGET alloc:{%s}:stats invalid", b) + w + so;
    assert_int_equal(w, 0);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{%s}:waitlist", b), 0);
    assert_int_equal(so, open);
    assert_int_equal(p, sum);
}

/* The result of id once it is no longer `waiting` (it is replaced once). */
static json_t *final_result(fixture *f, const char *b, const char *id)
{
    for (int i = 0; i < 500; i++) {
        json_t *r = itest_result(f, b, id);
        if (strcmp(itest_jstr(r, "status"), "waiting")) return r;
        json_decref(r);
        harness_sleep_ms(10);
    }
    fail_msg("%s stays waiting", id);
    return NULL;
}

static void expect_final(fixture *f, const char *b, const char *id, const char *status, const char *detail)
{
    json_t *r = final_result(f, b, id);
    assert_string_equal(itest_jstr(r, "status"), status);
    assert_string_equal(itest_jstr(r, strcmp(status, "granted") ? "reason" : "item"), detail);
    json_decref(r);
}

static void test_both_orders_and_overtaken(void **state)
{
    fixture *f = *state;
    dorm(f, "s1");
    itest_start(f, CONF);
    take(f, "s1", "ann", "R1");
    take(f, "s1", "bob", "R2");
    take(f, "s1", "cat", "R3");
    /* ann first */
    swap(f, "s1", "w1", "ann", "bob");
    itest_expect(f, "s1", "w1", "waiting", NULL);
    expect_offers(f, "s1", 1);
    char *h = harness_str(f->c, "HGET alloc:{s1}:holders ann");
    assert_non_null(strstr(h, "\"swap_offers\":[{\"req\":\"w1\",\"with\":\"bob\""));
    free(h);
    swap(f, "s1", "w2", "bob", "ann");
    itest_expect(f, "s1", "w2", "granted", "R1");
    expect_final(f, "s1", "w1", "granted", "R2");
    expect_room(f, "s1", "ann", "R2");
    expect_room(f, "s1", "bob", "R1");
    expect_offers(f, "s1", 0);
    h = harness_str(f->c, "HGET alloc:{s1}:holders ann");
    assert_null(strstr(h, "swap_offers"));
    free(h);
    /* the other order, in one chunk */
    swap(f, "s1", "w3", "cat", "ann");
    swap(f, "s1", "w4", "ann", "cat");
    itest_expect(f, "s1", "w4", "granted", "R3");
    expect_final(f, "s1", "w3", "granted", "R2");
    /* overtaken by the offerer's release */
    swap(f, "s1", "w5", "bob", "cat");
    itest_expect(f, "s1", "w5", "waiting", NULL);
    itest_push(f, "s1", "{\"id\":\"r1\",\"user\":\"bob\",\"op\":\"release\"}");
    expect_final(f, "s1", "w5", "rejected", "not_holding");
    /* overtaken by the other's switch */
    swap(f, "s1", "w6", "ann", "cat");
    itest_expect(f, "s1", "w6", "waiting", NULL);
    itest_push(f, "s1", "{\"id\":\"s1\",\"user\":\"cat\",\"op\":\"switch\",\"room\":\"R1\"}");
    itest_expect(f, "s1", "s1", "granted", "R1");
    expect_final(f, "s1", "w6", "rejected", "not_holding");
    /* counted once each: 3 chooses, 4 swap grants, 1 switch, 2 rejected, 1 release */
    assert_int_equal(proc_int(f->c, "HGET alloc:{s1}:stats granted"), 8);
    assert_int_equal(proc_int(f->c, "HGET alloc:{s1}:stats processed"), 11);
    expect_offers(f, "s1", 0);
}

static void test_close_with_open_offer(void **state)
{
    fixture *f = *state;
    dorm(f, "s2");
    itest_start(f, CONF);
    take(f, "s2", "ann", "R1");
    take(f, "s2", "bob", "R2");
    swap(f, "s2", "w1", "ann", "bob");
    itest_expect(f, "s2", "w1", "waiting", NULL);
    expect_offers(f, "s2", 1);
    itest_cmd(f->c, "RPUSH alloc:{s2}:ctl {\"id\":\"k1\",\"op\":\"close\"}");
    expect_final(f, "s2", "w1", "rejected", "closed");
    expect_offers(f, "s2", 0);
    swap(f, "s2", "w2", "bob", "ann");
    itest_expect(f, "s2", "w2", "rejected", "closed");
    expect_room(f, "s2", "ann", "R1");
}

static void test_kill9_between_halves(void **state)
{
    fixture *f = *state;
    dorm(f, "s3");
    itest_start(f, CONF);
    take(f, "s3", "ann", "R1");
    take(f, "s3", "bob", "R2");
    swap(f, "s3", "w1", "ann", "bob");
    itest_expect(f, "s3", "w1", "waiting", NULL);
    /* an open offer is in stats.swap_offers, not on the waitlist nor in
     * stats.waiting (9.5): verify agrees */
    expect_offers(f, "s3", 1);
    char out[600];
    snprintf(out, sizeof out, "%s/verify.out", f->redis.dir);
    assert_int_equal(itest_sh("%s/allocctl --redis %s verify s3 > %s 2>&1", harness_build_dir(), f->redis.url, out), 0);
    /* and status shows it as a swap offer, not as waiting */
    assert_int_equal(itest_sh("%s/allocctl --redis %s status s3 > %s 2>&1 && grep -q '^waiting  *0$' %s && "
                              "grep -q '^swap_offers  *1$' %s", harness_build_dir(), f->redis.url, out, out, out), 0);
    harness_allocd_kill(&f->allocd);
    swap(f, "s3", "w2", "bob", "ann");          /* queued while no daemon runs */
    itest_start(f, CONF);
    itest_expect(f, "s3", "w2", "granted", "R1");
    expect_final(f, "s3", "w1", "granted", "R2");
    expect_room(f, "s3", "ann", "R2");
    expect_room(f, "s3", "bob", "R1");
    assert_int_equal(proc_int(f->c, "HGET alloc:{s3}:free R1"), 1);
    assert_int_equal(proc_int(f->c, "HGET alloc:{s3}:free R2"), 1);
    expect_offers(f, "s3", 0);
    /* the log replays to the same holders */
    int rc = itest_sh("%s/allocctl --redis %s verify s3 > %s 2>&1", harness_build_dir(), f->redis.url, out);
    assert_int_equal(rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_both_orders_and_overtaken),
        ITEST_CASE(test_close_with_open_offer),
        ITEST_CASE(test_kill9_between_halves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
