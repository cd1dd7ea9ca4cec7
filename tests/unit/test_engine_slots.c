/* test_engine_slots.c -- selection slots (contract 9.4, engine_slots.c):
 * before, at and after a user's slot; users without one use opens_at; a
 * group by each group_slot rule; not_open carries the slot; a refresh
 * replaces the table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "core/engine.h"
#include "core/engine_slots.h"

#define T0 1763800000000LL

static engine *dorm_of(int64_t opens_at, group_slot_rule rule, groups_mode groups)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_ROOM;
    m.opens_at = opens_at;
    m.groups = groups;
    m.group_slot = rule;
    engine *e = engine_new(&m, 5);
    assert_non_null(e);
    assert_int_equal(engine_load_item(e, "R4", 4), 0);
    assert_int_equal(engine_load_item(e, "R9", 9), 0);
    return e;
}

/* the groups here name their members (9.2) */
static engine *dorm(int64_t opens_at, group_slot_rule rule)
{
    return dorm_of(opens_at, rule, GROUPS_LISTED);
}

static engine_result choose(engine *e, const char *u, int64_t now)
{
    engine_result out;
    engine_decide(e, &(engine_request){ .op = OP_CHOOSE, .id = "c", .user = u, .seq = 1,
                                         .item = "R9" }, now, &out);
    assert_null(engine_check_invariants(e));
    return out;
}

static engine_result group(engine *e, const char *leader, int64_t now)
{
    static const char *const members[] = { "a", "b", "c" }, *const prefs[] = { "R4" };
    engine_result out;
    engine_decide(e, &(engine_request){ .op = OP_GROUP, .id = "g", .user = leader, .seq = 1,
                                         .members = members, .n_members = 3, .prefs = prefs,
                                         .n_prefs = 1 }, now, &out);
    return out;
}

static void expect_not_open(engine_result r, int64_t opens_at)
{
    assert_int_equal(r.status, STATUS_REJECTED);
    assert_int_equal(r.reason, REASON_NOT_OPEN);
    assert_int_equal(r.opens_at, opens_at);
}

static void test_before_at_after(void **state)
{
    engine *e = dorm(T0, GROUP_SLOT_EARLIEST);
    assert_int_equal(engine_slot_set(e, "s1", T0 + 300), 0);
    assert_int_equal(engine_slot_get(e, "s1"), T0 + 300);
    expect_not_open(choose(e, "s1", T0 + 299), T0 + 300);   /* the batch is open, s1's slot is not */
    assert_int_equal(choose(e, "s1", T0 + 300).status, STATUS_GRANTED);
    assert_int_equal(choose(e, "s2", T0).status, STATUS_GRANTED);  /* no slot: opens_at */
    expect_not_open(choose(e, "s3", T0 - 1), T0);
    engine_free(e);
}

static void test_slot_before_the_opening(void **state)
{
    engine *e = dorm(T0 + 1000, GROUP_SLOT_EARLIEST);
    assert_int_equal(engine_slot_set(e, "early", T0), 0);
    assert_int_equal(choose(e, "early", T0 + 1).status, STATUS_GRANTED);
    expect_not_open(choose(e, "other", T0 + 1), T0 + 1000);
    engine_free(e);
}

/* A slot of 0 is a time like any other (the epoch): its user is served
 * at once, before the batch's opens_at, not sent back to opens_at as a
 * user without a slot is. */
static void test_slot_zero_is_a_time(void **state)
{
    engine *e = dorm(T0 + 1000, GROUP_SLOT_EARLIEST);
    assert_int_equal(engine_slot_set(e, "first", 0), 0);
    assert_int_equal(engine_slot_get(e, "first"), 0);
    assert_int_equal(engine_slot_get(e, "other"), ENGINE_NO_SLOT);
    assert_int_equal(choose(e, "first", T0).status, STATUS_GRANTED);
    expect_not_open(choose(e, "other", T0), T0 + 1000);
    engine_free(e);
}

static void test_group_rules(void **state)
{
    static const group_slot_rule rules[] = { GROUP_SLOT_EARLIEST, GROUP_SLOT_LATEST, GROUP_SLOT_LEADER };
    static const int64_t want[] = { T0 + 100, T0 + 500, T0 + 300 };
    for (int i = 0; i < 3; i++) {
        engine *e = dorm(T0 + 300, rules[i]);
        engine_slot_set(e, "a", T0 + 100);
        engine_slot_set(e, "c", T0 + 500);
        /* b has no slot: the batch's opens_at, T0 + 300; b leads */
        expect_not_open(group(e, "b", want[i] - 1), want[i]);
        assert_int_equal(group(e, "b", want[i]).status, STATUS_GRANTED);
        engine_free(e);
    }
}

/* groups = formed (9.2): a `group` names no members, so the rule applies to
 * the sender's group as formed, and `leader` is the group's leader (the
 * inviter), not the member who sends it. */
static engine_result send(engine *e, engine_request r, int64_t now)
{
    engine_result out;
    r.id = "f";
    r.seq = 1;
    engine_decide(e, &r, now, &out);
    assert_null(engine_check_invariants(e));
    return out;
}

static void test_formed_group_rules(void **state)
{
    static const group_slot_rule rules[] = { GROUP_SLOT_EARLIEST, GROUP_SLOT_LATEST, GROUP_SLOT_LEADER };
    static const int64_t want[] = { T0 + 100, T0 + 500, T0 + 300 };
    static const char *const to[] = { "b", "c" }, *const prefs[] = { "R4" };
    for (int i = 0; i < 3; i++) {
        engine *e = dorm_of(T0, rules[i], GROUPS_FORMED);
        assert_int_equal(send(e, (engine_request){ .op = OP_INVITE, .user = "a", .to = to, .n_to = 2 }, T0).status,
                         STATUS_DONE);
        assert_int_equal(send(e, (engine_request){ .op = OP_ACCEPT, .user = "b", .peer = "a" }, T0).status, STATUS_DONE);
        assert_int_equal(send(e, (engine_request){ .op = OP_ACCEPT, .user = "c", .peer = "a" }, T0).status, STATUS_DONE);
        engine_slot_set(e, "a", T0 + 300);
        engine_slot_set(e, "b", T0 + 500);
        engine_slot_set(e, "c", T0 + 100);
        /* b sends it; a leads */
        engine_request g = { .op = OP_GROUP, .user = "b", .prefs = prefs, .n_prefs = 1 };
        expect_not_open(send(e, g, want[i] - 1), want[i]);
        assert_int_equal(send(e, g, want[i]).status, STATUS_GRANTED);
        engine_free(e);
    }
}

static void test_refresh_replaces(void **state)
{
    engine *e = dorm(T0, GROUP_SLOT_EARLIEST);
    engine_slot_set(e, "s1", T0 + 500);
    engine_slot_set(e, "s1", T0 + 200);                     /* an update */
    expect_not_open(choose(e, "s1", T0 + 100), T0 + 200);
    engine_slots_clear(e);                                  /* the operator deleted it */
    assert_int_equal(engine_slot_get(e, "s1"), ENGINE_NO_SLOT);
    assert_int_equal(choose(e, "s1", T0 + 100).status, STATUS_GRANTED);
    assert_int_equal(engine_slot_set(e, "", T0), -EINVAL);
    assert_int_equal(engine_slot_set(e, "x", -1), -EINVAL);
    engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_at_after),
        cmocka_unit_test(test_slot_before_the_opening),
        cmocka_unit_test(test_slot_zero_is_a_time),
        cmocka_unit_test(test_group_rules),
        cmocka_unit_test(test_formed_group_rules),
        cmocka_unit_test(test_refresh_replaces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
