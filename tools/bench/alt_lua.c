/* alt_lua.c -- the Lua-script flash-sale design, the usual alternative.
 *
 * One EVALSHA per request does the whole decision atomically inside Redis:
 * check the item's stock and the user's count, decrement, record the user
 * (HINCRBY of a per-user count, or the user's room), XADD the order to a
 * stream; with hold_ms it also keeps the reservation in a sorted set and
 * returns the units of due reservations at the start of each call. Clients
 * pipeline their calls from several connections (as many as allocd has
 * producers), which is the fastest this design gets. The reply goes
 * straight back to the caller, so it keeps no per-request result hash --
 * less work than allocd's durable results, stats and log, which the report
 * states next to the ratio.
 */
#include "alt_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char lua_buy[] =
"local hold = tonumber(ARGV[5])\n"
"local now = 0\n"
"if hold > 0 then\n"
"  local t = redis.call('TIME')\n"
"  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
"  local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 32)\n"
"  for _, m in ipairs(due) do\n"
"    local u, it, q = string.match(m, '^([^|]*)|([^|]*)|(%d+)|')\n"
"    redis.call('HINCRBY', KEYS[1], it, q)\n"
"    redis.call('HINCRBY', KEYS[2], u, -q)\n"
"    redis.call('ZREM', KEYS[4], m)\n"
"    redis.call('XADD', KEYS[3], '*', 'type', 'expire', 'user', u, 'item', it, 'qty', q)\n"
"  end\n"
"end\n"
"local free = tonumber(redis.call('HGET', KEYS[1], ARGV[2]))\n"
"if not free then return 'rejected:unknown_item' end\n"
"local qty = tonumber(ARGV[3])\n"
"if free < qty then return 'rejected:sold_out' end\n"
"local held = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')\n"
"if held + qty > tonumber(ARGV[4]) then return 'rejected:limit' end\n"
"redis.call('HINCRBY', KEYS[1], ARGV[2], -qty)\n"
"redis.call('HINCRBY', KEYS[2], ARGV[1], qty)\n"
"local id = redis.call('XADD', KEYS[3], '*', 'type', 'grant', 'user', ARGV[1], 'item', ARGV[2], 'qty', qty)\n"
"if hold > 0 then\n"
"  redis.call('ZADD', KEYS[4], now + hold, ARGV[1] .. '|' .. ARGV[2] .. '|' .. qty .. '|' .. id)\n"
"end\n"
"return 'granted'\n";

static const char lua_auto[] =
"if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'rejected:already_holding' end\n"
"for i = 2, #ARGV do\n"
"  local f = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')\n"
"  if f > 0 then\n"
"    redis.call('HINCRBY', KEYS[1], ARGV[i], -1)\n"
"    redis.call('HSET', KEYS[2], ARGV[1], ARGV[i])\n"
"    redis.call('XADD', KEYS[3], '*', 'type', 'grant', 'user', ARGV[1], 'item', ARGV[i])\n"
"    return 'granted'\n"
"  end\n"
"end\n"
"return 'rejected:no_room'\n";

static const char lua_group[] =
"local k = tonumber(ARGV[1])\n"
"for m = 2, k + 1 do\n"
"  if redis.call('HEXISTS', KEYS[2], ARGV[m]) == 1 then return 'rejected:member_busy' end\n"
"end\n"
"for i = k + 2, #ARGV do\n"
"  local f = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')\n"
"  if f >= k then\n"
"    redis.call('HINCRBY', KEYS[1], ARGV[i], -k)\n"
"    for m = 2, k + 1 do\n"
"      redis.call('HSET', KEYS[2], ARGV[m], ARGV[i])\n"
"      redis.call('XADD', KEYS[3], '*', 'type', 'grant', 'user', ARGV[m], 'item', ARGV[i])\n"
"    end\n"
"    return 'granted'\n"
"  end\n"
"end\n"
"return 'rejected:no_room'\n";

