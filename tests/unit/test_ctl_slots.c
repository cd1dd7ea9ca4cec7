/* test_ctl_slots.c -- the lottery file of `allocctl batch slots`
 * (tools/allocctl/ctl_slots.c): what it accepts, what it refuses and on
 * which line, and the schedule (best first, per_slot users per slot, ties
 * in file order). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "allocctl/ctl_slots.h"

static void expect_error(const char *text, const char *want)
{
    slots_plan p;
    char err[256];
    assert_int_equal(slots_parse(text, strlen(text), &p, err, sizeof err), -1);
    if (!strstr(err, want)) fail_msg("error '%s' does not contain '%s'", err, want);
    assert_null(p.users);
}

static void test_bad_input(void **state)
{
    expect_error("", "no header and no users");
    expect_error("user,number\n", "no users after the header");
    expect_error("name;number\nu1;3\n", "1: the header must be");
    expect_error("user,number\nu1,3\nu2\n", "3: expected `user,value`");
    expect_error("user,number\nu1,x3\n", "2: not an integer: 'x3'");
    expect_error("user,number\nu1,3,4\n", "2: more than two columns");
    expect_error("user,number\n,3\n", "2: not a user id");
    expect_error("user,number\nu1,3\n# c\nu2,4\nu1,5\n", "5: user listed twice: 'u1'");
    expect_error("user,number\nu1,99999999999999999999\n", "2: not an integer");
    const char nul[] = "user,number\nu\0,1\n";
    slots_plan p;
    char err[256];
    assert_int_equal(slots_parse(nul, sizeof nul - 1, &p, err, sizeof err), -1);
}

static void test_schedule(void **state)
{
    const char *text = "# lottery of 2026\r\nuser,number\r\n  c , 7\r\nb,3\n\na,3\nd,1\ne,9\n";
    slots_plan p;
    char err[256];
    assert_int_equal(slots_parse(text, strlen(text), &p, err, sizeof err), 0);
    assert_int_equal(p.n, 5);
    slots_schedule(&p, SLOTS_BY_NUMBER, 1000, 300000, 2);
    const char *order[] = { "d", "b", "a", "c", "e" };   /* b before a: file order */
    const int64_t at[] = { 1000, 1000, 301000, 301000, 601000 };
    for (int i = 0; i < 5; i++) {
        assert_string_equal(p.users[i].user, order[i]);
        assert_int_equal(p.users[i].at, at[i]);
    }
    slots_schedule(&p, SLOTS_BY_POINTS, 0, 10, 3);   /* most points first */
    assert_string_equal(p.users[0].user, "e");
    assert_string_equal(p.users[4].user, "d");
    assert_int_equal(p.users[3].at, 10);
    slots_free(&p);
}

static void test_durations(void **state)
{
    int64_t ms;
    assert_int_equal(slots_parse_duration("5m", &ms), 0);
    assert_int_equal(ms, 300000);
    assert_int_equal(slots_parse_duration("30s", &ms), 0);
    assert_int_equal(ms, 30000);
    assert_int_equal(slots_parse_duration("2h", &ms), 0);
    assert_int_equal(ms, 7200000);
    assert_int_equal(slots_parse_duration("250", &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(slots_parse_duration("0", &ms), -1);
    assert_int_equal(slots_parse_duration("5 m", &ms), -1);
    assert_int_equal(slots_parse_duration("-5m", &ms), -1);
    assert_int_equal(slots_parse_duration("5d", &ms), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_durations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
