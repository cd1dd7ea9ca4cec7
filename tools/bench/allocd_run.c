/* allocd_run.c -- allocd measured through its wire contract (designs.h).
 *
 * Nothing here knows the daemon's insides: requests go in with RPUSH (or the
 * contract's MULTI/RPUSH/HGET dequeued/EXEC position transaction), progress
 * is HLEN of the results hash, and every id is checked to have a result at
 * the end. Latency is the result's `at` (allocd's wall clock, ms) minus the
 * producer's wall-clock push time; both clocks are this machine's. The
 * commands the daemon made Redis run come from INFO commandstats around the
 * window, minus what the bench itself sent (tallied in `own`).
 */
#include "designs.h"
#include "median_ci.h"
#include "reader.h"
#include "timeline.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bkeys {
    char name[96];
    char meta[200], capacity[200], attrs[200], queue[200], profiles[200];
    char results[200], stats[200], lease[200];
} bkeys;

/* The batches of one run; request i belongs to k[i % n]. */
typedef struct bset {
    int n;
    bkeys *k;
    char batches[200];        /* P:batches */
} bset;

static int bset_init(bset *s, const char *prefix, const char *batch, int n)
{
    s->n = n > 1 ? n : 1;
    s->k = calloc((size_t)s->n, sizeof *s->k);
    if (!s->k) return -1;
    snprintf(s->batches, sizeof s->batches, "%s:batches", prefix);
    for (int b = 0; b < s->n; b++) {
        bkeys *k = &s->k[b];
        if (s->n == 1) snprintf(k->name, sizeof k->name, "%s", batch);
        else snprintf(k->name, sizeof k->name, "%s.%d", batch, b);
#define K(f, what) snprintf(k->f, sizeof k->f, "%s:{%s}:" what, prefix, k->name)
        K(meta, "meta"); K(capacity, "capacity"); K(attrs, "attrs"); K(queue, "queue"); K(profiles, "profiles");
        K(results, "results"); K(stats, "stats"); K(lease, "lease");
#undef K
    }
    return 0;
}

static const bkeys *bset_of(const bset *s, long i) { return &s->k[i % s->n]; }

/* SADD or SREM every batch of the set to P:batches, in one command. */
static int bset_members(redisContext *c, const bset *s, const char *cmd)
{
    const char **argv = calloc((size_t)s->n + 2, sizeof *argv);
    if (!argv) return -1;
    argv[0] = cmd;
    argv[1] = s->batches;
    for (int b = 0; b < s->n; b++) argv[2 + b] = s->k[b].name;
    int rc = bench_ok_argv(c, s->n + 2, argv, NULL);
    free(argv);
    return rc;
}

static int setup_batch(redisContext *c, const workload *w, const bkeys *k)
{
    int room = scenario_is_room(w->sc);
    /* the `group` scenario names its members (groups listed, version 1);
     * groups-formed forms them by invitation (9.2) */
    if (bench_ok(c, "HSET %s kind %s per_user %d hold_ms %d groups %s", k->meta,
                 room ? "room" : "stock", w->per_user, w->hold_ms,
                 w->sc == SC_GROUPS_FORMED ? "formed" : "listed") < 0) return -1;
    if (workload_write_items(c, w, k->capacity, 0) < 0) return -1;
    if ((w->housing & HOUSING_PROFILES) && housing_write_profiles(c, w, k->profiles) < 0) return -1;
    return room ? workload_write_items(c, w, k->attrs, 1) : 0;
}

static int setup_all(redisContext *c, const workload *w, const bset *s)
{
    for (int b = 0; b < s->n; b++)
        if (setup_batch(c, w, &s->k[b]) < 0) return -1;
    return 0;
}

void batch_cleanup(redisContext *c, const char *prefix, const char *batch)
{
    char pat[3][300];
    snprintf(pat[0], sizeof pat[0], "%s:{%s}:*", prefix, batch);
    snprintf(pat[1], sizeof pat[1], "%s:{%s.*}:*", prefix, batch); /* --batches */
    snprintf(pat[2], sizeof pat[2], "bench:{%s}:*", batch);
    for (int p = 0; p < 3; p++) {
        char cursor[32] = "0";
        do {
            redisReply *r = redisCommand(c, "SCAN %s MATCH %s COUNT 1000", cursor, pat[p]);
            if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) { if (r) freeReplyObject(r); return; }
            snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
            for (size_t i = 0; i < r->element[1]->elements; i++)
                bench_ok(c, "UNLINK %s", r->element[1]->element[i]->str);
            freeReplyObject(r);
        } while (strcmp(cursor, "0"));
    }
}

/* ------------------------------------------------------------ prepush -- */

enum { PUSH_SLICE = 1000, JSON_MAX = 512 };

