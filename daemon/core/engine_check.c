/* engine_check.c -- engine_check_invariants(): a sweep of the whole state
 * for every invariant whose breach would mean corruption (held + free ==
 * capacity per item, per_user, the reservation heap, the maps, the drain
 * lists). engine_state.c asserts in O(1) what each change must keep true; this
 * file checks everything at once, after decisions in ALLOCD_DEBUG builds
 * and whenever a test asks. */
#include "core/engine.h"
#include "core/assert.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_check_int.h"
#include "engine_groups_int.h"
#include "engine_hold_int.h"
#include "engine_state.h"
#include "engine_swap_int.h"
#include "engine_wait_int.h"

/* What the pass over the users found, for the checks that follow it. */
typedef struct sweep {
    int64_t *held;          /* per item: units (beds) the users hold */
    int64_t *staff;         /* per item: of those, placed by staff without check */
    uint8_t *seen;          /* per user or item: marks, to find repeats */
    size_t dirty_users;     /* users flagged USER_DIRTY */
    size_t dirty_items;     /* items flagged ITEM_DIRTY */
    size_t held_orders;     /* HELD orders: each needs one live heap entry */
} sweep;

/* Lists fit their arrays; the enums hold one of their values. */
static const char *check_shape(const engine *e)
{
    if (e->meta.kind != BATCH_STOCK && e->meta.kind != BATCH_ROOM) return "meta: unknown batch kind";
    if (e->admin != ADMIN_NONE && e->admin != ADMIN_PAUSED && e->admin != ADMIN_CLOSED)
        return "admin state out of range";
    if (e->error != 0 && e->error != -ENOMEM) return "error is neither 0 nor -ENOMEM";
    if (e->n_users > e->cap_users || e->n_items > e->cap_items || e->n_heap > e->cap_heap ||
        e->n_events > e->cap_events || e->n_dirty_users > e->cap_dirty_users ||
        e->n_dirty_items > e->cap_dirty_items || e->n_fresh > e->cap_fresh ||
        e->n_ended > e->cap_ended || e->n_free_items > e->cap_free_items || e->cap_free_items < e->n_items)
        return "a list is longer than its array";
    return NULL;
}

/* free_items holds exactly the items with a unit free, each once, and
 * each item knows its place there. */
static const char *check_free_items(const engine *e)
{
    size_t with_free = 0;
    for (size_t it = 0; it < e->n_items; it++) {
        const item *p = &e->items[it];
        with_free += p->free > 0;
        if ((p->free > 0) != (p->free_at != 0))
            return "free_items: an item in it without a free unit, or not in it with one";
        if (p->free_at && (p->free_at > e->n_free_items || e->free_items[p->free_at - 1] != it))
            return "free_items: an item's place there holds another item";
    }
    return with_free == e->n_free_items ? NULL : "free_items: a length other than the items with a free unit";
}

/* A bed in a room that exists, and a request id and a staff mark (11.5)
 * only with a bed. */
static const char *check_room_user(const engine *e, const user *u, sweep *w)
{
    if (u->u.r.room == NO_ROOM && (u->flags & USER_STAFF)) return "room user: staff mark without a bed";
    if (u->u.r.room == NO_ROOM)
        return u->u.r.req ? "room user: request id kept without a bed" : NULL;
    if (u->u.r.room >= e->n_items) return "room user: bed in a room that does not exist";
    w->held[u->u.r.room]++;
    w->staff[u->u.r.room] += (u->flags & USER_STAFF) != 0;
    return NULL;
}