typedef struct lua_shared {
    const alt_opts *o;
    char sha[3][41];
    char keys[4][256];        /* free, users/holders, log, holds */
    alt_result *res;
} lua_shared;

typedef struct lua_conn {
    lua_shared *sh;
    int id;
    long n;
    int64_t t0;               /* mono us: the schedule's origin when paced */
    int64_t *sent_us;         /* per call: sent (open loop: due), mono us */
    latency lat;              /* call -> reply, ms */
    char err[160];
    pthread_t th;
} lua_conn;

static long conn_index(const lua_conn *lc, long k) { return k * lc->sh->o->conns + lc->id; }

static int64_t lua_due(void *ctx, long k)
{
    lua_conn *lc = ctx;
    return lc->t0 + (int64_t)((double)conn_index(lc, k) * 1e6 / lc->sh->o->rate);
}

/* Strings of one call; argv points into it. */
typedef struct call_args {
    char s[4 + WL_MEMBERS + WL_PREFS][48];
    const char *argv[24];
    int argc;
} call_args;

static void arg(call_args *a, const char *s) { a->argv[a->argc++] = s; }

static char *slot(call_args *a, int k) { return a->s[k]; }

static void build_buy(const lua_shared *sh, long i, const wl_req *r, call_args *a)
{
    const workload *w = sh->o->w;
    arg(a, sh->sha[0]); arg(a, "4");
    for (int k = 0; k < 4; k++) arg(a, sh->keys[k]);
    wl_user_name(i, r, 0, slot(a, 0), 48); arg(a, slot(a, 0));
    wl_item_name(w, r->item, slot(a, 1), 48); arg(a, slot(a, 1));
    arg(a, "1");
    snprintf(slot(a, 2), 48, "%d", w->per_user); arg(a, slot(a, 2));
    snprintf(slot(a, 3), 48, "%d", w->hold_ms); arg(a, slot(a, 3));
}

static void build_rooms(const lua_shared *sh, long i, const wl_req *r, call_args *a)
{
    int group = r->op == OPK_GROUP, s = 0;
    arg(a, sh->sha[group ? 2 : 1]); arg(a, "3");
    for (int k = 0; k < 3; k++) arg(a, sh->keys[k]);
    if (group) {
        snprintf(slot(a, s), 48, "%d", r->n_members); arg(a, slot(a, s++));
        for (int m = 0; m < r->n_members; m++) { wl_user_name(i, r, m, slot(a, s), 48); arg(a, slot(a, s++)); }
    } else {
        wl_user_name(i, r, 0, slot(a, s), 48); arg(a, slot(a, s++));
    }
    for (int p = 0; p < r->n_prefs; p++) { wl_item_name(sh->o->w, r->prefs[p], slot(a, s), 48); arg(a, slot(a, s++)); }
}

static void lua_append(void *ctx, redisContext *c, long k)
{
    lua_conn *lc = ctx;
    long i = conn_index(lc, k);
    wl_req r;
    call_args a = { .argc = 0 };
    workload_request(lc->sh->o->w, i, &r);
    arg(&a, "EVALSHA");
    if (r.op == OPK_BUY) build_buy(lc->sh, i, &r, &a);
    else build_rooms(lc->sh, i, &r, &a);
    char buf[2048]; /* the same RESP writer as allocd's producers */
    size_t len = resp_append(buf, 0, sizeof buf, a.argc, a.argv, NULL);
    const alt_opts *o = lc->sh->o;
    if (lc->sent_us) lc->sent_us[k] = o->open_loop && o->rate > 0 ? lua_due(lc, k) : proc_mono_us();
    redisAppendFormattedCommand(c, buf, len);
}

static void lua_done(void *ctx, long k, redisReply *r, int error)
{
    lua_conn *lc = ctx;
    outcome *o = &lc->sh->res->out;
    if (lc->sent_us) latency_add(&lc->lat, (double)(proc_mono_us() - lc->sent_us[k]) / 1000.0);
    if (error || r->type != REDIS_REPLY_STRING) {
        if (error && r->type == REDIS_REPLY_ERROR && !lc->err[0]) snprintf(lc->err, sizeof lc->err, "%s", r->str);
        __atomic_add_fetch(&o->errors, 1, __ATOMIC_RELAXED);
        return;
    }
    outcome_note(o, r->str, r->len);
}