typedef struct prepush {
    const run_opts *o;
    const bset *bs;
    int b;                    /* the batch being pushed: i = b + n * j */
    char *json;               /* PUSH_SLICE * JSON_MAX */
    const char *argv[PUSH_SLICE + 2];
    size_t lens[PUSH_SLICE + 2];
    int failed;
} prepush;

static void prepush_append(void *ctx, redisContext *c, long unit)
{
    prepush *p = ctx;
    const bkeys *k = &p->bs->k[p->b];
    int argc = 0, stride = p->bs->n;
    p->argv[argc] = "RPUSH"; p->lens[argc++] = 5;
    p->argv[argc] = k->queue; p->lens[argc++] = strlen(k->queue);
    for (long j = unit * PUSH_SLICE; j < (unit + 1) * PUSH_SLICE; j++) {
        long i = p->b + j * stride;
        if (i >= p->o->w->n) break;
        char *buf = p->json + (size_t)(j - unit * PUSH_SLICE) * JSON_MAX;
        int len = workload_json(p->o->w, i, buf, JSON_MAX);
        if (len < 0) { p->failed = 1; len = 0; }
        p->argv[argc] = buf;
        p->lens[argc++] = (size_t)len;
    }
    redisAppendCommandArgv(c, argc, p->argv, p->lens);
}

static void prepush_done(void *ctx, long unit, redisReply *r, int error)
{
    if (error) ((prepush *)ctx)->failed = 1;
}

static long batch_share(long n, int batches, int b) { return (n - b + batches - 1) / batches; }

static int push_all(const run_opts *o, const bset *bs, char *err, size_t errlen)
{
    prepush p = { .o = o, .bs = bs, .json = malloc((size_t)PUSH_SLICE * JSON_MAX) };
    if (!p.json) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = 0;
    for (p.b = 0; p.b < bs->n && rc == 0; p.b++) {
        pipe_job j = {
            .target = o->target, .n = (batch_share(o->w->n, bs->n, p.b) + PUSH_SLICE - 1) / PUSH_SLICE,
            .depth = 4, .replies = 1, .ctx = &p, .append = prepush_append, .done = prepush_done,
        };
        long done = pipe_run(&j, err, errlen);
        if (done != j.n || p.failed) {
            if (done >= 0) snprintf(err, errlen, "pre-push failed");
            rc = -1;
        }
    }
    free(p.json);
    return rc;
}

/* ------------------------------------------------------------ live ----- */

typedef struct producer {
    const run_opts *o;
    const bset *bs;
    int p;
    long n;                   /* requests of this producer: i = k * P + p */
    int64_t *push_us, *ordinal;
    int64_t *sent_us;         /* --timeline: wall us each push was handed to hiredis, or NULL */
    long *acked;              /* pushes of this producer that returned (reader.h) */
    int64_t peek_d1, peek_len;/* peek: the first HGET and the RPUSH of the unit */
    long inexact;
    int64_t t0, t0_wall;
    long errors;
    long sent;
    char err[160];
    pthread_t th;
} producer;

static long prod_index(const producer *pr, long k) { return k * pr->o->producers + pr->p; }

static int64_t prod_due(void *ctx, long k)
{
    producer *pr = ctx;
    return pr->t0 + (int64_t)((double)prod_index(pr, k) * 1e6 / pr->o->rate);
}

/* The push of request i: plain RPUSH, or the contract's position
 * transaction MULTI / RPUSH / HGET dequeued / EXEC. */
static void prod_append(void *ctx, redisContext *c, long k)
{
    producer *pr = ctx;
    long i = prod_index(pr, k);
    char json[JSON_MAX];
    int len = workload_json(pr->o->w, i, json, sizeof json);
    const bkeys *bk = bset_of(pr->bs, i);
    const char *multi[] = { "MULTI" }, *exec[] = { "EXEC" };
    const char *rpush[] = { "RPUSH", bk->queue, json }, *hget[] = { "HGET", bk->stats, "dequeued" };
    size_t rlen[] = { 5, strlen(bk->queue), (size_t)(len > 0 ? len : 0) };
    char buf[JSON_MAX + 1024];
    size_t at = 0;
    if (pr->o->peek) at = resp_append(buf, at, sizeof buf, 3, hget, NULL);
    else if (!pr->o->plain) at = resp_append(buf, at, sizeof buf, 1, multi, NULL);
    at = resp_append(buf, at, sizeof buf, 3, rpush, rlen);
    if (pr->o->peek) {
        at = resp_append(buf, at, sizeof buf, 3, hget, NULL);
    } else if (!pr->o->plain) {
        at = resp_append(buf, at, sizeof buf, 3, hget, NULL);
        at = resp_append(buf, at, sizeof buf, 1, exec, NULL);
    }
    /* open loop: the latency of a request counts from when it was due, so
     * a producer that falls behind does not hide the wait (coordinated
     * omission) */
    if (pr->o->open_loop && pr->o->rate > 0)
        pr->push_us[i] = pr->t0_wall + (prod_due(pr, k) - pr->t0);
    else
        pr->push_us[i] = proc_wall_us();
    if (pr->sent_us) pr->sent_us[i] = proc_wall_us();
    redisAppendFormattedCommand(c, buf, at);
}

