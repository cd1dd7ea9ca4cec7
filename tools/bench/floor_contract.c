/* floor_contract.c -- see floor_contract.h. The values written have the
 * fields, in the order, that allocd writes for the stock mix
 * (daemon/wire/records.c: results and holders; contract 11.1: the chunk
 * log), so Redis stores and parses values of the same sizes. One unit of
 * the pipeline is one chunk: its pushes, then the take and the writes a
 * chunk's decisions need, then the poller's read of its results (or the
 * part of that which the floor's kind times). */
#include "bench/floor_contract.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FC_RES = 256, FC_HOLD = 320, FC_NAME = 32, FC_EVENT = 128 };
/* A chunk's one atomic step after its pushes: MULTI, LPOP, HSET results,
 * HSET holders, HSET free, XADD, HSET stats, EXEC. The contract makes the
 * take and `dequeued` one step (section 6) and the log one step with the
 * change it records (7), so every design needs a transaction or a script
 * here. The e2e floors then read the results (HMGET). */
enum { FC_STEP = 8 };
/* the longest a floor may take before it is called stuck */
#define FC_DEADLINE_US (300LL * 1000000)
/* What a unit holds: a floor_kind's, or (the drain's queue, pushed
 * before its clock) a chunk's pushes alone. */
enum { FC_PUSH_ONLY = FLOOR_KINDS };
enum { FC_QUEUE, FC_RESULTS, FC_HOLDERS, FC_FREE, FC_LOG, FC_STATS, FC_KEYS };

/* a user's live orders: the stock mix's per_user (2) at most */
#define FC_ORDERS 2
#define FC_ORDER_BASE 250000000000000000ULL
#define FC_AT0 1763800000000LL

typedef struct fc_user {
    uint32_t mark, slot;      /* chunk + 1 whose holder list has it, and where */
    uint8_t units, n, seen;
    uint32_t item[FC_ORDERS];
    uint64_t order[FC_ORDERS];
} fc_user;

typedef struct fc_item {
    long left;
    uint32_t mark;
} fc_item;

typedef struct fc_state {
    const workload *w;
    int chunk;
    char keys[FC_KEYS][64];
    fc_user *users;
    fc_item *items;
    long granted, rejected, participants, free_units;
    /* one chunk's writes */
    char (*id)[FC_NAME], (*res)[FC_RES], (*holder_user)[FC_NAME], (*holder)[FC_HOLD];
    char (*free_item)[FC_NAME], (*free_val)[FC_NAME];
    uint32_t *holder_of, *free_of;
    int n_holder, n_free, n_events;
    char *events;
    size_t events_len, events_cap;
    char *pushbuf;            /* one chunk's pushes in RESP */
    size_t pushbuf_cap;
    const char **argv;
    size_t *lens;
    int phase;                /* a floor_kind or FC_PUSH_ONLY: what a unit holds */
    int reply_error;          /* Redis answered an error (fc_each, fc_done) */
    int overflow;             /* a value did not fit its buffer */
    volatile int stop;        /* either: pipe_run stops at once */
} fc_state;

static void fc_free(fc_state *s)
{
    free(s->users); free(s->items); free(s->id); free(s->res); free(s->holder_user); free(s->holder);
    free(s->free_item); free(s->free_val); free(s->holder_of); free(s->free_of); free(s->events);
    free(s->argv); free(s->lens); free(s->pushbuf);
}