/* Live orders first, then tombstones; units is the sum of the live ones. */
static const char *check_stock_user(const engine *e, const user *u, sweep *w)
{
    const engine_order *v = u->u.s.orders;
    uint32_t n_live = u->u.s.n_live, n = u->u.s.n_orders;
    int64_t units = 0;
    if (n_live > n || (n && !v)) return "stock user: order counts broken";
    for (uint32_t i = 0; i < n; i++) {
        const engine_order *o = &v[i];
        if (o->id == 0 || o->item >= e->n_items || o->qty < 1)
            return "order: id 0, unknown item or qty < 1";
        if (i < n_live ? !order_is_live(o->state) : !order_is_tombstone(o->state))
            return "order: an ended order among the live ones, or a live one among the ended";
        if (i >= n_live) continue;
        if (o->state == ORDER_CONFIRMED && o->expires_at != 0)
            return "order: confirmed but still expiring";
        /* confirm and cancel find an order by id: the first one must be it */
        if (orders_find(u, o->id) != i) return "order: two live orders of one user share an id";
        units += o->qty;
        w->held[o->item] += o->qty;
        w->staff[o->item] += o->staff ? o->qty : 0;
        w->held_orders += o->state == ORDER_HELD;
    }
    if (units != u->u.s.units) return "stock user: units != the sum of live orders";
    if (units > e->meta.per_user && !(u->flags & USER_LOADED_OVER))
        return "stock user: holds more than per_user";
    return NULL;
}

static const char *check_users(const engine *e, sweep *w)
{
    if (e->counters.participants != (int64_t)e->n_users) return "participants != number of users";
    for (uint32_t i = 0; i < e->n_users; i++) {
        const user *u = &e->users[i];
        if (!u->id || find_user(e, u->id) != i) return "user map: a user's id does not find it";
        w->dirty_users += (u->flags & USER_DIRTY) != 0;
        const char *why = is_rooms(e) ? check_room_user(e, u, w) : check_stock_user(e, u, w);
        if (why) return why;
    }
    return NULL;
}

/* held + free == capacity, exactly: free is never clamped (see the note at
 * the top), so this holds for items loaded beyond capacity too. */
static const char *check_items(const engine *e, sweep *w)
{
    int64_t free_sum = 0;
    for (uint32_t i = 0; i < e->n_items; i++) {
        const item *p = &e->items[i];
        if (!p->id || find_item(e, p->id) != i) return "item map: an item's id does not find it";
        if (p->capacity < 0) return "item: capacity < 0";
        if (p->capacity - p->free != w->held[i]) return "item: held + free != capacity";
        if (p->staff_held != w->staff[i]) return "item: staff_held != the units staff exceptions hold";
        if (p->free < 0 && !(p->flags & ITEM_LOADED_OVER)) return "item: free < 0";
        if ((p->flags & ITEM_CAP_CHANGED) && !(p->flags & ITEM_DIRTY))
            return "item: capacity changed but not dirty";
        w->dirty_items += (p->flags & ITEM_DIRTY) != 0;
        free_sum += p->free;
    }
    if (free_sum != e->counters.free_units) return "free_units != the sum of free";
    return NULL;
}

/* A heap on (at, order) whose top is live, and one live entry, at the
 * order's expires_at, for every HELD order (else it would never expire). */
static const char *check_heap(const engine *e, const sweep *w)
{
    size_t live = 0;
    if (is_rooms(e)) return engine__hold_check(e);
    for (size_t i = 0; i < e->n_heap; i++) {
        const expiry *x = &e->heap[i];
        if (x->user >= e->n_users) return "heap: entry of an unknown user";
        if (i && expiry_less(x, &e->heap[(i - 1) / 2])) return "heap: entry before its parent";
        if (!expiry_live(e, x)) continue;
        const user *u = &e->users[x->user];
        if (u->u.s.orders[orders_find(u, x->order)].expires_at != x->at)
            return "heap: entry and order disagree on the expiry";
        live++;
    }
    if (e->n_heap && !expiry_live(e, &e->heap[0])) return "heap: top entry is not a held order";
    if (live != w->held_orders) return "heap: held orders and live entries differ";
    return NULL;
}

