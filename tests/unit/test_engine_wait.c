/* test_engine_wait.c -- the engine's waitlist (core/engine_wait.h, contract
 * 9.5): who joins, in which order returned units and beds are served, the
 * rules checked again at serve time, wait_ms and close, pause and resume,
 * loading, and the events and counters that record it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/engine.h"
#include "core/engine_wait.h"
#include "etest.h"

#define T0 1763800000000LL

static engine *mk(batch_kind kind, int64_t per_user, int64_t hold_ms, int64_t wait_ms)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = kind;
    m.per_user = per_user;
    m.groups = GROUPS_LISTED;   /* the groups here name their members (9.2) */
    m.hold_ms = hold_ms;
    m.wait_ms = wait_ms;
    engine *e = engine_new(&m, 7);
    assert_non_null(e);
    return e;
}

/* A sound decision after which the counters add up, the waiting ones being
 * those on the waitlist. */
static engine_result run(engine *e, engine_request r, int64_t now)
{
    engine_result out = etest_decide(e, r, now);
    const engine_counters *c = engine_get_counters(e);
    assert_int_equal(c->processed, c->granted + c->done + c->rejected + c->invalid + c->waiting);
    assert_int_equal(c->waiting, (int64_t)engine_wait_count(e));
    return out;
}

static engine_result buy(engine *e, const char *id, const char *u, const char *item,
                         int64_t qty, int wait, int64_t now)
{
    return run(e, (engine_request){ .op = OP_BUY, .id = id, .user = u, .seq = 1,
                                    .item = item, .qty = qty, .wait = wait }, now);
}

static engine_result user_op(engine *e, engine_op op, const char *id, const char *u,
                             const char *room, uint64_t order, int wait, int64_t now)
{
    return run(e, (engine_request){ .op = op, .id = id, .user = u, .seq = 1, .item = room,
                                    .order = order, .wait = wait }, now);
}

static engine_result admin(engine *e, engine_op op, const char *item, int64_t qty, int64_t now)
{
    return run(e, (engine_request){ .op = op, .id = "c", .item = item, .qty = qty }, now);
}

static void expect_waiting(engine_result r, int64_t pos, int64_t no)
{
    assert_int_equal(r.status, STATUS_WAITING);
    assert_int_equal(r.wait_pos, pos);
    assert_int_equal(r.wait_no, no);
}

/* The i-th request that left the waitlist since the last drain. */
static engine_result done_at(engine *e, size_t i, const char *id)
{
    const engine_request *r;
    engine_result res;
    assert_true(i < engine_wait_done_count(e));
    engine_wait_done_at(e, i, &r, &res);
    assert_string_equal(r->id, id);
    return res;
}

static size_t count_events(engine *e, engine_event_type t)
{
    size_t n = 0;
    for (size_t i = 0; i < engine_event_count(e); i++) n += engine_event_at(e, i)->type == t;
    return n;
}

static void test_stock_cancel_serves_head(void **state)
{
    engine *e = mk(BATCH_STOCK, 1, 0, 0);
    assert_int_equal(engine_load_item(e, "sku", 1), 0);
    engine_result g = buy(e, "b1", "u1", "sku", 1, 1, T0);
    assert_int_equal(g.status, STATUS_GRANTED);
    expect_waiting(buy(e, "b2", "u2", "sku", 1, 1, T0 + 1), 1, 1);
    expect_waiting(buy(e, "b3", "u3", "sku", 1, 1, T0 + 2), 2, 2);
    /* without wait: the old answer */
    assert_int_equal(buy(e, "b4", "u4", "sku", 1, 0, T0 + 3).reason, REASON_SOLD_OUT);
    assert_int_equal(count_events(e, EVENT_WAIT), 2);
    engine_drain_clear(e);
    engine_result c = user_op(e, OP_CANCEL, "x1", "u1", NULL, g.order, 0, T0 + 10);
    assert_int_equal(c.status, STATUS_DONE);
    assert_int_equal(engine_wait_done_count(e), 1);
    engine_result s = done_at(e, 0, "b2");
    assert_int_equal(s.status, STATUS_GRANTED);
    assert_int_equal(s.rank, 2);
    assert_int_equal(count_events(e, EVENT_GRANT), 1);
    assert_int_equal(count_events(e, EVENT_WAIT_SERVED), 1);
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, "u2", &v), 0);
    assert_int_equal(v.units, 1);
    const engine_counters *k = engine_get_counters(e);
    assert_int_equal(k->waiting, 1);
    assert_int_equal(k->wait_served, 1);
    assert_int_equal(engine_wait_head(e), 2);
    engine_free(e);
}

