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
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/heap_reserve.h"
#include "base/log.h"
#include "base/random.h"
#include "core/assert.h"
#include "batch_worker_int.h"

static void acquire_start(batch_worker *w);
static void close_all(batch_worker *w);
/* The WATCH is armed as soon as its link is up, before the load if it
 * can be: the load is then the read it needs (slots_scan.h). */
static void on_watch_conn_ready(redis_conn *c, void *data)
{
    batch_worker *w = data;
    (void)c;
    if (w->state != W_CLOSING && !w->stopping) profiles_watch_tick(&w->profiles_watch, clock_mono_ms());
}

static void on_handle_closed(batch_worker *w);
static void issue_waits(batch_worker *w);

const char *batch__reply_error(redisReply *r, const char *err)
{
    if (err) return err;
    if (!r) return "no reply";
    if (r->type == REDIS_REPLY_ERROR) return r->str;
    return NULL;
}

/* -------------------------------------------------------------- states -- */

#define S(x) (1u << (x))
/* The states each state may be entered from (the diagram at the top). A
 * failure backs off from any live state; nothing leaves CLOSING, and
 * RELEASING leads only to CLOSING. */
static const unsigned entered_from[] = {
    [W_CONNECTING] = S(W_CONNECTING) | S(W_BACKOFF) | S(W_ACQUIRING) | S(W_LOADING) | S(W_IDLE),
    [W_ACQUIRING] = S(W_CONNECTING) | S(W_BACKOFF),
    [W_LOADING] = S(W_CONNECTING) | S(W_BACKOFF) | S(W_ACQUIRING) | S(W_LOADING) | S(W_IDLE) |
                  S(W_SERVING) | S(W_LOTTERY),
    [W_IDLE] = S(W_SERVING) | S(W_IDLE),
    [W_SERVING] = S(W_LOADING) | S(W_IDLE) | S(W_LOTTERY) | S(W_SERVING),
    [W_LOTTERY] = S(W_SERVING),
    [W_BACKOFF] = S(W_CONNECTING) | S(W_ACQUIRING) | S(W_LOADING) | S(W_IDLE) | S(W_SERVING) |
                  S(W_LOTTERY) | S(W_BACKOFF),
    [W_RELEASING] = S(W_CONNECTING) | S(W_ACQUIRING) | S(W_LOADING) | S(W_IDLE) | S(W_SERVING) |
                    S(W_LOTTERY) | S(W_BACKOFF),
    [W_CLOSING] = ~S(W_CLOSING),
};
#undef S

void batch__set_state(batch_worker *w, worker_state to)
{
    ALLOC_ASSERT((unsigned)to < sizeof entered_from / sizeof entered_from[0]);
    ALLOC_ASSERT(entered_from[to] & (1u << w->state));
    if (to != W_LOADING) w->load_after_watch = 0;   /* a load that waited is not to begin */
    w->state = to;
}

/* ---------------------------------------------------------- operations -- */

worker_op *batch__op_new(batch_worker *w, worker_op_kind kind, chunk *ch)
{
    for (size_t i = 0; i < MAX_OPS; i++) {
        worker_op *o = &w->ops[i];
        if (o->busy) continue;
        ALLOC_ASSERT(w->state != W_CLOSING);
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
    ALLOC_ASSERT(o->busy && o->w && o->gen <= o->w->gen);
    o->busy = 0;
    return o->gen == o->w->gen && o->w->state == W_SERVING;
}

/* Frees the DONE chunks at the head once no dedup is out (dedup.h: an
 * HMGET still out may have run before their apply). */
void batch__chunks_gc(batch_worker *w)
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
    redis_conn_retarget(w->watch_conn, &t);
    return 1;
}

static void on_timer_backoff(uv_timer_t *t)
{
    batch_worker *w = t->data;
    if (w->state != W_BACKOFF) return;
    if (w->stopping) { batch__finish(w); return; }
    batch__set_state(w, W_CONNECTING);
    if (follow_slot(w)) return;          /* on_ready continues on the new node */
    if (redis_conn_is_ready(w->cmd)) acquire_start(w);
}

