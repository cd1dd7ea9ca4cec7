/* batch_apply.c -- a batch worker's writing phase: decide and apply.
 *
 * A chunk that is deduped waits for the chunks before it and for an
 * order-id block when its buys need one (and, with wait_replicas, for
 * WAIT); then the engine decides it in slices and apply_txn.h encodes the
 * transaction that writes it. Applies are pipelined: FENCE's
 * chunks_applied check keeps them in order. The reply makes the chunk's
 * counts real (stats) and frees its slot in the ring.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "core/assert.h"
#include "worker/apply_txn.h"
#include "worker/decide.h"
#include "batch_worker_int.h"

void batch__on_orders(batch_worker *w, chunk *ch, redisReply *r)
{
    if (order_ids_take(&w->orders, r, batch__ids_needed(w, ch)) < 0) {
        batch__fail(w, "order id block", "unexpected reply");
        return;
    }
    batch__advance(w);
}

/* ------------------------------------------------------ decide, apply -- */

/* Over the current and the previous 10 s window. */
static int64_t recent_quantile_us(const batch_worker *w, double q)
{
    metrics_hist h = w->recent;
    for (size_t i = 0; i <= METRICS_BUCKETS; i++) h.buckets[i] += w->recent_prev.buckets[i];
    h.count += w->recent_prev.count;
    return (int64_t)(metrics_hist_quantile(&h, q) * 1e6);
}

/* Decides the chunk in slices: between them the apply sent last keeps
 * flowing to Redis (its socket may not have taken it all), so Redis works
 * on it while this chunk is decided. Every id answered is remembered. */
static int decide(batch_worker *w, chunk *ch, int64_t now)
{
    uint64_t t0 = uv_hrtime();
    size_t i = 0;
    do {
        size_t to = ch->n_items - i > DECIDE_SLICE ? i + DECIDE_SLICE : ch->n_items;
        decide_chunk(ch, w->eng, now, i, to);
        i = to;
        if (i < ch->n_items) redis_conn_flush(w->cmd);
    } while (i < ch->n_items);
    metrics_hist_observe(&w->stats.decide, (double)(uv_hrtime() - t0) / 1e9);
    /* a forgotten id would not be asked about when resubmitted: the chunk
     * must not be applied then */
    int remembered = dedup_remember(&w->dedup, ch);
    if (remembered < 0 || engine_error(w->eng)) {
        batch__fail(w, "decide", "out of memory in the engine");
        return -ENOMEM;
    }
    return 0;
}

/* The clock a chunk is decided at: now, but on its side of opens_at. */
static int64_t decide_time(const batch_worker *w, const chunk *ch)
{
    int64_t now = clock_wall_ms();
    const engine_meta *m = engine_get_meta(w->eng);
    /* taken before the opening: decided before it, so its requests join the
     * pool instead of overtaking it (the draw waits for this chunk) */
    if (ch->early && now >= m->opens_at) now = m->opens_at - 1;
    /* and one taken at or after it (a pool chunk, or the queue once the
     * lottery is drawn) is decided after it: a wall clock stepped back
     * behind opens_at would have the engine keep its requests for a pool
     * this chunk does not feed, and they would be lost */
    else if (!ch->early && m->early == EARLY_SHUFFLE && (ch->kind == CHUNK_POOL || ch->queue_len) &&
             now < m->opens_at)
        now = m->opens_at;
    return now;
}

/* The transaction's context: the lease, the counters this apply builds
 * on, the settings. With wait_replicas, stats.dequeued in the chunk's
 * effect counts the staged chunk before it too: its LTRIM goes first. */
void batch__txn_ctx(batch_worker *w, apply_txn_ctx *ctx, int64_t now)
{
    const chunk *prev = w->cfg->wait_replicas > 0 ? batch__staged_chunk(w) : NULL;
    *ctx = (apply_txn_ctx){
        .keys = &w->keys, .trip_key = w->trip_key, .fence_src = w->scripts->fence.source,
        .token = w->lease.token, .epoch = w->lease.epoch,
        .chunks_applied = w->chunks_applied, .dequeued = w->dequeued + (prev ? prev->queue_len : 0),
        .now = now, .first_apply = w->first_apply, .pool_served = w->pool.served, .pool_n = w->pool.n,
        .pool = w->pool.loaded ? &w->pool : NULL,
        .log_maxlen = w->cfg->log_maxlen, .log_chunk = w->cfg->log_chunk,
        .archive_group = w->cfg->archive_group, .instance = w->cfg->instance,
        .decision_p50_us = recent_quantile_us(w, 0.50), .decision_p99_us = recent_quantile_us(w, 0.99),
        .fault_apply_id = w->fault_apply_id, .bad_profiles = &w->profiles_report.bad,
        .cluster = redis_router_is_cluster(w->router),
    };
}

/* Decides the chunk and encodes its apply transaction into w->args;
 * apply_send sends it. With wait_replicas the transaction publishes the
 * staged chunk and stages this one (apply_txn.h); a publish-only chunk
 * decides nothing. */
