/* batch_worker.c -- the single writer of one batch (see batch_worker.h).
 *
 * The worker is a small state machine driven by Redis replies and timers:
 *
 *   CONNECTING --ready--> ACQUIRING --lease--> LOADING --> SERVING <--> IDLE
 *        ^                  | busy                            | (LOTTERY)
 *        +---- BACKOFF <----+------ any failure, lease lost --+
 *
 * The worker serves only while it holds the batch lease (batch_lease.h);
 * every apply is fenced by lease token and epoch (scripts.h, FENCE).
 *
 * SERVING runs a pipeline of chunks (docs/DESIGN.md, "Overlap"): a take
 * reads the head of ctl and of the queue with LRANGE -- nothing moves --
 * and, behind a full chunk, reads ahead; a dedup HMGET on its own
 * connection tells which ids already have a result; the engine decides the
 * chunk in memory; one MULTI/EXEC transaction writes every effect and
 * LTRIMs the chunk off the queue with stats.dequeued. Up to CHUNK_RING_MAX
 * are in flight, so Redis applies one while the engine decides the next. A
 * crash anywhere leaves the undecided requests at the head of the queue;
 * on any failure the engine and every chunk in flight are dropped and the
 * state is reloaded from Redis, the only source of truth, so the engine
 * never has to undo a decision.
 *
 * When a take comes back empty the worker is IDLE: it parks one BLMOVE on
 * the queue and one on ctl, each on its own connection. The BLMOVE moves the
 * list's last element onto the end of the same list -- a rotation that
 * leaves the list unchanged -- so waking up never takes a request off the
 * queue outside an apply (that would make `dequeued` lag behind the queue
 * and the position formula would be off by one).
 *
 * This file is the control flow only: what runs when, and what a failure
 * does. The steps' own work lives beside it, one module each: chunk.h
 * (the chunks and their ring), batch_load.h (reading the state), dedup.h
 * (which ids have a result), decide.h (the engine's part of a chunk),
 * apply_txn.h (the transaction that writes it), order_ids.h (order-id
 * blocks) and lottery_pool.h (the opening lottery).
 */
#include "worker/batch_worker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/random.h"
#include "core/assert.h"
#include "core/engine_slots.h"
#include "core/engine_wait.h"
#include "core/engine.h"
#include "redis/argbuf.h"
#include "redis/redis_conn.h"
#include "worker/apply_txn.h"
#include "worker/batch_keys.h"
#include "worker/batch_lease.h"
#include "worker/batch_load.h"
#include "worker/batch_watch.h"
#include "worker/chunk.h"
#include "worker/decide.h"
#include "worker/dedup.h"
#include "worker/lottery_pool.h"
#include "worker/order_ids.h"
#include "worker/profiles_scan.h"
#include "worker/slots_scan.h"

typedef enum {
    W_CONNECTING, W_ACQUIRING, W_LOADING, W_IDLE, W_SERVING, W_LOTTERY,
    W_BACKOFF, W_RELEASING, W_CLOSING
} worker_state;

/* A command in flight, as the privdata of its reply. `gen` is the worker's
 * generation when it was sent: worker_fail() starts a new one, and a reply
 * from an older generation is dropped (its chunk was thrown away). The
 * first four kinds name their step in worker_fail's message. */
typedef enum { WOP_TAKE, WOP_DEDUP, WOP_ORDERS, WOP_APPLY, WOP_LOAD_ORDERS, WOP_SLOTS, WOP_REPLICAS,
               WOP_PROFILES } worker_op_kind;
#define MAX_OPS 64

typedef struct worker_op {
    batch_worker *w;
    chunk *ch;
    uint32_t gen, take_gen;
    worker_op_kind kind;
    int busy;
} worker_op;

/* Requests decided between two flushes of the command connection. */
#define DECIDE_SLICE 64

struct batch_worker {
    uv_loop_t *loop;
    const allocd_config *cfg;
    const allocd_scripts *scripts;
    redis_router *router;
    redis_target target;      /* the node serving the batch's slot */
    char batch[BATCH_ID_MAX + 1];
    batch_keys keys;
    char trip_key[BATCH_KEY_MAX + 160];    /* FENCE's trip key for our token (set at load) */
    redis_conn *cmd, *reads, *wait_queue, *wait_ctl;
    batch_lease lease;
    char lease_holder_seen[128]; /* logged once per holder while waiting */
    worker_state state;
    int stopping;
    int handles_open;
    int attempts;             /* failures since the last success: the backoff */
    batch_worker_stopped_fn on_stopped;
    void *data;
    uv_timer_t timer;

    /* loaded state */
    batch_load load;
    engine *eng;
    order_ids orders;
    int first_apply;          /* rewrite all of free and stats on the next apply */
    engine_phase written_phase;
    int lottery_done;
    lottery_pool pool;

    /* the pipeline: chunks in flight, oldest first */
    chunk_ring ring;
    worker_op ops[MAX_OPS];
    uint32_t gen;
    int takes_out;            /* takes not answered yet (read ahead: several) */
    uint32_t take_gen;        /* takes sent before a change are dropped */
    int dedups_out;           /* dedup HMGETs not answered yet */
    int64_t dequeued;         /* stats.dequeued once every apply sent is in */
    slots_scan slots;         /* P:{B}:slots read again in pages (slots_refresh) */
    slots_scan profiles;      /* P:{B}:profiles likewise (profiles_scan.h) */
    profiles_report profiles_report;
    int64_t chunks_applied;   /* internal.chunks_applied, likewise */
    long queue_unsent, ctl_unsent; /* entries taken whose apply is not sent */
    dedup dedup;
    argbuf args;              /* the apply pipeline being built or waiting */
    argbuf reads_args;        /* a take or a dedup: built and sent at once */

    /* poison requests (see isolating) */
    int apply_failures;       /* consecutive failed applies */
    long isolate_left;        /* requests to go one at a time before trusting chunks */
    int last_take_full;       /* the last take came back with a full chunk of queue requests */
    char apply_error[160];
    const char *fault_apply_id; /* ALLOCD_FAULT_APPLY_ID, for tests */

    int wait_queue_pending, wait_ctl_pending;
    metrics_hist recent, recent_prev;      /* latency of the last ~10 s, for stats */
    uint64_t recent_started;
    batch_worker_stats stats;

    /* every request answered (batch_watch.h) */
    batch_watch watch;
    int lease_wait;           /* backing off because another instance holds the lease */
    int gave_up;              /* stopped because it could not serve */
    char last_failure[200];   /* the last step that failed, for the give-up's log line */
    /* wait_replicas: one apply at a time, each after a WAIT (replicas_wait) */
    int replicas_out, replicas_acked;
};

