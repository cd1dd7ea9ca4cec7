/* web.c -- see web.h. Routes, the per-batch series from the watcher, and
 * the dashboard's JSON. */
#include "service/web.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "base/clock.h"
#include "base/log.h"
#include "service/http.h"
#include "service/metrics.h"
#include "service/watch.h"

/* web_assets.c: the dashboard files, embedded at build time */
extern const char web_index_html[], web_app_js[], web_app_css[];
extern const unsigned web_index_html_len, web_app_js_len, web_app_css_len;

struct web {
    const allocd_config *cfg;
    registry *const *reg;
    web_render_fn render;
    void *render_data;
    watch *watch;
    http_server *http;
    double start_s;
};

static const char *const STATES[] = { "waiting", "open", "paused", "closed" };

static const char *stat_str(const watch_batch *b, const char *name)
{
    const char *v = json_string_value(json_object_get(b->stats, name));
    return v ? v : "";
}

static double stat_num(const watch_batch *b, const char *name)
{
    const char *v = stat_str(b, name);
    return *v ? strtod(v, NULL) : 0;
}

/* The lease token is instance/pid/random: its instance part. */
static void lease_owner(const watch_batch *b, char *out, size_t len)
{
    const char *slash = strrchr(b->lease, '/');
    size_t n = slash ? (size_t)(slash - b->lease) : strlen(b->lease);
    const char *pid = n ? memrchr(b->lease, '/', n) : NULL;
    if (pid) n = (size_t)(pid - b->lease);
    snprintf(out, len, "%.*s", (int)n, b->lease);
}

/* ---- /metrics ---- */

typedef double (*batch_value_fn)(const watch_batch *b);

static double v_age(const watch_batch *b) { return (double)b->oldest_age_ms / 1000.0; }
static double v_queued(const watch_batch *b) { return (double)b->queue_len; }
static double v_free(const watch_batch *b) { return stat_num(b, "free_units"); }
static double v_capacity(const watch_batch *b) { return (double)b->capacity_units; }
static double v_waiting(const watch_batch *b) { return stat_num(b, "waiting"); }
static double v_swap_offers(const watch_batch *b) { return stat_num(b, "swap_offers"); }
static double v_dead(const watch_batch *b) { return (double)b->dead_len; }
static double v_served(const watch_batch *b) { return b->lease[0] != '\0'; }
static double v_dequeued(const watch_batch *b) { return stat_num(b, "dequeued"); }

static void render_batch_series(web *w, jsonw *out, const char *name, const char *type,
                                const char *help, batch_value_fn fn)
{
    char labels[120];
    metrics_header(out, name, type, help);
    for (size_t i = 0; i < watch_count(w->watch); i++) {
        const watch_batch *b = watch_get(w->watch, i);
        if (!b->seen_ms) continue;
        snprintf(labels, sizeof labels, "batch=\"%s\"", b->id);   /* ids are [A-Za-z0-9_.-] */
        metrics_value(out, name, labels, fn(b));
    }
}

