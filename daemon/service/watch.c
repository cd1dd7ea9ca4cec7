/* watch.c -- see watch.h. */
#include "service/watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "core/assert.h"
#include "redis/redis_router.h"
#include "service/watch_lottery.h"
#include "wire/log_entry.h"

#define TICK_MS       1000
#define DETAIL_MS     60000   /* how long a dashboard's interest lasts */
#define DETAIL_COUNT  "20"

struct watch {
    uv_loop_t *loop;
    const allocd_config *cfg;
    redis_router *conn;
    uv_timer_t timer;
    watch_batch **batches;
    size_t n, cap;
    json_t *instances;
    int list_pending;
    int stopping, open;       /* open: the timer and the connection */
    char batches_key[200], instances_key[200];
    redis_script snap, round;
    watch_meta_fn on_meta;
    void *meta_data;
};

/* One atomic read of a batch: a chunk applied between two separate reads
 * would make dequeued + queue length jump. Keys: stats meta queue ctl dead
 * lease capacity. */
static const char SNAP_SRC[] =
    "local cap = 0\n"
    "for _, v in ipairs(redis.call('HVALS', KEYS[7])) do cap = cap + (tonumber(v) or 0) end\n"
    "return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]),\n"
    "  redis.call('LLEN', KEYS[3]), redis.call('LLEN', KEYS[4]), redis.call('LLEN', KEYS[5]),\n"
    "  redis.call('GET', KEYS[6]) or '', redis.call('PTTL', KEYS[6]), cap}\n";

/* The parts of a round wanted, in one atomic read, so the beds taken
 * (capacity - free) and the holders agree. Keys: capacity attrs free
 * holders groups slots; ARGV[i] "1" reads KEYS[i], else its slot is nil. */
static const char ROUND_SRC[] =
    "local out = {}\n"
    "for i = 1, 6 do\n"
    "  if ARGV[i] == '1' then out[i] = redis.call('HGETALL', KEYS[i]) else out[i] = false end\n"
    "end\n"
    "return out\n";
#define ROUND_EVERY_MS 1900       /* every other tick */

static const int ROUND_PART_OF[6] = { WATCH_ROOMS, WATCH_ROOMS, WATCH_ROOMS, WATCH_HOLDERS,
                                      WATCH_PEOPLE, WATCH_PEOPLE };

/* ---- the pure part: history and the oldest queued age ---- */

static int64_t pushed_at(const watch_batch *b, int64_t ordinal)
{
    for (size_t i = 0; i < b->n_steps; i++)
        if (b->steps[i].pushed >= ordinal) return b->steps[i].at_ms;
    return -1;
}

/* Keeps the steps within WATCH_STEPS by merging neighbours; a merged step
 * keeps the later time, so an estimate can only get younger, never older
 * than the truth. */
static void steps_compact(watch_batch *b)
{
    size_t o = 0;
    for (size_t i = 0; i < b->n_steps; i += 2) {
        size_t k = i + 1 < b->n_steps ? i + 1 : i;
        b->steps[o++] = b->steps[k];
    }
    b->n_steps = o;
}

void watch_observe(watch_batch *b, int64_t now_ms, int64_t dequeued, int64_t queue_len)
{
    int64_t pushed = dequeued + queue_len;
    if (pushed < b->last_pushed || b->hist_n == 0) b->n_steps = 0; /* reset, or first look */
    /* drop the steps whose requests have all been taken */
    size_t drop = 0;
    while (drop < b->n_steps && b->steps[drop].pushed <= dequeued) drop++;
    memmove(b->steps, b->steps + drop, (b->n_steps - drop) * sizeof b->steps[0]);
    b->n_steps -= drop;
    if (queue_len > 0 && (b->n_steps == 0 || b->steps[b->n_steps - 1].pushed < pushed)) {
        if (b->n_steps == WATCH_STEPS) steps_compact(b);
        b->steps[b->n_steps].pushed = pushed;
        b->steps[b->n_steps].at_ms = now_ms;
        b->n_steps++;
    }
    b->last_pushed = pushed;
    int64_t at = queue_len > 0 ? pushed_at(b, dequeued + 1) : -1;
    b->oldest_age_ms = at >= 0 && now_ms > at ? now_ms - at : 0;
    ALLOC_ASSERT(b->n_steps <= WATCH_STEPS);
    size_t slot = (b->hist_head + b->hist_n) % WATCH_HISTORY;
    if (b->hist_n == WATCH_HISTORY) b->hist_head = (b->hist_head + 1) % WATCH_HISTORY;
    else b->hist_n++;
    b->hist[slot].at_ms = now_ms;
    b->hist[slot].dequeued = dequeued;
}