static int fc_init(fc_state *s, const workload *w, int chunk)
{
    memset(s, 0, sizeof *s);
    s->w = w;
    s->chunk = chunk;
    static const char *const names[FC_KEYS] = { "queue", "results", "holders", "free", "log", "stats" };
    for (int k = 0; k < FC_KEYS; k++) snprintf(s->keys[k], sizeof s->keys[k], "allocbench:{floor}:%s", names[k]);
    size_t m = (size_t)chunk;
    s->users = calloc((size_t)w->users, sizeof *s->users);
    s->items = calloc((size_t)w->items, sizeof *s->items);
    s->id = calloc(m, sizeof *s->id);
    s->res = calloc(m, sizeof *s->res);
    s->holder_user = calloc(m, sizeof *s->holder_user);
    s->holder = calloc(m, sizeof *s->holder);
    s->free_item = calloc(m, sizeof *s->free_item);
    s->free_val = calloc(m, sizeof *s->free_val);
    s->holder_of = calloc(m, sizeof *s->holder_of);
    s->free_of = calloc(m, sizeof *s->free_of);
    s->events_cap = m * FC_EVENT + 16;
    s->events = malloc(s->events_cap);
    s->pushbuf_cap = m * (512 + 200);
    s->pushbuf = malloc(s->pushbuf_cap);
    s->argv = calloc(2 * m + 16, sizeof *s->argv);
    s->lens = calloc(2 * m + 16, sizeof *s->lens);
    if (!s->users || !s->items || !s->id || !s->res || !s->holder_user || !s->holder || !s->free_item ||
        !s->free_val || !s->holder_of || !s->free_of || !s->events || !s->argv || !s->lens || !s->pushbuf) {
        fc_free(s);
        return -1;
    }
    for (long i = 0; i < w->items; i++) s->items[i].left = w->units;
    s->free_units = w->items * w->units;
    return 0;
}

/* The holder of user u as allocd writes it for stock: units and the live
 * orders, each confirmed (a buy without a hold). */
static void fc_holder(const fc_state *s, const fc_user *u, char *out, size_t len)
{
    size_t at = (size_t)snprintf(out, len, "{\"units\":%u,\"orders\":[", (unsigned)u->units);
    for (int k = 0; k < u->n && at < len; k++) {
        char item[FC_NAME];
        wl_item_name(s->w, u->item[k], item, sizeof item);
        at += (size_t)snprintf(out + at, len - at, "%s{\"order\":\"%llu\",\"item\":\"%s\",\"qty\":1,"
                               "\"state\":\"confirmed\"}", k ? "," : "", (unsigned long long)u->order[k], item);
    }
    if (at < len) snprintf(out + at, len - at, "]}");
}

/* A grant's holder, `free` and log entry, each written once per chunk. */
static void fc_grant_writes(fc_state *s, long k, long i, const wl_req *r, const char *user, const char *item)
{
    fc_user *u = &s->users[r->user];
    fc_item *it = &s->items[r->item];
    if (u->mark != (uint32_t)k + 1) {
        u->mark = (uint32_t)k + 1;
        u->slot = (uint32_t)s->n_holder++;
        snprintf(s->holder_user[u->slot], FC_NAME, "%s", user);
    }
    s->holder_of[u->slot] = (uint32_t)r->user;
    if (it->mark != (uint32_t)k + 1) {
        it->mark = (uint32_t)k + 1;
        s->free_of[s->n_free] = (uint32_t)r->item;
        snprintf(s->free_item[s->n_free++], FC_NAME, "%s", item);
    }
    int n = snprintf(s->events + s->events_len, s->events_cap - s->events_len,
                     "%s[\"grant\",\"%s\",\"%s\",1,\"%llu\",\"%ld\",%lld]", s->events_len > 1 ? "," : "", user,
                     item, (unsigned long long)u->order[u->n - 1], i, FC_AT0 + i / 100);
    if (n > 0 && (size_t)n < s->events_cap - s->events_len) s->events_len += (size_t)n;
    else s->overflow = s->stop = 1;
    s->n_events++;
}

/* Decides request i of chunk k as allocd's stock engine would (units per
 * item, per_user) and writes its result into slot j. */
