/* test_engine_invariants.c -- the engine's own invariant checks.
 *
 * engine_check_invariants() must pass on every state the engine can reach
 * (including state loaded beyond capacity or per_user, which the engine
 * accepts) and must name the breach when the state is corrupt. The other
 * engine tests call it after every step; this file is about the second
 * half, and about the assertions that stop the process.
 *
 * Corrupting the state from outside: the engine offers no hook for it and
 * gets none. A user view's `orders` points into the engine's own array
 * (engine.h: read-only, valid until the next change), and item and user id
 * pointers are the engine's own copies, so a test can cast the const away
 * and write through them -- the object is not const, so that is defined.
 * That reaches orders and ids, which covers the checks on orders, units,
 * held + free, the reservation heap and the id maps; room fields and
 * counters cannot be reached, and are covered by the passing side only.
 *
 * Assertions that stop the process are tested in a child (fork): it must
 * die of SIGABRT with "invariant" on its stderr. The always-on ones do so
 * in every build; the sweep after decisions only in ALLOCD_DEBUG builds
 * (`make asan`), so that test expects a normal exit elsewhere.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine.h"

#define T0 1763800000000LL

/* ------------------------------------------------------------ fixtures */

static engine *mk(batch_kind kind, int64_t per_user, int64_t hold_ms)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = kind;
    m.groups = GROUPS_LISTED;   /* `group` with members */
    m.per_user = per_user;
    m.hold_ms = hold_ms;
    engine *e = engine_new(&m, 7);
    assert_non_null(e);
    return e;
}

/* sku1: 10 units, sku2: 3; per_user 4, reservations of 1 s. */
static engine *mk_stock(void)
{
    engine *e = mk(BATCH_STOCK, 4, 1000);
    assert_int_equal(engine_load_item(e, "sku1", 10), 0);
    assert_int_equal(engine_load_item(e, "sku2", 3), 0);
    return e;
}

/* R1: 2 beds, R2: 3 beds. */
static engine *mk_rooms(void)
{
    engine *e = mk(BATCH_ROOM, 1, 0);
    assert_int_equal(engine_load_item(e, "R1", 2), 0);
    assert_int_equal(engine_load_item(e, "R2", 3), 0);
    return e;
}

static engine_result decide(engine *e, engine_request r, int64_t now)
{
    engine_result out;
    if (!r.id) r.id = "req";
    engine_decide(e, &r, now, &out);
    return out;
}

static engine_result buy(engine *e, const char *u, const char *item, int64_t qty, int64_t now)
{
    return decide(e, (engine_request){ .op = OP_BUY, .user = u, .item = item, .qty = qty }, now);
}

static engine_result order_op(engine *e, engine_op op, const char *u, uint64_t order, int64_t now)
{
    return decide(e, (engine_request){ .op = op, .user = u, .order = order }, now);
}

static engine_result room_op(engine *e, engine_op op, const char *u, const char *room, int64_t now)
{
    return decide(e, (engine_request){ .op = op, .user = u, .item = room }, now);
}

static void assert_sound(const engine *e)
{
    const char *why = engine_check_invariants(e);
    if (why) fail_msg("invariant broken: %s", why);
}

static void assert_breach(const engine *e, const char *want)
{
    const char *why = engine_check_invariants(e);
    if (!why) fail_msg("expected the breach '%s', the check passed", want);
    if (!strstr(why, want)) fail_msg("expected the breach '%s', got '%s'", want, why);
}

/* Live order i of `user`, writable: see the note at the top. */
static engine_order *order_in(engine *e, const char *user, size_t i)
{
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, user, &v), 0);
    assert_true(i < v.n_orders);
    return (engine_order *)&v.orders[i];
}

/* A stock engine with u1 holding a reservation (order 1, 2 x sku1) and a
 * confirmed order (order 2, 1 x sku2), u2 a reservation (order 3, sku1). */
static engine *mk_stock_with_orders(void)
{
    engine *e = mk_stock();
    assert_int_equal(buy(e, "u1", "sku1", 2, T0).status, STATUS_GRANTED);
    assert_int_equal(buy(e, "u1", "sku2", 1, T0).status, STATUS_GRANTED);
    assert_int_equal(order_op(e, OP_CONFIRM, "u1", 2, T0).status, STATUS_DONE);
    assert_int_equal(buy(e, "u2", "sku1", 1, T0 + 10).status, STATUS_GRANTED);
    assert_sound(e);
    return e;
}

/* ------------------------------------------------------------ sound states */