static void test_stock_expiry_serves_in_order(void **state)
{
    engine *e = mk(BATCH_STOCK, 1, 1000, 0);
    assert_int_equal(engine_load_item(e, "sku", 2), 0);
    assert_int_equal(buy(e, "b1", "u1", "sku", 1, 1, T0).status, STATUS_GRANTED);
    assert_int_equal(buy(e, "b2", "u2", "sku", 1, 1, T0).status, STATUS_GRANTED);
    for (int i = 0; i < 3; i++) {
        char id[16], u[16];
        snprintf(id, sizeof id, "w%d", i);
        snprintf(u, sizeof u, "v%d", i);
        expect_waiting(buy(e, id, u, "sku", 1, 1, T0 + 1 + i), i + 1, i + 1);
    }
    engine_drain_clear(e);
    /* both reservations run out: the two oldest waiting get them, in the
     * same call, each with a reservation of its own */
    assert_int_equal(engine_expire(e, T0 + 1000), 2);
    assert_int_equal(engine_wait_done_count(e), 2);
    engine_result a = done_at(e, 0, "w0"), b = done_at(e, 1, "w1");
    assert_int_equal(a.status, STATUS_GRANTED);
    assert_int_equal(b.status, STATUS_GRANTED);
    assert_int_equal(a.expires_at, T0 + 2000);
    assert_int_equal(engine_wait_count(e), 1);
    engine_free(e);
}

static void test_per_user_rechecked_at_serve_time(void **state)
{
    engine *e = mk(BATCH_STOCK, 1, 0, 0);
    assert_int_equal(engine_load_item(e, "a", 1), 0);
    assert_int_equal(engine_load_item(e, "b", 1), 0);
    engine_result g = buy(e, "g", "owner", "a", 1, 0, T0);
    expect_waiting(buy(e, "w1", "u1", "a", 1, 1, T0 + 1), 1, 1);
    expect_waiting(buy(e, "w2", "u2", "a", 1, 1, T0 + 2), 2, 2);
    /* u1 meanwhile bought b: per_user 1 is full */
    assert_int_equal(buy(e, "x", "u1", "b", 1, 0, T0 + 3).status, STATUS_GRANTED);
    /* joining is refused when the limit alone would refuse it */
    assert_int_equal(buy(e, "w3", "u1", "a", 1, 1, T0 + 4).reason, REASON_LIMIT);
    engine_drain_clear(e);
    user_op(e, OP_CANCEL, "c", "owner", NULL, g.order, 0, T0 + 5);
    assert_int_equal(engine_wait_done_count(e), 2);
    assert_int_equal(done_at(e, 0, "w1").reason, REASON_LIMIT);     /* final: limit */
    assert_int_equal(done_at(e, 1, "w2").status, STATUS_GRANTED);  /* the next one */
    assert_int_equal(engine_get_counters(e)->wait_served, 2);
    engine_free(e);
}

static void test_bigger_request_does_not_block(void **state)
{
    engine *e = mk(BATCH_STOCK, 5, 0, 0);
    assert_int_equal(engine_load_item(e, "sku", 2), 0);
    engine_result g = buy(e, "g", "o", "sku", 2, 0, T0);
    expect_waiting(buy(e, "big", "u1", "sku", 2, 1, T0 + 1), 1, 1);
    expect_waiting(buy(e, "small", "u2", "sku", 1, 1, T0 + 2), 2, 2);
    engine_drain_clear(e);
    /* one unit back: only the small one fits; the big one keeps its place */
    assert_int_equal(admin(e, OP_SET_CAPACITY, "sku", 3, T0 + 3).status, STATUS_DONE);
    assert_int_equal(engine_wait_done_count(e), 1);
    assert_int_equal(done_at(e, 0, "small").status, STATUS_GRANTED);
    assert_int_equal(engine_wait_head(e), 1);
    engine_drain_clear(e);
    user_op(e, OP_CANCEL, "c", "o", NULL, g.order, 0, T0 + 4);
    assert_int_equal(done_at(e, 0, "big").status, STATUS_GRANTED);
    assert_int_equal(engine_wait_count(e), 0);
    engine_free(e);
}

static void test_wait_ms_and_close_end_the_wait(void **state)
{
    engine *e = mk(BATCH_STOCK, 1, 0, 500);
    assert_int_equal(engine_load_item(e, "sku", 0), 0);
    expect_waiting(buy(e, "w1", "u1", "sku", 1, 1, T0), 1, 1);
    expect_waiting(buy(e, "w2", "u2", "sku", 1, 1, T0 + 100), 2, 2);
    assert_int_equal(engine_next_expiry(e), T0 + 500);
    engine_drain_clear(e);
    engine_expire(e, T0 + 499);
    assert_int_equal(engine_wait_done_count(e), 0);
    engine_expire(e, T0 + 500);
    assert_int_equal(engine_wait_done_count(e), 1);
    engine_result r = done_at(e, 0, "w1");
    assert_int_equal(r.status, STATUS_REJECTED);
    assert_int_equal(r.reason, REASON_SOLD_OUT);
    assert_int_equal(engine_next_expiry(e), T0 + 600);
    engine_drain_clear(e);
    admin(e, OP_CLOSE, NULL, 0, T0 + 550);
    assert_int_equal(done_at(e, 0, "w2").reason, REASON_SOLD_OUT);
    const engine_counters *c = engine_get_counters(e);
    assert_int_equal(c->waiting, 0);
    assert_int_equal(c->wait_ended, 2);
    assert_int_equal(c->wait_served, 0);
    assert_int_equal(engine_next_expiry(e), INT64_MAX);
    engine_free(e);
}

