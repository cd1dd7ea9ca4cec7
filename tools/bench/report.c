/* report.c -- what allocbench prints: the machine, the tables, one
 * machine-readable RESULT line per run and a TARGET line (MET / NOT MET)
 * per goal of the issue, each from the medians of the paired runs
 * (allocbench.h). */
#include "bench/allocbench.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

/* which: 0 plain/Lua, 1 txn/Lua, 2 allocd plain req/s, 3 Lua req/s, 4
 * allocd txn req/s; the rounds' values into v (MAX_E2E), their count
 * returned */
static int e2e_values(const bench *b, int which, double *v)
{
    int n = 0;
    for (int i = 0; i < b->n_pairs; i++) {
        const e2e_pair *p = &b->pairs[i];
        int ok = which == 1 ? p->ok_txn && p->ok_lua : which == 3 ? p->ok_lua
               : which == 2 ? p->ok_plain : which == 4 ? p->ok_txn : p->ok_plain && p->ok_lua;
        if (!ok) continue;
        v[n++] = which == 0 ? ratio(p->plain.tput, p->lua.tput) : which == 1 ? ratio(p->txn.tput, p->lua.tput)
               : which == 2 ? p->plain.tput : which == 4 ? p->txn.tput : p->lua.tput;
    }
    return n;
}



double report_e2e_median(const bench *b, int which)
{
    double v[MAX_E2E];
    int n = e2e_values(b, which, v);
    return median_of(v, n);
}

/* The median of n values (`what`: rounds, pairs, runs; `unit`: "x" or
 * " ms"), and in out how far it can be trusted (median_ci.h): the 95%
 * interval and where the target stands against it, or that n is too small
 * for one. Sorts v. */
static double median_with_ci(double *v, int n, const char *what, double goal, const char *unit,
                             char *out, size_t cap)
{
    median_ci ci;
    median_ci_of(v, n, 0.95, &ci);
    if (!ci.k) {
        snprintf(out, cap, "; %d %s are too few for a 95%% interval of the median", n, what);
        return ci.median;
    }
    int side = median_ci_side(&ci, goal);
    snprintf(out, cap, "; interval of the median x(%d)..x(%d) = %.2f - %.2f%s (%.1f%%): %s", ci.k, n + 1 - ci.k,
             ci.lo, ci.hi, unit, 100.0 * ci.coverage,
             side > 0 ? "below the target" : side < 0 ? "above the target" : "the target is inside it");
    return ci.median;
}

/* "a,b,c": every run's p99 (ms), "-" for a failed run. */
static void p99_list(const ol_row *r, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < r->runs && at < len; i++) {
        int n = r->p99_run[i] < 0 ? snprintf(out + at, len - at, "%s-", i ? "," : "")
                                  : snprintf(out + at, len - at, "%s%.2f", i ? "," : "", r->p99_run[i]);
        if (n < 0) break;
        at += (size_t)n;
    }
}

/* ----------------------------------------------------------- report --- */

void report_cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        snprintf(buf, len, "%s", colon + 2);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

void report_redis_version(const bench *b, char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    redisContext *c = bench_connect(&b->target);
    if (!c) return;
    redisReply *r = redisCommand(c, "INFO server");
    const char *v = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "redis_version:") : NULL;
    if (v) { snprintf(buf, len, "%s", v + 14); buf[strcspn(buf, "\r\n")] = '\0'; }
    if (r) freeReplyObject(r);
    redisFree(c);
}

/* How Redis and allocd were scheduled (--rt), for the RESULT lines. */
const char *report_sched_name(const bench *b) { return b->opt.rt ? "fifo" : "other"; }

static void print_machine(const bench *b)
{
    char cpu[128];
    report_cpu_model(cpu, sizeof cpu);
    printf("machine: %ld cores, %s; load average %.2f at the start, %.2f at the end (others share it); "
           "a page fault %.2f us\n"
           "redis: durability %s; extra arguments: %s%s%s\n"
           "setup: redis %s (%s); allocd %s, chunk %d, log_format %s, heap_reserve_mb %s; "
           "producers / Lua connections %d x depth %d; "
           "lock threads %d, retry sleep %d-%d us\n",
           sysconf(_SC_NPROCESSORS_ONLN), cpu, b->load_start, bench_loadavg(), b->fault_us, b->durability,
           b->opt.redis_args ? b->opt.redis_args : "none",
           b->opt.pin ? "; pinned (--pin): redis-server on CPU 0, allocd and the bench on the others" : "",
           b->opt.rt ? "; real-time (--rt): redis-server SCHED_FIFO 20, allocd SCHED_FIFO 10, both reset on fork, "
                       "the bench SCHED_OTHER" : "",
           b->redis_ver,
           b->own_redis ? "private, unix socket" : b->target.url,
           b->opt.no_daemon ? "already running" : b->opt.allocd_bin, b->opt.chunk,
           b->opt.log_format ? b->opt.log_format : "chunk",
           b->opt.no_daemon ? "its own" : b->opt.heap_reserve_mb ? b->opt.heap_reserve_mb : "allocd's default",
           b->opt.producers,
           b->opt.depth, b->opt.lock_threads, b->opt.lock_sleep_us, 2 * b->opt.lock_sleep_us);
}

