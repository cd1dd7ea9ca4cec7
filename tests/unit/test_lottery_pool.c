/* test_lottery_pool.c -- the pool list's entries as worker/lottery_pool.c
 * reads them back (after a takeover, and in `allocctl lottery verify`):
 * the points a ticket was drawn with (`= <points> <user>`, contract 11.3)
 * belong to a user holding a ticket, and anything else is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "worker/lottery_pool.h"

static int load(lottery_pool *p, const char *s)
{
    return lottery_pool_load_entry(p, s, strlen(s));
}

static void test_points_entries(void **state)
{
    (void)state;
    lottery_pool p;
    lottery_pool_init(&p, 7);
    assert_int_equal(load(&p, "1 {\"id\":\"r1\",\"user\":\"s 1\",\"op\":\"choose\",\"room\":\"R1\"}"), 0);
    assert_int_equal(load(&p, "2 {\"id\":\"r2\",\"user\":\"s2\",\"op\":\"choose\",\"room\":\"R1\"}"), 0);
    assert_int_equal(load(&p, "! s3"), 0);          /* throttled, no ticket */
    int64_t pts = -1;
    assert_int_equal(lottery_pool_points_of(&p, "s2", &pts), 0);   /* none recorded yet */
    assert_int_equal(load(&p, "= 30 s 1"), 0);       /* a user id may hold a blank */
    assert_int_equal(load(&p, "= -2 s2"), 0);
    assert_int_equal(lottery_pool_points_of(&p, "s 1", &pts), 1);
    assert_int_equal(pts, 30);
    assert_int_equal(lottery_pool_points_of(&p, "s2", &pts), 1);
    assert_int_equal(pts, -2);
    assert_int_equal(lottery_pool_points_of(&p, "nobody", &pts), 0);
    assert_int_equal(load(&p, "= 5 s3"), -EPROTO);   /* no ticket */
    assert_int_equal(load(&p, "= 5 nobody"), -EPROTO);
    assert_int_equal(load(&p, "= x s2"), -EPROTO);
    assert_int_equal(load(&p, "= 5"), -EPROTO);
    assert_int_equal(load(&p, "=  s2"), -EPROTO);
    lottery_pool_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_points_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
