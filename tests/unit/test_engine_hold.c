/* test_engine_hold.c -- holds for rooms (contract 9.4, engine_hold.c): a
 * bed granted with hold_ms has an order and expires_at; confirm makes it
 * final, cancel and expiry free it (and serve a waitlist), release ends
 * the hold, switch keeps it; tombstones answer late confirms; loading
 * puts a hold back on its heap. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "core/engine.h"
#include "core/engine_swap.h"
#include "core/engine_wait.h"
#include "etest.h"

#define T0 1763800000000LL

static engine *dorm(int64_t hold_ms)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_ROOM;
    m.hold_ms = hold_ms;
    m.groups = GROUPS_LISTED;   /* the groups here name their members (9.2) */
    engine *e = engine_new(&m, 3);
    assert_non_null(e);
    assert_int_equal(engine_load_item(e, "R1", 1), 0);
    assert_int_equal(engine_load_item(e, "R2", 2), 0);
    return e;
}

static engine_result op(engine *e, engine_op o, const char *id, const char *u, const char *room,
                        uint64_t order, int64_t now)
{
    return etest_decide(e, (engine_request){ .op = o, .id = id, .user = u, .seq = 1, .item = room,
                                             .order = order }, now);
}

static int64_t free_of(engine *e, const char *room)
{
    engine_item_view v;
    assert_int_equal(engine_item_view_get(e, room, &v), 0);
    return v.free;
}

static const engine_event *last_event(engine *e)
{
    assert_true(engine_event_count(e) > 0);
    return engine_event_at(e, engine_event_count(e) - 1);
}

static void test_grant_confirm_cancel(void **state)
{
    engine *e = dorm(1000);
    engine_result g = op(e, OP_CHOOSE, "c1", "s1", "R1", 0, T0);
    assert_int_equal(g.status, STATUS_GRANTED);
    assert_true(g.order != 0);
    assert_int_equal(g.expires_at, T0 + 1000);
    const engine_event *ev = last_event(e);
    assert_int_equal(ev->type, EVENT_GRANT);
    assert_true(ev->order == g.order);
    assert_int_equal(ev->expires_at, T0 + 1000);
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, "s1", &v), 0);
    assert_true(v.room_order == g.order);
    assert_int_equal(v.room_state, ORDER_HELD);
    /* someone else's order is unknown; the holder's is confirmed, twice is fine */
    assert_int_equal(op(e, OP_CONFIRM, "x", "s2", NULL, g.order, T0 + 1).reason, REASON_UNKNOWN_ORDER);
    engine_result c = op(e, OP_CONFIRM, "k1", "s1", NULL, g.order, T0 + 2);
    assert_int_equal(c.status, STATUS_DONE);
    assert_string_equal(c.item, "R1");
    assert_int_equal(last_event(e)->type, EVENT_CONFIRM);
    assert_int_equal(op(e, OP_CONFIRM, "k2", "s1", NULL, g.order, T0 + 3).status, STATUS_DONE);
    /* confirmed: no expiry */
    engine_expire(e, T0 + 5000);
    assert_int_equal(free_of(e, "R1"), 0);
    /* cancel gives the bed back, once */
    engine_result k = op(e, OP_CANCEL, "x1", "s1", NULL, g.order, T0 + 6000);
    assert_int_equal(k.status, STATUS_DONE);
    assert_int_equal(last_event(e)->type, EVENT_CANCEL);
    assert_int_equal(free_of(e, "R1"), 1);
    assert_int_equal(op(e, OP_CANCEL, "x2", "s1", NULL, g.order, T0 + 6001).reason, REASON_UNKNOWN_ORDER);
    assert_int_equal(engine_ended_count(e), 1);
    engine_free(e);
}