static int64_t reply_int(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    return r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
}

/* peek: the first HGET (D1) and the RPUSH reply (L) of the unit. */
static void prod_each(void *ctx, long k, int idx, redisReply *r)
{
    producer *pr = ctx;
    if (idx == 0) pr->peek_d1 = reply_int(r);
    if (idx == 1) pr->peek_len = reply_int(r);
}

static void prod_done(void *ctx, long k, redisReply *r, int error)
{
    producer *pr = ctx;
    long i = prod_index(pr, k);
    if (pr->o->peek) {
        /* dequeued moves only together with the LTRIM (one transaction):
         * two equal reads around the RPUSH mean none ran in between, so
         * L + D is the ordinal; otherwise it lies in [L + D1, L + D2],
         * kept as -(L + D2) (the reader waits for the upper bound) */
        int64_t d2 = reply_int(r);
        if (error) pr->errors++;
        else if (d2 == pr->peek_d1) pr->ordinal[i] = pr->peek_len + d2;
        else { pr->ordinal[i] = -(pr->peek_len + d2); pr->inexact++; }
    } else if (pr->o->plain) {
        if (error || r->type != REDIS_REPLY_INTEGER) pr->errors++;
    } else if (error || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        pr->errors++;
    } else {
        int64_t d = r->element[1]->type == REDIS_REPLY_STRING ? strtoll(r->element[1]->str, NULL, 10) : 0;
        pr->ordinal[i] = r->element[0]->integer + d;
    }
    /* the reader may now ask for it (and sees the ordinal written above) */
    __atomic_store_n(pr->acked, k + 1, __ATOMIC_RELEASE);
}

static void *prod_main(void *arg)
{
    producer *pr = arg;
    const run_opts *o = pr->o;
    pipe_job j = {
        .target = o->target, .n = pr->n, .depth = o->open_loop ? (int)(pr->n + 1) : o->depth,
        .replies = o->plain ? 1 : o->peek ? 3 : 4, .ctx = pr,
        .append = prod_append, .done = prod_done, .each = o->peek ? prod_each : NULL, .due = o->rate > 0 ? prod_due : NULL,
        .tick_us = o->tick_us,
        .deadline_us = proc_mono_us() + (int64_t)o->timeout_s * 1000000,
    };
    pr->sent = pipe_run(&j, pr->err, sizeof pr->err);
    return NULL;
}

/* ------------------------------------------------------------ window --- */

typedef struct window {
    cmdstats before, after, own;
    bench_usage redis, allocd;
    int64_t cpu_bench;
    int64_t t0, t_first, t_end;   /* wall us */
} window;

static int64_t self_cpu_us(void) { return bench_proc_cpu_us(getpid()); }

static void window_open(redisContext *c, const run_opts *o, window *win)
{
    memset(win, 0, sizeof *win);
    cmdstats_read(c, &win->before);
    win->redis = bench_proc_usage(o->redis_pid);
    win->allocd = bench_proc_usage(o->allocd_pid);
    win->cpu_bench = self_cpu_us();
    win->t0 = proc_wall_us();
}

static double per_req(int64_t a, int64_t b, long n)
{
    return a < 0 || b < 0 || n <= 0 ? -1 : (double)(b - a) / (double)n;
}

static void window_close(redisContext *c, const run_opts *o, window *win, run_result *res)
{
    long n = o->w->n;
    bench_usage redis = bench_proc_usage(o->redis_pid), allocd = bench_proc_usage(o->allocd_pid);
    res->cpu_redis_us = per_req(win->redis.cpu_us, redis.cpu_us, n);
    res->cpu_allocd_us = per_req(win->allocd.cpu_us, allocd.cpu_us, n);
    res->cpu_bench_us = per_req(win->cpu_bench, self_cpu_us(), n);
    res->faults_redis = per_req(win->redis.faults, redis.faults, n);
    res->faults_allocd = per_req(win->allocd.faults, allocd.faults, n);
    cmdstats_read(c, &win->after);
    cmdstats_delta(&win->after, &win->before, &win->own, &res->cmds);
}

/* One HLEN results and EXISTS lease per batch, pipelined: sums. The drain
 * window opens when a worker holds a batch's lease: it is taken before the
 * batch is loaded and read, so the window includes the load. (dequeued
 * would open it late: it moves only when the first chunk is applied.) */