static double pct(long part, long whole) { return whole > 0 ? 100.0 * (double)part / (double)whole : 0; }

static void print_allocd_table(const bench *b)
{
    printf("\nallocd (req/s from SADD or first push to last result; drain: from taking the batch's lease)\n");
    printf("%-13s %-10s %5s %8s %9s %9s %7s %7s %7s %7s %6s %8s %8s %8s %8s %7s %6s %6s %5s\n",
           "scenario", "mode", "chunk", "n", "req/s", "drain/s", "p50ms", "p99ms", "p999ms",
           "cmd/req", "rt/req", "rt/chunk", "redisus", "cpuR_us", "cpuA_us", "peakMB", "B/part", "grant%",
           "load");
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        const run_result *a = &r->a;
        if (!r->has_a) continue;
        printf("%-13s %-10s %5d %8ld %9.0f %9.0f %7.2f %7.2f %7.2f %7.2f %6.3f %8.2f %8.2f %8.2f %8.2f %7.1f %6.0f %6.1f %5.1f%s\n",
               scenario_name(r->sc), r->mode, r->chunk, a->n, a->tput, a->tput_drain, a->p50, a->p99,
               a->p999, a->cmds_per_req, a->rt_per_req, a->rt_per_chunk, a->redis_usec_per_req,
               a->cpu_redis_us, a->cpu_allocd_us, (double)a->hwm_kb / 1024.0, a->bytes_per_participant,
               pct(a->out.granted, a->results), r->load, r->a_ok && !a->missing ? "" : "  FAILED");
    }
}


static void print_compare_table(const bench *b)
{
    printf("\nside by side (same Redis, same request mix, same N; lock runs are capped, decided/s shown)\n");
    printf("%-13s %-10s %9s %9s %9s %7s %7s %9s %7s %7s %8s %8s %8s %9s\n",
           "scenario", "mode", "allocd/s", "drain/s", "lua/s", "xlua", "xlua_d", "lock/s", "xlock",
           "grant%L", "cmdL/req", "cmdK/req", "redisusL", "retry/req");
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (!r->has_lua && !r->has_lock) continue;
        const alt_result *l = &r->lua, *k = &r->lock;
        printf("%-13s %-10s %9.0f %9.0f %9.0f %7.2f %7.2f %9.0f %7.1f %7.1f %8.2f %8.2f %8.2f %9.2f\n",
               scenario_name(r->sc), r->mode, r->a.tput, r->a.tput_drain, l->tput, ratio(r->a.tput, l->tput),
               ratio(r->a.tput_drain, l->tput), k->tput, ratio(r->a.tput, k->tput),
               pct(l->out.granted, l->decided), l->cmds_per_req, k->cmds_per_req, l->redis_usec_per_req,
               ratio((double)k->lock_retries, (double)k->decided));
    }
}

/* name=calls(usec) per request; usec of a script includes its calls. */
static void print_mix(const char *who, const cmdstats *s, long n)
{
    printf("    %-9s", who);
    for (size_t i = 0; i < s->n; i++) {
        double per = (double)s->e[i].calls / (double)(n ? n : 1);
        double us = (double)s->e[i].usec / (double)(n ? n : 1);
        if (per >= 0.001 || us >= 0.01) printf(" %s=%.3f(%.2fus)", s->e[i].name, per, us);
    }
    printf("\n");
}

static void print_cmd_mix(const row *r)
{
    printf("  %s %s chunk %d: Redis commands per request (Redis usec per request)\n",
           scenario_name(r->sc), r->mode, r->chunk);
    if (r->has_a) print_mix("allocd", &r->a.cmds, r->a.n);
    if (r->has_lua) print_mix("lua", &r->lua.cmds, r->lua.decided);
    if (r->has_lock) print_mix("lock", &r->lock.cmds, r->lock.decided);
}

static void print_allocd_fields(const row *r, const run_result *a)
{
    printf(" ok=%d missing=%ld throughput=%.0f throughput_drain=%.0f seconds=%.3f p50_ms=%.3f "
           "p99_ms=%.3f p999_ms=%.3f max_ms=%.3f cmds_per_req=%.3f rt_per_req=%.4f rt_per_chunk=%.2f "
           "redis_usec_per_req=%.2f cpu_redis_us_per_req=%.2f cpu_allocd_us_per_req=%.2f "
           "cpu_bench_us_per_req=%.2f peak_rss_kb=%ld rss_base_kb=%ld participants=%ld "
           "bytes_per_participant=%.1f granted=%ld rejected=%ld other=%ld pos_checked=%ld pos_mismatch=%ld",
           r->a_ok && !a->missing, a->missing, a->tput, a->tput_drain, a->secs, a->p50, a->p99,
           a->p999, a->pmax, a->cmds_per_req, a->rt_per_req, a->rt_per_chunk, a->redis_usec_per_req,
           a->cpu_redis_us, a->cpu_allocd_us, a->cpu_bench_us, a->hwm_kb, a->rss_base_kb,
           a->participants, a->bytes_per_participant, a->out.granted, a->out.rejected, a->out.other,
           a->pos_checked, a->pos_mismatch);
    if (a->load_ms > 0) printf(" load_ms=%.0f", a->load_ms);
}

