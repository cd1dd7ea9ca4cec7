/* batch_worker.c -- the single writer of one batch (see batch_worker.h).
 *
 * The worker is a small state machine driven by Redis replies and timers:
 *
 *   CONNECTING --ready--> ACQUIRING --lease--> LOADING --> IDLE <--> TAKING
 *        ^                  | busy                           --> DEDUP (ORDERS) --> APPLYING
 *        +---- BACKOFF <----+---------- any failure, lease lost ---------------------+
 *
 * The worker serves only while it holds the batch lease (batch_lease.h);
 * every script it runs checks the lease token and epoch before writing.
 *
 * TAKING runs the take script (scripts.h): requests move from the queue to
 * the processing list and stats.dequeued advances in one step. DEDUP asks
 * which ids already have a result (resubmissions are not applied again).
 * The engine then decides the whole chunk in memory, and APPLYING writes
 * every effect with the apply script, which also deletes the processing
 * list. A crash anywhere before the apply leaves the chunk in the processing
 * list, and the next take hands it back; a crash after it leaves nothing to
 * redo. On any failure the engine is dropped and reloaded from Redis, which
 * is the only source of truth, so the engine never has to undo a decision.
 *
 * When a take comes back empty the worker is IDLE: it parks one BLMOVE on
 * the queue and one on ctl, each on its own connection. The BLMOVE moves the
 * list's last element onto the end of the same list -- a rotation that
 * leaves the list unchanged -- so waking up never takes a request off the
 * queue outside the take script (that would make `dequeued` lag behind the
 * queue and the position formula would be off by one).
 */
#include "batch_worker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "argbuf.h"
#include "batch_keys.h"
#include "batch_lease.h"
#include "codec.h"
#include "engine.h"
#include "jsonw.h"
#include "log.h"
#include "order_id.h"
#include "redis_conn.h"
#include "request.h"

typedef enum {
    W_CONNECTING, W_ACQUIRING, W_LOADING, W_IDLE, W_TAKING, W_DEDUP, W_ORDERS,
    W_APPLYING, W_BACKOFF, W_RELEASING, W_CLOSING
} worker_state;

enum {
    LOAD_META, LOAD_CAPACITY, LOAD_ATTRS, LOAD_HOLDERS, LOAD_ENDED,
    LOAD_PARTICIPANTS, LOAD_STATS, LOAD_INTERNAL, LOAD_STEPS
};

typedef struct load_step {
    batch_worker *w;
    int tag;
} load_step;


typedef enum {
    CHUNK_NONE = 0,      /* no requests: expiries, phase change, first write */
    CHUNK_QUEUE,         /* from P:{B}:processing */
    CHUNK_CTL,           /* from P:{B}:ctlprocessing */
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

/* One request of the chunk in flight. */
typedef struct chunk_item {
    request q;
    int64_t seq;
    int dup;
    char *raw;                /* copy of the bytes, only for dead entries */
    size_t raw_len;
} chunk_item;

struct batch_worker {
    uv_loop_t *loop;
    const allocd_config *cfg;
    const allocd_scripts *scripts;
    redis_router *router;
    redis_target target;      /* the node serving the batch's slot */
    char batch[BATCH_ID_MAX + 1];
    batch_keys keys;
    char order_key_name[BATCH_KEY_MAX + 16], order_counter_name[BATCH_KEY_MAX + 16];
    redis_conn *cmd, *wait_queue, *wait_ctl;
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
    int first_apply;          /* rewrite all of free and stats on the next apply */
    engine_phase written_phase;

    int lottery_done;
    lottery_pool pool;

    /* the chunk in flight */
    chunk_item *items;
    size_t n_items, cap_items;
    chunk_kind kind;
    long chunk_len;           /* requests decided (and consumed) in this step */
    long chunk_expected;      /* length of the processing list taken */
    int apply_failures;       /* consecutive failed applies (poison detection) */
    uint64_t taken_at, apply_sent_at;      /* uv_hrtime() of this chunk's steps */
    uint64_t chunk_status[ST_INVALID + 1]; /* counted into stats once applied */
    uint64_t chunk_rejects[R_GROUP_TOO_LARGE + 1];
    metrics_hist recent, recent_prev;      /* latency of the last ~10 s, for stats */
    uint64_t recent_started;
    char apply_error[160];
    argbuf args;
    int64_t chunk_at;

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

static void chunk_clear(batch_worker *w)
{
    for (size_t i = 0; i < w->n_items; i++) {
        request_clear(&w->items[i].q);
        free(w->items[i].raw);
    }
    w->n_items = 0;
    w->chunk_len = 0;
    w->chunk_expected = 0;
    w->kind = CHUNK_NONE;
}

static void pool_free(lottery_pool *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->raw[i]);
    free(p->raw);
    free(p->len);
    free(p->perm);
    memset(p, 0, sizeof *p);
}

static int chunk_reserve(batch_worker *w, size_t n)
{
    if (n <= w->cap_items) return 0;
    chunk_item *it = realloc(w->items, n * sizeof *it);
    if (!it) return -ENOMEM;
    w->items = it;
    w->cap_items = n;
    return 0;
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
    }
    chunk_clear(w);
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
            if (codec_load_attrs(w->eng, k, v, vlen, err, sizeof err) < 0)
                log_warn("batch %s: attrs: %s", w->batch, err);
            break;
        case LOAD_HOLDERS:
            if (codec_load_holder(w->eng, k, v, vlen, err, sizeof err) < 0)
                load_fail(w, "%s%s", err, "");
            break;
        case LOAD_ENDED:
            if (codec_load_ended(w->eng, k, v, vlen, err, sizeof err) < 0)
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
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        for (size_t j = 0; j < sizeof f / sizeof f[0]; j++)
            if (!strcmp(r->element[i]->str, f[j].name))
                parse_i64(r->element[i + 1]->str, f[j].dst);
    engine_load_counters(w->eng, &c);
}