static int apply_build(batch_worker *w, chunk *ch)
{
    apply_txn_ctx ctx;
    if (ch->publish_only) {
        batch__txn_ctx(w, &ctx, clock_wall_ms());
        if (apply_txn_encode_publish(&w->args, &ctx, &w->staged) < 0) { batch__fail(w, "apply", "out of memory"); return -ENOMEM; }
        return 0;
    }
    int64_t now = decide_time(w, ch);
    w->orders.block.now_ms = now;
    int rc = decide(w, ch, now);
    if (rc < 0) return rc;
    if (ch->early && lottery_pool_take_chunk(&w->pool, ch) < 0) {
        batch__fail(w, "decide", "out of memory in the lottery pool");
        return -ENOMEM;
    }
    batch__txn_ctx(w, &ctx, now);
    if (w->first_apply) ctx.immediate = &w->loaded_free;
    const argbuf *staged = w->staged.ncmds ? &w->staged : NULL;
    rc = w->cfg->wait_replicas > 0 ? apply_txn_encode_staged(&w->args, &w->effect, &ctx, staged, ch, w->eng)
                                   : apply_txn_encode(&w->args, &ctx, ch, w->eng);
    if (rc < 0) { batch__fail(w, "apply", "out of memory"); return -ENOMEM; }
    /* The next chunk builds on this one: the engine has moved on, and Redis
     * will have too once this transaction is in (FENCE refuses the next one
     * otherwise). The drain lists are cleared now, before the send: w->args
     * holds every change, and if the send or the apply fails the worker
     * reloads the engine from Redis instead of writing them again. */
    w->written_phase = engine_phase_at(w->eng, now);
    engine_drain_clear(w->eng);
    lottery_pool_pending_clear(&w->pool);
    w->first_apply = 0;
    return 0;
}

/* Sends the pipeline in w->args as op `kind`; a failure is the worker's
 * (batch__fail, step `what`). hiredis copies it, so w->args is free again
 * for the next chunk. 0 or a negative errno. */
int batch__send_args(batch_worker *w, worker_op_kind kind, chunk *ch, const char *what)
{
    argbuf *a = &w->args;
    redis_slice stack[64], *cmds = a->ncmds <= 64 ? stack : malloc(a->ncmds * sizeof *cmds);
    if (!cmds) { batch__fail(w, what, "out of memory"); return -ENOMEM; }
    size_t n = argbuf_slices(a, cmds, a->ncmds);
    worker_op *o = batch__op_new(w, kind, ch);
    int rc = o ? redis_conn_pipeline(w->cmd, batch__on_op_reply, o, w->cfg->redis_timeout_ms, cmds, n) : -ENOMEM;
    if (cmds != stack) free(cmds);
    if (rc < 0) {
        if (o) o->busy = 0;
        batch__fail(w, what, rc == -ENOTCONN ? "Redis not connected" : "out of memory");
    }
    return rc;
}

/* Sends the pipeline apply_build built. */
static void apply_send(batch_worker *w, chunk *ch)
{
    if (batch__lease_check(w, "apply") < 0) return;
    if (batch__send_args(w, WOP_APPLY, ch, "apply") < 0) return;
    redis_conn_flush(w->cmd);   /* Redis starts on it while the next is decided */
    /* the LTRIM this transaction carries: the chunk's own, or with
     * wait_replicas the staged one's it publishes (before ch is APPLYING) */
    const chunk *trimmed = w->cfg->wait_replicas > 0 ? batch__staged_chunk(w) : ch;
    ch->state = CS_APPLYING;
    ch->apply_sent_at = uv_hrtime();
    if (trimmed) {
        w->dequeued += trimmed->queue_len;
        w->queue_unsent -= trimmed->queue_len;
        w->ctl_unsent -= trimmed->ctl_len;
    }
    /* a chunk's entries were counted in when it was taken (on_take) */
    ALLOC_ASSERT(w->queue_unsent >= 0 && w->ctl_unsent >= 0);
    w->chunks_applied++;
    if (w->cfg->wait_replicas > 0) batch__staged_sent(w, ch);
}

/* Decides the chunks that are ready, oldest first, and sends their applies
 * (pipelined: FENCE's chunks_applied check keeps them in order; scripts.h
 * has the one case it cannot cover). A chunk waits for the ones before it
 * and for an order-id block when its buys need one. */
void batch__advance(batch_worker *w)
{
    for (size_t i = 0; i < w->ring.n && w->state == W_SERVING; i++) {
        chunk *ch = chunk_ring_at(&w->ring, i);
        if (ch->state == CS_DONE || ch->state == CS_APPLYING || ch->state == CS_STAGED) continue;
        if (ch->state != CS_DEDUPED) return;
        size_t buys = ch->publish_only ? 0 : batch__ids_needed(w, ch);
        if (order_block_left(&w->orders.block) < buys) {
            if (w->orders.outstanding) return;
            worker_op *o = batch__op_new(w, WOP_ORDERS, ch);
            if (!o || order_ids_request(&w->orders, w->router, &w->scripts->order_block,
                                        w->cfg->redis_timeout_ms, buys, batch__on_op_reply, o) < 0) {
                if (o) o->busy = 0;
                batch__fail(w, "order id block", o ? "Redis not connected" : "too many commands in flight");
            }
            return;
        }
        if (w->cfg->wait_replicas > 0 && batch__replicas_wait(w)) return;
        if (apply_build(w, ch) < 0) return;
        apply_send(w, ch);
    }
}