static void print_alt_fields(const char *who, const alt_result *x, const run_result *a, int has_a)
{
    printf(" %s_ok=%d %s_throughput=%.0f %s_decided=%ld %s_granted=%ld %s_cmds_per_req=%.3f "
           "%s_redis_usec_per_req=%.2f %s_cpu_redis_us_per_req=%.2f",
           who, x->out.errors == 0, who, x->tput, who, x->decided, who, x->out.granted, who,
           x->cmds_per_req, who, x->redis_usec_per_req, who, x->cpu_redis_us);
    if (!strcmp(who, "lock")) printf(" lock_retries=%ld", x->lock_retries);
    if (has_a) printf(" ratio_%s=%.3f ratio_%s_drain=%.3f", who, ratio(a->tput, x->tput), who,
                      ratio(a->tput_drain, x->tput));
}

static void print_result_line(const bench *b, const row *r)
{
    printf("RESULT scenario=%s mode=%s sched=%s chunk=%d n=%ld load=%.2f", scenario_name(r->sc), r->mode,
           report_sched_name(b), r->chunk, r->w.n, r->load);
    if (r->has_a) print_allocd_fields(r, &r->a);
    if (r->has_lua) print_alt_fields("lua", &r->lua, &r->a, r->has_a);
    if (r->has_lock) print_alt_fields("lock", &r->lock, &r->a, r->has_a);
    printf("\n");
}

/* ---------------------------------------------------------- targets --- */

int report_drain_pair(const row *r)
{
    return r->sc == SC_STOCK && !r->sweep && !strcmp(r->mode, "prepushed") && r->has_lua;
}

/* A drain pair both of whose runs succeeded with nothing missing. */
static int drain_pair_ok(const row *r)
{
    return report_drain_pair(r) && r->a_ok && r->lua_ok && !r->a.missing;
}

static const row *find_row(const bench *b, scenario_id sc, const char *mode, int need_alt)
{
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (r->sc == sc && !r->sweep && !strcmp(r->mode, mode) && (!need_alt || r->has_lua)) return r;
    }
    return NULL;
}

static void target(const bench *b, const char *name, int measured, int met, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Under --rt every TARGET and FIGURE line says so, so that no figure of
 * a real-time run passes for the default setup. */
static const char *rt_note(const bench *b)
{
    return b->opt.rt ? " (--rt: Redis and allocd SCHED_FIFO)" : "";
}

/* One TARGET line. */
void report_target(const bench *b, const char *name, int measured, int met, const char *what)
{
    printf("TARGET %-24s %-14s %s%s\n", name, !measured ? "NOT MEASURED" : met ? "MET" : "NOT MET", what,
           rt_note(b));
}

static void target(const bench *b, const char *name, int measured, int met, const char *fmt, ...)
{
    char what[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    report_target(b, name, measured, met, what);
}

/* Pre-pushed queues drained by allocd against as many pipelined Lua calls:
 * the drain clock starts when a worker takes the batch's lease (load
 * included), as the Lua clock starts at its first call. The time from SADD
 * adds the registry's pickup (up to registry_interval_ms), shown too. */

static void target_lua(const bench *b)
{
    double drain[MAX_ROWS], sadd[MAX_ROWS];
    char list[1000] = "";
    int n = 0;
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (!drain_pair_ok(r)) continue;
        drain[n] = ratio(r->a.tput_drain, r->lua.tput);
        sadd[n] = ratio(r->a.tput, r->lua.tput);
        /* with each pair, Redis's CPU a request for allocd and for Lua: the
         * machine runs at two speeds (PERFORMANCE.md, "The machine"), and
         * a pair whose runs fell at different ones shows it here */
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%.0f/%.0f=%.2f (Redis %.2f/%.2f us)", n ? " " : "",
                 r->a.tput_drain, r->lua.tput, drain[n], r->a.cpu_redis_us, r->lua.cpu_redis_us);
        n++;
    }
    char ci[160];
    double x = median_with_ci(drain, n, "pairs", 2.0, "x", ci, sizeof ci);
    target(b, "drain_vs_lua", n > 0, x >= 2.0,
           "stock prepushed, allocd drain / Lua, median of %d pairs = %.2fx (>= 2.0x)%s [%s]; from SADD median %.2fx",
           n, x, ci, list, median_of(sadd, n));
}