static void take_start(batch_worker *w);
static void go_idle(batch_worker *w);
static void acquire_start(batch_worker *w);
static void finish(batch_worker *w);
static void close_all(batch_worker *w);
static int lease_check(batch_worker *w, const char *step);
static void dedup_start(batch_worker *w, chunk *ch);
static void advance(batch_worker *w);
static void pool_chunk(batch_worker *w);
static void lottery_start(batch_worker *w);
static int lottery_draw_now(batch_worker *w);
static void on_handle_closed(batch_worker *w);
static void on_op_reply(redis_conn *c, redisReply *r, const char *err, void *priv);
static void issue_waits(batch_worker *w);
static void slots_refresh(batch_worker *w, int64_t now);

static const char *reply_error(redisReply *r, const char *err)
{
    if (err) return err;
    if (!r) return "no reply";
    if (r->type == REDIS_REPLY_ERROR) return r->str;
    return NULL;
}

/* ---------------------------------------------------------- operations -- */

static worker_op *op_new(batch_worker *w, worker_op_kind kind, chunk *ch)
{
    for (size_t i = 0; i < MAX_OPS; i++) {
        worker_op *o = &w->ops[i];
        if (o->busy) continue;
        o->w = w;
        o->ch = ch;
        o->gen = w->gen;
        o->take_gen = w->take_gen;
        o->kind = kind;
        o->busy = 1;
        return o;
    }
    return NULL;
}

/* A reply for op o: 1 when it is still wanted (same generation, serving). */
static int op_current(worker_op *o)
{
    o->busy = 0;
    return o->gen == o->w->gen && o->w->state == W_SERVING;
}

/* Frees the DONE chunks at the head once no dedup is out (dedup.h: an
 * HMGET still out may have run before their apply). */
static void chunks_gc(batch_worker *w)
{
    if (w->dedups_out == 0) chunk_ring_pop_done(&w->ring);
}

static void chunks_drop_all(batch_worker *w)
{
    chunk_ring_clear(&w->ring);
    w->takes_out = 0;
    w->dedups_out = 0;
    w->queue_unsent = w->ctl_unsent = 0;
}

/* -------------------------------------------------------------- failure -- */

static void drop_engine(batch_worker *w)
{
    if (w->eng) engine_free(w->eng);
    w->eng = NULL;
    batch_load_clear(&w->load);
    w->stats.loaded = 0;
    lottery_pool_free(&w->pool);
}

/* Redis Cluster: when the batch's slot now lives on another node, point
 * all four connections there. Returns 1 when they were moved. */
static int follow_slot(batch_worker *w)
{
    redis_target t;
    if (redis_router_target(w->router, w->keys.meta, &t) < 0 || !memcmp(&t, &w->target, sizeof t))
        return 0;
    char where[300];
    log_notice("batch %s: slot moved to %s", w->batch, redis_target_describe(&t, where, sizeof where));
    w->target = t;
    redis_conn_retarget(w->cmd, &t);
    redis_conn_retarget(w->reads, &t);
    redis_conn_retarget(w->wait_queue, &t);
    redis_conn_retarget(w->wait_ctl, &t);
    return 1;
}

static void on_timer_backoff(uv_timer_t *t)
{
    batch_worker *w = t->data;
    if (w->state != W_BACKOFF) return;
    if (w->stopping) { finish(w); return; }
    w->state = W_CONNECTING;
    if (follow_slot(w)) return;          /* on_ready continues on the new node */
    if (redis_conn_is_ready(w->cmd)) acquire_start(w);
}

/* A Redis error reply starts with an upper-case code (ERR, EXECABORT,
 * WRONGTYPE, OOM, ...); the connection's own errors do not ("timeout",
 * "connection lost", "closed"). Only a refusal by Redis may be the
 * request's fault: a lost link says nothing about the chunk, and counting
 * it would send healthy requests to dead on a flaky network. */
static int redis_refused(const char *why)
{
    size_t n = 0;
    while (why[n] >= 'A' && why[n] <= 'Z') n++;
    return n >= 2 && (why[n] == ' ' || why[n] == '\0');
}

/* Something went wrong mid-step: forget everything held in memory and load
 * again from Redis after a backoff (100 ms doubling up to 5 s). */
static void worker_fail(batch_worker *w, const char *what, const char *why)
{
    if (w->state == W_CLOSING) return;
    log_warn("batch %s: %s failed: %s; reloading from Redis", w->batch, what, why);
    snprintf(w->last_failure, sizeof w->last_failure, "%s failed: %s", what, why);
    w->lease_wait = 0;
    if (!strncmp(why, "MOVED", 5) || !strncmp(why, "ASK ", 4) || !strncmp(why, "CLUSTERDOWN", 11) ||
        !strncmp(why, "TRYAGAIN", 8))
        redis_router_refresh(w->router); /* the backoff then follows the slot */
    if (!strncmp(why, "FENCED", 6)) batch_lease_drop(&w->lease);
    else if (!strcmp(what, "apply") && redis_refused(why)) {
        w->apply_failures++;
        snprintf(w->apply_error, sizeof w->apply_error, "%s", why);
        /* every request in flight is decided again; one at a time once
         * isolating, until they are all through */
        long n = chunk_ring_requests(&w->ring);
        if (n > w->isolate_left) w->isolate_left = n;
    }
    w->gen++;                 /* replies still on their way are dropped */
    w->replicas_out = w->replicas_acked = 0;
    chunks_drop_all(w);
    drop_engine(w);
    w->stats.failures++;
    w->attempts++;
    if (w->stopping) { finish(w); return; }
    int shift = w->attempts < 6 ? w->attempts : 6;
    uint64_t delay = (uint64_t)w->cfg->backoff_min_ms << shift;
    if (delay > (uint64_t)w->cfg->backoff_max_ms) delay = (uint64_t)w->cfg->backoff_max_ms;
    w->state = W_BACKOFF;
    uv_timer_start(&w->timer, on_timer_backoff, delay, 0);
}

/* ---------------------------------------------------------------- load -- */

/* batch_load.h reads the state; the worker sequences it: the hashes, then
 * an order-id block (on the router), then the answered ids, then serving. */
static int load_active(void *data)
{
    return ((batch_worker *)data)->state == W_LOADING;
}

static void on_load_read(void *data)
{
    batch_worker *w = data;
    if (w->load.failed) { batch_load_scan(&w->load); return; } /* straight to on_load_done */
    worker_op *o = op_new(w, WOP_LOAD_ORDERS, NULL);
    if (!o || order_ids_request(&w->orders, w->router, &w->scripts->order_block, w->cfg->redis_timeout_ms,
                                0, on_op_reply, o) < 0) {
        if (o) o->busy = 0;
        batch_load_fail(&w->load, "order ids: Redis not connected");
        batch_load_scan(&w->load);
    }
}

