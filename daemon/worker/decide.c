/* decide.c -- deciding a chunk (see decide.h). The results stay on the
 * chunk's items as engine_result structs, not as JSON: the encoder writes
 * each result straight into the transaction, so a result is formatted
 * once and copied once.
 */
#include "worker/decide.h"

#include "base/log.h"
#include "core/engine_swap.h"
#include "core/engine_wait.h"

static void decide_item(chunk *ch, chunk_item *it, engine *e, int64_t now)
{
    /* Counters describe the queue (dequeued = processed + dead +
     * duplicates + in flight); admin commands are counted in `ctl`. */
    int counts = ch->kind != CHUNK_CTL;
    if (it->q.outcome == REQUEST_DEAD) {
        if (counts) engine_note_dead(e);
        return;
    }
    if (it->dup) {
        if (counts) engine_note_duplicate(e);
        /* an operator reusing an admin command's id would otherwise see
         * nothing happen: say so (its earlier result stays the answer) */
        else log_warn("admin command id '%s' already has a result: not applied again; "
                      "send it with a new id", it->q.r.id ? it->q.r.id : "?");
        return;
    }
    if (it->q.outcome == REQUEST_INVALID) {
        if (counts) engine_note_invalid(e, it->q.r.user, now);
        it->res = (engine_result){ .status = STATUS_INVALID };
        chunk_count_result(ch, STATUS_INVALID, REASON_NONE);
        return;
    }
    it->q.r.seq = it->seq;
    engine_decide(e, &it->q.r, now, &it->res);
    chunk_count_result(ch, it->res.status, it->res.reason);
}

/* The user of item i, for the prefetch (NULL: nothing to warm). */
static const char *item_user(const chunk *ch, size_t i)
{
    const chunk_item *it = &ch->items[i];
    return it->q.outcome == REQUEST_OK && !it->dup ? it->q.r.user : NULL;
}

/* Requests ahead of the decision at which each prefetch stage runs
 * (engine_prefetch_user): the slot PF_AHEAD ahead, the record 2/3 of
 * that ahead, the id 1/3; every decision stays in queue order. */
enum { PF_AHEAD = 12, PF_RING = 16 };

/* A request's user and the rooms of its first preferences, warmed stage
 * by stage; the preferences' hashes go to the engine with the request
 * (engine_request.pref_hashes), so each is hashed once. */
typedef struct pf_slot {
    uint32_t user;
    uint32_t prefs[ENGINE_PREF_HASHES];
    uint8_t has_user, n_prefs;
} pf_slot;

static void warm(const engine *e, const pf_slot *p, int stage)
{
    if (p->has_user) engine_prefetch_user(e, p->user, stage);
    for (int j = 0; j < p->n_prefs; j++) engine_prefetch_item(e, p->prefs[j], stage);
}

static void warm_first(chunk *ch, size_t i, const engine *e, pf_slot *p)
{
    const char *u = item_user(ch, i);
    engine_request *r = &ch->items[i].q.r;
    p->has_user = u != NULL;
    p->n_prefs = 0;
    if (u) p->user = engine_user_hash(e, u);
    for (size_t j = 0; u && j < r->n_prefs && j < ENGINE_PREF_HASHES; j++)
        p->prefs[p->n_prefs++] = engine_item_hash(e, r->prefs[j]);
    r->pref_hashes = p->n_prefs ? p->prefs : NULL;   /* the first min(n_prefs, 3), all of them */
    r->user_hash = p->has_user ? &p->user : NULL;
    warm(e, p, 0);
}

void decide_chunk(chunk *ch, engine *e, int64_t now, size_t from, size_t to)
{
    if (from == 0) engine_expire(e, now);
    if (to > ch->n_items) to = ch->n_items;
    pf_slot ring[PF_RING];
    for (size_t i = from; i < to + PF_AHEAD; i++) {
        if (i < to) warm_first(ch, i, e, &ring[i % PF_RING]);
        size_t r = i - PF_AHEAD / 3, d = i - PF_AHEAD / 3 * 2, k = i - PF_AHEAD;
        if (i >= from + PF_AHEAD / 3 && r < to) warm(e, &ring[r % PF_RING], 1);
        if (i >= from + PF_AHEAD / 3 * 2 && d < to) warm(e, &ring[d % PF_RING], 2);
        if (i >= from + PF_AHEAD && k < to) {
            decide_item(ch, &ch->items[k], e, now);
            ch->items[k].q.r.pref_hashes = NULL;   /* the ring's, gone with this call */
            ch->items[k].q.r.user_hash = NULL;
        }
    }
    /* the waitlist places and swap offers this chunk ended get their final
     * result in its transaction too (apply_txn.c): counted once, after the
     * last slice, when no decision of the chunk can end another */
    if (to == ch->n_items) {
        for (size_t i = 0; i < engine_wait_done_count(e); i++) {
            engine_result res;
            engine_wait_done_at(e, i, NULL, &res);
            chunk_count_result(ch, res.status, res.reason);
        }
        for (size_t i = 0; i < engine_swap_resolved_count(e); i++) {
            engine_swap_resolved s;
            engine_swap_resolved_at(e, i, &s);
            chunk_count_result(ch, s.res.status, s.res.reason);
        }
    }
}
