/* batch_take.c -- a batch worker's reading phase: the next chunk.
 *
 * A take reads the heads of ctl and of the queue with LRANGE (nothing moves
 * until the apply LTRIMs them) and, behind a chunk whose length is known,
 * reads ahead; the selection slots are read again in pages between takes;
 * the lottery pool is served before the queue once drawn; the dedup HMGET
 * tells which ids already have a result. The chunk then goes to
 * batch_apply.c (batch__advance). See batch_worker.c for the states.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/random.h"
#include "core/assert.h"
#include "core/engine_wait.h"
#include "batch_worker_int.h"

static void slots_refresh(batch_worker *w, int64_t now);
static int lottery_draw_now(batch_worker *w);
static void pool_chunk(batch_worker *w);
static void dedup_start(batch_worker *w, chunk *ch);

/* The phase on this clock -- except that once the lottery pool has been
 * served from (by a holder whose clock had passed opens_at), the batch is
 * open whatever this clock says: keeping more early requests would grow a
 * pool whose draw is already revealed and partly served, and the redraw
 * over it would serve some requests twice and others never. */
static engine_phase worker_phase(const batch_worker *w, int64_t now)
{
    engine_phase ph = engine_phase_at(w->eng, now);
    if (ph == PHASE_WAITING && engine_get_meta(w->eng)->early == EARLY_SHUFFLE &&
        (w->lottery_done || w->pool.served > 0))
        return PHASE_OPEN;
    return ph;
}

int batch__take_queue_now(const batch_worker *w, int64_t now)
{
    const engine_meta *m = engine_get_meta(w->eng);
    switch (worker_phase(w, now)) {
    case PHASE_OPEN:
    case PHASE_CLOSED:
        /* early=shuffle: the pool is drawn and served before the queue */
        return m->early == EARLY_REJECT || w->lottery_done;
    case PHASE_WAITING:
        /* early=reject answers not_open; early=shuffle keeps the early
         * requests for the lottery, throttled as they are read (9.1) */
        return m->early == EARLY_REJECT || !w->lottery_done;
    case PHASE_PAUSED:
        return 0;
    }
    return 0;
}

/* Poison handling: a chunk whose apply keeps failing is retried one request
 * at a time once max_attempts applies failed in a row, and the request at
 * its head goes to dead after twice as many, so one bad request cannot
 * stall a batch. Failures while Redis is unreachable do not count (they
 * fail while loading, before any apply). */
int batch__isolating(const batch_worker *w)
{
    return w->apply_failures >= w->cfg->max_attempts;
}

static int dead_lettering(const batch_worker *w)
{
    return w->apply_failures >= 2 * w->cfg->max_attempts;
}

/* Whether raw (at the head of a chunk of kind `kind`) is the suspect:
 * the request alone in the last chunk refused (batch_apply.c). */
static int is_suspect(const batch_worker *w, chunk_kind kind, const char *raw, size_t len)
{
    if (!w->suspect_id[0] || kind != w->suspect_kind) return 0;
    request q;
    request_parse(&q, raw, len, (size_t)w->cfg->max_request_bytes, kind == CHUNK_CTL);
    int is = q.r.id && !strcmp(q.r.id, w->suspect_id);
    request_clear(&q);
    return is;
}

/* The next request of ch; while dead-lettering, the chunk's first one goes
 * to dead if it is the request that was refused alone: not an admin
 * command taken before the queue's suspect (the simulator found healthy
 * set_capacity and assign commands in dead), nor, after a takeover, the
 * request behind a suspect another instance has sent to dead already. */
static int add_request(batch_worker *w, chunk *ch, const char *raw, size_t len, int64_t seq)
{
    char why[200];
    const char *dead = NULL;
    if (ch->n_items == 0 && dead_lettering(w) && is_suspect(w, ch->kind, raw, len)) {
        snprintf(why, sizeof why, "could not be applied after %d attempts: %s",
                 w->apply_failures, w->apply_error);
        log_err("batch %s: moving a request to %s: %s", w->batch, w->keys.dead, why);
        dead = why;
    }
    return chunk_add(ch, raw, len, seq, (size_t)w->cfg->max_request_bytes, dead);
}