static void render_watch(web *w, jsonw *out)
{
    render_batch_series(w, out, "allocd_batch_oldest_queued_age_seconds", "gauge",
                        "Age of the oldest request in the queue (0 when empty; late by at most 1 s).", v_age);
    render_batch_series(w, out, "allocd_batch_queued", "gauge", "Requests in the queue.", v_queued);
    render_batch_series(w, out, "allocd_batch_free_units", "gauge", "Free units (stock) or beds (rooms).", v_free);
    render_batch_series(w, out, "allocd_batch_capacity_units", "gauge", "Total units or beds (sum of capacity).", v_capacity);
    render_batch_series(w, out, "allocd_batch_waiting", "gauge", "Requests on the batch's waitlist.", v_waiting);
    render_batch_series(w, out, "allocd_batch_swap_offers", "gauge",
                        "Open swap offers (rooms): waiting results that are not on the waitlist.", v_swap_offers);
    render_batch_series(w, out, "allocd_batch_dead_entries", "gauge", "Entries in the dead list.", v_dead);
    render_batch_series(w, out, "allocd_batch_served", "gauge", "1 while some instance holds the batch's lease.", v_served);
    render_batch_series(w, out, "allocd_batch_dequeued_total", "counter", "Requests taken off the queue (stats.dequeued).", v_dequeued);
    char labels[160];
    metrics_header(out, "allocd_batch_state", "gauge", "1 for the batch's current state.");
    for (size_t i = 0; i < watch_count(w->watch); i++) {
        const watch_batch *b = watch_get(w->watch, i);
        if (!b->seen_ms) continue;
        for (size_t k = 0; k < sizeof STATES / sizeof STATES[0]; k++) {
            snprintf(labels, sizeof labels, "batch=\"%s\",state=\"%s\"", b->id, STATES[k]);
            metrics_value(out, "allocd_batch_state", labels, !strcmp(stat_str(b, "state"), STATES[k]));
        }
    }
    metrics_header(out, "allocd_batch_lease_changes_total", "counter",
                   "Times the batch's lease went to a new holder, as seen by this instance.");
    for (size_t i = 0; i < watch_count(w->watch); i++) {
        const watch_batch *b = watch_get(w->watch, i);
        snprintf(labels, sizeof labels, "batch=\"%s\"", b->id);
        if (b->seen_ms) metrics_value(out, "allocd_batch_lease_changes_total", labels, (double)b->lease_changes);
    }
    const json_t *inst = watch_instances(w->watch);
    const char *name;
    json_t *hb;
    char esc[200];
    int64_t now = clock_wall_ms();
    metrics_header(out, "allocd_instance_up", "gauge",
                   "1 for an instance whose heartbeat is running and fresh (3 intervals, at least 2 s).");
    json_object_foreach((json_t *)inst, name, hb) {
        json_int_t at = json_integer_value(json_object_get(hb, "heartbeat_at"));
        json_int_t every = json_integer_value(json_object_get(hb, "interval_ms"));
        const char *st = json_string_value(json_object_get(hb, "state"));
        int64_t live = 3 * every > 2000 ? 3 * every : 2000;
        snprintf(labels, sizeof labels, "name=\"%s\"", metrics_label_escape(name, esc, sizeof esc));
        metrics_value(out, "allocd_instance_up", labels,
                      st && !strcmp(st, "running") && now - at <= live);
    }
}

static void serve_metrics(web *w, http_response *r)
{
    r->content_type = "text/plain; version=0.0.4; charset=utf-8";
    w->render(&r->body, w->render_data);
    metrics_process_render(&r->body, w->start_s);
    render_watch(w, &r->body);
}

/* ---- JSON ---- */

static json_t *batch_json(web *w, const watch_batch *b)
{
    char owner[160];
    lease_owner(b, owner, sizeof owner);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(b->id));
    json_object_set_new(o, "seen_at", json_integer(b->seen_ms));
    json_object_set_new(o, "kind", json_string(json_string_value(json_object_get(b->meta, "kind")) ?: ""));
    json_object_set_new(o, "state", json_string(stat_str(b, "state")));
    json_object_set_new(o, "owner", json_string(owner));
    json_object_set_new(o, "stats_owner", json_string(stat_str(b, "owner")));
    json_object_set_new(o, "lease_ttl_ms", json_integer(b->lease_ttl_ms));
    json_object_set_new(o, "queued", json_integer(b->queue_len));
    json_object_set_new(o, "ctl_queued", json_integer(b->ctl_len));
    json_object_set_new(o, "oldest_queued_age_ms", json_integer(b->oldest_age_ms));
    json_object_set_new(o, "dead", json_integer(b->dead_len));
    json_object_set_new(o, "capacity", json_integer(b->capacity_units));
    json_object_set_new(o, "lease_changes", json_integer(b->lease_changes));
    static const char *const fields[] = { "free_units", "dequeued", "processed", "granted", "done",
        "rejected", "invalid", "duplicates", "participants", "waiting", "wait_served",
        "swap_offers", "decision_p50_us", "decision_p99_us", "updated_at" };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *v = stat_str(b, fields[i]);
        json_object_set_new(o, fields[i], *v ? json_integer(strtoll(v, NULL, 10)) : json_null());
    }
    double r1 = watch_rate(b, 60), r5 = watch_rate(b, 300);
    json_object_set_new(o, "rate_1m", r1 < 0 ? json_null() : json_real(r1));
    json_object_set_new(o, "rate_5m", r5 < 0 ? json_null() : json_real(r5));
    /* the chart: requests/s in 10 s bins over the history, oldest first */
    json_t *chart = json_array();
    for (size_t i = 0; i + 1 < b->hist_n; i++) {
        const watch_sample *s = &b->hist[(b->hist_head + i) % WATCH_HISTORY];
        const watch_sample *e = &b->hist[(b->hist_head + (i + 10 < b->hist_n ? i + 10 : b->hist_n - 1)) % WATCH_HISTORY];
        if (i % 10 || e->at_ms <= s->at_ms) continue;
        json_t *pt = json_array();
        json_array_append_new(pt, json_integer(e->at_ms));
        json_array_append_new(pt, json_real((double)(e->dequeued - s->dequeued) * 1000.0 / (double)(e->at_ms - s->at_ms)));
        json_array_append_new(chart, pt);
    }
    json_object_set_new(o, "chart", chart);
    const batch_worker_stats *st = *w->reg ? registry_worker_stats(*w->reg, b->id) : NULL;
    json_object_set_new(o, "served_here", json_boolean(st != NULL));
    if (st) {
        json_t *rej = json_object();
        for (size_t k = 0; k < sizeof st->rejects / sizeof st->rejects[0]; k++)
            if (st->rejects[k]) json_object_set_new(rej, engine_reason_name((engine_reason)k), json_integer((json_int_t)st->rejects[k]));
        json_object_set_new(o, "rejects", rej);
    }
    return o;
}