static void target_lock(const bench *b)
{
    const row *r = find_row(b, SC_ROOMS_HOT, "prepushed", 0);
    int m = r && r->a_ok && r->has_lock && r->lock_ok && !r->a.missing;
    double x = m ? ratio(r->a.tput, r->lock.tput) : 0;
    target(b, "throughput_vs_lock", m, x >= 50,
           "rooms-hot prepushed: allocd %.0f/s vs lock %.0f/s = %.1fx (>= 50x)",
           m ? r->a.tput : 0, m ? r->lock.tput : 0, x);
}

/* The old latency target, p99 < 5 ms at half of allocd's own saturation:
 * issue 37 replaced it by open_loop_p99_same_rate (two cores shared by
 * Redis, allocd and the generator cannot hold it), so it is printed as a
 * figure, not as a TARGET line. */
static void figure_p99_at_half(const bench *b)
{
    const row *r = find_row(b, SC_STOCK, "live@half", 0);
    if (!r || !r->a_ok || r->a.missing || r->a.p99 < 0) return;
    printf("FIGURE p99_at_half_max            stock live paced at %.0f req/s (half of the unpaced %.0f/s): "
           "p50 %.2f p99 %.2f p999 %.2f ms (no longer a target: open_loop_p99_same_rate replaced it)%s\n",
           r->a.rate, b->max_live, r->a.p50, r->a.p99, r->a.p999, rt_note(b));
}

static void target_probe(const bench *b)
{
    const probe_result *p = &b->probe;
    target(b, "lone_request", b->probe_ok, p->p99 < 1.0,
           "%ld lone requests, push -> result visible: p50 %.3f p99 %.3f max %.3f ms (p99 < 1 ms)",
           p->samples, p->p50, p->p99, p->max);
}

static void target_memory(const bench *b)
{
    const row *best = NULL;
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (r->a.bytes_per_participant > 0 && (!best || r->a.participants > best->a.participants)) best = r;
    }
    int at_scale = best && best->a.participants >= 1000000;
    if (!best) {
        target(b, "memory_per_participant", 0, 0, "%s", args_heap_reserved(&b->opt)
               ? "allocd keeps its heap reserve (heap_reserve_mb), so its RSS does not show what it holds; "
                 "run make bench-memory (it sets --heap-reserve-mb 0)"
               : "no allocd memory figure (--no-daemon without --pid?)");
        return;
    }
    target(b, "memory_per_participant", at_scale, best->a.bytes_per_participant <= 256,
           "%s: %.0f bytes/participant at %ld participants (peak RSS %.1f MB, base %.1f MB) "
           "(<= 256 at 1,000,000%s)", scenario_name(best->sc), best->a.bytes_per_participant,
           best->a.participants, (double)best->a.hwm_kb / 1024, (double)best->a.rss_base_kb / 1024,
           at_scale ? "" : "; run make bench-memory");
}

static void target_rt(const bench *b)
{
    char what[300] = "";
    size_t at = 0;
    double lo = 1e18, hi = 0;
    int n = 0;
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (!r->sweep || !r->a_ok) continue;
        at += (size_t)snprintf(what + at, at < sizeof what ? sizeof what - at : 0, "%schunk %d: %.2f",
                               n ? ", " : "", r->chunk, r->a.rt_per_chunk);
        if (r->a.rt_per_chunk < lo) lo = r->a.rt_per_chunk;
        if (r->a.rt_per_chunk > hi) hi = r->a.rt_per_chunk;
        n++;
    }
    target(b, "round_trips_per_chunk", n >= 2, n >= 2 && hi <= lo * 1.15,
           "stock prepushed round trips per chunk: %s (constant within 15%%)", n ? what : "no sweep run");
}

static void target_e2e(const bench *b)
{
    char list[2][400] = { "", "" };
    for (int i = 0; i < b->n_pairs; i++) {
        const e2e_pair *p = &b->pairs[i];
        for (int t = 0; t < 2; t++) {
            const run_result *a = t ? &p->txn : &p->plain;
            int ok = (t ? p->ok_txn : p->ok_plain) && p->ok_lua;
            size_t len = strlen(list[t]);
            if (ok) snprintf(list[t] + len, sizeof list[t] - len, "%s%.0f/%.0f=%.2f", len ? " " : "",
                             a->tput, p->lua.tput, ratio(a->tput, p->lua.tput));
        }
    }
    double v[2][MAX_E2E];
    char ci[2][160];
    int n0 = e2e_values(b, 0, v[0]), n1 = e2e_values(b, 1, v[1]);
    double r0 = median_with_ci(v[0], n0, "rounds", 1.8, "x", ci[0], sizeof ci[0]);
    double r1 = median_with_ci(v[1], n1, "rounds", 1.3, "x", ci[1], sizeof ci[1]);
    target(b, "live_e2e_vs_lua_rpush", n0 > 0, r0 >= 1.8,
           "stock live, plain RPUSH producers, every result read once: allocd / Lua, median of %d rounds "
           "= %.2fx (>= 1.8x)%s [%s]", n0, r0, ci[0], list[0]);
    target(b, "live_e2e_vs_lua_txn", n1 > 0, r1 >= 1.3,
           "stock live, position transaction producers, every result read once: allocd / Lua, median of "
           "%d rounds = %.2fx (>= 1.3x)%s [%s]", n1, r1, ci[1], list[1]);
}

