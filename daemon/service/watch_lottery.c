/* watch_lottery.c -- see watch_lottery.h. The reads follow one another:
 * internal (early_served, lottery_done), then the pool in LRANGE pages,
 * then the results in HMGET pages; each reply starts the next read. A
 * page of either is about 10 ms of parsing, the longest allocd's loop
 * waits on it; the draw itself is one step (about 20 ms for 100,000
 * users), made once per round: a recheck reads the results only. */
#include "service/watch_lottery.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "worker/lottery_verify.h"

#define POOL_PAGE    2000
#define RESULTS_PAGE 2000

struct watch_lottery {
    int out;                  /* commands in flight (not in b->pending: the
                                 batch's own polls go on meanwhile) */
    int busy;                 /* a check under way */
    char key[LOTTERY_SEED_HEX + 32];   /* seed and processed of the verdict */
    int64_t checked_at;
    json_t *verdict;
    redis_router *conn;
    const allocd_config *cfg;
    char seed[LOTTERY_SEED_HEX + 1];   /* copied once per check */
    /* the pool, drawn: it cannot change once lottery_done is set, so a
     * recheck reads only the results */
    lottery_pool pool;
    int drawn;
    int64_t served;
    /* the check under way */
    lottery_result *res;
    size_t at;                /* next pool index / serving position to read */
    size_t diffs;
    char first[512];
};

static void wl__key(const watch_batch *b, char *out, size_t len)
{
    const char *seed = json_string_value(json_object_get(b->stats, "lottery_seed"));
    const char *processed = json_string_value(json_object_get(b->stats, "processed"));
    snprintf(out, len, "%s/%s", seed ? seed : "", processed ? processed : "0");
}

static void wl__drop_pool(struct watch_lottery *l)
{
    lottery_pool_free(&l->pool);
    memset(&l->pool, 0, sizeof l->pool);
    l->drawn = 0;
}

static void wl__finish(watch_batch *b, const char *state)
{
    struct watch_lottery *l = b->lottery;
    json_decref(l->verdict);
    l->verdict = json_pack("{s:s,s:I,s:I,s:I,s:I}", "state", state, "pool", (json_int_t)l->pool.n,
                           "served", (json_int_t)l->served, "differences", (json_int_t)l->diffs,
                           "checked_at", (json_int_t)clock_wall_ms());
    json_object_set_new(l->verdict, "first", *l->first ? json_string(l->first) : json_null());
    l->checked_at = clock_wall_ms();
    if (!l->drawn) wl__drop_pool(l);
    free(l->res);
    l->res = NULL;
    l->busy = 0;
}

/* retry: a Redis error or no memory, worth asking again at the next poll;
 * else (a pool entry or seed that cannot be read) not before the usual
 * WATCH_LOTTERY_RECHECK_MS. */
static void wl__error(watch_batch *b, const char *why, int retry)
{
    struct watch_lottery *l = b->lottery;
    if (retry) l->key[0] = 0;
    l->diffs = 0;
    wl__drop_pool(l);
    snprintf(l->first, sizeof l->first, "%s", why);
    wl__finish(b, "error");
}

static int wl__send(watch_batch *b, redis_reply_fn fn, int argc, const char **argv)
{
    struct watch_lottery *l = b->lottery;
    if (redis_router_command(l->conn, argv[1], fn, b, l->cfg->redis_timeout_ms, argc, argv, NULL) < 0) return -1;
    l->out++;
    return 0;
}

static void on_diff(void *ud, const char *msg)
{
    struct watch_lottery *l = ud;
    if (!*l->first) snprintf(l->first, sizeof l->first, "%s", msg);
}

static void wl__results_page(watch_batch *b);

static void on_results(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    struct watch_lottery *l = b->lottery;
    l->out--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY) {
        wl__error(b, err ? err : "unexpected reply to HMGET", 1);
        return;
    }
    for (size_t k = 0; k < rep->elements && l->at + k < l->pool.n; k++) {
        const redisReply *e = rep->element[k];
        if (e->type == REDIS_REPLY_STRING) lottery_result_parse(&l->res[l->at + k], e->str, e->len);
    }
    l->at += rep->elements;
    wl__results_page(b);
}

static void wl__results_page(watch_batch *b)
{
    struct watch_lottery *l = b->lottery;
    if (l->at >= l->pool.n) {
        l->diffs = lottery_verify_results(&l->pool, l->res, l->served, on_diff, l);
        wl__finish(b, l->diffs ? "mismatch" : "match");
        return;
    }
    size_t n = l->pool.n - l->at < RESULTS_PAGE ? l->pool.n - l->at : RESULTS_PAGE;
    const char **argv = malloc((n + 2) * sizeof *argv);
    char key[200];
    snprintf(key, sizeof key, "%s:{%s}:results", l->cfg->prefix, b->id);
    if (!argv) { wl__error(b, "out of memory", 1); return; }
    argv[0] = "HMGET";
    argv[1] = key;
    for (size_t k = 0; k < n; k++) argv[2 + k] = l->pool.reqs[l->pool.serve[l->at + k]].id;
    if (wl__send(b, on_results, (int)n + 2, argv) < 0) wl__error(b, "Redis is not connected", 1);
    free(argv);
}