static int add_list(batch_worker *w, chunk *ch, redisReply *list)
{
    if (chunk_reserve(ch, list->elements) < 0) return -ENOMEM;
    for (size_t i = 0; i < list->elements; i++) {
        int64_t seq = ch->kind == CHUNK_CTL ? 0 : ch->seq_base + (int64_t)i + 1;
        if (add_request(w, ch, list->element[i]->str, list->element[i]->len, seq) < 0) return -ENOMEM;
    }
    return 0;
}

/* Order ids chunk ch needs before it is decided: its own grants, and
 * when the waitlist's last pass stopped for want of ids, a chunk's worth
 * more for it to go on (core/engine_wait.h). */
size_t batch__ids_needed(batch_worker *w, const chunk *ch)
{
    const engine_meta *m = engine_get_meta(w->eng);
    int formed = m->kind == BATCH_ROOM && m->groups == GROUPS_FORMED;
    size_t n = chunk_buys(ch, formed ? (size_t)m->max_group : 0);
    if (engine_wait_stalled(w->eng)) n += (size_t)w->cfg->chunk;
    return n;
}

static int needs_empty_apply(batch_worker *w, int64_t now)
{
    return w->first_apply || engine_next_expiry(w->eng) <= now || engine_wait_stalled(w->eng) ||
           engine_phase_at(w->eng, now) != w->written_phase;
}

static int lottery_due(const batch_worker *w, int64_t now)
{
    engine_phase ph = worker_phase(w, now);
    return engine_get_meta(w->eng)->early == EARLY_SHUFFLE && !w->lottery_done &&
           w->pool.loaded && !w->pool.active && (ph == PHASE_OPEN || ph == PHASE_CLOSED);
}

/* Read ahead behind a chunk of queue requests whose length is known, full
 * or short: the next take reads from past it, and nothing the chunk
 * decides (an admin command, a lottery, a poison request) can change what
 * comes next. Reading behind a short chunk is what keeps a moderate load
 * from waiting three round trips (take, dedup, apply) per chunk: the next
 * take is out while this one is decided and applied.
 *
 * A take still out is assumed to come back full -- but only while the
 * last take that came back was full (a burst): after a short one the queue
 * was drained, and the takes behind would come back empty. When a take does come back
 * short, the takes sent behind it are dropped (take_voided). */
static int may_read_ahead(batch_worker *w)
{
    chunk *ch = chunk_ring_newest(&w->ring);
    if (!ch || batch__isolating(w) || w->pool.active) return 0;
    if (ch->state != CS_TAKING) return ch->kind == CHUNK_QUEUE;
    return ch->asked_queue && w->last_take_full;
}

/* Queue entries the takes still out will bring (assumed full). */
static long takes_out_queue(batch_worker *w)
{
    long n = 0;
    for (size_t i = 0; i < w->ring.n; i++) {
        chunk *ch = chunk_ring_at(&w->ring, i);
        if (ch->state == CS_TAKING && ch->asked_queue) n += ch->asked;
    }
    return n;
}

/* Chunk ch came back short (or not a queue chunk): the takes sent behind
 * it read from the wrong place. Their replies are dropped on arrival. */
static void take_voided(batch_worker *w, chunk *ch)
{
    while (chunk_ring_newest(&w->ring) != ch) {
        chunk_ring_pop_newest(&w->ring);
        w->takes_out--;
        ALLOC_ASSERT(w->takes_out >= 0);
    }
    w->take_gen++;
}

/* MULTI, LRANGE ctl, LRANGE queue (when asked), LLEN queue, EXEC: one
 * atomic read, so an admin command pushed before some requests is never
 * overtaken by them. */