static int poll_once(redisContext *c, const bset *bs, long *have, long *deq, window *win)
{
    for (int b = 0; b < bs->n; b++) {
        redisAppendCommand(c, "HLEN %s", bs->k[b].results);
        redisAppendCommand(c, "EXISTS %s", bs->k[b].lease);
    }
    *have = *deq = 0;
    for (int r = 0; r < 2 * bs->n; r++) {
        redisReply *rep = NULL;
        if (redisGetReply(c, (void **)&rep) != REDIS_OK) return -1;
        if (rep->type == REDIS_REPLY_INTEGER) *(r % 2 ? deq : have) += (long)rep->integer;
        freeReplyObject(rep);
    }
    cmdstats_add(&win->own, "hlen", bs->n);
    cmdstats_add(&win->own, "exists", bs->n);
    return 0;
}

/* Polls every millisecond until n results. With tl (--timeline on a
 * prepushed row), notes the drain every 100 ms: results so far as `read`,
 * with Redis's and allocd's schedstat, to tell whether Redis waits for
 * allocd's next chunk, for a CPU, or neither (out of memory: no more
 * samples, the run goes on). */
static int poll_until(redisContext *c, const run_opts *o, const bset *bs, long n, window *win, long *have,
                      timeline *tl)
{
    int64_t deadline = proc_mono_us() + (int64_t)o->timeout_s * 1000000;
    for (;;) {
        long deq;
        if (poll_once(c, bs, have, &deq, win) < 0) return -1;
        int64_t now = proc_wall_us();
        if (tl && reader_note_timeline(tl, now, -1, *have, o->redis_pid, o->allocd_pid) < 0) tl = NULL;
        if (deq > 0 && !win->t_first) win->t_first = now;
        if (*have >= n) { win->t_end = now; return 0; }
        if (proc_mono_us() > deadline) { win->t_end = now; return -1; }
        proc_sleep_us(1000);
    }
}

/* ------------------------------------------------------------ verify --- */

static long field_int(const char *s, const char *name, long dflt)
{
    const char *p = strstr(s, name);
    return p ? strtol(p + strlen(name), NULL, 10) : dflt;
}

/* ALLOCBENCH_DUMP=file: one line per live request (index, push ms, at, seq)
 * for looking at a latency tail over time. */
static FILE *dump;

static void note_result(const char *s, long i, const int64_t *push_us, const int64_t *ordinal,
                        run_result *res, latency *lat)
{
    const char *st = strstr(s, "\"status\":\"");
    if (st) outcome_note(&res->out, st + 10, strlen(st + 10));
    long at = field_int(s, "\"at\":", -1), seq = field_int(s, "\"seq\":", -1);
    if (push_us && at > 0) latency_add(lat, (double)at + 0.5 - (double)push_us[i] / 1000.0);
    if (dump && push_us) fprintf(dump, "%ld %.3f %ld %ld\n", i, (double)push_us[i] / 1000.0, at, seq);
    if (ordinal && ordinal[i] > 0) {
        res->pos_checked++;
        if (seq != ordinal[i]) res->pos_mismatch++;
    }
}

/* HMGET every id of batch b (ids i = b + n * j); missing ids are counted,
 * latencies and positions noted. */
static int verify_batch(redisContext *c, const run_opts *o, const bset *bs, int b,
                        const int64_t *push_us, const int64_t *ordinal, run_result *res, latency *lat)
{
    enum { SLICE = 1000 };
    char ids[SLICE][24];
    const char *argv[SLICE + 2] = { "HMGET", bs->k[b].results };
    long share = batch_share(o->w->n, bs->n, b);
    for (long j0 = 0; j0 < share; j0 += SLICE) {
        int argc = 2;
        for (long j = j0; j < share && j < j0 + SLICE; j++) {
            snprintf(ids[j - j0], sizeof ids[0], "%ld", b + j * bs->n);
            argv[argc++] = ids[j - j0];
        }
        redisReply *r = redisCommandArgv(c, argc, argv, NULL);
        if (!r || r->type != REDIS_REPLY_ARRAY) { if (r) freeReplyObject(r); return -1; }
        for (size_t e = 0; e < r->elements; e++) {
            if (r->element[e]->type != REDIS_REPLY_STRING) { res->missing++; continue; }
            res->results++;
            note_result(r->element[e]->str, b + (j0 + (long)e) * bs->n, push_us, ordinal, res, lat);
        }
        freeReplyObject(r);
    }
    return 0;
}

static int verify(redisContext *c, const run_opts *o, const bset *bs, const int64_t *push_us,
                  const int64_t *ordinal, run_result *res, latency *lat)
{
    const char *path = getenv("ALLOCBENCH_DUMP");
    dump = path && push_us ? fopen(path, "w") : NULL;
    int rc = 0;
    for (int b = 0; b < bs->n && rc == 0; b++) rc = verify_batch(c, o, bs, b, push_us, ordinal, res, lat);
    if (dump) fclose(dump);
    dump = NULL;
    return rc;
}

