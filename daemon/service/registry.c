/* registry.c -- see registry.h. */
#include "service/registry.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/batch_keys.h"
#include "worker/batch_worker.h"
#include "core/jsonw.h"
#include <jansson.h>

#include "base/clock.h"
#include "base/log.h"
#include "service/giveups.h"
#include "service/metrics.h"
#include "redis/redis_conn.h"
#include "redis/redis_router.h"

typedef struct registry_entry {
    char batch[BATCH_ID_MAX + 1];
    batch_worker *worker;
    int stopping;
    int seen;                 /* in the latest SMEMBERS reply */
} registry_entry;

struct registry {
    uv_loop_t *loop;
    const allocd_config *cfg;
    const allocd_scripts *scripts;
    redis_router *conn;       /* routes each global key to its node */
    uv_timer_t timer;
    registry_entry *entries;
    size_t n, cap;
    char key[BATCH_KEY_MAX];
    char instances_key[BATCH_KEY_MAX], instance_key[BATCH_KEY_MAX + 80];
    int64_t started_at;
    int poll_pending;
    char **live;              /* instances with a fresh heartbeat (self included) */
    size_t n_live;
    int beat_pending;
    int farewell_sent;
    int stopping;
    int handles_open;
    registry_stopped_fn done;
    void *done_data;
    giveups giveups;          /* batches given up, ours and the live peers' */
};

static void maybe_finish(registry *r);

static void on_conn_closed_fwd(void *data);

static registry_entry *find(registry *r, const char *batch)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->entries[i].batch, batch)) return &r->entries[i];
    return NULL;
}

static void on_worker_stopped(batch_worker *w, void *data)
{
    registry *r = data;
    if (batch_worker_gave_up(w) && !r->stopping) {
        int64_t ms = giveups_add(&r->giveups, batch_worker_batch(w), clock_wall_ms(), r->cfg->answer_ms);
        log_err("registry: batch %s given up; other instances serve it for the next %" PRId64 " ms",
                batch_worker_batch(w), ms);
    }
    for (size_t i = 0; i < r->n; i++) {
        if (r->entries[i].worker != w) continue;
        r->entries[i] = r->entries[--r->n];
        break;
    }
    maybe_finish(r);
}

static void start_worker(registry *r, const char *batch)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        registry_entry *e = realloc(r->entries, cap * sizeof *e);
        if (!e) { log_err("registry: out of memory"); return; }
        r->entries = e;
        r->cap = cap;
    }
    registry_entry *e = &r->entries[r->n];
    memset(e, 0, sizeof *e);
    snprintf(e->batch, sizeof e->batch, "%s", batch);
    if (batch_worker_start(&e->worker, r->loop, r->cfg, r->scripts, r->conn, batch,
                           on_worker_stopped, r) < 0) {
        log_err("registry: cannot start a worker for batch %s", batch);
        return;
    }
    e->seen = 1;
    r->n++;
    log_notice("registry: serving batch %s", batch);
}

/* ---- placement ---- */

/* Rendezvous hashing: each batch goes to the live instance with the highest
 * score(instance, batch). Every instance computes the same answer from the
 * same membership, an instance joining or leaving moves only the batches it
 * wins or held, and no coordination is needed beyond the heartbeats. The
 * lease keeps it safe while views of the membership disagree. */