static int send_take(batch_worker *w, chunk *ch, long from)
{
    argbuf *a = &w->reads_args;
    argbuf_reset(a);
    argbuf_cmd_begin(a);
    argbuf_str(a, "MULTI");
    argbuf_cmd_end(a);
    argbuf_cmd_begin(a);
    argbuf_str(a, "LRANGE"); argbuf_str(a, w->keys.ctl);
    argbuf_int(a, w->ctl_unsent); argbuf_int(a, w->ctl_unsent + ch->asked - 1);
    argbuf_cmd_end(a);
    if (ch->asked_queue) {
        argbuf_cmd_begin(a);
        argbuf_str(a, "LRANGE"); argbuf_str(a, w->keys.queue);
        argbuf_int(a, from); argbuf_int(a, from + ch->asked - 1);
        argbuf_cmd_end(a);
    }
    argbuf_cmd_begin(a);
    argbuf_str(a, "LLEN"); argbuf_str(a, w->keys.queue);
    argbuf_cmd_end(a);
    argbuf_cmd_begin(a);
    argbuf_str(a, "EXEC");
    argbuf_cmd_end(a);
    if (argbuf_failed(a)) return -ENOMEM;
    redis_slice cmds[5];
    size_t n = argbuf_slices(a, cmds, 5);
    worker_op *o = batch__op_new(w, WOP_TAKE, ch);
    if (!o) return -ENOMEM;
    if (redis_conn_pipeline(w->cmd, batch__on_op_reply, o, w->cfg->redis_timeout_ms, cmds, n) < 0) {
        o->busy = 0;
        return -ENOTCONN;
    }
    return 0;
}

/* How many requests a take asks for. Under a burst (a queue of 4 chunks or
 * more at the last take) a full chunk, for throughput. Otherwise at most
 * TAKE_SHORT_QUEUE: a chunk's requests wait for the whole chunk to be
 * decided and applied, and its EXEC holds Redis for every other client
 * meanwhile, so a moderate load is served in small chunks, several in
 * flight (git show f74d6ce:docs/PERFORMANCE.md, "adaptive chunk"). */
#define TAKE_SHORT_QUEUE 128

static int take_size(const batch_worker *w)
{
    if (batch__isolating(w)) return 1;
    int full = w->cfg->chunk;
    if (full <= TAKE_SHORT_QUEUE || w->stats.queue_len >= 4 * (int64_t)full) return full;
    return TAKE_SHORT_QUEUE;
}

/* Starts the next take if one is due: the heads of ctl and of the queue
 * past what is already in flight (LRANGE: nothing moves until the apply
 * LTRIMs it), and the queue's length. */
static void take_one(batch_worker *w)
{
    if (w->state != W_SERVING || w->ring.n == CHUNK_RING_MAX) return;
    if (w->stopping) {
        /* a staged chunk is published before the lease goes */
        if (chunk_ring_busy(&w->ring) == 0 && batch__staged_chunk(w)) batch__publish_chunk(w);
        else if (chunk_ring_busy(&w->ring) == 0) batch__finish(w);
        return;
    }
    if (chunk_ring_busy(&w->ring) > 0 && !may_read_ahead(w)) return;
    int64_t now = clock_wall_ms();
    if (batch__lease_check(w, "take") < 0) return;
    /* held while the slots or profiles are older than a scan's interval
     * and its grace (slots_scan.h): the last page's reply takes again
     * (on_slots); so is the draw, which reads the profiles' points */
    int64_t mono = clock_mono_ms();
    slots_refresh(w, mono);
    if (!slots_scan_current(&w->slots, mono) || !slots_scan_current(&w->profiles, mono)) return;
    if (chunk_ring_busy(&w->ring) == 0 && lottery_due(w, now) && lottery_draw_now(w) < 0) return;
    chunk *ch = chunk_ring_push(&w->ring, CHUNK_NONE);
    ALLOC_ASSERT(ch != NULL);   /* the ring is not full: checked above */
    ch->state = CS_TAKING;
    ch->asked = take_size(w);
    long from = w->queue_unsent + takes_out_queue(w);
    ch->seq_base = w->dequeued + from;
    /* while the lottery pool is served, new requests wait behind it */
    ch->asked_queue = !w->pool.active && batch__take_queue_now(w, now);
    ch->early = ch->asked_queue && engine_get_meta(w->eng)->early == EARLY_SHUFFLE &&
                worker_phase(w, now) == PHASE_WAITING;
    int rc = send_take(w, ch, from);
    if (rc) { batch__fail(w, "take", rc == -ENOMEM ? "too many commands in flight" : "Redis not connected"); return; }
    w->takes_out++;
}

/* Selection slots (contract 9.4) are the operator's to change during a
 * round: at most every SLOTS_SCAN_EVERY_MS the hash is read again in HSCAN
 * pages (slots_scan.h), one page out at a time, on the connection of the
 * takes. The last page's reply replaces the engine's table; take_one holds
 * a take while the table is not current, so a request dequeued more than
 * the interval and its grace after an operator's change is decided with
 * it, after an idle spell too. */