/* ------------------------------------------------------------ report --- */

/* The command that stands for one round trip of allocd: a take and an
 * apply are each one MULTI/EXEC pipeline (the apply's WATCH and FENCE ride
 * along), a dedup an HMGET; scripts (lease, order ids, lottery) go with
 * EVALSHA; an idle wait is a BLMOVE. */
static int is_round_trip(const char *name)
{
    static const char *const top[] = { "multi", "hmget", "evalsha", "blmove" };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(name, top[i])) return 1;
    return 0;
}

static void summarize(const run_opts *o, const window *win, run_result *res, latency *lat)
{
    long n = o->w->n;
    res->n = n;
    res->secs = (double)(win->t_end - win->t0) / 1e6;
    res->secs_drain = win->t_first ? (double)(win->t_end - win->t_first) / 1e6 : res->secs;
    res->tput = res->secs > 0 ? (double)n / res->secs : 0;
    res->tput_drain = res->secs_drain > 0 ? (double)n / res->secs_drain : 0;
    long long rt = 0;
    for (size_t i = 0; i < res->cmds.n; i++)
        if (is_round_trip(res->cmds.e[i].name)) rt += res->cmds.e[i].calls;
    res->cmds_per_req = (double)cmdstats_total_calls(&res->cmds) / (double)n;
    res->redis_usec_per_req = (double)cmdstats_total_usec(&res->cmds) / (double)n;
    res->rt_per_req = (double)rt / (double)n;
    /* prepushed: every take finds a full chunk, so chunks = ceil(n / chunk);
     * live chunks are whatever was queued, so the figure is per request only */
    res->chunks = o->live ? 0 : (n + o->chunk - 1) / o->chunk;
    res->rt_per_chunk = res->chunks ? (double)rt / (double)res->chunks : -1;
    res->p50 = latency_quantile(lat, 0.50);
    res->p99 = latency_quantile(lat, 0.99);
    res->p999 = latency_quantile(lat, 0.999);
    res->pmax = latency_quantile(lat, 1.0);
    res->rate = o->rate;
    res->offered = o->rate;
}

static void memory_after(redisContext *c, const run_opts *o, const bset *bs, run_result *res)
{
    res->participants = 0;
    for (int b = 0; b < bs->n; b++)
        res->participants += (long)proc_int(c, "HGET %s participants", bs->k[b].stats);
    res->hwm_kb = o->allocd_pid ? proc_status_kb(o->allocd_pid, "VmHWM") : -1;
    res->rss_end_kb = -1;
    if (o->settle_rss && o->allocd_pid) {
        /* the batch stays loaded: its resident memory once served, the
         * median of five readings 300 ms apart (a profile re-read runs
         * every second) */
        double kb[5];
        for (int i = 0; i < 5; i++) {
            proc_sleep_us(300000);
            kb[i] = (double)proc_status_kb(o->allocd_pid, "VmRSS");
        }
        res->rss_end_kb = (long)median_of(kb, 5);
    }
    res->bytes_per_participant = -1;
    if (!o->heap_reserved && res->hwm_kb > 0 && res->rss_base_kb > 0 && res->participants > 0)
        res->bytes_per_participant = (double)(res->hwm_kb - res->rss_base_kb) * 1024.0 / (double)res->participants;
}

/* ------------------------------------------------------------ modes ---- */

static int wait_served(redisContext *c, const bset *bs, int timeout_s)
{
    for (int b = 0, waited = 0; b < bs->n; ) {
        if (proc_int(c, "HEXISTS %s state", bs->k[b].stats) == 1) { b++; continue; }
        if ((waited += 5) > timeout_s * 1000) return -1;
        proc_sleep_us(5000);
    }
    return 0;
}

static int run_producers(const run_opts *o, const bset *bs, producer *pr, int64_t *push_us,
                         int64_t *sent_us, int64_t *ordinal, long *acked)
{
    int64_t t0 = proc_mono_us(), t0_wall = proc_wall_us();
    for (int p = 0; p < o->producers; p++) {
        pr[p] = (producer){ .o = o, .bs = bs, .p = p, .push_us = push_us, .sent_us = sent_us,
                            .ordinal = ordinal, .t0 = t0,
                            .t0_wall = t0_wall, .acked = &acked[p],
                            .n = (o->w->n - p + o->producers - 1) / o->producers };
        if (pthread_create(&pr[p].th, NULL, prod_main, &pr[p]) != 0) return -1;
    }
    return 0;
}