/* The order-id block of the load (WOP_LOAD_ORDERS, current generation and
 * still loading: on_op_reply checks). */
static void on_load_orders(batch_worker *w, redisReply *r, const char *err)
{
    const char *e = reply_error(r, err);
    if (e) batch_load_fail(&w->load, "order ids: %s", e);
    else if (order_ids_take(&w->orders, r, 0) < 0) batch_load_fail(&w->load, "order ids: unexpected reply");
    batch_load_scan(&w->load);
}

static void on_load_done(void *data)
{
    batch_worker *w = data;
    if (w->load.failed) {
        w->state = W_LOADING; /* let worker_fail() log and back off */
        worker_fail(w, "loading", w->load.err);
        return;
    }
    w->eng = batch_load_take_engine(&w->load);
    w->dequeued = w->load.dequeued;
    w->chunks_applied = w->load.chunks_applied;
    w->lottery_done = w->load.lottery_done;
    engine_set_order_source(w->eng, order_block_mint, &w->orders.block);
    w->first_apply = 1;
    w->stats.loaded = 1;
    const engine_counters *c = engine_get_counters(w->eng);
    log_info("batch %s: loaded %zu items, %zu users, %" PRId64 " processed so far",
             w->batch, engine_item_count(w->eng), engine_user_count(w->eng), c->processed);
    w->state = W_SERVING;
    chunks_drop_all(w);
    /* early=shuffle: the pool is read back before anything is decided */
    if (engine_get_meta(w->eng)->early == EARLY_SHUFFLE && !w->lottery_done) lottery_start(w);
    else take_start(w);
}

static const batch_load_callbacks load_cb = { load_active, on_load_read, on_load_done };

static void load_start(batch_worker *w)
{
    drop_engine(w);
    slots_scan_loaded(&w->slots, clock_mono_ms());   /* the load reads them */
    slots_scan_loaded(&w->profiles, clock_mono_ms());
    w->state = W_LOADING;
    snprintf(w->trip_key, sizeof w->trip_key, "%s:{%s}:trip:%s", w->cfg->prefix, w->batch, w->lease.token);
    /* -ENOTCONN: the connection is down; the commands already sent get
     * their error callbacks, and on_ready starts a new load. Any other
     * error would not be cured by a reconnect: the load fails. */
    int rc = batch_load_start(&w->load, w->trip_key, random_u64());
    if (rc == -ENOTCONN) {
        w->state = W_CONNECTING;
        drop_engine(w);
    } else if (rc < 0) {
        worker_fail(w, "loading", rc == -ENOMEM ? "out of memory" : strerror(-rc));
    }
}

/* ---------------------------------------------------------------- take -- */

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

static int take_queue_now(const batch_worker *w, int64_t now)
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
static int isolating(const batch_worker *w)
{
    return w->apply_failures >= w->cfg->max_attempts;
}

static int dead_lettering(const batch_worker *w)
{
    return w->apply_failures >= 2 * w->cfg->max_attempts;
}

/* The next request of ch; while dead-lettering, the chunk's first one goes
 * to dead whatever it holds. */
static int add_request(batch_worker *w, chunk *ch, const char *raw, size_t len, int64_t seq)
{
    char why[200];
    const char *dead = NULL;
    if (ch->n_items == 0 && dead_lettering(w)) {
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
static size_t ids_needed(batch_worker *w, const chunk *ch)
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
    if (!ch || isolating(w) || w->pool.active) return 0;
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
    worker_op *o = op_new(w, WOP_TAKE, ch);
    if (!o) return -ENOMEM;
    if (redis_conn_pipeline(w->cmd, on_op_reply, o, w->cfg->redis_timeout_ms, cmds, n) < 0) {
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
 * flight (docs/PERFORMANCE.md, "adaptive chunk"). */
#define TAKE_SHORT_QUEUE 128

static int take_size(const batch_worker *w)
{
    if (isolating(w)) return 1;
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
        if (chunk_ring_busy(&w->ring) == 0) finish(w);
        return;
    }
    if (chunk_ring_busy(&w->ring) > 0 && !may_read_ahead(w)) return;
    int64_t now = clock_wall_ms();
    if (lease_check(w, "take") < 0) return;
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
    ch->asked_queue = !w->pool.active && take_queue_now(w, now);
    ch->early = ch->asked_queue && engine_get_meta(w->eng)->early == EARLY_SHUFFLE &&
                worker_phase(w, now) == PHASE_WAITING;
    int rc = send_take(w, ch, from);
    if (rc) { worker_fail(w, "take", rc == -ENOMEM ? "too many commands in flight" : "Redis not connected"); return; }
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
    worker_op *o = op_new(w, kind, NULL);
    if (!o) return;   /* busy: what is in flight takes again when it is answered */
    if (redis_conn_command(w->cmd, on_op_reply, o, w->cfg->redis_timeout_ms, "HSCAN %s %s COUNT %d",
                           key, cursor, SLOTS_SCAN_COUNT) < 0) {
        o->busy = 0;
        return;
    }
    slots_scan_sent(s);
}

/* The profiles (contract 11.2) are read again the same way. */
static void slots_refresh(batch_worker *w, int64_t now)
{
    scan_refresh(w, &w->slots, WOP_SLOTS, w->keys.slots, now);
    scan_refresh(w, &w->profiles, WOP_PROFILES, w->keys.profiles, now);
}

/* A page of the slots scan. It belongs to the engine it was asked for
 * (after a reload, another generation, the load read the hash itself),
 * and is taken while serving or idle alike: a scan that waited for the
 * next request would never finish under a trickle of them. The next page
 * is asked at once; the last one lets a held take go. A page lost with
 * the connection while idle is no failure of the worker's: on_cmd_down
 * reloads. */
static void on_slots(worker_op *o, redisReply *r, const char *err)
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
    const char *e = reply_error(r, err);
    if (e) { worker_fail(w, what, e); return; }
    int rc = slots_scan_page(s, r, w->eng, w->batch);
    if (rc < 0) { worker_fail(w, what, rc == -ENOMEM ? "out of memory" : "unexpected reply"); return; }
    if (rc == 0) slots_refresh(w, clock_mono_ms());
    else if (w->state == W_SERVING) take_start(w);
}

/* As many takes as are due: one, or several reading ahead. */
static void take_start(batch_worker *w)
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
    if (r->type != REDIS_REPLY_ARRAY) { worker_fail(w, "take", "unexpected reply"); return; }
    if (!r->elements || ch->kind == CHUNK_CTL) return; /* admin commands go first */
    ch->kind = kind;
    if (ch->kind == CHUNK_CTL) ch->ctl_len = (long)r->elements;
    else ch->queue_len = (long)r->elements;
    if (add_list(w, ch, r) < 0) worker_fail(w, "take", "out of memory");
}

