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
 * LTRIMs the chunk off the queue with stats.dequeued. Up to MAX_CHUNKS are
 * in flight, so Redis applies one while the engine decides the next. A
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
 */
#include "worker/batch_worker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "redis/argbuf.h"
#include "worker/batch_keys.h"
#include "worker/batch_lease.h"
#include "wire/records.h"
#include "wire/state_load.h"
#include "core/engine.h"
#include "core/idfilter.h"
#include "core/jsonw.h"
#include "base/log.h"
#include "core/order_id.h"
#include "redis/redis_conn.h"
#include "wire/request.h"
#include "core/strmap.h"

typedef enum {
    W_CONNECTING, W_ACQUIRING, W_LOADING, W_IDLE, W_SERVING, W_LOTTERY,
    W_BACKOFF, W_RELEASING, W_CLOSING
} worker_state;

enum {
    LOAD_META, LOAD_CAPACITY, LOAD_ATTRS, LOAD_HOLDERS, LOAD_ENDED,
    LOAD_UPGRADE, LOAD_PARTICIPANTS, LOAD_STATS, LOAD_INTERNAL, LOAD_STEPS
};

typedef struct load_step {
    batch_worker *w;
    int tag;
} load_step;


typedef enum {
    CHUNK_NONE = 0,      /* no requests: expiries, phase change, first write */
    CHUNK_QUEUE,         /* from the head of P:{B}:queue */
    CHUNK_CTL,           /* from the head of P:{B}:ctl */
    CHUNK_POOL           /* from the early=shuffle lottery pool */
} chunk_kind;

/* The early=shuffle lottery pool: every request queued before the opening,
 * served in the order of a permutation drawn from a seed kept in Redis, so a
 * restarted worker continues the same lottery where it stopped. */
typedef struct lottery_pool {
    int active;
    char **raw;
    size_t *len;
    uint32_t *perm;
    size_t n, served;
    int64_t base;             /* dequeued before the pool: seq = base + index + 1 */
} lottery_pool;

/* One request of a chunk. */
typedef struct chunk_item {
    request q;
    int64_t seq;
    int dup;
    int asked;                /* its id was in the dedup HMGET */
    uint64_t id_hash;         /* keyed hash of the id (dedup, idfilter) */
    char *raw;                /* copy of the bytes, only for dead entries */
    size_t raw_len;
} chunk_item;

/* A chunk goes TAKING -> DEDUP -> DEDUPED -> APPLYING -> DONE. Up to
 * MAX_CHUNKS are in flight at once, in queue order: while Redis applies
 * one, the next ones are read and deduplicated and the engine decides them.
 * A DONE chunk (its apply confirmed) is kept until no dedup is out: see
 * mark_dups_in_flight. */
typedef enum { CS_FREE = 0, CS_TAKING, CS_DEDUP, CS_DEDUPED, CS_APPLYING, CS_DONE } chunk_state;

#define MAX_CHUNKS 6

typedef struct chunk {
    chunk_state state;
    chunk_kind kind;
    chunk_item *items;
    size_t n_items, cap_items;
    long asked;               /* LRANGE count of the take */
    int asked_queue;          /* the take read the queue too, not only ctl */
    long queue_len, ctl_len;  /* entries this chunk removes from queue / ctl */
    size_t pool_len;          /* lottery pool requests in it */
    int64_t seq_base;         /* seq of its first queue entry, minus one */
    int dead_lettering;       /* its first request goes to dead (poison) */
    uint64_t taken_at, apply_sent_at;      /* uv_hrtime() of its steps */
    uint64_t status[ST_INVALID + 1];       /* counted into stats once applied */
    uint64_t rejects[R_GROUP_TOO_LARGE + 1];
} chunk;

/* A command in flight, as the privdata of its reply. `gen` is the worker's
 * generation when it was sent: fail() starts a new one, and a reply from an
 * older generation is dropped (its chunk was thrown away). */
enum { OP_TAKE, OP_DEDUP, OP_ORDERS, OP_APPLY, OP_SCAN, OP_LOAD_ORDERS };
#define MAX_OPS 64

typedef struct worker_op {
    batch_worker *w;
    chunk *ch;
    uint32_t gen, take_gen;
    int what;
    int busy;
} worker_op;

struct batch_worker {
    uv_loop_t *loop;
    const allocd_config *cfg;
    const allocd_scripts *scripts;
    redis_router *router;
    redis_target target;      /* the node serving the batch's slot */
    char batch[BATCH_ID_MAX + 1];
    batch_keys keys;
    char order_key_name[BATCH_KEY_MAX + 16], order_counter_name[BATCH_KEY_MAX + 16];
    char trip_key[BATCH_KEY_MAX + 160];    /* FENCE's trip key for our token (set at load) */
    redis_conn *cmd, *reads, *wait_queue, *wait_ctl;
    batch_lease lease;
    char lease_holder_seen[128]; /* logged once per holder while waiting */
    worker_state state;
    int stopping;
    int handles_open;
    batch_worker_stopped_fn on_stopped;
    void *data;
    uv_timer_t timer;

    /* loaded state */
    engine *eng;
    load_step steps[LOAD_STEPS];
    int load_failed;
    char load_err[256];
    char order_key_hex[40];
    order_block orders;
    int orders_outstanding;   /* order-id block requests not answered yet */
    int first_apply;          /* rewrite all of free and stats on the next apply */
    engine_phase written_phase;

    int lottery_done;
    lottery_pool pool;

    /* the pipeline: chunks in flight, oldest first */
    chunk chunks[MAX_CHUNKS];
    size_t c_head, c_n;
    worker_op ops[MAX_OPS];
    uint32_t gen;
    int takes_out;            /* takes not answered yet (read ahead: several) */
    uint32_t take_gen;        /* takes sent before a change are dropped */
    int dedups_out;           /* dedup HMGETs not answered yet */
    int64_t dequeued;         /* stats.dequeued once every apply sent is in */
    int64_t chunks_applied;   /* internal.chunks_applied, likewise */
    long queue_unsent, ctl_unsent; /* entries taken whose apply is not sent */
    strmap id_hasher;         /* only its SipHash key: hashes ids for dedup */
    idfilter answered;        /* every id with a result (idfilter.h) */
    struct dedup_slot { const chunk_item *it; uint32_t stamp; } *dedup;
    uint32_t dedup_mask, dedup_stamp;

    int apply_failures;       /* consecutive failed applies (poison detection) */
    long isolate_left;        /* requests to go one at a time before trusting chunks */
    metrics_hist recent, recent_prev;      /* latency of the last ~10 s, for stats */
    uint64_t recent_started;
    char apply_error[160];
    argbuf args;              /* the apply pipeline being built or waiting */
    argbuf reads_args;        /* a take or a dedup: built and sent at once */

    const char *fault_apply_id; /* ALLOCD_FAULT_APPLY_ID, for tests */

    int wait_queue_pending, wait_ctl_pending;
    int attempts;
    batch_worker_stats stats;
};

static void take_start(batch_worker *w);
static void go_idle(batch_worker *w);
static void load_start(batch_worker *w);
static void acquire_start(batch_worker *w);
static void finish(batch_worker *w);
static void close_all(batch_worker *w);
static int lease_check(batch_worker *w, const char *step);

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --------------------------------------------------------------- chunk -- */

static void chunk_free(chunk *ch)
{
    for (size_t i = 0; i < ch->n_items; i++) {
        request_clear(&ch->items[i].q);
        free(ch->items[i].raw);
    }
    chunk_item *items = ch->items;
    size_t cap = ch->cap_items;
    memset(ch, 0, sizeof *ch);
    ch->items = items;            /* the array is kept for the next chunk */
    ch->cap_items = cap;
}

static void pool_free(lottery_pool *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->raw[i]);
    free(p->raw);
    free(p->len);
    free(p->perm);
    memset(p, 0, sizeof *p);
}

static int chunk_reserve(chunk *ch, size_t n)
{
    if (n <= ch->cap_items) return 0;
    chunk_item *it = realloc(ch->items, n * sizeof *it);
    if (!it) return -ENOMEM;
    ch->items = it;
    ch->cap_items = n;
    return 0;
}

static chunk *chunk_at(batch_worker *w, size_t i)
{
    return &w->chunks[(w->c_head + i) % MAX_CHUNKS];
}

static chunk *chunk_newest(batch_worker *w)
{
    return w->c_n ? chunk_at(w, w->c_n - 1) : NULL;
}

static chunk *chunk_push(batch_worker *w, chunk_kind kind)
{
    if (w->c_n == MAX_CHUNKS) return NULL;
    chunk *ch = chunk_at(w, w->c_n++);
    chunk_free(ch);
    ch->kind = kind;
    return ch;
}