static void test_paused_keeps_the_wait_resume_serves(void **state)
{
    engine *e = mk(BATCH_STOCK, 1, 0, 0);
    assert_int_equal(engine_load_item(e, "sku", 0), 0);
    expect_waiting(buy(e, "w1", "u1", "sku", 1, 1, T0), 1, 1);
    admin(e, OP_PAUSE, NULL, 0, T0 + 1);
    admin(e, OP_SET_CAPACITY, "sku", 1, T0 + 2);
    assert_int_equal(engine_wait_count(e), 1);       /* not while paused */
    engine_drain_clear(e);
    admin(e, OP_RESUME, NULL, 0, T0 + 3);
    assert_int_equal(done_at(e, 0, "w1").status, STATUS_GRANTED);
    engine_free(e);
}

static engine *mk_dorm(void)
{
    engine *e = mk(BATCH_ROOM, 1, 0, 0);
    assert_int_equal(engine_load_item(e, "R1", 1), 0);
    assert_int_equal(engine_load_item(e, "R3", 3), 0);
    return e;
}

static void test_rooms_release_and_switch_serve(void **state)
{
    engine *e = mk_dorm();
    assert_int_equal(user_op(e, OP_CHOOSE, "a", "s1", "R1", 0, 0, T0).status, STATUS_GRANTED);
    expect_waiting(user_op(e, OP_CHOOSE, "w1", "s2", "R1", 0, 1, T0 + 1), 1, 1);
    expect_waiting(user_op(e, OP_CHOOSE, "w2", "s3", "R1", 0, 1, T0 + 2), 2, 2);
    engine_drain_clear(e);
    /* s1 moves to R3: R1's bed goes to s2 in the same call */
    assert_int_equal(user_op(e, OP_SWITCH, "sw", "s1", "R3", 0, 0, T0 + 3).status, STATUS_GRANTED);
    assert_int_equal(done_at(e, 0, "w1").status, STATUS_GRANTED);
    engine_drain_clear(e);
    assert_int_equal(user_op(e, OP_RELEASE, "rl", "s2", NULL, 0, 0, T0 + 4).status, STATUS_DONE);
    assert_int_equal(done_at(e, 0, "w2").status, STATUS_GRANTED);
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, "s3", &v), 0);
    assert_string_equal(v.room, "R1");
    engine_free(e);
}

static void test_group_waits_without_blocking(void **state)
{
    engine *e = mk_dorm();
    static const char *const three[] = { "g1", "g2", "g3" }, *const r3[] = { "R3" };
    for (int i = 0; i < 3; i++) {
        char id[16], u[16];
        snprintf(id, sizeof id, "o%d", i);
        snprintf(u, sizeof u, "o%d", i);
        assert_int_equal(user_op(e, OP_CHOOSE, id, u, "R3", 0, 0, T0).status, STATUS_GRANTED);
    }
    engine_result g = run(e, (engine_request){ .op = OP_GROUP, .id = "grp", .user = "g1", .seq = 1,
                                               .members = three, .n_members = 3, .prefs = r3,
                                               .n_prefs = 1, .wait = 1 }, T0 + 1);
    expect_waiting(g, 1, 1);
    engine_result a = run(e, (engine_request){ .op = OP_AUTO, .id = "one", .user = "s9", .seq = 2,
                                               .prefs = r3, .n_prefs = 1, .wait = 1 }, T0 + 2);
    expect_waiting(a, 2, 2);
    engine_drain_clear(e);
    /* one bed back: the group needs three, the single behind it is served */
    user_op(e, OP_RELEASE, "r0", "o0", NULL, 0, 0, T0 + 3);
    assert_int_equal(engine_wait_done_count(e), 1);
    assert_int_equal(done_at(e, 0, "one").status, STATUS_GRANTED);
    engine_drain_clear(e);
    user_op(e, OP_RELEASE, "r1", "o1", NULL, 0, 0, T0 + 4);
    assert_int_equal(engine_wait_done_count(e), 0);   /* 1 free: still not 3 */
    user_op(e, OP_RELEASE, "r2", "o2", NULL, 0, 0, T0 + 5);
    user_op(e, OP_RELEASE, "r9", "s9", NULL, 0, 0, T0 + 6);
    assert_int_equal(engine_wait_done_count(e), 1);
    engine_result s = done_at(e, 0, "grp");
    assert_int_equal(s.status, STATUS_GRANTED);
    assert_string_equal(s.item, "R3");
    assert_int_equal(count_events(e, EVENT_GRANT), 3);
    engine_free(e);
}