static void scan_refresh(batch_worker *w, slots_scan *s, worker_op_kind kind, const char *key, int64_t now)
{
    const char *cursor = slots_scan_due(s, now);
    if (!cursor) return;
    worker_op *o = batch__op_new(w, kind, NULL);
    if (!o) return;   /* busy: what is in flight takes again when it is answered */
    if (redis_conn_command(w->cmd, batch__on_op_reply, o, w->cfg->redis_timeout_ms, "HSCAN %s %s COUNT %d",
                           key, cursor, SLOTS_SCAN_COUNT) < 0) {
        o->busy = 0;
        return;
    }
    slots_scan_sent(s);
}

/* The profiles (contract 11.2) are read again the same way, when their
 * WATCH says they changed (profiles_watch.h), else every second. */
static void slots_refresh(batch_worker *w, int64_t now)
{
    scan_refresh(w, &w->slots, WOP_SLOTS, w->keys.slots, now);
    profiles_watch_tick(&w->profiles_watch, now);
    scan_refresh(w, &w->profiles, WOP_PROFILES, w->keys.profiles, now);
}

void batch__profiles_refresh(batch_worker *w, int64_t now)
{
    if (w->state == W_SERVING || w->state == W_IDLE) scan_refresh(w, &w->profiles, WOP_PROFILES, w->keys.profiles, now);
}

/* A page of the slots scan. It belongs to the engine it was asked for
 * (after a reload, another generation, the load read the hash itself),
 * and is taken while serving or idle alike: a scan that waited for the
 * next request would never finish under a trickle of them. The next page
 * is asked at once; the last one lets a held take go. A page lost with
 * the connection while idle is no failure of the worker's: on_cmd_down
 * reloads. */
void batch__on_slots(worker_op *o, redisReply *r, const char *err)
{
    batch_worker *w = o->w;
    slots_scan *s = o->kind == WOP_PROFILES ? &w->profiles : &w->slots;
    const char *what = o->kind == WOP_PROFILES ? "profiles" : "slots";
    o->busy = 0;
    if (o->gen != w->gen) return;
    if (!w->eng || (w->state != W_SERVING && w->state != W_IDLE) || (err && w->state == W_IDLE)) {
        slots_scan_abandon(s);
        return;
    }
    const char *e = batch__reply_error(r, err);
    if (e) { batch__fail(w, what, e); return; }
    int rc = slots_scan_page(s, r, w->eng, w->batch);
    if (rc < 0) { batch__fail(w, what, rc == -ENOMEM ? "out of memory" : "unexpected reply"); return; }
    if (rc == 0) { slots_refresh(w, clock_mono_ms()); return; }
    log_debug("batch %s: %s read whole", w->batch, what);
    if (w->state == W_SERVING) batch__take_start(w);
}

/* As many takes as are due: one, or several reading ahead. */
void batch__take_start(batch_worker *w)
{
    size_t sent = 0;
    do {
        size_t before = w->ring.n;
        take_one(w);
        if (w->ring.n == before || w->state != W_SERVING) break;
    } while (++sent < CHUNK_RING_MAX);
}

static void on_take_list(batch_worker *w, chunk *ch, chunk_kind kind, redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY) { batch__fail(w, "take", "unexpected reply"); return; }
    if (!r->elements || ch->kind == CHUNK_CTL) return; /* admin commands go first */
    ch->kind = kind;
    if (ch->kind == CHUNK_CTL) ch->ctl_len = (long)r->elements;
    else ch->queue_len = (long)r->elements;
    if (add_list(w, ch, r) < 0) batch__fail(w, "take", "out of memory");
}

/* Nothing was taken and nothing is in flight: the lottery pool, an apply
 * with no requests (expiries, a phase change), or idle. */
static void nothing_taken(batch_worker *w)
{
    if (w->pool.active) { pool_chunk(w); return; }
    if (needs_empty_apply(w, clock_wall_ms())) {
        chunk *ch = chunk_ring_push(&w->ring, CHUNK_NONE);
        if (!ch) { batch__fail(w, "apply", "no free chunk"); return; }
        ch->state = CS_DEDUPED;
        batch__advance(w);
        return;
    }
    if (batch__staged_chunk(w)) { batch__publish_chunk(w); return; }   /* wait_replicas */
    if (w->stopping) { batch__finish(w); return; }
    batch__go_idle(w);
}