/* ------------------------------------------------------------- applied -- */

/* A chunk is in Redis: its counts and latencies become real. The recent
 * latency window (for stats.decision_p50_us/p99_us) rotates every 10 s. */
static void note_applied(batch_worker *w, chunk *ch)
{
    batch_worker_stats *st = &w->stats;
    uint64_t now = uv_hrtime();
    st->chunks++;
    st->requests += ch->n_items;
    st->last_chunk = ch->n_items;
    for (size_t i = 0; i <= STATUS_INVALID; i++) st->by_status[i] += ch->status[i];
    for (size_t i = 0; i <= REASON_LAST; i++) st->rejects[i] += ch->rejects[i];
    for (size_t i = 0; i < ch->n_items; i++) {
        if (ch->items[i].q.outcome == REQUEST_DEAD) st->dead++;
        else if (ch->items[i].dup) st->duplicates++;
    }
    metrics_hist_observe(&st->apply, (double)(now - ch->apply_sent_at) / 1e9);
    if (ch->n_items && ch->taken_at) {
        double lat = (double)(now - ch->taken_at) / 1e9;
        metrics_hist_observe(&st->latency, lat);
        if (now - w->recent_started > 10ULL * 1000000000ULL) {
            w->recent_prev = w->recent;
            memset(&w->recent, 0, sizeof w->recent);
            w->recent_started = now;
        }
        metrics_hist_observe(&w->recent, lat);
    }
}

/* EXEC's reply: an array with one reply per command, or nil when a watched
 * key changed (FENCE tripped, or the lease moved after it checked). */
const char *batch__exec_error(redisReply *r)
{
    if (r->type == REDIS_REPLY_NIL) return "FENCED the transaction was refused: a watched key changed";
    if (r->type != REDIS_REPLY_ARRAY) return "unexpected reply to EXEC";
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_ERROR) return r->element[i]->str;
    return NULL;
}

/* An apply went through: the poison count is reset, or counts down while
 * isolating (one at a time through what was in flight when it failed). */
static void note_poison(batch_worker *w, const chunk *ch)
{
    if (w->apply_failures && ch->kind != w->suspect_kind && !ch->dead_lettering) {
        /* admin commands served between two tries of a refused queue
         * chunk (or the reverse) say nothing about it */
        return;
    }
    if (!ch->dead_lettering && batch__isolating(w)) {
        w->isolate_left -= (long)ch->n_items;
        if (w->isolate_left > 0) return;
    }
    /* the poison is gone (dead-lettered), or was none */
    w->apply_failures = 0;
    w->isolate_left = 0;
    w->suspect_id[0] = '\0';
}

/* A chunk was refused: its list is where the poison is, and a chunk of
 * one request refused while isolating names it -- the suspect, the one
 * dead-lettering may move (batch_take.c). */
void batch__note_suspect(batch_worker *w, const chunk *ch, const char *why)
{
    if (!batch__redis_refused(why)) return;
    w->suspect_kind = ch->kind;
    if (batch__isolating(w) && ch->n_items == 1 && ch->items[0].q.r.id) {
        snprintf(w->suspect_id, sizeof w->suspect_id, "%s", ch->items[0].q.r.id);
        log_info("batch %s: request %s was refused alone (%d in a row)", w->batch, w->suspect_id, w->apply_failures + 1);
    }
}

void batch__on_applied(batch_worker *w, chunk *ch, redisReply *r)
{
    const char *e = batch__exec_error(r);
    if (e) {
        batch__note_suspect(w, ch, e);
        batch__fail(w, "apply", e);
        return;
    }
    size_t first = 0;
    while (first < w->ring.n && chunk_ring_at(&w->ring, first)->state >= CS_STAGED) first++;
    if (first == w->ring.n || ch != chunk_ring_at(&w->ring, first)) {
        batch__fail(w, "apply", "replies out of order");
        return;
    }
    ALLOC_ASSERT(ch->state == CS_APPLYING && ch->queue_len >= 0);
    if (!ch->publish_only) note_applied(w, ch);
    answer_watch_applied(&w->watch.aw, clock_mono_ms());
    if (ch->kind == CHUNK_POOL) {
        size_t n = w->pool.n;
        if (lottery_pool_served(&w->pool, ch->pool_len)) {
            log_notice("batch %s: lottery served: %zu requests", w->batch, n);
            lottery_pool_free(&w->pool);
            w->lottery_done = 1;
        }
    }
    w->attempts = 0;
    note_poison(w, ch);
    if (w->cfg->wait_replicas > 0) batch__staged_applied(w, ch);
    else ch->state = CS_DONE;
    batch__chunks_gc(w);
    if (w->cfg->wait_replicas > 0) batch__advance(w);   /* the next apply waited for this one */
    if (w->state == W_SERVING) batch__take_start(w);
}

