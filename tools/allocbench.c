/* allocbench -- allocd measured side by side with the alternatives.
 *
 * The issue "Faster than the alternatives, measured side by side" asks for
 * ratios, not absolute numbers: on a small shared machine only a ratio
 * measured in the same run, on the same Redis, with the same request mix
 * means anything. So this tool starts its own Redis (or uses --redis) and
 * allocd (or uses a running one with --no-daemon), runs each scenario
 * through allocd, through a Lua-script-per-request design and through a
 * lock-per-room design, and prints a table, one machine-readable RESULT
 * line per run, and a TARGET line (MET / NOT MET) per goal of the issue.
 * The pieces live in tools/bench/ (see bench.h and designs.h); this file
 * sequences the runs; args.c parses the options and report.c prints. The headline is
 * --e2e-pairs (tools/bench/e2e.h): live end to end, producers pushing
 * while the design serves and every allocd result read once by a poller
 * (tools/bench/reader.h) inside the clock, against Lua returning its
 * result inline; --open-loop paces both at shares of their saturation.
 * --cluster-masters /
 * --cluster-sweep is a separate scenario (tools/bench/cluster.h): allocd
 * over M Redis masters with N instances, aggregate throughput and CPU.
 */
#include "bench/allocbench.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ setup --- */

/* --rt: pid under SCHED_FIFO at prio, or why not on stderr. */
static int make_realtime(pid_t pid, int prio, const char *who)
{
    int rc = bench_realtime(pid, prio);
    if (rc < 0)
        fprintf(stderr, "allocbench: --rt: cannot make %s SCHED_FIFO: %s (root or CAP_SYS_NICE, and a "
                        "real-time budget in its cgroup)\n", who, strerror(-rc));
    return rc;
}

/* The private redis-server just (re)started: pinned and real-time as
 * asked, its pid where the runs read its CPU and faults. */
static int redis_started(bench *b)
{
    if (b->opt.pin && bench_pin(b->redis.pid, 0, 0) < 0) {
        fprintf(stderr, "allocbench: --pin: cannot pin redis-server to CPU 0\n");
        return -1;
    }
    if (b->opt.rt && make_realtime(b->redis.pid, RT_PRIO_REDIS, "redis-server") < 0) return -1;
    b->redis_pid = b->redis.pid;
    return 0;
}

static int start_redis(bench *b)
{
    if (b->opt.redis_url) {
        if (bench_target_parse(&b->target, b->opt.redis_url) < 0) {
            fprintf(stderr, "allocbench: bad --redis URL '%s'\n", b->opt.redis_url);
            return -1;
        }
        /* for the daemon's config and log */
        return proc_temp_dir(b->dir, sizeof b->dir, "allocbench");
    }
    char args[600];
    snprintf(args, sizeof args, "%s %s", b->opt.aof ? "--appendonly yes --appendfsync everysec" : "--appendonly no",
             b->opt.redis_args ? b->opt.redis_args : "");
    if (proc_redis_start(&b->redis, "allocbench", args) < 0) return -1;
    b->own_redis = 1;
    if (redis_started(b) < 0) return -1;
    if (bench_target_parse(&b->target, b->redis.url) < 0) return -1;
    snprintf(b->dir, sizeof b->dir, "%s", b->redis.dir);
    return 0;
}

static void stop_all(bench *b)
{
    if (b->daemon.pid > 0) bench_daemon_stop(&b->daemon);
    if (b->own_redis) proc_redis_stop(&b->redis);
    else proc_remove_dir(b->dir);
}

/* An empty Redis for a run, and no allocd beside it. The private Redis
 * is started again, not emptied: after FLUSHALL its allocator keeps pages
 * that the next run reuses, so a run after one of allocd's mapped a third
 * or less of the memory that a run after Lua's or on a new Redis did, and
 * on a machine where a page fault is costly the order of the designs
 * decided a round (docs/PERFORMANCE.md, "Where a request's time goes").
 * An external Redis (--redis) is only checked to answer. */
static int fresh_redis(bench *b)
{
    if (!b->opt.no_daemon && b->daemon.pid > 0) bench_daemon_stop(&b->daemon);
    if (b->own_redis) {
        /* answers PING once started (proc_redis_restart_empty) */
        if (proc_redis_restart_empty(&b->redis) < 0 || redis_started(b) < 0) {
            fprintf(stderr, "allocbench: cannot start redis-server again (see %s/redis.log)\n", b->redis.dir);
            return -1;
        }
        return 0;
    }
    redisContext *c = bench_connect(&b->target);
    if (!c) { fprintf(stderr, "allocbench: cannot connect to %s\n", b->target.url); return -1; }
    redisFree(c);
    return 0;
}

/* A fresh allocd (clean memory peak) on an empty Redis for every run. */
static int fresh_daemon(bench *b, int chunk)
{
    if (fresh_redis(b) < 0) return -1;
    if (b->opt.no_daemon) return 0;
    bench_daemon_opts d = {
        .bin = b->opt.allocd_bin, .dir = b->dir, .redis_url = b->target.url,
        .prefix = b->opt.prefix, .chunk = chunk, .registry_ms = b->opt.registry_ms,
        .log_format = b->opt.log_format, .heap_reserve_mb = b->opt.heap_reserve_mb,
    };
    if (bench_daemon_start(&b->daemon, &d) < 0) return -1;
    if (b->opt.rt && make_realtime(b->daemon.pid, RT_PRIO_ALLOCD, "allocd") < 0) {
        bench_daemon_stop(&b->daemon);
        return -1;
    }
    proc_sleep_us(200000); /* connected, first registry poll done */
    return 0;
}

