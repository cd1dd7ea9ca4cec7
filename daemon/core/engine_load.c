/* engine_load.c -- loading a batch's state into a new engine, before its
 * first decision (the engine_load_* calls of engine.h): items and their
 * attrs, holders, orders, participants, counters and the admin state.
 *
 * Loaded state is the exception the engine's assertions are built around:
 * the store may hold more than an item's capacity or a user's per_user (an
 * operator lowered P:{B}:capacity or meta.per_user by hand between two
 * runs), and refusing to load it would stop the batch for good. Loading
 * accepts it and marks the item or user (ITEM_LOADED_OVER,
 * USER_LOADED_OVER); decisions never make it worse (a grant needs free >=
 * qty, set_capacity refuses to go below what is held), so outside the
 * marked records free >= 0 and units <= per_user hold exactly. Loading
 * marks nothing dirty and emits no events.
 */
#include "core/engine.h"
#include "engine_elig_int.h"
#include "engine_hold_int.h"
#include "engine_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int engine_load_item(engine *e, const char *id, int64_t capacity)
{
    if (!engine__id_ok(id) || capacity < 0) return -EINVAL;
    if (find_item(e, id) != STRMAP_NONE) return -EEXIST;
    return engine__item_add(e, id, capacity) == STRMAP_NONE ? -ENOMEM : 0;
}

int engine_load_attr(engine *e, const char *id, const char *key,
                     const char *value)
{
    if (!id || !key || !value) return -EINVAL;
    uint32_t i = find_item(e, id);
    if (i == STRMAP_NONE) return -ENOENT;
    item *it = &e->items[i];
    const char *k = engine__attr_intern(e, key), *v = engine__attr_intern(e, value);
    if (!k || !v) return -ENOMEM;
    /* A key given twice keeps the last value, like a JSON object would. */
    for (uint32_t j = 0; j < it->n_attrs; j++)
        if (it->attrs[j].key == k) {
            it->attrs[j].value = v;
            return engine__elig_attr(e, i, key, value);
        }
    attr *a = realloc(it->attrs, (it->n_attrs + 1) * sizeof *a);
    if (!a) return -ENOMEM;
    it->attrs = a;
    a[it->n_attrs++] = (attr){ k, v };
    return engine__elig_attr(e, i, key, value);   /* only_X, same_X (11.2) */
}

int engine_load_room_holder(engine *e, const char *uid, const char *room,
                            int64_t since, const char *req)
{
    if (!is_rooms(e) || !engine__id_ok(uid) || !room) return -EINVAL;
    uint32_t it = find_item(e, room);
    if (it == STRMAP_NONE) return -ENOENT;
    uint32_t ui = find_user(e, uid);
    if (ui != STRMAP_NONE && e->users[ui].u.r.room != NO_ROOM) return -EEXIST;
    char *r = req ? engine__intern(req) : NULL;
    if (req && !r) return -ENOMEM;
    if (ui == STRMAP_NONE) ui = engine__user_load(e, uid);
    if (ui == STRMAP_NONE) {
        free(r);
        return -ENOMEM;
    }
    user *u = &e->users[ui];
    u->u.r.room = it;
    u->u.r.since = since;
    u->u.r.req = r;
    engine__free_add(e, it, -1);   /* may go below 0: no grant until it is back */
    e->elig_stale = 1;   /* same_X: read from the holders at the first decision */
    if (e->items[it].free < 0) e->items[it].flags |= ITEM_LOADED_OVER;
    return 0;
}

static int order_state_ok(int state)
{
    return state >= ORDER_HELD && state <= ORDER_CANCELLED;
}

int engine_load_order(engine *e, const char *uid, uint64_t order,
                      const char *item_id, int64_t qty, int state,
                      int64_t expires_at)
{
    if (is_rooms(e) && engine__id_ok(uid) && item_id && order != 0 && order_state_ok(state))
        return engine__hold_load(e, uid, order, item_id, state, expires_at);
    if (is_rooms(e) || !engine__id_ok(uid) || !item_id || order == 0 || qty < 1 ||
        qty > INT32_MAX || !order_state_ok(state))
        return -EINVAL;
    uint32_t it = find_item(e, item_id);
    if (it == STRMAP_NONE) return -ENOENT;
    uint32_t ui = engine__user_load(e, uid);
    if (ui == STRMAP_NONE) return -ENOMEM;
    user *u = &e->users[ui];
    if (orders_find(u, order) != STRMAP_NONE) return -EEXIST;
    int held = state == ORDER_HELD;
    if (engine__orders_reserve(u) < 0 || (held && ENGINE__GROW(e, heap, 1) < 0)) return -ENOMEM;
    engine_order o = { .id = order, .item = it, .qty = (int32_t)qty,
                       .expires_at = expires_at, .state = (uint8_t)state };
    if (state == ORDER_CONFIRMED) o.expires_at = 0;
    if (order_is_live(o.state)) {
        engine__orders_add_live(u, o);
        engine__free_add(e, it, -qty);   /* may go below 0, like a room holder */
        e->elig_stale = 1;
        if (e->items[it].free < 0) e->items[it].flags |= ITEM_LOADED_OVER;
        if (u->u.s.units > e->meta.per_user) u->flags |= USER_LOADED_OVER;
    } else {
        engine__orders_add_tombstone(u, o);
    }
    if (held) engine__heap_push(e, (expiry){ expires_at, order, ui });
    return 0;
}

int engine_load_participant(engine *e, const char *uid)
{
    if (!engine__id_ok(uid)) return -EINVAL;
    return engine__user_load(e, uid) == STRMAP_NONE ? -ENOMEM : 0;
}

void engine_load_counters(engine *e, const engine_counters *c)
{
    e->counters.processed = c->processed;
    e->counters.granted = c->granted;
    e->counters.done = c->done;
    e->counters.rejected = c->rejected;
    e->counters.invalid = c->invalid;
    e->counters.dead = c->dead;
    e->counters.duplicates = c->duplicates;
    e->counters.ctl = c->ctl;
    e->counters.staff_granted = c->staff_granted;
    /* waiting is what was loaded; tickets never go back */
    if (e->counters.wait_joined < c->wait_joined) e->counters.wait_joined = c->wait_joined;
    e->counters.wait_served = c->wait_served;
    e->counters.wait_ended = c->wait_ended;
}

void engine_load_admin_state(engine *e, engine_admin_state s) { e->admin = s; }

int engine_load_staff(engine *e, const char *uid, uint64_t order)
{
    uint32_t ui = engine__id_ok(uid) ? find_user(e, uid) : STRMAP_NONE;
    if (ui == STRMAP_NONE) return engine__id_ok(uid) ? -ENOENT : -EINVAL;
    user *u = &e->users[ui];
    if (is_rooms(e)) {
        if (u->u.r.room == NO_ROOM) return -ENOENT;
        if (!(u->flags & USER_STAFF)) e->items[u->u.r.room].staff_held++;
        u->flags |= USER_STAFF;
        e->elig_stale = 1;
        return 0;
    }
    uint32_t o = orders_find(u, order);
    if (o == STRMAP_NONE || o >= u->u.s.n_live) return -ENOENT;
    engine_order *p = &u->u.s.orders[o];
    if (!p->staff) e->items[p->item].staff_held += p->qty;
    p->staff = 1;
    e->elig_stale = 1;
    return 0;
}