uint64_t registry_placement_score(const char *instance, const char *batch)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = instance; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    h = (h ^ 0xff) * 0x100000001b3ULL;
    for (const char *p = batch; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* Instances that gave the batch up (giveups.h) are passed over, unless
 * every one did. */
static int passed_over(const registry *r, const char *instance, const char *batch, int64_t now)
{
    return giveups_excluded(&r->giveups, r->cfg->instance, instance, batch, now);
}

static const char *owner_of(const registry *r, const char *batch)
{
    int64_t now = clock_wall_ms();
    int any_in = !passed_over(r, r->cfg->instance, batch, now);
    for (size_t i = 0; i < r->n_live && !any_in; i++) any_in = !passed_over(r, r->live[i], batch, now);
    const char *best = NULL;
    uint64_t best_score = 0;
    for (size_t i = 0; i <= r->n_live; i++) {
        const char *cand = i < r->n_live ? r->live[i] : r->cfg->instance;
        if (any_in && passed_over(r, cand, batch, now)) continue;
        uint64_t sc = registry_placement_score(cand, batch);
        if (!best || sc > best_score || (sc == best_score && strcmp(cand, best) < 0)) {
            best = cand;
            best_score = sc;
        }
    }
    return best;
}

static void live_clear(registry *r)
{
    for (size_t i = 0; i < r->n_live; i++) free(r->live[i]);
    free(r->live);
    r->live = NULL;
    r->n_live = 0;
}

/* A heartbeat is fresh for three of its intervals, and never less than 2 s,
 * so a short stall (a loaded host, a slow Redis) does not look like death. */
static int64_t liveness_ms(int64_t every)
{
    return 3 * every > 2000 ? 3 * every : 2000;
}

/* P:instances: a heartbeat is fresh when it is "running" and younger than
 * liveness_ms (clocks of the hosts are assumed to agree within a fraction
 * of that, as NTP keeps them). */
static void read_membership(registry *r, redisReply *rep)
{
    live_clear(r);
    giveups_peers_clear(&r->giveups);
    if (rep->type != REDIS_REPLY_ARRAY) return;
    r->live = calloc(rep->elements / 2 + 1, sizeof *r->live);
    if (!r->live) return;
    int64_t now = clock_wall_ms();
    for (size_t i = 0; i + 1 < rep->elements; i += 2) {
        json_error_t e;
        json_t *hb = json_loadb(rep->element[i + 1]->str, rep->element[i + 1]->len, 0, &e);
        const char *state = json_string_value(json_object_get(hb, "state"));
        json_int_t at = json_integer_value(json_object_get(hb, "heartbeat_at"));
        json_int_t every = json_integer_value(json_object_get(hb, "interval_ms"));
        if (every <= 0) every = r->cfg->registry_interval_ms;
        if (state && !strcmp(state, "running") && now - at <= liveness_ms(every)) {
            r->live[r->n_live++] = strdup(rep->element[i]->str);
            giveups_peer(&r->giveups, rep->element[i]->str, json_object_get(hb, "gave_up"),
                         now, liveness_ms(every));
        }
        json_decref(hb);
    }
}

static void stop_entry(registry_entry *e, const char *why)
{
    log_notice("registry: batch %s: %s, stopping its worker", e->batch, why);
    e->stopping = 1;
    batch_worker_stop(e->worker); /* on_worker_stopped comes later */
}

static void sync_batches(registry *r, redisReply *rep)
{
    for (size_t i = 0; i < r->n; i++) r->entries[i].seen = 0;
    for (size_t i = 0; i < rep->elements; i++) {
        const char *b = rep->element[i]->str;
        if (!batch_id_valid(b)) {
            log_warn("registry: ignoring batch id '%.80s' in %s: use 1 to 64 of [A-Za-z0-9_.-]", b, r->key);
            continue;
        }
        registry_entry *e = find(r, b);
        const char *owner = owner_of(r, b);
        int mine = !strcmp(owner, r->cfg->instance);
        if (e) {
            e->seen = mine;
            if (!mine && !e->stopping) stop_entry(e, "handed over to its placement owner");
            continue;                         /* serving, or still draining */
        }
        if (mine) start_worker(r, b);
    }
    for (size_t i = 0; i < r->n; i++) {
        registry_entry *e = &r->entries[i];
        if (!e->seen && !e->stopping) stop_entry(e, "no longer listed");
    }
}

static void on_batches(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    registry *r = data;
    r->poll_pending = 0;
    if (r->stopping) return;
    if (err) return; /* logged by redis_conn; the next tick tries again */
    if (rep->type != REDIS_REPLY_ARRAY) {
        log_warn("registry: %s: %s", r->key, rep->type == REDIS_REPLY_ERROR ? rep->str : "not a set");
        return;
    }
    sync_batches(r, rep);
}

/* Membership comes first on the same connection, so on_batches sees it. */
static void on_instances(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    registry *r = data;
    if (r->stopping || err) return;
    read_membership(r, rep);
}

static void poll_now(registry *r)
{
    if (r->poll_pending || r->stopping || !r->conn || !redis_router_ready(r->conn)) return;
    const char *hgetall[] = { "HGETALL", r->instances_key };
    const char *smembers[] = { "SMEMBERS", r->key };
    if (redis_router_command(r->conn, r->instances_key, on_instances, r, r->cfg->redis_timeout_ms,
                             2, hgetall, NULL) < 0)
        return;
    if (redis_router_command(r->conn, r->key, on_batches, r, r->cfg->redis_timeout_ms,
                             2, smembers, NULL) == 0)
        r->poll_pending = 1;
}


/* The instance's heartbeat: P:instances (hash, instance -> JSON, kept for
 * inspection) and P:instance:<name> (same JSON, expiring after three missed
 * beats), so a daemon that died is visible as a stale heartbeat_at or a
 * missing key. */
static void heartbeat_json(registry *r, jsonw *w, const char *state)
{
    size_t serving = 0;
    for (size_t i = 0; i < r->n; i++) serving += !r->entries[i].stopping;
    jsonw_obj_begin(w);
    jsonw_kstr(w, "instance", r->cfg->instance);
    jsonw_kint(w, "pid", (int64_t)getpid());
    jsonw_kstr(w, "version", ALLOCD_VERSION);
    jsonw_kstr(w, "state", state);
    jsonw_kint(w, "started_at", r->started_at);
    jsonw_kint(w, "heartbeat_at", clock_wall_ms());
    jsonw_kint(w, "interval_ms", r->cfg->registry_interval_ms);
    jsonw_kint(w, "batches", (int64_t)serving);
    jsonw_key(w, "serving");
    jsonw_arr_begin(w);
    for (size_t i = 0; i < r->n; i++)
        if (!r->entries[i].stopping) jsonw_str(w, r->entries[i].batch);
    jsonw_arr_end(w);
    jsonw_key(w, "gave_up");
    giveups_json(&r->giveups, w, clock_wall_ms());
    jsonw_obj_end(w);
}

static void on_beat(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    registry *r = data;
    r->beat_pending = 0;
    if (r->stopping) maybe_finish(r); /* sends the farewell, or closes after it */
}

static void beat(registry *r, const char *state)
{
    if (r->beat_pending || !r->conn || !redis_router_ready(r->conn)) return;
    jsonw w;
    jsonw_init(&w);
    heartbeat_json(r, &w, state);
    if (w.failed) { jsonw_free(&w); return; }
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)liveness_ms(r->cfg->registry_interval_ms));
    const char *hset[] = { "HSET", r->instances_key, r->cfg->instance, w.buf };
    size_t hlen[] = { 4, strlen(r->instances_key), strlen(r->cfg->instance), w.len };
    const char *set[] = { "SET", r->instance_key, w.buf, "PX", ttl };
    const char *del[] = { "DEL", r->instance_key };
    size_t slen[] = { 3, strlen(r->instance_key), w.len, 2, strlen(ttl) };
    int to = r->cfg->redis_timeout_ms;
    redis_router_command(r->conn, r->instances_key, NULL, NULL, to, 4, hset, hlen);
    int rc = strcmp(state, "stopped")
        ? redis_router_command(r->conn, r->instance_key, on_beat, r, to, 5, set, slen)
        : redis_router_command(r->conn, r->instance_key, on_beat, r, to, 2, del, NULL);
    if (rc == 0) r->beat_pending = 1;
    jsonw_free(&w);
}