/* Nothing was taken and nothing is in flight: the lottery pool, an apply
 * with no requests (expiries, a phase change), or idle. */
static void nothing_taken(batch_worker *w)
{
    if (w->pool.active) { pool_chunk(w); return; }
    if (needs_empty_apply(w, clock_wall_ms())) {
        chunk *ch = chunk_ring_push(&w->ring, CHUNK_NONE);
        if (!ch) { worker_fail(w, "apply", "no free chunk"); return; }
        ch->state = CS_DEDUPED;
        advance(w);
        return;
    }
    if (w->stopping) { finish(w); return; }
    go_idle(w);
}

static void on_take_end(batch_worker *w, chunk *ch, redisReply *llen)
{
    w->takes_out--;
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
    if (isolating(w))
        log_warn("batch %s: %d applies failed in a row (%s): deciding one request at a time",
                 w->batch, w->apply_failures, w->apply_error);
    ch->taken_at = uv_hrtime();
    w->queue_unsent += ch->queue_len;
    w->ctl_unsent += ch->ctl_len;
    dedup_start(w, ch);
    take_start(w);  /* read ahead while this one is decided */
}

/* The EXEC of a take: {ctl items, [queue items,] queue length}. */
static void on_take(batch_worker *w, chunk *ch, redisReply *r)
{
    size_t want = ch->asked_queue ? 3 : 2;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != want) { worker_fail(w, "take", "unexpected reply"); return; }
    on_take_list(w, ch, CHUNK_CTL, r->element[0]);
    if (w->state == W_SERVING && ch->asked_queue) on_take_list(w, ch, CHUNK_QUEUE, r->element[1]);
    if (w->state == W_SERVING) on_take_end(w, ch, r->element[want - 1]);
}

/* ------------------------------------------------------------- lottery -- */

static void on_lottery_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (w->state != W_LOTTERY) return;
    w->state = W_SERVING;
    const char *e = reply_error(r, err);
    if (e) { worker_fail(w, "lottery", e); return; }
    int done;
    lottery_pool_free(&w->pool);
    lottery_pool_init(&w->pool, random_u64());
    int rc = lottery_pool_from_reply(&w->pool, r, &done);
    if (rc < 0) { worker_fail(w, "lottery", rc == -ENOMEM ? "out of memory" : "unexpected reply"); return; }
    if (done) {
        lottery_pool_free(&w->pool);
        w->lottery_done = 1;
    } else if (w->pool.n) {
        log_notice("batch %s: lottery pool: %zu early requests of %zu users, %zu already served",
                   w->batch, w->pool.n, lottery_ticket_count(&w->pool.lot), w->pool.served);
    }
    take_start(w);
}

/* Right after a load, before anything is decided: the pool as Redis has
 * it (lottery_pool.h). */
static void lottery_start(batch_worker *w)
{
    if (lease_check(w, "lottery") < 0) return;
    const char *argv[] = { w->keys.early, w->keys.internal, w->keys.lease, w->lease.token, w->lease.epoch };
    w->state = W_LOTTERY;
    if (redis_conn_eval(w->cmd, &w->scripts->lottery, on_lottery_reply, w, w->cfg->redis_timeout_ms,
                        3, 5, argv, NULL) < 0) {
        w->state = W_SERVING;
        worker_fail(w, "lottery", "Redis not connected");
    }
}

/* The opening, with nothing in flight: every early chunk is in, so the
 * pool is complete. The draw is made in memory; the first pool chunk
 * reveals the seed. */
static int lottery_draw_now(batch_worker *w)
{
    int rc = lottery_pool_draw(&w->pool, w->eng);   /* draw_by=points: its profiles */
    if (rc < 0) { worker_fail(w, "lottery", rc == -ENOMEM ? "out of memory" : "bad seed"); return -1; }
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
    if (isolating(w) && k > 1) k = 1;
    chunk *ch = chunk_ring_push(&w->ring, CHUNK_POOL);
    if (!ch) { worker_fail(w, "lottery", "no free chunk"); return; }
    ch->pool_len = k;
    if (chunk_reserve(ch, k ? k : 1) < 0) { worker_fail(w, "lottery", "out of memory"); return; }
    for (size_t j = 0; j < k; j++) {
        const char *raw;
        size_t len;
        int64_t seq, draw;
        lottery_pool_at(&w->pool, j, &raw, &len, &seq, &draw);
        if (add_request(w, ch, raw, len, seq) < 0) { worker_fail(w, "lottery", "out of memory"); return; }
        ch->items[ch->n_items - 1].draw = draw;
    }
    ch->taken_at = uv_hrtime();
    if (k == 0) { ch->state = CS_DEDUPED; advance(w); } /* an empty pool: record the end */
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
        if (dedup_mark_in_flight(&w->dedup, &w->ring, ch) < 0) { worker_fail(w, "dedup", "out of memory"); return; }
        ch->state = CS_DEDUPED;
        advance(w);
        return;
    }
    if (argbuf_failed(a)) { worker_fail(w, "dedup", "out of memory"); return; }
    size_t len;
    const char *cmd = argbuf_command(a, &len);
    worker_op *o = op_new(w, WOP_DEDUP, ch);
    if (!o) { worker_fail(w, "dedup", "too many commands in flight"); return; }
    /* while `reads` (re)connects, the command connection serves: there the
     * HMGET waits behind the applies, which is slower but just as correct */
    redis_conn *rc = redis_conn_is_ready(w->reads) ? w->reads : w->cmd;
    if (redis_conn_command_resp(rc, on_op_reply, o, w->cfg->redis_timeout_ms, cmd, len) < 0) {
        o->busy = 0;
        worker_fail(w, "dedup", "Redis not connected");
        return;
    }
    w->dedups_out++;
}

static void on_dedup(batch_worker *w, chunk *ch, redisReply *r)
{
    w->dedups_out--;
    if (dedup_take_reply(ch, r) < 0) {
        worker_fail(w, "dedup", "HMGET reply is not one element per id asked");
        return;
    }
    if (dedup_mark_in_flight(&w->dedup, &w->ring, ch) < 0) { worker_fail(w, "dedup", "out of memory"); return; }
    ch->state = CS_DEDUPED;
    chunks_gc(w);
    advance(w);
    take_start(w);          /* a DONE chunk may have freed a slot */
}

static void on_orders(batch_worker *w, chunk *ch, redisReply *r)
{
    if (order_ids_take(&w->orders, r, ids_needed(w, ch)) < 0) {
        worker_fail(w, "order id block", "unexpected reply");
        return;
    }
    advance(w);
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
        worker_fail(w, "decide", "out of memory in the engine");
        return -1;
    }
    return 0;
}

