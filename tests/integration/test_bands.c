/* test_bands.c -- priority bands in the opening draw (contract 11.3) end
 * to end against a real redis-server and allocd: with early=shuffle and
 * draw_by=points, everyone with more points is served before everyone
 * with fewer, missing or unreadable profiles counting as 0; each drawn
 * result carries `draw` and `points`; the points are recorded in the pool
 * when the draw is made, so a profile edited afterwards changes nothing and
 * `allocctl lottery verify` replays the order from the pool, the seed and
 * the recorded points -- and finds a result whose points were changed; an
 * early swap that waits as an offer through the opening keeps its draw
 * into the result that ends the offer. */
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

#define USERS 12

/* u1-u4: 30 points, u5-u8: 20, u9: 0, u10: no profile, u11: one that is
 * not a profile, u12: points that are no integer (0). */
static long long points_of(int u)
{
    return u <= 4 ? 30 : u <= 8 ? 20 : 0;
}

/* A room batch b drawn by points at its opening in_ms from now: when. */
static long long banded_batch(fixture *f, const char *b, long long in_ms, const char *items)
{
    long long opens = harness_now_ms() + in_ms;
    char meta[160];
    snprintf(meta, sizeof meta, "kind room early shuffle draw_by points opens_at %lld", opens);
    itest_batch(f->c, b, meta, items, NULL);
    return opens;
}

/* allocctl lottery verify B says MATCH and exits 0. */
static void lottery_matches(fixture *f, const char *b)
{
    char *out;
    int rc = itest_ctl(f, &out, "lottery verify %s", b);
    if (rc) fprintf(stderr, "%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "MATCH"));
    free(out);
}

static void test_bands_ordered_and_replayed(void **state)
{
    fixture *f = *state;
    long long opens = banded_batch(f, "b", 5000, "R1 12");
    for (int u = 1; u <= 9; u++)
        itest_cmd(f->c, "HSET alloc:{b}:profiles u%d {\"year\":4,\"points\":%lld}", u, points_of(u));
    itest_cmd(f->c, "HSET alloc:{b}:profiles u11 {\"points\":1.5} u12 {\"points\":\"99\"}");
    itest_start(f, NULL);
    for (int u = USERS; u >= 1; u--)   /* the lowest bands ask first: it must not help them */
        itest_push(f, "b", "{\"id\":\"r%d\",\"user\":\"u%d\",\"op\":\"choose\",\"room\":\"R1\"}", u, u);
    while (harness_now_ms() < opens + 50) harness_sleep_ms(20);
    long long rank[USERS + 1], draw[USERS + 1];
    for (int u = 1; u <= USERS; u++) {
        char id[16];
        snprintf(id, sizeof id, "r%d", u);
        json_t *r = itest_result(f, "b", id);
        assert_string_equal(itest_jstr(r, "status"), "granted");
        rank[u] = itest_jint(r, "rank");
        draw[u] = itest_jint(r, "draw");
        assert_int_equal(itest_jint(r, "points"), points_of(u));
        json_decref(r);
    }
    /* bands: 1-4 drawn first (in a random order among them), then 5-8, then the rest */
    for (int a = 1; a <= USERS; a++)
        for (int b = 1; b <= USERS; b++)
            if (points_of(a) > points_of(b)) {
                assert_true(draw[a] < draw[b]);
                assert_true(rank[a] < rank[b]);
            }
    /* recorded with the draw: an edit afterwards changes nothing */
    redisReply *early = redisCommand(f->c, "LRANGE alloc:{b}:early 0 -1");
    assert_non_null(early);
    int recorded = 0;
    for (size_t i = 0; i < early->elements; i++) recorded += !strncmp(early->element[i]->str, "= ", 2);
    freeReplyObject(early);
    assert_int_equal(recorded, USERS);
    itest_cmd(f->c, "HSET alloc:{b}:profiles u10 {\"points\":100}");
    lottery_matches(f, "b");
    char *out;
    int rc;
    /* a result whose points were changed afterwards is found */
    char *r1 = harness_str(f->c, "HGET alloc:{b}:results r1");
    char *p = strstr(r1, "\"points\":30");
    assert_non_null(p);
    memcpy(p, "\"points\":31", 11);
    itest_cmd(f->c, "HSET alloc:{b}:results r1 %s", r1);
    free(r1);
    rc = itest_ctl(f, &out, "lottery verify b");
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "r1: result says points 31, the draw recorded 30"));
    free(out);
}

/* s1 and s2 hold beds by staff before the opening; s1's early swap is
 * drawn and waits as an offer; s2 answers after the opening. The result
 * that replaces s1's `waiting` carries s1's draw and points, and the
 * lottery replays, though three requests drawn after s1 were granted
 * before it. */
static void test_early_swap_keeps_its_draw(void **state)
{
    fixture *f = *state;
    long long opens = banded_batch(f, "s", 5000, "R1 1 R2 1 R3 3");
    itest_cmd(f->c, "HSET alloc:{s}:profiles s1 {\"points\":10} s2 {\"points\":20}");
    itest_start(f, NULL);
    itest_cmd(f->c, "RPUSH alloc:{s}:ctl {\"id\":\"c1\",\"op\":\"assign\",\"user\":\"s1\",\"item\":\"R1\"} "
              "{\"id\":\"c2\",\"op\":\"assign\",\"user\":\"s2\",\"item\":\"R2\"}");
    json_t *c2 = itest_result(f, "s", "c2");
    assert_string_equal(itest_jstr(c2, "status"), "granted");
    json_decref(c2);
    itest_push(f, "s", "{\"id\":\"w1\",\"user\":\"s1\",\"op\":\"swap\",\"with\":\"s2\"}");
    /* drawn after s1 (no profile: 0 points) and granted at their turns,
     * before s1's swap is: its later rank is no break of the draw's order */
    for (int u = 1; u <= 3; u++)
        itest_push(f, "s", "{\"id\":\"k%d\",\"user\":\"c%d\",\"op\":\"choose\",\"room\":\"R3\"}", u, u);
    while (harness_now_ms() < opens + 50) harness_sleep_ms(20);
    json_t *w1 = itest_result(f, "s", "w1");
    assert_string_equal(itest_jstr(w1, "status"), "waiting");
    long long draw = itest_jint(w1, "draw");
    assert_true(draw >= 1);
    json_decref(w1);
    char *holder = harness_str(f->c, "HGET alloc:{s}:holders s1");
    assert_non_null(strstr(holder, "\"draw\":"));   /* the offer keeps it across a restart */
    free(holder);
    itest_push(f, "s", "{\"id\":\"w2\",\"user\":\"s2\",\"op\":\"swap\",\"with\":\"s1\"}");
    json_t *w2 = itest_result(f, "s", "w2");
    assert_string_equal(itest_jstr(w2, "status"), "granted");
    json_decref(w2);
    for (int tries = 0; tries < 200; tries++) {   /* w1's waiting is replaced in w2's transaction */
        w1 = itest_result(f, "s", "w1");
        if (strcmp(itest_jstr(w1, "status"), "waiting")) break;
        json_decref(w1);
        w1 = NULL;
        harness_sleep_ms(10);
    }
    assert_non_null(w1);
    assert_string_equal(itest_jstr(w1, "status"), "granted");
    assert_int_equal(itest_jint(w1, "draw"), draw);
    assert_int_equal(itest_jint(w1, "points"), 10);
    json_decref(w1);
    lottery_matches(f, "s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_bands_ordered_and_replayed),
        ITEST_CASE(test_early_swap_keeps_its_draw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