static void own_pushes(window *win, const run_opts *o)
{
    long n = o->w->n;
    cmdstats_add(&win->own, "rpush", n);
    if (o->plain) return;
    if (o->peek) { cmdstats_add(&win->own, "hget", 2 * n); return; }
    cmdstats_add(&win->own, "multi", n);
    cmdstats_add(&win->own, "hget", n);
    cmdstats_add(&win->own, "exec", n);
}

/* --timeline: the same latencies counted from when each push left the
 * load generator instead of when it was due, so a tail the generator adds
 * (its threads share the cores with Redis and allocd) shows apart. */
static void print_from_sent(long n, const int64_t *sent_us, const int64_t *read_us)
{
    latency l = { 0 };
    for (long i = 0; i < n; i++)
        if (read_us[i] && sent_us[i] && latency_add(&l, (double)(read_us[i] - sent_us[i]) / 1000.0) < 0) break;
    printf("  from sent (push handed to the socket) to read: p50 %.2f p99 %.2f p100 %.2f ms\n",
           latency_quantile(&l, 0.50), latency_quantile(&l, 0.99), latency_quantile(&l, 1.0));
    latency_free(&l);
}

/* e2e: the poller reads every result (reader.h) on this thread; its
 * latencies replace the ones computed from `at`, and its clock ends the
 * window. */
static int read_all(const run_opts *o, const bset *bs, window *win, const int64_t *push_us,
                    const int64_t *sent_us, const int64_t *ordinal, const long *acked,
                    run_result *res, latency *lat, char *err, size_t errlen)
{
    reader_job rj = {
        .target = o->target, .results = bs->k[0].results, .stats = bs->k[0].stats, .n = o->w->n,
        .producers = o->producers, .acked = acked, .push_us = push_us,
        .ordinal = o->plain ? NULL : ordinal,
        .deadline_us = proc_mono_us() + (int64_t)o->timeout_s * 1000000,
    };
    const char *path = getenv("ALLOCBENCH_DUMP"); /* latency over time, as in live mode */
    rj.dump = path ? fopen(path, "w") : NULL;
    timeline tl;
    timeline_init(&tl, 10000);
    if (o->timeline) {
        rj.read_us = calloc((size_t)o->w->n, sizeof *rj.read_us);
        rj.tl = rj.read_us ? &tl : NULL;
        rj.redis_pid = o->redis_pid;
        rj.allocd_pid = o->allocd_pid;
    }
    int rc = reader_run(&rj);
    if (rj.dump) fclose(rj.dump);
    if (o->timeline && rj.tl && rc == 0) {
        if (o->rate > 0) printf("timeline: allocd %s, paced at %.0f req/s", o->plain ? "plain RPUSH" : "position transaction", o->rate);
        else printf("timeline: allocd %s, unpaced (due = pushed)", o->plain ? "plain RPUSH" : "position transaction");
        printf("; per 100 ms of due time: the longest a request waited in the generator (sentms), and at "
               "the window's end the requests due but not dequeued (queue) and dequeued but not read (poller)\n");
        timeline_print(stdout, &tl, o->w->n, push_us, sent_us, rj.read_us, 100);
        if (sent_us) print_from_sent(o->w->n, sent_us, rj.read_us);
    }
    free(rj.read_us);
    timeline_free(&tl);
    win->t_end = rj.t_last ? rj.t_last : proc_wall_us();
    win->t_first = win->t0;
    res->hmgets = rj.hmgets;
    res->fields_asked = rj.fields_asked;
    res->nil_fields = rj.nil_fields;
    res->dequeued_polls = rj.dequeued_polls;
    if (rj.out.errors) { snprintf(err, errlen, "reader: %ld bad results or positions", rj.out.errors); rc = -1; }
    if (rc < 0 && !err[0]) snprintf(err, errlen, "%s", rj.err);
    *lat = rj.lat; /* the reader's samples, freed by the caller */
    return rc;
}

static int live_window(redisContext *c, const run_opts *o, const bset *bs, window *win,
                       int64_t *push_us, int64_t *ordinal, run_result *res, latency *lat,
                       char *err, size_t errlen)
{
    producer *pr = calloc((size_t)o->producers, sizeof *pr);
    long *acked = calloc((size_t)o->producers, sizeof *acked);
    if (!pr || !acked) { free(pr); free(acked); return -1; }
    /* --timeline: when each push left the generator (a column of its own) */
    int64_t *sent_us = o->timeline ? calloc((size_t)o->w->n, sizeof *sent_us) : NULL;
    long have = 0;
    window_open(c, o, win);
    int rc = run_producers(o, bs, pr, push_us, sent_us, ordinal, acked);
    if (rc == 0 && o->e2e) rc = read_all(o, bs, win, push_us, sent_us, ordinal, acked, res, lat, err, errlen);
    else if (rc == 0) rc = poll_until(c, o, bs, o->w->n, win, &have, NULL);
    for (int p = 0; p < o->producers; p++) {
        if (pr[p].th) pthread_join(pr[p].th, NULL);
        if (pr[p].err[0] && !err[0]) snprintf(err, errlen, "producer %d: %s", p, pr[p].err);
        if (pr[p].errors && !err[0]) snprintf(err, errlen, "producer %d: %ld failed pushes", p, pr[p].errors);
        res->pos_inexact += pr[p].inexact;
    }
    /* e2e counts everything Redis did for the design: pushes, reads and
     * the daemon's work, as the Lua design's figure does */
    if (!o->e2e) own_pushes(win, o);
    free(sent_us);
    free(pr);
    free(acked);
    if (rc < 0 && !err[0]) snprintf(err, errlen, "%ld of %ld results after %d s", have, o->w->n, o->timeout_s);
    return rc;
}

