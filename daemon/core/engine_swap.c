/* engine_swap.c -- swaps of beds by mutual request (contract 9.3; see
 * engine_swap.h for the rules).
 *
 * Open offers are few next to users and beds (a swap is asked for by a
 * handful of students), so they are kept in one array, oldest first, and
 * found by a scan; each user's count of offers they are part of makes the
 * common case -- a release or switch by someone with none -- O(1). Every
 * live offer has its slot reserved in the resolved list from the moment it
 * is made, so ending offers (inside a release, a switch, a close) never
 * allocates.
 */
#include "core/engine_swap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "core/vec.h"
#include "engine_elig_int.h"
#include "engine_state.h"
#include "engine_swap_int.h"

typedef struct swap_offer {
    uint32_t from, to;
    char *req;
    int64_t seq;
    engine_swap_drawn drawn;
} swap_offer;

typedef struct engine_swaps {
    swap_offer *o;              /* open offers, oldest first */
    size_t n, cap;
    uint32_t *involved;         /* by user index: offers from or to the user */
    size_t n_involved;
    engine_swap_resolved *done; /* waiting results replaced since the drain */
    size_t n_done, cap_done;
    char **done_req;            /* their request ids (owned until the drain) */
} engine_swaps;

static engine_swaps *swaps_of(engine *e)
{
    if (!e->swaps) e->swaps = calloc(1, sizeof *e->swaps);
    return e->swaps;
}

static uint32_t involved(const engine_swaps *s, uint32_t ui)
{
    return s && ui < s->n_involved ? s->involved[ui] : 0;
}

/* Room for one more open offer: the offer itself, its users' counters,
 * and its future resolved slot. */
static int reserve_offer(engine *e, engine_swaps *s, uint32_t a, uint32_t b)
{
    uint32_t top = a > b ? a : b;
    if (top >= s->n_involved) {
        size_t n = e->n_users > (size_t)top + 1 ? e->n_users : (size_t)top + 1;
        uint32_t *v = realloc(s->involved, n * sizeof *v);
        if (!v) return -ENOMEM;
        memset(v + s->n_involved, 0, (n - s->n_involved) * sizeof *v);
        s->involved = v;
        s->n_involved = n;
    }
    size_t cap_req = s->cap_done;
    if (vec_reserve((void **)&s->o, &s->cap, s->n + 1, sizeof *s->o) < 0 ||
        vec_reserve((void **)&s->done, &s->cap_done, s->n_done + s->n + 2, sizeof *s->done) < 0)
        return -ENOMEM;
    if (s->cap_done != cap_req) {
        char **r = realloc(s->done_req, s->cap_done * sizeof *r);
        if (!r) { s->cap_done = cap_req; return -ENOMEM; }
        s->done_req = r;
    }
    return 0;
}

/* Offer k ends with `res`: its waiting result is replaced (counted now, as
 * every result is counted once); its owner's holders entry changes. */
static void end_offer(engine *e, engine_swaps *s, size_t k, engine_result res)
{
    swap_offer o = s->o[k];
    ALLOC_ASSERT(s->n_done < s->cap_done);
    engine_counters *c = &e->counters;
    if (res.status == STATUS_GRANTED) c->granted++;
    else c->rejected++;
    s->done_req[s->n_done] = o.req;
    s->done[s->n_done++] = (engine_swap_resolved){ .req = o.req, .user = e->users[o.from].id,
                                                  .seq = o.seq, .res = res, .drawn = o.drawn };
    s->involved[o.from]--;
    s->involved[o.to]--;
    memmove(&s->o[k], &s->o[k + 1], (s->n - k - 1) * sizeof *s->o);
    s->n--;
    engine__dirty_user(e, o.from);
}

static engine_result rejected(engine_reason why)
{
    return (engine_result){ .status = STATUS_REJECTED, .reason = why };
}

/* Ends every offer from or to ui with `why`, after reserving the marks --
 * and two more: the caller reserved its own marks (the release or switch
 * that follows marks ui) before calling, and these may use them up. */
