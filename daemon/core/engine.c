/* engine.c -- the allocation engine's front door (engine.h): its lifecycle,
 * the gate every request from the queue passes (phase, selection slot,
 * throttle, kind), the admin commands, and the counting that gives every
 * request exactly one result.
 *
 * Pure C, no I/O and no clock, so any sequence of requests and times can be
 * replayed in a test and gives the same answers. The engine's files stand
 * in layers, each calling only those below it, never back up:
 *
 *   engine.c           lifecycle, gate and throttle, admin, counting
 *   engine_wait.c      the waitlist: serves through engine_ops
 *   engine_ops.c       one op's decision, by op
 *   engine_groups.c    groups formed by consent (seated by engine_rooms)
 *   engine_rooms.c, engine_staff.c  choose, auto, group, switch, release;
 *                      assign, unassign (11.5)
 *   engine_stock.c, engine_swap.c   buy, confirm, cancel, expiry; swaps
 *   engine_hold.c, engine_elig.c    held beds; profiles and eligibility
 *   engine_state.c     records, orders, heap, outputs, moves of units
 *
 * with engine_load.c (loading), engine_view.c (views and drains),
 * engine_slots.c (selection slots) and engine_check.c (the sweep) beside
 * them. Invariants are asserted (core/assert.h): where a decision changes
 * state the state layer checks, in O(1) and in every build, what that
 * change must keep true; the whole-state sweep, engine_check_invariants(),
 * runs after decisions in ALLOCD_DEBUG builds.
 */
#include "core/engine.h"
#include "core/assert.h"
#include "core/engine_slots.h"
#include "core/engine_swap.h"
#include "core/engine_wait.h"
#include "engine_check_int.h"
#include "engine_elig_int.h"
#include "engine_groups_int.h"
#include "engine_hold_int.h"
#include "engine_ops_int.h"
#include "engine_rooms_int.h"
#include "engine_slots_int.h"
#include "engine_staff_int.h"
#include "engine_state.h"
#include "engine_stock_int.h"
#include "engine_swap_int.h"
#include "engine_wait_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

engine *engine_new(const engine_meta *meta, uint64_t hash_seed)
{
    if (!meta || (meta->kind != BATCH_STOCK && meta->kind != BATCH_ROOM))
        return NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->meta = *meta;
    engine__state_init(e, hash_seed);
    return e;
}

void engine_free(engine *e)
{
    if (!e) return;
    engine__groups_free(e);
    engine__swaps_free(e);
    engine__wait_free(e);
    engine__slots_free(e);
    engine__elig_free(e);
    engine__state_free(e);
    free(e);
}

const engine_meta *engine_get_meta(const engine *e) { return &e->meta; }

void engine_set_order_source(engine *e, engine_order_fn fn, void *ctx)
{
    e->order_fn = fn;
    e->order_ctx = ctx;
}

int engine_error(const engine *e) { return e->error; }

/* Ends every reservation due by `now`, earliest first. Afterwards none is
 * left due, unless memory ran out (then the engine has failed and decides
 * nothing more until it is replaced). */
static size_t expire_due(engine *e, int64_t now)
{
    size_t n = 0;
    engine__heap_settle(e);
    while (e->n_heap && e->heap[0].at <= now) {
        if (engine__reserve(e, 1, 1, 1, 1) < 0) break;
        expiry x = e->heap[0];
        engine__heap_pop(e);
        if (is_rooms(e)) engine__rooms_expire(e, x.user, now);
        else engine__stock_expire(e, x.user, orders_find(&e->users[x.user], x.order), now);
        n++;
        engine__heap_settle(e);
    }
    /* The loop's own exit condition, unless memory ran out: debug only. */
    ALLOC_DEBUG_ASSERT(e->error || e->n_heap == 0 || e->heap[0].at > now);
    /* closes_at passed: open swap offers end `closed` (contract 9.3) */
    if (e->swaps && e->meta.closes_at != 0 && now >= e->meta.closes_at) engine__swaps_close(e, now);
    return n;
}

size_t engine_expire(engine *e, int64_t now)
{
    engine__elig_refresh(e);
    size_t n = expire_due(e, now);
    engine__wait_step(e, now);
    if (ALLOC_DEBUG) engine__debug_sweep(e);
    return n;
}

int64_t engine_next_expiry(const engine *e)
{
    int64_t at = e->n_heap ? e->heap[0].at : INT64_MAX;
    int64_t wait = engine_wait_next_deadline(e);
    return wait < at ? wait : at;
}

engine_admin_state engine_get_admin_state(const engine *e) { return e->admin; }

const engine_counters *engine_get_counters(const engine *e) { return &e->counters; }

/* Keeps only the times a refusal owes the user (section 9.6 of the
 * contract): retry_at for throttled, opens_at for not_open. */