static void test_expiry_frees_and_serves_the_waitlist(void **state)
{
    engine *e = dorm(1000);
    engine_result g = op(e, OP_CHOOSE, "c1", "s1", "R1", 0, T0);
    engine_result w = etest_decide(e, (engine_request){ .op = OP_CHOOSE, .id = "w", .user = "s2",
                                                        .seq = 2, .item = "R1", .wait = 1 }, T0 + 1);
    assert_int_equal(w.status, STATUS_WAITING);
    engine_drain_clear(e);
    assert_int_equal(engine_next_expiry(e), T0 + 1000);
    assert_int_equal(engine_expire(e, T0 + 1000), 1);
    const engine_event *ev = engine_event_at(e, 0);
    assert_int_equal(ev->type, EVENT_EXPIRE);
    assert_true(ev->order == g.order);
    /* the waiting student got the bed, held with a new order */
    assert_int_equal(engine_wait_done_count(e), 1);
    engine_result s;
    engine_wait_done_at(e, 0, NULL, &s);
    assert_int_equal(s.status, STATUS_GRANTED);
    assert_true(s.order != 0 && s.order != g.order);
    assert_int_equal(s.expires_at, T0 + 2000);
    /* a late confirm of the expired order says so */
    assert_int_equal(op(e, OP_CONFIRM, "k", "s1", NULL, g.order, T0 + 1001).reason, REASON_EXPIRED);
    engine_free(e);
}

static void test_release_ends_switch_keeps(void **state)
{
    engine *e = dorm(1000);
    engine_result g = op(e, OP_CHOOSE, "c1", "s1", "R1", 0, T0);
    assert_int_equal(op(e, OP_SWITCH, "sw", "s1", "R2", 0, T0 + 1).status, STATUS_GRANTED);
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, "s1", &v), 0);
    assert_string_equal(v.room, "R2");
    assert_true(v.room_order == g.order);                 /* the same hold, moved */
    assert_int_equal(v.room_expires_at, T0 + 1000);
    assert_int_equal(engine_expire(e, T0 + 1000), 1);   /* and it expires from R2 */
    assert_int_equal(free_of(e, "R2"), 2);
    assert_int_equal(free_of(e, "R1"), 1);
    engine_result h = op(e, OP_CHOOSE, "c2", "s2", "R1", 0, T0 + 2000);
    assert_int_equal(op(e, OP_RELEASE, "r", "s2", NULL, 0, T0 + 2001).status, STATUS_DONE);
    assert_int_equal(engine_next_expiry(e), INT64_MAX);   /* the hold ended with the bed */
    assert_int_equal(op(e, OP_CONFIRM, "k", "s2", NULL, h.order, T0 + 2002).reason, REASON_UNKNOWN_ORDER);
    engine_free(e);
}

static void test_group_members_hold_their_own(void **state)
{
    engine *e = dorm(500);
    static const char *const members[] = { "a", "b" }, *const prefs[] = { "R2" };
    engine_result g = etest_decide(e, (engine_request){ .op = OP_GROUP, .id = "g", .user = "b",
                                                        .seq = 1, .members = members, .n_members = 2,
                                                        .prefs = prefs, .n_prefs = 1 }, T0);
    assert_int_equal(g.status, STATUS_GRANTED);
    engine_user_view va, vb;
    engine_user_view_get(e, "a", &va);
    engine_user_view_get(e, "b", &vb);
    assert_true(va.room_order && vb.room_order && va.room_order != vb.room_order);
    assert_true(g.order == vb.room_order);                /* the requester's */
    op(e, OP_CONFIRM, "k", "a", NULL, va.room_order, T0 + 1);
    assert_int_equal(engine_expire(e, T0 + 500), 1);      /* only b's */
    assert_int_equal(free_of(e, "R2"), 1);
    engine_free(e);
}

static void test_without_hold_ms_confirm_is_wrong_kind(void **state)
{
    engine *e = dorm(0);
    engine_result g = op(e, OP_CHOOSE, "c1", "s1", "R1", 0, T0);
    assert_int_equal(g.order, 0);
    assert_int_equal(g.expires_at, 0);
    assert_int_equal(op(e, OP_CONFIRM, "k", "s1", NULL, 5, T0).reason, REASON_WRONG_KIND);
    engine_free(e);
}