/* Drops the newest chunk (a take that came back empty). */
static void chunk_pop_newest(batch_worker *w)
{
    chunk_free(chunk_newest(w));
    w->c_n--;
}

/* Drops the oldest chunk (its apply is confirmed). */
static void chunk_pop_oldest(batch_worker *w)
{
    chunk_free(chunk_at(w, 0));
    w->c_head = (w->c_head + 1) % MAX_CHUNKS;
    w->c_n--;
}

/* Frees the DONE chunks at the head once no dedup is out. */
static void chunks_gc(batch_worker *w)
{
    while (w->c_n && chunk_at(w, 0)->state == CS_DONE && w->dedups_out == 0) chunk_pop_oldest(w);
}

static void chunks_drop_all(batch_worker *w)
{
    while (w->c_n) chunk_pop_oldest(w);
    w->c_head = 0;
    w->takes_out = 0;
    w->dedups_out = 0;
    w->queue_unsent = w->ctl_unsent = 0;
}

/* Chunks in flight, not counting the DONE ones kept for dedup. */
static size_t chunks_busy(batch_worker *w)
{
    size_t n = 0;
    for (size_t i = 0; i < w->c_n; i++) n += chunk_at(w, i)->state != CS_DONE;
    return n;
}

static long chunks_requests(batch_worker *w)
{
    long n = 0;
    for (size_t i = 0; i < w->c_n; i++) {
        chunk *ch = chunk_at(w, i);
        if (ch->state != CS_DONE) n += ch->queue_len + ch->ctl_len + (long)ch->pool_len;
    }
    return n;
}

/* ---------------------------------------------------------- operations -- */

static worker_op *op_new(batch_worker *w, int what, chunk *ch)
{
    for (size_t i = 0; i < MAX_OPS; i++) {
        worker_op *o = &w->ops[i];
        if (o->busy) continue;
        o->w = w;
        o->ch = ch;
        o->gen = w->gen;
        o->take_gen = w->take_gen;
        o->what = what;
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

/* -------------------------------------------------------------- failure -- */

static void drop_engine(batch_worker *w)
{
    if (w->eng) engine_free(w->eng);
    w->eng = NULL;
    w->stats.loaded = 0;
    pool_free(&w->pool);
}

/* Redis Cluster: when the batch's slot now lives on another node, point
 * all three connections there. Returns 1 when they were moved. */
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

/* Something went wrong mid-step: forget everything held in memory and load
 * again from Redis after a backoff (100 ms doubling up to 5 s). */
static void fail(batch_worker *w, const char *what, const char *why)
{
    if (w->state == W_CLOSING) return;
    log_warn("batch %s: %s failed: %s; reloading from Redis", w->batch, what, why);
    if (!strncmp(why, "MOVED", 5) || !strncmp(why, "ASK ", 4) || !strncmp(why, "CLUSTERDOWN", 11) ||
        !strncmp(why, "TRYAGAIN", 8))
        redis_router_refresh(w->router); /* the backoff then follows the slot */
    if (!strncmp(why, "FENCED", 6)) batch_lease_drop(&w->lease);
    else if (!strcmp(what, "apply")) {
        w->apply_failures++;
        snprintf(w->apply_error, sizeof w->apply_error, "%s", why);
        /* every request in flight is decided again; one at a time once
         * isolating, until they are all through */
        long n = chunks_requests(w);
        if (n > w->isolate_left) w->isolate_left = n;
    }
    w->gen++;                 /* replies still on their way are dropped */
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

static const char *reply_error(redisReply *r, const char *err)
{
    if (err) return err;
    if (!r) return "no reply";
    if (r->type == REDIS_REPLY_ERROR) return r->str;
    return NULL;
}

/* ---------------------------------------------------------------- load -- */

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

static int meta_field(engine_meta *m, const char *k, const char *v, char *err, size_t errlen)
{
    struct { const char *name; int64_t *dst; int64_t min; } ints[] = {
        { "opens_at", &m->opens_at, 0 }, { "closes_at", &m->closes_at, 0 },
        { "per_user", &m->per_user, 1 }, { "hold_ms", &m->hold_ms, 0 },
        { "max_group", &m->max_group, 1 }, { "rate_max", &m->rate_max, 0 },
        { "rate_window_ms", &m->rate_window_ms, 1 }, { "penalty_ms", &m->penalty_ms, 0 },
    };
    if (!strcmp(k, "kind")) {
        if (!strcmp(v, "stock")) m->kind = BATCH_STOCK;
        else if (!strcmp(v, "room")) m->kind = BATCH_ROOM;
        else { snprintf(err, errlen, "meta kind '%s' is neither stock nor room", v); return -1; }
        return 0;
    }
    if (!strcmp(k, "early")) {
        if (!strcmp(v, "reject")) m->early = EARLY_REJECT;
        else if (!strcmp(v, "shuffle")) m->early = EARLY_SHUFFLE;
        else { snprintf(err, errlen, "meta early '%s' is neither reject nor shuffle", v); return -1; }
        return 0;
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(k, ints[i].name)) continue;
        if (parse_i64(v, ints[i].dst) < 0 || *ints[i].dst < ints[i].min) {
            snprintf(err, errlen, "meta %s '%s' must be an integer >= %" PRId64, k, v, ints[i].min);
            return -1;
        }
        return 0;
    }
    return 0; /* unknown meta fields are the operator's own */
}

static void load_fail(batch_worker *w, const char *fmt, const char *a, const char *b)
{
    if (w->load_failed) return;
    w->load_failed = 1;
    snprintf(w->load_err, sizeof w->load_err, fmt, a, b);
}

static uint64_t random_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != sizeof v) v = (uint64_t)wall_ms() * 0x9e3779b97f4a7c15ULL;
    return v;
}

static void load_meta(batch_worker *w, redisReply *r)
{
    engine_meta m;
    engine_meta_defaults(&m);
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        load_fail(w, "%s is missing: the batch is not defined%s", w->keys.meta, "");
        return;
    }
    char err[200];
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (meta_field(&m, r->element[i]->str, r->element[i + 1]->str, err, sizeof err) < 0) {
            load_fail(w, "%s%s", err, "");
            return;
        }
    if (!m.kind) { load_fail(w, "%s has no kind (stock or room)%s", w->keys.meta, ""); return; }
    w->eng = engine_new(&m, random_u64());
    if (!w->eng) load_fail(w, "out of memory%s%s", "", "");
}

static void load_pairs(batch_worker *w, redisReply *r, int tag)
{
    if (r->type != REDIS_REPLY_ARRAY) { load_fail(w, "unexpected reply loading %s%s", w->batch, ""); return; }
    char err[256];
    for (size_t i = 0; i + 1 < r->elements && !w->load_failed; i += 2) {
        const char *k = r->element[i]->str, *v = r->element[i + 1]->str;
        size_t vlen = r->element[i + 1]->len;
        int64_t n;
        switch (tag) {
        case LOAD_CAPACITY:
            if (parse_i64(v, &n) < 0 || n < 0) load_fail(w, "capacity of '%s' is not a count: '%s'", k, v);
            else if (engine_load_item(w->eng, k, n) < 0) load_fail(w, "capacity item '%s' rejected%s", k, "");
            break;
        case LOAD_ATTRS:
            if (state_load_attrs(w->eng, k, v, vlen, err, sizeof err) < 0)
                log_warn("batch %s: attrs: %s", w->batch, err);
            break;
        case LOAD_HOLDERS:
            if (state_load_holder(w->eng, k, v, vlen, err, sizeof err) < 0)
                load_fail(w, "%s%s", err, "");
            break;
        case LOAD_ENDED:
            if (state_load_ended(w->eng, k, v, vlen, err, sizeof err) < 0)
                log_warn("batch %s: %s", w->batch, err);
            break;
        }
    }
}

static void load_stats(batch_worker *w, redisReply *r)
{
    engine_counters c;
    memset(&c, 0, sizeof c);
    struct { const char *name; int64_t *dst; } f[] = {
        { "processed", &c.processed }, { "granted", &c.granted }, { "done", &c.done },
        { "rejected", &c.rejected }, { "invalid", &c.invalid }, { "dead", &c.dead },
        { "duplicates", &c.duplicates }, { "ctl", &c.ctl },
    };
    w->dequeued = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        for (size_t j = 0; j < sizeof f / sizeof f[0]; j++)
            if (!strcmp(r->element[i]->str, f[j].name))
                parse_i64(r->element[i + 1]->str, f[j].dst);
        if (!strcmp(r->element[i]->str, "dequeued")) parse_i64(r->element[i + 1]->str, &w->dequeued);
    }
    engine_load_counters(w->eng, &c);
}