static void load_internal(batch_worker *w, redisReply *r)
{
    w->lottery_done = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
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

/* Enough ids for two chunks of buys at least, so a refill is never needed
 * every chunk (it would cost a round trip each time). */
static uint64_t order_block_size(const batch_worker *w, uint64_t need)
{
    uint64_t n = ORDER_ID_BLOCK;
    if (n < 2 * (uint64_t)w->cfg->chunk) n = 2 * (uint64_t)w->cfg->chunk;
    return n > need ? n : need;
}

static int order_block_send(batch_worker *w, redis_reply_fn fn, uint64_t need)
{
    char block[24];
    snprintf(block, sizeof block, "%" PRIu64, need);
    const char *argv[] = { w->order_counter_name, w->order_key_name, w->order_key_hex, block };
    return redis_router_eval(w->router, w->order_counter_name, &w->scripts->order_block, fn, w,
                             w->cfg->redis_timeout_ms, 2, 4, argv, NULL);
}

static void load_finish(batch_worker *w);

static void on_load_orders(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (w->state != W_LOADING) return;
    const char *e = reply_error(r, err);
    if (e) load_fail(w, "order ids: %s%s", e, "");
    else if (take_order_block(w, r, order_block_size(w, 0)) < 0) load_fail(w, "order ids: unexpected reply%s%s", "", "");
    load_finish(w);
}

static void load_orders(batch_worker *w)
{
    if (w->load_failed) { load_finish(w); return; }
    if (order_block_send(w, on_load_orders, order_block_size(w, 0)) < 0) {
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
    rc |= redis_conn_command(w->cmd, on_load_reply, &w->steps[LOAD_PARTICIPANTS], to, "SMEMBERS %s", w->keys.participants);
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

static int parse_one(batch_worker *w, size_t i, const char *raw, size_t len, int64_t seq)
{
    chunk_item *it = &w->items[i];
    memset(it, 0, sizeof *it);
    request_parse(&it->q, raw, len, (size_t)w->cfg->max_request_bytes, w->kind == CHUNK_CTL);
    it->seq = seq;
    if (i == 0 && dead_lettering(w)) {
        request_clear(&it->q);
        it->q.outcome = REQUEST_DEAD;
        snprintf(it->q.error, sizeof it->q.error, "could not be applied after %d attempts: %s",
                 w->apply_failures, w->apply_error);
        log_err("batch %s: moving a request to %s: %s", w->batch, w->keys.dead, it->q.error);
    }
    w->n_items = i + 1;
    if (it->q.outcome == REQUEST_DEAD) {
        it->raw = malloc(len + 1);
        if (!it->raw) return -ENOMEM;
        memcpy(it->raw, raw, len);
        it->raw[len] = '\0';
        it->raw_len = len;
    }
    return 0;
}

static int parse_items(batch_worker *w, redisReply *list, size_t n, int64_t dequeued)
{
    if (chunk_reserve(w, n) < 0) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int64_t seq = w->kind == CHUNK_CTL ? 0 : dequeued - (int64_t)list->elements + (int64_t)i + 1;
        if (parse_one(w, i, list->element[i]->str, list->element[i]->len, seq) < 0) return -ENOMEM;
    }
    return 0;
}

static void dedup_start(batch_worker *w);
static void apply_start(batch_worker *w);
static void pool_chunk(batch_worker *w);

static int needs_empty_apply(batch_worker *w, int64_t now)
{
    return w->first_apply || engine_next_expiry(w->eng) <= now ||
           engine_phase_at(w->eng, now) != w->written_phase;
}

static void on_take_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (w->state != W_TAKING) return;
    const char *e = reply_error(r, err);
    if (e) { fail(w, "take", e); return; }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5 ||
        r->element[1]->type != REDIS_REPLY_ARRAY || r->element[2]->type != REDIS_REPLY_ARRAY) {
        fail(w, "take", "unexpected reply shape");
        return;
    }
    redisReply *ctl = r->element[1], *queue = r->element[2];
    int64_t dequeued = r->element[3]->integer;
    w->stats.queue_len = r->element[4]->integer;
    w->taken_at = uv_hrtime();
    if (!strcmp(r->element[0]->str, "leftover") && (ctl->elements || queue->elements))
        log_notice("batch %s: resuming %zu requests and %zu commands left in processing",
                   w->batch, queue->elements, ctl->elements);
    w->kind = ctl->elements ? CHUNK_CTL : queue->elements ? CHUNK_QUEUE : CHUNK_NONE;
    redisReply *list = w->kind == CHUNK_CTL ? ctl : queue;
    w->chunk_expected = (long)list->elements;
    w->chunk_len = isolating(w) && list->elements > 1 ? 1 : (long)list->elements;
    if (isolating(w) && list->elements)
        log_warn("batch %s: %d applies failed in a row (%s): deciding one request at a time",
                 w->batch, w->apply_failures, w->apply_error);
    if (list->elements == 0) {
        if (w->pool.active) { pool_chunk(w); return; }
        if (needs_empty_apply(w, wall_ms())) { apply_start(w); return; }
        if (w->stopping) { finish(w); return; }
        go_idle(w);
        return;
    }
    if (parse_items(w, list, (size_t)w->chunk_len, dequeued) < 0) { fail(w, "take", "out of memory"); return; }
    dedup_start(w);
}