/* allocd's p99 over Lua's at one offered rate, Lua's 50% of saturation:
 * the median of the pairs' ratios, at most 0.5. */
static void target_open_loop(const bench *b)
{
    double v[MAX_OL_RUNS];
    char list[MAX_OL_RUNS * 24] = "", ci[160] = "";
    size_t at = 0;
    int n = 0;
    for (int i = 0; i < b->n_same && at < sizeof list; i++) {
        double a = b->same_p99[0][i], l = b->same_p99[1][i];
        int k = snprintf(list + at, sizeof list - at, "%s%.2f/%.2f", i ? ", " : "", a, l);
        if (k > 0) at += (size_t)k;
        if (a >= 0 && l > 0) v[n++] = a / l;
    }
    double med = n ? median_with_ci(v, n, "pairs", 0.5, "x", ci, sizeof ci) : 0;
    target(b, "open_loop_p99_same_rate", n > 0, n > 0 && med <= 0.5,
           "allocd p99 / Lua p99, both offered %.0f req/s (Lua's 50%% of its e2e saturation), allocd plain "
           "RPUSH + poller vs Lua inline, median of %d pairs: %.2fx (target <= 0.50x; Redis: %s)%s "
           "[p99 ms allocd/Lua of each pair: %s]", b->same_rate, n, med, b->durability, ci, list);
}

static void print_targets(const bench *b)
{
    printf("\n");
    if (b->n_pairs) target_e2e(b);
    if (b->n_same) target_open_loop(b);
    target_lua(b);
    target_lock(b);
    figure_p99_at_half(b);
    target_probe(b);
    target_memory(b);
    target_rt(b);
}

/* Page faults per request as microseconds: times what one costs here. */
static double fault_us(const bench *b, double faults)
{
    return faults < 0 || b->fault_us < 0 ? -1 : faults * b->fault_us;
}

static void print_e2e_row(const bench *b, const char *what, const run_result *a, int ok)
{
    printf("  %-14s %9.0f %7.2f %7.2f %7.2f %8.2f %8.2f %8.2f %8.2f %7.3f %6.1f%% %7.2f %7.2f%s\n", what, a->tput,
           a->p50, a->p99, a->pmax, a->cpu_redis_us, a->redis_usec_per_req, a->cpu_allocd_us, a->cpu_bench_us,
           a->n ? (double)a->fields_asked / (double)a->n : 0,
           a->fields_asked ? 100.0 * (double)a->nil_fields / (double)a->fields_asked : 0,
           fault_us(b, a->faults_redis), fault_us(b, a->faults_allocd), ok ? "" : "  FAILED");
}

/* One of the contract's floors (floor_contract.h), the least of its
 * runs, beside the e2e medians: Redis's CPU per request, the rate one
 * Redis core allows at that cost (1 / it), and that rate as a multiple of
 * Lua's median: the most any design of the contract reaches here with
 * Redis on a core of its own and nothing else to pay for. The floor's own
 * rate is its one client's, which can be the limit (the transactions),
 * so it is printed but bounds nothing. */
static void print_floor_contract(const bench *b, const floor_contract_runs *runs, const char *push,
                                 double allocd, double lua)
{
    double lo, hi;
    const floor_contract_result *fc = floor_contract_best(runs, &lo, &hi);
    if (!fc) {
        printf("  the contract's floor, %s: not measured (%s)\n", push, runs->err);
        return;
    }
    const fc_pass *f = &fc->pass;
    if (f->cpu_us <= 0) {
        printf("  the contract's floor, %s: its client reached %.0f req/s; Redis's CPU unknown (not the bench's\n"
               "  own redis-server), so no bound\n", push, f->rate);
        return;
    }
    double core = 1e6 / f->cpu_us;
    printf("  the contract's floor, %s, the least of %d runs: Redis CPU %.2f us a request (up to %.2f; %.3f\n"
           "  faults, %.2f us of them; its one client reached %.0f req/s): one Redis core allows %.0f req/s, %.2fx\n"
           "  Lua's median e2e (%.0f req/s); allocd %s (median) %.0f req/s = %.0f%% of that bound\n",
           push, runs->n, f->cpu_us, hi, f->faults, fault_us(b, f->faults), f->rate, core, ratio(core, lua), lua,
           push, allocd, 100.0 * ratio(allocd, core));
    print_mix("floor", &f->cmds, fc->n);
    printf("RESULT floor_contract push=%s rate=%.0f cpu_redis_us_per_req=%.2f cpu_lo=%.2f cpu_hi=%.2f runs=%d "
           "redis_faults_per_req=%.3f core_rate=%.0f lua=%.0f ceiling=%.3f allocd=%.0f allocd_fraction=%.3f\n", push,
           f->rate, f->cpu_us, lo, hi, runs->n, f->faults, core, lua, ratio(core, lua), allocd, ratio(allocd, core));
}