static pid_t daemon_pid(const bench *b)
{
    return b->opt.no_daemon ? b->opt.daemon_pid : b->daemon.pid;
}

static void next_batch(bench *b, const char *what, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%d-%d", what, (int)getpid(), ++b->batch_seq);
}

static void cleanup(bench *b, const char *batch)
{
    redisContext *c = bench_connect(&b->target);
    if (!c) return;
    batch_cleanup(c, b->opt.prefix, batch);
    redisFree(c);
}

/* ------------------------------------------------------------- runs --- */

static row *new_row(bench *b, scenario_id sc, const char *mode, int chunk)
{
    if (b->n_rows == MAX_ROWS) return NULL;
    row *r = &b->rows[b->n_rows++];
    memset(r, 0, sizeof *r);
    r->load = bench_loadavg();
    r->sc = sc;
    r->chunk = chunk;
    snprintf(r->mode, sizeof r->mode, "%s", mode);
    const options *o = &b->opt;
    workload_init(&r->w, sc, o->requests, o->users, o->items, o->hold_ms, o->seed);
    r->w.lanes = (long)o->producers * (o->batches > 1 ? o->batches : 1);
    return r;
}

static void run_allocd(bench *b, row *r, const char *batch, int live, double rate)
{
    char err[256];
    run_opts ro = {
        .target = &b->target, .w = &r->w, .prefix = b->opt.prefix, .batch = batch,
        .batches = b->opt.batches, .live = live, .tick_us = b->opt.tick_us,
        .producers = b->opt.producers, .depth = b->opt.depth, .rate = rate, .timeout_s = b->opt.timeout_s, .chunk = r->chunk, .allocd_pid = daemon_pid(b),
        .redis_pid = b->redis_pid, .timeline = b->opt.timeline && !live,
        .heap_reserved = args_heap_reserved(&b->opt),
    };
    fprintf(stderr, "allocbench: %s %s (chunk %d, %ld requests): allocd...\n",
            scenario_name(r->sc), r->mode, r->chunk, r->w.n);
    r->has_a = 1;
    r->a_ok = allocd_run(&ro, &r->a, err, sizeof err) == 0;
    if (!r->a_ok) fprintf(stderr, "allocbench: allocd run failed: %s\n", err);
    if (r->a.missing) fprintf(stderr, "allocbench: %ld ids have no result\n", r->a.missing);
}

/* The Lua and lock designs of designs (a pair runs Lua alone: the lock
 * design's ten seconds would only lengthen the run). */
static void run_alts(bench *b, row *r, const char *batch, int designs)
{
    char err[256];
    alt_opts ao = {
        .target = &b->target, .w = &r->w, .batch = batch, .conns = b->opt.producers,
        .depth = b->opt.depth, .threads = b->opt.lock_threads, .max_seconds = b->opt.lua_seconds,
        .lock_sleep_us = b->opt.lock_sleep_us, .lock_precheck = b->opt.lock_precheck,
        .redis_pid = b->redis_pid,
    };
    if (designs & D_LUA) {
        fprintf(stderr, "allocbench: %s: lua design...\n", scenario_name(r->sc));
        r->has_lua = 1;
        r->lua_ok = alt_lua_run(&ao, &r->lua, err, sizeof err) == 0;
        if (!r->lua_ok) fprintf(stderr, "allocbench: lua run failed: %s\n", err);
    }
    if (!(designs & D_LOCK)) return;
    fprintf(stderr, "allocbench: %s: lock design (%d threads, cap %d s)...\n",
            scenario_name(r->sc), ao.threads, b->opt.lock_seconds);
    ao.max_seconds = b->opt.lock_seconds;
    r->has_lock = 1;
    r->lock_ok = alt_lock_run(&ao, &r->lock, err, sizeof err) == 0;
    if (!r->lock_ok) fprintf(stderr, "allocbench: lock run failed: %s\n", err);
}

static row *run_one(bench *b, scenario_id sc, int live, double rate, int chunk, int designs)
{
    char mode[32], batch[96];
    if (rate > 0) snprintf(mode, sizeof mode, "live@%.0f", rate);
    else snprintf(mode, sizeof mode, "%s", live ? "live" : "prepushed");
    if (b->opt.batches > 1) /* "prepushed/4b": the requests spread over 4 batches */
        snprintf(mode + strlen(mode), sizeof mode - strlen(mode), "/%db", b->opt.batches);
    row *r = new_row(b, sc, mode, chunk);
    if (!r || fresh_daemon(b, chunk) < 0) return NULL;
    if (sc == SC_GROUPS_FORMED && (designs & (D_LUA | D_LOCK))) {
        /* the other designs have no invitations: allocd only, beside `groups` */
        fprintf(stderr, "allocbench: groups-formed: allocd only (the Lua and lock designs have no invitations)\n");
        designs &= ~(D_LUA | D_LOCK);
    }
    next_batch(b, scenario_name(sc), batch, sizeof batch);
    if (designs & D_ALLOCD) run_allocd(b, r, batch, live, rate);
    if (designs & (D_LUA | D_LOCK)) run_alts(b, r, batch, designs);
    cleanup(b, batch);
    return r;
}