/* A Redis error reply starts with an upper-case code (ERR, EXECABORT,
 * WRONGTYPE, OOM, ...); the connection's own errors do not ("timeout",
 * "connection lost", "closed"). Only a refusal by Redis may be the
 * request's fault: a lost link says nothing about the chunk, and counting
 * it would send healthy requests to dead on a flaky network. Nor does a
 * refusal for the server's state -- out of memory, loading, busy with a
 * script, a replica, a cluster slot elsewhere -- whatever the transaction
 * held, or an EXECABORT for one of those; nor FENCE's own refusals for the
 * lease (FENCED: another instance serves now) or for a chunk applied
 * whose reply was lost (STALE): the simulator found an admin command
 * dead-lettered after its apply was FENCED (seed 61658 of --first 60000). */
int batch__redis_refused(const char *why)
{
    static const char *const state[] = { "OOM", "LOADING", "BUSY", "READONLY", "MASTERDOWN", "NOREPLICAS",
                                         "TRYAGAIN", "CLUSTERDOWN", "MOVED", "ASK", "FENCED", "STALE" };
    static const char abort_because[] = "EXECABORT Transaction discarded because of: ";
    if (!strncmp(why, abort_because, sizeof abort_because - 1)) why += sizeof abort_because - 1;
    size_t n = 0;
    while (why[n] >= 'A' && why[n] <= 'Z') n++;
    for (size_t i = 0; i < sizeof state / sizeof state[0]; i++)
        if (strlen(state[i]) == n && !strncmp(why, state[i], n)) return 0;
    return n >= 2 && (why[n] == ' ' || why[n] == '\0');
}

/* Something went wrong mid-step: forget everything held in memory and load
 * again from Redis after a backoff (100 ms doubling up to 5 s). */
void batch__fail(batch_worker *w, const char *what, const char *why)
{
    if (w->state == W_CLOSING) return;
    log_warn("batch %s: %s failed: %s; reloading from Redis", w->batch, what, why);
    snprintf(w->last_failure, sizeof w->last_failure, "%s failed: %s", what, why);
    w->lease_wait = 0;
    if (!strncmp(why, "MOVED", 5) || !strncmp(why, "ASK ", 4) || !strncmp(why, "CLUSTERDOWN", 11) ||
        !strncmp(why, "TRYAGAIN", 8))
        redis_router_refresh(w->router); /* the backoff then follows the slot */
    if (!strncmp(why, "FENCED", 6)) batch_lease_drop(&w->lease);
    else if (!strcmp(what, "apply") && batch__redis_refused(why)) {
        w->apply_failures++;
        snprintf(w->apply_error, sizeof w->apply_error, "%s", why);
        /* every request in flight is decided again; one at a time once
         * isolating, until they are all through */
        long n = chunk_ring_requests(&w->ring);
        if (n > w->isolate_left) w->isolate_left = n;
    }
    w->gen++;                 /* replies still on their way are dropped */
    w->replicas_out = w->replicas_acked = w->replicas_retry = 0;
    argbuf_reset(&w->staged);   /* Redis keeps it: the load publishes it */
    chunks_drop_all(w);
    drop_engine(w);
    w->stats.failures++;
    w->attempts++;
    if (w->stopping) { batch__finish(w); return; }
    int shift = w->attempts < 6 ? w->attempts : 6;
    uint64_t delay = (uint64_t)w->cfg->backoff_min_ms << shift;
    if (delay > (uint64_t)w->cfg->backoff_max_ms) delay = (uint64_t)w->cfg->backoff_max_ms;
    batch__set_state(w, W_BACKOFF);
    uv_timer_start(&w->timer, on_timer_backoff, delay, 0);
}

/* ---------------------------------------------------------------- load -- */

/* batch_load.h reads the state; the worker sequences it: the hashes, then
 * an order-id block (on the router), then the answered ids, then serving. */
static int load_active(void *data)
{
    const batch_worker *w = data;
    return w->state == W_LOADING && !w->load_after_watch;   /* not while the load waits to begin */
}