static void load_internal(batch_worker *w, redisReply *r)
{
    w->lottery_done = 0;
    w->chunks_applied = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        if (!strcmp(r->element[i]->str, "chunks_applied"))
            parse_i64(r->element[i + 1]->str, &w->chunks_applied);
        if (!strcmp(r->element[i]->str, "lottery_done"))
            w->lottery_done = !strcmp(r->element[i + 1]->str, "1");
        if (strcmp(r->element[i]->str, "admin_state")) continue;
        const char *v = r->element[i + 1]->str;
        engine_load_admin_state(w->eng, !strcmp(v, "paused") ? ADMIN_PAUSED
                                        : !strcmp(v, "closed") ? ADMIN_CLOSED : ADMIN_NONE);
    }
}

static void load_finish(batch_worker *w)
{
    if (w->load_failed) {
        w->state = W_LOADING; /* let fail() log and back off */
        fail(w, "loading", w->load_err);
        return;
    }
    engine_set_order_source(w->eng, order_block_mint, &w->orders);
    w->first_apply = 1;
    w->stats.loaded = 1;
    const engine_counters *c = engine_get_counters(w->eng);
    log_info("batch %s: loaded %zu items, %zu users, %" PRId64 " processed so far",
             w->batch, engine_item_count(w->eng), engine_user_count(w->eng), c->processed);
    w->state = W_SERVING;
    chunks_drop_all(w);
    take_start(w);
}

/* An order-id block: {key_hex, counter_after} from the order script, on
 * the global keys' own node. `need` values end at counter_after. */
static int take_order_block(batch_worker *w, redisReply *r, uint64_t need)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    w->orders.key = strtoull(r->element[0]->str, NULL, 16);
    w->orders.end = (uint64_t)r->element[1]->integer + 1;
    w->orders.next = w->orders.end - need;
    return 0;
}

/* Enough ids for sixteen chunks of buys at least: a refill stalls the
 * pipeline for a round trip, so it must be rare. Ids left in a block when
 * the worker stops are simply never used. */
static uint64_t order_block_size(const batch_worker *w, uint64_t need)
{
    uint64_t n = ORDER_ID_BLOCK;
    if (n < 16 * (uint64_t)w->cfg->chunk) n = 16 * (uint64_t)w->cfg->chunk;
    return n > need ? n : need;
}

/* On the router's connections, which outlive the worker: an answer still
 * due when the worker closes holds it open (orders_outstanding counts as a
 * handle in close_all). */
static int order_block_send(batch_worker *w, redis_reply_fn fn, void *priv, uint64_t need)
{
    char block[24];
    snprintf(block, sizeof block, "%" PRIu64, need);
    const char *argv[] = { w->order_counter_name, w->order_key_name, w->order_key_hex, block };
    int rc = redis_router_eval(w->router, w->order_counter_name, &w->scripts->order_block, fn, priv,
                               w->cfg->redis_timeout_ms, 2, 4, argv, NULL);
    if (rc == 0) w->orders_outstanding++;
    return rc;
}

static void load_finish(batch_worker *w);

static void on_handle_closed(batch_worker *w);

static worker_op *op_new(batch_worker *w, int what, chunk *ch);
static void on_op_reply(redis_conn *c, redisReply *r, const char *err, void *priv);

/* The last load step: every id that has a result goes into the idfilter,
 * with HSCAN so a big batch does not block Redis (no other writer runs:
 * the lease is ours, so the scan sees every field). */
static void load_answered(batch_worker *w, const char *cursor)
{
    const char *argv[] = { "HSCAN", w->keys.results, cursor, "COUNT", "2000" };
    worker_op *o = op_new(w, OP_SCAN, NULL);
    if (!o || redis_conn_commandargv(w->cmd, on_op_reply, o, w->cfg->redis_timeout_ms, 5, argv, NULL) < 0) {
        if (o) o->busy = 0;
        load_fail(w, "results: Redis not connected%s%s", "", "");
        load_finish(w);
    }
}

static void on_load_answered(batch_worker *w, redisReply *r, const char *err)
{
    const char *e = reply_error(r, err);
    if (e) { load_fail(w, "results: %s%s", e, ""); load_finish(w); return; }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
        load_fail(w, "results: unexpected reply to HSCAN%s%s", "", "");
        load_finish(w);
        return;
    }
    redisReply *kv = r->element[1];
    for (size_t i = 0; i + 1 < kv->elements; i += 2)
        if (idfilter_add(&w->answered, strmap_hash(&w->id_hasher, kv->element[i]->str, kv->element[i]->len)) < 0) {
            load_fail(w, "out of memory%s%s", "", "");
            load_finish(w);
            return;
        }
    if (strcmp(r->element[0]->str, "0")) load_answered(w, r->element[0]->str);
    else load_finish(w);
}

/* The order-id block of the load (OP_LOAD_ORDERS, current generation and
 * still loading: on_op_reply checks). */
static void on_load_orders(batch_worker *w, redisReply *r, const char *err)
{
    const char *e = reply_error(r, err);
    if (e) load_fail(w, "order ids: %s%s", e, "");
    else if (take_order_block(w, r, order_block_size(w, 0)) < 0) load_fail(w, "order ids: unexpected reply%s%s", "", "");
    if (w->load_failed) load_finish(w);
    else load_answered(w, "0");
}

static void load_orders(batch_worker *w)
{
    if (w->load_failed) { load_finish(w); return; }
    worker_op *o = op_new(w, OP_LOAD_ORDERS, NULL);
    if (!o || order_block_send(w, on_op_reply, o, order_block_size(w, 0)) < 0) {
        if (o) o->busy = 0;
        load_fail(w, "order ids: Redis not connected%s%s", "", "");
        load_finish(w);
    }
}

static void on_load_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    load_step *s = priv;
    batch_worker *w = s->w;
    if (w->state != W_LOADING) return;
    const char *e = reply_error(r, err);
    if (e) load_fail(w, "Redis: %s%s", e, "");
    else if (s->tag == LOAD_META) load_meta(w, r);
    else if (!w->load_failed) {
        switch (s->tag) {
        case LOAD_UPGRADE:
            if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) break;
            if (r->element[0]->integer)
                log_notice("batch %s: %s was a set (an older allocd): now a list", w->batch, w->keys.participants);
            if (r->element[1]->integer || r->element[2]->integer)
                log_notice("batch %s: %lld requests and %lld commands an older allocd left in processing "
                           "are back at the head of the queue", w->batch,
                           r->element[1]->integer, r->element[2]->integer);
            break;
        case LOAD_PARTICIPANTS:
            for (size_t i = 0; i < r->elements; i++) engine_load_participant(w->eng, r->element[i]->str);
            break;
        case LOAD_STATS: load_stats(w, r); break;
        case LOAD_INTERNAL: load_internal(w, r); break;
        default: load_pairs(w, r, s->tag);
        }
    }
    if (s->tag == LOAD_INTERNAL) load_orders(w);
}

static void load_start(batch_worker *w)
{
    drop_engine(w);
    idfilter_free(&w->answered);
    w->state = W_LOADING;
    w->load_failed = 0;
    w->load_err[0] = '\0';
    for (int i = 0; i < LOAD_STEPS; i++) { w->steps[i].w = w; w->steps[i].tag = i; }
    int to = w->cfg->redis_timeout_ms;
    int rc = 0;
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_META], to, "HGETALL %s", w->keys.meta);
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_CAPACITY], to, "HGETALL %s", w->keys.capacity);
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_ATTRS], to, "HGETALL %s", w->keys.attrs);
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_HOLDERS], to, "HGETALL %s", w->keys.holders);
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_ENDED], to, "HGETALL %s", w->keys.orders_ended);
    char processing[BATCH_KEY_MAX + 16], ctlprocessing[BATCH_KEY_MAX + 16];
    snprintf(processing, sizeof processing, "%s:{%s}:processing", w->cfg->prefix, w->batch);
    snprintf(ctlprocessing, sizeof ctlprocessing, "%s:{%s}:ctlprocessing", w->cfg->prefix, w->batch);
    snprintf(w->trip_key, sizeof w->trip_key, "%s:{%s}:trip:%s", w->cfg->prefix, w->batch, w->lease.token);
    const char *prep[] = { w->keys.participants, processing, w->keys.queue, w->keys.stats,
                           ctlprocessing, w->keys.ctl, w->trip_key };
    rc |= redis_conn_eval(w->cmd, &w->scripts->load_prepare, on_load_reply, &w->steps[LOAD_UPGRADE],
                          to, 7, 7, prep, NULL);
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_PARTICIPANTS], to, "LRANGE %s 0 -1", w->keys.participants);
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_STATS], to, "HGETALL %s", w->keys.stats);
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_INTERNAL], to, "HGETALL %s", w->keys.internal);
    /* A send that failed means the connection is down; the commands already
     * sent get their error callbacks, and on_ready starts a new load. */
    if (rc) {
        w->state = W_CONNECTING;
        drop_engine(w);
    }
}