static int lottery_due(const batch_worker *w, int64_t now)
{
    engine_phase ph = engine_phase_at(w->eng, now);
    return engine_get_meta(w->eng)->early == EARLY_SHUFFLE && !w->lottery_done &&
           !w->pool.active && (ph == PHASE_OPEN || ph == PHASE_CLOSED);
}

static void lottery_start(batch_worker *w);

static void take_start(batch_worker *w)
{
    int64_t now = wall_ms();
    if (lottery_due(w, now)) { lottery_start(w); return; }
    if (lease_check(w, "take") < 0) return;
    char chunk[16];
    snprintf(chunk, sizeof chunk, "%d", w->cfg->chunk);
    const char *argv[11] = {
        w->keys.ctl, w->keys.queue, w->keys.ctlprocessing, w->keys.processing, w->keys.stats,
        w->keys.lease, w->keys.internal, chunk,
        /* while the lottery pool is served, new requests wait behind it */
        !w->pool.active && take_queue_now(w, now) ? "1" : "0",
        w->lease.token, w->lease.epoch,
    };
    w->state = W_TAKING;
    chunk_clear(w);
    if (redis_conn_eval(w->cmd, &w->scripts->take, on_take_reply, w, w->cfg->redis_timeout_ms,
                        7, 11, argv, NULL) < 0)
        fail(w, "take", "Redis not connected");
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
    if (w->state != W_TAKING) return;
    const char *e = reply_error(r, err);
    if (e) { fail(w, "lottery", e); return; }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) { fail(w, "lottery", "unexpected reply"); return; }
    if (!strcmp(r->element[0]->str, "done")) {
        w->lottery_done = 1;
        take_start(w);
        return;
    }
    if (r->elements != 5 || r->element[4]->type != REDIS_REPLY_ARRAY) { fail(w, "lottery", "unexpected reply"); return; }
    uint64_t seed = strtoull(r->element[3]->str, NULL, 10);
    if (pool_load(&w->pool, r->element[4], r->element[1]->integer, (size_t)r->element[2]->integer, seed) < 0) {
        fail(w, "lottery", "out of memory");
        return;
    }
    log_notice("batch %s: opening lottery: %zu early requests, %zu already served",
               w->batch, w->pool.n, w->pool.served);
    take_start(w); /* admin commands first, then the pool */
}