static void *lua_main(void *arg)
{
    lua_conn *lc = arg;
    const alt_opts *o = lc->sh->o;
    lc->t0 = proc_mono_us();
    pipe_job j = {
        .target = o->target, .n = lc->n, .depth = o->open_loop ? (int)(lc->n + 1) : o->depth,
        .replies = 1, .ctx = lc, .append = lua_append, .done = lua_done,
        .due = o->rate > 0 ? lua_due : NULL, .tick_us = o->tick_us,
        .deadline_us = proc_mono_us() + (int64_t)o->max_seconds * 1000000,
    };
    long done = pipe_run(&j, lc->err, sizeof lc->err);
    if (done > 0) __atomic_add_fetch(&lc->sh->res->decided, done, __ATOMIC_RELAXED);
    return NULL;
}

static int lua_setup(redisContext *c, lua_shared *sh)
{
    const alt_opts *o = sh->o;
    static const char *const names[4] = { "free", "users", "log", "holds" };
    for (int k = 0; k < 4; k++) alt_key(sh->keys[k], sizeof sh->keys[k], o->batch, "lua", names[k]);
    if (alt_seed_free(c, o->w, o->batch, "lua") < 0) return -1;
    if (bench_script_load(c, lua_buy, sh->sha[0]) < 0) return -1;
    if (bench_script_load(c, lua_auto, sh->sha[1]) < 0) return -1;
    return bench_script_load(c, lua_group, sh->sha[2]);
}

static int lua_threads(lua_shared *sh, char *err, size_t errlen)
{
    int n = sh->o->conns;
    lua_conn *lc = calloc((size_t)n, sizeof *lc);
    if (!lc) return -1;
    int rc = 0;
    for (int t = 0; t < n; t++) {
        lc[t] = (lua_conn){ .sh = sh, .id = t, .n = (sh->o->w->n - t + n - 1) / n };
        lc[t].sent_us = calloc((size_t)lc[t].n + 1, sizeof *lc[t].sent_us);
        if (!lc[t].sent_us || pthread_create(&lc[t].th, NULL, lua_main, &lc[t]) != 0) { rc = -1; break; }
    }
    latency all = { 0 };
    for (int t = 0; t < n; t++) {
        if (lc[t].th) pthread_join(lc[t].th, NULL);
        if (lc[t].err[0] && !err[0]) snprintf(err, errlen, "lua connection %d: %s", t, lc[t].err);
        for (size_t i = 0; i < lc[t].lat.n; i++) latency_add(&all, lc[t].lat.v[i]);
        latency_free(&lc[t].lat);
        free(lc[t].sent_us);
    }
    alt_result *res = sh->res;
    res->p50 = latency_quantile(&all, 0.50);
    res->p99 = latency_quantile(&all, 0.99);
    res->p999 = latency_quantile(&all, 0.999);
    res->pmax = latency_quantile(&all, 1.0);
    latency_free(&all);
    free(lc);
    return rc;
}

int alt_lua_run(const alt_opts *o, alt_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    err[0] = '\0';
    redisContext *c = bench_connect(o->target);
    if (!c) { snprintf(err, errlen, "cannot connect"); return -1; }
    lua_shared sh = { .o = o, .res = res };
    int rc = lua_setup(c, &sh);
    if (rc == 0) {
        alt_window win;
        alt_window_open(&win, c, o);
        rc = lua_threads(&sh, err, errlen);
        alt_window_close(&win, c, o, res);
    }
    redisFree(c);
    if (res->out.errors && !err[0]) snprintf(err, errlen, "%ld script errors", res->out.errors);
    return rc < 0 || res->out.errors ? -1 : 0;
}