static int end_all_of(engine *e, uint32_t ui, engine_reason why)
{
    engine_swaps *s = e->swaps;
    uint32_t n = involved(s, ui);
    if (!n) return 0;
    if (engine__reserve_users(e, (size_t)n + 2) < 0) return -ENOMEM;
    for (size_t k = s->n; k-- > 0;)
        if (s->o[k].from == ui || s->o[k].to == ui) end_offer(e, s, k, rejected(why));
    ALLOC_ASSERT(involved(s, ui) == 0);
    return 0;
}

int engine__swaps_bed_gone(engine *e, uint32_t ui, int64_t now)
{
    (void)now;
    if (end_all_of(e, ui, REASON_NOT_HOLDING) < 0) { engine__out_of_memory(e); return -ENOMEM; }
    return 0;
}

void engine__swaps_close(engine *e, int64_t now)
{
    (void)now;
    engine_swaps *s = e->swaps;
    if (!s || !s->n) return;
    if (engine__reserve_users(e, s->n + 2) < 0) { engine__out_of_memory(e); return; }
    while (s->n) end_offer(e, s, s->n - 1, rejected(REASON_CLOSED));
}

/* Exchanges the beds of ui and vi (both hold one), as two releases and two
 * grants in the log. -ENOMEM (nothing changed) or 0. */
static int exchange_beds(engine *e, uint32_t ui, uint32_t vi, const char *req_u,
                         const char *req_v, int64_t now)
{
    char *ru = engine__seat_prepare(e, req_u, 4, 2), *rv = ru ? engine__intern(req_v ? req_v : "") : NULL;
    if (!ru || !rv || engine__reserve(e, 4, 2, 2, 0) < 0) {
        free(ru);
        free(rv);
        return -ENOMEM;
    }
    uint32_t a = engine__unseat(e, ui, req_u, now), b = engine__unseat(e, vi, req_v, now);
    engine__elig_took(e, e->users[ui].id, b, e->items[b].capacity - e->items[b].free);
    engine__elig_took(e, e->users[vi].id, a, e->items[a].capacity - e->items[a].free);
    engine__seat(e, ui, b, ru, req_u, now);
    engine__seat(e, vi, a, rv, req_v, now);
    return 0;
}

/* The oldest open offer from `from` to `to`, or -1. */
static long find_offer(const engine_swaps *s, uint32_t from, uint32_t to)
{
    for (size_t k = 0; s && k < s->n; k++)
        if (s->o[k].from == from && s->o[k].to == to) return (long)k;
    return -1;
}

engine_reason engine__swaps_decide(engine *e, uint32_t ui, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    if (!engine__holds_bed(e, ui)) return REASON_NOT_HOLDING;
    uint32_t vi = find_user(e, r->peer);
    if (vi == STRMAP_NONE || vi == ui || !engine__holds_bed(e, vi)) return REASON_NOT_HOLDING;
    /* 11.2: each user for the other's bed, the other leaving it */
    if (!engine__elig_ok(e, e->users[ui].id, e->users[vi].u.r.room, vi) ||
        !engine__elig_ok(e, e->users[vi].id, e->users[ui].u.r.room, ui))
        return REASON_NOT_ELIGIBLE;
    engine_swaps *s = swaps_of(e);
    if (!s || reserve_offer(e, s, ui, vi) < 0) { engine__out_of_memory(e); return REASON_NONE; }
    long k = find_offer(s, vi, ui);
    if (k < 0) {
        /* the first half: recorded, answered `waiting` */
        if (engine_swap_offers_of(e, r->user, NULL, 0) >= ENGINE_SWAP_OFFERS_MAX) return REASON_LIMIT;
        char *req = strdup(r->id);
        if (!req || engine__reserve_users(e, 1) < 0) { free(req); engine__out_of_memory(e); return REASON_NONE; }
        s->o[s->n++] = (swap_offer){ .from = ui, .to = vi, .req = req, .seq = r->seq,
                                     .drawn = { r->draw, r->points, r->has_points } };
        s->involved[ui]++;
        s->involved[vi]++;
        engine__dirty_user(e, ui);
        out->status = STATUS_WAITING;
        return REASON_NONE;
    }
    /* the second half: one step. The answered offer is taken out first;
     * the other offers of both end not_holding (their beds move). */
    swap_offer o = s->o[k];
    if (engine__reserve_users(e, involved(s, ui) + involved(s, vi) + 2) < 0 ||
        exchange_beds(e, ui, vi, r->id, o.req, now) < 0) {
        engine__out_of_memory(e);
        return REASON_NONE;
    }
    engine_result theirs = { .status = STATUS_GRANTED, .item = e->items[e->users[vi].u.r.room].id,
                             .rank = e->counters.granted + 1 };
    end_offer(e, s, (size_t)k, theirs);
    end_all_of(e, ui, REASON_NOT_HOLDING);    /* reserved above: cannot fail */
    end_all_of(e, vi, REASON_NOT_HOLDING);
    out->status = STATUS_GRANTED;
    out->item = e->items[e->users[ui].u.r.room].id;
    out->rank = e->counters.granted + 1;  /* counted right after, like every grant */
    return REASON_NONE;
}