static void lottery_start(batch_worker *w)
{
    if (lease_check(w, "lottery") < 0) return;
    char seed[24];
    snprintf(seed, sizeof seed, "%" PRIu64, random_u64());
    const char *argv[] = { w->keys.queue, w->keys.early, w->keys.stats, w->keys.internal,
                           w->keys.lease, seed, w->lease.token, w->lease.epoch };
    w->state = W_TAKING;
    chunk_clear(w);
    if (redis_conn_eval(w->cmd, &w->scripts->lottery, on_lottery_reply, w, w->cfg->redis_timeout_ms,
                        5, 8, argv, NULL) < 0)
        fail(w, "lottery", "Redis not connected");
}

/* The next `chunk` requests of the pool, in lottery order. */
static void pool_chunk(batch_worker *w)
{
    lottery_pool *p = &w->pool;
    size_t k = p->n - p->served;
    if (k > (size_t)w->cfg->chunk) k = (size_t)w->cfg->chunk;
    if (isolating(w) && k > 1) k = 1;
    w->kind = CHUNK_POOL;
    w->chunk_len = (long)k;
    if (chunk_reserve(w, k ? k : 1) < 0) { fail(w, "lottery", "out of memory"); return; }
    for (size_t j = 0; j < k; j++) {
        uint32_t idx = p->perm[p->served + j];
        if (parse_one(w, j, p->raw[idx], p->len[idx], p->base + idx + 1) < 0) {
            fail(w, "lottery", "out of memory");
            return;
        }
    }
    if (k == 0) apply_start(w); /* an empty pool: just record the end */
    else dedup_start(w);
}

/* --------------------------------------------------------------- dedup -- */

static int readable(const chunk_item *it)
{
    return it->q.outcome != REQUEST_DEAD;
}

static int cmp_ids(const void *a, const void *b, void *ctx)
{
    const chunk_item *items = ctx;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(items[i].q.r.id, items[j].q.r.id);
    return c ? c : (i < j ? -1 : i > j);
}

/* The same id twice in one chunk: only the first occurrence is decided. */
static int mark_dups_within_chunk(batch_worker *w)
{
    size_t *idx = malloc((w->n_items ? w->n_items : 1) * sizeof *idx), n = 0;
    if (!idx) return -ENOMEM;
    for (size_t i = 0; i < w->n_items; i++)
        if (readable(&w->items[i])) idx[n++] = i;
    qsort_r(idx, n, sizeof *idx, cmp_ids, w->items);
    for (size_t k = 1; k < n; k++)
        if (!strcmp(w->items[idx[k]].q.r.id, w->items[idx[k - 1]].q.r.id))
            w->items[idx[k]].dup = 1;
    free(idx);
    return 0;
}

static void orders_start(batch_worker *w);

static size_t buys_in_chunk(const batch_worker *w)
{
    size_t n = 0;
    for (size_t i = 0; i < w->n_items; i++)
        if (w->items[i].q.outcome == REQUEST_OK && !w->items[i].dup && w->items[i].q.r.op == OP_BUY) n++;
    return n;
}

static void after_dedup(batch_worker *w)
{
    if (mark_dups_within_chunk(w) < 0) { fail(w, "dedup", "out of memory"); return; }
    if (order_block_left(&w->orders) < buys_in_chunk(w)) orders_start(w);
    else apply_start(w);
}

static void on_dedup_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (w->state != W_DEDUP) return;
    const char *e = reply_error(r, err);
    if (e) { fail(w, "dedup", e); return; }
    size_t k = 0;
    for (size_t i = 0; i < w->n_items; i++) {
        if (!readable(&w->items[i])) continue;
        if (k < r->elements && r->element[k]->type != REDIS_REPLY_NIL) w->items[i].dup = 1;
        k++;
    }
    after_dedup(w);
}

