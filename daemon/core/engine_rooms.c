/* engine_rooms.c -- the room decisions: choose, auto, group (also the
 * seating of a formed group, engine_groups.c), switch, release, and the
 * cancel and expiry of a held bed. A bed is given only through the state
 * layer's engine__seat (one bed per user, never past a room's beds) and
 * taken back through engine__unseat. Where a bed goes away, the holder's
 * open swap offers end first (contract 9.3), so the swaps and the holds
 * need not know about each other.
 */
#include "engine_rooms_int.h"
#include "core/assert.h"
#include "engine_elig_int.h"
#include "engine_hold_int.h"
#include "engine_state.h"
#include "engine_swap_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int64_t held(const engine *e, uint32_t it)
{
    return e->items[it].capacity - e->items[it].free;
}

/* group_fill = exact (11.4): a single user only into a room that has a
 * holder or is a single, so a room for N is left for a group of N. */
static int single_fits(const engine *e, uint32_t it)
{
    if (e->items[it].free <= 0) return 0;
    return e->meta.group_fill != GROUP_FILL_EXACT || e->items[it].capacity == 1 || held(e, it) > 0;
}

/* Seats user ui in room it for request r: the same_X values first, then
 * the bed, its hold, and the result. Caller checked everything. */
static engine_reason seat_one(engine *e, uint32_t ui, uint32_t it, const engine_request *r,
                              int64_t now, engine_result *out)
{
    char *req = engine__seat_prepare(e, r->id, 1, 1);
    if (!req) return REASON_NONE;
    engine__elig_took(e, e->users[ui].id, it, held(e, it));
    engine__seat(e, ui, it, req, r->id, now);
    engine__hold_start(e, ui, now, out);
    engine__granted(e, out, e->items[it].id);
    return REASON_NONE;
}

engine_reason engine__rooms_choose(engine *e, uint32_t ui,
                                   const engine_request *r, int64_t now,
                                   engine_result *out)
{
    uint32_t it = find_item(e, r->item);
    if (it == STRMAP_NONE) return REASON_UNKNOWN_ITEM;
    if (engine__holds_bed(e, ui)) return REASON_ALREADY_HOLDING;
    if (!engine__elig_ok(e, e->users[ui].id, it, STRMAP_NONE)) return REASON_NOT_ELIGIBLE;
    if (!single_fits(e, it)) return REASON_ROOM_FULL;
    return seat_one(e, ui, it, r, now, out);
}

/* The filter's keys and values as the engine's interned texts, into out
 * (2 per pair): 0 when no room can match it (a text no room has), 1 when
 * resolved, -1 when it has more pairs than out holds (compared as text). */
#define FILTER_FAST_MAX 16

static int filter_resolve(const engine *e, const engine_kv *f, size_t n, const char **out)
{
    if (n > FILTER_FAST_MAX) return -1;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = engine__attr_find(e, f[i].key);
        out[2 * i + 1] = engine__attr_find(e, f[i].value);
        if (!out[2 * i] || !out[2 * i + 1]) return 0;
    }
    return 1;
}

/* Every pair of the filter is an attr of the room: by pointer when
 * resolved (fast), by text otherwise. */
static int attrs_match(const item *it, const engine_kv *f, const char *const *fast, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t j = 0;
        if (fast) {
            while (j < it->n_attrs && it->attrs[j].key != fast[2 * i]) j++;
            if (j == it->n_attrs || it->attrs[j].value != fast[2 * i + 1]) return 0;
            continue;
        }
        while (j < it->n_attrs && strcmp(it->attrs[j].key, f[i].key) != 0) j++;
        if (j == it->n_attrs || strcmp(it->attrs[j].value, f[i].value) != 0)
            return 0;
    }
    return 1;
}

/* Whether room it can take the request's user (need 1) or its members
 * (need n): free beds, group_fill (11.4) and eligibility (11.2). */