/* Decides the chunk and encodes its apply transaction into w->args;
 * apply_send sends it. */
static int apply_build(batch_worker *w, chunk *ch)
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
    w->orders.block.now_ms = now;
    if (decide(w, ch, now) < 0) return -1;
    if (ch->early && lottery_pool_take_chunk(&w->pool, ch) < 0) {
        worker_fail(w, "decide", "out of memory in the lottery pool");
        return -1;
    }
    apply_txn_ctx ctx = {
        .keys = &w->keys, .trip_key = w->trip_key, .fence_src = w->scripts->fence.source,
        .token = w->lease.token, .epoch = w->lease.epoch,
        .chunks_applied = w->chunks_applied, .dequeued = w->dequeued, .now = now,
        .first_apply = w->first_apply, .pool_served = w->pool.served, .pool_n = w->pool.n,
        .pool = w->pool.loaded ? &w->pool : NULL,
        .log_maxlen = w->cfg->log_maxlen, .log_chunk = w->cfg->log_chunk,
        .archive_group = w->cfg->archive_group, .instance = w->cfg->instance,
        .decision_p50_us = recent_quantile_us(w, 0.50), .decision_p99_us = recent_quantile_us(w, 0.99),
        .fault_apply_id = w->fault_apply_id, .bad_profiles = &w->profiles_report.bad,
    };
    if (apply_txn_encode(&w->args, &ctx, ch, w->eng) < 0) { worker_fail(w, "apply", "out of memory"); return -1; }
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

/* Sends the pipeline apply_build built. hiredis copies it, so w->args is
 * free again for the next chunk. */
static void apply_send(batch_worker *w, chunk *ch)
{
    if (lease_check(w, "apply") < 0) return;
    argbuf *a = &w->args;
    redis_slice stack[64], *cmds = a->ncmds <= 64 ? stack : malloc(a->ncmds * sizeof *cmds);
    if (!cmds) { worker_fail(w, "apply", "out of memory"); return; }
    size_t n = argbuf_slices(a, cmds, a->ncmds);
    worker_op *o = op_new(w, WOP_APPLY, ch);
    int rc = o ? redis_conn_pipeline(w->cmd, on_op_reply, o, w->cfg->redis_timeout_ms, cmds, n) : -ENOMEM;
    if (cmds != stack) free(cmds);
    if (rc < 0) {
        if (o) o->busy = 0;
        worker_fail(w, "apply", rc == -ENOTCONN ? "Redis not connected" : "out of memory");
        return;
    }
    redis_conn_flush(w->cmd);   /* Redis starts on it while the next is decided */
    ch->state = CS_APPLYING;
    ch->apply_sent_at = uv_hrtime();
    w->dequeued += ch->queue_len;
    w->queue_unsent -= ch->queue_len;
    w->ctl_unsent -= ch->ctl_len;
    /* a chunk's entries were counted in when it was taken (on_take) */
    ALLOC_ASSERT(w->queue_unsent >= 0 && w->ctl_unsent >= 0);
    w->chunks_applied++;
}

/* wait_replicas: no apply is sent before `WAIT n` confirmed that n replicas
 * hold every write before it (so a failover to one of them can take back
 * at most the last apply), and only one apply is in flight. 1 while the
 * apply must wait. */
static int replicas_wait(batch_worker *w)
{
    for (size_t i = 0; i < w->ring.n; i++)
        if (chunk_ring_at(&w->ring, i)->state == CS_APPLYING) return 1;
    if (w->replicas_acked) { w->replicas_acked = 0; return 0; }
    if (w->replicas_out) return 1;
    char n[16], ms[16];
    snprintf(n, sizeof n, "%d", w->cfg->wait_replicas);
    snprintf(ms, sizeof ms, "%d", w->cfg->redis_timeout_ms / 2);
    const char *argv[] = { "WAIT", n, ms };
    worker_op *o = op_new(w, WOP_REPLICAS, NULL);
    if (!o || redis_conn_commandargv(w->cmd, on_op_reply, o, w->cfg->redis_timeout_ms, 3, argv, NULL) < 0) {
        if (o) o->busy = 0;
        worker_fail(w, "wait for replicas", o ? "Redis not connected" : "too many commands in flight");
        return 1;
    }
    w->replicas_out = 1;
    return 1;
}

static void on_replicas(batch_worker *w, redisReply *r)
{
    w->replicas_out = 0;
    if (r->type != REDIS_REPLY_INTEGER || r->integer < w->cfg->wait_replicas) {
        char why[120];
        snprintf(why, sizeof why, "%lld of %d replicas acknowledged within %d ms",
                 r->type == REDIS_REPLY_INTEGER ? (long long)r->integer : -1LL,
                 w->cfg->wait_replicas, w->cfg->redis_timeout_ms / 2);
        worker_fail(w, "wait for replicas", why);
        return;
    }
    w->replicas_acked = 1;
    advance(w);
}

/* Decides the chunks that are ready, oldest first, and sends their applies
 * (pipelined: FENCE's chunks_applied check keeps them in order; scripts.h
 * has the one case it cannot cover). A chunk waits for the ones before it
 * and for an order-id block when its buys need one. */