double watch_rate(const watch_batch *b, int seconds)
{
    if (b->hist_n < 2) return -1;
    const watch_sample *last = &b->hist[(b->hist_head + b->hist_n - 1) % WATCH_HISTORY];
    const watch_sample *first = NULL;
    for (size_t i = 0; i < b->hist_n; i++) {
        const watch_sample *s = &b->hist[(b->hist_head + i) % WATCH_HISTORY];
        if (last->at_ms - s->at_ms <= (int64_t)seconds * 1000) { first = s; break; }
    }
    if (!first || first == last || last->at_ms <= first->at_ms) return -1;
    int64_t d = last->dequeued - first->dequeued;
    return d < 0 ? -1 : (double)d * 1000.0 / (double)(last->at_ms - first->at_ms);
}

/* ---- Redis side ---- */

static json_t *pairs_object(const redisReply *r)
{
    json_t *o = json_object();
    if (!r || r->type != REDIS_REPLY_ARRAY) return o;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
            json_object_set_new(o, k->str, json_stringn(v->str, v->len));
    }
    return o;
}

static int64_t int_of(const redisReply *r)
{
    if (!r) return 0;
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type == REDIS_REPLY_STRING) return strtoll(r->str, NULL, 10);
    return 0;
}

static int64_t stat_int(const json_t *stats, const char *name)
{
    const char *v = json_string_value(json_object_get(stats, name));
    return v ? strtoll(v, NULL, 10) : 0;
}

static void batch_free(watch_batch *b)
{
    json_decref(b->stats);
    json_decref(b->meta);
    json_decref(b->dead_recent);
    json_decref(b->log_recent);
    json_t **round[] = { &b->capacity, &b->attrs, &b->free, &b->holders, &b->groups, &b->slots };
    for (size_t i = 0; i < sizeof round / sizeof round[0]; i++) json_decref(*round[i]);
    watch_lottery_free(b);
    free(b);
}

/* A reply for a batch that was dropped meanwhile still finds it: batches
 * are freed only when no command of theirs is pending. */
/* The names of the fields that differ between two metas, comma-separated. */
static void meta_diff(const json_t *old, const json_t *fresh, char *out, size_t len)
{
    const char *k;
    json_t *v;
    size_t o = 0;
    out[0] = '\0';
    json_object_foreach((json_t *)fresh, k, v)
        if (!json_equal(v, json_object_get(old, k)) && o < len)
            o += (size_t)snprintf(out + o, len - o, "%s%s", o ? ", " : "", k);
    json_object_foreach((json_t *)old, k, v)
        if (!json_object_get(fresh, k) && o < len)
            o += (size_t)snprintf(out + o, len - o, "%s%s (removed)", o ? ", " : "", k);
}