/* The results of the drawn pool, from the first. */
static void wl__results_start(watch_batch *b)
{
    struct watch_lottery *l = b->lottery;
    l->res = calloc(l->pool.n ? l->pool.n : 1, sizeof *l->res);
    if (!l->res) { wl__error(b, "out of memory", 1); return; }
    l->at = 0;
    wl__results_page(b);
}

static void wl__pool_page(watch_batch *b);

static void on_pool(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    struct watch_lottery *l = b->lottery;
    l->out--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY) {
        wl__error(b, err ? err : "unexpected reply to LRANGE", 1);
        return;
    }
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_STRING || lottery_pool_load_entry(&l->pool, e->str, e->len) < 0) {
            wl__error(b, "the pool has an entry that is not a pool entry", 0);
            return;
        }
    }
    l->at += rep->elements;
    if (rep->elements == POOL_PAGE) { wl__pool_page(b); return; }
    snprintf(l->pool.seed, sizeof l->pool.seed, "%s", l->seed);
    if (lottery_pool_draw(&l->pool, NULL) < 0) { wl__error(b, "the seed is not 64 hex digits, or out of memory", 0); return; }
    l->drawn = 1;
    wl__results_start(b);
}

static void wl__pool_page(watch_batch *b)
{
    struct watch_lottery *l = b->lottery;
    char key[200], from[24], to[24];
    snprintf(key, sizeof key, "%s:{%s}:early", l->cfg->prefix, b->id);
    snprintf(from, sizeof from, "%zu", l->at);
    snprintf(to, sizeof to, "%zu", l->at + POOL_PAGE - 1);
    const char *argv[] = { "LRANGE", key, from, to };
    if (wl__send(b, on_pool, 4, argv) < 0) wl__error(b, "Redis is not connected", 1);
}

static void on_internal(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    struct watch_lottery *l = b->lottery;
    l->out--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
        wl__error(b, err ? err : "unexpected reply to HMGET", 1);
        return;
    }
    const redisReply *served = rep->element[0], *done = rep->element[1];
    l->served = served->type == REDIS_REPLY_STRING ? strtoll(served->str, NULL, 10) : 0;
    if (done->type != REDIS_REPLY_STRING || strcmp(done->str, "1")) {
        l->key[0] = 0;   /* asked again at the next poll */
        wl__finish(b, "serving");
        return;
    }
    lottery_pool_init(&l->pool, 1);
    l->at = 0;
    wl__pool_page(b);
}

void watch_lottery_poll(redis_router *conn, const allocd_config *cfg, watch_batch *b, int64_t now_ms)
{
    const char *seed = json_string_value(json_object_get(b->stats, "lottery_seed"));
    const char *early = json_string_value(json_object_get(b->meta, "early"));
    if (!seed || !early || strcmp(early, "shuffle")) return;
    if (!b->lottery && !(b->lottery = calloc(1, sizeof *b->lottery))) return;
    struct watch_lottery *l = b->lottery;
    char key[sizeof l->key];
    wl__key(b, key, sizeof key);
    if (l->busy || !strcmp(key, l->key)) return;
    if (l->verdict && l->key[0] && now_ms - l->checked_at < WATCH_LOTTERY_RECHECK_MS) return;
    snprintf(l->key, sizeof l->key, "%s", key);
    l->conn = conn;
    l->cfg = cfg;
    l->busy = 1;
    l->diffs = 0;
    l->first[0] = 0;
    if (l->drawn && !strcmp(l->seed, seed)) { wl__results_start(b); return; }   /* the pool as drawn */
    wl__drop_pool(l);   /* none yet, or another round's */
    snprintf(l->seed, sizeof l->seed, "%s", seed);
    char ik[200];
    snprintf(ik, sizeof ik, "%s:{%s}:internal", cfg->prefix, b->id);
    const char *argv[] = { "HMGET", ik, "early_served", "lottery_done" };
    if (wl__send(b, on_internal, 4, argv) < 0) wl__error(b, "Redis is not connected", 1);
}

const json_t *watch_lottery_verdict(const watch_batch *b)
{
    return b->lottery ? b->lottery->verdict : NULL;
}

int watch_lottery_busy(const watch_batch *b)
{
    return b->lottery && b->lottery->out > 0;
}

void watch_lottery_free(watch_batch *b)
{
    if (!b->lottery) return;
    json_decref(b->lottery->verdict);
    lottery_pool_free(&b->lottery->pool);
    free(b->lottery->res);
    free(b->lottery);
    b->lottery = NULL;
}