static void run_scenarios(bench *b)
{
    const options *o = &b->opt;
    for (int sc = 0; sc < SC_COUNT; sc++) {
        if (!o->scenarios[sc]) continue;
        if (o->prepushed) run_one(b, (scenario_id)sc, 0, 0, o->chunk, o->designs);
        if (o->live) run_one(b, (scenario_id)sc, 1, o->rate, o->chunk, o->designs);
    }
}

/* More stock prepushed allocd + Lua pairs (the first one is the stock row
 * of run_scenarios): on a shared machine one pair can be 10% off either
 * way, so the target is judged on the median ratio of the pairs. */
static void run_lua_pairs(bench *b)
{
    for (int i = b->opt.scenarios[SC_STOCK] ? 1 : 0; i < b->opt.lua_pairs; i++)
        run_one(b, SC_STOCK, 0, 0, b->opt.chunk, D_ALLOCD | D_LUA);
}

/* Max live throughput on stock, then the same at half of it (p99 target). */
static void run_rate_test(bench *b)
{
    row *full = run_one(b, SC_STOCK, 1, 0, b->opt.chunk, D_ALLOCD);
    if (!full || !full->a_ok) return;
    b->max_live = full->a.tput;
    row *half = run_one(b, SC_STOCK, 1, b->max_live / 2, b->opt.chunk, D_ALLOCD);
    if (half) snprintf(half->mode, sizeof half->mode, "live@half");
    if (half && b->opt.batches > 1) snprintf(half->mode, sizeof half->mode, "live@half/%db", b->opt.batches);
}

static void run_probe(bench *b)
{
    char batch[96], err[256];
    workload w;
    workload_init(&w, SC_STOCK, b->opt.probe, 0, 0, 0, b->opt.seed);
    if (fresh_daemon(b, b->opt.chunk) < 0) return;
    next_batch(b, "probe", batch, sizeof batch);
    run_opts ro = { .target = &b->target, .w = &w, .prefix = b->opt.prefix, .batch = batch,
                    .chunk = b->opt.chunk };
    fprintf(stderr, "allocbench: probe: %d lone requests...\n", b->opt.probe);
    b->probe_ok = allocd_probe(&ro, b->opt.probe, &b->probe, err, sizeof err) == 0;
    if (!b->probe_ok) fprintf(stderr, "allocbench: probe failed: %s\n", err);
    cleanup(b, batch);
}

/* One housing row (housing.c): n requests, one user each, a fresh daemon;
 * what the batch is written with in `housing`. */
static row *run_housing_row(bench *b, const char *mode, int housing, long n, int settle_rss)
{
    char batch[96], err[256];
    row *r = new_row(b, SC_HOUSING, mode, b->opt.chunk);
    if (!r || fresh_daemon(b, r->chunk) < 0) return NULL;
    workload_init(&r->w, SC_HOUSING, n, n, b->opt.items, 0, b->opt.seed);
    r->w.housing = housing;
    next_batch(b, "housing", batch, sizeof batch);
    run_opts ro = {
        .target = &b->target, .w = &r->w, .prefix = b->opt.prefix, .batch = batch, .batches = 1,
        .timeout_s = b->opt.timeout_s, .chunk = r->chunk, .allocd_pid = daemon_pid(b),
        .redis_pid = b->redis_pid, .settle_rss = settle_rss, .preloaded = 1,
        .heap_reserved = args_heap_reserved(&b->opt),
    };
    fprintf(stderr, "allocbench: housing %s (%ld requests and users)...\n", mode, n);
    r->has_a = 1;
    r->a_ok = allocd_run(&ro, &r->a, err, sizeof err) == 0;
    if (!r->a_ok) fprintf(stderr, "allocbench: housing run failed: %s\n", err);
    cleanup(b, batch);
    return r;
}

/* --scenario housing-elig: pairs of the same round without eligibility and
 * with it (profiles for every user, rules on most rooms), every other pair
 * in reverse; the rows stay in (off, on) order for the target. The engine
 * alone runs after all of them: its hundreds of megabytes allocated and
 * freed between two pairs slowed the run after them by 15-20%, which made
 * the order inside a pair, not eligibility, decide its ratio. */
static void run_housing(bench *b)
{
    int pairs = 0;
    for (int i = 0; i < b->opt.housing_pairs && b->n_rows + 2 <= MAX_ROWS; i++) {
        int first = b->n_rows;
        for (int k = 0; k < 2; k++) {
            int on = i % 2 ? !k : k;
            run_housing_row(b, on ? "elig-on" : "elig-off", on ? HOUSING_PROFILES | HOUSING_RULES : 0,
                            b->opt.requests, 0);
        }
        if (i % 2 && b->n_rows == first + 2) {
            row t = b->rows[first];
            b->rows[first] = b->rows[first + 1];
            b->rows[first + 1] = t;
        }
        if (b->n_rows == first + 2) pairs++;
    }
    for (int i = 0; i < pairs; i++) housing_engine_pair(b, &b->rows[b->n_rows - 1].w);
}

/* --profile-memory U: the same U users without profiles, then with (no
 * rules either way: the same decisions), allocd's RSS once served. */
