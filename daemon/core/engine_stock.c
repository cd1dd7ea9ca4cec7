/* engine_stock.c -- the stock decisions: buy, confirm, cancel, and the
 * expiry of one reservation. A buy takes units only through the state
 * layer's engine__free_take; every end of an order (cancel, expiry) gives
 * them back through engine__free_return, exactly once (engine__orders_end).
 * The op handlers return the reason of a refusal, or REASON_NONE when they
 * filled *out themselves (granted/done, or STATUS_NONE when memory ran out).
 */
#include "engine_stock_int.h"
#include "core/assert.h"
#include "engine_elig_int.h"
#include "engine_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Ends live order `oi` of user `ui` as EXPIRED: units return, EXPIRE event
 * (req NULL), ended list. Caller reserved 1 event/user/item/ended. */
void engine__stock_expire(engine *e, uint32_t ui, uint32_t oi, int64_t now)
{
    user *u = &e->users[ui];
    /* Only a reservation expires; a confirmed order is final. The heap
     * hands out only HELD orders (expiry_live), so: debug only. orders_end
     * checks that oi is a live order in every build. */
    ALLOC_DEBUG_ASSERT(oi < u->u.s.n_live && u->u.s.orders[oi].state == ORDER_HELD);
    engine_order o = engine__orders_end(u, oi, ORDER_EXPIRED);
    engine__free_return(e, o.item, o.qty);
    if (o.staff) e->items[o.item].staff_held -= o.qty;
    engine__emit(e, &(engine_event){ .type = EVENT_EXPIRE, .user = u->id,
                             .item = e->items[o.item].id, .qty = o.qty,
                             .order = o.id, .at = now });
    engine__dirty_user(e, ui);
    engine__dirty_item(e, o.item, 0);
    engine__note_ended(e, ui, o);
}

engine_reason engine__stock_buy(engine *e, uint32_t ui, const engine_request *r,
                                int64_t now, engine_result *out)
{
    uint32_t it = find_item(e, r->item);
    if (it == STRMAP_NONE) return REASON_UNKNOWN_ITEM;
    if (!engine__elig_ok(e, e->users[ui].id, it, STRMAP_NONE)) return REASON_NOT_ELIGIBLE;
    if (r->qty > e->items[it].free) return REASON_SOLD_OUT;
    if (e->users[ui].u.s.units + r->qty > e->meta.per_user) return REASON_LIMIT;
    int hold = e->meta.hold_ms > 0;
    /* Everything that can fail happens before the order source is asked. */
    if (engine__reserve(e, 1, 1, 1, 0) < 0 || engine__orders_reserve(&e->users[ui]) < 0 ||
        (hold && ENGINE__GROW(e, heap, 1) < 0)) {
        engine__out_of_memory(e);
        return REASON_NONE;
    }
    engine_order o = { .id = engine__order_id_new(e), .item = it, .qty = (int32_t)r->qty,
                       .state = hold ? ORDER_HELD : ORDER_CONFIRMED,
                       .expires_at = hold ? engine__sat_add(now, e->meta.hold_ms) : 0 };
    user *u = &e->users[ui];
    engine__elig_took(e, u->id, it, e->items[it].capacity - e->items[it].free);
    /* A repeated id would make confirm and cancel act on the wrong order
     * (the source promises fresh ids: a search, so debug builds only). */
    ALLOC_DEBUG_ASSERT(orders_find(u, o.id) == STRMAP_NONE);
    engine__orders_add_live(u, o);
    ALLOC_ASSERT(u->u.s.units <= e->meta.per_user);
    engine__free_take(e, it, o.qty);
    if (hold) engine__heap_push(e, (expiry){ o.expires_at, o.id, ui });
    engine__emit(e, &(engine_event){ .type = EVENT_GRANT, .user = u->id,
                             .item = e->items[it].id, .qty = o.qty, .order = o.id,
                             .req = r->id, .at = now, .expires_at = o.expires_at });
    engine__dirty_user(e, ui);
    engine__dirty_item(e, it, 0);
    engine__granted(e, out, e->items[it].id);
    out->qty = o.qty;
    out->order = o.id;
    out->expires_at = o.expires_at;
    return REASON_NONE;
}

/* The shared start of confirm and cancel: finds the order and answers for
 * tombstones and for a reservation that ran out. Sets *oi to the live
 * order's index, or to STRMAP_NONE when there is nothing left to do. */
static engine_reason live_order(engine *e, uint32_t ui, const engine_request *r,
                                int64_t now, uint32_t *oi)
{
    user *u = &e->users[ui];
    *oi = STRMAP_NONE;
    uint32_t i = orders_find(u, r->order);
    if (i == STRMAP_NONE) return REASON_UNKNOWN_ORDER;
    const engine_order *o = &u->u.s.orders[i];
    if (o->state == ORDER_EXPIRED) return REASON_EXPIRED;
    if (o->state == ORDER_CANCELLED) return REASON_UNKNOWN_ORDER;
    if (o->state == ORDER_HELD && now >= o->expires_at) {
        /* engine_decide expires due orders first, so this is a safety net
         * for a caller that decides at an earlier `now` than it expired. */
        if (engine__reserve(e, 1, 1, 1, 1) < 0) return REASON_NONE;
        engine__stock_expire(e, ui, i, now);
        engine__heap_settle(e);
        return REASON_EXPIRED;
    }
    *oi = i;
    return REASON_NONE;
}

static void order_done(engine *e, engine_result *out, const engine_order *o)
{
    engine__done(out, e->items[o->item].id);
    out->qty = o->qty;
    out->order = o->id;
}

engine_reason engine__stock_confirm(engine *e, uint32_t ui,
                                    const engine_request *r, int64_t now,
                                    engine_result *out)
{
    uint32_t oi;
    engine_reason why = live_order(e, ui, r, now, &oi);
    if (oi == STRMAP_NONE) return why;
    user *u = &e->users[ui];
    engine_order *o = &u->u.s.orders[oi];
    if (o->state == ORDER_HELD) {   /* a second confirm is done, silently */
        if (engine__reserve(e, 1, 1, 0, 0) < 0) return REASON_NONE;
        o->state = ORDER_CONFIRMED;
        o->expires_at = 0;
        engine__emit(e, &(engine_event){ .type = EVENT_CONFIRM, .user = u->id,
                                 .item = e->items[o->item].id, .qty = o->qty,
                                 .order = o->id, .req = r->id, .at = now });
        engine__dirty_user(e, ui);
        engine__heap_settle(e);
    }
    order_done(e, out, o);
    return REASON_NONE;
}

engine_reason engine__stock_cancel(engine *e, uint32_t ui,
                                   const engine_request *r, int64_t now,
                                   engine_result *out)
{
    uint32_t oi;
    engine_reason why = live_order(e, ui, r, now, &oi);
    if (oi == STRMAP_NONE) return why;
    if (engine__reserve(e, 1, 1, 1, 1) < 0) return REASON_NONE;
    user *u = &e->users[ui];
    engine_order o = engine__orders_end(u, oi, ORDER_CANCELLED);
    engine__free_return(e, o.item, o.qty);
    if (o.staff) e->items[o.item].staff_held -= o.qty;   /* a staff order its holder gave back */
    engine__emit(e, &(engine_event){ .type = EVENT_CANCEL, .user = u->id,
                             .item = e->items[o.item].id, .qty = o.qty,
                             .order = o.id, .req = r->id, .at = now });
    engine__dirty_user(e, ui);
    engine__dirty_item(e, o.item, 0);
    engine__note_ended(e, ui, o);
    order_done(e, out, &o);
    engine__heap_settle(e);
    return REASON_NONE;
}