static int prepushed_window(redisContext *c, const run_opts *o, const bset *bs, window *win,
                            char *err, size_t errlen)
{
    long have = 0;
    window_open(c, o, win);
    if (bset_members(c, bs, "SADD") < 0) return -1;
    cmdstats_add(&win->own, "sadd", 1);
    timeline tl;
    timeline_init(&tl, 100000);
    int rc = poll_until(c, o, bs, o->w->n, win, &have, o->timeline ? &tl : NULL);
    if (rc < 0) snprintf(err, errlen, "%ld of %ld results after %d s", have, o->w->n, o->timeout_s);
    if (o->timeline && rc == 0) {
        printf("timeline: allocd drain of %s, from the SADD\n", o->batch);
        timeline_print_drain(stdout, &tl);
    }
    timeline_free(&tl);
    return rc;
}

/* RPUSH of an admin command (contract 5) to the batch's ctl list. */
static int ctl_push(redisContext *c, const run_opts *o, const bkeys *k, const char *op)
{
    char key[200], json[96];
    snprintf(key, sizeof key, "%s:{%s}:ctl", o->prefix, k->name);
    snprintf(json, sizeof json, "{\"id\":\"bench-%s\",\"op\":\"%s\"}", op, op);
    return proc_int(c, "RPUSH %s %s", key, json) > 0 ? 0 : -1;
}

/* 1 when stats.state is `paused`. */
static int is_paused(redisContext *c, const bkeys *k)
{
    redisReply *r = redisCommand(c, "HGET %s state", k->stats);
    int yes = r && r->type == REDIS_REPLY_STRING && !strcmp(r->str, "paused");
    if (r) freeReplyObject(r);
    return yes;
}

/* A housing round's opening: the batch and its profiles were read long
 * before, and the requests come at once. So the batch is registered
 * paused, loaded (load_ms), given every request while paused, and the
 * window opens with `resume`: it holds the decisions and what allocd does
 * while deciding (the profiles' re-reads), not the load. Both admin
 * commands get a result, so the poll waits for n + 2. */
static int preloaded_window(redisContext *c, const run_opts *o, const bset *bs, window *win,
                            run_result *res, char *err, size_t errlen)
{
    const bkeys *k = &bs->k[0];
    long have = 0;
    if (bs->n != 1 || ctl_push(c, o, k, "pause") < 0 || bset_members(c, bs, "SADD") < 0) {
        snprintf(err, errlen, "cannot register %s paused", o->batch);
        return -1;
    }
    int64_t t0 = proc_mono_us(), deadline = t0 + (int64_t)o->timeout_s * 1000000;
    while (!is_paused(c, k)) {
        if (proc_mono_us() > deadline) { snprintf(err, errlen, "%s was not loaded paused", o->batch); return -1; }
        proc_sleep_us(1000);
    }
    res->load_ms = (double)(proc_mono_us() - t0) / 1000.0;
    if (push_all(o, bs, err, errlen) < 0) return -1;
    window_open(c, o, win);
    if (ctl_push(c, o, k, "resume") < 0) { snprintf(err, errlen, "cannot resume %s", o->batch); return -1; }
    cmdstats_add(&win->own, "rpush", 1);
    int rc = poll_until(c, o, bs, o->w->n + 2, win, &have, NULL);
    if (rc < 0) snprintf(err, errlen, "%ld of %ld results after %d s", have, o->w->n + 2, o->timeout_s);
    return rc;
}

static int run_window(redisContext *c, const run_opts *o, const bset *bs, window *win,
                      int64_t *push_us, int64_t *ordinal, run_result *res, latency *lat,
                      char *err, size_t errlen)
{
    if (o->preloaded) return preloaded_window(c, o, bs, win, res, err, errlen);
    if (!o->live) {
        if (push_all(o, bs, err, errlen) < 0) return -1;
        return prepushed_window(c, o, bs, win, err, errlen);
    }
    if (bset_members(c, bs, "SADD") < 0) return -1;
    if (wait_served(c, bs, 30) < 0) { snprintf(err, errlen, "the daemon did not start serving %s", o->batch); return -1; }
    return live_window(c, o, bs, win, push_us, ordinal, res, lat, err, errlen);
}

