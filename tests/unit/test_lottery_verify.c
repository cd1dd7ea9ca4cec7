/* test_lottery_verify.c -- worker/lottery_verify.c, the check behind
 * `allocctl lottery verify` and the dashboard's lottery view: results made
 * from the replayed draw itself match; a tampered draw, a result for a
 * request the replay has not served yet, a grant out of the draw's order
 * and a points value the pool did not record are each a MISMATCH with the
 * sentence the dashboard shows. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "worker/lottery_verify.h"

#define SEED "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define N 6

typedef struct seen {
    size_t n;
    char first[512];
} seen;

static void on_diff(void *ud, const char *msg)
{
    seen *s = ud;
    if (!s->n++) snprintf(s->first, sizeof s->first, "%s", msg);
}

/* N requests of N users, drawn with SEED. */
static void pool_of(lottery_pool *p)
{
    lottery_pool_init(p, 3);
    for (int i = 0; i < N; i++) {
        char e[160];
        snprintf(e, sizeof e, "%d {\"id\":\"r%d\",\"user\":\"u%d\",\"op\":\"choose\",\"room\":\"R1\"}", i + 1, i, i);
        assert_int_equal(lottery_pool_load_entry(p, e, strlen(e)), 0);
    }
    snprintf(p->seed, sizeof p->seed, "%s", SEED);
    assert_int_equal(lottery_pool_draw(p, NULL), 0);
}

/* The results allocd writes for the first `served` of the order: each
 * granted, ranks rising, with its draw position. */
static void results_of(const lottery_pool *p, size_t served, lottery_result *res)
{
    memset(res, 0, N * sizeof *res);
    for (size_t k = 0; k < served; k++) {
        uint32_t i = p->serve[k];
        char doc[200];
        snprintf(doc, sizeof doc, "{\"id\":\"%s\",\"status\":\"granted\",\"seq\":%lld,\"draw\":%u,\"rank\":%zu}",
                 p->reqs[i].id, (long long)p->reqs[i].seq, p->draw_pos[i], k + 1);
        lottery_result_parse(&res[k], doc, strlen(doc));
    }
}

static void test_match(void **state)
{
    (void)state;
    lottery_pool p;
    lottery_result res[N];
    pool_of(&p);
    seen s = { 0 };
    results_of(&p, N, res);
    assert_int_equal(lottery_verify_results(&p, res, N, on_diff, &s), 0);
    results_of(&p, 4, res);                          /* serving: 4 so far */
    assert_int_equal(lottery_verify_results(&p, res, 4, on_diff, &s), 0);
    assert_int_equal(s.n, 0);
    lottery_pool_free(&p);
}

static void test_tampered_draw(void **state)
{
    (void)state;
    lottery_pool p;
    lottery_result res[N];
    pool_of(&p);
    results_of(&p, N, res);
    res[2].draw += 1;                                /* someone edited a result */
    seen s = { 0 };
    assert_int_equal(lottery_verify_results(&p, res, N, on_diff, &s), 1);
    char want[200];
    snprintf(want, sizeof want, "%s: result says draw %lld, the replay %u", p.reqs[p.serve[2]].id,
             (long long)res[2].draw, p.draw_pos[p.serve[2]]);
    assert_string_equal(s.first, want);
    lottery_pool_free(&p);
}

static void test_answered_too_early_and_out_of_order(void **state)
{
    (void)state;
    lottery_pool p;
    lottery_result res[N];
    pool_of(&p);
    results_of(&p, N, res);
    seen s = { 0 };
    /* 3 served by the count, but the 4th in the order has a result too */
    assert_int_equal(lottery_verify_results(&p, res, 3, on_diff, &s), 3);
    char want[200];
    snprintf(want, sizeof want, "%s: answered, but the replay serves it after the 3 served so far", p.reqs[p.serve[3]].id);
    assert_string_equal(s.first, want);
    /* two grants swapped: the ranks do not follow the draw */
    int64_t r = res[1].rank;
    res[1].rank = res[2].rank;
    res[2].rank = r;
    memset(&s, 0, sizeof s);
    assert_int_equal(lottery_verify_results(&p, res, N, on_diff, &s), 1);
    assert_non_null(strstr(s.first, "not in the replayed order"));
    /* a grant from the waitlist comes later by design (9.5), and so does a
     * swap that waited as an offer until its partner answered (9.3) */
    lottery_result w, sw, plain;
    static const char waited[] = "{\"op\":\"auto\",\"status\":\"granted\",\"rank\":9,\"wait_no\":2}";
    static const char swapped[] = "{\"op\":\"swap\",\"status\":\"granted\",\"rank\":9}";
    static const char chose[] = "{\"op\":\"choose\",\"status\":\"granted\",\"rank\":9}";
    lottery_result_parse(&w, waited, sizeof waited - 1);
    lottery_result_parse(&sw, swapped, sizeof swapped - 1);
    lottery_result_parse(&plain, chose, sizeof chose - 1);
    assert_true(w.late && sw.late && !plain.late);
    res[2].late = 1;
    assert_int_equal(lottery_verify_results(&p, res, N, NULL, NULL), 0);
    lottery_pool_free(&p);
}

static void test_missing_result_and_points(void **state)
{
    (void)state;
    lottery_pool p;
    lottery_result res[N];
    pool_of(&p);
    results_of(&p, N, res);
    res[0].has = 0;
    res[5].has_points = 1;                           /* no "= " entry recorded any */
    seen s = { 0 };
    assert_int_equal(lottery_verify_results(&p, res, N, on_diff, &s), 2);
    assert_non_null(strstr(s.first, "served (position 1) but has no result"));
    lottery_result bad;
    lottery_result_parse(&bad, "not json", 8);       /* a result, with no draw */
    assert_true(bad.has);
    assert_int_equal(bad.draw, 0);
    lottery_pool_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_tampered_draw),
        cmocka_unit_test(test_answered_too_early_and_out_of_order),
        cmocka_unit_test(test_missing_result_and_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
