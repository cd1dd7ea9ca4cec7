/* main.c -- allocd's entry point: command line, config, signals, the loop.
 *
 * Everything that decides lives in the modules; this file only wires them
 * to the process: SIGTERM/SIGINT drain every batch (finish and apply the
 * chunks in flight, then exit 0; after drain_timeout_ms the rest is left at
 * the head of the queue for the next start), SIGHUP reloads the settings
 * that can change while running.
 */
#include <inttypes.h>
#include <signal.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/heap_reserve.h"
#include "base/log.h"
#include "service/metrics.h"
#include "service/notifier.h"
#include "service/registry.h"
#include "service/web.h"
#include "worker/scripts.h"

typedef struct allocd {
    uv_loop_t *loop;
    allocd_config cfg;
    const char *config_path;  /* -c, for SIGHUP */
    cli_args args;
    allocd_scripts scripts;
    registry *reg;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t drain_timer;
    uv_timer_t status_timer;   /* READY once the loop runs, then STATUS each second */
    uv_timer_t rebind_timer;   /* SIGHUP's new metrics_listen, once the old socket is closed */
    notifier notify;
    web *web;                 /* metrics, dashboard; NULL when off */
    uint64_t started_ns;
    uint64_t redis_down_ms;    /* loop time Redis was first seen unreachable; 0 = reachable */
    uint64_t redis_told_ms;    /* loop time of the last reminder */
    int ready_sent;
    int draining;
} allocd;

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void on_registry_stopped(registry *r, void *data)
{
    allocd *d = data;
    d->reg = NULL;
    log_notice("all batches drained; exiting");
    close_handle((uv_handle_t *)&d->drain_timer);
    close_handle((uv_handle_t *)&d->status_timer);
    close_handle((uv_handle_t *)&d->rebind_timer);
    notifier_close(&d->notify);
    if (d->web) web_stop(d->web);
    d->web = NULL;
    close_handle((uv_handle_t *)&d->sig_term);
    close_handle((uv_handle_t *)&d->sig_int);
    close_handle((uv_handle_t *)&d->sig_hup);
}

static void on_drain_deadline(uv_timer_t *t)
{
    allocd *d = t->data;
    log_warn("drain deadline (%d ms) passed: stopping now; requests not applied stay "
             "at the head of their queue for the next start", d->cfg.drain_timeout_ms);
    if (d->reg) registry_abort(d->reg);
}

static void on_stop_signal(uv_signal_t *s, int signum)
{
    allocd *d = s->data;
    if (d->draining) {
        log_notice("second %s: stopping now", strsignal(signum));
        if (d->reg) registry_abort(d->reg);
        return;
    }
    d->draining = 1;
    log_notice("%s: draining", strsignal(signum));
    notifier_send(&d->notify, "STOPPING=1\nSTATUS=draining");
    uv_timer_start(&d->drain_timer, on_drain_deadline, (uint64_t)d->cfg.drain_timeout_ms, 0);
    registry_stop(d->reg, on_registry_stopped, d);
}

static int start_web(allocd *d, const char *when);

static void on_rebind(uv_timer_t *t)
{
    allocd *d = t->data;
    if (d->draining || !d->cfg.metrics_port) return;
    if (start_web(d, "SIGHUP") < 0)
        log_err("SIGHUP: metrics and dashboard are OFF until metrics_listen is fixed and allocd "
                "gets another SIGHUP (or is restarted)");
}

/* A changed listener (address, token, limits) is closed, and the new one
 * opened on the next loop turn: the old socket is released only once its
 * handles have closed, and the new address may be the same port. */