static void test_load_holds_and_tombstones(void **state)
{
    engine *e = dorm(1000);
    assert_int_equal(engine_load_room_holder(e, "s1", "R1", T0, "c1"), 0);
    assert_int_equal(engine_load_order(e, "s1", 77, "R1", 1, ORDER_HELD, T0 + 1000), 0);
    assert_int_equal(engine_load_room_holder(e, "s2", "R2", T0, "c2"), 0);
    assert_int_equal(engine_load_order(e, "s2", 78, "R2", 1, ORDER_CONFIRMED, 0), 0);
    assert_int_equal(engine_load_order(e, "s3", 79, "R2", 1, ORDER_EXPIRED, 0), 0);
    assert_int_equal(engine_load_order(e, "s9", 80, "R2", 1, ORDER_HELD, T0), -ENOENT);  /* no bed */
    assert_null(engine_check_invariants(e));
    assert_int_equal(engine_next_expiry(e), T0 + 1000);
    assert_int_equal(op(e, OP_CONFIRM, "k", "s3", NULL, 79, T0 + 1).reason, REASON_EXPIRED);
    assert_int_equal(engine_expire(e, T0 + 1000), 1);       /* s1's, after the restart */
    assert_int_equal(free_of(e, "R1"), 1);
    assert_int_equal(free_of(e, "R2"), 1);                  /* s2's stays: confirmed */
    engine_free(e);
}

/* A held bed that expires or is cancelled is gone like a released one:
 * the open swap offers by or to its holder end `not_holding` (9.3), in the
 * same step; the counters move them from waiting to rejected. */
static void test_hold_end_ends_swap_offers(void **state)
{
    engine *e = dorm(1000);
    uint64_t o1 = op(e, OP_CHOOSE, "c1", "s1", "R1", 0, T0).order;
    uint64_t o2 = op(e, OP_CHOOSE, "c2", "s2", "R2", 0, T0).order;
    op(e, OP_CHOOSE, "c3", "s3", "R2", 0, T0);
    engine_drain_clear(e);
    engine_result w = etest_decide(e, (engine_request){ .op = OP_SWAP, .id = "w1", .user = "s1",
                                                        .seq = 1, .peer = "s2" }, T0 + 1);
    assert_int_equal(w.status, STATUS_WAITING);
    w = etest_decide(e, (engine_request){ .op = OP_SWAP, .id = "w2", .user = "s3", .seq = 1,
                                          .peer = "s2" }, T0 + 1);
    assert_int_equal(w.status, STATUS_WAITING);
    const engine_counters *c = engine_get_counters(e);
    int64_t processed = c->processed, rejected = c->rejected;
    assert_int_equal(engine_swap_open_count(e), 2);
    /* s2 cancels: the offer to s2 ends */
    engine_drain_clear(e);
    assert_int_equal(op(e, OP_CANCEL, "k2", "s2", NULL, o2, T0 + 2).status, STATUS_DONE);
    assert_int_equal(engine_swap_open_count(e), 0);   /* both offers were to s2 */
    assert_int_equal(engine_swap_resolved_count(e), 2);
    engine_swap_resolved r;
    engine_swap_resolved_at(e, 0, &r);
    assert_int_equal(r.res.status, STATUS_REJECTED);
    assert_int_equal(r.res.reason, REASON_NOT_HOLDING);
    assert_int_equal(c->processed, processed + 1);      /* the cancel; the offers were counted */
    assert_int_equal(c->rejected, rejected + 2);
    /* s1 offers to s3; s1's hold runs out: the offer ends with it */
    engine_drain_clear(e);
    w = etest_decide(e, (engine_request){ .op = OP_SWAP, .id = "w3", .user = "s1", .seq = 1,
                                          .peer = "s3" }, T0 + 3);
    assert_int_equal(w.status, STATUS_WAITING);
    engine_drain_clear(e);
    assert_true(engine_expire(e, T0 + 1000) >= 1);
    assert_null(engine_check_invariants(e));
    assert_int_equal(engine_swap_open_count(e), 0);
    assert_int_equal(engine_swap_resolved_count(e), 1);
    engine_swap_resolved_at(e, 0, &r);
    assert_string_equal(r.req, "w3");
    assert_int_equal(r.res.reason, REASON_NOT_HOLDING);
    (void)o1;
    engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grant_confirm_cancel),
        cmocka_unit_test(test_expiry_frees_and_serves_the_waitlist),
        cmocka_unit_test(test_release_ends_switch_keeps),
        cmocka_unit_test(test_group_members_hold_their_own),
        cmocka_unit_test(test_without_hold_ms_confirm_is_wrong_kind),
        cmocka_unit_test(test_load_holds_and_tombstones),
        cmocka_unit_test(test_hold_end_ends_swap_offers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