static void on_load_read(void *data)
{
    batch_worker *w = data;
    if (w->load.failed) { batch_load_scan(&w->load); return; } /* straight to on_load_done */
    if (w->load.staged.ncmds) { batch__load_publish(w); return; }  /* then loads again */
    worker_op *o = batch__op_new(w, WOP_LOAD_ORDERS, NULL);
    if (!o || order_ids_request(&w->orders, w->router, &w->scripts->order_block, w->cfg->redis_timeout_ms,
                                0, batch__on_op_reply, o) < 0) {
        if (o) o->busy = 0;
        batch_load_fail(&w->load, "order ids: Redis not connected");
        batch_load_scan(&w->load);
    }
}

/* The order-id block of the load (WOP_LOAD_ORDERS, current generation and
 * still loading: batch__on_op_reply checks). */
static void on_load_orders(batch_worker *w, redisReply *r, const char *err)
{
    const char *e = batch__reply_error(r, err);
    if (e) batch_load_fail(&w->load, "order ids: %s", e);
    else if (order_ids_take(&w->orders, r, 0) < 0) batch_load_fail(&w->load, "order ids: unexpected reply");
    batch_load_scan(&w->load);
}

static void on_load_done(void *data)
{
    batch_worker *w = data;
    if (w->load.failed) {
        batch__set_state(w, W_LOADING); /* let batch__fail() log and back off */
        batch__fail(w, "loading", w->load.err);
        return;
    }
    w->eng = batch_load_take_engine(&w->load);
    w->dequeued = w->load.dequeued;
    w->chunks_applied = w->load.chunks_applied;
    w->lottery_done = w->load.lottery_done;
    engine_set_order_source(w->eng, order_block_mint, &w->orders.block);
    w->first_apply = 1;
    if (w->cfg->wait_replicas > 0 && apply_txn_encode_free(&w->loaded_free, &w->keys, w->eng) < 0) {
        batch__fail(w, "loading", "out of memory");
        return;
    }
    w->stats.loaded = 1;
    /* A load parses every profile and page of the batch's hashes and frees
     * them again; glibc keeps the freed heap, which at 100,000 profiles
     * was more than the engine's profiles themselves. Given back once,
     * all but the reserve the sale grows into. */
    heap_reserve_trim((size_t)w->cfg->heap_reserve_mb << 20);
    const engine_counters *c = engine_get_counters(w->eng);
    log_info("batch %s: loaded %zu items, %zu users, %" PRId64 " processed so far",
             w->batch, engine_item_count(w->eng), engine_user_count(w->eng), c->processed);
    batch__set_state(w, W_SERVING);
    chunks_drop_all(w);
    /* a WATCH armed during the load asks for one read: made now, before
     * the first request rather than with it */
    batch__profiles_refresh(w, clock_mono_ms());
    /* early=shuffle: the pool is read back before anything is decided */
    if (engine_get_meta(w->eng)->early == EARLY_SHUFFLE && !w->lottery_done) batch__lottery_start(w);
    else batch__take_start(w);
}

static const batch_load_callbacks load_cb = { load_active, on_load_read, on_load_done };

/* The load waits, at most LOAD_WATCH_WAIT_MS, for the profiles' WATCH
 * about to stand: read after it, the load is the read the WATCH needs.
 * Armed behind the load's HGETALL instead (Redis runs the two links'
 * commands in turn, and the profiles' reply is the load's longest), the
 * WATCH asked for a second whole read, which at 200,000 profiles still
 * ran when a round opened. The bound is short because every takeover
 * pays it when the watch's link is slow to come back (a batch without
 * profiles gains nothing by waiting): arming takes one round trip. */
#define LOAD_WATCH_WAIT_MS 250

static void load_now(batch_worker *w);

/* The wait is over, stood or not: the timer alone ends it when the WATCH
 * does not stand in time (a link reconnecting, an arming that failed). */
static void on_timer_load(uv_timer_t *t)
{
    batch_worker *w = t->data;
    if (!w->load_after_watch || w->state != W_LOADING || w->stopping) return;
    w->load_after_watch = 0;
    load_now(w);
}

/* 1: the load waits (started now, or still arming). */
static int load_waits_watch(batch_worker *w)
{
    int64_t now = clock_mono_ms();
    int arming = profiles_watch_arming(&w->profiles_watch, now);
    if (!w->load_after_watch) {
        if (!arming) return 0;
        w->load_after_watch = now;
        uv_timer_start(&w->timer, on_timer_load, LOAD_WATCH_WAIT_MS, 0);
        return 1;
    }
    if (arming) return 1;
    uv_timer_stop(&w->timer);
    w->load_after_watch = 0;
    return 0;
}