static void print_floors_contract(const bench *b)
{
    const floor_contract_result *any = b->floor_e2e.n ? &b->floor_e2e.run[0] : b->floor_txn.n ? &b->floor_txn.run[0] : NULL;
    printf("  the contract's floor: its writes alone, no allocd, pipelined from one connection, on a new Redis\n"
           "  each run (the bench's own):\n"
           "  the producers' pushes (plain RPUSH, or the position transaction), the take of each chunk of %d, the\n"
           "  result HSET of every request, the holder HSET of every user granted (%ld of %ld), free, stats, the\n"
           "  chunk log and the poller's HMGET of every result\n", b->opt.chunk, any ? any->granted : 0,
           any ? any->n : 0);
    double lua = report_e2e_median(b, 3);
    print_floor_contract(b, &b->floor_e2e, "rpush", report_e2e_median(b, 2), lua);
    print_floor_contract(b, &b->floor_txn, "txn", report_e2e_median(b, 4), lua);
}

/* The floor (floor.h) and each design's median e2e rate as a share of it. */
static void print_floor(const bench *b)
{
    if (!b->floor_ok) {
        printf("\n  floor: not measured (%s)\n", b->floor_err[0] ? b->floor_err : "no e2e rounds");
        print_floors_contract(b);   /* measured on their own */
        return;
    }
    const floor_result *f = &b->floor;
    double plain = report_e2e_median(b, 2), lua = report_e2e_median(b, 3);
    printf("\n  floor: Redis alone, redis-benchmark -P %d -c %d -n %ld: RPUSH %.0f/s, HGET %.0f/s, both for one\n"
           "  request %.0f/s; allocd plain e2e (median) %.0f req/s = %.0f%% of it, Lua %.0f = %.0f%%\n",
           f->pipeline, f->clients, f->n, f->rpush, f->hget, f->per_request, plain,
           100.0 * ratio(plain, f->per_request), lua, 100.0 * ratio(lua, f->per_request));
    printf("RESULT floor rpush=%.0f hget=%.0f per_request=%.0f allocd_plain=%.0f allocd_fraction=%.3f lua=%.0f "
           "lua_fraction=%.3f\n", f->rpush, f->hget, f->per_request, plain, ratio(plain, f->per_request), lua,
           ratio(lua, f->per_request));
    print_floors_contract(b);
}

/* The headline: every round, then the medians. */
static void print_e2e(const bench *b)
{
    if (!b->n_pairs) return;
    printf("\nlive end to end, stock, %ld requests: producers push while the design serves; allocd's results are "
           "all read once by a poller (HMGET) inside the clock; Lua returns its result inline. Redis: %s\n",
           b->opt.requests, b->durability);
    printf("  cpuR_us: Redis process CPU per request (what bounds throughput: one Redis core); redisus:\n"
           "  INFO commandstats usec per request (EXEC and EVALSHA include the commands inside them, which\n"
           "  are also counted on their own lines: the sum counts them twice); cpuA_us: allocd CPU per request;\n"
           "  cpuB_us: the bench's own CPU per request (producers, poller; it shares the 2 cores);\n"
           "  asked/r: result fields the poller asked for per result, nil%%: of those, not yet answered;\n"
           "  pfR_us, pfA_us: Redis's and allocd's page faults per request times what one costs here\n"
           "  (the machine line): the part of cpuR_us and cpuA_us spent mapping memory touched first\n");
    printf("  %-14s %9s %7s %7s %7s %8s %8s %8s %8s %7s %7s %7s %7s\n", "design", "req/s", "p50ms", "p99ms",
           "p100ms", "cpuR_us", "redisus", "cpuA_us", "cpuB_us", "asked/r", "nil%", "pfR_us", "pfA_us");
    for (int i = 0; i < b->n_pairs; i++) {
        const e2e_pair *p = &b->pairs[i];
        printf(" round %d (load %.2f): plain/Lua %.2fx, txn/Lua %.2fx\n", i + 1, p->load,
               ratio(p->plain.tput, p->lua.tput), ratio(p->txn.tput, p->lua.tput));
        print_e2e_row(b, "allocd rpush", &p->plain, p->ok_plain);
        print_e2e_row(b, "allocd txn", &p->txn, p->ok_txn);
        if (p->has_peek) {
            print_e2e_row(b, "allocd peek", &p->peek, p->ok_peek);
            printf("  %-14s peek/Lua %.2fx; %ld of %ld positions a range (the two reads differed), "
                   "%ld exact ones checked, %ld wrong\n", "", ratio(p->peek.tput, p->lua.tput),
                   p->peek.pos_inexact, p->peek.n, p->peek.pos_checked, p->peek.pos_mismatch);
        }
        printf("  %-14s %9.0f %7.2f %7.2f %7.2f %8.2f %8.2f %8s %8.2f %7s %7s %7.2f %7s%s\n", "lua", p->lua.tput,
               p->lua.p50, p->lua.p99, p->lua.pmax, p->lua.cpu_redis_us, p->lua.redis_usec_per_req, "-",
               p->lua.cpu_bench_us, "-", "-", fault_us(b, p->lua.faults_redis), "-", p->ok_lua ? "" : "  FAILED");
    }
    printf(" median of rounds: plain/Lua %.2fx, txn/Lua %.2fx\n", report_e2e_median(b, 0), report_e2e_median(b, 1));
    const e2e_pair *p = &b->pairs[0];
    printf("\n  round 1: Redis commands per request (Redis usec per request), everything in the window;\n"
           "  exec/evalsha usec include the commands run inside them\n");
    print_mix("rpush", &p->plain.cmds, p->plain.n);
    print_mix("txn", &p->txn.cmds, p->txn.n);
    if (p->has_peek) print_mix("peek", &p->peek.cmds, p->peek.n);
    print_mix("lua", &p->lua.cmds, p->lua.decided);
    print_floor(b);
}