static void on_snapshot(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    b->pending--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 8) return;
    json_t *meta = pairs_object(rep->element[1]);
    watch *w = b->owner;
    if (b->meta && b->seen_ms && !json_equal(meta, b->meta) && w && w->on_meta && !w->stopping) {
        char fields[300];
        meta_diff(b->meta, meta, fields, sizeof fields);
        w->on_meta(b->id, fields, w->meta_data);
    }
    json_decref(b->stats);
    json_decref(b->meta);
    b->stats = pairs_object(rep->element[0]);
    b->meta = meta;
    b->queue_len = int_of(rep->element[2]);
    b->ctl_len = int_of(rep->element[3]);
    b->dead_len = int_of(rep->element[4]);
    const redisReply *lease = rep->element[5];
    const char *token = lease->type == REDIS_REPLY_STRING ? lease->str : "";
    /* a new holder, not the first sight nor a lease merely let go */
    if (*token && b->seen_ms && strncmp(token, b->lease, sizeof b->lease - 1)) b->lease_changes++;
    snprintf(b->lease, sizeof b->lease, "%s", token);
    b->lease_ttl_ms = int_of(rep->element[6]);
    b->capacity_units = int_of(rep->element[7]);
    b->seen_ms = clock_wall_ms();
    watch_observe(b, b->seen_ms, stat_int(b->stats, "dequeued"), b->queue_len);
}

static void on_dead(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    b->pending--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY) return;
    json_t *a = json_array();
    for (size_t i = rep->elements; i-- > 0;)   /* newest first */
        if (rep->element[i]->type == REDIS_REPLY_STRING)
            json_array_append_new(a, json_stringn(rep->element[i]->str, rep->element[i]->len));
    json_decref(b->dead_recent);
    b->dead_recent = a;
}

typedef struct log_events { json_t *events; const char *id; } log_events;

/* One event of an entry (wire/log_entry.h), with the entry's id. */
static int log_event_object(void *ud, const log_field *f, size_t n)
{
    log_events *le = ud;
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++) json_object_set_new(o, f[i].key, json_stringn(f[i].val, f[i].vlen));
    if (o) json_object_set_new(o, "id", json_string(le->id));
    return o && json_array_append_new(le->events, o) == 0 ? 0 : -2;
}

/* XREVRANGE: [[id, [field, value, ...]], ...] -> [{"id":..., field: value}],
 * one object per event, newest first: a chunk-format entry (contract 11.1)
 * is decoded into its events; an entry that does not decode is shown as
 * its fields. */
static void on_log(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    b->pending--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY) return;
    json_t *a = json_array();
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING ||
            e->element[1]->type != REDIS_REPLY_ARRAY)
            continue;
        const redisReply *kv = e->element[1];
        log_field f[2 * LOG_EVENT_MAX_FIELDS];
        size_t n = 0;
        for (size_t j = 0; j + 1 < kv->elements && n < sizeof f / sizeof *f; j += 2)
            f[n++] = (log_field){ kv->element[j]->str, kv->element[j + 1]->str, kv->element[j + 1]->len };
        log_events le = { json_array(), e->element[0]->str };
        char why[120];
        if (log_entry_decode(f, n, log_event_object, &le, why, sizeof why) < 0) {
            json_t *o = pairs_object(kv);
            json_object_set_new(o, "id", json_string(le.id));
            json_array_append_new(a, o);
        } else {
            for (size_t k = json_array_size(le.events); k-- > 0;)   /* newest first */
                json_array_append(a, json_array_get(le.events, k));
        }
        json_decref(le.events);
    }
    json_decref(b->log_recent);
    b->log_recent = a;
}

static void on_round(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    b->pending--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 6) return;
    json_t **round[] = { &b->capacity, &b->attrs, &b->free, &b->holders, &b->groups, &b->slots };
    int64_t now = clock_wall_ms();
    for (size_t i = 0; i < 6; i++) {
        if (rep->element[i]->type != REDIS_REPLY_ARRAY) continue;   /* not asked */
        json_decref(*round[i]);
        *round[i] = pairs_object(rep->element[i]);
        b->round_seen_ms[ROUND_PART_OF[i]] = now;
    }
}