static void run_profile_memory(bench *b)
{
    run_housing_row(b, "no-profiles", 0, b->opt.profile_memory, 1);
    run_housing_row(b, "profiles", HOUSING_PROFILES, b->opt.profile_memory, 1);
}

static void run_sweep(bench *b)
{
    if (b->opt.no_daemon) {
        fprintf(stderr, "allocbench: --chunk-sweep needs its own daemon; skipped\n");
        return;
    }
    for (int i = 0; i < b->opt.n_sweep; i++) {
        row *r = run_one(b, SC_STOCK, 0, 0, b->opt.sweep[i], D_ALLOCD);
        if (r) r->sweep = 1;
    }
}

/* ------------------------------------------------- live end to end --- */



static workload e2e_workload(const bench *b)
{
    workload w;
    const options *o = &b->opt;
    workload_init(&w, SC_STOCK, o->requests, o->users, o->items, o->hold_ms, o->seed);
    return w;
}

enum { PUSH_TXN, PUSH_PLAIN, PUSH_PEEK };

/* allocd live, every result read by the poller; fresh daemon, empty Redis. */
static int e2e_allocd(bench *b, const workload *w, int push, double rate, run_result *res)
{
    static const char *const names[] = { "position txn", "plain RPUSH", "peek (HGET/RPUSH/HGET)" };
    char batch[96], err[256];
    int plain = push == PUSH_PLAIN;
    if (fresh_daemon(b, b->opt.chunk) < 0) return 0;
    next_batch(b, plain ? "e2e-plain" : "e2e-txn", batch, sizeof batch);
    run_opts ro = {
        .target = &b->target, .w = w, .prefix = b->opt.prefix, .batch = batch, .batches = 1,
        .live = 1, .plain = plain, .peek = push == PUSH_PEEK, .e2e = 1, .rate = rate, .open_loop = rate > 0,
        .timeline = b->opt.timeline,
        .tick_us = b->opt.tick_us, .producers = b->opt.producers, .depth = b->opt.depth,
        .timeout_s = b->opt.timeout_s, .chunk = b->opt.chunk, .allocd_pid = daemon_pid(b),
        .redis_pid = b->redis_pid,
    };
    fprintf(stderr, "allocbench: e2e allocd %s%s%.0f...\n", names[push], rate > 0 ? " paced at " : "", rate);
    int ok = allocd_run(&ro, res, err, sizeof err) == 0 && !res->missing;
    if (!ok) fprintf(stderr, "allocbench: e2e allocd run failed: %s (%ld missing)\n", err, res->missing);
    cleanup(b, batch);
    return ok;
}

static int e2e_lua(bench *b, const workload *w, double rate, alt_result *res)
{
    char batch[96], err[256];
    if (fresh_daemon(b, b->opt.chunk) < 0) return 0;
    next_batch(b, "e2e-lua", batch, sizeof batch);
    alt_opts ao = {
        .target = &b->target, .w = w, .batch = batch, .conns = b->opt.producers, .depth = b->opt.depth,
        .max_seconds = b->opt.lua_seconds, .redis_pid = b->redis_pid, .rate = rate,
        .tick_us = b->opt.tick_us, .open_loop = rate > 0,
    };
    fprintf(stderr, "allocbench: e2e lua%s%.0f...\n", rate > 0 ? " paced at " : "", rate);
    int ok = alt_lua_run(&ao, res, err, sizeof err) == 0 && res->decided == w->n;
    if (!ok) fprintf(stderr, "allocbench: e2e lua run failed: %s\n", err);
    cleanup(b, batch);
    return ok;
}

/* Rounds of (plain, txn, Lua); every other round in reverse, so neither
 * design always runs first on a warm or a cold machine. */
static void run_e2e_pairs(bench *b)
{
    workload w = e2e_workload(b);
    for (int i = 0; i < b->opt.e2e_pairs && b->n_pairs < MAX_E2E; i++) {
        e2e_pair *p = &b->pairs[b->n_pairs++];
        memset(p, 0, sizeof *p);
        p->load = bench_loadavg();
        p->has_peek = b->opt.peek;
        if (i % 2 == 0) {
            p->ok_plain = e2e_allocd(b, &w, PUSH_PLAIN, 0, &p->plain);
            p->ok_txn = e2e_allocd(b, &w, PUSH_TXN, 0, &p->txn);
            if (p->has_peek) p->ok_peek = e2e_allocd(b, &w, PUSH_PEEK, 0, &p->peek);
            p->ok_lua = e2e_lua(b, &w, 0, &p->lua);
        } else {
            p->ok_lua = e2e_lua(b, &w, 0, &p->lua);
            if (p->has_peek) p->ok_peek = e2e_allocd(b, &w, PUSH_PEEK, 0, &p->peek);
            p->ok_txn = e2e_allocd(b, &w, PUSH_TXN, 0, &p->txn);
            p->ok_plain = e2e_allocd(b, &w, PUSH_PLAIN, 0, &p->plain);
        }
    }
}


static void ol_fill_allocd(ol_row *r, const run_result *a)
{
    r->accepted = a->tput;
    r->p50 = a->p50;
    r->p99 = a->p99;
    r->pmax = a->pmax;
    r->redis_us = a->redis_usec_per_req;
    r->cmds = a->cmds;
    r->n = a->n;
}