static void reject(engine_result *out, engine_reason r)
{
    /* a group refusal names the group, and `conflict` the current version;
     * throttled keeps retry_at, not_open opens_at (contract 9.6) */
    const char *group = out->group;
    int64_t version = out->version;
    int has_version = out->has_version;
    int64_t retry_at = r == REASON_THROTTLED ? out->retry_at : 0;
    int64_t opens_at = r == REASON_NOT_OPEN ? out->opens_at : 0;
    memset(out, 0, sizeof *out);
    out->status = STATUS_REJECTED;
    out->reason = r;
    out->group = group;
    out->version = version;
    out->has_version = has_version;
    out->retry_at = retry_at;
    out->opens_at = opens_at;
}

/* Counts a decided queue request in `processed` and in the counter of its
 * status. Only a decision is counted: engine_decide returns before this
 * when memory ran out (STATUS_NONE), so a request without a status here would
 * get no result at all -- the shell would lose it. */
static void count_decision(engine *e, const engine_result *out)
{
    engine_counters *c = &e->counters;
    switch (out->status) {
    case STATUS_GRANTED: c->granted++; break;
    case STATUS_DONE: c->done++; break;
    case STATUS_REJECTED: c->rejected++; break;
    case STATUS_INVALID: c->invalid++; break;
    case STATUS_WAITING: break;   /* counted in `waiting` by engine_wait_join, or in
                                 `swap_offers` by engine_swaps_decide */
    default: ALLOC_PANIC("invariant: a request decided without a result");
    }
    c->processed++;
}

/* Fixed window per user. A request refused during a penalty does not count
 * in the window, so a penalty is not extended by knocking on the door. */
static int throttled(engine *e, user *u, int64_t now)
{
    const engine_meta *m = &e->meta;
    if (m->rate_max <= 0) return 0;
    if (now < u->penalty_until) return 1;
    if (!(u->flags & USER_WINDOW) || now - u->win_start >= m->rate_window_ms) {
        u->flags |= USER_WINDOW;
        u->win_start = now;
        u->win_count = 0;
    }
    if (u->win_count < UINT32_MAX) u->win_count++;
    if (u->win_count > m->rate_max) {
        u->penalty_until = engine__sat_add(now, m->penalty_ms);
        return 1;
    }
    return 0;
}

static batch_kind op_kind(engine_op op)
{
    return op <= OP_CANCEL ? BATCH_STOCK : BATCH_ROOM;
}

/* Steps 2-6 of the spec: everything that is not about the op itself. */
static engine_reason gate(engine *e, user *u, const engine_request *r, int64_t now)
{
    engine_op op = r->op;
    switch (engine_phase_at(e, now)) {
    case PHASE_CLOSED: return REASON_CLOSED;
    case PHASE_WAITING:
        /* early=shuffle: before the batch's opening the throttle counts
         * early requests as they are read (contract 9.1) and the rest wait
         * for the draw; a user's own slot (9.4) applies from the opening */
        if (e->meta.early == EARLY_SHUFFLE)
            return throttled(e, u, now) ? REASON_THROTTLED : REASON_KEEP_FOR_LOTTERY;
        break;
    case PHASE_PAUSED: return REASON_PAUSED;
    case PHASE_OPEN: break;
    }
    /* the batch's opens_at, or the user's own selection slot (engine_slots.c) */
    if (now < engine_opens_for(e, r)) return REASON_NOT_OPEN;
    if (throttled(e, u, now)) return REASON_THROTTLED;
    if (op_kind(op) != e->meta.kind && !engine__hold_op_ok(e, op)) return REASON_WRONG_KIND;
    return REASON_NONE;
}

static void set_state(engine *e, engine_admin_state s, const engine_request *r,
                      int64_t now)
{
    e->admin = s;
    if (s == ADMIN_CLOSED) engine__swaps_close(e, now);
    engine__emit(e, &(engine_event){ .type = EVENT_STATE, .req = r->id, .at = now,
                             .state = engine_phase_name(engine_phase_at(e, now)) });
}

/* Capacity may go down, but never below what is held now (REASON_LIMIT): free
 * is capacity - held, never clamped, so it stays >= 0 -- also for an item
 * loaded beyond its capacity, which this is the way back from. */