static void reload_metrics(allocd *d, allocd_config *fresh)
{
    allocd_config *c = &d->cfg;
    if (!strcmp(fresh->metrics_listen, c->metrics_listen) && !strcmp(fresh->metrics_token, c->metrics_token) &&
        fresh->metrics_max_connections == c->metrics_max_connections &&
        fresh->metrics_timeout_ms == c->metrics_timeout_ms)
        return;
    if (d->web) {
        log_notice("SIGHUP: metrics: closing the listener on %s", c->metrics_listen);
        web_stop(d->web);
        d->web = NULL;
    }
    char *swap = c->metrics_listen;   /* the old strings go with fresh */
    c->metrics_listen = fresh->metrics_listen;
    fresh->metrics_listen = swap;
    swap = c->metrics_token;
    c->metrics_token = fresh->metrics_token;
    fresh->metrics_token = swap;
    memcpy(c->metrics_host, fresh->metrics_host, sizeof c->metrics_host);
    c->metrics_port = fresh->metrics_port;
    c->metrics_loopback = fresh->metrics_loopback;
    c->metrics_max_connections = fresh->metrics_max_connections;
    c->metrics_timeout_ms = fresh->metrics_timeout_ms;
    if (!c->metrics_port) log_notice("SIGHUP: metrics: metrics_listen is empty: metrics and dashboard are off");
    else uv_timer_start(&d->rebind_timer, on_rebind, 10, 0);
}

/* Applies what can change without a restart; the rest is reported. */
static void reload(allocd *d)
{
    allocd_config fresh;
    char err[512];
    if (config_load(&fresh, &d->args, err, sizeof err) < 0) {
        log_err("SIGHUP: config not reloaded: %s", err);
        config_free(&fresh);
        return;
    }
    allocd_config *c = &d->cfg;
    if (strcmp(fresh.redis_url, c->redis_url) || strcmp(fresh.prefix, c->prefix) ||
        strcmp(fresh.instance, c->instance) || fresh.heap_reserve_mb != c->heap_reserve_mb)
        log_warn("SIGHUP: redis, prefix, instance and heap_reserve_mb take effect at the next restart");
    c->chunk = fresh.chunk;
    c->max_request_bytes = fresh.max_request_bytes;
    c->log_level = fresh.log_level;
    c->log_maxlen = fresh.log_maxlen;
    memcpy(c->archive_group, fresh.archive_group, sizeof c->archive_group);
    c->redis_timeout_ms = fresh.redis_timeout_ms;
    c->idle_wait_ms = fresh.idle_wait_ms;
    c->drain_timeout_ms = fresh.drain_timeout_ms;
    c->max_attempts = fresh.max_attempts;
    log_set_level(c->log_level);
    reload_metrics(d, &fresh);
    log_notice("SIGHUP: configuration reloaded from %s", fresh.source ? fresh.source : "built-in defaults");
    config_free(&fresh);
}

static void on_hup(uv_signal_t *s, int signum)
{
    allocd *d = s->data;
    notifier_send(&d->notify, "RELOADING=1");
    reload(d);
    notifier_send(&d->notify, "READY=1");
}

/* The connection logs its first failure only (a line per retry would
 * flood the log), so a daemon pointed at a socket that is not there went
 * quiet for good: say it again every REDIS_REMIND_MS until connected. */
enum { REDIS_REMIND_MS = 10000 };

static void remind_redis(allocd *d)
{
    uint64_t now = uv_now(d->loop) + 1;   /* + 1: 0 means "reachable" */
    if (d->draining || registry_redis_ready(d->reg)) {
        if (d->redis_down_ms && d->redis_told_ms > d->redis_down_ms)   /* reminded at least once */
            log_notice("redis: connected again after %llu s", (unsigned long long)(now - d->redis_down_ms) / 1000);
        d->redis_down_ms = 0;
        return;
    }
    if (!d->redis_down_ms) d->redis_down_ms = d->redis_told_ms = now;
    if (now - d->redis_told_ms < REDIS_REMIND_MS) return;
    d->redis_told_ms = now;
    char where[400];
    log_warn("redis: still not connected to %s after %llu s; retrying (is redis-server running, and is "
             "`redis` in %s right?)", redis_target_describe(&d->cfg.redis, where, sizeof where),
             (unsigned long long)(now - d->redis_down_ms) / 1000, d->cfg.source ? d->cfg.source : "the config");
}

