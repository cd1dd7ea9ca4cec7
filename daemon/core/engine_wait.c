/* engine_wait.c -- the waitlist (core/engine_wait.h): joining, serving in
 * ticket order when units come back, ending by wait_ms and close.
 *
 * Kept out of engine.c so the rules of a single decision stay apart from
 * the queue of deferred ones; engine.c only calls the three hooks of
 * engine_wait_int.h (join, step, free/drain) and marks when units return.
 *
 * The waitlist is an array of pointers in ticket order. Serving takes
 * entries out of the middle (a request for a room further back fits while
 * the ones before it do not), so a taken slot becomes NULL and the array
 * is compacted at the end of the pass; wait_ms ends entries from the front
 * only (every entry waits the same wait_ms, so the oldest runs out first),
 * which just moves `wl_head`. Between engine calls wl[wl_head..n_wl) holds
 * exactly the live entries, so reading entry i or the head is O(1).
 *
 * A serving pass is O(waiting) at worst and stops as soon as no unit is
 * free anywhere, which for a sale of one item is after the first request
 * served. Every pass first makes room for what one serving emits, so a
 * failed allocation leaves nothing half-done (the engine then fails, as
 * everywhere else in the engine).
 */
#include "core/engine_wait.h"
#include "core/engine_swap.h"
#include "core/assert.h"
#include "core/vec.h"
#include "engine_ops_int.h"
#include "engine_state.h"
#include "engine_wait_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct wait_entry {
    engine_request r;     /* a deep copy; every string owned here */
    int64_t no, joined_at;
    engine_reason why;    /* the refusal it joined instead of */
    engine_result res;    /* the final result, once done */
};

/* ---------------------------------------------------------------- memory */

static char *dup_str(const char *s, int *ok)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    else *ok = 0;
    return p;
}

static const char *const *dup_names(const char *const *v, size_t n, int *ok)
{
    if (!n) return NULL;
    char **p = calloc(n, sizeof *p);
    if (!p) { *ok = 0; return NULL; }
    for (size_t i = 0; i < n; i++) p[i] = dup_str(v[i], ok);
    return (const char *const *)p;
}

static void free_names(const char *const *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) free((void *)v[i]);
    free((void *)v);
}

static void entry_free(struct wait_entry *w)
{
    if (!w) return;
    free((void *)w->r.id);
    free((void *)w->r.user);
    free((void *)w->r.item);
    free_names(w->r.prefs, w->r.n_prefs);
    free_names(w->r.members, w->r.n_members);
    for (size_t i = 0; w->r.filter && i < w->r.n_filter; i++) {
        free((void *)w->r.filter[i].key);
        free((void *)w->r.filter[i].value);
    }
    free((void *)w->r.filter);
    free(w);
}

/* A copy of r that owns every string, or NULL. */
static struct wait_entry *entry_copy(const engine_request *r)
{
    struct wait_entry *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    int ok = 1;
    w->r = *r;
    w->r.pref_hashes = NULL;   /* the caller's, for this decision only */
    w->r.user_hash = NULL;
    w->r.id = dup_str(r->id, &ok);
    w->r.user = dup_str(r->user, &ok);
    w->r.item = dup_str(r->item, &ok);
    w->r.prefs = dup_names(r->prefs, r->n_prefs, &ok);
    w->r.members = dup_names(r->members, r->n_members, &ok);
    w->r.filter = NULL;
    if (r->n_filter) {
        engine_kv *kv = calloc(r->n_filter, sizeof *kv);
        w->r.filter = kv;
        if (!kv) ok = 0;
        for (size_t i = 0; kv && i < r->n_filter; i++) {
            kv[i].key = dup_str(r->filter[i].key, &ok);
            kv[i].value = dup_str(r->filter[i].value, &ok);
        }
    }
    if (!ok) {
        entry_free(w);
        return NULL;
    }
    return w;
}

/* ---------------------------------------------------------------- list */

static int waitable(engine_reason why)
{
    return why == REASON_SOLD_OUT || why == REASON_ROOM_FULL || why == REASON_NO_ROOM;
}