static void ol_fill_lua(ol_row *r, const alt_result *l)
{
    r->accepted = l->tput;
    r->p50 = l->p50;
    r->p99 = l->p99;
    r->pmax = l->pmax;
    r->redis_us = l->redis_usec_per_req;
    r->cmds = l->cmds;
    r->n = l->decided;
}

/* One run of design d (0 allocd, 1 Lua) at r->offered into run. */
static void ol_run_once(bench *b, const workload *w, int d, const ol_row *r, ol_row *run)
{
    memset(run, 0, sizeof *run);
    if (d) {
        alt_result l;
        run->ok = e2e_lua(b, w, r->offered, &l);
        ol_fill_lua(run, &l);
        return;
    }
    run_result *a = calloc(1, sizeof *a);
    if (!a) return;
    run->ok = e2e_allocd(b, w, PUSH_PLAIN, r->offered, a);
    ol_fill_allocd(run, a);
    free(a);
}

static int cmp_run_p99(const void *x, const void *y)
{
    double a = (*(const ol_row *const *)x)->p99, c = (*(const ol_row *const *)y)->p99;
    return a < c ? -1 : a > c;
}


/* The row from its n runs: each figure the median of the runs that
 * succeeded, the commands of the run with the median p99. */
static void ol_combine(ol_row *r, const ol_row *runs, int n)
{
    const ol_row *good[MAX_OL_RUNS];
    double v[5][MAX_OL_RUNS];
    int k = 0;
    r->ok = 1;
    r->runs = n;
    for (int i = 0; i < n; i++) {
        r->p99_run[i] = runs[i].ok ? runs[i].p99 : -1;
        if (!runs[i].ok) { r->ok = 0; continue; }
        good[k] = &runs[i];
        v[0][k] = runs[i].accepted; v[1][k] = runs[i].p50; v[2][k] = runs[i].p99;
        v[3][k] = runs[i].pmax; v[4][k] = runs[i].redis_us;
        k++;
    }
    if (!k) return;
    r->accepted = median_of(v[0], k); r->p50 = median_of(v[1], k); r->p99 = median_of(v[2], k);
    r->pmax = median_of(v[3], k); r->redis_us = median_of(v[4], k);
    qsort(good, (size_t)k, sizeof *good, cmp_run_p99);
    r->cmds = good[k / 2]->cmds;
    r->n = good[k / 2]->n;
}

/* Open loop without --open-loop-runs: runs per row; without --e2e-pairs or
 * --saturation: the e2e rounds that measure the saturation. */
enum { OL_RUNS_DEFAULT = 3, OL_SATURATION_ROUNDS = 3 };

/* Paced at 25/50/75/90% of each design's own e2e saturation (the median
 * of the rounds; OL_SATURATION_ROUNDS first when none ran). Each row runs
 * --open-loop-runs times, the two designs taking turns to go first. */
static void run_open_loop(bench *b)
{
    static const int dflt[] = { 25, 50, 75, 90 };
    const int *pcts = b->opt.n_ol_pcts ? b->opt.ol_pcts : dflt;
    int n_pcts = b->opt.n_ol_pcts ? b->opt.n_ol_pcts : 4;
    int n_runs = b->opt.ol_runs ? b->opt.ol_runs : OL_RUNS_DEFAULT;
    double sat_a = b->opt.saturation, sat_l = b->opt.saturation;
    if (!sat_a) {
        if (b->n_pairs == 0) { int keep = b->opt.e2e_pairs; b->opt.e2e_pairs = OL_SATURATION_ROUNDS; run_e2e_pairs(b); b->opt.e2e_pairs = keep; }
        sat_a = report_e2e_median(b, 2);
        sat_l = report_e2e_median(b, 3);
    }
    workload w = e2e_workload(b);
    ol_row *runs = calloc(2 * (size_t)n_runs, sizeof *runs);
    if (!runs) return;
    for (int k = 0; k < n_pcts && b->n_ol + 2 <= MAX_OL; k++) {
        ol_row *rows[2] = { NULL, NULL };
        for (int d = 0; d < 2; d++) {
            if (!(b->opt.designs & (d ? D_LUA : D_ALLOCD))) continue;
            ol_row *r = rows[d] = &b->ol[b->n_ol++];
            memset(r, 0, sizeof *r);
            r->design = d ? "lua" : "allocd";
            r->pct = pcts[k];
            r->saturation = d ? sat_l : sat_a;
            r->offered = r->saturation * pcts[k] / 100.0;
            r->load = bench_loadavg();
        }
        for (int i = 0; i < n_runs; i++)
            for (int j = 0; j < 2; j++) {
                int d = i % 2 ? 1 - j : j;
                if (rows[d] && rows[d]->offered > 0) ol_run_once(b, &w, d, rows[d], &runs[d * n_runs + i]);
            }
        for (int d = 0; d < 2; d++)
            if (rows[d] && rows[d]->offered > 0) ol_combine(rows[d], &runs[d * n_runs], n_runs);
    }
    free(runs);
}

/* The p99 target: pairs of runs, allocd and Lua both paced at
 * Lua's 50%-of-saturation rate (one absolute rate, so neither design is
 * offered less for being slower), the designs taking turns to go first. */
