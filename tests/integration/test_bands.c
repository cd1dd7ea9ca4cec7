/* test_bands.c -- priority bands in the opening draw (contract 11.3) end
 * to end against a real redis-server and allocd: with early=shuffle and
 * draw_by=points, everyone with more points is served before everyone
 * with fewer, missing or unreadable profiles counting as 0; each drawn
 * result carries `draw` and `points`; the points are recorded in the pool
 * when the draw is made, so a profile edited afterwards changes nothing and
 * `allocctl lottery verify` replays the order from the pool, the seed and
 * the recorded points -- and finds a result whose points were changed. */
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

static void test_bands_ordered_and_replayed(void **state)
{
    fixture *f = *state;
    long long opens = harness_now_ms() + 2500;
    char meta[160];
    snprintf(meta, sizeof meta, "kind room early shuffle draw_by points opens_at %lld", opens);
    itest_batch(f->c, "b", meta, "R1 12", NULL);
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
    char *out;
    int rc = itest_ctl(f, &out, "lottery verify b");
    if (rc) fprintf(stderr, "%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "MATCH"));
    free(out);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_bands_ordered_and_replayed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
