/* engine_hold.c -- holds for rooms (contract 9.4): with meta hold_ms > 0 a
 * granted bed is held, with an order id and expires_at, until `confirm`
 * (the deposit is paid); `cancel` or expiry frees it. The same rules as a
 * stock reservation (engine_stock.c), kept apart because a room user has no
 * orders array: the user record's memory budget (engine_state.h) has no room
 * for one, so the hold lives in a side array by user index, allocated only
 * for room batches with hold_ms.
 *
 * - A hold belongs to the user, not to the room: `switch` moves the bed
 *   and keeps the order, its state and its deadline (a student who paid the
 *   deposit does not pay again for another room); `release` ends it.
 * - Expiry uses the engine's one heap of (expires_at, order, user); an
 *   entry is live while that user's hold is still HELD with that order.
 * - An order that ended (expired, cancelled) is remembered, also across a
 *   restart (P:{B}:orders_ended, as for stock), so a late confirm answers
 *   `expired` and a cancel of a cancelled order `unknown_order`.
 * - Events: the grant carries order and expires_at; confirm, cancel and
 *   expire are the stock events with item = the room and qty 1, so one
 *   replayer reads both kinds.
 */
#include "core/assert.h"
#include "engine_hold_int.h"
#include "engine_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The grant event engine__seat() just emitted for user ui: it gets the order. */
static engine_event *last_grant_of(engine *e, const char *uid)
{
    for (size_t i = e->n_events; i-- > 0;)
        if (e->events[i].type == EVENT_GRANT && e->events[i].user == uid) return &e->events[i];
    return NULL;
}

void engine__hold_start(engine *e, uint32_t ui, int64_t now, engine_result *out)
{
    if (!engine__hold_on(e)) return;
    struct room_hold *h = engine__hold_of(e, ui);
    ALLOC_ASSERT(h && h->state == 0 && e->n_heap < e->cap_heap);   /* reserved */
    h->order = engine__order_id_new(e);
    ALLOC_ASSERT(h->order != 0);   /* the shell provides ids for every grant */
    h->expires_at = now > INT64_MAX - e->meta.hold_ms ? INT64_MAX : now + e->meta.hold_ms;
    h->state = ORDER_HELD;
    engine__heap_push(e, (expiry){ h->expires_at, h->order, ui });
    engine_event *ev = last_grant_of(e, e->users[ui].id);
    ALLOC_ASSERT(ev != NULL);
    ev->order = h->order;
    ev->expires_at = h->expires_at;
    if (out) {
        out->order = h->order;
        out->expires_at = h->expires_at;
    }
}

void engine__hold_clear(engine *e, uint32_t ui)
{
    struct room_hold *h = engine__hold_of(e, ui);
    if (h) h->state = 0;   /* its heap entry is dead from now on */
    engine__heap_settle(e);
}

/* Ends user ui's hold: the bed goes back (engine_unseat's release event
 * becomes `type` with the order), the order is remembered as `state`. The
 * caller reserved 1 event, user, item and ended order. */
static const char *end_hold(engine *e, uint32_t ui, engine_event_type type, uint8_t state,
                            const char *req_id, int64_t now)
{
    struct room_hold *h = engine__hold_of(e, ui);
    ALLOC_ASSERT(h && h->state != 0 && e->n_room_ended < e->cap_room_ended &&
                 e->n_ended < e->cap_ended);
    uint32_t it = engine__unseat(e, ui, req_id, now);
    engine_event *ev = &e->events[e->n_events - 1];
    ALLOC_ASSERT(ev->type == EVENT_RELEASE);
    ev->type = type;
    ev->order = h->order;
    e->room_ended[e->n_room_ended++] = (struct room_ended){ h->order, ui, state };
    e->ended[e->n_ended++] = (ended){ ui, { .id = h->order, .item = it, .qty = 1,
                                            .state = state } };
    h->state = 0;
    engine__heap_settle(e);
    return e->items[it].id;
}

void engine__hold_expire(engine *e, uint32_t ui, int64_t now)
{
    if (engine__hold_reserve(e, 0) < 0) return;
    end_hold(e, ui, EVENT_EXPIRE, ORDER_EXPIRED, NULL, now);
}

/* The user's live hold with that order, or the refusal: a remembered
 * order that expired says so, anything else is unknown. */
engine_reason engine__hold_find(const engine *e, uint32_t ui, uint64_t order)
{
    const struct room_hold *h = engine__hold_of(e, ui);
    if (h && h->state && h->order == order) return REASON_NONE;
    for (size_t i = 0; i < e->n_room_ended; i++)
        if (e->room_ended[i].order == order && e->room_ended[i].user == ui)
            return e->room_ended[i].state == ORDER_EXPIRED ? REASON_EXPIRED : REASON_UNKNOWN_ORDER;
    return REASON_UNKNOWN_ORDER;
}

