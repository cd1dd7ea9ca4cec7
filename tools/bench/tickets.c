/* tickets.c -- see tickets.h.
 *
 * Both designs see the same sale: `buyers` buyers (one request each, in
 * index order) for `tickets` tickets, reservations held `hold_ms`; a
 * buyer pays (confirms) at once with probability 1/2 (a hash of the
 * buyer), the others never pay and their reservations expire, so half of
 * every round of reservations comes back.
 *
 * allocd: every buy carries "wait":true and is pushed before the batch
 * opens; the bench then only reads the event log and confirms the grants
 * of paying buyers. Returned tickets are served by allocd from its
 * waitlist; a returned ticket went to the longest-waiting buyer when its
 * wait_served entry names the smallest ticket number still waiting.
 *
 * Lua: one EVALSHA per attempt reclaims due reservations and takes a
 * ticket if one is free (tools/bench/alt_lua.c's design, cut to one item).
 * The first wave is every buyer once; the losers then retry every
 * `retry_ms` (in random order, as independent clients would) until the
 * time is up. A returned ticket went to the longest-waiting buyer when the
 * buyer who got it had the smallest index among those still without one.
 */
#include "bench/tickets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/log_entry.h"

#define PIPE 2000

static int pays(long i) { return (bench_mix((uint64_t)i * 7919u) & 1) == 0; }

static double now_s(void) { return (double)proc_mono_us() / 1e6; }

/* Sends cmds[0..n) pipelined (argv already formatted with hiredis) and
 * hands each reply to fn. -1 on an I/O error. */
static int drain_replies(redisContext *c, long n, void (*fn)(void *ctx, long i, redisReply *r), void *ctx,
                         long first)
{
    for (long i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) return -1;
        if (fn) fn(ctx, first + i, r);
        freeReplyObject(r);
    }
    return 0;
}

/* ------------------------------------------------------------ allocd -- */

typedef struct wait_track {
    char *served;          /* by wait_no */
    long next;             /* smallest wait_no not yet served */
    long n;
} wait_track;

static void wait_served(wait_track *w, long no, tickets_result *r)
{
    if (no < 1 || no > w->n) return;
    r->regranted++;
    if (no == w->next) r->to_longest_waiting++;
    w->served[no] = 1;
    while (w->next <= w->n && w->served[w->next]) w->next++;
}

/* What follow_log gathers from one read of the log. */
typedef struct log_reader {
    redisContext *c;
    const char *queue;
    wait_track *w;
    tickets_result *r;
    long sent;             /* confirms pushed by this read */
    long grants;           /* every grant seen, first wave and waitlist */
} log_reader;

static const char *field(const log_field *f, size_t n, const char *name)
{
    for (size_t j = 0; j < n; j++)
        if (!strcmp(f[j].key, name)) return f[j].val;
    return "";
}

/* One event, in either log format (wire/log_entry.h decodes both): a
 * paying buyer's grant is confirmed at once. */
static int on_event(void *ud, const log_field *f, size_t n)
{
    log_reader *lr = ud;
    const char *type = field(f, n, "type");
    if (!strcmp(type, "grant")) {
        long buyer = strtol(field(f, n, "user") + 1, NULL, 10);
        lr->grants++;
        if (pays(buyer)) {
            redisAppendCommand(lr->c, "RPUSH %s {\"id\":\"c%ld\",\"user\":\"u%ld\",\"op\":\"confirm\",\"order\":\"%s\"}",
                               lr->queue, buyer, buyer, field(f, n, "order"));
            lr->sent++;
        }
    } else if (!strcmp(type, "confirm")) {
        lr->r->paid++;
    } else if (!strcmp(type, "expire")) {
        lr->r->returned++;
    } else if (!strcmp(type, "wait_served") && !strcmp(field(f, n, "status"), "granted")) {
        wait_served(lr->w, strtol(field(f, n, "wait_no"), NULL, 10), lr->r);
    }
    return 0;
}