int allocd_run(const run_opts *o, run_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    err[0] = '\0';
    bset bs;
    if (o->e2e && (!o->live || o->batches > 1)) { snprintf(err, errlen, "e2e is live, one batch"); return -1; }
    if (bset_init(&bs, o->prefix, o->batch, o->batches) < 0) { snprintf(err, errlen, "out of memory"); return -1; }
    redisContext *c = bench_connect(o->target);
    if (!c) { snprintf(err, errlen, "cannot connect to %s", o->target->url); free(bs.k); return -1; }
    int64_t *push_us = o->live ? calloc((size_t)o->w->n, sizeof *push_us) : NULL;
    int64_t *ordinal = o->live ? calloc((size_t)o->w->n, sizeof *ordinal) : NULL;
    latency lat = { 0 };
    window win;
    memset(&win, 0, sizeof win);
    int rc = -1;
    if (o->live && (!push_us || !ordinal)) { snprintf(err, errlen, "out of memory"); goto out; }
    if (setup_all(c, o->w, &bs) < 0) { snprintf(err, errlen, "cannot write the batch"); goto out; }
    res->rss_base_kb = o->allocd_pid ? proc_status_kb(o->allocd_pid, "VmRSS") : -1;
    rc = run_window(c, o, &bs, &win, push_us, ordinal, res, &lat, err, errlen);
    window_close(c, o, &win, res);
    /* e2e: the latencies are the reader's; verify still checks every id
     * and every position */
    if (verify(c, o, &bs, o->e2e ? NULL : push_us, ordinal, res, &lat) < 0 && rc == 0) {
        snprintf(err, errlen, "verify failed");
        rc = -1;
    }
    summarize(o, &win, res, &lat);
    memory_after(c, o, &bs, res);
    bset_members(c, &bs, "SREM");
out:
    latency_free(&lat);
    free(push_us);
    free(ordinal);
    free(bs.k);
    redisFree(c);
    return rc;
}

/* ------------------------------------------------------------ probe ---- */

static double probe_one(redisContext *c, const bkeys *k, const workload *w, int s)
{
    char json[256], id[32];
    snprintf(id, sizeof id, "p%d", s);
    snprintf(json, sizeof json, "{\"id\":\"%s\",\"user\":\"probe%d\",\"op\":\"buy\",\"item\":\"i%ld\",\"qty\":1}",
             id, s, (long)s % w->items);
    int64_t t0 = proc_mono_us();
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "RPUSH %s %s", k->queue, json);
    redisAppendCommand(c, "HGET %s dequeued", k->stats);
    redisAppendCommand(c, "EXEC");
    for (int r = 0; r < 4; r++) {
        redisReply *rep = NULL;
        if (redisGetReply(c, (void **)&rep) != REDIS_OK) return -1;
        freeReplyObject(rep);
    }
    while (proc_int(c, "HEXISTS %s %s", k->results, id) != 1) {
        if (proc_mono_us() - t0 > 5000000) return -1;
        proc_sleep_us(20);
    }
    return (double)(proc_mono_us() - t0) / 1000.0;
}

int allocd_probe(const run_opts *o, int samples, probe_result *pr, char *err, size_t errlen)
{
    memset(pr, 0, sizeof *pr);
    bset bs;
    if (bset_init(&bs, o->prefix, o->batch, 1) < 0) return -1;
    const bkeys *k = &bs.k[0];
    redisContext *c = bench_connect(o->target);
    if (!c) { snprintf(err, errlen, "cannot connect"); free(bs.k); return -1; }
    latency lat = { 0 };
    int rc = -1;
    if (setup_batch(c, o->w, k) < 0 || bset_members(c, &bs, "SADD") < 0 || wait_served(c, &bs, 30) < 0) {
        snprintf(err, errlen, "the daemon did not serve the probe batch");
        goto out;
    }
    for (int s = 0; s < samples; s++) {
        proc_sleep_us(3000); /* let the worker go idle (parked in BLMOVE) */
        double ms = probe_one(c, k, o->w, s);
        if (ms < 0) { snprintf(err, errlen, "probe request %d got no result", s); goto out; }
        latency_add(&lat, ms);
    }
    pr->samples = (long)lat.n;
    pr->p50 = latency_quantile(&lat, 0.5);
    pr->p99 = latency_quantile(&lat, 0.99);
    pr->max = latency_quantile(&lat, 1.0);
    rc = 0;
out:
    bset_members(c, &bs, "SREM");
    latency_free(&lat);
    free(bs.k);
    redisFree(c);
    return rc;
}