static void poll_round(watch *w, watch_batch *b, int64_t now)
{
    const char *want[6];
    int any = 0;
    for (int p = 0; p < 3; p++) {
        if (b->round_until_ms[p] < now) b->round_seen_ms[p] = 0;   /* forgotten: stale */
        any |= b->round_until_ms[p] >= now && now - b->round_seen_ms[p] >= ROUND_EVERY_MS;
    }
    if (b->round_until_ms[WATCH_PEOPLE] >= now) watch_lottery_poll(w->conn, w->cfg, b, now);
    if (!any) return;
    for (int i = 0; i < 6; i++) want[i] = b->round_until_ms[ROUND_PART_OF[i]] >= now ? "1" : "0";
    char k[6][200];
    const char *names[6] = { "capacity", "attrs", "free", "holders", "groups", "slots" };
    const char *argv[12];
    for (int i = 0; i < 6; i++) {
        snprintf(k[i], sizeof k[i], "%s:{%s}:%s", w->cfg->prefix, b->id, names[i]);
        argv[i] = k[i];
        argv[6 + i] = want[i];
    }
    if (redis_router_eval(w->conn, k[0], &w->round, on_round, b, w->cfg->redis_timeout_ms, 6, 12, argv, NULL) == 0)
        b->pending++;
}

static void poll_batch(watch *w, watch_batch *b)
{
    if (b->pending) return;
    char k[7][200];
    const char *names[7] = { "stats", "meta", "queue", "ctl", "dead", "lease", "capacity" };
    const char *argv[7];
    for (int i = 0; i < 7; i++) {
        snprintf(k[i], sizeof k[i], "%s:{%s}:%s", w->cfg->prefix, b->id, names[i]);
        argv[i] = k[i];
    }
    int to = w->cfg->redis_timeout_ms;
    if (redis_router_eval(w->conn, k[0], &w->snap, on_snapshot, b, to, 7, 7, argv, NULL) == 0)
        b->pending++;
    poll_round(w, b, clock_wall_ms());
    if (b->detail_until_ms < clock_wall_ms()) return;
    const char *lrange[] = { "LRANGE", k[4], "-" DETAIL_COUNT, "-1" };
    if (redis_router_command(w->conn, k[4], on_dead, b, to, 4, lrange, NULL) == 0) b->pending++;
    char logkey[200];
    snprintf(logkey, sizeof logkey, "%s:{%s}:log", w->cfg->prefix, b->id);
    const char *xrev[] = { "XREVRANGE", logkey, "+", "-", "COUNT", DETAIL_COUNT };
    if (redis_router_command(w->conn, logkey, on_log, b, to, 6, xrev, NULL) == 0) b->pending++;
}

static watch_batch *find_mut(const watch *w, const char *id)
{
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->batches[i]->id, id)) return w->batches[i];
    return NULL;
}

static void add_batch(watch *w, const char *id)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        watch_batch **nb = realloc(w->batches, cap * sizeof *nb);
        if (!nb) return;
        w->batches = nb;
        w->cap = cap;
    }
    watch_batch *b = calloc(1, sizeof *b);
    if (!b) return;
    snprintf(b->id, sizeof b->id, "%s", id);
    b->listed = 1;
    b->owner = w;
    w->batches[w->n++] = b;
}

static int cmp_batch(const void *a, const void *b)
{
    return strcmp((*(watch_batch *const *)a)->id, (*(watch_batch *const *)b)->id);
}

static void on_list(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch *w = data;
    w->list_pending = 0;
    if (w->stopping || err || !rep || rep->type != REDIS_REPLY_ARRAY) return;
    for (size_t i = 0; i < w->n; i++) w->batches[i]->listed = 0;
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > 64) continue;
        watch_batch *b = find_mut(w, e->str);
        if (b) b->listed = 1;
        else add_batch(w, e->str);
    }
    size_t o = 0;
    for (size_t i = 0; i < w->n; i++) {
        watch_batch *b = w->batches[i];
        if (!b->listed && !b->pending && !watch_lottery_busy(b)) batch_free(b);
        else w->batches[o++] = b;
    }
    w->n = o;
    if (w->n > 1) qsort(w->batches, w->n, sizeof *w->batches, cmp_batch);
    for (size_t i = 0; i < w->n; i++)
        if (w->batches[i]->listed) poll_batch(w, w->batches[i]);
}