static void fc_decide(fc_state *s, long k, long i, int j)
{
    wl_req r;
    char user[FC_NAME], item[FC_NAME];
    workload_request(s->w, i, &r);
    wl_user_name(i, &r, 0, user, sizeof user);
    wl_item_name(s->w, r.item, item, sizeof item);
    snprintf(s->id[j], FC_NAME, "%ld", i);
    fc_user *u = &s->users[r.user];
    fc_item *it = &s->items[r.item];
    if (!u->seen) { u->seen = 1; s->participants++; }
    long long at = FC_AT0 + i / 100;
    const char *reason = it->left <= 0 ? "sold_out"
                       : u->units >= s->w->per_user || u->n >= FC_ORDERS ? "limit" : NULL;
    if (reason) {
        s->rejected++;
        /* allocd names no item in a refusal (engine.c, reject) */
        snprintf(s->res[j], FC_RES, "{\"id\":\"%ld\",\"user\":\"%s\",\"op\":\"buy\",\"status\":\"rejected\","
                 "\"reason\":\"%s\",\"seq\":%ld,\"at\":%lld}", i, user, reason, i + 1, at);
        return;
    }
    it->left--;
    s->free_units--;
    uint64_t order = FC_ORDER_BASE + (uint64_t)++s->granted * 7919;
    u->units++;
    u->item[u->n] = (uint32_t)r.item;
    u->order[u->n++] = order;
    snprintf(s->res[j], FC_RES, "{\"id\":\"%ld\",\"user\":\"%s\",\"op\":\"buy\",\"status\":\"granted\","
             "\"item\":\"%s\",\"qty\":1,\"order\":\"%llu\",\"rank\":%ld,\"seq\":%ld,\"at\":%lld}", i, user, item,
             (unsigned long long)order, s->granted, i + 1, at);
    fc_grant_writes(s, k, i, &r, user, item);
}

static void fc_argv_key(fc_state *s, const char *cmd, int key, int *argc)
{
    s->argv[0] = cmd;
    s->argv[1] = s->keys[key];
    s->lens[0] = strlen(cmd);
    s->lens[1] = strlen(s->keys[key]);
    *argc = 2;
}

static void fc_argv_add(fc_state *s, int *argc, const char *v)
{
    s->argv[*argc] = v;
    s->lens[*argc] = strlen(v);
    (*argc)++;
}

/* HSET key f1 v1 ... of one chunk, or a PING when it has nothing to write
 * (every unit has the same number of replies). */
static void fc_hset(fc_state *s, redisContext *c, int key, int n, char (*f)[FC_NAME], const char *v, size_t vsize)
{
    if (!n) { redisAppendCommand(c, "PING"); return; }
    int argc;
    fc_argv_key(s, "HSET", key, &argc);
    for (int j = 0; j < n; j++) {
        fc_argv_add(s, &argc, f[j]);
        fc_argv_add(s, &argc, v + (size_t)j * vsize);
    }
    redisAppendCommandArgv(c, argc, s->argv, s->lens);
}

static void fc_append_writes(fc_state *s, redisContext *c, long k, long m)
{
    for (int j = 0; j < s->n_holder; j++)
        fc_holder(s, &s->users[s->holder_of[j]], s->holder[j], sizeof s->holder[j]);
    for (int j = 0; j < s->n_free; j++) snprintf(s->free_val[j], FC_NAME, "%ld", s->items[s->free_of[j]].left);
    fc_hset(s, c, FC_RESULTS, (int)m, s->id, &s->res[0][0], FC_RES);
    fc_hset(s, c, FC_HOLDERS, s->n_holder, s->holder_user, &s->holder[0][0], sizeof s->holder[0]);
    fc_hset(s, c, FC_FREE, s->n_free, s->free_item, &s->free_val[0][0], FC_NAME);
    if (s->n_events) {
        s->events[s->events_len++] = ']';
        redisAppendCommand(c, "XADD %s * format chunk n %d events %b", s->keys[FC_LOG], s->n_events, s->events,
                           s->events_len);
    } else {
        redisAppendCommand(c, "PING");
    }
    long done = k * s->chunk + m;
    redisAppendCommand(c, "HSET %s dequeued %ld processed %ld granted %ld rejected %ld invalid 0 dead 0 "
                       "participants %ld free_units %ld state open updated_at %lld owner allocbench-floor",
                       s->keys[FC_STATS], done, done, s->granted, s->rejected, s->participants, s->free_units,
                       FC_AT0 + done / 100);
}

/* One command into the chunk's push buffer; a value too long for it
 * stops the run. */
static void fc_resp(fc_state *s, size_t *at, int argc, const char **argv, const size_t *lens)
{
    size_t next = resp_append(s->pushbuf, *at, s->pushbuf_cap, argc, argv, lens);
    if (!next) s->overflow = s->stop = 1;
    else *at = next;
}