/* Each of v[0..n) below `limit` and none twice; leaves seen[] all 0. */
static int distinct(uint8_t *seen, const uint32_t *v, size_t n, size_t limit)
{
    size_t i = 0;
    int ok = 1;
    for (; i < n && ok; i++) {
        ok = v[i] < limit && !seen[v[i]];
        if (ok) seen[v[i]] = 1;
    }
    for (size_t j = 0; j < i; j++)
        if (v[j] < limit) seen[v[j]] = 0;
    return ok;
}

/* The drain lists: every flagged record listed once, nothing else; ended
 * orders are tombstones of their user (an ended order is never held). */
static const char *check_outputs(const engine *e, const sweep *w)
{
    if (w->dirty_users != e->n_dirty_users ||
        !distinct(w->seen, e->dirty_users, e->n_dirty_users, e->n_users))
        return "dirty users: flags and list differ";
    for (size_t i = 0; i < e->n_dirty_users; i++)
        if (!(e->users[e->dirty_users[i]].flags & USER_DIRTY)) return "dirty users: listed, not flagged";
    if (w->dirty_items != e->n_dirty_items ||
        !distinct(w->seen, e->dirty_items, e->n_dirty_items, e->n_items))
        return "dirty items: flags and list differ";
    for (size_t i = 0; i < e->n_dirty_items; i++)
        if (!(e->items[e->dirty_items[i]].flags & ITEM_DIRTY)) return "dirty items: listed, not flagged";
    if (!distinct(w->seen, e->fresh, e->n_fresh, e->n_users))
        return "new participants: unknown or listed twice";
    for (size_t i = 0; i < e->n_ended; i++) {
        const ended *x = &e->ended[i];
        if (x->user >= e->n_users || !order_is_tombstone(x->order.state))
            return "ended orders: not a tombstone";
        if (is_rooms(e)) continue;   /* room orders: engine_hold_check */
        const user *u = &e->users[x->user];
        uint32_t oi = orders_find(u, x->order.id);
        if (oi == STRMAP_NONE || !order_is_tombstone(u->u.s.orders[oi].state))
            return "ended orders: the order is still live";
    }
    return NULL;
}

const char *engine_check_invariants(const engine *e)
{
    const char *why = check_shape(e);
    if (!why) why = check_free_items(e);
    if (why) return why;
    size_t n_seen = e->n_users > e->n_items ? e->n_users : e->n_items;
    sweep w = { .held = calloc(e->n_items + 1, sizeof *w.held),
                .staff = calloc(e->n_items + 1, sizeof *w.staff),
                .seen = calloc(n_seen + 1, 1) };
    /* Without memory for the scratch arrays there is nothing to check
     * with: that is not a breach. */
    if (w.held && w.staff && w.seen && !(why = check_users(e, &w)) && !(why = check_items(e, &w)) &&
        !(why = check_heap(e, &w)) && !(why = check_outputs(e, &w)) && !(why = engine__groups_check(e)))
        why = engine__swaps_check(e);
    if (!why) why = engine__wait_check(e);
    free(w.held);
    free(w.staff);
    free(w.seen);
    return why;
}

/* ALLOCD_DEBUG builds sweep the whole state after decisions and expiries.
 * A sweep costs O(users + items + orders), so it runs after every call
 * only while the engine has fewer than SWEEP_BUDGET records (users + items
 * + reservations: every unit test), then every size / SWEEP_BUDGET-th
 * call, which costs about SWEEP_BUDGET record checks a decision -- near
 * what the decision itself costs. Sweeping a 10,000-user batch after
 * every decision made one 4096-request chunk take seconds under ASan, and
 * the daemon lost its lease (tests/integration/test_stock.c,
 * test_many_grants_never_reload); an O(1) check per change still runs on
 * every decision. */
#define SWEEP_BUDGET 64

void engine__debug_sweep(engine *e)
{
    if (!ALLOC_DEBUG) return;
    size_t size = e->n_users + e->n_items + e->n_heap;
    if (++e->unchecked < size / SWEEP_BUDGET) return;
    e->unchecked = 0;
    const char *why = engine_check_invariants(e);
    if (why) ALLOC_PANIC(why);
}