/* ---------------------------------------------------------------- take -- */

static int take_queue_now(const batch_worker *w, int64_t now)
{
    const engine_meta *m = engine_get_meta(w->eng);
    switch (engine_phase_at(w->eng, now)) {
    case PHASE_OPEN:
    case PHASE_CLOSED:
        return 1;
    case PHASE_WAITING:
        /* early=shuffle keeps early requests queued until opens_at */
        return m->early == EARLY_REJECT;
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

static int parse_one(batch_worker *w, chunk *ch, const char *raw, size_t len, int64_t seq)
{
    chunk_item *it = &ch->items[ch->n_items];
    memset(it, 0, sizeof *it);
    request_parse(&it->q, raw, len, (size_t)w->cfg->max_request_bytes, ch->kind == CHUNK_CTL);
    it->seq = seq;
    if (ch->n_items == 0 && dead_lettering(w)) {
        request_clear(&it->q);
        it->q.outcome = REQUEST_DEAD;
        snprintf(it->q.error, sizeof it->q.error, "could not be applied after %d attempts: %s",
                 w->apply_failures, w->apply_error);
        log_err("batch %s: moving a request to %s: %s", w->batch, w->keys.dead, it->q.error);
        ch->dead_lettering = 1;
    }
    ch->n_items++;
    if (it->q.outcome == REQUEST_DEAD) {
        it->raw = malloc(len + 1);
        if (!it->raw) return -ENOMEM;
        memcpy(it->raw, raw, len);
        it->raw[len] = '\0';
        it->raw_len = len;
    }
    return 0;
}

static int parse_list(batch_worker *w, chunk *ch, redisReply *list)
{
    if (chunk_reserve(ch, list->elements) < 0) return -ENOMEM;
    for (size_t i = 0; i < list->elements; i++) {
        int64_t seq = ch->kind == CHUNK_CTL ? 0 : ch->seq_base + (int64_t)i + 1;
        if (parse_one(w, ch, list->element[i]->str, list->element[i]->len, seq) < 0) return -ENOMEM;
    }
    return 0;
}

static void dedup_start(batch_worker *w, chunk *ch);
static void advance(batch_worker *w);
static void pool_chunk(batch_worker *w);
static void lottery_start(batch_worker *w);

static int needs_empty_apply(batch_worker *w, int64_t now)
{
    return w->first_apply || engine_next_expiry(w->eng) <= now ||
           engine_phase_at(w->eng, now) != w->written_phase;
}

static int lottery_due(const batch_worker *w, int64_t now)
{
    engine_phase ph = engine_phase_at(w->eng, now);
    return engine_get_meta(w->eng)->early == EARLY_SHUFFLE && !w->lottery_done &&
           !w->pool.active && (ph == PHASE_OPEN || ph == PHASE_CLOSED);
}

/* Read ahead only behind a full chunk of queue requests: the queue goes on
 * past it, and nothing the chunk decides (an admin command, a lottery, a
 * poison request) can change what comes next. A take still out is assumed
 * to come back full; when it does not, the takes sent behind it are
 * dropped (take_voided). */
static int may_read_ahead(batch_worker *w)
{
    chunk *ch = chunk_newest(w);
    if (!ch || isolating(w) || w->pool.active) return 0;
    if (ch->state == CS_TAKING) return ch->asked_queue;
    return ch->kind == CHUNK_QUEUE && ch->queue_len == ch->asked;
}

/* Queue entries the takes still out will bring (assumed full). */
static long takes_out_queue(batch_worker *w)
{
    long n = 0;
    for (size_t i = 0; i < w->c_n; i++) {
        chunk *ch = chunk_at(w, i);
        if (ch->state == CS_TAKING && ch->asked_queue) n += ch->asked;
    }
    return n;
}

/* Chunk ch came back short (or not a queue chunk): the takes sent behind
 * it read from the wrong place. Their replies are dropped on arrival. */
static void take_voided(batch_worker *w, chunk *ch)
{
    while (chunk_newest(w) != ch) {
        chunk_pop_newest(w);
        w->takes_out--;
    }
    w->take_gen++;
}

static void on_op_reply(redis_conn *c, redisReply *r, const char *err, void *priv);

/* MULTI, LRANGE ctl, LRANGE queue (when asked), LLEN queue, EXEC: one
 * atomic read, so an admin command pushed before some requests is never
 * overtaken by them. */
static int send_take(batch_worker *w, chunk *ch, long from)
{
    argbuf *a = &w->reads_args;
    args_reset(a);
    args_cmd_begin(a);
    arg_str(a, "MULTI");
    args_cmd_end(a);
    args_cmd_begin(a);
    arg_str(a, "LRANGE"); arg_str(a, w->keys.ctl);
    arg_int(a, w->ctl_unsent); arg_int(a, w->ctl_unsent + ch->asked - 1);
    args_cmd_end(a);
    if (ch->asked_queue) {
        args_cmd_begin(a);
        arg_str(a, "LRANGE"); arg_str(a, w->keys.queue);
        arg_int(a, from); arg_int(a, from + ch->asked - 1);
        args_cmd_end(a);
    }
    args_cmd_begin(a);
    arg_str(a, "LLEN"); arg_str(a, w->keys.queue);
    args_cmd_end(a);
    args_cmd_begin(a);
    arg_str(a, "EXEC");
    args_cmd_end(a);
    if (args_failed(a)) return -ENOMEM;
    redis_slice cmds[5];
    size_t n = args_slices(a, cmds, 5);
    worker_op *o = op_new(w, OP_TAKE, ch);
    if (!o) return -ENOMEM;
    if (redis_conn_pipeline(w->cmd, on_op_reply, o, w->cfg->redis_timeout_ms, cmds, n) < 0) {
        o->busy = 0;
        return -ENOTCONN;
    }
    return 0;
}

/* Starts the next take if one is due: the heads of ctl and of the queue
 * past what is already in flight (LRANGE: nothing moves until the apply
 * LTRIMs it), and the queue's length. */
static void take_one(batch_worker *w);

static void take_start(batch_worker *w)
{
    size_t sent = 0;
    do {
        size_t before = w->c_n;
        take_one(w);
        if (w->c_n == before || w->state != W_SERVING) break;
    } while (++sent < MAX_CHUNKS);
}

static void take_one(batch_worker *w)
{
    if (w->state != W_SERVING || w->c_n == MAX_CHUNKS) return;
    if (w->stopping) {
        if (chunks_busy(w) == 0) finish(w);
        return;
    }
    if (chunks_busy(w) > 0 && !may_read_ahead(w)) return;
    int64_t now = wall_ms();
    if (chunks_busy(w) == 0 && lottery_due(w, now)) { lottery_start(w); return; }
    if (lease_check(w, "take") < 0) return;
    chunk *ch = chunk_push(w, CHUNK_NONE);
    ch->state = CS_TAKING;
    ch->asked = isolating(w) ? 1 : w->cfg->chunk;
    long from = w->queue_unsent + takes_out_queue(w);
    ch->seq_base = w->dequeued + from;
    /* while the lottery pool is served, new requests wait behind it */
    ch->asked_queue = !w->pool.active && take_queue_now(w, now);
    int rc = send_take(w, ch, from);
    if (rc) { fail(w, "take", rc == -ENOMEM ? "too many commands in flight" : "Redis not connected"); return; }
    w->takes_out++;
}

static void on_take_list(batch_worker *w, chunk *ch, chunk_kind kind, redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY) { fail(w, "take", "unexpected reply"); return; }
    if (!r->elements || ch->kind == CHUNK_CTL) return; /* admin commands go first */
    ch->kind = kind;
    if (ch->kind == CHUNK_CTL) ch->ctl_len = (long)r->elements;
    else ch->queue_len = (long)r->elements;
    if (parse_list(w, ch, r) < 0) fail(w, "take", "out of memory");
}

/* Nothing was taken and nothing is in flight: the lottery pool, an apply
 * with no requests (expiries, a phase change), or idle. */
static void nothing_taken(batch_worker *w)
{
    if (w->pool.active) { pool_chunk(w); return; }
    if (needs_empty_apply(w, wall_ms())) {
        chunk *ch = chunk_push(w, CHUNK_NONE);
        if (!ch) { fail(w, "apply", "no free chunk"); return; }
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
    if (!(ch->kind == CHUNK_QUEUE && ch->queue_len == ch->asked) && chunk_newest(w) != ch)
        take_voided(w, ch);
    ch->state = CS_DEDUP;
    if (ch->n_items == 0) {
        chunk_pop_newest(w);
        if (chunks_busy(w) == 0) nothing_taken(w);
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
    if (r->type != REDIS_REPLY_ARRAY || r->elements != want) { fail(w, "take", "unexpected reply"); return; }
    on_take_list(w, ch, CHUNK_CTL, r->element[0]);
    if (w->state == W_SERVING && ch->asked_queue) on_take_list(w, ch, CHUNK_QUEUE, r->element[1]);
    if (w->state == W_SERVING) on_take_end(w, ch, r->element[want - 1]);
}

/* ------------------------------------------------------------- lottery -- */

static int pool_load(lottery_pool *p, redisReply *items, int64_t base, size_t served, uint64_t seed)
{
    size_t n = items->elements;
    p->raw = calloc(n ? n : 1, sizeof *p->raw);
    p->len = calloc(n ? n : 1, sizeof *p->len);
    p->perm = calloc(n ? n : 1, sizeof *p->perm);
    if (!p->raw || !p->len || !p->perm) return -ENOMEM;
    p->n = n;
    for (size_t i = 0; i < n; i++) {
        p->raw[i] = malloc(items->element[i]->len + 1);
        if (!p->raw[i]) return -ENOMEM;
        memcpy(p->raw[i], items->element[i]->str, items->element[i]->len);
        p->len[i] = items->element[i]->len;
    }
    engine_shuffle(p->perm, n, seed);
    p->base = base;
    p->served = served > n ? n : served;
    p->active = 1;
    return 0;
}

static void on_lottery_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (w->state != W_LOTTERY) return;
    w->state = W_SERVING;
    const char *e = reply_error(r, err);
    if (e) { fail(w, "lottery", e); return; }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) { fail(w, "lottery", "unexpected reply"); return; }
    if (!strcmp(r->element[0]->str, "done")) {
        w->lottery_done = 1;
        take_start(w);
        return;
    }
    if (r->elements != 6 || r->element[4]->type != REDIS_REPLY_ARRAY) { fail(w, "lottery", "unexpected reply"); return; }
    uint64_t seed = strtoull(r->element[3]->str, NULL, 10);
    if (pool_load(&w->pool, r->element[4], r->element[1]->integer, (size_t)r->element[2]->integer, seed) < 0) {
        fail(w, "lottery", "out of memory");
        return;
    }
    w->dequeued = r->element[5]->integer;   /* the rename counted the pool */
    log_notice("batch %s: opening lottery: %zu early requests, %zu already served",
               w->batch, w->pool.n, w->pool.served);
    take_start(w); /* admin commands first, then the pool */
}

/* Runs only with nothing in flight, so the lottery's writes (the queue
 * renamed, dequeued advanced) come after every apply sent. */
static void lottery_start(batch_worker *w)
{
    if (lease_check(w, "lottery") < 0) return;
    char seed[24];
    snprintf(seed, sizeof seed, "%" PRIu64, random_u64());
    const char *argv[] = { w->keys.queue, w->keys.early, w->keys.stats, w->keys.internal,
                           w->keys.lease, seed, w->lease.token, w->lease.epoch };
    w->state = W_LOTTERY;
    if (redis_conn_eval(w->cmd, &w->scripts->lottery, on_lottery_reply, w, w->cfg->redis_timeout_ms,
                        5, 8, argv, NULL) < 0) {
        w->state = W_SERVING;
        fail(w, "lottery", "Redis not connected");
    }
}

/* The next `chunk` requests of the pool, in lottery order. */
static void pool_chunk(batch_worker *w)
{
    lottery_pool *p = &w->pool;
    size_t k = p->n - p->served;
    if (k > (size_t)w->cfg->chunk) k = (size_t)w->cfg->chunk;
    if (isolating(w) && k > 1) k = 1;
    chunk *ch = chunk_push(w, CHUNK_POOL);
    if (!ch) { fail(w, "lottery", "no free chunk"); return; }
    ch->pool_len = k;
    if (chunk_reserve(ch, k ? k : 1) < 0) { fail(w, "lottery", "out of memory"); return; }
    for (size_t j = 0; j < k; j++) {
        uint32_t idx = p->perm[p->served + j];
        if (parse_one(w, ch, p->raw[idx], p->len[idx], p->base + idx + 1) < 0) {
            fail(w, "lottery", "out of memory");
            return;
        }
    }
    ch->taken_at = uv_hrtime();
    if (k == 0) { ch->state = CS_DEDUPED; advance(w); } /* an empty pool: record the end */
    else dedup_start(w, ch);
}

/* --------------------------------------------------------------- dedup -- */

static int readable(const chunk_item *it)
{
    return it->q.outcome != REQUEST_DEAD;
}

/* An id seen earlier in flight -- in an older chunk whose result may not
 * have been in Redis when the HMGET ran, or earlier in this chunk -- makes
 * this occurrence a duplicate: the first one is decided.
 *
 * The HMGET goes on its own connection (`reads`), so that it never waits
 * behind an apply: that is what lets the engine decide the next chunk
 * while Redis applies the last one. On another connection it may run
 * before or after any apply still unconfirmed when it was sent; so every
 * chunk older than this one is checked here, and a chunk whose apply is
 * confirmed stays in the ring (DONE) until every dedup is answered.
 *
 * The ids of all chunks in flight go into an open-addressing table that is
 * rebuilt per chunk; each id's keyed hash is computed once (dedup_start),
 * and a stamp per slot spares clearing the table. */
static int dedup_table_fit(batch_worker *w, size_t n)
{
    size_t want = 64;
    while (want < 2 * n) want *= 2;
    if (w->dedup && want <= (size_t)w->dedup_mask + 1) return 0;
    struct dedup_slot *t = calloc(want, sizeof *t);
    if (!t) return -ENOMEM;
    free(w->dedup);
    w->dedup = t;
    w->dedup_mask = (uint32_t)(want - 1);
    w->dedup_stamp = 0;
    return 0;
}

/* 1 when the id was already in the table, else adds it. */
static int dedup_seen(batch_worker *w, const chunk_item *it)
{
    for (uint32_t i = (uint32_t)it->id_hash & w->dedup_mask;; i = (i + 1) & w->dedup_mask) {
        struct dedup_slot *s = &w->dedup[i];
        if (s->stamp != w->dedup_stamp) {
            s->it = it;
            s->stamp = w->dedup_stamp;
            return 0;
        }
        if (s->it->id_hash == it->id_hash && !strcmp(s->it->q.r.id, it->q.r.id)) return 1;
    }
}

static int mark_dups_in_flight(batch_worker *w, chunk *ch)
{
    size_t n = 0;
    for (size_t i = 0; i < w->c_n; i++) n += chunk_at(w, i)->n_items;
    if (dedup_table_fit(w, n) < 0) return -ENOMEM;
    if (++w->dedup_stamp == 0) {      /* wrapped: stamps could collide */
        memset(w->dedup, 0, ((size_t)w->dedup_mask + 1) * sizeof *w->dedup);
        w->dedup_stamp = 1;
    }
    for (size_t i = 0; i < w->c_n; i++) {
        chunk *o = chunk_at(w, i);
        for (size_t j = 0; j < o->n_items; j++) {
            chunk_item *it = &o->items[j];
            if (!readable(it)) continue;
            if (dedup_seen(w, it) && o == ch) it->dup = 1;
        }
        if (o == ch) break;
    }
    return 0;
}

static void on_dedup(batch_worker *w, chunk *ch, redisReply *r)
{
    w->dedups_out--;
    if (r->type != REDIS_REPLY_ARRAY) { fail(w, "dedup", "unexpected reply"); return; }
    size_t k = 0;
    for (size_t i = 0; i < ch->n_items; i++) {
        if (!ch->items[i].asked) continue;
        if (k < r->elements && r->element[k]->type != REDIS_REPLY_NIL) ch->items[i].dup = 1;
        k++;
    }
    if (mark_dups_in_flight(w, ch) < 0) { fail(w, "dedup", "out of memory"); return; }
    ch->state = CS_DEDUPED;
    chunks_gc(w);
    advance(w);
    take_start(w);          /* a DONE chunk may have freed a slot */
}

static void dedup_start(batch_worker *w, chunk *ch)
{
    argbuf *a = &w->reads_args;
    args_reset(a);
    arg_str(a, "HMGET");
    arg_str(a, w->keys.results);
    for (size_t i = 0; i < ch->n_items; i++) {
        chunk_item *it = &ch->items[i];
        if (!readable(it)) continue;
        it->id_hash = strmap_hash(&w->id_hasher, it->q.r.id, strlen(it->q.r.id));
        idfilter_prefetch(&w->answered, it->id_hash);
    }
    for (size_t i = 0; i < ch->n_items; i++) {
        chunk_item *it = &ch->items[i];
        /* never answered: no need to ask (ids answered by chunks still in
         * flight are caught in memory, mark_dups_in_flight) */
        if (!readable(it) || !idfilter_maybe(&w->answered, it->id_hash)) continue;
        it->asked = 1;
        arg_str(a, it->q.r.id);
    }
    ch->state = CS_DEDUP;
    if (a->n == 2) {
        if (mark_dups_in_flight(w, ch) < 0) { fail(w, "dedup", "out of memory"); return; }
        ch->state = CS_DEDUPED;
        advance(w);
        return;
    }
    if (args_failed(a)) { fail(w, "dedup", "out of memory"); return; }
    size_t len;
    const char *cmd = args_command(a, &len);
    worker_op *o = op_new(w, OP_DEDUP, ch);
    if (!o) { fail(w, "dedup", "too many commands in flight"); return; }
    /* while `reads` (re)connects, the command connection serves: there the
     * HMGET waits behind the applies, which is slower but just as correct */
    redis_conn *rc = redis_conn_is_ready(w->reads) ? w->reads : w->cmd;
    if (redis_conn_command_resp(rc, on_op_reply, o, w->cfg->redis_timeout_ms, cmd, len) < 0) {
        o->busy = 0;
        fail(w, "dedup", "Redis not connected");
        return;
    }
    w->dedups_out++;
}

/* ----------------------------------------------------------- order ids -- */

static size_t buys_in_chunk(const chunk *ch)
{
    size_t n = 0;
    for (size_t i = 0; i < ch->n_items; i++)
        if (ch->items[i].q.outcome == REQUEST_OK && !ch->items[i].dup && ch->items[i].q.r.op == OP_BUY) n++;
    return n;
}

static void on_orders(batch_worker *w, chunk *ch, redisReply *r)
{
    if (take_order_block(w, r, order_block_size(w, buys_in_chunk(ch))) < 0) {
        fail(w, "order id block", "unexpected reply");
        return;
    }
    advance(w);
}

/* ----------------------------------------------------------- decide -- */

static void count_result(chunk *ch, engine_status st, engine_reason reason)
{
    if (st <= ST_INVALID) ch->status[st]++;
    if (st == ST_REJECTED && reason <= R_GROUP_TOO_LARGE) ch->rejects[reason]++;
}

/* "HSET key" (or another command and key) opening a command of the apply;
 * cmd_close drops it again when no field followed. */
static void cmd_open(argbuf *a, const char *cmd, const char *key)
{
    args_cmd_begin(a);
    arg_str(a, cmd);
    arg_str(a, key);
}

static void cmd_close(argbuf *a)
{
    if (args_cmd_nargs(a) > 2) args_cmd_end(a);
    else args_cmd_cancel(a);
}

/* Decides every request of the chunk, writing the results as one HSET.
 * -ENOMEM when an answered id could not be remembered (the chunk must not
 * be applied: a later resubmission would not be asked about). */
static int decide_items(batch_worker *w, chunk *ch, int64_t now)
{
    argbuf *a = &w->args;
    int oom = 0;
    cmd_open(a, "HSET", w->keys.results);
    for (size_t i = 0; i < ch->n_items; i++) {
        chunk_item *it = &ch->items[i];
        /* Counters describe the queue (dequeued = processed + dead +
         * duplicates + in flight); admin commands are counted in `ctl`. */
        int counts = ch->kind != CHUNK_CTL;
        /* keep feeding the previous apply to Redis while this one is built */
        if ((i & 63) == 63) redis_conn_flush(w->cmd);
        if (it->q.outcome == REQUEST_DEAD) { if (counts) engine_note_dead(w->eng); continue; }
        if (it->dup) { if (counts) engine_note_duplicate(w->eng); continue; }
        if (idfilter_add(&w->answered, it->id_hash) < 0) oom = 1;
        arg_str(a, it->q.r.id);
        size_t start = arg_begin(a);
        if (it->q.outcome == REQUEST_INVALID) {
            if (counts) engine_note_invalid(w->eng, it->q.r.user, now);
            records_invalid(&a->data, &it->q, it->seq, now);
            count_result(ch, ST_INVALID, R_NONE);
        } else {
            engine_result res;
            it->q.r.seq = it->seq;
            engine_decide(w->eng, &it->q.r, now, &res);
            records_result(&a->data, &it->q, &res, it->seq, now);
            count_result(ch, res.status, res.reason);
        }
        arg_end(a, start);
    }
    cmd_close(a);
    return oom ? -ENOMEM : 0;
}

static int user_holds_something(const engine_user_view *v)
{
    return v->room != NULL || v->units > 0;
}

static void add_holders(batch_worker *w)
{
    argbuf *a = &w->args;
    size_t n = engine_dirty_user_count(w->eng);
    engine_user_view v;
    cmd_open(a, "HSET", w->keys.holders);
    for (size_t i = 0; i < n; i++) {
        engine_dirty_user_at(w->eng, i, &v);
        if (!user_holds_something(&v)) continue;
        arg_str(a, v.id);
        size_t start = arg_begin(a);
        records_holder(&a->data, w->eng, &v);
        arg_end(a, start);
    }
    cmd_close(a);
    cmd_open(a, "HDEL", w->keys.holders);
    for (size_t i = 0; i < n; i++) {
        engine_dirty_user_at(w->eng, i, &v);
        if (!user_holds_something(&v)) arg_str(a, v.id);
    }
    cmd_close(a);
}

static void add_items(batch_worker *w)
{
    argbuf *a = &w->args;
    engine_item_view v;
    int cap_changed;
    cmd_open(a, "HSET", w->keys.free);
    size_t n = w->first_apply ? engine_item_count(w->eng) : engine_dirty_item_count(w->eng);
    for (size_t i = 0; i < n; i++) {
        if (w->first_apply) engine_item_view_at(w->eng, i, &v);
        else engine_dirty_item_at(w->eng, i, &v, &cap_changed);
        arg_str(a, v.id);
        arg_int(a, v.free);
    }
    cmd_close(a);
    cmd_open(a, "HSET", w->keys.capacity);
    for (size_t i = 0; i < engine_dirty_item_count(w->eng); i++) {
        engine_dirty_item_at(w->eng, i, &v, &cap_changed);
        if (!cap_changed) continue;
        arg_str(a, v.id);
        arg_int(a, v.capacity);
    }
    cmd_close(a);
}

static void add_ended(batch_worker *w)
{
    argbuf *a = &w->args;
    size_t n = engine_ended_count(w->eng);
    cmd_open(a, "HSET", w->keys.orders_ended);
    for (size_t i = 0; i < n; i++) {
        const char *user;
        engine_order o;
        engine_ended_at(w->eng, i, &user, &o);
        arg_u64(a, o.id);
        size_t start = arg_begin(a);
        records_ended(&a->data, w->eng, user, &o);
        arg_end(a, start);
    }
    cmd_close(a);
}

static const char *admin_state_name(engine_admin_state s)
{
    return s == ADMIN_PAUSED ? "paused" : s == ADMIN_CLOSED ? "closed" : "none";
}

static void add_internal_and_participants(batch_worker *w, chunk *ch)
{
    argbuf *a = &w->args;
    cmd_open(a, "HSET", w->keys.internal);
    if (ch->kind == CHUNK_CTL || w->first_apply) {
        arg_str(a, "admin_state");
        arg_str(a, admin_state_name(engine_get_admin_state(w->eng)));
    }
    int pool_done = 0;
    if (ch->kind == CHUNK_POOL) {
        size_t served = w->pool.served + ch->pool_len;
        arg_str(a, "early_served");
        arg_int(a, (int64_t)served);
        if (served == w->pool.n) { arg_str(a, "lottery_done"); arg_str(a, "1"); pool_done = 1; }
    }
    cmd_close(a);
    if (pool_done) { cmd_open(a, "DEL", w->keys.early); args_cmd_end(a); }
    size_t n = engine_new_participant_count(w->eng);
    /* a list, not a set: every user is appended once (the engine knows who
     * is new), and appending costs Redis far less than a set insert */
    cmd_open(a, "RPUSH", w->keys.participants);
    for (size_t i = 0; i < n; i++) arg_str(a, engine_new_participant_at(w->eng, i));
    cmd_close(a);
}

static void add_dead(batch_worker *w, chunk *ch, int64_t now)
{
    argbuf *a = &w->args;
    cmd_open(a, "RPUSH", w->keys.dead);
    for (size_t i = 0; i < ch->n_items; i++) {
        chunk_item *it = &ch->items[i];
        if (it->q.outcome != REQUEST_DEAD) continue;
        size_t start = arg_begin(a);
        records_dead(&a->data, it->raw, it->raw_len, it->q.error, now);
        arg_end(a, start);
    }
    cmd_close(a);
}

/* One XADD per event: the contract wants one stream entry per change. */
static void add_event(batch_worker *w, const engine_event *ev)
{
    argbuf *a = &w->args;
    cmd_open(a, "XADD", w->keys.log);
    if (w->cfg->log_maxlen > 0) {
        arg_str(a, "MAXLEN");
        arg_str(a, "~");
        arg_int(a, w->cfg->log_maxlen);
    }
    arg_str(a, "*");
    arg_str(a, "type");  arg_str(a, engine_event_name(ev->type));
    arg_str(a, "user");  arg_str(a, ev->user ? ev->user : "");
    arg_str(a, "item");  arg_str(a, ev->item ? ev->item : "");
    arg_str(a, "qty");   arg_int(a, ev->qty);
    arg_str(a, "order");
    if (ev->order) arg_u64(a, ev->order); else arg_str(a, "");
    arg_str(a, "req");   arg_str(a, ev->req ? ev->req : "");
    arg_str(a, "at");    arg_int(a, ev->at);
    if (ev->expires_at) { arg_str(a, "expires_at"); arg_int(a, ev->expires_at); }
    if (ev->state) { arg_str(a, "state"); arg_str(a, ev->state); }
    args_cmd_end(a);
}

static void add_log(batch_worker *w)
{
    size_t n = engine_event_count(w->eng);
    for (size_t i = 0; i < n; i++) add_event(w, engine_event_at(w->eng, i));
}

/* Over the current and the previous 10 s window. */
static int64_t recent_quantile_us(const batch_worker *w, double q)
{
    metrics_hist h = w->recent;
    for (size_t i = 0; i <= METRICS_BUCKETS; i++) h.buckets[i] += w->recent_prev.buckets[i];
    h.count += w->recent_prev.count;
    return (int64_t)(metrics_hist_quantile(&h, q) * 1e6);
}

/* Takes the chunk's requests off the head of their list, and (for the
 * queue) advances dequeued in the same transaction: the position formula
 * of the contract needs both to move together. */
static void add_consume_and_stats(batch_worker *w, chunk *ch, int64_t now)
{
    argbuf *a = &w->args;
    if (ch->queue_len || ch->ctl_len) {
        cmd_open(a, "LTRIM", ch->queue_len ? w->keys.queue : w->keys.ctl);
        arg_int(a, ch->queue_len ? ch->queue_len : ch->ctl_len);
        arg_str(a, "-1");
        args_cmd_end(a);
    }
    const engine_counters *c = engine_get_counters(w->eng);
    engine_phase ph = engine_phase_at(w->eng, now);
    struct { const char *name; int64_t v; } f[] = {
        { "dequeued", w->dequeued + ch->queue_len },
        { "processed", c->processed }, { "granted", c->granted }, { "done", c->done },
        { "rejected", c->rejected }, { "invalid", c->invalid }, { "dead", c->dead },
        { "duplicates", c->duplicates }, { "ctl", c->ctl },
        { "participants", c->participants }, { "free_units", c->free_units },
        { "updated_at", now },
        { "decision_p50_us", recent_quantile_us(w, 0.50) },
        { "decision_p99_us", recent_quantile_us(w, 0.99) },
    };
    cmd_open(a, "HSET", w->keys.stats);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) { arg_str(a, f[i].name); arg_int(a, f[i].v); }
    arg_str(a, "state"); arg_str(a, engine_phase_name(ph));
    arg_str(a, "owner"); arg_str(a, w->cfg->instance);
    args_cmd_end(a);
    w->written_phase = ph;
}