static int room_fits(const engine *e, const engine_request *r, int64_t need, uint32_t it,
                     const engine_who *who)
{
    const item *p = &e->items[it];
    if (p->free < need) return 0;
    if (need == 1 && !r->n_members) {
        if (!single_fits(e, it)) return 0;
        return engine__elig_ok_who(e, who, it, STRMAP_NONE);
    }
    if (e->meta.group_fill == GROUP_FILL_EXACT && (held(e, it) != 0 || p->capacity != need))
        return 0;
    return engine__elig_group_ok(e, r->members, r->n_members, it);
}

/* The room for auto and group: the first of prefs that fits, else (with a
 * filter) the matching room that fits with the fewest free beds, ties by
 * id -- filling rooms up keeps whole rooms free for groups. Rooms the user
 * (or a member) may not hold are skipped in both. The filter looks through
 * the rooms with a bed free only (free_items, in no order: the choice
 * does not depend on it), which late in a round are few: a waitlist pass
 * decides every entry again whenever a bed comes back, and at 8,000 rooms
 * a scan of all of them per entry took seconds per pass. *pref: the
 * room's place in prefs (1 = first), 0 when the filter found it. */
static uint32_t pick_room(const engine *e, const engine_request *r, int64_t need, int64_t *pref)
{
    const engine_who *who = r->user_hash ? engine__elig_who_hashed(e, r->user, *r->user_hash)
                                         : engine__elig_who(e, r->user);   /* once, not per room */
    *pref = 0;
    for (size_t i = 0; i < r->n_prefs; i++) {
        uint32_t it = r->pref_hashes && i < ENGINE_PREF_HASHES
                      ? strmap_find_hashed(&e->item_map, r->prefs[i], r->pref_hashes[i])
                      : find_item(e, r->prefs[i]);
        if (it != STRMAP_NONE && room_fits(e, r, need, it, who)) { *pref = (int64_t)i + 1; return it; }
    }
    if (!r->has_filter) return STRMAP_NONE;
    const char *fast[2 * FILTER_FAST_MAX];
    int resolved = filter_resolve(e, r->filter, r->n_filter, fast);
    if (resolved == 0) return STRMAP_NONE;
    uint32_t best = STRMAP_NONE;
    for (size_t k = 0; k < e->n_free_items; k++) {
        uint32_t it = e->free_items[k];
        const item *p = &e->items[it];
        if (p->free < need || !attrs_match(p, r->filter, resolved > 0 ? fast : NULL, r->n_filter) ||
            !room_fits(e, r, need, it, who))
            continue;
        if (best == STRMAP_NONE || p->free < e->items[best].free ||
            (p->free == e->items[best].free && strcmp(p->id, e->items[best].id) < 0))
            best = it;
    }
    return best;
}

engine_reason engine__rooms_auto(engine *e, uint32_t ui, const engine_request *r,
                                 int64_t now, engine_result *out)
{
    if (engine__holds_bed(e, ui)) return REASON_ALREADY_HOLDING;
    int64_t pref;
    uint32_t it = pick_room(e, r, 1, &pref);
    if (it == STRMAP_NONE) return REASON_NO_ROOM;
    engine_reason why = seat_one(e, ui, it, r, now, out);
    if (why == REASON_NONE && out->status == STATUS_GRANTED) out->pref = pref;
    return why;
}

/* Seats every member in room `it`, or nobody: all allocations (member
 * records, request id copies, output room) happen before the first seat. */
static void seat_group(engine *e, const engine_request *r, uint32_t it,
                       int64_t now, engine_result *out)
{
    size_t n = r->n_members;
    char **reqs = calloc(n, sizeof *reqs);
    uint32_t *ids = calloc(n, sizeof *ids);
    int ok = reqs && ids && engine__reserve(e, n, n, 1, 0) == 0 && engine__hold_reserve(e, n) == 0;
    for (size_t i = 0; ok && i < n; i++) {
        reqs[i] = engine__intern(r->id ? r->id : "");
        ids[i] = reqs[i] ? engine__user_touch(e, r->members[i]) : STRMAP_NONE;
        ok = ids[i] != STRMAP_NONE;
    }
    if (ok) {
        int64_t free_before = e->items[it].free;
        engine__elig_took(e, r->members[0], it, held(e, it));
        for (size_t i = 0; i < n; i++) engine__seat(e, ids[i], it, reqs[i], r->id, now);
        /* every member holds their own bed (and pays their own deposit);
         * the result carries the requester's order */
        for (size_t i = 0; i < n; i++)
            engine__hold_start(e, ids[i], now, strcmp(r->members[i], r->user) ? NULL : out);
        /* All members in one room: n beds of room `it`, and each member
         * there (a search of n users: debug builds only). */
        ALLOC_ASSERT(e->items[it].free == free_before - (int64_t)n);
        for (size_t i = 0; ALLOC_DEBUG && i < n; i++)
            ALLOC_DEBUG_ASSERT(e->users[ids[i]].u.r.room == it);
        engine__granted(e, out, e->items[it].id);
    } else {
        engine__out_of_memory(e);
        for (size_t i = 0; reqs && i < n; i++) free(reqs[i]);
    }
    free(reqs);
    free(ids);
}