static void print_open_loop(const bench *b)
{
    if (!b->n_ol) return;
    printf("\nopen loop, stock, %ld requests per row, paced with no cap in flight; latency from when each "
           "request was due to its result read (allocd: plain RPUSH + poller; Lua: reply). Durability: %s\n",
           b->opt.requests, b->durability);
    printf("  each row: the median of its runs (the designs alternating which goes first); p99 of each run\n"
           "  in run order at the end\n");
    printf("  %-7s %4s %10s %10s %10s %7s %7s %8s %8s %5s  %s\n", "design", "pct", "saturation", "offered",
           "accepted", "p50ms", "p99ms", "p100ms", "redisus", "load", "p99ms of each run");
    for (int i = 0; i < b->n_ol; i++) {
        const ol_row *r = &b->ol[i];
        char list[128];
        p99_list(r, list, sizeof list);
        printf("  %-7s %3d%% %10.0f %10.0f %10.0f %7.2f %7.2f %8.2f %8.2f %5.2f  %s%s\n", r->design, r->pct,
               r->saturation, r->offered, r->accepted, r->p50, r->p99, r->pmax, r->redis_us, r->load, list,
               r->ok ? "" : "  FAILED");
    }
    printf("\n  open loop: Redis commands per request (Redis usec per request), each row's window\n");
    for (int i = 0; i < b->n_ol; i++) {
        char who[24];
        snprintf(who, sizeof who, "%s%d", b->ol[i].design, b->ol[i].pct);
        print_mix(who, &b->ol[i].cmds, b->ol[i].n);
    }
    for (int i = 0; i < b->n_ol; i++) {
        const ol_row *r = &b->ol[i];
        char list[128];
        p99_list(r, list, sizeof list);
        printf("RESULT scenario=openloop design=%s pct=%d durability=\"%s\" sched=%s ok=%d saturation=%.0f offered=%.0f "
               "accepted=%.0f p50_ms=%.3f p99_ms=%.3f p100_ms=%.3f redis_usec_per_req=%.2f load=%.2f runs=%d "
               "p99_ms_runs=%s\n",
               r->design, r->pct, b->durability, report_sched_name(b), r->ok, r->saturation, r->offered, r->accepted, r->p50, r->p99,
               r->pmax, r->redis_us, r->load, r->runs, list);
    }
}

static void print_e2e_results(const bench *b)
{
    for (int i = 0; i < b->n_pairs; i++) {
        const e2e_pair *p = &b->pairs[i];
        const run_result *a[3] = { &p->plain, &p->txn, &p->peek };
        static const char *const push[3] = { "rpush", "txn", "peek" };
        int ok[3] = { p->ok_plain, p->ok_txn, p->ok_peek };
        for (int t = 0; t < (p->has_peek ? 3 : 2); t++)
            printf("RESULT scenario=e2e round=%d push=%s durability=\"%s\" sched=%s ok=%d load=%.2f throughput=%.0f "
                   "p50_ms=%.3f p99_ms=%.3f p100_ms=%.3f redis_usec_per_req=%.2f cpu_redis_us_per_req=%.2f "
                   "cpu_allocd_us_per_req=%.2f hmgets=%ld fields_asked=%ld nil_fields=%ld dequeued_polls=%ld "
                   "pos_checked=%ld pos_mismatch=%ld pos_inexact=%ld lua_ok=%d lua_throughput=%.0f lua_redis_usec_per_req=%.2f "
                   "lua_cpu_redis_us_per_req=%.2f ratio_lua=%.3f redis_faults_per_req=%.3f allocd_faults_per_req=%.3f "
                   "lua_redis_faults_per_req=%.3f fault_us=%.2f\n",
                   i + 1, push[t], b->durability, report_sched_name(b), ok[t], p->load, a[t]->tput,
                   a[t]->p50, a[t]->p99, a[t]->pmax, a[t]->redis_usec_per_req, a[t]->cpu_redis_us,
                   a[t]->cpu_allocd_us, a[t]->hmgets, a[t]->fields_asked, a[t]->nil_fields, a[t]->dequeued_polls,
                   a[t]->pos_checked, a[t]->pos_mismatch, a[t]->pos_inexact, p->ok_lua, p->lua.tput, p->lua.redis_usec_per_req,
                   p->lua.cpu_redis_us, ratio(a[t]->tput, p->lua.tput), a[t]->faults_redis, a[t]->faults_allocd,
                   p->lua.faults_redis, b->fault_us);
    }
}