/* Fault injection for tests (as SQLite does it): with ALLOCD_FAULT_APPLY_ID
 * set, an apply containing that request id has FENCE refuse it. */
static int chunk_has_fault(const batch_worker *w, const chunk *ch)
{
    if (!w->fault_apply_id) return 0;
    for (size_t i = 0; i < ch->n_items; i++)
        if (ch->items[i].q.r.id && !strcmp(ch->items[i].q.r.id, w->fault_apply_id)) return 1;
    return 0;
}

/* WATCH, FENCE (scripts.h), MULTI: the head of every apply pipeline. */
static void add_fence(batch_worker *w, chunk *ch)
{
    argbuf *a = &w->args;
    const char *keys[FENCE_NKEYS] = {
        [FENCE_KEY_LEASE] = w->keys.lease, [FENCE_KEY_INTERNAL] = w->keys.internal,
        [FENCE_KEY_TRIP] = w->trip_key, [FENCE_KEY_RESULTS] = w->keys.results,
        [FENCE_KEY_HOLDERS] = w->keys.holders, [FENCE_KEY_FREE] = w->keys.free,
        [FENCE_KEY_STATS] = w->keys.stats, [FENCE_KEY_LOG] = w->keys.log,
        [FENCE_KEY_DEAD] = w->keys.dead, [FENCE_KEY_PARTICIPANTS] = w->keys.participants,
        [FENCE_KEY_CAPACITY] = w->keys.capacity, [FENCE_KEY_ORDERS_ENDED] = w->keys.orders_ended,
        [FENCE_KEY_EARLY] = w->keys.early, [FENCE_KEY_QUEUE] = w->keys.queue,
        [FENCE_KEY_CTL] = w->keys.ctl,
    };
    args_cmd_begin(a);
    arg_str(a, "WATCH");
    for (int i = 0; i < FENCE_NWATCH; i++) arg_str(a, keys[i]);
    args_cmd_end(a);
    args_cmd_begin(a);
    arg_str(a, "EVAL");
    arg_str(a, w->scripts->fence.source);
    arg_int(a, FENCE_NKEYS);
    for (int i = 0; i < FENCE_NKEYS; i++) arg_str(a, keys[i]);
    arg_str(a, w->lease.token);
    arg_str(a, w->lease.epoch);
    arg_int(a, w->chunks_applied);
    arg_str(a, chunk_has_fault(w, ch) ? "1" : "0");
    args_cmd_end(a);
    args_cmd_begin(a);
    arg_str(a, "MULTI");
    args_cmd_end(a);
    /* A small first command, so that it reaches Redis in the same read as
     * FENCE as often as possible (scripts.h, BUSY). */
    args_cmd_begin(a);
    arg_str(a, "HSET");
    arg_str(a, w->keys.internal);
    arg_str(a, "chunks_applied");
    arg_int(a, w->chunks_applied + 1);
    args_cmd_end(a);
}