static int waitable_op(engine_op op)
{
    return op == OP_BUY || op == OP_CHOOSE || op == OP_AUTO || op == OP_GROUP;
}

/* Drops NULL slots from wl[wl_head..) and moves the live ones to the
 * front: O(n), once per pass that took entries out. */
static void compact(engine *e)
{
    size_t k = 0;
    for (size_t i = e->wl_head; i < e->n_wl; i++)
        if (e->wl[i]) e->wl[k++] = e->wl[i];
    e->n_wl = k;
    e->wl_head = 0;
    ALLOC_ASSERT((int64_t)k == e->counters.waiting);
}

/* Loaded entries come in hash order: sorted by ticket once, before the
 * first use. */
static int by_ticket(const void *a, const void *b)
{
    const struct wait_entry *x = *(struct wait_entry *const *)a;
    const struct wait_entry *y = *(struct wait_entry *const *)b;
    return x->no < y->no ? -1 : x->no > y->no;
}

static void settle_loaded(engine *e)
{
    if (!e->wait_unsorted) return;
    e->wait_unsorted = 0;
    compact(e);
    qsort(e->wl, e->n_wl, sizeof *e->wl, by_ticket);
}

int engine_wait_load(engine *e, const engine_request *r, int64_t wait_no,
                     int64_t joined_at, engine_reason why)
{
    if (!r || !r->id || !r->user || wait_no < 1 || !waitable(why) || !waitable_op(r->op))
        return -EINVAL;
    for (size_t i = e->wl_head; i < e->n_wl; i++)   /* load only: O(n) is fine */
        if (e->wl[i] && e->wl[i]->no == wait_no) return -EEXIST;
    /* its user is a participant (the store lists them too; this makes the
     * engine sound whatever order the shell loads them in) */
    if (!engine__id_ok(r->user)) return -EINVAL;
    if (engine__user_load(e, r->user) == STRMAP_NONE ||
        vec_reserve((void **)&e->wl, &e->cap_wl, e->n_wl + 1, sizeof *e->wl) < 0) return -ENOMEM;
    struct wait_entry *w = entry_copy(r);
    if (!w) return -ENOMEM;
    w->no = wait_no;
    w->joined_at = joined_at;
    w->why = why;
    w->r.wait = 1;
    e->wl[e->n_wl++] = w;
    e->counters.waiting++;
    if (e->counters.wait_joined < wait_no) e->counters.wait_joined = wait_no;
    e->wait_unsorted = 1;
    e->wait_kick = 1;
    return 0;
}

/* ---------------------------------------------------------------- join */

/* Room for one EVENT_WAIT / EVENT_WAIT_SERVED plus what serving a request may
 * emit itself (a bed per group member, or a grant), reserved before the
 * request is decided so the served event can never fail to fit. */
static int reserve_events(engine *e, size_t extra)
{
    if (vec_reserve((void **)&e->events, &e->cap_events, e->n_events + extra, sizeof *e->events) < 0 ||
        vec_reserve((void **)&e->wdone, &e->cap_wdone, e->n_wdone + 1, sizeof *e->wdone) < 0) {
        if (!e->error) e->error = -ENOMEM;
        return -ENOMEM;
    }
    return 0;
}