static void run_same_rate(bench *b)
{
    int n = b->opt.same_pairs ? b->opt.same_pairs : b->opt.ol_runs ? b->opt.ol_runs : OL_RUNS_DEFAULT;
    double sat_l = b->opt.saturation ? b->opt.saturation : report_e2e_median(b, 3);
    if (sat_l <= 0 || (b->opt.designs & (D_ALLOCD | D_LUA)) != (D_ALLOCD | D_LUA)) return;
    workload w = e2e_workload(b);
    ol_row r;
    memset(&r, 0, sizeof r);
    r.offered = b->same_rate = sat_l * 0.5;
    for (int i = 0; i < n && i < MAX_OL_RUNS; i++) {
        ol_row run[2];
        for (int j = 0; j < 2; j++) {
            int d = i % 2 ? 1 - j : j;
            ol_run_once(b, &w, d, &r, &run[d]);
        }
        for (int d = 0; d < 2; d++) b->same_p99[d][i] = run[d].ok ? run[d].p99 : -1;
        b->n_same++;
    }
}

/* The contract's floor (floor_contract.h) FLOOR_CONTRACT_RUNS times, each
 * on a new Redis. */
static void floor_contract_repeat(bench *b, floor_kind kind, floor_contract_runs *out)
{
    static const char *const what[FLOOR_KINDS] = { "e2e, plain RPUSH", "e2e, position transaction", "the drain" };
    fprintf(stderr, "allocbench: the contract's floor (%s): its writes on a new Redis, no allocd, %d runs...\n",
            what[kind], FLOOR_CONTRACT_RUNS);
    workload w = e2e_workload(b);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < FLOOR_CONTRACT_RUNS; i++) {
        if (fresh_redis(b) < 0) { snprintf(out->err, sizeof out->err, "cannot start redis-server again"); break; }
        if (floor_contract_measure(&b->target, b->redis_pid, &w, b->opt.chunk, kind, &out->run[out->n], out->err,
                                   sizeof out->err) == 0)
            out->n++;
        else
            fprintf(stderr, "allocbench: the contract's floor: %s\n", out->err);
    }
}

/* The floor beside the e2e rounds: Redis alone, RPUSH + HGET (floor.h). */
static void run_floor(bench *b)
{
    fprintf(stderr, "allocbench: the floor: redis-benchmark RPUSH and HGET...\n");
    b->floor_ok = floor_measure(&b->target, 1000000, 64, &b->floor, b->floor_err, sizeof b->floor_err) == 0;
    if (!b->floor_ok) fprintf(stderr, "allocbench: the floor: %s\n", b->floor_err);
    floor_contract_repeat(b, FLOOR_E2E, &b->floor_e2e);
    floor_contract_repeat(b, FLOOR_E2E_TXN, &b->floor_txn);
}

/* Beside the drain pairs: the contract's writes alone for a queue pushed
 * before the clock (floor_contract.h), on a new Redis. */
static void run_floor_drain(bench *b)
{
    int pairs = 0;
    for (int i = 0; i < b->n_rows; i++) pairs += report_drain_pair(&b->rows[i]);
    if (!pairs) return;
    floor_contract_repeat(b, FLOOR_DRAIN, &b->floor_drain);
}

/* What a row's Redis keeps across a crash. */
static void read_durability(bench *b)
{
    snprintf(b->durability, sizeof b->durability, "unknown");
    redisContext *c = bench_connect(&b->target);
    if (!c) return;
    redisReply *ao = redisCommand(c, "CONFIG GET appendonly"), *fs = redisCommand(c, "CONFIG GET appendfsync"),
               *sv = redisCommand(c, "CONFIG GET save");
    int aof = ao && ao->type == REDIS_REPLY_ARRAY && ao->elements == 2 && !strcmp(ao->element[1]->str, "yes");
    int rdb = sv && sv->type == REDIS_REPLY_ARRAY && sv->elements == 2 && sv->element[1]->len > 0;
    if (aof && fs && fs->type == REDIS_REPLY_ARRAY && fs->elements == 2)
        snprintf(b->durability, sizeof b->durability, "AOF appendfsync %s", fs->element[1]->str);
    else
        snprintf(b->durability, sizeof b->durability, rdb ? "RDB snapshots only" : "none (no AOF, no RDB)");
    if (ao) freeReplyObject(ao);
    if (fs) freeReplyObject(fs);
    if (sv) freeReplyObject(sv);
    redisFree(c);
}

/* Rounds over the configurations (1x1, 3x3, 3x1, 1x1, ...) so that each
 * configuration sees the same spread of load on a shared machine. */