size_t engine_swap_offers_of(const engine *e, const char *uid, engine_swap_offer *out, size_t max)
{
    const engine_swaps *s = e->swaps;
    uint32_t ui = find_user(e, uid);
    if (!involved(s, ui)) return 0;
    size_t n = 0;
    for (size_t k = 0; k < s->n; k++) {
        if (s->o[k].from != ui) continue;
        if (n < max) out[n] = (engine_swap_offer){ s->o[k].req, e->users[s->o[k].to].id, s->o[k].seq, s->o[k].drawn };
        n++;
    }
    return n;
}

size_t engine_swap_open_count(const engine *e) { return e->swaps ? e->swaps->n : 0; }
size_t engine_swap_resolved_count(const engine *e) { return e->swaps ? e->swaps->n_done : 0; }

void engine_swap_resolved_at(const engine *e, size_t i, engine_swap_resolved *out)
{
    ALLOC_ASSERT(e->swaps && i < e->swaps->n_done);
    *out = e->swaps->done[i];
}

void engine__swaps_drain_clear(engine *e)
{
    engine_swaps *s = e->swaps;
    if (!s) return;
    for (size_t i = 0; i < s->n_done; i++) free(s->done_req[i]);
    s->n_done = 0;
}

void engine__swaps_free(engine *e)
{
    engine_swaps *s = e->swaps;
    if (!s) return;
    engine__swaps_drain_clear(e);
    for (size_t k = 0; k < s->n; k++) free(s->o[k].req);
    free(s->o);
    free(s->involved);
    free(s->done);
    free(s->done_req);
    free(s);
    e->swaps = NULL;
}

int engine_load_swap_offer(engine *e, const char *uid, const engine_swap_offer *o)
{
    if (!o || !o->with || !o->req || !*o->req) return -EINVAL;
    uint32_t ui = engine__user_load(e, uid), vi = engine__user_load(e, o->with);
    if (ui == STRMAP_NONE || vi == STRMAP_NONE || ui == vi ||
        engine_swap_offers_of(e, uid, NULL, 0) >= ENGINE_SWAP_OFFERS_MAX)
        return -EINVAL;
    engine_swaps *s = swaps_of(e);
    if (!s || reserve_offer(e, s, ui, vi) < 0) return -ENOMEM;
    char *copy = strdup(o->req);
    if (!copy) return -ENOMEM;
    s->o[s->n++] = (swap_offer){ .from = ui, .to = vi, .req = copy, .seq = o->seq, .drawn = o->drawn };
    s->involved[ui]++;
    s->involved[vi]++;
    return 0;
}

/* Every open offer is between two holders of a bed, other than each other,
 * and the per-user counts are the offers' (engine_check_invariants). */
const char *engine__swaps_check(const engine *e)
{
    const engine_swaps *s = e->swaps;
    if (!s) return NULL;
    uint64_t sum = 0;
    for (size_t k = 0; k < s->n; k++) {
        const swap_offer *o = &s->o[k];
        if (o->from == o->to || o->from >= e->n_users || o->to >= e->n_users)
            return "swaps: an offer to oneself or to no user";
        if (!engine__holds_bed(e, o->from) || !engine__holds_bed(e, o->to))
            return "swaps: an open offer by or to someone without a bed";
    }
    for (size_t ui = 0; ui < s->n_involved; ui++) sum += s->involved[ui];
    if (sum != 2 * (uint64_t)s->n) return "swaps: the per-user offer counts do not add up";
    if (s->cap_done < s->n_done + s->n) return "swaps: an open offer without its reserved result slot";
    return NULL;
}
