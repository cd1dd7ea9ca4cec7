/* watch_lottery.c -- see watch_lottery.h. The reads follow one another:
 * internal (early_served, lottery_done), then the pool in LRANGE pages,
 * then the results in HMGET pages; each reply starts the next read. A
 * page of either is about 10 ms of parsing, the longest allocd's loop
 * waits on it; the draw itself is one step (about 20 ms for 100,000
 * users). */
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
    int busy;
    char key[LOTTERY_SEED_HEX + 32];   /* seed and processed of the verdict */
    int64_t checked_at;
    json_t *verdict;
    /* the read under way */
    redis_router *conn;
    const allocd_config *cfg;
    lottery_pool pool;
    lottery_result *res;
    size_t at;                /* next pool index / serving position to read */
    int64_t served;
    size_t diffs;
    char first[512];
};

static void wl__key(const watch_batch *b, char *out, size_t len)
{
    const char *seed = json_string_value(json_object_get(b->stats, "lottery_seed"));
    const char *processed = json_string_value(json_object_get(b->stats, "processed"));
    snprintf(out, len, "%s/%s", seed ? seed : "", processed ? processed : "0");
}

static void wl__finish(watch_batch *b, const char *state, int64_t served)
{
    struct watch_lottery *l = b->lottery;
    json_decref(l->verdict);
    l->verdict = json_pack("{s:s,s:I,s:I,s:I,s:I}", "state", state, "pool", (json_int_t)l->pool.n,
                           "served", (json_int_t)served, "differences", (json_int_t)l->diffs,
                           "checked_at", (json_int_t)clock_wall_ms());
    json_object_set_new(l->verdict, "first", *l->first ? json_string(l->first) : json_null());
    l->checked_at = clock_wall_ms();
    lottery_pool_free(&l->pool);
    memset(&l->pool, 0, sizeof l->pool);
    free(l->res);
    l->res = NULL;
    l->busy = 0;
}

static void wl__error(watch_batch *b, const char *why)
{
    struct watch_lottery *l = b->lottery;
    l->key[0] = 0;   /* read again next time */
    l->diffs = 0;
    snprintf(l->first, sizeof l->first, "%s", why);
    wl__finish(b, "error", 0);
}

static int wl__send(watch_batch *b, redis_reply_fn fn, int argc, const char **argv)
{
    struct watch_lottery *l = b->lottery;
    if (redis_router_command(l->conn, argv[1], fn, b, l->cfg->redis_timeout_ms, argc, argv, NULL) < 0) return -1;
    b->pending++;
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
    b->pending--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY) { wl__error(b, err ? err : "unexpected reply to HMGET"); return; }
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
        wl__finish(b, l->diffs ? "mismatch" : "match", l->served);
        return;
    }
    size_t n = l->pool.n - l->at < RESULTS_PAGE ? l->pool.n - l->at : RESULTS_PAGE;
    const char **argv = malloc((n + 2) * sizeof *argv);
    char key[200];
    snprintf(key, sizeof key, "%s:{%s}:results", l->cfg->prefix, b->id);
    if (!argv) { wl__error(b, "out of memory"); return; }
    argv[0] = "HMGET";
    argv[1] = key;
    for (size_t k = 0; k < n; k++) argv[2 + k] = l->pool.reqs[l->pool.serve[l->at + k]].id;
    if (wl__send(b, on_results, (int)n + 2, argv) < 0) wl__error(b, "Redis is not connected");
    free(argv);
}

static void wl__pool_page(watch_batch *b);

static void on_pool(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    struct watch_lottery *l = b->lottery;
    b->pending--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY) { wl__error(b, err ? err : "unexpected reply to LRANGE"); return; }
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_STRING || lottery_pool_load_entry(&l->pool, e->str, e->len) < 0) {
            wl__error(b, "the pool has an entry that is not a pool entry");
            return;
        }
    }
    l->at += rep->elements;
    if (rep->elements == POOL_PAGE) { wl__pool_page(b); return; }
    const char *seed = json_string_value(json_object_get(b->stats, "lottery_seed"));
    snprintf(l->pool.seed, sizeof l->pool.seed, "%s", seed ? seed : "");
    l->res = calloc(l->pool.n ? l->pool.n : 1, sizeof *l->res);
    if (!l->res || lottery_pool_draw(&l->pool, NULL) < 0) { wl__error(b, "the seed is not 64 hex digits, or out of memory"); return; }
    l->at = 0;
    wl__results_page(b);
}

static void wl__pool_page(watch_batch *b)
{
    struct watch_lottery *l = b->lottery;
    char key[200], from[24], to[24];
    snprintf(key, sizeof key, "%s:{%s}:early", l->cfg->prefix, b->id);
    snprintf(from, sizeof from, "%zu", l->at);
    snprintf(to, sizeof to, "%zu", l->at + POOL_PAGE - 1);
    const char *argv[] = { "LRANGE", key, from, to };
    if (wl__send(b, on_pool, 4, argv) < 0) wl__error(b, "Redis is not connected");
}

static void on_internal(redis_conn *c, redisReply *rep, const char *err, void *data)
{
    watch_batch *b = data;
    struct watch_lottery *l = b->lottery;
    b->pending--;
    if (err || !rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) { wl__error(b, err ? err : "unexpected reply to HMGET"); return; }
    const redisReply *served = rep->element[0], *done = rep->element[1];
    l->served = served->type == REDIS_REPLY_STRING ? strtoll(served->str, NULL, 10) : 0;
    if (done->type != REDIS_REPLY_STRING || strcmp(done->str, "1")) {
        l->key[0] = 0;   /* asked again at the next poll */
        wl__finish(b, "serving", l->served);
        return;
    }
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
    lottery_pool_init(&l->pool, 1);
    char ik[200];
    snprintf(ik, sizeof ik, "%s:{%s}:internal", cfg->prefix, b->id);
    const char *argv[] = { "HMGET", ik, "early_served", "lottery_done" };
    if (wl__send(b, on_internal, 4, argv) < 0) wl__error(b, "Redis is not connected");
}

const json_t *watch_lottery_verdict(const watch_batch *b)
{
    return b->lottery ? b->lottery->verdict : NULL;
}

void watch_lottery_free(watch_batch *b)
{
    if (!b->lottery) return;
    json_decref(b->lottery->verdict);
    if (b->lottery->busy) lottery_pool_free(&b->lottery->pool);
    free(b->lottery->res);
    free(b->lottery);
    b->lottery = NULL;
}