/* The chunk's pushes, one RPUSH or one position transaction a request,
 * formatted here in one buffer: hiredis's formatting would make this one
 * client the limit (bench.h, resp_append). The last chunk is filled up
 * with PINGs: every unit has the same number of replies. */
static void fc_append_pushes(fc_state *s, redisContext *c, long first, long m)
{
    int txn = s->phase == FLOOR_E2E_TXN;
    char req[512];
    size_t at = 0;
    for (long i = first; i < first + s->chunk && !s->overflow; i++) {
        int len = i < first + m ? workload_json(s->w, i, req, sizeof req) : 0;
        if (len < 0) { s->overflow = s->stop = 1; break; }
        const char *push[] = { "RPUSH", s->keys[FC_QUEUE], req }, *multi[] = { "MULTI" }, *exec[] = { "EXEC" };
        const char *hget[] = { "HGET", s->keys[FC_STATS], "dequeued" }, *ping[] = { "PING" };
        size_t lens[] = { 5, strlen(s->keys[FC_QUEUE]), len > 0 ? (size_t)len : 0 };
        if (len <= 0) {
            for (int p = 0; p < (txn ? 4 : 1); p++) fc_resp(s, &at, 1, ping, NULL);
            continue;
        }
        if (txn) fc_resp(s, &at, 1, multi, NULL);
        fc_resp(s, &at, 3, push, lens);
        if (txn) fc_resp(s, &at, 3, hget, NULL);
        if (txn) fc_resp(s, &at, 1, exec, NULL);
    }
    if (s->overflow) return;   /* the run stops (fc_state.stop) */
    redisAppendFormattedCommand(c, s->pushbuf, at);
}

/* Unit k: the chunk's pushes, its take, its writes, the poller's read;
 * or only some of them (fc_state.phase). */
static void fc_append(void *ctx, redisContext *c, long k)
{
    fc_state *s = ctx;
    long first = k * s->chunk, m = s->w->n - first < s->chunk ? s->w->n - first : s->chunk;
    if (s->phase != FLOOR_DRAIN) fc_append_pushes(s, c, first, m);
    if (s->phase == FC_PUSH_ONLY) return;
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "LPOP %s %ld", s->keys[FC_QUEUE], m);
    s->n_holder = s->n_free = s->n_events = 0;
    s->events[0] = '[';
    s->events_len = 1;
    for (long i = first; i < first + m; i++) fc_decide(s, k, i, (int)(i - first));
    fc_append_writes(s, c, k, m);
    redisAppendCommand(c, "EXEC");
    if (s->phase == FLOOR_DRAIN) return;
    int argc;
    fc_argv_key(s, "HMGET", FC_RESULTS, &argc);
    for (long j = 0; j < m; j++) fc_argv_add(s, &argc, s->id[j]);
    redisAppendCommandArgv(c, argc, s->argv, s->lens);
}

/* EXEC answers an array whose elements may be errors (a command that
 * failed inside the step); pipe_run sees only top-level ones. */
static void fc_each(void *ctx, long k, int i, redisReply *r)
{
    (void)k;
    (void)i;
    fc_state *s = ctx;
    for (size_t e = 0; r->type == REDIS_REPLY_ARRAY && e < r->elements; e++)
        if (r->element[e]->type == REDIS_REPLY_ERROR) s->reply_error = s->stop = 1;
}

static void fc_done(void *ctx, long k, redisReply *last, int error)
{
    (void)k;
    (void)last;
    fc_state *s = ctx;
    if (error) s->reply_error = s->stop = 1;
}

static void fc_del(const bench_target *t, const fc_state *s)
{
    redisContext *c = bench_connect(t);
    if (!c) return;
    bench_ok(c, "DEL %s %s %s %s %s %s", s->keys[0], s->keys[1], s->keys[2], s->keys[3], s->keys[4], s->keys[5]);
    redisFree(c);
}

/* Redis's CPU so far, microseconds: its main thread's run time where
 * schedstat is there (what one core carries; with --aof the background
 * threads' fsyncs are not the core's), else the whole process's. */
static int64_t fc_redis_cpu_us(pid_t pid)
{
    int64_t run_ns;
    if (pid > 0 && bench_proc_sched_ns(pid, &run_ns, NULL) == 0) return run_ns / 1000;
    return bench_proc_usage(pid).cpu_us;
}