static void dedup_start(batch_worker *w)
{
    argbuf *a = &w->args;
    args_reset(a);
    arg_str(a, "HMGET");
    arg_str(a, w->keys.results);
    for (size_t i = 0; i < w->n_items; i++)
        if (readable(&w->items[i])) arg_str(a, w->items[i].q.r.id);
    w->state = W_DEDUP;
    if (a->n == 2) { after_dedup(w); return; }
    if (args_failed(a)) { fail(w, "dedup", "out of memory"); return; }
    size_t len;
    const char *cmd = args_command(a, &len);
    if (redis_conn_command_resp(w->cmd, on_dedup_reply, w, w->cfg->redis_timeout_ms, cmd, len) < 0)
        fail(w, "dedup", "Redis not connected");
}

static void on_orders_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (w->state != W_ORDERS) return;
    const char *e = reply_error(r, err);
    if (e) { fail(w, "order id block", e); return; }
    if (take_order_block(w, r, order_block_size(w, buys_in_chunk(w))) < 0) {
        fail(w, "order id block", "unexpected reply");
        return;
    }
    apply_start(w);
}

static void orders_start(batch_worker *w)
{
    w->state = W_ORDERS;
    if (order_block_send(w, on_orders_reply, order_block_size(w, buys_in_chunk(w))) < 0)
        fail(w, "order id block", "Redis not connected");
}

/* --------------------------------------------------------------- apply -- */

static void count_result(batch_worker *w, engine_status st, engine_reason reason)
{
    if (st <= ST_INVALID) w->chunk_status[st]++;
    if (st == ST_REJECTED && reason <= R_GROUP_TOO_LARGE) w->chunk_rejects[reason]++;
}

static void decide_items(batch_worker *w, int64_t now)
{
    argbuf *a = &w->args;
    memset(w->chunk_status, 0, sizeof w->chunk_status);
    memset(w->chunk_rejects, 0, sizeof w->chunk_rejects);
    size_t count_at = arg_count_begin(a), count = 0;
    for (size_t i = 0; i < w->n_items; i++) {
        chunk_item *it = &w->items[i];
        /* Counters describe the queue (dequeued = processed + dead +
         * duplicates + in flight); admin commands are counted in `ctl`. */
        int counts = w->kind != CHUNK_CTL;
        if (it->q.outcome == REQUEST_DEAD) { if (counts) engine_note_dead(w->eng); continue; }
        if (it->dup) { if (counts) engine_note_duplicate(w->eng); continue; }
        arg_str(a, it->q.r.id);
        size_t start = arg_begin(a);
        if (it->q.outcome == REQUEST_INVALID) {
            if (counts) engine_note_invalid(w->eng, it->q.r.user, now);
            codec_invalid(&a->data, &it->q, it->seq, now);
            count_result(w, ST_INVALID, R_NONE);
        } else {
            engine_result res;
            it->q.r.seq = it->seq;
            engine_decide(w->eng, &it->q.r, now, &res);
            codec_result(&a->data, &it->q, &res, it->seq, now);
            count_result(w, res.status, res.reason);
        }
        arg_end(a, start);
        count++;
    }
    arg_count_end(a, count_at, count);
}

static int user_holds_something(const engine_user_view *v)
{
    return v->room != NULL || v->units > 0;
}

static void add_holders(batch_worker *w)
{
    argbuf *a = &w->args;
    size_t n = engine_dirty_user_count(w->eng), set = 0, del = 0;
    engine_user_view v;
    size_t at = arg_count_begin(a);
    for (size_t i = 0; i < n; i++) {
        engine_dirty_user_at(w->eng, i, &v);
        if (!user_holds_something(&v)) continue;
        arg_str(a, v.id);
        size_t start = arg_begin(a);
        codec_holder(&a->data, w->eng, &v);
        arg_end(a, start);
        set++;
    }
    arg_count_end(a, at, set);
    at = arg_count_begin(a);
    for (size_t i = 0; i < n; i++) {
        engine_dirty_user_at(w->eng, i, &v);
        if (user_holds_something(&v)) continue;
        arg_str(a, v.id);
        del++;
    }
    arg_count_end(a, at, del);
}