static void advance(batch_worker *w)
{
    for (size_t i = 0; i < w->ring.n && w->state == W_SERVING; i++) {
        chunk *ch = chunk_ring_at(&w->ring, i);
        if (ch->state == CS_DONE || ch->state == CS_APPLYING) continue;
        if (ch->state != CS_DEDUPED) return;
        size_t buys = ids_needed(w, ch);
        if (order_block_left(&w->orders.block) < buys) {
            if (w->orders.outstanding) return;
            worker_op *o = op_new(w, WOP_ORDERS, ch);
            if (!o || order_ids_request(&w->orders, w->router, &w->scripts->order_block,
                                        w->cfg->redis_timeout_ms, buys, on_op_reply, o) < 0) {
                if (o) o->busy = 0;
                worker_fail(w, "order id block", o ? "Redis not connected" : "too many commands in flight");
            }
            return;
        }
        if (w->cfg->wait_replicas > 0 && replicas_wait(w)) return;
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
static const char *exec_error(redisReply *r)
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
    if (ch->dead_lettering) {
        w->apply_failures = 0;           /* the poison is gone */
        w->isolate_left = 0;
    } else if (isolating(w)) {
        w->isolate_left -= (long)ch->n_items;
        if (w->isolate_left <= 0) { w->apply_failures = 0; w->isolate_left = 0; }
    } else {
        w->apply_failures = 0;
        w->isolate_left = 0;
    }
}

static void on_applied(batch_worker *w, chunk *ch, redisReply *r)
{
    const char *e = exec_error(r);
    if (e) { worker_fail(w, "apply", e); return; }
    size_t first = 0;
    while (first < w->ring.n && chunk_ring_at(&w->ring, first)->state == CS_DONE) first++;
    if (first == w->ring.n || ch != chunk_ring_at(&w->ring, first)) {
        worker_fail(w, "apply", "replies out of order");
        return;
    }
    note_applied(w, ch);
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
    ch->state = CS_DONE;
    chunks_gc(w);
    if (w->cfg->wait_replicas > 0) advance(w);   /* the next apply waited for this one */
    if (w->state == W_SERVING) take_start(w);
}

/* An order-id block's reply, on the router's connections, which outlive
 * the worker. 1 when it is handled here (not for the serving steps). */
static int order_reply_handled(worker_op *o, redisReply *r, const char *err)
{
    batch_worker *w = o->w;
    w->orders.outstanding--;
    if (w->state == W_CLOSING) { o->busy = 0; on_handle_closed(w); return 1; }
    if (o->kind == WOP_LOAD_ORDERS && o->gen == w->gen && w->state == W_LOADING) {
        o->busy = 0;
        on_load_orders(w, r, err);
        return 1;
    }
    if (o->kind == WOP_LOAD_ORDERS || o->gen != w->gen) {
        /* a block asked for before a reload: a chunk of this generation
         * may be waiting for it to be out of the way */
        o->busy = 0;
        if (w->state == W_SERVING) advance(w);
        return 1;
    }
    return 0;
}

static void on_op_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    worker_op *o = priv;
    batch_worker *w = o->w;
    worker_op_kind kind = o->kind;
    if ((kind == WOP_ORDERS || kind == WOP_LOAD_ORDERS) && order_reply_handled(o, r, err)) return;
    if (kind == WOP_SLOTS || kind == WOP_PROFILES) { on_slots(o, r, err); return; }
    if (!op_current(o)) return;
    if (kind == WOP_TAKE && o->take_gen != w->take_gen) return;
    static const char *const names[] = { "take", "dedup", "order id block", "apply", "order id block",
                                         "slots", "wait for replicas", "profiles" };
    const char *e = reply_error(r, err);
    if (e) { worker_fail(w, names[kind], e); return; }
    switch (kind) {
    case WOP_TAKE: on_take(w, o->ch, r); break;
    case WOP_DEDUP: on_dedup(w, o->ch, r); break;
    case WOP_ORDERS: on_orders(w, o->ch, r); break;
    case WOP_APPLY: on_applied(w, o->ch, r); break;
    case WOP_LOAD_ORDERS: break;        /* handled above */
    case WOP_SLOTS: case WOP_PROFILES: break;   /* handled above */
    case WOP_REPLICAS: on_replicas(w, r); break;
    }
}

/* ---------------------------------------------------------------- idle -- */

static void kick(batch_worker *w)
{
    if (w->state != W_IDLE) return;
    uv_timer_stop(&w->timer);
    w->state = W_SERVING;
    take_start(w);
}

static void on_timer_idle(uv_timer_t *t)
{
    kick(t->data);
}

static void on_wait_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (c == w->wait_queue) w->wait_queue_pending = 0;
    else w->wait_ctl_pending = 0;
    if (w->state == W_CLOSING) return;
    if (err || !r) return; /* the connection's on_ready re-issues the wait */
    if (r->type == REDIS_REPLY_ERROR) {
        /* e.g. MOVED after a slot migration: a take runs into the same
         * error and the failure path follows the slot (with backoff), which
         * a re-issued wait never would */
        log_warn("batch %s: wait on %s: %s", w->batch, redis_conn_name(c), r->str);
        kick(w);
        return;
    }
    if (r->type == REDIS_REPLY_NIL) { if (w->state == W_IDLE) issue_waits(w); return; }
    kick(w);
}

static void issue_wait(batch_worker *w, redis_conn *c, const char *key, int *pending)
{
    if (*pending || !redis_conn_is_ready(c)) return;
    char secs[32];
    snprintf(secs, sizeof secs, "%.3f", w->cfg->idle_wait_ms / 1000.0);
    const char *argv[] = { "BLMOVE", key, key, "RIGHT", "RIGHT", secs };
    if (redis_conn_commandargv(c, on_wait_reply, w, w->cfg->idle_wait_ms + w->cfg->redis_timeout_ms,
                               6, argv, NULL) == 0)
        *pending = 1;
}

static void issue_waits(batch_worker *w)
{
    issue_wait(w, w->wait_ctl, w->keys.ctl, &w->wait_ctl_pending);
    if (take_queue_now(w, clock_wall_ms()))
        issue_wait(w, w->wait_queue, w->keys.queue, &w->wait_queue_pending);
}

/* Nothing to do: wait for a request, a command, an expiry or a phase change
 * (opens_at, closes_at), whichever comes first. */
static void go_idle(batch_worker *w)
{
    int64_t now = clock_wall_ms();
    const engine_meta *m = engine_get_meta(w->eng);
    int64_t next = engine_next_expiry(w->eng);
    if (m->opens_at > now && m->opens_at < next) next = m->opens_at;
    if (m->closes_at > now && m->closes_at < next) next = m->closes_at;
    w->state = W_IDLE;
    uv_timer_stop(&w->timer);
    if (next != INT64_MAX) {
        /* +1: the uv clock and the wall clock may disagree by a millisecond */
        uint64_t delay = next > now ? (uint64_t)(next - now) + 1 : 1;
        uv_timer_start(&w->timer, on_timer_idle, delay, 0);
    }
    issue_waits(w);
}

/* ---------------------------------------------------------------- lease -- */

/* Before every step that writes: our own clock must still vouch for the
 * lease (the scripts check it again in Redis). */
static int lease_check(batch_worker *w, const char *step)
{
    if (batch_lease_valid(&w->lease)) return 0;
    batch_lease_drop(&w->lease);
    worker_fail(w, step, "the lease is not valid any more");
    return -1;
}

static void acquire_start(batch_worker *w)
{
    if (batch_lease_valid(&w->lease)) { load_start(w); return; }
    w->state = W_ACQUIRING;
    if (batch_lease_acquire(&w->lease) < 0) w->state = W_CONNECTING; /* on_ready retries */
}

static void on_lease_acquired(batch_lease *l, void *data)
{
    batch_worker *w = data;
    if (w->state != W_ACQUIRING) return;
    log_notice("batch %s: lease acquired (epoch %s)", w->batch, l->epoch);
    w->lease_wait = 0;
    w->lease_holder_seen[0] = '\0';
    if (w->stopping) { finish(w); return; }
    load_start(w);
}