int engine__wait_join(engine *e, const engine_request *r, engine_reason *whyp,
                     int64_t now, engine_result *out)
{
    engine_reason why = *whyp;
    if (!r->wait || !waitable(why) || !waitable_op(r->op)) return 0;
    /* Only a request refused for nothing but the units joins: a buy
     * beyond per_user would be refused `limit` once units were there, so
     * that is its answer now. */
    uint32_t ui = find_user(e, r->user);
    ALLOC_ASSERT(ui != STRMAP_NONE);
    if (r->op == OP_BUY && e->users[ui].u.s.units + r->qty > e->meta.per_user) {
        *whyp = REASON_LIMIT;
        return 0;
    }
    if (reserve_events(e, 1) < 0 ||
        vec_reserve((void **)&e->wl, &e->cap_wl, e->n_wl + 1, sizeof *e->wl) < 0) {
        if (!e->error) e->error = -ENOMEM;
        return 0;
    }
    settle_loaded(e);
    if (e->counters.waiting == 0) e->n_wl = e->wl_head = 0;
    struct wait_entry *w = entry_copy(r);
    if (!w) {
        if (!e->error) e->error = -ENOMEM;
        return 0;
    }
    w->no = ++e->counters.wait_joined;
    w->joined_at = now;
    w->why = why;
    e->wl[e->n_wl++] = w;
    e->counters.waiting++;
    memset(out, 0, sizeof *out);
    out->status = STATUS_WAITING;
    out->wait_no = w->no;
    out->wait_pos = e->counters.waiting;
    engine__emit(e, &(engine_event){ .type = EVENT_WAIT, .user = w->r.user, .item = w->r.item,
                                  .qty = r->op == OP_BUY ? r->qty : 1, .req = w->r.id,
                                  .at = now, .wait_no = w->no });
    return 1;
}

/* ---------------------------------------------------------------- end */

/* Takes entry i off the waitlist with its final result: counters, the
 * done list, the EVENT_WAIT_SERVED event (room reserved by the caller). */
static void finish(engine *e, size_t i, const engine_result *res, int served, int64_t now)
{
    struct wait_entry *w = e->wl[i];
    ALLOC_ASSERT(w && res->status != STATUS_WAITING && res->status != STATUS_NONE);
    e->wl[i] = NULL;
    w->res = *res;
    w->res.wait_no = w->no;     /* the final result says it came from the waitlist */
    engine_counters *c = &e->counters;
    c->waiting--;
    if (served) c->wait_served++;
    else c->wait_ended++;
    if (res->status == STATUS_GRANTED) c->granted++;
    else c->rejected++;
    ALLOC_ASSERT(c->waiting >= 0);
    e->wdone[e->n_wdone++] = w;
    engine__emit(e, &(engine_event){ .type = EVENT_WAIT_SERVED, .user = w->r.user,
                                  .item = res->item, .qty = res->qty, .order = res->order,
                                  .req = w->r.id, .at = now, .wait_no = w->no,
                                  .status = res->status, .reason = res->reason,
                                  .expires_at = res->expires_at });
}

/* Ends the oldest entries whose wait_ms ran out, or all of them when the
 * batch is closed, with the refusal they joined for. */
static void end_due(engine *e, int64_t now)
{
    int closed = engine_phase_at(e, now) == PHASE_CLOSED;
    if (!closed && e->meta.wait_ms <= 0) return;
    while (e->wl_head < e->n_wl && !e->error) {
        struct wait_entry *w = e->wl[e->wl_head];
        if (!w) { e->wl_head++; continue; }
        if (!closed && w->joined_at + e->meta.wait_ms > now) break;
        if (reserve_events(e, 1) < 0) break;
        engine_result res = { .status = STATUS_REJECTED, .reason = w->why };
        finish(e, e->wl_head, &res, 0, now);
        e->wl_head++;
    }
    /* the slots before the head are spent: reclaim them now and then */
    if (e->wl_head > 64 && e->wl_head * 2 > e->n_wl) compact(e);
}

/* Order ids a serving of r may take: one for a buy, one per bed with
 * holds (engine_hold.c), none otherwise. */
static size_t ids_needed(const engine *e, const engine_request *r)
{
    if (r->op == OP_BUY) return 1;
    if (!is_rooms(e) || e->meta.hold_ms <= 0) return 0;
    if (r->op != OP_GROUP) return 1;
    /* a formed group (9.2) is whoever accepted, up to max_group (beyond
     * the spare ids, the shell's order_fn supplies the rest) */
    if (e->meta.groups != GROUPS_FORMED) return r->n_members;
    return e->meta.max_group < REQUEST_SPARE_IDS ? (size_t)e->meta.max_group : REQUEST_SPARE_IDS;
}