static int run_cluster(const options *o)
{
    int total = o->n_cluster * o->runs, failed = 0;
    cluster_result *res = calloc((size_t)total, sizeof *res);
    if (!res) return 1;
    workload w;
    workload_init(&w, SC_STOCK, o->requests, o->users, o->items, o->hold_ms, o->seed);
    double load0 = bench_loadavg();
    for (int r = 0; r < o->runs; r++)
        for (int c = 0; c < o->n_cluster; c++) {
            char err[256];
            cluster_opts co = {
                .allocd_bin = o->allocd_bin, .prefix = o->prefix, .w = &w, .masters = o->cl_masters[c],
                .instances = o->cl_instances[c], .batches = o->batches, .chunk = o->chunk,
                .registry_ms = o->registry_ms, .timeout_s = o->timeout_s, .run = r + 1,
            };
            cluster_result *x = &res[r * o->n_cluster + c];
            if (cluster_bench_run(&co, x, err, sizeof err) < 0) {
                fprintf(stderr, "allocbench: cluster %dx%d run %d failed: %s\n", co.masters, co.instances, r + 1, err);
                failed = 1;
            }
            if (x->log_lines) fprintf(stderr, "allocbench: %ld lines in the allocd logs (warning or worse)\n", x->log_lines);
        }
    char cpu[128];
    report_cpu_model(cpu, sizeof cpu);
    printf("machine: %ld cores, %s; load average %.2f at the start, %.2f at the end (others share it)\n"
           "setup: redis on loopback TCP (M = 1: plain Redis; M > 1: cluster), allocd %s, chunk %d, "
           "stock, %ld requests pre-pushed over %d batches, timed from SADD to the last result\n",
           sysconf(_SC_NPROCESSORS_ONLN), cpu, load0, bench_loadavg(), o->allocd_bin, o->chunk, w.n, o->batches);
    printf("\n%-3s %-3s %-3s %-3s %8s %7s %9s %9s %7s %7s %8s %8s %9s %5s %-11s %-11s %3s %5s\n", "M", "N", "K", "run",
           "n", "secs", "req/s", "drain/s", "coresR", "coresA", "cpuR_us", "cpuA_us", "cpuBench", "load", "per_master",
           "per_inst", "log", "ok");
    for (int i = 0; i < total; i++) {
        const cluster_result *x = &res[i];
        char pm[64] = "", pi[64] = "";
        for (int m = 0, at = 0; m < x->masters && at < (int)sizeof pm - 4; m++)
            at += snprintf(pm + at, sizeof pm - (size_t)at, "%s%d", m ? "/" : "", x->per_master[m]);
        for (int m = 0, at = 0; m < x->instances && at < (int)sizeof pi - 4; m++)
            at += snprintf(pi + at, sizeof pi - (size_t)at, "%s%d", m ? "/" : "", x->per_instance[m]);
        printf("%-3d %-3d %-3d %-3d %8ld %7.2f %9.0f %9.0f %7.2f %7.2f %8.2f %8.2f %9.2f %5.2f %-11s %-11s %3ld %5s\n",
               x->masters, x->instances, x->batches, x->run, x->n, x->secs, x->tput, x->tput_drain, x->redis_cores,
               x->allocd_cores, x->redis_us_per_req, x->allocd_us_per_req, x->cpu_bench_s, x->load, pm, pi,
               x->log_lines, x->ok ? "yes" : "NO");
    }
    printf("\n");
    for (int i = 0; i < total; i++) {
        const cluster_result *x = &res[i];
        printf("RESULT scenario=cluster masters=%d instances=%d batches=%d run=%d n=%ld load=%.2f ok=%d "
               "throughput=%.0f throughput_drain=%.0f seconds=%.3f results=%ld missing=%ld granted=%ld rejected=%ld misplaced=%d "
               "log_lines=%ld cpu_redis_s=%.3f cpu_allocd_s=%.3f cpu_bench_s=%.3f redis_cores=%.2f "
               "allocd_cores=%.2f cpu_redis_us_per_req=%.2f cpu_allocd_us_per_req=%.2f",
               x->masters, x->instances, x->batches, x->run, x->n, x->load, x->ok, x->tput, x->tput_drain, x->secs, x->results,
               x->missing, x->granted, x->rejected, x->misplaced, x->log_lines, x->cpu_redis_s, x->cpu_allocd_s,
               x->cpu_bench_s, x->redis_cores, x->allocd_cores, x->redis_us_per_req, x->allocd_us_per_req);
        for (int m = 0; m < x->masters; m++) printf(" cpu_redis%d_s=%.3f", m + 1, x->node_cpu_s[m]);
        for (int m = 0; m < x->instances; m++) printf(" cpu_allocd%d_s=%.3f", m + 1, x->inst_cpu_s[m]);
        printf("\n");
    }
    free(res);
    return failed;
}

/* ---------------------------------------------------------- tickets --- */

/* The tickets scenario (bench/tickets.h): allocd with wait:true, then the
 * Lua design with polling losers, on the same Redis. --users buyers
 * (default 100,000), a tenth as many tickets, --hold-ms (default 2000). */
