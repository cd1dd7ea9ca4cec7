/* test_engine_elig.c -- profiles and eligibility (contract 11.2,
 * engine_elig.c) and groups that fill a room (11.4): only_X and same_X at
 * every grant (buy, choose, auto with prefs and filter, group, switch,
 * swap, waitlist service), a same_X room taking its first holder's value
 * and freeing it when empty, profile edits for later decisions only, and
 * group_fill = exact for groups and single users. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/engine.h"
#include "core/engine_elig.h"
#include "etest.h"

#define T0 1763800000000LL

static engine *dorm(group_fill_mode fill)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_ROOM;
    m.groups = GROUPS_LISTED;
    m.group_fill = fill;
    engine *e = engine_new(&m, 11);
    assert_non_null(e);
    return e;
}

static void room(engine *e, const char *id, int64_t cap, const char *k1, const char *v1,
                 const char *k2, const char *v2)
{
    assert_int_equal(engine_load_item(e, id, cap), 0);
    if (k1) assert_int_equal(engine_load_attr(e, id, k1, v1), 0);
    if (k2) assert_int_equal(engine_load_attr(e, id, k2, v2), 0);
}

/* A profile of one or two attrs; value text is canonical JSON. */
static void prof(engine *e, const char *u, const char *k1, const char *v1, const char *k2,
                 const char *v2)
{
    engine_kv kv[2] = { { k1, v1 }, { k2, v2 } };
    assert_int_equal(engine_profile_set(e, u, kv, k2 ? 2 : (k1 ? 1 : 0)), 0);
}

static engine_result req(engine *e, engine_op o, const char *id, const char *u, const char *item,
                         int64_t now)
{
    return etest_decide(e, (engine_request){ .op = o, .id = id, .user = u, .seq = 1, .item = item,
                                             .qty = 1 }, now);
}

static void test_profiles_interned_and_validated(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    prof(e, "s1", "gender", "\"F\"", "year", "4");
    prof(e, "s2", "year", "4", "gender", "\"F\"");   /* same profile, other order */
    assert_string_equal(engine_profile_get(e, "s1", "gender"), "\"F\"");
    assert_int_equal(engine_profile_int(e, "s2", "year", -1), 4);
    assert_int_equal(engine_profile_int(e, "s2", "gender", -1), -1);   /* not an integer */
    assert_null(engine_profile_get(e, "s3", "gender"));
    assert_int_equal(engine_profile_count(e), 2);
    /* neither a JSON object of strings and integers: refused, left as it was */
    engine_kv bad[] = { { "gender", "true" } }, twice[] = { { "a", "1" }, { "a", "2" } };
    assert_int_equal(engine_profile_set(e, "s1", bad, 1), -EINVAL);
    assert_int_equal(engine_profile_set(e, "s1", twice, 2), -EINVAL);
    assert_string_equal(engine_profile_get(e, "s1", "gender"), "\"F\"");
    /* a profile is not a participant */
    assert_int_equal(engine_get_counters(e)->participants, 0);
    /* cleared */
    assert_int_equal(engine_profile_set(e, "s1", NULL, 0), 0);
    assert_null(engine_profile_get(e, "s1", "gender"));
    assert_int_equal(engine_profile_count(e), 1);
    engine_free(e);
}

/* 1,000 users with five attributes from a few values each: a few dozen
 * bytes a user (the budget is 100 at 100,000). */
static void test_profiles_memory(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    static const char *const g[] = { "\"F\"", "\"M\"", "\"X\"" };
    char id[32], pts[16], yr[4];
    for (int i = 0; i < 1000; i++) {
        snprintf(id, sizeof id, "student%06d", i);
        snprintf(pts, sizeof pts, "%d", i % 40);
        snprintf(yr, sizeof yr, "%d", 1 + i % 4);
        engine_kv kv[] = { { "gender", g[i % 3] }, { "year", yr }, { "llc", i % 7 ? "\"none\"" : "\"stem\"" },
                           { "points", pts }, { "access", i % 20 ? "0" : "1" } };
        assert_int_equal(engine_profile_set(e, id, kv, 5), 0);
    }
    size_t per_user = engine_profile_bytes(e) / 1000;
    print_message("profiles: %zu bytes a user\n", per_user);
    assert_true(per_user <= 100);
    engine_free(e);
}