/* Decides the chunk and builds its apply pipeline in w->args; apply_send
 * sends it. */
static int apply_encode(batch_worker *w, chunk *ch)
{
    int64_t now = wall_ms();
    argbuf *a = &w->args;
    args_reset(a);
    w->orders.now_ms = now;
    add_fence(w, ch);
    uint64_t t0 = uv_hrtime();
    engine_expire(w->eng, now);
    int decided = decide_items(w, ch, now);
    metrics_hist_observe(&w->stats.decide, (double)(uv_hrtime() - t0) / 1e9);
    if (decided < 0 || engine_error(w->eng)) { fail(w, "decide", "out of memory in the engine"); return -1; }
    add_holders(w);
    add_items(w);
    add_ended(w);
    add_internal_and_participants(w, ch);
    add_dead(w, ch, now);
    add_log(w);
    add_consume_and_stats(w, ch, now);
    args_cmd_begin(a);
    arg_str(a, "EXEC");
    args_cmd_end(a);
    if (args_failed(a)) { fail(w, "apply", "out of memory"); return -1; }
    /* The next chunk builds on this one: the engine has moved on, and Redis
     * will have too once this transaction is in (FENCE refuses the next one
     * otherwise). */
    engine_drain_clear(w->eng);
    w->first_apply = 0;
    return 0;
}