static json_t *instances_json(web *w)
{
    json_t *a = json_array();
    const json_t *inst = watch_instances(w->watch);
    const char *name;
    json_t *hb;
    int64_t now = clock_wall_ms();
    json_object_foreach((json_t *)inst, name, hb) {
        json_t *o = json_deep_copy(hb);
        json_int_t at = json_integer_value(json_object_get(hb, "heartbeat_at"));
        json_int_t every = json_integer_value(json_object_get(hb, "interval_ms"));
        const char *st = json_string_value(json_object_get(hb, "state"));
        int64_t live = 3 * every > 2000 ? 3 * every : 2000;
        json_object_set_new(o, "name", json_string(name));
        json_object_set_new(o, "up", json_boolean(st && !strcmp(st, "running") && now - at <= live));
        json_t *leases = json_array();
        for (size_t i = 0; i < watch_count(w->watch); i++) {
            const watch_batch *b = watch_get(w->watch, i);
            char owner[160];
            lease_owner(b, owner, sizeof owner);
            if (!strcmp(owner, name)) json_array_append_new(leases, json_string(b->id));
        }
        json_object_set_new(o, "leases", leases);
        json_array_append_new(a, o);
    }
    return a;
}

static void send_json(http_response *r, json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    r->content_type = "application/json";
    if (!text) { r->status = 500; return; }
    jsonw_raw(&r->body, text, strlen(text));
    free(text);
}

static json_t *envelope(web *w)
{
    json_t *o = json_object();
    json_object_set_new(o, "instance", json_string(w->cfg->instance));
    json_object_set_new(o, "version", json_string(ALLOCD_VERSION));
    json_object_set_new(o, "now", json_integer(clock_wall_ms()));
    json_object_set_new(o, "redis", json_boolean(watch_redis_ok(w->watch)));
    return o;
}

static void serve_overview(web *w, http_response *r)
{
    json_t *o = envelope(w);
    json_t *a = json_array();
    for (size_t i = 0; i < watch_count(w->watch); i++)
        json_array_append_new(a, batch_json(w, watch_get(w->watch, i)));
    json_object_set_new(o, "batches", a);
    json_object_set_new(o, "instances", instances_json(w));
    send_json(r, o);
}