static void on_lease_busy(batch_lease *l, int64_t pttl, const char *holder, void *data)
{
    batch_worker *w = data;
    if (w->state != W_ACQUIRING) return;
    if (w->stopping) { close_all(w); return; }
    if (batch_lease_holder_dead(l, holder)) {
        log_notice("batch %s: taking over the lease of our previous run (%s)", w->batch, holder);
        if (batch_lease_acquire_from(l, holder) == 0) return; /* still W_ACQUIRING */
    }
    if (strcmp(w->lease_holder_seen, holder)) {
        snprintf(w->lease_holder_seen, sizeof w->lease_holder_seen, "%s", holder);
        log_notice("batch %s: waiting for the lease held by %s (expires in %" PRId64 " ms)",
                   w->batch, holder, pttl);
    }
    /* try again right after it would expire, and at least every fifth of
     * the TTL, since a holder handing the batch over releases it early */
    uint64_t cap = (uint64_t)w->cfg->lease_ttl_ms / 5;
    uint64_t delay = pttl >= 0 && (uint64_t)pttl + 20 < cap ? (uint64_t)pttl + 20 : cap;
    w->state = W_BACKOFF;
    w->lease_wait = 1;
    uv_timer_start(&w->timer, on_timer_backoff, delay, 0);
}

static void on_lease_lost(batch_lease *l, const char *why, void *data)
{
    batch_worker *w = data;
    if (w->state == W_ACQUIRING) w->state = W_LOADING; /* let worker_fail() back off */
    worker_fail(w, "lease", why);
}

static void on_lease_released(batch_lease *l, void *data)
{
    close_all(data);
}

static const batch_lease_callbacks lease_cb = {
    on_lease_acquired, on_lease_busy, on_lease_lost, on_lease_released,
};

/* Stopping cleanly: hand the lease back so another instance can take the
 * batch at once instead of after the TTL. */
static void finish(batch_worker *w)
{
    if (w->state == W_RELEASING || w->state == W_CLOSING) return;
    uv_timer_stop(&w->timer);
    w->state = W_RELEASING;
    batch_lease_release(&w->lease);
}

/* ------------------------------------------------------ answered -- */

/* Whether the worker can serve right now: parked idle with the waits that
 * wake it, a step under way with no failure since the last apply, or
 * waiting for a lease another instance holds (that one answers). */
static int can_serve(batch_worker *w)
{
    switch (w->state) {
    case W_IDLE:
        return w->wait_ctl_pending && (w->wait_queue_pending || !take_queue_now(w, clock_wall_ms()));
    case W_ACQUIRING: case W_LOADING: case W_SERVING: case W_LOTTERY:
        return w->attempts == 0;
    case W_BACKOFF:
        return w->lease_wait;
    default:
        return 0;
    }
}

static const char *state_name(worker_state s)
{
    static const char *const names[] = { "connecting to Redis", "acquiring the lease", "loading",
        "idle", "serving", "drawing the lottery", "backing off after a failure", "releasing", "closing" };
    return names[s];
}

/* Contract 9.6: a worker that cannot serve for half of answer_ms, or that
 * has a request older than that and applied nothing meanwhile while the
 * batch is open, lets the batch go -- lease released, worker stopped, the
 * registry hands it to another instance -- and says so at error level. */
static void give_up(batch_worker *w, const char *why, int64_t ms)
{
    log_err("batch %s: cannot serve: %s for %" PRId64 " ms (%s%s%s); giving up the batch so "
            "another instance serves it", w->batch, why, ms, state_name(w->state),
            w->last_failure[0] ? "; last: " : "", w->last_failure);
    w->gave_up = 1;
    w->stopping = 1;
    w->gen++;
    finish(w);
}

/* Sentinel moved the master (redis_router follows it): every connection
 * of the worker goes there, through the failure path's follow_slot. The
 * router says so at once (batch_worker_follow_master); the watch tick
 * checks again, in case a worker was between states then. Returns 1 when
 * the worker failed over. */
static int left_old_master(batch_worker *w)
{
    redis_target t;
    if (redis_router_is_cluster(w->router) || w->state == W_BACKOFF) return 0;
    if (redis_router_target(w->router, w->keys.meta, &t) < 0 || !memcmp(&t, &w->target, sizeof t))
        return 0;
    worker_fail(w, "redis", "the master moved (Sentinel)");
    return 1;
}

void batch_worker_follow_master(batch_worker *w)
{
    if (w->state == W_RELEASING || w->state == W_CLOSING || w->stopping) return;
    left_old_master(w);
}

static void watch_check(void *data, int64_t now)
{
    batch_worker *w = data;
    if (w->state == W_RELEASING || w->state == W_CLOSING || w->stopping) return;
    answer_watch *aw = &w->watch.aw;
    if (can_serve(w)) answer_watch_good(aw, now);
    int64_t bound = w->cfg->answer_ms / 2;
    int64_t unable = answer_watch_unable_ms(aw, now), oldest = answer_watch_oldest_ms(aw, now);
    if (unable > bound) { give_up(w, "unable to serve", unable); return; }
    if (left_old_master(w)) return;
    if (oldest > bound && answer_watch_idle_ms(aw, now) > bound && w->eng &&
        take_queue_now(w, clock_wall_ms()))
        give_up(w, "a request unanswered and no chunk applied", oldest);
}

/* Probes only while holding the lease: the holder reports the batch. */
static redis_conn *watch_probe_conn(void *data)
{
    batch_worker *w = data;
    if (!batch_lease_valid(&w->lease)) { answer_watch_reset(&w->watch.aw); return NULL; }
    return redis_conn_is_ready(w->reads) ? w->reads : w->cmd;
}

static const batch_watch_callbacks watch_cb = { watch_probe_conn, watch_check };

/* --------------------------------------------------------- start, stop -- */

static void on_cmd_ready(redis_conn *c, void *data)
{
    batch_worker *w = data;
    if (w->state == W_CONNECTING && !w->stopping) acquire_start(w);
}

static void on_cmd_down(redis_conn *c, const char *why, void *data)
{
    batch_worker *w = data;
    /* Redis may come back empty (restart without persistence): what is in
     * memory can no longer be trusted, so reload once it is back. */
    if (w->state == W_IDLE) {
        uv_timer_stop(&w->timer);
        drop_engine(w);
        w->state = W_CONNECTING;
    }
}

static void on_wait_ready(redis_conn *c, void *data)
{
    batch_worker *w = data;
    if (w->state == W_IDLE) issue_waits(w);
}