static int run_tickets(bench *b)
{
    options *o = &b->opt;
    if (start_redis(b) < 0 || fresh_daemon(b, o->chunk) < 0) { stop_all(b); return 1; }
    tickets_opts t = {
        .target = &b->target, .prefix = o->prefix, .buyers = o->users ? o->users : 100000,
        .hold_ms = o->hold_ms ? o->hold_ms : 2000,
        .seconds = o->tickets_seconds ? o->tickets_seconds : 12, .retry_ms = 200, .seed = o->seed | 1,
    };
    t.tickets = t.buyers / 10;
    tickets_result a, l;
    char err[256] = "";
    double load0 = bench_loadavg();
    int fa = tickets_allocd(&t, &a, err, sizeof err);
    if (fa < 0) fprintf(stderr, "allocbench: tickets, allocd: %s\n", err);
    if (fa == 0 && b->daemon.pid > 0 && !bench_daemon_alive(&b->daemon)) {
        fprintf(stderr, "allocbench: tickets: allocd died during the run (its log: %s)\n", b->dir);
        fa = -1;
    }
    if (b->daemon.pid > 0) bench_daemon_stop(&b->daemon);
    int fl = tickets_lua(&t, &l, err, sizeof err);
    if (fl < 0) fprintf(stderr, "allocbench: tickets, lua: %s\n", err);
    stop_all(b);
    printf("tickets: %ld buyers, %ld tickets, reservations held %d ms, half never paid; %d s after the first wave;\n"
           "load average %.2f at the start, %.2f at the end\n\n", t.buyers, t.tickets, t.hold_ms, t.seconds,
           load0, bench_loadavg());
    printf("%-22s %10s %12s %10s %10s %8s %10s %10s %10s\n", "design", "wave_s", "wave_req/s", "calls",
           "calls/s", "paid", "returned", "regranted", "to_longest");
    const struct { const char *name; tickets_result *r; int failed; } rows[] = {
        { "allocd (wait:true)", &a, fa < 0 }, { "lua (losers retry)", &l, fl < 0 },
    };
    for (int i = 0; i < 2; i++) {
        const tickets_result *r = rows[i].r;
        printf("%-22s %10.2f %12.0f %10ld %10.0f %8ld %10ld %10ld %10ld%s\n", rows[i].name, r->first_wave_s,
               r->first_wave_rps, r->calls, r->calls_per_s, r->paid, r->returned, r->regranted,
               r->to_longest_waiting, rows[i].failed ? "  FAILED" : "");
    }
    for (int i = 0; i < 2; i++) {
        const tickets_result *r = rows[i].r;
        printf("RESULT scenario=tickets design=%s sched=%s buyers=%ld tickets=%ld hold_ms=%d first_wave_s=%.3f "
               "first_wave_rps=%.0f calls=%ld calls_per_s=%.0f paid=%ld returned=%ld regranted=%ld "
               "to_longest_waiting=%ld ok=%d\n", i ? "lua" : "allocd", report_sched_name(b), t.buyers, t.tickets, t.hold_ms,
               r->first_wave_s, r->first_wave_rps, r->calls, r->calls_per_s, r->paid, r->returned, r->regranted,
               r->to_longest_waiting, r->ok && !rows[i].failed);
    }
    return fa < 0 || fl < 0;
}

/* ------------------------------------------------------------- main --- */

/* --dry-run: the options were checked as a run would check them; the
 * commands that docs/PERFORMANCE.md gives are tested this way
 * (tests/integration/test_bench.c), as a run takes minutes. */
static int dry_run_done(void)
{
    printf("allocbench: the options are valid (--dry-run: nothing run)\n");
    return 0;
}

int main(int argc, char **argv)
{
    bench b;
    memset(&b, 0, sizeof b);
    if (args_parse(&b.opt, argc, argv) < 0) return 2;
    if (b.opt.n_cluster) {
        if (access(b.opt.allocd_bin, X_OK) < 0) {
            fprintf(stderr, "allocbench: %s is not executable (build it, or --allocd PATH)\n", b.opt.allocd_bin);
            return 2;
        }
        return b.opt.dry_run ? dry_run_done() : run_cluster(&b.opt);
    }
    if (b.opt.no_daemon && !b.opt.redis_url) {
        fprintf(stderr, "allocbench: --no-daemon needs --redis (the daemon's Redis)\n");
        return 2;
    }
    if (!b.opt.no_daemon && access(b.opt.allocd_bin, X_OK) < 0) {
        fprintf(stderr, "allocbench: %s is not executable (build it, or --allocd PATH)\n", b.opt.allocd_bin);
        return 2;
    }
    if (b.opt.pin) {
        /* this process and what it starts (allocd; its threads) on CPUs
         * 1..n-1; the private Redis is moved to CPU 0 once started */
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        if (ncpu < 2 || b.opt.redis_url || bench_pin(0, 1, (int)ncpu - 1) < 0) {
            fprintf(stderr, "allocbench: --pin needs 2 or more CPUs and the private Redis\n");
            return 2;
        }
    }
    if (b.opt.dry_run) return dry_run_done();
    if (b.opt.tickets) return run_tickets(&b);
    b.rows = calloc(MAX_ROWS, sizeof *b.rows);
    if (!b.rows || start_redis(&b) < 0) { free(b.rows); stop_all(&b); return 1; }
    report_redis_version(&b, b.redis_ver, sizeof b.redis_ver);
    b.load_start = bench_loadavg();
    b.fault_us = bench_fault_cost_us();
    read_durability(&b);
    if (b.opt.e2e_pairs) run_e2e_pairs(&b);
    if (b.opt.open_loop) run_open_loop(&b);
    if (b.opt.open_loop) run_same_rate(&b);
    if (b.n_pairs) run_floor(&b);
    if (b.opt.scenarios_given || b.opt.targets || !(b.opt.e2e_pairs || b.opt.open_loop)) run_scenarios(&b);
    if (b.opt.lua_pairs > 1) run_lua_pairs(&b);
    run_floor_drain(&b);
    if (b.opt.rate_test) run_rate_test(&b);
    if (b.opt.probe > 0) run_probe(&b);
    if (b.opt.n_sweep) run_sweep(&b);
    if (b.opt.housing_pairs) run_housing(&b);
    if (b.opt.profile_memory) run_profile_memory(&b);
    stop_all(&b);
    report_print(&b);
    free(b.rows);
    return 0;
}