static engine_reason decide_set_capacity(engine *e, const engine_request *r,
                                         int64_t now, engine_result *out)
{
    uint32_t it = find_item(e, r->item);
    int64_t held = it == STRMAP_NONE ? 0 : e->items[it].capacity - e->items[it].free;
    if (r->qty < held) return REASON_LIMIT;
    if (engine__reserve(e, 1, 0, 1, 0) < 0) return REASON_NONE;
    if (it == STRMAP_NONE) {
        it = engine__item_add(e, r->item, r->qty);
        if (it == STRMAP_NONE) {
            engine__out_of_memory(e);
            return REASON_NONE;
        }
    } else {
        engine__free_add(e, it, r->qty - e->items[it].capacity);
        e->items[it].capacity = r->qty;
    }
    ALLOC_ASSERT(e->items[it].free >= 0 &&
                 e->items[it].capacity - e->items[it].free == held);
    /* fewer beds can open a room to those waiting too: with group_fill =
     * exact an empty double made a single takes a single user (11.4) */
    e->wait_kick = 1;
    engine__dirty_item(e, it, 1);
    engine__emit(e, &(engine_event){ .type = EVENT_CAPACITY, .item = e->items[it].id,
                             .qty = r->qty, .req = r->id, .at = now });
    engine__done(out, e->items[it].id);
    out->qty = r->qty;
    return REASON_NONE;
}

/* pause/resume/close: no phase, throttle or kind gate, except that a
 * closed batch stays closed. A state event only when the state changes. */
static engine_reason decide_state(engine *e, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    if (r->op != OP_CLOSE && engine_phase_at(e, now) == PHASE_CLOSED)
        return REASON_CLOSED;
    if (engine__reserve(e, 1, 0, 0, 0) < 0) return REASON_NONE;
    if (r->op == OP_PAUSE && e->admin != ADMIN_PAUSED) set_state(e, ADMIN_PAUSED, r, now);
    if (r->op == OP_RESUME && e->admin == ADMIN_PAUSED) set_state(e, ADMIN_NONE, r, now);
    if (r->op == OP_CLOSE && e->admin != ADMIN_CLOSED) set_state(e, ADMIN_CLOSED, r, now);
    engine__done(out, NULL);
    return REASON_NONE;
}

static engine_reason decide_admin(engine *e, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    if (r->op == OP_ASSIGN || r->op == OP_UNASSIGN) return engine__staff_decide(e, r, now, out);
    if (r->op != OP_SET_CAPACITY) return decide_state(e, r, now, out);
    if (!engine__id_ok(r->item) || r->qty < 0) {
        out->status = STATUS_INVALID;
        return REASON_NONE;
    }
    return decide_set_capacity(e, r, now, out);
}

static int names_ok(const char *const *v, size_t n)
{
    if (n && !v) return 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i]) return 0;
    return 1;
}

static int ids_ok(const char *const *v, size_t n)
{
    if (!names_ok(v, n)) return 0;
    for (size_t i = 0; i < n; i++)
        if (!engine__id_ok(v[i])) return 0;
    return 1;
}

/* Group members: valid ids, no one twice, and the sender among them. A
 * member twice would get two beds, so this is checked here even though the
 * parser should never let it through. */
static int members_ok(const engine_request *r)
{
    int has_sender = 0;
    if (r->n_members == 0 || !names_ok(r->members, r->n_members)) return 0;
    for (size_t i = 0; i < r->n_members; i++) {
        if (!engine__id_ok(r->members[i])) return 0;
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->members[i], r->members[j]) == 0) return 0;
        has_sender |= strcmp(r->members[i], r->user) == 0;
    }
    return has_sender;
}

/* The shape the parser promises; the engine checks it again rather than
 * trust it, because a slip there would break an invariant here. */
static int request_ok(const engine_request *r)
{
    if (!names_ok(r->prefs, r->n_prefs)) return 0;
    if (r->n_filter && !r->filter) return 0;
    for (size_t i = 0; i < r->n_filter; i++)
        if (!r->filter[i].key || !r->filter[i].value) return 0;
    switch (r->op) {
    case OP_BUY: return r->item && r->qty >= 1 && r->qty <= INT32_MAX;
    case OP_CHOOSE: case OP_SWITCH: return r->item != NULL;
    case OP_GROUP: return r->n_members == 0 || members_ok(r);  /* formed: none */
    case OP_INVITE: return r->n_to > 0 && ids_ok(r->to, r->n_to);
    case OP_ACCEPT: case OP_DECLINE: return engine__id_ok(r->peer);
    case OP_LEAVE: case OP_PREFS: return 1;
    case OP_SWAP: return engine__id_ok(r->peer);
    case OP_CONFIRM: case OP_CANCEL: case OP_AUTO: case OP_RELEASE: return 1;
    default: return 0;
    }
}

static int is_admin(engine_op op)
{
    return (op >= OP_PAUSE && op <= OP_SET_CAPACITY) || op == OP_ASSIGN || op == OP_UNASSIGN;
}