static void on_handle_closed(batch_worker *w)
{
    if (--w->handles_open > 0) return;
    chunk_ring_free(&w->ring);
    drop_engine(w);
    batch_load_free(&w->load);
    dedup_free(&w->dedup);
    slots_scan_free(&w->slots);
    slots_scan_free(&w->profiles);
    profiles_report_free(&w->profiles_report);
    argbuf_free(&w->args);
    argbuf_free(&w->reads_args);
    /* The owner forgets w in the callback; nothing touches it afterwards. */
    if (w->on_stopped) w->on_stopped(w, w->data);
    free(w);
}

static void on_conn_closed(redis_conn *c, void *data) { on_handle_closed(data); }
static void on_timer_closed(uv_handle_t *h) { on_handle_closed(h->data); }
static void on_lease_closed(uv_handle_t *h) { on_handle_closed(((batch_lease *)h->data)->data); }
static void on_watch_closed(uv_handle_t *h) { on_handle_closed(((batch_watch *)h->data)->data); }

static void close_all(batch_worker *w)
{
    if (w->state == W_CLOSING) return;
    w->state = W_CLOSING;
    log_info("batch %s: stopped after %" PRIu64 " chunks", w->batch, w->stats.chunks);
    uv_timer_stop(&w->timer);
    w->handles_open = 7 + w->orders.outstanding;
    batch_lease_close(&w->lease, on_lease_closed);
    batch_watch_close(&w->watch, on_watch_closed);
    redis_conn_close(w->cmd, on_conn_closed, w);
    redis_conn_close(w->reads, on_conn_closed, w);
    redis_conn_close(w->wait_queue, on_conn_closed, w);
    redis_conn_close(w->wait_ctl, on_conn_closed, w);
    uv_close((uv_handle_t *)&w->timer, on_timer_closed);
}

void batch_worker_stop(batch_worker *w)
{
    w->stopping = 1;
    switch (w->state) {
    case W_CONNECTING: case W_ACQUIRING: case W_LOADING: case W_IDLE: case W_BACKOFF:
        finish(w);
        break;
    default:
        break; /* the step in flight finishes, then close_all() */
    }
}

void batch_worker_abort(batch_worker *w)
{
    w->stopping = 1;
    close_all(w);
}

const char *batch_worker_batch(const batch_worker *w) { return w->batch; }
const batch_worker_stats *batch_worker_get_stats(batch_worker *w)
{
    const redis_conn *conns[] = { w->cmd, w->reads, w->wait_queue, w->wait_ctl };
    w->stats.reconnects = 0;
    for (size_t i = 0; i < 4; i++)
        if (conns[i]) w->stats.reconnects += redis_conn_get_stats(conns[i])->failures;
    w->stats.oldest_unanswered_seconds =
        (double)answer_watch_oldest_ms(&w->watch.aw, clock_mono_ms()) / 1000.0;
    return &w->stats;
}

int batch_worker_gave_up(const batch_worker *w) { return w->gave_up; }

static int open_conn(batch_worker *w, redis_conn **out, const char *role,
                     const redis_conn_callbacks *cb)
{
    char name[128];
    snprintf(name, sizeof name, "%s/%s/%s", w->cfg->instance, w->batch, role);
    redis_conn_options opt = {
        .name = name,
        .connect_timeout_ms = w->cfg->connect_timeout_ms,
        .backoff_min_ms = w->cfg->backoff_min_ms,
        .backoff_max_ms = w->cfg->backoff_max_ms,
    };
    return redis_conn_init(out, w->loop, &w->target, &opt, cb, w);
}

int batch_worker_start(batch_worker **out, uv_loop_t *loop,
                       const allocd_config *cfg, const allocd_scripts *scripts,
                       redis_router *router, const char *batch,
                       batch_worker_stopped_fn on_stopped, void *data)
{
    batch_worker *w = calloc(1, sizeof *w);
    if (!w) return -ENOMEM;
    if (batch_keys_init(&w->keys, cfg->prefix, batch) < 0) { free(w); return -EINVAL; }
    if (redis_router_target(router, w->keys.meta, &w->target) < 0) { free(w); return -EAGAIN; }
    w->router = router;
    w->loop = loop;
    w->cfg = cfg;
    w->scripts = scripts;
    w->on_stopped = on_stopped;
    w->data = data;
    snprintf(w->batch, sizeof w->batch, "%s", batch);
    order_ids_init(&w->orders, cfg->prefix, (uint64_t)cfg->chunk, random_u64());
    argbuf_init(&w->args);
    argbuf_init(&w->reads_args);
    dedup_init(&w->dedup, random_u64());
    slots_scan_init(&w->slots);
    profiles_report_init(&w->profiles_report);
    slots_scan_target pt = profiles_target(&w->profiles_report);
    slots_scan_init_target(&w->profiles, &pt);
    w->written_phase = (engine_phase)-1;
    w->fault_apply_id = getenv("ALLOCD_FAULT_APPLY_ID");
    w->state = W_CONNECTING;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    static const redis_conn_callbacks cmd_cb = { on_cmd_ready, on_cmd_down };
    static const redis_conn_callbacks wait_cb = { on_wait_ready, NULL };
    static const redis_conn_callbacks reads_cb = { NULL, NULL };
    if (open_conn(w, &w->cmd, "cmd", &cmd_cb) < 0 ||
        open_conn(w, &w->reads, "reads", &reads_cb) < 0 ||
        open_conn(w, &w->wait_queue, "wait-queue", &wait_cb) < 0 ||
        open_conn(w, &w->wait_ctl, "wait-ctl", &wait_cb) < 0) {
        /* Unwind what was opened; the caller gets an error and no callback. */
        w->on_stopped = NULL;
        w->handles_open = 1;
        if (w->cmd) { w->handles_open++; redis_conn_close(w->cmd, on_conn_closed, w); }
        if (w->reads) { w->handles_open++; redis_conn_close(w->reads, on_conn_closed, w); }
        if (w->wait_queue) { w->handles_open++; redis_conn_close(w->wait_queue, on_conn_closed, w); }
        w->state = W_CLOSING;
        uv_close((uv_handle_t *)&w->timer, on_timer_closed);
        return -ENOMEM;
    }
    batch_load_init(&w->load, w->cmd, cfg, scripts, &w->keys, w->batch, &w->dedup, &load_cb, w);
    w->load.profiles = &w->profiles_report;   /* read with the batch, then rescanned */
    batch_watch_init(&w->watch, loop, &w->keys, cfg->answer_ms, cfg->redis_timeout_ms, &watch_cb, w);
    batch_lease_init(&w->lease, loop, w->cmd, scripts, &w->keys, cfg->lease_ttl_ms,
                     cfg->instance, &lease_cb, w);
    *out = w;
    log_info("batch %s: worker started", batch);
    return 0;
}