static void on_instances(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch *w = data;
    if (w->stopping || err || !rep || rep->type != REDIS_REPLY_ARRAY) return;
    json_t *o = json_object();
    for (size_t i = 0; i + 1 < rep->elements; i += 2) {
        json_error_t e;
        json_t *hb = json_loadb(rep->element[i + 1]->str, rep->element[i + 1]->len, 0, &e);
        if (hb && json_is_object(hb)) json_object_set_new(o, rep->element[i]->str, hb);
        else json_decref(hb);
    }
    json_decref(w->instances);
    w->instances = o;
}

static void on_tick(uv_timer_t *t)
{
    watch *w = t->data;
    if (w->stopping || w->list_pending || !redis_router_ready(w->conn)) return;
    int to = w->cfg->redis_timeout_ms;
    const char *hgetall[] = { "HGETALL", w->instances_key };
    const char *smembers[] = { "SMEMBERS", w->batches_key };
    redis_router_command(w->conn, w->instances_key, on_instances, w, to, 2, hgetall, NULL);
    if (redis_router_command(w->conn, w->batches_key, on_list, w, to, 2, smembers, NULL) == 0)
        w->list_pending = 1;
}

static void on_ready(redis_router *r, void *data) { on_tick(&((watch *)data)->timer); }

int watch_start(watch **out, uv_loop_t *loop, const allocd_config *cfg)
{
    watch *w = calloc(1, sizeof *w);
    if (!w) return -1;
    w->loop = loop;
    w->cfg = cfg;
    snprintf(w->batches_key, sizeof w->batches_key, "%s:batches", cfg->prefix);
    snprintf(w->instances_key, sizeof w->instances_key, "%s:instances", cfg->prefix);
    redis_script_init(&w->snap, SNAP_SRC);
    redis_script_init(&w->round, ROUND_SRC);
    char name[128];
    snprintf(name, sizeof name, "%s/watch", cfg->instance);
    if (redis_router_init(&w->conn, loop, cfg, name, on_ready, w) < 0) { free(w); return -1; }
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, on_tick, TICK_MS, TICK_MS);
    w->open = 2;
    *out = w;
    return 0;
}

static void finish(watch *w)
{
    if (--w->open > 0) return;
    for (size_t i = 0; i < w->n; i++) batch_free(w->batches[i]);
    free(w->batches);
    json_decref(w->instances);
    free(w);
}

static void on_conn_closed(void *data) { finish(data); }
static void on_timer_closed(uv_handle_t *h) { finish(h->data); }

/* The router gives every pending command its callback ("closed") before
 * on_conn_closed, so no reply outlives the batches. */
void watch_stop(watch *w)
{
    w->stopping = 1;
    uv_close((uv_handle_t *)&w->timer, on_timer_closed);
    redis_router_close(w->conn, on_conn_closed, w);
}

void watch_on_meta_change(watch *w, watch_meta_fn fn, void *data)
{
    w->on_meta = fn;
    w->meta_data = data;
}

size_t watch_count(const watch *w) { return w->n; }
const watch_batch *watch_get(const watch *w, size_t i) { return w->batches[i]; }
const watch_batch *watch_find(const watch *w, const char *batch) { return find_mut(w, batch); }
const json_t *watch_instances(const watch *w) { return w->instances; }
int watch_redis_ok(const watch *w) { return redis_router_ready(w->conn); }

void watch_want_detail(watch *w, const char *batch)
{
    watch_batch *b = find_mut(w, batch);
    if (b) b->detail_until_ms = clock_wall_ms() + DETAIL_MS;
}

void watch_want_round(watch *w, const char *batch, unsigned parts)
{
    watch_batch *b = find_mut(w, batch);
    for (int p = 0; b && p < 3; p++)
        if (parts & WATCH_PART(p)) b->round_until_ms[p] = clock_wall_ms() + DETAIL_MS;
}

int watch_round_ready(const watch_batch *b, unsigned parts)
{
    for (int p = 0; p < 3; p++)
        if ((parts & WATCH_PART(p)) && !b->round_seen_ms[p]) return 0;
    return 1;
}