/* Sends the pipeline apply_encode built. hiredis copies it, so w->args is
 * free again for the next chunk. */
static void apply_send(batch_worker *w, chunk *ch)
{
    if (lease_check(w, "apply") < 0) return;
    argbuf *a = &w->args;
    redis_slice stack[64], *cmds = a->ncmds <= 64 ? stack : malloc(a->ncmds * sizeof *cmds);
    if (!cmds) { fail(w, "apply", "out of memory"); return; }
    size_t n = args_slices(a, cmds, a->ncmds);
    worker_op *o = op_new(w, OP_APPLY, ch);
    int rc = o ? redis_conn_pipeline(w->cmd, on_op_reply, o, w->cfg->redis_timeout_ms, cmds, n) : -ENOMEM;
    if (cmds != stack) free(cmds);
    if (rc < 0) {
        if (o) o->busy = 0;
        fail(w, "apply", rc == -ENOTCONN ? "Redis not connected" : "out of memory");
        return;
    }
    redis_conn_flush(w->cmd);   /* Redis starts on it while the next is decided */
    ch->state = CS_APPLYING;
    ch->apply_sent_at = uv_hrtime();
    w->dequeued += ch->queue_len;
    w->queue_unsent -= ch->queue_len;
    w->ctl_unsent -= ch->ctl_len;
    w->chunks_applied++;
}