engine_reason engine__rooms_group(engine *e, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    size_t n = r->n_members;
    if ((int64_t)n > e->meta.max_group) return REASON_GROUP_TOO_LARGE;
    for (size_t i = 0; i < n; i++)
        if (engine__holds_bed(e, find_user(e, r->members[i]))) return REASON_MEMBER_BUSY;
    int64_t pref;
    uint32_t it = pick_room(e, r, (int64_t)n, &pref);
    if (it == STRMAP_NONE) return REASON_NO_ROOM;
    seat_group(e, r, it, now, out);
    if (out->status == STATUS_GRANTED) out->pref = pref;
    return REASON_NONE;
}

engine_reason engine__rooms_switch(engine *e, uint32_t ui,
                                   const engine_request *r, int64_t now,
                                   engine_result *out)
{
    uint32_t it = find_item(e, r->item);
    if (it == STRMAP_NONE) return REASON_UNKNOWN_ITEM;
    if (!engine__holds_bed(e, ui)) return REASON_NOT_HOLDING;
    if (e->users[ui].u.r.room == it) return REASON_ALREADY_HOLDING;
    if (!engine__elig_ok(e, e->users[ui].id, it, STRMAP_NONE)) return REASON_NOT_ELIGIBLE;
    if (!single_fits(e, it)) return REASON_ROOM_FULL;   /* the old bed stays */
    char *req = engine__seat_prepare(e, r->id, 2, 2);
    if (!req) return REASON_NONE;
    if (engine__swaps_bed_gone(e, ui, now) < 0) { free(req); return REASON_NONE; }
    engine__elig_took(e, e->users[ui].id, it, held(e, it));
    engine__unseat(e, ui, r->id, now);
    engine__seat(e, ui, it, req, r->id, now);
    engine__granted(e, out, e->items[it].id);
    return REASON_NONE;
}

engine_reason engine__rooms_release(engine *e, uint32_t ui,
                                    const engine_request *r, int64_t now,
                                    engine_result *out)
{
    if (!engine__holds_bed(e, ui)) return REASON_NOT_HOLDING;
    if (engine__reserve(e, 1, 1, 1, 0) < 0 || engine__swaps_bed_gone(e, ui, now) < 0) return REASON_NONE;
    engine__hold_clear(e, ui);   /* a held bed given back ends its hold */
    engine__done(out, e->items[engine__unseat(e, ui, r->id, now)].id);
    return REASON_NONE;
}


engine_reason engine__rooms_cancel(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out)
{
    engine_reason why = engine__hold_find(e, ui, r->order);
    if (why != REASON_NONE) return why;
    /* the bed goes: open swap offers by or to its holder end (9.3) */
    if (engine__reserve(e, 1, 1, 1, 0) < 0 || engine__hold_reserve(e, 0) < 0 ||
        engine__swaps_bed_gone(e, ui, now) < 0)
        return REASON_NONE;
    return engine__hold_cancel(e, ui, r, now, out);
}

void engine__rooms_expire(engine *e, uint32_t ui, int64_t now)
{
    if (engine__hold_reserve(e, 0) < 0 || engine__swaps_bed_gone(e, ui, now) < 0) return;
    engine__hold_expire(e, ui, now);
}