static void on_tick(uv_timer_t *t)
{
    registry *r = t->data;
    poll_now(r);
    beat(r, "running");
}
static void on_ready(redis_router *c, void *data)
{
    registry *r = data;
    if (r->stopping) { maybe_finish(r); return; }
    poll_now(r);
    beat(r, "running");
}

/* Sentinel moved the master: every worker follows now. Failing over only
 * arms a worker's backoff timer, so no entry leaves the list meanwhile. */
static void on_master_moved(redis_router *conn, void *data)
{
    registry *r = data;
    for (size_t i = 0; i < r->n; i++)
        if (r->entries[i].worker) batch_worker_follow_master(r->entries[i].worker);
}

int registry_start(registry **out, uv_loop_t *loop, const allocd_config *cfg,
                   const allocd_scripts *scripts)
{
    registry *r = calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    r->loop = loop;
    r->cfg = cfg;
    r->scripts = scripts;
    snprintf(r->key, sizeof r->key, "%s:batches", cfg->prefix);
    snprintf(r->instances_key, sizeof r->instances_key, "%s:instances", cfg->prefix);
    snprintf(r->instance_key, sizeof r->instance_key, "%s:instance:%s", cfg->prefix, cfg->instance);
    r->started_at = clock_wall_ms();
    char name[128];
    snprintf(name, sizeof name, "%s/registry", cfg->instance);
    int rc = redis_router_init(&r->conn, loop, cfg, name, on_ready, r);
    if (rc < 0) { free(r); return rc; }
    redis_router_on_moved(r->conn, on_master_moved, r);
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, on_tick, (uint64_t)cfg->registry_interval_ms,
                   (uint64_t)cfg->registry_interval_ms);
    *out = r;
    return 0;
}