/* The contract's floor for the drain (floor_contract.h) beside the drain
 * pairs' medians: the ratio Redis's core leaves room for, and how much of
 * Redis's CPU per request allocd adds to the contract's writes. */
static void print_floor_drain(const bench *b)
{
    double lo, hi;
    const floor_contract_result *fd = floor_contract_best(&b->floor_drain, &lo, &hi);
    if (!fd) {
        if (b->floor_drain.err[0]) printf("\n  the contract's floor for the drain: not measured (%s)\n", b->floor_drain.err);
        return;
    }
    double drain[MAX_ROWS], cpu[MAX_ROWS], lua[MAX_ROWS], pf[MAX_ROWS];
    int n = 0;
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (!drain_pair_ok(r) || r->a.cpu_redis_us < 0) continue;   /* < 0: not the bench's own Redis */
        drain[n] = r->a.tput_drain;
        cpu[n] = r->a.cpu_redis_us;
        pf[n] = r->a.faults_redis;
        lua[n++] = r->lua.tput;
    }
    const fc_pass *f = &fd->pass;
    if (f->cpu_us <= 0) {
        printf("\n  the contract's floor for the drain: its client reached %.0f req/s; Redis's CPU unknown (not the\n"
               "  bench's own redis-server), so no bound\n", f->rate);
        return;
    }
    double core = 1e6 / f->cpu_us, l = median_of(lua, n), c = median_of(cpu, n);
    if (!n) {
        printf("\n  the contract's floor for the drain: Redis CPU %.2f us a request (up to %.2f): one Redis core\n"
               "  allows %.0f req/s; no drain pair to set it beside\n", f->cpu_us, hi, core);
        return;
    }
    printf("\n  the contract's floor for the drain: the queue pushed first, then per chunk of %d the take, the\n"
           "  result HSET of every request, the holder HSET of every user granted, free, stats and the chunk log,\n"
           "  on a new Redis each run, no allocd, the least of %d runs: Redis CPU %.2f us a request (up to %.2f; %.3f\n"
           "  faults, %.2f us of them; its one client reached %.0f req/s): one Redis core allows %.0f req/s, %.2fx\n"
           "  Lua's median (%d pairs, %.0f req/s). allocd's drain (median) %.0f req/s with Redis at %.2f us a\n"
           "  request (%.3f faults): %.2f us a request more than the contract's writes (allocd's own commands:\n"
           "  the take's transaction, the fence, the internal keys, LRANGE + LTRIM; and the bench's polls)\n",
           fd->chunk, b->floor_drain.n, f->cpu_us, hi, f->faults, fault_us(b, f->faults), f->rate, core,
           ratio(core, l), n, l, median_of(drain, n), c, median_of(pf, n), c - f->cpu_us);
    print_mix("floor", &f->cmds, fd->n);
    printf("RESULT floor_drain rate=%.0f cpu_redis_us_per_req=%.2f cpu_lo=%.2f cpu_hi=%.2f runs=%d "
           "redis_faults_per_req=%.3f core_rate=%.0f lua=%.0f ceiling=%.3f allocd_drain=%.0f "
           "allocd_cpu_redis_us_per_req=%.2f\n", f->rate, f->cpu_us, lo, hi, b->floor_drain.n, f->faults, core, l,
           ratio(core, l), median_of(drain, n), c);
}

void report_print(const bench *b)
{
    print_machine(b);
    print_e2e(b);
    print_open_loop(b);
    print_e2e_results(b);
    print_allocd_table(b);
    print_compare_table(b);
    printf("\n");
    for (int i = 0; i < b->n_rows; i++) print_cmd_mix(&b->rows[i]);
    print_floor_drain(b);
    printf("\n");
    for (int i = 0; i < b->n_rows; i++) print_result_line(b, &b->rows[i]);
    if (b->probe_ok)
        printf("RESULT scenario=probe sched=%s samples=%ld p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n",
               report_sched_name(b), b->probe.samples, b->probe.p50, b->probe.p99, b->probe.max);
    if (b->opt.targets) print_targets(b);
    else if (b->opt.targets_e2e) {
        printf("\n");
        if (b->n_pairs) target_e2e(b);
        if (b->n_ol) target_open_loop(b);
        if (find_row(b, SC_STOCK, "prepushed", 1)) target_lua(b);
    }
    else if (b->opt.memory) { printf("\n"); target_memory(b); }
    if (b->opt.housing_pairs || b->opt.profile_memory) { printf("\n"); housing_targets(b); }
}

/* ---------------------------------------------------------- cluster --- */