static void test_sound_through_a_stock_sale(void **state)
{
    engine *e = mk_stock();
    assert_sound(e);
    assert_int_equal(buy(e, "u1", "sku2", 3, T0).status, STATUS_GRANTED);
    assert_int_equal(buy(e, "u2", "sku2", 1, T0).reason, REASON_SOLD_OUT);
    assert_int_equal(buy(e, "u2", "sku1", 4, T0).status, STATUS_GRANTED);
    assert_int_equal(buy(e, "u2", "sku1", 1, T0).reason, REASON_LIMIT);
    assert_sound(e);
    assert_int_equal(order_op(e, OP_CONFIRM, "u2", 2, T0 + 1).status, STATUS_DONE);
    assert_int_equal(order_op(e, OP_CANCEL, "u1", 1, T0 + 2).status, STATUS_DONE);
    assert_int_equal(order_op(e, OP_CANCEL, "u1", 1, T0 + 2).reason, REASON_UNKNOWN_ORDER);
    assert_sound(e);
    assert_int_equal(buy(e, "u3", "sku2", 2, T0 + 3).status, STATUS_GRANTED);
    assert_int_equal(engine_expire(e, T0 + 5000), 1);
    assert_sound(e);
    engine_drain_clear(e);
    assert_sound(e);
    assert_int_equal(decide(e, (engine_request){ .op = OP_SET_CAPACITY, .item = "sku1",
                                                 .qty = 4 }, T0 + 6000).status, STATUS_DONE);
    assert_int_equal(decide(e, (engine_request){ .op = OP_SET_CAPACITY, .item = "sku1",
                                                 .qty = 3 }, T0 + 6000).reason, REASON_LIMIT);
    assert_sound(e);
    engine_free(e);
}

static void test_sound_through_rooms(void **state)
{
    engine *e = mk_rooms();
    const char *members[] = { "a", "b", "c" };
    const char *prefs[] = { "R2" };
    assert_int_equal(decide(e, (engine_request){ .op = OP_GROUP, .user = "a",
                                                 .members = members, .n_members = 3,
                                                 .prefs = prefs, .n_prefs = 1 }, T0).status,
                     STATUS_GRANTED);
    assert_int_equal(room_op(e, OP_CHOOSE, "d", "R1", T0).status, STATUS_GRANTED);
    assert_int_equal(room_op(e, OP_SWITCH, "a", "R1", T0).status, STATUS_GRANTED);
    assert_int_equal(room_op(e, OP_CHOOSE, "e", "R1", T0).reason, REASON_ROOM_FULL);
    assert_sound(e);
    assert_int_equal(room_op(e, OP_RELEASE, "b", NULL, T0).status, STATUS_DONE);
    assert_sound(e);
    engine_drain_clear(e);
    assert_sound(e);
    engine_free(e);
}

/* The store may hold more than an item's capacity or a user's per_user (an
 * operator lowered them by hand). Loading accepts it; that is not a breach,
 * and decisions only ever bring it back within the limits. */
static void test_sound_when_loaded_beyond_limits(void **state)
{
    engine *e = mk_rooms();
    assert_int_equal(engine_load_room_holder(e, "a", "R1", T0, "r"), 0);
    assert_int_equal(engine_load_room_holder(e, "b", "R1", T0, "r"), 0);
    assert_int_equal(engine_load_room_holder(e, "c", "R1", T0, NULL), 0);
    assert_sound(e);   /* R1: 3 beds held of 2, free -1 */
    assert_int_equal(decide(e, (engine_request){ .op = OP_SET_CAPACITY, .item = "R1",
                                                 .qty = 2 }, T0).reason, REASON_LIMIT);
    assert_int_equal(room_op(e, OP_RELEASE, "a", NULL, T0).status, STATUS_DONE);
    assert_int_equal(room_op(e, OP_CHOOSE, "d", "R1", T0).reason, REASON_ROOM_FULL);
    assert_sound(e);
    assert_int_equal(room_op(e, OP_RELEASE, "b", NULL, T0).status, STATUS_DONE);
    assert_int_equal(room_op(e, OP_CHOOSE, "d", "R1", T0).status, STATUS_GRANTED);
    assert_sound(e);
    engine_free(e);

    e = mk(BATCH_STOCK, 1, 0);
    assert_int_equal(engine_load_item(e, "sku1", 1), 0);
    assert_int_equal(engine_load_order(e, "u1", 7, "sku1", 2, ORDER_CONFIRMED, 0), 0);
    assert_sound(e);   /* 2 units of 1, and past per_user 1 */
    assert_int_equal(buy(e, "u2", "sku1", 1, T0).reason, REASON_SOLD_OUT);
    assert_int_equal(order_op(e, OP_CANCEL, "u1", 7, T0).status, STATUS_DONE);
    assert_int_equal(buy(e, "u2", "sku1", 1, T0).status, STATUS_GRANTED);
    assert_sound(e);
    engine_free(e);
}

/* ------------------------------------------------------------ breaches */