/* Called again when the WATCH stands (on_profiles_news) until the load
 * begins; the wait's timer ends it otherwise. */
void batch__load_start(batch_worker *w)
{
    drop_engine(w);
    if (load_waits_watch(w)) {
        batch__set_state(w, W_LOADING);
        return;
    }
    load_now(w);
}

static void load_now(batch_worker *w)
{
    slots_scan_loaded(&w->slots, clock_mono_ms());   /* the load reads them */
    slots_scan_loaded(&w->profiles, clock_mono_ms());
    batch__set_state(w, W_LOADING);
    log_debug("batch %s: the load begins, the profiles' WATCH %s", w->batch,
              profiles_watch_stands(&w->profiles_watch) ? "standing" : "not standing (a read follows when it stands)");
    snprintf(w->trip_key, sizeof w->trip_key, "%s:{%s}:trip:%s", w->cfg->prefix, w->batch, w->lease.token);
    /* -ENOTCONN: the connection is down; the commands already sent get
     * their error callbacks, and on_ready starts a new load. Any other
     * error would not be cured by a reconnect: the load fails. */
    int rc = batch_load_start(&w->load, w->trip_key, random_u64());
    if (rc == -ENOTCONN) {
        batch__set_state(w, W_CONNECTING);
        drop_engine(w);
    } else if (rc < 0) {
        batch__fail(w, "loading", rc == -ENOMEM ? "out of memory" : strerror(-rc));
    }
}

/* An order-id block's reply, on the router's connections, which outlive
 * the worker. 1 when it is handled here (not for the serving steps). */
static int order_reply_handled(worker_op *o, redisReply *r, const char *err)
{
    batch_worker *w = o->w;
    ALLOC_ASSERT(w->orders.outstanding > 0);
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
        if (w->state == W_SERVING) batch__advance(w);
        return 1;
    }
    return 0;
}

void batch__on_op_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    worker_op *o = priv;
    batch_worker *w = o->w;
    worker_op_kind kind = o->kind;
    ALLOC_ASSERT(o->busy && (unsigned)kind <= WOP_LAST);
    if ((kind == WOP_ORDERS || kind == WOP_LOAD_ORDERS) && order_reply_handled(o, r, err)) return;
    if (kind == WOP_SLOTS || kind == WOP_PROFILES) { batch__on_slots(o, r, err); return; }
    if (kind == WOP_LOAD_WAIT || kind == WOP_LOAD_PUBLISH) { batch__on_load_publish(o, r, err); return; }
    if (!op_current(o)) return;
    if (kind == WOP_TAKE && o->take_gen != w->take_gen) return;
    static const char *const names[] = { "take", "dedup", "order id block", "apply", "order id block",
                                         "slots", "wait for replicas", "loading", "loading",
                                         "profiles" };
    const char *e = batch__reply_error(r, err);
    if (e && kind == WOP_APPLY) batch__note_suspect(w, o->ch, e);
    if (e) { batch__fail(w, names[kind], e); return; }
    switch (kind) {
    case WOP_TAKE: batch__on_take(w, o->ch, r); break;
    case WOP_DEDUP: batch__on_dedup(w, o->ch, r); break;
    case WOP_ORDERS: batch__on_orders(w, o->ch, r); break;
    case WOP_APPLY: batch__on_applied(w, o->ch, r); break;
    case WOP_LOAD_ORDERS: break;        /* handled above */
    case WOP_SLOTS: case WOP_PROFILES: break;   /* handled above */
    case WOP_REPLICAS: batch__on_replicas(w, r); break;
    case WOP_LOAD_WAIT: case WOP_LOAD_PUBLISH: break;   /* handled above */
    }
}

/* ---------------------------------------------------------------- idle -- */

static void kick(batch_worker *w)
{
    if (w->state != W_IDLE) return;
    uv_timer_stop(&w->timer);
    batch__set_state(w, W_SERVING);
    batch__take_start(w);
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
    if (batch__take_queue_now(w, clock_wall_ms()))
        issue_wait(w, w->wait_queue, w->keys.queue, &w->wait_queue_pending);
}

