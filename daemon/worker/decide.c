/* decide.c -- deciding a chunk (see decide.h). The results stay on the
 * chunk's items as engine_result structs, not as JSON: the encoder writes
 * each result straight into the transaction, so a result is formatted
 * once and copied once.
 */
#include "worker/decide.h"

#include "base/log.h"

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

void decide_chunk(chunk *ch, engine *e, int64_t now, size_t from, size_t to)
{
    if (from == 0) engine_expire(e, now);
    if (to > ch->n_items) to = ch->n_items;
    uint32_t h[PF_RING];
    int has[PF_RING] = { 0 };
    for (size_t i = from; i < to + PF_AHEAD; i++) {
        if (i < to) {
            const char *u = item_user(ch, i);
            has[i % PF_RING] = u != NULL;
            if (u) { h[i % PF_RING] = engine_user_hash(e, u); engine_prefetch_user(e, h[i % PF_RING], 0); }
        }
        size_t r = i - PF_AHEAD / 3, d = i - PF_AHEAD / 3 * 2, k = i - PF_AHEAD;
        if (i >= from + PF_AHEAD / 3 && r < to && has[r % PF_RING]) engine_prefetch_user(e, h[r % PF_RING], 1);
        if (i >= from + PF_AHEAD / 3 * 2 && d < to && has[d % PF_RING]) engine_prefetch_user(e, h[d % PF_RING], 2);
        if (i >= from + PF_AHEAD && k < to) decide_item(ch, &ch->items[k], e, now);
    }
}