static void add_items(batch_worker *w)
{
    argbuf *a = &w->args;
    engine_item_view v;
    int cap_changed;
    size_t at = arg_count_begin(a), n = 0;
    if (w->first_apply) {
        for (size_t i = 0; i < engine_item_count(w->eng); i++, n++) {
            engine_item_view_at(w->eng, i, &v);
            arg_str(a, v.id);
            arg_int(a, v.free);
        }
    } else {
        for (size_t i = 0; i < engine_dirty_item_count(w->eng); i++, n++) {
            engine_dirty_item_at(w->eng, i, &v, &cap_changed);
            arg_str(a, v.id);
            arg_int(a, v.free);
        }
    }
    arg_count_end(a, at, n);
    at = arg_count_begin(a);
    n = 0;
    for (size_t i = 0; i < engine_dirty_item_count(w->eng); i++) {
        engine_dirty_item_at(w->eng, i, &v, &cap_changed);
        if (!cap_changed) continue;
        arg_str(a, v.id);
        arg_int(a, v.capacity);
        n++;
    }
    arg_count_end(a, at, n);
}

static void add_ended(batch_worker *w)
{
    argbuf *a = &w->args;
    size_t n = engine_ended_count(w->eng);
    size_t at = arg_count_begin(a);
    for (size_t i = 0; i < n; i++) {
        const char *user;
        engine_order o;
        engine_ended_at(w->eng, i, &user, &o);
        arg_u64(a, o.id);
        size_t start = arg_begin(a);
        codec_ended(&a->data, w->eng, user, &o);
        arg_end(a, start);
    }
    arg_count_end(a, at, n);
}

static const char *admin_state_name(engine_admin_state s)
{
    return s == ADMIN_PAUSED ? "paused" : s == ADMIN_CLOSED ? "closed" : "none";
}

static void add_internal_and_participants(batch_worker *w)
{
    argbuf *a = &w->args;
    size_t at = arg_count_begin(a), pairs = 0;
    if (w->kind == CHUNK_CTL || w->first_apply) {
        arg_str(a, "admin_state");
        arg_str(a, admin_state_name(engine_get_admin_state(w->eng)));
        pairs++;
    }
    if (w->kind == CHUNK_POOL) {
        size_t served = w->pool.served + (size_t)w->chunk_len;
        arg_str(a, "early_served");
        arg_int(a, (int64_t)served);
        pairs++;
        if (served == w->pool.n) { arg_str(a, "lottery_done"); arg_str(a, "1"); pairs++; }
    }
    arg_count_end(a, at, pairs);
    size_t n = engine_new_participant_count(w->eng);
    at = arg_count_begin(a);
    for (size_t i = 0; i < n; i++) arg_str(a, engine_new_participant_at(w->eng, i));
    arg_count_end(a, at, n);
}

static void add_dead(batch_worker *w, int64_t now)
{
    argbuf *a = &w->args;
    size_t at = arg_count_begin(a), n = 0;
    for (size_t i = 0; i < w->n_items; i++) {
        chunk_item *it = &w->items[i];
        if (it->q.outcome != REQUEST_DEAD) continue;
        size_t start = arg_begin(a);
        codec_dead(&a->data, it->raw, it->raw_len, it->q.error, now);
        arg_end(a, start);
        n++;
    }
    arg_count_end(a, at, n);
}

static void add_event(argbuf *a, const engine_event *ev)
{
    size_t at = arg_count_begin(a), fields = 7;
    arg_str(a, "type");  arg_str(a, engine_event_name(ev->type));
    arg_str(a, "user");  arg_str(a, ev->user ? ev->user : "");
    arg_str(a, "item");  arg_str(a, ev->item ? ev->item : "");
    arg_str(a, "qty");   arg_int(a, ev->qty);
    arg_str(a, "order");
    if (ev->order) arg_u64(a, ev->order); else arg_str(a, "");
    arg_str(a, "req");   arg_str(a, ev->req ? ev->req : "");
    arg_str(a, "at");    arg_int(a, ev->at);
    if (ev->expires_at) { arg_str(a, "expires_at"); arg_int(a, ev->expires_at); fields++; }
    if (ev->state) { arg_str(a, "state"); arg_str(a, ev->state); fields++; }
    arg_count_end(a, at, fields);
}