/* One stream entry ({id, [field, value, ...]}) through the decoder. */
static int read_entry(log_reader *lr, const redisReply *e, char *err, size_t errlen)
{
    enum { MAX_FIELDS = 32 };
    const redisReply *kv = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? e->element[1] : NULL;
    if (!kv || kv->type != REDIS_REPLY_ARRAY || kv->elements / 2 > MAX_FIELDS) {
        snprintf(err, errlen, "a log entry that is not {id, fields}");
        return -1;
    }
    log_field f[MAX_FIELDS];
    size_t n = kv->elements / 2;
    for (size_t j = 0; j < n; j++)
        f[j] = (log_field){ kv->element[2 * j]->str, kv->element[2 * j + 1]->str, kv->element[2 * j + 1]->len };
    char why[160];
    if (log_entry_decode(f, n, on_event, lr, why, sizeof why) < 0) {
        snprintf(err, errlen, "log entry %s: %s", e->element[0]->str, why);
        return -1;
    }
    return 0;
}

/* Reads the log from `from` on: confirms for paying buyers' grants,
 * counts grants, expiries and paid tickets, tracks the waitlist's order. */
static int follow_log(log_reader *lr, const char *log, char *from, size_t fromlen, long *pushed,
                      char *err, size_t errlen)
{
    redisReply *x = redisCommand(lr->c, "XRANGE %s %s + COUNT 5000", log, from);
    if (!x || x->type != REDIS_REPLY_ARRAY) {
        if (x) freeReplyObject(x);
        snprintf(err, errlen, "XRANGE of the log failed");
        return -1;
    }
    lr->sent = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < x->elements; i++) rc = read_entry(lr, x->element[i], err, errlen);
    if (x->elements) snprintf(from, fromlen, "(%s", x->element[x->elements - 1]->element[0]->str);
    freeReplyObject(x);
    *pushed += lr->sent;
    return drain_replies(lr->c, lr->sent, NULL, NULL, 0) < 0 ? -1 : rc;
}

int tickets_allocd(const tickets_opts *o, tickets_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    redisContext *c = bench_connect(o->target);
    if (!c) { snprintf(err, errlen, "cannot connect"); return -1; }
    char b[64], meta[128], queue[128], log[128], stats[128];
    snprintf(b, sizeof b, "tickets-%d", (int)getpid());
    snprintf(meta, sizeof meta, "%s:{%s}:meta", o->prefix, b);
    snprintf(queue, sizeof queue, "%s:{%s}:queue", o->prefix, b);
    snprintf(log, sizeof log, "%s:{%s}:log", o->prefix, b);
    snprintf(stats, sizeof stats, "%s:{%s}:stats", o->prefix, b);
    bench_ok(c, "HSET %s kind stock per_user 1 hold_ms %d", meta, o->hold_ms);
    bench_ok(c, "HSET %s:{%s}:capacity tix %ld", o->prefix, b, o->tickets);
    for (long i = 0; i < o->buyers; i += PIPE) {
        long n = o->buyers - i < PIPE ? o->buyers - i : PIPE;
        for (long j = i; j < i + n; j++)
            redisAppendCommand(c, "RPUSH %s {\"id\":\"b%ld\",\"user\":\"u%ld\",\"op\":\"buy\",\"item\":\"tix\",\"wait\":true}",
                               queue, j, j);
        if (drain_replies(c, n, NULL, NULL, 0) < 0) { snprintf(err, errlen, "push failed"); redisFree(c); return -1; }
    }
    wait_track w = { calloc((size_t)o->buyers + 2, 1), 1, o->buyers };
    log_reader lr = { .c = c, .queue = queue, .w = &w, .r = r };
    char from[64] = "-";
    long pushed = o->buyers;
    double t0 = now_s();
    bench_ok(c, "SADD %s:batches %s", o->prefix, b);
    int rc = 0;
    while (rc == 0 && proc_int(c, "HGET %s processed", stats) < o->buyers) {
        if (now_s() - t0 > 120) { snprintf(err, errlen, "the first wave took over 120 s"); rc = -1; }
        rc |= follow_log(&lr, log, from, sizeof from, &pushed, err, errlen);
        proc_sleep_ms(5);
    }
    r->first_wave_s = now_s() - t0;
    r->first_wave_rps = (double)o->buyers / r->first_wave_s;
    double end = t0 + r->first_wave_s + o->seconds;
    while (rc == 0 && now_s() < end) {
        rc |= follow_log(&lr, log, from, sizeof from, &pushed, err, errlen);
        proc_sleep_ms(20);
    }
    r->calls = pushed;
    r->calls_per_s = (double)pushed / (now_s() - t0);
    /* A run that read no sale measured nothing: every ticket is granted in
     * the first wave, and with half the buyers never paying and the
     * holds shorter than the run, tickets are paid, come back and are
     * granted again. */
    int holds_expire = o->hold_ms < o->seconds * 1000;
    if (rc == 0 && (lr.grants < o->tickets || !r->paid || (holds_expire && (!r->returned || !r->regranted)))) {
        snprintf(err, errlen, "the log told no sale: %ld grants for %ld tickets, %ld paid, %ld returned, "
                 "%ld granted again", lr.grants, o->tickets, r->paid, r->returned, r->regranted);
        rc = -1;
    }
    r->ok = rc == 0 && proc_int(c, "HGET %s waiting", stats) >= 0;
    bench_ok(c, "SREM %s:batches %s", o->prefix, b);
    free(w.served);
    redisFree(c);
    if (rc < 0 && !*err) snprintf(err, errlen, "Redis failed");
    return rc;
}

