/* engine_staff.c -- staff placements (contract 11.5): `assign` gives a
 * user a bed or units now and `unassign` takes them back, whatever the
 * batch's phase, selection slots, throttle and draw, because staff place
 * students before and beside the round (accessibility, RAs, transfers).
 *
 * What still holds: the capacity (room_full, sold_out), one bed per user
 * (already_holding), per_user (limit), and eligibility (11.2) only when
 * the command asks for it with check. A placement is final (no hold to
 * confirm). Its events and result carry by = staff; a placement without
 * check is remembered on the holding (USER_STAFF, engine_order.staff) so
 * that verify lists it as a staff exception instead of a breach. An
 * unassign returns units like any release or cancel, so the waitlist is
 * served at the end of the call (engine.c) -- and so is it after an
 * assign, which may open beds to those waiting (see engine__staff_decide).
 */
#include "engine_staff_int.h"
#include "core/assert.h"
#include "engine_elig_int.h"
#include "engine_hold_int.h"
#include "engine_state.h"
#include "engine_swap_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char STAFF[] = "staff";

/* The event just emitted is the staff's. */
static void by_staff(engine *e)
{
    ALLOC_ASSERT(e->n_events > 0);
    e->events[e->n_events - 1].by = STAFF;
}

static engine_reason assign_bed(engine *e, uint32_t ui, uint32_t it, const engine_request *r,
                                int64_t now, engine_result *out)
{
    if (e->items[it].free <= 0) return REASON_ROOM_FULL;
    if (engine__holds_bed(e, ui)) return REASON_ALREADY_HOLDING;
    if (r->check && !engine__elig_ok(e, e->users[ui].id, it, STRMAP_NONE)) return REASON_NOT_ELIGIBLE;
    char *req = engine__seat_prepare(e, r->id, 1, 1);
    if (!req) return REASON_NONE;
    /* a placement without check is an exception: it sets no same_X value
     * over regular holders (engine_elig.c) */
    if (r->check) engine__elig_took(e, e->users[ui].id, it, e->items[it].capacity - e->items[it].free);
    engine__seat(e, ui, it, req, r->id, now);
    by_staff(e);
    if (!r->check) {
        e->users[ui].flags |= USER_STAFF;
        e->items[it].staff_held++;
    }
    engine__granted(e, out, e->items[it].id);
    return REASON_NONE;
}

static engine_reason assign_units(engine *e, uint32_t ui, uint32_t it, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    int64_t qty = r->qty > 0 ? r->qty : 1;
    if (qty > INT32_MAX || qty > e->items[it].free) return REASON_SOLD_OUT;
    if (e->users[ui].u.s.units + qty > e->meta.per_user) return REASON_LIMIT;
    if (r->check && !engine__elig_ok(e, e->users[ui].id, it, STRMAP_NONE)) return REASON_NOT_ELIGIBLE;
    if (engine__reserve(e, 1, 1, 1, 0) < 0 || engine__orders_reserve(&e->users[ui]) < 0) {
        engine__out_of_memory(e);
        return REASON_NONE;
    }
    user *u = &e->users[ui];
    engine_order o = { .id = engine__order_id_new(e), .item = it, .qty = (int32_t)qty,
                       .state = ORDER_CONFIRMED, .staff = (uint8_t)!r->check };
    if (r->check) engine__elig_took(e, u->id, it, e->items[it].capacity - e->items[it].free);
    e->items[it].staff_held += o.staff ? o.qty : 0;
    engine__orders_add_live(u, o);
    ALLOC_ASSERT(u->u.s.units <= e->meta.per_user);
    engine__free_take(e, it, o.qty);
    engine__emit(e, &(engine_event){ .type = EVENT_GRANT, .user = u->id, .item = e->items[it].id,
                                     .qty = o.qty, .order = o.id, .req = r->id, .at = now,
                                     .by = STAFF });
    engine__dirty_user(e, ui);
    engine__dirty_item(e, it, 0);
    engine__granted(e, out, e->items[it].id);
    out->qty = o.qty;
    out->order = o.id;
    return REASON_NONE;
}