static void on_take_end(batch_worker *w, chunk *ch, redisReply *llen)
{
    w->takes_out--;
    ALLOC_ASSERT(w->takes_out >= 0 && ch->state == CS_TAKING);
    if (llen->type == REDIS_REPLY_INTEGER) w->stats.queue_len = llen->integer;
    w->last_take_full = ch->kind == CHUNK_QUEUE && ch->queue_len == ch->asked;
    if (!(ch->kind == CHUNK_QUEUE && ch->queue_len == ch->asked) && chunk_ring_newest(&w->ring) != ch)
        take_voided(w, ch);
    ch->state = CS_DEDUP;
    if (ch->n_items == 0) {
        chunk_ring_pop_newest(&w->ring);
        if (chunk_ring_busy(&w->ring) == 0) nothing_taken(w);
        return;     /* else the last apply in flight takes again */
    }
    if (batch__isolating(w))
        log_warn("batch %s: %d applies failed in a row (%s): deciding one request at a time",
                 w->batch, w->apply_failures, w->apply_error);
    ch->taken_at = uv_hrtime();
    w->queue_unsent += ch->queue_len;
    w->ctl_unsent += ch->ctl_len;
    dedup_start(w, ch);
    batch__take_start(w);  /* read ahead while this one is decided */
}

/* The EXEC of a take: {ctl items, [queue items,] queue length}. */
void batch__on_take(batch_worker *w, chunk *ch, redisReply *r)
{
    size_t want = ch->asked_queue ? 3 : 2;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != want) { batch__fail(w, "take", "unexpected reply"); return; }
    on_take_list(w, ch, CHUNK_CTL, r->element[0]);
    if (w->state == W_SERVING && ch->asked_queue) on_take_list(w, ch, CHUNK_QUEUE, r->element[1]);
    if (w->state == W_SERVING) on_take_end(w, ch, r->element[want - 1]);
}

/* ------------------------------------------------------------- lottery -- */

static void on_lottery_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (w->state != W_LOTTERY) return;
    batch__set_state(w, W_SERVING);
    const char *e = batch__reply_error(r, err);
    if (e) { batch__fail(w, "lottery", e); return; }
    int done;
    lottery_pool_free(&w->pool);
    lottery_pool_init(&w->pool, random_u64());
    int rc = lottery_pool_from_reply(&w->pool, r, &done);
    if (rc < 0) { batch__fail(w, "lottery", rc == -ENOMEM ? "out of memory" : "unexpected reply"); return; }
    if (done) {
        lottery_pool_free(&w->pool);
        w->lottery_done = 1;
    } else if (w->pool.n) {
        log_notice("batch %s: lottery pool: %zu early requests of %zu users, %zu already served",
                   w->batch, w->pool.n, lottery_ticket_count(&w->pool.lot), w->pool.served);
    }
    batch__take_start(w);
}

/* Right after a load, before anything is decided: the pool as Redis has
 * it (lottery_pool.h). */
void batch__lottery_start(batch_worker *w)
{
    if (batch__lease_check(w, "lottery") < 0) return;
    const char *argv[] = { w->keys.early, w->keys.internal, w->keys.lease, w->lease.token, w->lease.epoch };
    batch__set_state(w, W_LOTTERY);
    if (redis_conn_eval(w->cmd, &w->scripts->lottery, on_lottery_reply, w, w->cfg->redis_timeout_ms,
                        3, 5, argv, NULL) < 0) {
        batch__set_state(w, W_SERVING);
        batch__fail(w, "lottery", "Redis not connected");
    }
}

/* The opening, with nothing in flight: every early chunk is in, so the
 * pool is complete. The draw is made in memory; the first pool chunk
 * reveals the seed. */
static int lottery_draw_now(batch_worker *w)
{
    int rc = lottery_pool_draw(&w->pool, w->eng);   /* draw_by=points: its profiles */
    if (rc < 0) { batch__fail(w, "lottery", rc == -ENOMEM ? "out of memory" : "bad seed"); return rc; }
    log_notice("batch %s: opening lottery: %zu early requests of %zu users, %zu already served",
               w->batch, w->pool.n, lottery_ticket_count(&w->pool.lot), w->pool.served);
    return 0;
}