static void serve_batch(web *w, const http_request *req, http_response *r)
{
    const char *id = http_query(req, "id");
    const watch_batch *b = id ? watch_find(w->watch, id) : NULL;
    if (!b) {
        r->status = 404;
        send_json(r, json_pack("{s:s}", "error", "no such batch (is it in P:batches?)"));
        return;
    }
    watch_want_detail(w->watch, id);
    json_t *o = envelope(w);
    json_object_set_new(o, "batch", batch_json(w, b));
    json_object_set_new(o, "meta", b->meta ? json_deep_copy(b->meta) : json_object());
    json_object_set_new(o, "log", b->log_recent ? json_deep_copy(b->log_recent) : json_null());
    json_object_set_new(o, "dead_recent", b->dead_recent ? json_deep_copy(b->dead_recent) : json_null());
    const batch_worker_stats *st = *w->reg ? registry_worker_stats(*w->reg, b->id) : NULL;
    if (st) {
        json_t *by = json_object();
        for (size_t k = STATUS_GRANTED; k <= STATUS_INVALID; k++)
            json_object_set_new(by, engine_status_name((engine_status)k), json_integer((json_int_t)st->by_status[k]));
        json_object_set_new(o, "results_by_status", by);
    }
    send_json(r, o);
}

/* ---- routing ---- */

static void serve_static(http_response *r, const char *body, unsigned len, const char *type)
{
    r->static_body = body;
    r->static_len = len;
    r->content_type = type;
    r->cache_control = "no-cache";
}

static void on_request(const http_request *req, http_response *r, void *data)
{
    web *w = data;
    const char *p = req->path;
    if (!strcmp(p, "/") || !strcmp(p, "/index.html"))
        return serve_static(r, web_index_html, web_index_html_len, "text/html; charset=utf-8");
    if (!strcmp(p, "/app.js"))
        return serve_static(r, web_app_js, web_app_js_len, "text/javascript; charset=utf-8");
    if (!strcmp(p, "/app.css"))
        return serve_static(r, web_app_css, web_app_css_len, "text/css; charset=utf-8");
    int known = !strcmp(p, "/metrics") || !strcmp(p, "/api/overview") || !strcmp(p, "/api/batch");
    if (!known) {
        r->status = 404;
        jsonw_raw(&r->body, "not found: try /metrics or /\n", 29);
        return;
    }
    if (!req->authorized) {
        r->status = 401;
        jsonw_raw(&r->body, "token required: send 'Authorization: Bearer <metrics_token>'\n", 61);
        return;
    }
    if (!strcmp(p, "/metrics")) serve_metrics(w, r);
    else if (!strcmp(p, "/api/overview")) serve_overview(w, r);
    else serve_batch(w, req, r);
}

/* allocd reads meta when it loads a batch: an edit of a live batch does
 * nothing until then, so the instance serving it says so. */
static void on_meta_change(const char *batch, const char *fields, void *data)
{
    web *w = data;
    if (!*w->reg || !registry_worker_stats(*w->reg, batch)) return;
    log_warn("batch %s: meta changed while it is live (%s): allocd applies meta when it loads "
             "the batch; to apply it now, SREM and then SADD the batch in %s:batches "
             "(its worker drains, stops and reloads)", batch, fields, w->cfg->prefix);
}

int web_start(web **out, uv_loop_t *loop, const allocd_config *cfg, registry *const *reg,
              web_render_fn render, void *data, char *err, size_t errlen)
{
    web *w = calloc(1, sizeof *w);
    if (!w) { snprintf(err, errlen, "out of memory"); return -1; }
    w->cfg = cfg;
    w->reg = reg;
    w->render = render;
    w->render_data = data;
    w->start_s = (double)clock_wall_ms() / 1000.0;
    http_options opt = { cfg->metrics_host, cfg->metrics_port, cfg->metrics_token,
                         cfg->metrics_max_connections, cfg->metrics_timeout_ms };
    if (http_server_start(&w->http, loop, &opt, on_request, w, err, errlen) < 0) {
        free(w);
        return -1;
    }
    if (watch_start(&w->watch, loop, cfg) < 0) {
        snprintf(err, errlen, "out of memory");
        http_server_close(w->http);
        free(w);
        return -1;
    }
    watch_on_meta_change(w->watch, on_meta_change, w);
    *out = w;
    return 0;
}

void web_stop(web *w)
{
    http_server_close(w->http);
    watch_stop(w->watch);
    free(w);
}