/* Nothing to do: wait for a request, a command, an expiry or a phase change
 * (opens_at, closes_at), whichever comes first. */
void batch__go_idle(batch_worker *w)
{
    int64_t now = clock_wall_ms();
    const engine_meta *m = engine_get_meta(w->eng);
    int64_t next = engine_next_expiry(w->eng);
    if (m->opens_at > now && m->opens_at < next) next = m->opens_at;
    if (m->closes_at > now && m->closes_at < next) next = m->closes_at;
    batch__set_state(w, W_IDLE);
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
int batch__lease_check(batch_worker *w, const char *step)
{
    if (batch_lease_valid(&w->lease)) return 0;
    batch_lease_drop(&w->lease);
    batch__fail(w, step, "the lease is not valid any more");
    return -ETIMEDOUT;
}

static void acquire_start(batch_worker *w)
{
    if (batch_lease_valid(&w->lease)) { batch__load_start(w); return; }
    batch__set_state(w, W_ACQUIRING);
    if (batch_lease_acquire(&w->lease) < 0) batch__set_state(w, W_CONNECTING); /* on_ready retries */
}

static void on_lease_acquired(batch_lease *l, void *data)
{
    batch_worker *w = data;
    if (w->state != W_ACQUIRING) return;
    log_notice("batch %s: lease acquired (epoch %s)", w->batch, l->epoch);
    w->lease_wait = 0;
    w->lease_holder_seen[0] = '\0';
    if (w->stopping) { batch__finish(w); return; }
    batch__load_start(w);
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
    batch__set_state(w, W_BACKOFF);
    w->lease_wait = 1;
    uv_timer_start(&w->timer, on_timer_backoff, delay, 0);
}

static void on_lease_lost(batch_lease *l, const char *why, void *data)
{
    batch_worker *w = data;
    if (w->state == W_ACQUIRING) batch__set_state(w, W_LOADING); /* let batch__fail() back off */
    batch__fail(w, "lease", why);
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
void batch__finish(batch_worker *w)
{
    if (w->state == W_RELEASING || w->state == W_CLOSING) return;
    uv_timer_stop(&w->timer);
    batch__set_state(w, W_RELEASING);
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
        return w->wait_ctl_pending && (w->wait_queue_pending || !batch__take_queue_now(w, clock_wall_ms()));
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
    batch__finish(w);
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
    batch__fail(w, "redis", "the master moved (Sentinel)");
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
    /* the WATCH is kept while idle or paused too, and the read it asks
     * for is made then: not at the next request */
    profiles_watch_tick(&w->profiles_watch, now);
    if (w->eng && w->profiles.watch_from) batch__profiles_refresh(w, now);
    if (oldest > bound && answer_watch_idle_ms(aw, now) > bound && w->eng &&
        batch__take_queue_now(w, clock_wall_ms()))
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
        batch__set_state(w, W_CONNECTING);
    }
}

static void on_wait_ready(redis_conn *c, void *data)
{
    batch_worker *w = data;
    if (w->state == W_IDLE) issue_waits(w);
}

static void on_handle_closed(batch_worker *w)
{
    ALLOC_ASSERT(w->handles_open > 0);
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
    argbuf_free(&w->effect);
    argbuf_free(&w->staged);
    argbuf_free(&w->loaded_free);
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
    batch__set_state(w, W_CLOSING);
    log_info("batch %s: stopped after %" PRIu64 " chunks", w->batch, w->stats.chunks);
    uv_timer_stop(&w->timer);
    w->handles_open = 8 + w->orders.outstanding;
    batch_lease_close(&w->lease, on_lease_closed);
    batch_watch_close(&w->watch, on_watch_closed);
    redis_conn_close(w->cmd, on_conn_closed, w);
    redis_conn_close(w->reads, on_conn_closed, w);
    redis_conn_close(w->wait_queue, on_conn_closed, w);
    redis_conn_close(w->wait_ctl, on_conn_closed, w);
    redis_conn_close(w->watch_conn, on_conn_closed, w);
    uv_close((uv_handle_t *)&w->timer, on_timer_closed);
}

void batch_worker_stop(batch_worker *w)
{
    w->stopping = 1;
    switch (w->state) {
    case W_CONNECTING: case W_ACQUIRING: case W_LOADING: case W_IDLE: case W_BACKOFF:
        batch__finish(w);
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
    const redis_conn *conns[] = { w->cmd, w->reads, w->wait_queue, w->wait_ctl, w->watch_conn };
    w->stats.reconnects = 0;
    for (size_t i = 0; i < sizeof conns / sizeof conns[0]; i++)
        if (conns[i]) w->stats.reconnects += redis_conn_get_stats(conns[i])->failures;
    w->stats.oldest_unanswered_seconds =
        (double)answer_watch_oldest_ms(&w->watch.aw, clock_mono_ms()) / 1000.0;
    return &w->stats;
}

int batch_worker_gave_up(const batch_worker *w) { return w->gave_up; }

/* The profiles' watch answered: the read it asks for begins, and a take
 * held for it may go. */
static void on_profiles_news(void *data)
{
    batch_worker *w = data;
    if (w->load_after_watch && w->state == W_LOADING && !w->stopping) { batch__load_start(w); return; }
    if (w->stopping || !w->eng) return;
    batch__profiles_refresh(w, clock_mono_ms());   /* a read it asks for, at once */
    if (w->state == W_SERVING) batch__take_start(w);
}

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
    argbuf_init(&w->effect);
    argbuf_init(&w->staged);
    argbuf_init(&w->loaded_free);
    dedup_init(&w->dedup, random_u64());
    slots_scan_init(&w->slots);
    profiles_report_init(&w->profiles_report);
    slots_scan_target pt = profiles_target(&w->profiles_report);
    slots_scan_init_target(&w->profiles, &pt);
    w->written_phase = (engine_phase)-1;
    w->fault_apply_id = getenv("ALLOCD_FAULT_APPLY_ID");
    batch__set_state(w, W_CONNECTING);
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    static const redis_conn_callbacks cmd_cb = { on_cmd_ready, on_cmd_down };
    static const redis_conn_callbacks wait_cb = { on_wait_ready, NULL };
    static const redis_conn_callbacks reads_cb = { NULL, NULL };
    static const redis_conn_callbacks watch_conn_cb = { on_watch_conn_ready, NULL };
    if (open_conn(w, &w->cmd, "cmd", &cmd_cb) < 0 ||
        open_conn(w, &w->reads, "reads", &reads_cb) < 0 ||
        open_conn(w, &w->wait_queue, "wait-queue", &wait_cb) < 0 ||
        open_conn(w, &w->wait_ctl, "wait-ctl", &wait_cb) < 0 ||
        open_conn(w, &w->watch_conn, "profiles-watch", &watch_conn_cb) < 0) {
        /* Unwind what was opened; the caller gets an error and no callback. */
        w->on_stopped = NULL;
        w->handles_open = 1;
        if (w->cmd) { w->handles_open++; redis_conn_close(w->cmd, on_conn_closed, w); }
        if (w->reads) { w->handles_open++; redis_conn_close(w->reads, on_conn_closed, w); }
        if (w->wait_queue) { w->handles_open++; redis_conn_close(w->wait_queue, on_conn_closed, w); }
        if (w->wait_ctl) { w->handles_open++; redis_conn_close(w->wait_ctl, on_conn_closed, w); }
        batch__set_state(w, W_CLOSING);
        uv_close((uv_handle_t *)&w->timer, on_timer_closed);
        return -ENOMEM;
    }
    batch_load_init(&w->load, w->cmd, cfg, scripts, &w->keys, w->batch, &w->dedup, &load_cb, w);
    w->load.profiles = &w->profiles_report;   /* read with the batch, then rescanned */
    profiles_watch_init(&w->profiles_watch, w->watch_conn, &w->profiles, w->keys.profiles, w->batch,
                        cfg->redis_timeout_ms, on_profiles_news, w);
    batch_watch_init(&w->watch, loop, &w->keys, cfg->answer_ms, cfg->redis_timeout_ms, &watch_cb, w);
    batch_lease_init(&w->lease, loop, w->cmd, scripts, &w->keys, cfg->lease_ttl_ms,
                     cfg->instance, &lease_cb, w);
    *out = w;
    log_info("batch %s: worker started", batch);
    return 0;
}