/* The next `chunk` requests of the pool, in lottery order; pool chunks go
 * one at a time (the pool is served only with nothing else in flight). */
static void pool_chunk(batch_worker *w)
{
    size_t k = lottery_pool_left(&w->pool);
    if (k > (size_t)w->cfg->chunk) k = (size_t)w->cfg->chunk;
    if (batch__isolating(w) && k > 1) k = 1;
    chunk *ch = chunk_ring_push(&w->ring, CHUNK_POOL);
    if (!ch) { batch__fail(w, "lottery", "no free chunk"); return; }
    ch->pool_len = k;
    if (chunk_reserve(ch, k ? k : 1) < 0) { batch__fail(w, "lottery", "out of memory"); return; }
    for (size_t j = 0; j < k; j++) {
        const char *raw;
        size_t len;
        int64_t seq, draw;
        lottery_pool_at(&w->pool, j, &raw, &len, &seq, &draw);
        if (add_request(w, ch, raw, len, seq) < 0) { batch__fail(w, "lottery", "out of memory"); return; }
        chunk_item *it = &ch->items[ch->n_items - 1];
        it->draw = draw;
        it->q.r.draw = draw;    /* carried through the waitlist (engine.h) */
        it->q.r.has_points = it->q.r.user && lottery_pool_points_of(&w->pool, it->q.r.user, &it->q.r.points);
    }
    ch->taken_at = uv_hrtime();
    if (k == 0) { ch->state = CS_DEDUPED; batch__advance(w); } /* an empty pool: record the end */
    else dedup_start(w, ch);
}

/* --------------------------------------------------------------- dedup -- */

/* The HMGET goes on its own connection (`reads`), so that it never waits
 * behind an apply: that is what lets the engine decide the next chunk
 * while Redis applies the last one. dedup.h checks the chunks in flight. */
static void dedup_start(batch_worker *w, chunk *ch)
{
    argbuf *a = &w->reads_args;
    size_t asked = dedup_ask(&w->dedup, ch, a, w->keys.results);
    ch->state = CS_DEDUP;
    if (asked == 0) {
        if (dedup_mark_in_flight(&w->dedup, &w->ring, ch) < 0) { batch__fail(w, "dedup", "out of memory"); return; }
        lottery_pool_mark_kept(&w->pool, ch);   /* ids kept for the lottery have no result yet */
        ch->state = CS_DEDUPED;
        batch__advance(w);
        return;
    }
    if (argbuf_failed(a)) { batch__fail(w, "dedup", "out of memory"); return; }
    size_t len;
    const char *cmd = argbuf_command(a, &len);
    worker_op *o = batch__op_new(w, WOP_DEDUP, ch);
    if (!o) { batch__fail(w, "dedup", "too many commands in flight"); return; }
    /* while `reads` (re)connects, the command connection serves: there the
     * HMGET waits behind the applies, which is slower but just as correct */
    redis_conn *rc = redis_conn_is_ready(w->reads) ? w->reads : w->cmd;
    if (redis_conn_command_resp(rc, batch__on_op_reply, o, w->cfg->redis_timeout_ms, cmd, len) < 0) {
        o->busy = 0;
        batch__fail(w, "dedup", "Redis not connected");
        return;
    }
    w->dedups_out++;
}

void batch__on_dedup(batch_worker *w, chunk *ch, redisReply *r)
{
    w->dedups_out--;
    ALLOC_ASSERT(w->dedups_out >= 0 && ch->state == CS_DEDUP);
    if (dedup_take_reply(ch, r) < 0) {
        batch__fail(w, "dedup", "HMGET reply is not one element per id asked");
        return;
    }
    if (dedup_mark_in_flight(&w->dedup, &w->ring, ch) < 0) { batch__fail(w, "dedup", "out of memory"); return; }
    lottery_pool_mark_kept(&w->pool, ch);
    ch->state = CS_DEDUPED;
    batch__chunks_gc(w);
    batch__advance(w);
    batch__take_start(w);          /* a DONE chunk may have freed a slot */
}