static void test_breach_units_and_orders(void **state)
{
    engine *e = mk_stock_with_orders();
    order_in(e, "u1", 0)->qty += 1;   /* units says 3, the orders 4 */
    assert_breach(e, "units != the sum of live orders");
    order_in(e, "u1", 0)->qty -= 1;
    assert_sound(e);

    order_in(e, "u1", 1)->expires_at = T0 + 5;   /* confirmed yet expiring */
    assert_breach(e, "confirmed but still expiring");
    order_in(e, "u1", 1)->expires_at = 0;

    order_in(e, "u2", 0)->state = ORDER_CANCELLED;   /* ended, still counted live */
    assert_breach(e, "an ended order among the live ones");
    order_in(e, "u2", 0)->state = ORDER_HELD;

    uint64_t id = order_in(e, "u1", 1)->id;
    order_in(e, "u1", 1)->id = order_in(e, "u1", 0)->id;   /* confirm would hit the wrong one */
    assert_breach(e, "two live orders of one user share an id");
    order_in(e, "u1", 1)->id = id;
    assert_sound(e);
    engine_free(e);
}

static void test_breach_held_and_free(void **state)
{
    engine *e = mk_stock_with_orders();
    engine_order *o = order_in(e, "u1", 0);
    o->item ^= 1;   /* 2 units move from sku1 to sku2 without free moving */
    assert_breach(e, "held + free != capacity");
    o->item ^= 1;
    assert_sound(e);
    engine_free(e);
}

static void test_breach_reservations(void **state)
{
    engine *e = mk_stock_with_orders();
    order_in(e, "u2", 0)->expires_at += 1;   /* the heap has the old time */
    assert_breach(e, "disagree on the expiry");
    order_in(e, "u2", 0)->expires_at -= 1;

    /* A confirmed order turned back into a reservation has no heap entry:
     * it would never expire. (Order 2 was a reservation once, and confirm
     * leaves heap entries behind, so use one loaded as confirmed.) */
    assert_int_equal(engine_load_order(e, "u3", 99, "sku1", 1, ORDER_CONFIRMED, 0), 0);
    assert_sound(e);
    order_in(e, "u3", 0)->state = ORDER_HELD;
    order_in(e, "u3", 0)->expires_at = T0 + 1000;
    assert_breach(e, "held orders and live entries differ");
    order_in(e, "u3", 0)->state = ORDER_CONFIRMED;
    order_in(e, "u3", 0)->expires_at = 0;
    assert_sound(e);
    engine_free(e);
}

static void test_breach_id_maps(void **state)
{
    engine *e = mk_rooms();
    assert_int_equal(room_op(e, OP_CHOOSE, "s1", "R2", T0).status, STATUS_GRANTED);
    engine_user_view v;
    assert_int_equal(engine_user_view_get(e, "s1", &v), 0);
    char *room = (char *)v.room, *user = (char *)v.id;
    room[0] = 'X';   /* "X2": the item map no longer finds the room by its id */
    assert_breach(e, "item map");
    room[0] = 'R';
    user[0] = 'X';
    assert_breach(e, "user map");
    user[0] = 's';
    assert_sound(e);
    engine_free(e);
}

/* ------------------------------------------------------------ stopping */

/* Runs fn in a child with stderr captured. Returns its wait status. */
static int in_child(void (*fn)(void), char *err, size_t errlen)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t n = 0;
    for (ssize_t r; n + 1 < errlen && (r = read(p[0], err + n, errlen - 1 - n)) > 0;)
        n += (size_t)r;
    err[n] = '\0';
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void assert_aborted(int status, const char *err, const char *want)
{
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
        fail_msg("expected SIGABRT, got status %d; stderr: %s", status, err);
    if (!strstr(err, want)) fail_msg("expected '%s' on stderr, got: %s", want, err);
}

/* A cancel that would give back more units than are held. */
static void cancel_inflated_order(void)
{
    engine *e = mk_stock_with_orders();
    order_in(e, "u2", 0)->qty = 50;
    order_op(e, OP_CANCEL, "u2", 3, T0 + 20);
    engine_free(e);   /* not reached */
}

/* A corrupt state that no O(1) check meets: only the sweep finds it. */
static void decide_on_moved_order(void)
{
    engine *e = mk_stock_with_orders();
    order_in(e, "u1", 0)->item ^= 1;
    buy(e, "u3", "sku1", 1, T0 + 20);
    order_in(e, "u1", 0)->item ^= 1;
    engine_free(e);
}

static void test_always_on_assertion_stops(void **state)
{
    char err[4096];
    int status = in_child(cancel_inflated_order, err, sizeof err);
    assert_aborted(status, err, "invariant");
}

static void test_debug_sweep_stops(void **state)
{
    char err[4096];
    int status = in_child(decide_on_moved_order, err, sizeof err);
#if defined(ALLOCD_DEBUG) && ALLOCD_DEBUG
    assert_aborted(status, err, "held + free != capacity");
#else
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("release builds do not sweep; got status %d: %s", status, err);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sound_through_a_stock_sale),
        cmocka_unit_test(test_sound_through_rooms),
        cmocka_unit_test(test_sound_when_loaded_beyond_limits),
        cmocka_unit_test(test_breach_units_and_orders),
        cmocka_unit_test(test_breach_held_and_free),
        cmocka_unit_test(test_breach_reservations),
        cmocka_unit_test(test_breach_id_maps),
        cmocka_unit_test(test_always_on_assertion_stops),
        cmocka_unit_test(test_debug_sweep_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