/* The first tick runs once the loop is running: that is READY. */
static void on_status(uv_timer_t *t)
{
    allocd *d = t->data;
    if (!d->reg) return;
    remind_redis(d);
    if (!notifier_active(&d->notify)) return;
    if (!d->ready_sent) {
        d->ready_sent = 1;
        notifier_send(&d->notify, "READY=1");
        notifier_watchdog_start(&d->notify);
    }
    char status[200];
    snprintf(status, sizeof status, "redis %s; serving %zu batches%s",
             registry_redis_ready(d->reg) ? "connected" : "unreachable",
             registry_batch_count(d->reg), d->draining ? "; draining" : "");
    notifier_status(&d->notify, status);
}

static void render_metrics(jsonw *out, void *data)
{
    allocd *d = data;
    char labels[512], instance[300];
    snprintf(labels, sizeof labels, "version=\"%s\",instance=\"%s\"", ALLOCD_VERSION,
             metrics_label_escape(d->cfg.instance, instance, sizeof instance));
    metrics_header(out, "allocd_info", "gauge", "Version and instance of this daemon.");
    metrics_value(out, "allocd_info", labels, 1);
    metrics_header(out, "allocd_uptime_seconds", "gauge", "Seconds since start.");
    metrics_value(out, "allocd_uptime_seconds", "", (double)(uv_hrtime() - d->started_ns) / 1e9);
    metrics_header(out, "allocd_loop_idle_seconds_total", "counter", "Time the event loop spent waiting for events.");
    metrics_value(out, "allocd_loop_idle_seconds_total", "", (double)uv_metrics_idle_time(d->loop) / 1e9);
    /* glibc's count of bytes handed out and not freed: unlike RSS it does
     * not move when the allocator keeps or trims free memory, so growth
     * under a steady load means a leak */
    struct mallinfo2 mi = mallinfo2();
    metrics_header(out, "allocd_heap_inuse_bytes", "gauge", "Heap bytes allocated and not freed (glibc mallinfo2).");
    metrics_value(out, "allocd_heap_inuse_bytes", "", (double)(mi.uordblks + mi.hblkhd));
    metrics_header(out, "allocd_batches", "gauge", "Batches served.");
    metrics_value(out, "allocd_batches", "", d->reg ? (double)registry_batch_count(d->reg) : 0);
    metrics_header(out, "allocd_redis_up", "gauge", "1 when the registry's Redis connection is ready.");
    metrics_value(out, "allocd_redis_up", "", d->reg && registry_redis_ready(d->reg) ? 1 : 0);
    if (d->reg) registry_render_metrics(d->reg, out);
}

/* Returns 0 (listening, or metrics_listen is off) or -1 (logged). */
static int start_web(allocd *d, const char *when)
{
    if (!d->cfg.metrics_port) return 0;
    char err[256];
    if (web_start(&d->web, d->loop, &d->cfg, &d->reg, render_metrics, d, err, sizeof err) < 0) {
        d->web = NULL;
        log_err("%s%smetrics: cannot listen on metrics_listen = \"%s\": %s", when ? when : "",
                when ? ": " : "", d->cfg.metrics_listen, err);
        return -1;
    }
    log_notice("%s%smetrics: GET http://%s/metrics, dashboard http://%s/%s", when ? when : "",
               when ? ": " : "", d->cfg.metrics_listen, d->cfg.metrics_listen,
               *d->cfg.metrics_token ? " (token required)" : "");
    return 0;
}

/* Each batch costs a handful of descriptors (its connections to Redis),
 * and a default soft limit of 1024 (or a shell's `ulimit -n 64`) runs out
 * long before memory does: take the hard limit, which needs no privilege,
 * and say when even that is low. The unit sets LimitNOFILE. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return;
    rlim_t want = rl.rlim_max;
    if (rl.rlim_cur < want) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            log_info("open files limit raised from %llu to %llu", (unsigned long long)was,
                     (unsigned long long)want);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 4096)
        log_warn("open files limit is %llu: each batch needs about 5 descriptors; raise it "
                 "(LimitNOFILE= in the unit, ulimit -n in a shell)", (unsigned long long)rl.rlim_cur);
}

/* Before the loop runs, so that no batch is served while it is made. */
static void reserve_heap(const allocd_config *c)
{
    int64_t t0 = clock_mono_us();
    int rc = heap_reserve_start((size_t)c->heap_reserve_mb << 20);
    if (rc == 0)
        log_info("heap: %d MB reserved and touched in %" PRId64 " ms", c->heap_reserve_mb,
                 (clock_mono_us() - t0) / 1000);
    else if (rc == HEAP_RESERVE_UNSUPPORTED)
        log_info("heap: heap_reserve_mb is not used under AddressSanitizer or without glibc");
    else if (rc < 0)
        log_warn("heap: the %d MB of heap_reserve_mb could not be allocated; running without "
                 "(lower heap_reserve_mb)", c->heap_reserve_mb);
}