static void test_only_at_choose_and_buy(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "W1", 2, "only_gender", "\"F\"", NULL, NULL);
    room(e, "Y1", 2, "only_year", "[3,4]", NULL, NULL);
    prof(e, "f", "gender", "\"F\"", "year", "1");
    prof(e, "m", "gender", "\"M\"", "year", "4");
    engine_result r = req(e, OP_CHOOSE, "c1", "m", "W1", T0);
    assert_int_equal(r.status, STATUS_REJECTED);
    assert_int_equal(r.reason, REASON_NOT_ELIGIBLE);
    assert_string_equal(engine_reason_name(r.reason), "not_eligible");
    assert_int_equal(req(e, OP_CHOOSE, "c2", "nobody", "W1", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(req(e, OP_CHOOSE, "c3", "f", "Y1", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(req(e, OP_CHOOSE, "c4", "m", "Y1", T0).status, STATUS_GRANTED);
    assert_int_equal(req(e, OP_CHOOSE, "c5", "f", "W1", T0).status, STATUS_GRANTED);
    engine_elig_why why;
    assert_int_equal(engine_eligible(e, "m", "W1", &why), 0);
    assert_string_equal(why.rule, "only_gender");
    assert_string_equal(why.value, "\"M\"");
    engine_free(e);

    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_STOCK;
    e = engine_new(&m, 5);
    assert_int_equal(engine_load_item(e, "meal", 10), 0);
    assert_int_equal(engine_load_attr(e, "meal", "only_llc", "\"stem\""), 0);
    prof(e, "a", "llc", "\"stem\"", NULL, NULL);
    assert_int_equal(req(e, OP_BUY, "b1", "b", "meal", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(req(e, OP_BUY, "b2", "a", "meal", T0).status, STATUS_GRANTED);
    engine_free(e);
}

static void test_same_takes_first_holder(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "G1", 2, "same_gender", "true", NULL, NULL);
    prof(e, "f1", "gender", "\"F\"", NULL, NULL);
    prof(e, "f2", "gender", "\"F\"", NULL, NULL);
    prof(e, "m1", "gender", "\"M\"", NULL, NULL);
    prof(e, "x", "year", "2", NULL, NULL);
    assert_int_equal(req(e, OP_CHOOSE, "c0", "x", "G1", T0).reason, REASON_NOT_ELIGIBLE);  /* lacks X */
    assert_int_equal(req(e, OP_CHOOSE, "c1", "m1", "G1", T0).status, STATUS_GRANTED);
    assert_int_equal(req(e, OP_CHOOSE, "c2", "f1", "G1", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(req(e, OP_RELEASE, "r1", "m1", NULL, T0).status, STATUS_DONE);
    /* empty again: anyone eligible, and it takes their value */
    assert_int_equal(req(e, OP_CHOOSE, "c3", "f1", "G1", T0).status, STATUS_GRANTED);
    assert_int_equal(req(e, OP_CHOOSE, "c4", "m1", "G1", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(req(e, OP_CHOOSE, "c5", "f2", "G1", T0).status, STATUS_GRANTED);
    assert_int_equal(engine_holder_ok(e, "f2", "G1", NULL), 1);
    /* a profile edit takes nothing away; verify's audit sees it */
    prof(e, "f2", "gender", "\"M\"", NULL, NULL);
    engine_elig_why why;
    assert_int_equal(engine_holder_ok(e, "f2", "G1", &why), 0);
    assert_string_equal(why.rule, "same_gender");
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, "f2", &v), 0);
    assert_string_equal(v.room, "G1");
    engine_free(e);
}

/* same_X of holders loaded from the store is read from their profiles. */
static void test_same_of_loaded_holders(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "G1", 3, "same_gender", "true", NULL, NULL);
    assert_int_equal(engine_load_room_holder(e, "f1", "G1", T0, "q"), 0);
    prof(e, "f1", "gender", "\"F\"", NULL, NULL);
    prof(e, "m1", "gender", "\"M\"", NULL, NULL);
    prof(e, "f2", "gender", "\"F\"", NULL, NULL);
    assert_int_equal(req(e, OP_CHOOSE, "c1", "m1", "G1", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(req(e, OP_CHOOSE, "c2", "f2", "G1", T0).status, STATUS_GRANTED);
    engine_free(e);
}

/* A staff exception (placed without check) is not what a loaded same_X
 * room compares with: f1 holds G1 by staff, m1 by right; after a load the
 * room is m1's gender, whatever the order the holders come back in (the
 * simulator, seed 1212: a load took the exception's F, and an F joined
 * an M by right). */
static void test_same_of_loaded_holders_skips_staff(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "G1", 3, "same_gender", "true", NULL, NULL);
    assert_int_equal(engine_load_room_holder(e, "f1", "G1", T0, "c1"), 0);
    assert_int_equal(engine_load_staff(e, "f1", 0), 0);
    assert_int_equal(engine_load_room_holder(e, "m1", "G1", T0, "q1"), 0);
    prof(e, "f1", "gender", "\"F\"", NULL, NULL);
    prof(e, "m1", "gender", "\"M\"", NULL, NULL);
    prof(e, "f2", "gender", "\"F\"", NULL, NULL);
    prof(e, "m2", "gender", "\"M\"", NULL, NULL);
    assert_int_equal(req(e, OP_CHOOSE, "c2", "f2", "G1", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(req(e, OP_CHOOSE, "c3", "m2", "G1", T0).status, STATUS_GRANTED);
    engine_free(e);
}

/* With only staff exceptions in it, a loaded room takes the first one's
 * value, as it did when that one moved into the empty room. */
static void test_same_of_loaded_staff_only(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "G1", 3, "same_gender", "true", NULL, NULL);
    assert_int_equal(engine_load_room_holder(e, "m1", "G1", T0, "c1"), 0);
    assert_int_equal(engine_load_staff(e, "m1", 0), 0);
    prof(e, "m1", "gender", "\"M\"", NULL, NULL);
    prof(e, "f2", "gender", "\"F\"", NULL, NULL);
    assert_int_equal(req(e, OP_CHOOSE, "c2", "f2", "G1", T0).reason, REASON_NOT_ELIGIBLE);
    engine_free(e);
}

static engine_result auto_req(engine *e, const char *id, const char *u, const char *const *prefs,
                              size_t n_prefs, const engine_kv *filter, size_t n_filter)
{
    return etest_decide(e, (engine_request){ .op = OP_AUTO, .id = id, .user = u, .seq = 1,
                                             .prefs = prefs, .n_prefs = n_prefs, .filter = filter,
                                             .n_filter = n_filter, .has_filter = filter != NULL }, T0);
}

static void test_auto_skips_ineligible(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "W1", 1, "only_gender", "\"F\"", "hall", "\"north\"");
    room(e, "M1", 1, "only_gender", "\"M\"", "hall", "\"north\"");
    room(e, "M2", 2, "only_gender", "\"M\"", "hall", "\"north\"");
    prof(e, "m", "gender", "\"M\"", NULL, NULL);
    const char *prefs[] = { "W1", "M1" };
    engine_result r = auto_req(e, "a1", "m", prefs, 2, NULL, 0);
    assert_int_equal(r.status, STATUS_GRANTED);
    assert_string_equal(r.item, "M1");
    /* filter fallback: the only north rooms left are W1 (not his) and M2 */
    prof(e, "m2", "gender", "\"M\"", NULL, NULL);
    prof(e, "f", "gender", "\"F\"", NULL, NULL);
    engine_kv north[] = { { "hall", "\"north\"" } };
    const char *w1[] = { "W1" };
    r = auto_req(e, "a2", "m2", w1, 1, north, 1);
    assert_string_equal(r.item, "M2");
    /* nothing she may hold but W1: taken, so no_room */
    assert_int_equal(auto_req(e, "a3", "f", NULL, 0, north, 1).status, STATUS_GRANTED);
    assert_int_equal(auto_req(e, "a4", "nobody", NULL, 0, north, 1).reason, REASON_NO_ROOM);
    engine_free(e);
}

/* Room made ahead for 2,000 profiled users (as the worker asks after a
 * read, engine_profiles_expect_users): the same decisions as without it,
 * the invariants hold after each, and users with no profile come after. */
static void test_expect_users_ahead(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    assert_int_equal(engine_profiles_expect_users(e), 0);   /* no profiles: nothing to do */
    room(e, "F1", 1000, "only_gender", "\"F\"", NULL, NULL);
    room(e, "M1", 1000, "only_gender", "\"M\"", NULL, NULL);
    char id[16];
    for (int i = 0; i < 2000; i++) {
        snprintf(id, sizeof id, "s%d", i);
        prof(e, id, "gender", i % 2 ? "\"M\"" : "\"F\"", NULL, NULL);
    }
    assert_int_equal(engine_profiles_expect_users(e), 0);
    assert_int_equal(engine_profiles_expect_users(e), 0);   /* again: already made */
    assert_int_equal(engine_get_counters(e)->participants, 0);   /* room is not a participant */
    for (int i = 0; i < 2000; i++) {
        snprintf(id, sizeof id, "s%d", i);
        engine_result r = req(e, OP_CHOOSE, id, id, i % 2 ? "F1" : "M1", T0);
        assert_int_equal(r.status, STATUS_REJECTED);
        assert_int_equal(r.reason, REASON_NOT_ELIGIBLE);
        r = req(e, OP_CHOOSE, id, id, i % 2 ? "M1" : "F1", T0);
        assert_int_equal(r.status, STATUS_GRANTED);
    }
    assert_int_equal(req(e, OP_CHOOSE, "x", "noprofile", "F1", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(engine_get_counters(e)->participants, 2001);
    engine_free(e);
}

/* The hashes a worker computes ahead (decide.c: engine_user_hash,
 * engine_item_hash) find the same user, profile and rooms as the engine's
 * own lookups: the rules hold and a second request finds the first's bed. */
static void test_auto_with_hashes_ahead(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "W1", 1, "only_gender", "\"F\"", NULL, NULL);
    room(e, "M1", 1, "only_gender", "\"M\"", NULL, NULL);
    prof(e, "m", "gender", "\"M\"", NULL, NULL);
    const char *prefs[] = { "W1", "M1" };
    uint32_t uh = engine_user_hash(e, "m"), ph[] = { engine_item_hash(e, "W1"), engine_item_hash(e, "M1") };
    engine_request q = { .op = OP_AUTO, .id = "h1", .user = "m", .seq = 1, .prefs = prefs, .n_prefs = 2,
                         .pref_hashes = ph, .user_hash = &uh };
    engine_result r = etest_decide(e, q, T0);
    assert_int_equal(r.status, STATUS_GRANTED);
    assert_string_equal(r.item, "M1");
    q.id = "h2";
    assert_int_equal(etest_decide(e, q, T0).reason, REASON_ALREADY_HOLDING);
    assert_int_equal(engine_user_count(e), 1);
    engine_free(e);
}

static engine_result group_req(engine *e, const char *id, const char *const *members, size_t n,
                               const char *const *prefs, size_t n_prefs)
{
    return etest_decide(e, (engine_request){ .op = OP_GROUP, .id = id, .user = members[0], .seq = 1,
                                             .members = members, .n_members = n, .prefs = prefs,
                                             .n_prefs = n_prefs }, T0);
}

static void test_group_same_across_members(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "G2", 2, "same_gender", "true", NULL, NULL);
    room(e, "F2", 2, "only_gender", "\"F\"", NULL, NULL);
    prof(e, "f1", "gender", "\"F\"", NULL, NULL);
    prof(e, "f2", "gender", "\"F\"", NULL, NULL);
    prof(e, "m1", "gender", "\"M\"", NULL, NULL);
    const char *mixed[] = { "f1", "m1" }, *pair[] = { "f1", "f2" }, *prefs[] = { "F2", "G2" };
    assert_int_equal(group_req(e, "g1", mixed, 2, prefs, 2).reason, REASON_NO_ROOM);
    engine_result r = group_req(e, "g2", pair, 2, prefs + 1, 1);
    assert_int_equal(r.status, STATUS_GRANTED);
    assert_string_equal(r.item, "G2");
    engine_free(e);
}

static void test_switch_and_waitlist_check(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "A", 1, NULL, NULL, NULL, NULL);
    room(e, "W", 1, "only_gender", "\"F\"", NULL, NULL);
    prof(e, "m", "gender", "\"M\"", NULL, NULL);
    prof(e, "f", "gender", "\"F\"", NULL, NULL);
    prof(e, "f2", "gender", "\"F\"", NULL, NULL);
    assert_int_equal(req(e, OP_CHOOSE, "c1", "m", "A", T0).status, STATUS_GRANTED);
    assert_int_equal(req(e, OP_SWITCH, "s1", "m", "W", T0).reason, REASON_NOT_ELIGIBLE);
    assert_int_equal(req(e, OP_CHOOSE, "c2", "f", "W", T0).status, STATUS_GRANTED);
    /* a waiter is served only into a room she may hold */
    engine_result w = etest_decide(e, (engine_request){ .op = OP_CHOOSE, .id = "c3", .user = "f2",
                                                        .seq = 2, .item = "W", .wait = 1 }, T0);
    assert_int_equal(w.status, STATUS_WAITING);
    engine_result w3 = etest_decide(e, (engine_request){ .op = OP_CHOOSE, .id = "c4", .user = "f3",
                                                         .seq = 3, .item = "W", .wait = 1 }, T0);
    assert_int_equal(w3.status, STATUS_REJECTED);   /* no profile: never waits for W */
    assert_int_equal(w3.reason, REASON_NOT_ELIGIBLE);
    /* her profile changes while she waits: served, she is refused */
    prof(e, "f2", "gender", "\"M\"", NULL, NULL);
    assert_int_equal(req(e, OP_RELEASE, "r1", "f", NULL, T0 + 1).status, STATUS_DONE);
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, "f2", &v), 0);
    assert_null(v.room);
    assert_int_equal(engine_get_counters(e)->waiting, 0);
    engine_free(e);
}

static void test_swap_each_way(void **state)
{
    engine *e = dorm(GROUP_FILL_ANY);
    room(e, "W", 1, "only_gender", "\"F\"", NULL, NULL);
    room(e, "A", 1, NULL, NULL, NULL, NULL);
    room(e, "B", 1, NULL, NULL, NULL, NULL);
    prof(e, "f", "gender", "\"F\"", NULL, NULL);
    prof(e, "m", "gender", "\"M\"", NULL, NULL);
    prof(e, "n", "gender", "\"M\"", NULL, NULL);
    assert_int_equal(req(e, OP_CHOOSE, "c1", "f", "W", T0).status, STATUS_GRANTED);
    assert_int_equal(req(e, OP_CHOOSE, "c2", "m", "A", T0).status, STATUS_GRANTED);
    assert_int_equal(req(e, OP_CHOOSE, "c3", "n", "B", T0).status, STATUS_GRANTED);
    engine_request s = { .op = OP_SWAP, .id = "x1", .user = "m", .seq = 4, .peer = "f" };
    assert_int_equal(etest_decide(e, s, T0).reason, REASON_NOT_ELIGIBLE);
    s = (engine_request){ .op = OP_SWAP, .id = "x2", .user = "f", .seq = 5, .peer = "m" };
    assert_int_equal(etest_decide(e, s, T0).reason, REASON_NOT_ELIGIBLE);
    s = (engine_request){ .op = OP_SWAP, .id = "x3", .user = "n", .seq = 6, .peer = "m" };
    assert_int_equal(etest_decide(e, s, T0).status, STATUS_WAITING);
    s = (engine_request){ .op = OP_SWAP, .id = "x4", .user = "m", .seq = 7, .peer = "n" };
    assert_int_equal(etest_decide(e, s, T0).status, STATUS_GRANTED);
    engine_free(e);
}

/* 11.4: a group takes only an empty room of its size; a single user only a
 * bed beside a holder, or a single. */
static void test_group_fill_exact(void **state)
{
    engine *e = dorm(GROUP_FILL_EXACT);
    room(e, "Q4", 4, NULL, NULL, NULL, NULL);
    room(e, "D2", 2, NULL, NULL, NULL, NULL);
    room(e, "S1", 1, NULL, NULL, NULL, NULL);
    const char *pair[] = { "a", "b" }, *trio[] = { "c", "d", "e" }, *q4[] = { "Q4", "D2" };
    assert_int_equal(group_req(e, "g1", trio, 3, q4, 2).reason, REASON_NO_ROOM);
    engine_result r = group_req(e, "g2", pair, 2, q4, 2);
    assert_string_equal(r.item, "D2");
    assert_int_equal(req(e, OP_CHOOSE, "c1", "x", "Q4", T0).reason, REASON_ROOM_FULL);
    assert_int_equal(req(e, OP_CHOOSE, "c2", "x", "S1", T0).status, STATUS_GRANTED);
    const char *prefs[] = { "Q4", "D2" };
    assert_int_equal(auto_req(e, "a1", "y", prefs, 2, NULL, 0).reason, REASON_NO_ROOM);
    engine_free(e);

    /* any (the default): a pair takes the quad */
    e = dorm(GROUP_FILL_ANY);
    room(e, "Q4", 4, NULL, NULL, NULL, NULL);
    assert_string_equal(group_req(e, "g3", pair, 2, q4, 1).item, "Q4");
    assert_int_equal(req(e, OP_CHOOSE, "c3", "x", "Q4", T0).status, STATUS_GRANTED);
    engine_free(e);
}

/* exact: a single user waits for an empty double (only a pair may take
 * it); made a single by set_capacity, it is hers in the same call -- a
 * lower capacity gives no unit back, so nothing served the waitlist
 * before (found by test_engine_prop's waitlist runs). */
static void test_exact_waiter_gets_room_made_single(void **state)
{
    engine *e = dorm(GROUP_FILL_EXACT);
    room(e, "D2", 2, NULL, NULL, NULL, NULL);
    engine_result w = etest_decide(e, (engine_request){ .op = OP_CHOOSE, .id = "c1", .user = "s", .seq = 1,
                                                        .item = "D2", .wait = 1 }, T0);
    assert_int_equal(w.status, STATUS_WAITING);
    engine_result c = etest_decide(e, (engine_request){ .op = OP_SET_CAPACITY, .id = "k1", .item = "D2",
                                                        .qty = 1 }, T0 + 1);
    assert_int_equal(c.status, STATUS_DONE);
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, "s", &v), 0);
    assert_non_null(v.room);
    assert_string_equal(v.room, "D2");
    engine_free(e);
}

/* exact: once a room has a holder, a single user may join it. */
static void test_exact_single_joins_holder(void **state)
{
    engine *e = dorm(GROUP_FILL_EXACT);
    room(e, "D2", 2, NULL, NULL, NULL, NULL);
    assert_int_equal(engine_load_room_holder(e, "h", "D2", T0, "q"), 0);
    assert_int_equal(req(e, OP_CHOOSE, "c1", "x", "D2", T0).status, STATUS_GRANTED);
    engine_free(e);
}

/* A random round on rooms with only_X and same_X rules: choose, auto,
 * switch, release, swap and assign (with and without check) from users of
 * random profiles. After every step each holder not placed by staff
 * without check keeps every rule of their room (engine_holder_ok, which
 * audits same_X against the other holders' profiles), and the engine's
 * own sweep holds (etest_decide). */
static uint64_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void check_holders(engine *e, int n_users)
{
    char id[16];
    for (int u = 0; u < n_users; u++) {
        snprintf(id, sizeof id, "u%d", u);
        engine_user_view v;
        if (engine_user_view_get(e, id, &v) != 0 || !v.room || v.staff) continue;
        engine_elig_why why = { 0 };
        if (engine_holder_ok(e, id, v.room, &why) != 1)
            fail_msg("%s in %s breaks %s (value %s)", id, v.room, why.rule, why.value ? why.value : "none");
    }
}

static void test_random_round_keeps_rules(void **state)
{
    static const char *const gender[] = { "\"F\"", "\"M\"", "\"X\"" };
    static const char *const year[] = { "1", "2", "3", "4" };
    static const engine_op ops[] = { OP_CHOOSE, OP_AUTO, OP_SWITCH, OP_RELEASE, OP_SWAP, OP_ASSIGN };
    for (uint64_t seed = 1; seed <= 20; seed++) {
        uint64_t s = seed;
        engine *e = dorm(seed % 2 ? GROUP_FILL_EXACT : GROUP_FILL_ANY);
        char rid[8][16];
        for (int i = 0; i < 8; i++) {
            snprintf(rid[i], sizeof rid[i], "R%d", i);
            int k = (int)(rnd(&s) % 3);
            room(e, rid[i], 1 + (int64_t)(rnd(&s) % 3), k == 0 ? "only_gender" : k == 1 ? "same_gender" : "only_year",
                 k == 0 ? gender[rnd(&s) % 3] : k == 1 ? "true" : "[3,4]", "hall", "\"h\"");
        }
        for (int u = 0; u < 24; u++) {
            char id[16];
            snprintf(id, sizeof id, "u%d", u);
            if (u % 7 == 6) continue;   /* no profile */
            prof(e, id, "gender", gender[rnd(&s) % 3], "year", year[rnd(&s) % 4]);
        }
        engine_kv hall[] = { { "hall", "\"h\"" } };
        for (int step = 0; step < 400; step++) {
            char id[16], peer[16], rq[16];
            snprintf(id, sizeof id, "u%d", (int)(rnd(&s) % 24));
            snprintf(peer, sizeof peer, "u%d", (int)(rnd(&s) % 24));
            snprintf(rq, sizeof rq, "q%d", step);
            engine_op o = ops[rnd(&s) % 6];
            engine_request r = { .op = o, .id = rq, .user = id, .seq = step + 1, .item = rid[rnd(&s) % 8],
                                 .peer = peer, .check = (int)(rnd(&s) % 2) };
            if (o == OP_AUTO) { r.filter = hall; r.n_filter = 1; r.has_filter = 1; r.item = NULL; }
            if (o == OP_ASSIGN) r.seq = 0;
            if (o == OP_SWAP && strcmp(id, peer) == 0) continue;
            engine_result res = etest_decide(e, r, T0 + step);
            assert_true(res.status != STATUS_NONE);
            engine_drain_clear(e);
            check_holders(e, 24);
        }
        engine_free(e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profiles_interned_and_validated),
        cmocka_unit_test(test_profiles_memory),
        cmocka_unit_test(test_only_at_choose_and_buy),
        cmocka_unit_test(test_same_takes_first_holder),
        cmocka_unit_test(test_same_of_loaded_holders),
        cmocka_unit_test(test_same_of_loaded_holders_skips_staff),
        cmocka_unit_test(test_same_of_loaded_staff_only),
        cmocka_unit_test(test_auto_skips_ineligible),
        cmocka_unit_test(test_auto_with_hashes_ahead),
        cmocka_unit_test(test_expect_users_ahead),
        cmocka_unit_test(test_group_same_across_members),
        cmocka_unit_test(test_switch_and_waitlist_check),
        cmocka_unit_test(test_swap_each_way),
        cmocka_unit_test(test_group_fill_exact),
        cmocka_unit_test(test_exact_single_joins_holder),
        cmocka_unit_test(test_exact_waiter_gets_room_made_single),
        cmocka_unit_test(test_random_round_keeps_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