static engine_reason unassign_bed(engine *e, uint32_t ui, const engine_request *r, int64_t now,
                                  engine_result *out)
{
    if (!engine__holds_bed(e, ui)) return REASON_NOT_HOLDING;
    if (engine__reserve(e, 1, 1, 1, 0) < 0 || engine__swaps_bed_gone(e, ui, now) < 0) return REASON_NONE;
    engine__hold_clear(e, ui);   /* a held bed taken back ends its hold */
    uint32_t it = engine__unseat(e, ui, r->id, now);
    by_staff(e);
    engine__done(out, e->items[it].id);
    return REASON_NONE;
}

/* Ends live order i of user ui as cancelled by staff. Caller reserved. */
static void cancel_order(engine *e, uint32_t ui, uint32_t i, const engine_request *r, int64_t now,
                         engine_result *out)
{
    user *u = &e->users[ui];
    engine_order o = engine__orders_end(u, i, ORDER_CANCELLED);
    engine__free_return(e, o.item, o.qty);
    if (o.staff) e->items[o.item].staff_held -= o.qty;
    engine__emit(e, &(engine_event){ .type = EVENT_CANCEL, .user = u->id, .item = e->items[o.item].id,
                                     .qty = o.qty, .order = o.id, .req = r->id, .at = now,
                                     .by = STAFF });
    engine__dirty_user(e, ui);
    engine__dirty_item(e, o.item, 0);
    engine__note_ended(e, ui, o);
    engine__done(out, e->items[o.item].id);
    out->qty = o.qty;
    out->order = o.id;
}

/* With an order: that one; without: every live order of the user. */
static engine_reason unassign_units(engine *e, uint32_t ui, const engine_request *r, int64_t now,
                                    engine_result *out)
{
    user *u = &e->users[ui];
    uint32_t n = u->u.s.n_live;
    if (r->order) {
        uint32_t i = orders_find(u, r->order);
        if (i == STRMAP_NONE || i >= u->u.s.n_live) return REASON_UNKNOWN_ORDER;
        if (engine__reserve(e, 1, 1, 1, 1) < 0) return REASON_NONE;
        cancel_order(e, ui, i, r, now, out);
    } else {
        if (!n) return REASON_NOT_HOLDING;
        if (engine__reserve(e, n, 1, n, n) < 0) return REASON_NONE;
        while (u->u.s.n_live) cancel_order(e, ui, u->u.s.n_live - 1, r, now, out);
    }
    engine__heap_settle(e);
    return REASON_NONE;
}

engine_reason engine__staff_decide(engine *e, const engine_request *r, int64_t now,
                                   engine_result *out)
{
    int assign = r->op == OP_ASSIGN;
    if (!engine__id_ok(r->user) || (assign && !engine__id_ok(r->item))) {
        out->status = STATUS_INVALID;
        return REASON_NONE;
    }
    uint32_t it = assign ? find_item(e, r->item) : STRMAP_NONE;
    if (assign && it == STRMAP_NONE) return REASON_UNKNOWN_ITEM;
    uint32_t ui = engine__user_touch(e, r->user);
    if (ui == STRMAP_NONE) {
        engine__out_of_memory(e);
        return REASON_NONE;
    }
    engine_reason why;
    if (assign)
        why = is_rooms(e) ? assign_bed(e, ui, it, r, now, out) : assign_units(e, ui, it, r, now, out);
    else
        why = is_rooms(e) ? unassign_bed(e, ui, r, now, out) : unassign_units(e, ui, r, now, out);
    if (why == REASON_NONE && out->status != STATUS_NONE) out->by = STAFF;
    /* a placement can open beds to those waiting though no unit came
     * back: with group_fill = exact an empty room that gets a holder takes
     * single users now (11.4), and an exception can change a same_X
     * value (11.2); serve the waitlist at the end of the call */
    if (assign && out->status == STATUS_GRANTED) e->wait_kick = 1;
    return why;
}