static int run(allocd *d)
{
    d->loop = uv_default_loop();
    uv_loop_configure(d->loop, UV_METRICS_IDLE_TIME);
    d->started_ns = uv_hrtime();
    raise_fd_limit();
    reserve_heap(&d->cfg);
    scripts_init(&d->scripts);
    signal(SIGPIPE, SIG_IGN);
    uv_signal_init(d->loop, &d->sig_term);
    uv_signal_init(d->loop, &d->sig_int);
    uv_signal_init(d->loop, &d->sig_hup);
    uv_timer_init(d->loop, &d->drain_timer);
    uv_timer_init(d->loop, &d->status_timer);
    uv_timer_init(d->loop, &d->rebind_timer);
    d->sig_term.data = d->sig_int.data = d->sig_hup.data = d->drain_timer.data = d;
    d->status_timer.data = d->rebind_timer.data = d;
    int nrc = notifier_init(&d->notify, d->loop);
    if (nrc < 0) log_warn("NOTIFY_SOCKET is set but unusable: %s", strerror(-nrc));
    uv_signal_start(&d->sig_term, on_stop_signal, SIGTERM);
    uv_signal_start(&d->sig_int, on_stop_signal, SIGINT);
    uv_signal_start(&d->sig_hup, on_hup, SIGHUP);
    char where[400];
    if (start_web(d, NULL) < 0) {
        log_err("not starting: metrics_listen names a port allocd cannot listen on (another "
                "process has it?); free it, choose another, or leave metrics_listen empty");
        return 1;
    }
    if (registry_start(&d->reg, d->loop, &d->cfg, &d->scripts) < 0) {
        log_err("cannot start: out of memory");
        return 1;
    }
    log_notice("allocd %s started: instance %s, redis %s, prefix %s, config %s",
               ALLOCD_VERSION, d->cfg.instance, redis_target_describe(&d->cfg.redis, where, sizeof where),
               d->cfg.prefix, d->cfg.source ? d->cfg.source : "built-in defaults");
    uv_timer_start(&d->status_timer, on_status, 0, 1000);
    uv_run(d->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(d->loop);
    if (rc != 0) log_warn("event loop closed with handles still open: %s", uv_strerror(rc));
    return 0;
}

int main(int argc, char **argv)
{
    allocd d;
    char err[512];
    memset(&d, 0, sizeof d);
    /* errors before the log is set up still carry journald's priority */
    const char *err_prefix = log_to_journal() ? "<3>" : "";
    if (cli_parse(argc, argv, &d.args, err, sizeof err) < 0) {
        fprintf(stderr, "%sallocd: %s\n", err_prefix, err);
        cli_usage(stderr, argv[0]);
        return 2;
    }
    if (d.args.action == CLI_HELP) { cli_usage(stdout, argv[0]); return 0; }
    if (d.args.action == CLI_VERSION) { printf("allocd %s\n", ALLOCD_VERSION); return 0; }
    if (config_load(&d.cfg, &d.args, err, sizeof err) < 0) {
        fprintf(stderr, "%s%s\n", err_prefix, err);
        config_free(&d.cfg);
        return 1;
    }
    if (d.args.action == CLI_CHECK_CONFIG) {
        printf("%s: OK\n", d.cfg.source ? d.cfg.source : "built-in defaults");
        config_free(&d.cfg);
        return 0;
    }
    log_init(d.cfg.log_level, -1);
    int rc = run(&d);
    log_flush();
    config_free(&d.cfg);
    return rc;
}