static void test_load_keeps_ticket_order(void **state)
{
    engine *e = mk(BATCH_STOCK, 1, 0, 0);
    assert_int_equal(engine_load_item(e, "sku", 1), 0);
    engine_request r3 = { .op = OP_BUY, .id = "w3", .user = "u3", .seq = 9, .item = "sku", .qty = 1 };
    engine_request r1 = { .op = OP_BUY, .id = "w1", .user = "u1", .seq = 4, .item = "sku", .qty = 1 };
    assert_int_equal(engine_wait_load(e, &r3, 7, T0, REASON_SOLD_OUT), 0);
    assert_int_equal(engine_wait_load(e, &r1, 5, T0, REASON_SOLD_OUT), 0);
    assert_int_equal(engine_wait_load(e, &r1, 5, T0, REASON_SOLD_OUT), -EEXIST);
    assert_int_equal(engine_wait_load(e, &r1, 6, T0, REASON_LIMIT), -EINVAL);
    assert_int_equal(engine_load_participant(e, "u1"), 0);
    assert_int_equal(engine_load_participant(e, "u3"), 0);
    engine_load_counters(e, &(engine_counters){ .processed = 2, .wait_joined = 7 });
    /* the loaded store had a free unit: the first call serves ticket 5 */
    engine_expire(e, T0 + 1);
    assert_int_equal(engine_wait_done_count(e), 1);
    const engine_request *q;
    engine_result res;
    engine_wait_done_at(e, 0, &q, &res);
    assert_string_equal(q->id, "w1");
    assert_int_equal(q->seq, 4);
    assert_int_equal(res.status, STATUS_GRANTED);
    assert_int_equal(engine_wait_head(e), 7);
    /* the next ticket continues after the loaded ones */
    expect_waiting(buy(e, "w9", "u9", "sku", 1, 1, T0 + 2), 2, 8);
    engine_free(e);
}

/* An order source with `left` ids, then none (a worker's block running
 * out). */
static uint64_t few_ids(void *ctx)
{
    uint64_t *left = ctx;
    if (*left == 0) return 0;
    return 1000 + (*left)--;
}

/* Units coming back in bulk may need more order ids than the shell has in
 * hand: the pass stops without taking an id it does not have (no order 0,
 * nobody skipped), says so, and goes on at the next call. */
static void test_serving_stops_without_order_ids(void **state)
{
    engine *e = mk(BATCH_STOCK, 1, 0, 0);
    uint64_t left = 2;
    engine_set_order_source(e, few_ids, &left);
    assert_int_equal(engine_load_item(e, "sku", 0), 0);
    for (int i = 0; i < 5; i++) {
        char id[16], u[16];
        snprintf(id, sizeof id, "w%d", i);
        snprintf(u, sizeof u, "v%d", i);
        expect_waiting(buy(e, id, u, "sku", 1, 1, T0 + i), i + 1, i + 1);
    }
    engine_drain_clear(e);
    admin(e, OP_SET_CAPACITY, "sku", 5, T0 + 10);
    assert_int_equal(engine_wait_done_count(e), 2);
    assert_string_equal(done_at(e, 0, "w0").item, "sku");
    done_at(e, 1, "w1");
    assert_true(engine_wait_stalled(e));
    assert_int_equal(engine_next_expiry(e), INT64_MAX);
    engine_drain_clear(e);
    left = 10;                                   /* the shell brought a block */
    engine_expire(e, T0 + 11);
    assert_false(engine_wait_stalled(e));
    assert_int_equal(engine_wait_done_count(e), 3);
    done_at(e, 0, "w2");
    done_at(e, 2, "w4");
    assert_int_equal(engine_wait_count(e), 0);
    engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stock_cancel_serves_head),
        cmocka_unit_test(test_stock_expiry_serves_in_order),
        cmocka_unit_test(test_per_user_rechecked_at_serve_time),
        cmocka_unit_test(test_bigger_request_does_not_block),
        cmocka_unit_test(test_wait_ms_and_close_end_the_wait),
        cmocka_unit_test(test_paused_keeps_the_wait_resume_serves),
        cmocka_unit_test(test_rooms_release_and_switch_serve),
        cmocka_unit_test(test_group_waits_without_blocking),
        cmocka_unit_test(test_load_keeps_ticket_order),
        cmocka_unit_test(test_serving_stops_without_order_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