/* --------------------------------------------------------------- Lua -- */

static const char lua_buy[] =
"local t = redis.call('TIME')\n"
"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
"local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 32)\n"
"for _, m in ipairs(due) do\n"
"  redis.call('HINCRBY', KEYS[1], 'tix', 1)\n"
"  redis.call('HDEL', KEYS[2], m)\n"
"  redis.call('ZREM', KEYS[3], m)\n"
"  redis.call('INCR', KEYS[4])\n"
"end\n"
"if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'limit' end\n"
"if tonumber(redis.call('HGET', KEYS[1], 'tix')) < 1 then return 'sold_out' end\n"
"redis.call('HINCRBY', KEYS[1], 'tix', -1)\n"
"redis.call('HSET', KEYS[2], ARGV[1], 'held')\n"
"redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])\n"
"return 'granted'\n";

static const char lua_confirm[] =
"if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then\n"
"  redis.call('HSET', KEYS[1], ARGV[1], 'paid')\n"
"  return 'done'\n"
"end\n"
"return 'expired'\n";

typedef struct lua_run {
    const tickets_opts *o;
    tickets_result *r;
    char *got;             /* buyer has a reservation or a paid ticket */
    long next_unserved;    /* smallest loser index without a ticket */
    long *confirm;         /* buyers to confirm after this pass */
    long n_confirm;
    int first_wave;
} lua_run;

static void on_buy(void *ctx, long buyer, redisReply *rep)
{
    lua_run *L = ctx;
    if (rep->type != REDIS_REPLY_STATUS && rep->type != REDIS_REPLY_STRING) return;
    if (strcmp(rep->str, "granted")) return;
    if (!L->first_wave) {
        L->r->regranted++;
        if (buyer == L->next_unserved) L->r->to_longest_waiting++;
    }
    L->got[buyer] = 1;
    while (L->next_unserved < L->o->buyers && L->got[L->next_unserved]) L->next_unserved++;
    if (pays(buyer)) L->confirm[L->n_confirm++] = buyer;
}

static void on_confirm(void *ctx, long i, redisReply *rep)
{
    lua_run *L = ctx;
    if ((rep->type == REDIS_REPLY_STATUS || rep->type == REDIS_REPLY_STRING) && !strcmp(rep->str, "done"))
        L->r->paid++;
}