engine_reason engine__hold_confirm(engine *e, uint32_t ui, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    engine_reason why = engine__hold_find(e, ui, r->order);
    if (why != REASON_NONE) return why;
    struct room_hold *h = engine__hold_of(e, ui);
    const user *u = &e->users[ui];
    if (h->state == ORDER_HELD) {   /* a second confirm is done, silently */
        if (engine__reserve(e, 1, 1, 0, 0) < 0) return REASON_NONE;
        h->state = ORDER_CONFIRMED;
        h->expires_at = 0;
        engine__emit(e, &(engine_event){ .type = EVENT_CONFIRM, .user = u->id,
                                        .item = e->items[u->u.r.room].id, .qty = 1,
                                        .order = h->order, .req = r->id, .at = now });
        engine__dirty_user(e, ui);
        engine__heap_settle(e);
    }
    out->status = STATUS_DONE;
    out->item = e->items[u->u.r.room].id;
    out->order = h->order;
    return REASON_NONE;
}

engine_reason engine__hold_cancel(engine *e, uint32_t ui, const engine_request *r,
                                 int64_t now, engine_result *out)
{
    engine_reason why = engine__hold_find(e, ui, r->order);
    if (why != REASON_NONE) return why;
    if (engine__reserve(e, 1, 1, 1, 0) < 0 || engine__hold_reserve(e, 0) < 0) return REASON_NONE;
    uint64_t order = engine__hold_of(e, ui)->order;
    out->item = end_hold(e, ui, EVENT_CANCEL, ORDER_CANCELLED, r->id, now);
    out->status = STATUS_DONE;
    out->order = order;
    return REASON_NONE;
}

int engine__hold_op_ok(const engine *e, engine_op op)
{
    return engine__hold_on(e) && (op == OP_CONFIRM || op == OP_CANCEL);
}

void engine__hold_view(const engine *e, uint32_t ui, engine_user_view *v)
{
    const struct room_hold *h = engine__hold_of(e, ui);
    if (!h || !h->state) return;
    v->room_order = h->order;
    v->room_state = h->state;
    v->room_expires_at = h->state == ORDER_HELD ? h->expires_at : 0;
}

/* engine_load_order for a room batch: a live hold of a loaded holder, or a
 * tombstone. */
int engine__hold_load(engine *e, const char *uid, uint64_t order, const char *room,
                     int state, int64_t expires_at)
{
    if (!engine__hold_on(e)) return -EINVAL;
    uint32_t ui = find_user(e, uid);
    if (ui == STRMAP_NONE) {
        if (state == ORDER_HELD || state == ORDER_CONFIRMED) return -ENOENT;  /* no bed */
        ui = engine__user_load(e, uid);
        if (ui == STRMAP_NONE) return -ENOMEM;
    }
    if (engine__hold_reserve(e, 1) < 0) return -ENOMEM;
    if (state == ORDER_EXPIRED || state == ORDER_CANCELLED) {
        e->room_ended[e->n_room_ended++] = (struct room_ended){ order, ui, (uint8_t)state };
        return 0;
    }
    const user *u = &e->users[ui];
    if (u->u.r.room == NO_ROOM || strcmp(e->items[u->u.r.room].id, room) != 0) return -ENOENT;
    struct room_hold *h = engine__hold_of(e, ui);
    if (h->state) return -EEXIST;
    h->order = order;
    h->state = (uint8_t)state;
    h->expires_at = state == ORDER_HELD ? expires_at : 0;
    if (state == ORDER_HELD) engine__heap_push(e, (expiry){ expires_at, order, ui });
    return 0;
}

/* Without hold_ms the heap is empty; with it, every live heap entry is a
 * HELD hold with the same deadline, every HELD hold has one, the top is
 * live, and a hold belongs to a user with a bed. */
const char *engine__hold_check(const engine *e)
{
    if (!engine__hold_on(e)) return e->n_heap ? "heap: reservations in a room batch" : NULL;
    size_t live = 0, held = 0;
    for (size_t i = 0; i < e->n_heap; i++) {
        const expiry *x = &e->heap[i];
        if (x->user >= e->n_users) return "heap: entry of an unknown user";
        if (i && expiry_less(x, &e->heap[(i - 1) / 2])) return "heap: entry before its parent";
        if (!expiry_live(e, x)) continue;
        if (e->holds[x->user].expires_at != x->at) return "room hold: heap and hold disagree on the expiry";
        live++;
    }
    if (e->n_heap && !expiry_live(e, &e->heap[0])) return "heap: top entry is not a held bed";
    for (size_t u = 0; u < e->cap_holds && u < e->n_users; u++) {
        if (!e->holds[u].state) continue;
        if (e->users[u].u.r.room == NO_ROOM) return "room hold: a hold without a bed";
        held += e->holds[u].state == ORDER_HELD;
    }
    if (live != held) return "room hold: held beds and live heap entries differ";
    return NULL;
}