/* Draws ids ahead until `need` are in hand. The shell guarantees ids for
 * the requests of a chunk, not for the units that come back in it (an
 * expiry of thousands of reservations at once): when the source runs dry
 * the pass stops, wait_stalled tells the shell, and the pass goes on at
 * the next call once the shell has more (the ids drawn stay in hand). */
static int ids_ready(engine *e, size_t need)
{
    ALLOC_ASSERT(need <= REQUEST_SPARE_IDS);
    while (e->n_spare < need) {
        uint64_t id = e->order_fn ? e->order_fn(e->order_ctx) : e->next_order++;
        if (!id) return 0;
        e->spare[e->n_spare++] = id;
    }
    return 1;
}

/* Decides entry i again: 1 when it ended (served), 0 when it stays, -1
 * when the pass must stop for lack of order ids. */
static int serve_one(engine *e, size_t i, int64_t now)
{
    struct wait_entry *w = e->wl[i];
    if (!ids_ready(e, ids_needed(e, &w->r))) {
        e->wait_stalled = 1;
        return -1;
    }
    if (reserve_events(e, w->r.n_members + 3) < 0) return 0;
    uint32_t ui = find_user(e, w->r.user);
    ALLOC_ASSERT(ui != STRMAP_NONE);
    engine_result res;
    memset(&res, 0, sizeof res);
    engine_reason why = engine__op_decide(e, ui, &w->r, now, &res);
    if (e->error) return 0;
    if (waitable(why)) return 0;
    if (why != REASON_NONE) {
        memset(&res, 0, sizeof res);
        res.status = STATUS_REJECTED;
        res.reason = why;
    }
    finish(e, i, &res, 1, now);
    return 1;
}

/* The serving pass: in ticket order, while any unit is free. */
static void serve(engine *e, int64_t now)
{
    if (!e->wait_kick || e->counters.waiting == 0) { e->wait_kick = 0; return; }
    if (engine_phase_at(e, now) != PHASE_OPEN) return;   /* kept for resume */
    e->wait_kick = 0;
    e->wait_stalled = 0;
    int took = 0;
    for (size_t i = e->wl_head; i < e->n_wl && !e->error; i++) {
        if (e->counters.free_units <= 0) break;
        if (!e->wl[i]) continue;
        int rc = serve_one(e, i, now);
        if (rc < 0) {            /* out of order ids: the rest at the next call */
            e->wait_kick = 1;
            break;
        }
        took |= rc;
    }
    if (took) compact(e);
}

void engine__wait_step(engine *e, int64_t now)
{
    if (e->error || (e->counters.waiting == 0 && !e->wait_unsorted)) {
        e->wait_kick = 0;
        return;
    }
    settle_loaded(e);
    end_due(e, now);
    serve(e, now);
    /* end_due only moves the head; anything else compacted already */
    ALLOC_DEBUG_ASSERT(e->error || (int64_t)(e->n_wl - e->wl_head) == e->counters.waiting);
}

/* ---------------------------------------------------------------- views */

size_t engine_wait_count(const engine *e) { return (size_t)e->counters.waiting; }

int engine_wait_stalled(const engine *e) { return e->wait_stalled; }

static const struct wait_entry *live_at(const engine *e, size_t i)
{
    /* between calls wl[wl_head..) is exactly the live entries, sorted
     * unless just loaded (then a caller sees hash order until the first
     * decision: only tools read it that early, and they sort) */
    ALLOC_ASSERT(i < (size_t)e->counters.waiting && e->wl_head + i < e->n_wl);
    return e->wl[e->wl_head + i];
}

int64_t engine_wait_head(const engine *e)
{
    if (!e->counters.waiting) return 0;
    int64_t best = INT64_MAX;
    if (!e->wait_unsorted) return live_at(e, 0)->no;
    for (size_t i = e->wl_head; i < e->n_wl; i++)
        if (e->wl[i] && e->wl[i]->no < best) best = e->wl[i]->no;
    return best;
}