/* Once every worker has stopped: say goodbye in the heartbeat (state
 * "stopped", instance key deleted), then close the connection; r is freed
 * when the timer and the connection are closed. */
static void maybe_finish(registry *r)
{
    if (!r->stopping || r->n > 0) return;
    if (r->conn) {
        if (!r->farewell_sent && redis_router_ready(r->conn) && !r->beat_pending) {
            r->farewell_sent = 1;
            beat(r, "stopped");
            if (r->beat_pending) return;        /* on_beat comes back here */
        }
        if (r->beat_pending) return;
        redis_router *c = r->conn;
        r->conn = NULL;
        redis_router_close(c, on_conn_closed_fwd, r);
        return;
    }
    if (r->handles_open > 0) return;
    registry_stopped_fn done = r->done;
    void *data = r->done_data;
    live_clear(r);
    giveups_free(&r->giveups);
    free(r->entries);
    free(r);
    if (done) done(NULL, data);
}

static void on_handle_closed(registry *r)
{
    r->handles_open--;
    maybe_finish(r);
}

static void on_conn_closed_fwd(void *data) { on_handle_closed(data); }
static void on_timer_closed(uv_handle_t *h) { on_handle_closed(h->data); }

void registry_stop(registry *r, registry_stopped_fn done, void *data)
{
    if (r->stopping) return;
    r->stopping = 1;
    r->done = done;
    r->done_data = data;
    r->handles_open = 2;
    uv_close((uv_handle_t *)&r->timer, on_timer_closed);
    for (size_t i = 0; i < r->n; i++) {
        if (r->entries[i].stopping) continue;
        r->entries[i].stopping = 1;
        batch_worker_stop(r->entries[i].worker);
    }
    maybe_finish(r);
}

/* After the drain deadline: do not wait for the farewell either. */
static void force_close_conn(registry *r)
{
    if (!r->conn) return;
    redis_router *c = r->conn;
    r->conn = NULL;
    r->beat_pending = 0;
    redis_router_close(c, on_conn_closed_fwd, r);
}

void registry_abort(registry *r)
{
    for (size_t i = 0; i < r->n; i++) batch_worker_abort(r->entries[i].worker);
    force_close_conn(r);
}

size_t registry_batch_count(const registry *r) { return r->n; }
int registry_redis_ready(const registry *r) { return r->conn && redis_router_ready(r->conn); }

const batch_worker_stats *registry_worker_stats(registry *r, const char *batch)
{
    registry_entry *e = find(r, batch);
    return e && !e->stopping ? batch_worker_get_stats(e->worker) : NULL;
}

/* ---- metrics ---- */

typedef double (*stat_fn)(const batch_worker_stats *st, size_t arg);

static double st_status(const batch_worker_stats *st, size_t i) { return (double)st->by_status[i]; }
static double st_reject(const batch_worker_stats *st, size_t i) { return (double)st->rejects[i]; }

static void labels_of(char *buf, size_t len, const char *batch, const char *extra)
{
    snprintf(buf, len, "batch=\"%s\"%s%s", batch, extra ? "," : "", extra ? extra : "");
}