static const char *fc_why(const fc_state *s, int read)
{
    return s->reply_error ? "Redis answered an error" : s->overflow ? "a value did not fit its buffer"
         : read < 0 ? "cannot read INFO commandstats" : "stopped early (no answer within 300 s)";
}

/* One timed pass of units of the given phase; 0 or -1 (err set). */
static int fc_run(const bench_target *t, pid_t redis_pid, fc_state *s, int phase, fc_pass *out, char *err,
                  size_t errlen)
{
    int per_unit[] = { [FC_PUSH_ONLY] = s->chunk, [FLOOR_E2E] = s->chunk + FC_STEP + 1,
                       [FLOOR_E2E_TXN] = 4 * s->chunk + FC_STEP + 1, [FLOOR_DRAIN] = FC_STEP };
    s->phase = phase;
    pipe_job j = { .target = t, .n = (s->w->n + s->chunk - 1) / s->chunk, .depth = 4, .replies = per_unit[phase],
                   .ctx = s, .append = fc_append, .each = fc_each, .done = fc_done, .stop = &s->stop,
                   .deadline_us = proc_mono_us() + FC_DEADLINE_US };
    cmdstats c0, c1;
    redisContext *c = bench_connect(t);
    if (!c || cmdstats_read(c, &c0) < 0) {
        snprintf(err, errlen, "the contract's floor: cannot read INFO commandstats");
        if (c) redisFree(c);
        return -1;
    }
    bench_usage u0 = bench_proc_usage(redis_pid);
    int64_t cpu0 = fc_redis_cpu_us(redis_pid), t0 = proc_mono_us();
    long units = pipe_run(&j, err, errlen);
    int64_t t1 = proc_mono_us(), cpu1 = fc_redis_cpu_us(redis_pid);
    bench_usage u1 = bench_proc_usage(redis_pid);
    int read = cmdstats_read(c, &c1);
    redisFree(c);
    if (units != j.n || s->reply_error || s->overflow || read < 0) {
        if (units >= 0) snprintf(err, errlen, "the contract's floor: %s", fc_why(s, read));
        return -1;
    }
    double n = (double)s->w->n;
    *out = (fc_pass){
        .rate = n * 1e6 / (double)(t1 - t0 > 0 ? t1 - t0 : 1),
        .cpu_us = cpu0 < 0 || cpu1 < 0 ? -1 : (double)(cpu1 - cpu0) / n,
        .faults = u0.faults < 0 || u1.faults < 0 ? -1 : (double)(u1.faults - u0.faults) / n,
    };
    cmdstats_delta(&c1, &c0, NULL, &out->cmds);
    return 0;
}

int floor_contract_measure(const bench_target *t, pid_t redis_pid, const workload *w, int chunk, floor_kind kind,
                           floor_contract_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    fc_state s;
    if (chunk < 1 || w->n < 1 || fc_init(&s, w, chunk) < 0) {
        snprintf(err, errlen, "the contract's floor: no memory (or no requests)");
        return -1;
    }
    fc_del(t, &s);
    fc_pass push;
    int rc = kind == FLOOR_DRAIN ? fc_run(t, redis_pid, &s, FC_PUSH_ONLY, &push, err, errlen) : 0;
    if (rc == 0) rc = fc_run(t, redis_pid, &s, (int)kind, &out->pass, err, errlen);
    out->n = w->n;
    out->granted = s.granted;
    out->chunk = chunk;
    out->kind = kind;
    fc_del(t, &s);
    fc_free(&s);
    return rc;
}

const floor_contract_result *floor_contract_best(const floor_contract_runs *r, double *lo, double *hi)
{
    if (r->n < 1) return NULL;
    int best = 0, worst = 0;
    for (int i = 1; i < r->n; i++) {
        if (r->run[i].pass.cpu_us < r->run[best].pass.cpu_us) best = i;
        if (r->run[i].pass.cpu_us > r->run[worst].pass.cpu_us) worst = i;
    }
    *lo = r->run[best].pass.cpu_us;
    *hi = r->run[worst].pass.cpu_us;
    return &r->run[best];
}