static void add_log(batch_worker *w)
{
    argbuf *a = &w->args;
    size_t n = engine_event_count(w->eng);
    size_t at = arg_count_begin(a);
    for (size_t i = 0; i < n; i++) add_event(a, engine_event_at(w->eng, i));
    arg_count_end(a, at, n);
}

/* Over the current and the previous 10 s window. */
static int64_t recent_quantile_us(const batch_worker *w, double q)
{
    metrics_hist h = w->recent;
    for (size_t i = 0; i <= METRICS_BUCKETS; i++) h.buckets[i] += w->recent_prev.buckets[i];
    h.count += w->recent_prev.count;
    return (int64_t)(metrics_hist_quantile(&h, q) * 1e6);
}

static void add_stats(batch_worker *w, int64_t now)
{
    argbuf *a = &w->args;
    const engine_counters *c = engine_get_counters(w->eng);
    engine_phase ph = engine_phase_at(w->eng, now);
    struct { const char *name; int64_t v; } f[] = {
        { "processed", c->processed }, { "granted", c->granted }, { "done", c->done },
        { "rejected", c->rejected }, { "invalid", c->invalid }, { "dead", c->dead },
        { "duplicates", c->duplicates }, { "ctl", c->ctl },
        { "participants", c->participants }, { "free_units", c->free_units },
        { "updated_at", now },
        { "decision_p50_us", recent_quantile_us(w, 0.50) },
        { "decision_p99_us", recent_quantile_us(w, 0.99) },
    };
    size_t n = sizeof f / sizeof f[0];
    size_t at = arg_count_begin(a);
    for (size_t i = 0; i < n; i++) { arg_str(a, f[i].name); arg_int(a, f[i].v); }
    arg_str(a, "state"); arg_str(a, engine_phase_name(ph));
    arg_str(a, "owner"); arg_str(a, w->cfg->instance);
    arg_count_end(a, at, n + 2);
    w->written_phase = ph;
}

/* A chunk is in Redis: its counts and latencies become real. The recent
 * latency window (for stats.decision_p50_us/p99_us) rotates every 10 s. */
static void note_applied(batch_worker *w)
{
    batch_worker_stats *st = &w->stats;
    uint64_t now = uv_hrtime();
    st->chunks++;
    st->requests += w->n_items;
    st->last_chunk = w->n_items;
    for (size_t i = 0; i <= ST_INVALID; i++) st->by_status[i] += w->chunk_status[i];
    for (size_t i = 0; i <= R_GROUP_TOO_LARGE; i++) st->rejects[i] += w->chunk_rejects[i];
    for (size_t i = 0; i < w->n_items; i++) {
        if (w->items[i].q.outcome == REQUEST_DEAD) st->dead++;
        else if (w->items[i].dup) st->duplicates++;
    }
    metrics_hist_observe(&st->apply, (double)(now - w->apply_sent_at) / 1e9);
    if (w->n_items && w->taken_at) {
        double lat = (double)(now - w->taken_at) / 1e9;
        metrics_hist_observe(&st->latency, lat);
        if (now - w->recent_started > 10ULL * 1000000000ULL) {
            w->recent_prev = w->recent;
            memset(&w->recent, 0, sizeof w->recent);
            w->recent_started = now;
        }
        metrics_hist_observe(&w->recent, lat);
    }
}

static void on_apply_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_worker *w = priv;
    if (w->state != W_APPLYING) return;
    const char *e = reply_error(r, err);
    if (e) { fail(w, "apply", e); return; }
    note_applied(w);
    if (w->kind == CHUNK_POOL) {
        w->pool.served += (size_t)w->chunk_len;
        if (w->pool.served == w->pool.n) {
            log_notice("batch %s: lottery served: %zu requests", w->batch, w->pool.n);
            pool_free(&w->pool);
            w->lottery_done = 1;
        }
    }
    engine_drain_clear(w->eng);
    chunk_clear(w);
    w->first_apply = 0;
    w->attempts = 0;
    /* while isolating, keep going one at a time through what is left */
    if (!(isolating(w) && w->chunk_expected > w->chunk_len)) w->apply_failures = 0;
    if (w->stopping) { finish(w); return; }
    take_start(w);
}

/* Fault injection for tests (as SQLite does it): with ALLOCD_FAULT_APPLY_ID
 * set, an apply containing that request id is sent with a malformed
 * argument, which the script rejects before its first write. */