static void render_simple(registry *r, jsonw *out, const char *name, const char *type,
                          const char *help, size_t field_off, int is_int64 /* 2: double */)
{
    char labels[200];
    metrics_header(out, name, type, help);
    for (size_t i = 0; i < r->n; i++) {
        const batch_worker_stats *st = batch_worker_get_stats(r->entries[i].worker);
        const char *p = (const char *)st + field_off;
        double v = is_int64 == 2 ? *(const double *)p
                 : is_int64 ? (double)*(const int64_t *)p : (double)*(const uint64_t *)p;
        labels_of(labels, sizeof labels, r->entries[i].batch, NULL);
        metrics_value(out, name, labels, v);
    }
}

static void render_labeled(registry *r, jsonw *out, const char *name, const char *help,
                           const char *label, size_t first, size_t last,
                           const char *(*label_name)(size_t), stat_fn fn)
{
    char labels[200], extra[80];
    metrics_header(out, name, "counter", help);
    for (size_t i = 0; i < r->n; i++) {
        const batch_worker_stats *st = batch_worker_get_stats(r->entries[i].worker);
        for (size_t k = first; k <= last; k++) {
            snprintf(extra, sizeof extra, "%s=\"%s\"", label, label_name(k));
            labels_of(labels, sizeof labels, r->entries[i].batch, extra);
            metrics_value(out, name, labels, fn(st, k));
        }
    }
}

static const char *status_label(size_t i) { return engine_status_name((engine_status)i); }
static const char *reason_label(size_t i) { return engine_reason_name((engine_reason)i); }

static void render_hist(registry *r, jsonw *out, const char *name, const char *help, size_t off)
{
    char labels[200];
    metrics_header(out, name, "histogram", help);
    for (size_t i = 0; i < r->n; i++) {
        const batch_worker_stats *st = batch_worker_get_stats(r->entries[i].worker);
        labels_of(labels, sizeof labels, r->entries[i].batch, NULL);
        metrics_hist_render(out, name, labels, (const metrics_hist *)((const char *)st + off));
    }
}

void registry_render_metrics(registry *r, jsonw *out)
{
#define OFF(f) offsetof(batch_worker_stats, f)
    render_labeled(r, out, "allocd_results_total", "Results written, by status.", "status",
                   STATUS_GRANTED, STATUS_INVALID, status_label, st_status);
    render_labeled(r, out, "allocd_rejects_total", "Rejected requests, by reason.", "reason",
                   REASON_SOLD_OUT, REASON_LAST, reason_label, st_reject);
    render_simple(r, out, "allocd_requests_total", "counter", "Requests and admin commands applied.", OFF(requests), 0);
    render_simple(r, out, "allocd_dead_total", "counter", "Requests moved to the dead list.", OFF(dead), 0);
    render_simple(r, out, "allocd_duplicates_total", "counter", "Requests whose id already had a result.", OFF(duplicates), 0);
    render_simple(r, out, "allocd_chunks_total", "counter", "Chunks applied.", OFF(chunks), 0);
    render_simple(r, out, "allocd_step_failures_total", "counter", "Steps that failed and made the batch reload.", OFF(failures), 0);
    render_simple(r, out, "allocd_redis_reconnects_total", "counter", "Lost or failed connections of the batch worker.", OFF(reconnects), 0);
    render_simple(r, out, "allocd_queue_length", "gauge", "Queue length after the last take.", OFF(queue_len), 1);
    render_simple(r, out, "allocd_batch_oldest_unanswered_seconds", "gauge", "Age of the oldest request not answered yet (queued or in flight; an upper bound within 1 s).", OFF(oldest_unanswered_seconds), 2);
    render_simple(r, out, "allocd_chunk_size", "gauge", "Requests in the last applied chunk.", OFF(last_chunk), 0);
    render_hist(r, out, "allocd_decide_seconds", "Engine time per chunk.", OFF(decide));
    render_hist(r, out, "allocd_apply_seconds", "Apply script round trip per chunk.", OFF(apply));
    render_hist(r, out, "allocd_chunk_latency_seconds", "From taking a chunk to its results being written.", OFF(latency));
#undef OFF
}