int64_t engine_wait_next_deadline(const engine *e)
{
    if (!e->counters.waiting || e->meta.wait_ms <= 0) return INT64_MAX;
    int64_t best = INT64_MAX;
    for (size_t i = e->wl_head; i < e->n_wl; i++) {
        const struct wait_entry *w = e->wl[i];
        if (!w) continue;
        int64_t at = w->joined_at + e->meta.wait_ms;
        if (at < best) best = at;
        if (!e->wait_unsorted) break;   /* sorted: the head is the oldest */
    }
    return best;
}

void engine_wait_at(const engine *e, size_t i, const engine_request **r,
                    int64_t *wait_no, int64_t *joined_at, engine_reason *why)
{
    const struct wait_entry *w = live_at(e, i);
    if (r) *r = &w->r;
    if (wait_no) *wait_no = w->no;
    if (joined_at) *joined_at = w->joined_at;
    if (why) *why = w->why;
}

size_t engine_wait_done_count(const engine *e) { return e->n_wdone; }

void engine_wait_done_at(const engine *e, size_t i, const engine_request **r,
                         engine_result *res)
{
    ALLOC_ASSERT(i < e->n_wdone);
    if (r) *r = &e->wdone[i]->r;
    if (res) *res = e->wdone[i]->res;
}

engine_reason engine_wait_reason_of(engine_op op)
{
    switch (op) {
    case OP_BUY: return REASON_SOLD_OUT;
    case OP_CHOOSE: return REASON_ROOM_FULL;
    case OP_AUTO: case OP_GROUP: return REASON_NO_ROOM;
    default: return REASON_NONE;
    }
}

engine_reason engine_wait_reason_parse(const char *name)
{
    if (!name) return REASON_NONE;
    if (!strcmp(name, "sold_out")) return REASON_SOLD_OUT;
    if (!strcmp(name, "room_full")) return REASON_ROOM_FULL;
    if (!strcmp(name, "no_room")) return REASON_NO_ROOM;
    return REASON_NONE;
}

/* ---------------------------------------------------------------- check */

/* Between calls: the live entries are wl[wl_head..), as many as
 * `waiting`, each a waitable op of a known user, tickets increasing (once
 * sorted) and at most wait_joined; processed counts every one, and every
 * open swap offer (9.3: a `waiting` result, not in `waiting`). */
const char *engine__wait_check(const engine *e)
{
    const engine_counters *c = &e->counters;
    if (c->waiting < 0 || e->wl_head > e->n_wl) return "waitlist: bad bounds";
    if ((int64_t)(e->n_wl - e->wl_head) != c->waiting && !e->wait_unsorted)
        return "waitlist: waiting != live entries";
    if (c->processed + c->staff_granted < c->granted + c->done + c->rejected + c->invalid + c->waiting +
                                              (int64_t)engine_swap_open_count(e))
        return "waitlist: processed does not count the waiting and the swap offers";
    int64_t last = 0;
    for (size_t i = e->wl_head; i < e->n_wl; i++) {
        const struct wait_entry *w = e->wl[i];
        if (!w) { if (!e->wait_unsorted) return "waitlist: a hole between calls"; continue; }
        if (!waitable_op(w->r.op) || !waitable(w->why)) return "waitlist: an entry that may not wait";
        if (find_user(e, w->r.user) == STRMAP_NONE) return "waitlist: an unknown user";
        if (w->no > c->wait_joined) return "waitlist: a ticket beyond wait_joined";
        if (!e->wait_unsorted && w->no <= last) return "waitlist: tickets out of order";
        last = w->no;
    }
    return NULL;
}

/* ---------------------------------------------------------------- life */

void engine__wait_drain_clear(engine *e)
{
    for (size_t i = 0; i < e->n_wdone; i++) entry_free(e->wdone[i]);
    e->n_wdone = 0;
}

void engine__wait_free(engine *e)
{
    engine__wait_drain_clear(e);
    for (size_t i = 0; i < e->n_wl; i++) entry_free(e->wl[i]);
    free(e->wl);
    free(e->wdone);
}