static int chunk_has_fault(const batch_worker *w)
{
    if (!w->fault_apply_id) return 0;
    for (size_t i = 0; i < w->n_items; i++)
        if (w->items[i].q.r.id && !strcmp(w->items[i].q.r.id, w->fault_apply_id)) return 1;
    return 0;
}

static void apply_start(batch_worker *w)
{
    int64_t now = wall_ms();
    argbuf *a = &w->args;
    args_reset(a);
    w->orders.now_ms = now;
    const char *keys[APPLY_NKEYS] = {
        w->keys.results, w->keys.holders, w->keys.free, w->keys.stats, w->keys.log,
        w->keys.dead, w->keys.processing, w->keys.ctlprocessing, w->keys.participants,
        w->keys.capacity, w->keys.orders_ended, w->keys.internal, w->keys.early,
        w->keys.lease,
    };
    arg_int(a, APPLY_NKEYS);
    for (int i = 0; i < APPLY_NKEYS; i++) arg_str(a, keys[i]);
    arg_int(a, w->kind == CHUNK_QUEUE ? w->chunk_expected : -1);
    arg_int(a, w->kind == CHUNK_CTL ? w->chunk_expected : -1);
    arg_int(a, w->cfg->log_maxlen);
    int pool = w->kind == CHUNK_POOL;
    arg_int(a, pool ? (int64_t)w->pool.served : -1);
    arg_str(a, pool && w->pool.served + (size_t)w->chunk_len == w->pool.n ? "1" : "0");
    if (chunk_has_fault(w)) arg_str(a, "fault-injected");
    else arg_int(a, w->chunk_len);
    arg_str(a, w->lease.token);
    arg_str(a, w->lease.epoch);
    uint64_t t0 = uv_hrtime();
    engine_expire(w->eng, now);
    decide_items(w, now);
    metrics_hist_observe(&w->stats.decide, (double)(uv_hrtime() - t0) / 1e9);
    if (engine_error(w->eng)) { fail(w, "decide", "out of memory in the engine"); return; }
    add_holders(w);
    add_items(w);
    add_ended(w);
    add_internal_and_participants(w);
    add_dead(w, now);
    add_log(w);
    add_stats(w, now);
    if (lease_check(w, "apply") < 0) return;
    w->state = W_APPLYING;
    w->apply_sent_at = uv_hrtime();
    if (args_failed(a)) { fail(w, "apply", "out of memory"); return; }
    if (redis_conn_eval_resp(w->cmd, &w->scripts->apply, on_apply_reply, w, w->cfg->redis_timeout_ms,
                             (int)a->n, args_buf(a), ARGBUF_HEADROOM, args_tail_len(a)) < 0)
        fail(w, "apply", "Redis not connected");
}

/* ---------------------------------------------------------------- idle -- */

static void kick(batch_worker *w)
{
    if (w->state != W_IDLE) return;
    uv_timer_stop(&w->timer);
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
    chunk_clear(w);
    drop_engine(w);
    args_free(&w->args);
    free(w->items);
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
    w->handles_open = 5;
    batch_lease_close(&w->lease, on_lease_closed);
    redis_conn_close(w->cmd, on_conn_closed, w);
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
    const redis_conn *conns[] = { w->cmd, w->wait_queue, w->wait_ctl };
    w->stats.reconnects = 0;
    for (size_t i = 0; i < 3; i++)
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
    w->written_phase = (engine_phase)-1;
    w->fault_apply_id = getenv("ALLOCD_FAULT_APPLY_ID");
    w->state = W_CONNECTING;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    static const redis_conn_callbacks cmd_cb = { on_cmd_ready, on_cmd_down };
    static const redis_conn_callbacks wait_cb = { on_wait_ready, NULL };
    if (open_conn(w, &w->cmd, "cmd", &cmd_cb) < 0 ||
        open_conn(w, &w->wait_queue, "wait-queue", &wait_cb) < 0 ||
        open_conn(w, &w->wait_ctl, "wait-ctl", &wait_cb) < 0) {
        /* Unwind what was opened; the caller gets an error and no callback. */
        w->on_stopped = NULL;
        w->handles_open = 1;
        if (w->cmd) { w->handles_open++; redis_conn_close(w->cmd, on_conn_closed, w); }
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