/* One EVALSHA buy per buyer of list[0..n), pipelined; then the confirms. */
static int lua_pass(redisContext *c, lua_run *L, const char *sha_buy, const char *sha_conf, const char *keys[4],
                    const long *list, long n)
{
    for (long i = 0; i < n; i += PIPE) {
        long m = n - i < PIPE ? n - i : PIPE;
        for (long j = i; j < i + m; j++)
            redisAppendCommand(c, "EVALSHA %s 4 %s %s %s %s u%ld %d", sha_buy, keys[0], keys[1], keys[2], keys[3],
                               list[j], L->o->hold_ms);
        for (long j = i; j < i + m; j++) {
            redisReply *rep = NULL;
            if (redisGetReply(c, (void **)&rep) != REDIS_OK) return -1;
            on_buy(L, list[j], rep);
            freeReplyObject(rep);
        }
        L->r->calls += m;
        for (long k = 0; k < L->n_confirm; k++)
            redisAppendCommand(c, "EVALSHA %s 2 %s %s u%ld", sha_conf, keys[1], keys[2], L->confirm[k]);
        if (drain_replies(c, L->n_confirm, on_confirm, L, 0) < 0) return -1;
        L->r->calls += L->n_confirm;
        L->n_confirm = 0;
    }
    return 0;
}

int tickets_lua(const tickets_opts *o, tickets_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    redisContext *c = bench_connect(o->target);
    if (!c) { snprintf(err, errlen, "cannot connect"); return -1; }
    char sha_buy[41], sha_conf[41];
    char k0[64], k1[64], k2[64], k3[64];
    snprintf(k0, sizeof k0, "tl:{%d}:free", (int)getpid());
    snprintf(k1, sizeof k1, "tl:{%d}:held", (int)getpid());
    snprintf(k2, sizeof k2, "tl:{%d}:res", (int)getpid());
    snprintf(k3, sizeof k3, "tl:{%d}:returned", (int)getpid());
    const char *keys[4] = { k0, k1, k2, k3 };
    if (bench_script_load(c, lua_buy, sha_buy) < 0 || bench_script_load(c, lua_confirm, sha_conf) < 0) {
        snprintf(err, errlen, "SCRIPT LOAD failed");
        redisFree(c);
        return -1;
    }
    bench_ok(c, "DEL %s %s %s %s", k0, k1, k2, k3);
    bench_ok(c, "HSET %s tix %ld", k0, o->tickets);
    lua_run L = { o, r, calloc((size_t)o->buyers + 1, 1), 0, calloc((size_t)PIPE + 1, sizeof(long)), 0, 1 };
    long *list = malloc((size_t)o->buyers * sizeof *list);
    for (long i = 0; i < o->buyers; i++) list[i] = i;
    double t0 = now_s();
    int rc = lua_pass(c, &L, sha_buy, sha_conf, keys, list, o->buyers);
    r->first_wave_s = now_s() - t0;
    r->first_wave_rps = (double)o->buyers / r->first_wave_s;
    L.first_wave = 0;
    uint64_t rng = o->seed;
    double end = t0 + r->first_wave_s + o->seconds;
    while (rc == 0 && now_s() < end) {
        double pass0 = now_s();
        long n = 0;
        for (long i = 0; i < o->buyers; i++)
            if (!L.got[i]) list[n++] = i;
        for (long i = n - 1; i > 0; i--) {   /* independent clients: a random order */
            rng = bench_mix(rng + 0x9e3779b97f4a7c15ULL);
            long j = (long)(rng % (uint64_t)(i + 1));
            long t = list[i]; list[i] = list[j]; list[j] = t;
        }
        rc = lua_pass(c, &L, sha_buy, sha_conf, keys, list, n);
        double left = o->retry_ms / 1000.0 - (now_s() - pass0);
        if (left > 0) proc_sleep_ms((int)(left * 1000));
    }
    r->returned = proc_int(c, "GET %s", k3);
    r->calls_per_s = (double)r->calls / (now_s() - t0);
    r->ok = rc == 0;
    bench_ok(c, "DEL %s %s %s %s", k0, k1, k2, k3);
    free(L.got);
    free(L.confirm);
    free(list);
    redisFree(c);
    if (rc < 0) snprintf(err, errlen, "Redis failed");
    return rc;
}
