/* engine_view.c -- reading an engine without changing it: views of users
 * and items for the writer (wire/records), and the drain lists of what a
 * chunk changed, which the worker turns into its transaction. */
#include "core/engine.h"

#include <errno.h>
#include <string.h>

#include "engine_groups_int.h"
#include "engine_hold_int.h"
#include "engine_state.h"
#include "engine_swap_int.h"
#include "engine_wait_int.h"

/* The orders pointer of a view is into the user's own array: valid until
 * the next call that changes state, which is all the writer needs. */
static void user_view(const engine *e, uint32_t ui, engine_user_view *v)
{
    const user *u = &e->users[ui];
    memset(v, 0, sizeof *v);
    v->id = u->id;
    if (is_rooms(e)) {
        if (u->u.r.room != NO_ROOM) {
            v->room = e->items[u->u.r.room].id;
            v->since = u->u.r.since;
            v->req = u->u.r.req;
            engine__hold_view(e, ui, v);
            v->staff = (u->flags & USER_STAFF) != 0;
        }
        v->group = engine__groups_user_group(e, ui);
    } else {
        v->units = u->u.s.units;
        v->orders = u->u.s.orders;
        v->n_orders = u->u.s.n_live;   /* tombstones are not holdings */
    }
}

static void item_view(const engine *e, uint32_t it, engine_item_view *v)
{
    const item *p = &e->items[it];
    v->id = p->id;
    v->capacity = p->capacity;
    v->free = p->free;
}

int engine_user_view_get(const engine *e, const char *uid, engine_user_view *v)
{
    uint32_t ui = find_user(e, uid);
    if (ui == STRMAP_NONE) return -ENOENT;
    user_view(e, ui, v);
    return 0;
}

int engine_item_view_get(const engine *e, const char *id, engine_item_view *v)
{
    uint32_t it = find_item(e, id);
    if (it == STRMAP_NONE) return -ENOENT;
    item_view(e, it, v);
    return 0;
}

size_t engine_item_count(const engine *e) { return e->n_items; }

void engine_item_view_at(const engine *e, size_t i, engine_item_view *v)
{
    item_view(e, (uint32_t)i, v);
}

size_t engine_user_count(const engine *e) { return e->n_users; }

void engine_user_view_at(const engine *e, size_t i, engine_user_view *v)
{
    user_view(e, (uint32_t)i, v);
}

/* ---------------------------------------------------------------- drain */

size_t engine_dirty_user_count(const engine *e) { return e->n_dirty_users; }

void engine_dirty_user_at(const engine *e, size_t i, engine_user_view *v)
{
    user_view(e, e->dirty_users[i], v);
}

size_t engine_dirty_item_count(const engine *e) { return e->n_dirty_items; }

void engine_dirty_item_at(const engine *e, size_t i, engine_item_view *v,
                          int *capacity_changed)
{
    uint32_t it = e->dirty_items[i];
    item_view(e, it, v);
    if (capacity_changed)
        *capacity_changed = (e->items[it].flags & ITEM_CAP_CHANGED) != 0;
}

size_t engine_new_participant_count(const engine *e) { return e->n_fresh; }

const char *engine_new_participant_at(const engine *e, size_t i)
{
    return e->users[e->fresh[i]].id;
}

size_t engine_ended_count(const engine *e) { return e->n_ended; }

void engine_ended_at(const engine *e, size_t i, const char **uid,
                     engine_order *order)
{
    if (uid) *uid = e->users[e->ended[i].user].id;
    if (order) *order = e->ended[i].order;
}

size_t engine_event_count(const engine *e) { return e->n_events; }

const engine_event *engine_event_at(const engine *e, size_t i)
{
    return &e->events[i];
}

void engine_drain_clear(engine *e)
{
    for (size_t i = 0; i < e->n_dirty_users; i++)
        e->users[e->dirty_users[i]].flags &= (uint8_t)~USER_DIRTY;
    for (size_t i = 0; i < e->n_dirty_items; i++)
        e->items[e->dirty_items[i]].flags &= (uint8_t)~(ITEM_DIRTY | ITEM_CAP_CHANGED);
    e->n_dirty_users = e->n_dirty_items = e->n_fresh = e->n_ended = e->n_events = 0;
    engine__groups_drain_clear(e);
    engine__swaps_drain_clear(e);
    engine__wait_drain_clear(e);
}