/* Decides the chunks that are ready, oldest first, and sends their applies
 * (pipelined: FENCE's chunks_applied check keeps them in order; scripts.h
 * has the one case it cannot cover). A chunk waits for the ones before it
 * and for an order-id block when its buys need one. */
static void advance(batch_worker *w)
{
    for (size_t i = 0; i < w->c_n && w->state == W_SERVING; i++) {
        chunk *ch = chunk_at(w, i);
        if (ch->state == CS_DONE || ch->state == CS_APPLYING) continue;
        if (ch->state != CS_DEDUPED) return;
        size_t buys = buys_in_chunk(ch);
        if (order_block_left(&w->orders) < buys) {
            if (w->orders_outstanding) return;
            worker_op *o = op_new(w, OP_ORDERS, ch);
            if (!o || order_block_send(w, on_op_reply, o, order_block_size(w, buys)) < 0) {
                if (o) o->busy = 0;
                fail(w, "order id block", o ? "Redis not connected" : "too many commands in flight");
            }
            return;
        }
        if (apply_encode(w, ch) < 0) return;
        apply_send(w, ch);
    }
}

/* ---------------------------------------------------------------- apply -- */

/* A chunk is in Redis: its counts and latencies become real. The recent
 * latency window (for stats.decision_p50_us/p99_us) rotates every 10 s. */
static void note_applied(batch_worker *w, chunk *ch)
{
    batch_worker_stats *st = &w->stats;
    uint64_t now = uv_hrtime();
    st->chunks++;
    st->requests += ch->n_items;
    st->last_chunk = ch->n_items;
    for (size_t i = 0; i <= ST_INVALID; i++) st->by_status[i] += ch->status[i];
    for (size_t i = 0; i <= R_GROUP_TOO_LARGE; i++) st->rejects[i] += ch->rejects[i];
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

static void on_applied(batch_worker *w, chunk *ch, redisReply *r)
{
    const char *e = exec_error(r);
    if (e) { fail(w, "apply", e); return; }
    size_t first = 0;
    while (first < w->c_n && chunk_at(w, first)->state == CS_DONE) first++;
    if (first == w->c_n || ch != chunk_at(w, first)) { fail(w, "apply", "replies out of order"); return; }
    note_applied(w, ch);
    if (ch->kind == CHUNK_POOL) {
        w->pool.served += ch->pool_len;
        if (w->pool.served == w->pool.n) {
            log_notice("batch %s: lottery served: %zu requests", w->batch, w->pool.n);
            pool_free(&w->pool);
            w->lottery_done = 1;
        }
    }
    w->attempts = 0;
    if (ch->dead_lettering) {
        w->apply_failures = 0;           /* the poison is gone */
        w->isolate_left = 0;
    } else if (isolating(w)) {
        /* one at a time through what was in flight when it failed */
        w->isolate_left -= (long)ch->n_items;
        if (w->isolate_left <= 0) { w->apply_failures = 0; w->isolate_left = 0; }
    } else {
        w->apply_failures = 0;
        w->isolate_left = 0;
    }
    ch->state = CS_DONE;
    chunks_gc(w);
    take_start(w);
}

static void on_op_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    worker_op *o = priv;
    batch_worker *w = o->w;
    int what = o->what;
    if (what == OP_ORDERS || what == OP_LOAD_ORDERS) {
        /* on the router's connections, which outlive the worker */
        w->orders_outstanding--;
        if (w->state == W_CLOSING) { o->busy = 0; on_handle_closed(w); return; }
        if (what == OP_LOAD_ORDERS && o->gen == w->gen && w->state == W_LOADING) {
            o->busy = 0;
            on_load_orders(w, r, err);
            return;
        }
        if (what == OP_LOAD_ORDERS || o->gen != w->gen) {
            /* a block asked for before a reload: a chunk of this generation
             * may be waiting for it to be out of the way */
            o->busy = 0;
            if (w->state == W_SERVING) advance(w);
            return;
        }
    }
    if (what == OP_SCAN) {
        o->busy = 0;
        if (o->gen == w->gen && w->state == W_LOADING) on_load_answered(w, r, err);
        return;
    }
    if (!op_current(o)) return;
    if (what == OP_TAKE && o->take_gen != w->take_gen) return;
    static const char *const names[] = { "take", "dedup", "order id block", "apply" };
    const char *e = reply_error(r, err);
    if (e) { fail(w, names[what], e); return; }
    switch (what) {
    case OP_TAKE: on_take(w, o->ch, r); break;
    case OP_DEDUP: on_dedup(w, o->ch, r); break;
    case OP_ORDERS: on_orders(w, o->ch, r); break;
    case OP_APPLY: on_applied(w, o->ch, r); break;
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

static void issue_waits(batch_worker *w);

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
    if (take_queue_now(w, wall_ms()))
        issue_wait(w, w->wait_queue, w->keys.queue, &w->wait_queue_pending);
}

/* Nothing to do: wait for a request, a command, an expiry or a phase change
 * (opens_at, closes_at), whichever comes first. */
static void go_idle(batch_worker *w)
{
    int64_t now = wall_ms();
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

/* ---------------------------------------------------------- lifecycle -- */

/* ---------------------------------------------------------------- lease -- */

/* Before every step that writes: our own clock must still vouch for the
 * lease (the scripts check it again in Redis). */
static int lease_check(batch_worker *w, const char *step)
{
    if (batch_lease_valid(&w->lease)) return 0;
    batch_lease_drop(&w->lease);
    fail(w, step, "the lease is not valid any more");
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
    uv_timer_start(&w->timer, on_timer_backoff, delay, 0);
}

static void on_lease_lost(batch_lease *l, const char *why, void *data)
{
    batch_worker *w = data;
    if (w->state == W_ACQUIRING) w->state = W_LOADING; /* let fail() back off */
    fail(w, "lease", why);
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
    for (size_t i = 0; i < MAX_CHUNKS; i++) {
        chunk_free(&w->chunks[i]);
        free(w->chunks[i].items);
    }
    drop_engine(w);
    idfilter_free(&w->answered);
    args_free(&w->args);
    args_free(&w->reads_args);
    free(w->dedup);
    /* The owner forgets w in the callback; nothing touches it afterwards. */
    if (w->on_stopped) w->on_stopped(w, w->data);
    free(w);
}

static void on_conn_closed(redis_conn *c, void *data) { on_handle_closed(data); }
static void on_timer_closed(uv_handle_t *h) { on_handle_closed(h->data); }
static void on_lease_closed(uv_handle_t *h) { on_handle_closed(((batch_lease *)h->data)->data); }

static void close_all(batch_worker *w)
{
    if (w->state == W_CLOSING) return;
    w->state = W_CLOSING;
    log_info("batch %s: stopped after %" PRIu64 " chunks", w->batch, w->stats.chunks);
    uv_timer_stop(&w->timer);
    w->handles_open = 6 + w->orders_outstanding;
    batch_lease_close(&w->lease, on_lease_closed);
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
    return &w->stats;
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
    /* one hash tag that no batch id can have (':' is not allowed in them) */
    snprintf(w->order_key_name, sizeof w->order_key_name, "%s:{allocd:orders}:key", cfg->prefix);
    snprintf(w->order_counter_name, sizeof w->order_counter_name, "%s:{allocd:orders}:counter", cfg->prefix);
    snprintf(w->order_key_hex, sizeof w->order_key_hex, "%016" PRIx64, random_u64());
    args_init(&w->args);
    args_init(&w->reads_args);
    strmap_init(&w->id_hasher, random_u64(), NULL, NULL);
    idfilter_init(&w->answered);
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
    batch_lease_init(&w->lease, loop, w->cmd, scripts, &w->keys, cfg->lease_ttl_ms,
                     cfg->instance, &lease_cb, w);
    *out = w;
    log_info("batch %s: worker started", batch);
    return 0;
}
