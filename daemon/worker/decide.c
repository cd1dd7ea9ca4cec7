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
        it->res = (engine_result){ .status = ST_INVALID };
        chunk_count_result(ch, ST_INVALID, R_NONE);
        return;
    }
    it->q.r.seq = it->seq;
    engine_decide(e, &it->q.r, now, &it->res);
    chunk_count_result(ch, it->res.status, it->res.reason);
}

void decide_chunk(chunk *ch, engine *e, int64_t now, size_t from, size_t to)
{
    if (from == 0) engine_expire(e, now);
    if (to > ch->n_items) to = ch->n_items;
    for (size_t i = from; i < to; i++) decide_item(ch, &ch->items[i], e, now);
}