/* Steps 1-7 of the spec for a request from the queue. */
static engine_reason decide_user(engine *e, const engine_request *r,
                                 int64_t now, engine_result *out)
{
    if (!engine__id_ok(r->user)) {
        out->status = STATUS_INVALID;
        return REASON_NONE;
    }
    uint32_t ui = r->user_hash ? engine__user_touch_hashed(e, r->user, *r->user_hash)
                               : engine__user_touch(e, r->user);
    if (ui == STRMAP_NONE) {
        engine__out_of_memory(e);
        return REASON_NONE;
    }
    if (!request_ok(r)) {
        out->status = STATUS_INVALID;
        return REASON_NONE;
    }
    engine_reason why = gate(e, &e->users[ui], r, now);
    if (why == REASON_KEEP_FOR_LOTTERY) {
        out->kept = 1;
        return REASON_NONE;
    }
    if (why == REASON_THROTTLED) out->retry_at = e->users[ui].penalty_until;
    if (why == REASON_NOT_OPEN) out->opens_at = engine_opens_for(e, r);
    if (why != REASON_NONE) return why;
    return engine__op_decide(e, ui, r, now, out);
}

/* engine_decide without the debug sweep. Every request gets exactly one
 * result and is counted exactly once: in ctl (admin) or in processed and
 * the counter of its status, so the counters only ever grow, and a grant's
 * rank is the grant count including it. STATUS_NONE (out of memory) is the one
 * result that is not a decision and counts nowhere. The checks of that are
 * debug only: the two lines before them make it so, and they would cost a
 * release build about 35 instructions a decision (callgrind). */
static void decide_counted(engine *e, const engine_request *r, int64_t now,
                           engine_result *out)
{
    memset(out, 0, sizeof *out);
    engine__elig_refresh(e);   /* once after loading: same_X of loaded holders */
    /* Reservations that ran out by `now` are gone before anything is
     * decided at `now`, whether or not the shell called engine_expire: a
     * buy must not be refused for units that are already free again. */
    expire_due(e, now);
    engine__wait_step(e, now);   /* returned units go to those waiting first */
    if (e->error) return;   /* out of memory, now or before: no decision */
    const int64_t ctl = e->counters.ctl, processed = e->counters.processed,
                  grants = e->counters.granted;
    const size_t resolved = engine_swap_resolved_count(e);
    int admin = is_admin(r->op);
    engine_reason why = admin ? decide_admin(e, r, now, out)
                              : decide_user(e, r, now, out);
    if (why != REASON_NONE && !admin && engine__wait_join(e, r, &why, now, out)) why = REASON_NONE;
    if (why != REASON_NONE) reject(out, why);
    if (e->error) {
        memset(out, 0, sizeof *out);
        return;
    }
    if (admin) e->counters.ctl++;
    else if (!out->kept) count_decision(e, out);   /* kept: decided and counted when served */
    /* a staff placement counts in granted and rank like any grant (11.5),
     * and in staff_granted, not in processed: processed counts queue
     * requests, so that dequeued = processed + dead + duplicates (+ the
     * pool) holds, and processed + staff_granted is the statuses' sum */
    int staff_grant = admin && out->status == STATUS_GRANTED;
    e->counters.granted += staff_grant;
    e->counters.staff_granted += staff_grant;
    const engine_counters *c = &e->counters;
    /* swap offers this decision ended (9.3) became granted or rejected */
    int64_t ended_granted = 0;
    for (size_t i = resolved; ALLOC_DEBUG && i < engine_swap_resolved_count(e); i++) {
        engine_swap_resolved s;
        engine_swap_resolved_at(e, i, &s);
        ended_granted += s.res.status == STATUS_GRANTED;
    }
    ALLOC_DEBUG_ASSERT(c->ctl == ctl + admin &&
                       c->processed == processed + (!admin && !out->kept));
    ALLOC_DEBUG_ASSERT(c->granted == grants + (out->status == STATUS_GRANTED) + ended_granted);
    ALLOC_DEBUG_ASSERT(out->status != STATUS_GRANTED || out->rank == c->granted);
    ALLOC_DEBUG_ASSERT((out->status == STATUS_REJECTED) == (out->reason != REASON_NONE));
    engine__wait_step(e, now);   /* what this decision returned or closed */
}

void engine_decide(engine *e, const engine_request *r, int64_t now,
                   engine_result *out)
{
    decide_counted(e, r, now, out);
    if (ALLOC_DEBUG) engine__debug_sweep(e);
}

void engine_note_invalid(engine *e, const char *uid, int64_t now)
{
    if (engine__id_ok(uid) && engine__user_touch(e, uid) == STRMAP_NONE) engine__out_of_memory(e);
    e->counters.invalid++;
    e->counters.processed++;
}

void engine_note_dead(engine *e) { e->counters.dead++; }

void engine_note_duplicate(engine *e) { e->counters.duplicates++; }
