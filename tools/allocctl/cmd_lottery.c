/* cmd_lottery.c -- `allocctl lottery verify B`: replays an early=shuffle
 * draw from what anyone can read (the pool P:{B}:early, the revealed
 * stats.lottery_seed and the commitment stats.lottery_commit published
 * before the opening) and checks it against what was served: every served
 * pool request's result names its user's place in the draw (`draw`), the
 * served ones are exactly the first early_served of the replayed order,
 * and the grants' ranks follow that order. Exit 0 when all of it matches,
 * 1 on any difference or when the draw cannot be checked yet. */
#include "allocctl/cmd_lottery.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocctl/print.h"
#include "core/lottery.h"
#include "worker/lottery_pool.h"
#include "worker/lottery_verify.h"

#define MAX_SHOWN 50
#define PAGE 1000

static const char HELP_LOTTERY[] =
"Usage: allocctl lottery verify B [--show N]\n"
"\n"
"Replays the opening lottery of an early=shuffle batch from its pool (P:{B}:early) and\n"
"the revealed seed (stats.lottery_seed), checks the seed against the commitment\n"
"published before the opening (stats.lottery_commit = SHA-256 of the seed's 64 hex\n"
"characters), and compares the replayed order with what was served: each served pool\n"
"request's result must carry its user's place in the draw (`draw`) and, with\n"
"draw_by=points, the points recorded for its ticket with the draw (`points`); the requests\n"
"served must be the first internal.early_served of the order, and the grants' ranks\n"
"must follow it. --show N prints the first N users of the draw (default 10).\n"
"Exit 0 when everything matches, 1 on a difference or when the seed is not revealed yet.\n";

typedef struct verify {
    ctx *x;
    size_t diffs;
    lottery_pool pool;
    lottery_diff_fn quiet;    /* set: nothing printed, each difference to it */
    void *ud;
} verify;

static void on_diff(void *ud, const char *msg)
{
    verify *v = ud;
    if (v->quiet) {
        v->diffs++;
        v->quiet(v->ud, msg);
    } else {
        print_diff(&v->diffs, MAX_SHOWN, "%s", msg);
    }
}

static void vdiff(verify *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vdiff(verify *v, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    on_diff(v, msg);
}

/* The results of the pool requests in serving order, PAGE ids per HMGET,
 * checked against the replay (worker/lottery_verify.h: the dashboard's
 * check too). */
static int check_results(verify *v, int64_t served)
{
    lottery_pool *p = &v->pool;
    lottery_result *res = calloc(p->n ? p->n : 1, sizeof *res);
    if (!res) return -1;
    for (size_t from = 0; from < p->n; from += PAGE) {
        size_t to = from + PAGE < p->n ? from + PAGE : p->n;
        ctl_args a = { 0 };
        ctl_args_add(&a, "HMGET");
        ctl_args_add(&a, v->x->k.results);
        for (size_t k = from; k < to; k++) ctl_args_add(&a, p->reqs[p->serve[k]].id);
        redisReply *r = rargv(v->x, &a);
        ctl_args_free(&a);
        if (!r) { free(res); return -1; }
        for (size_t k = from; k < to && k - from < r->elements; k++) {
            const redisReply *e = r->element[k - from];
            if (e->type == REDIS_REPLY_STRING) lottery_result_parse(&res[k], e->str, e->len);
        }
        freeReplyObject(r);
    }
    lottery_verify_results(p, res, served, on_diff, v);
    free(res);
    return 0;
}

static int show_draw(verify *v, long show)
{
    lottery *l = &v->pool.lot;
    uint32_t *order = malloc((l->n_tickets ? l->n_tickets : 1) * sizeof *order);
    uint8_t seed[LOTTERY_SEED_LEN];
    if (!order || lottery_seed_parse(v->pool.seed, seed) < 0 ||
        lottery_draw_by(l, seed, v->pool.points_recorded, order) < 0) {
        free(order);
        return -1;
    }
    for (size_t k = 0; k < l->n_tickets && (long)k < show; k++)
        printf("draw %-6zu %s%s\n", k + 1, l->users[order[k]].id, l->users[order[k]].throttled ? " (throttled)" : "");
    free(order);
    return 0;
}

static int verify_batch(ctx *x, const char *b, long show, lottery_diff_fn quiet, void *ud)
{
    int rc = ctx_batch(x, b);
    if (rc) return rc;
    if ((rc = ctx_connect(x))) return rc;
    redisAppendCommand(x->c, "MULTI");
    redisAppendCommand(x->c, "HGETALL %s", x->k.stats);
    redisAppendCommand(x->c, "HGETALL %s", x->k.internal);
    redisAppendCommand(x->c, "LRANGE %s 0 -1", x->k.early);
    redisAppendCommand(x->c, "HGET %s early", x->k.meta);
    redisAppendCommand(x->c, "EXEC");
    redisReply *ex = exec_reply(x, 4, "unexpected reply to the snapshot");
    if (!ex) return EX_REDIS;
    const redisReply *stats = ex->element[0], *internal = ex->element[1], *early = ex->element[2],
                     *mode = ex->element[3];
    verify v = { .x = x, .quiet = quiet, .ud = ud };
    int talk = !quiet;   /* the command's own output */
    lottery_pool_init(&v.pool, 1);
    rc = EX_NOT;
    if (mode->type != REDIS_REPLY_STRING || strcmp(mode->str, "shuffle")) {
        if (talk) errmsg(x, "batch %s has no lottery (meta early is not shuffle)", b);
        goto out;
    }
    for (size_t i = 0; i < early->elements; i++)
        if (lottery_pool_load_entry(&v.pool, early->element[i]->str, early->element[i]->len) < 0) {
            if (talk) errmsg(x, "%s: entry %zu is not a pool entry", x->k.early, i);
            goto out;
        }
    const char *seed = hfield(stats, "lottery_seed"), *commit = hfield(stats, "lottery_commit");
    int64_t served = hfield_int(internal, "early_served", 0);
    const char *done = hfield(internal, "lottery_done");
    if (talk) {
        printf("%-14s %zu requests of %zu users (%zu entries)\n", "pool", v.pool.n,
               lottery_ticket_count(&v.pool.lot), early->elements);
        printf("%-14s %s\n", "commit", commit ? commit : "-");
        printf("%-14s %s\n", "seed", seed ? seed : "(not revealed yet)");
        printf("%-14s %" PRId64 "%s\n", "served", served, done && !strcmp(done, "1") ? " (lottery over)" : "");
    }
    if (!v.pool.n) { if (talk) printf("nothing to draw: no early request was kept\n"); rc = EX_OK; goto out; }
    if (!commit) vdiff(&v, "stats.lottery_commit is missing: the seed was never committed");
    if (!seed) {
        if (talk) errmsg(x, "the seed is not revealed yet: the draw cannot be checked before the opening");
        goto out;
    }
    uint8_t bytes[LOTTERY_SEED_LEN];
    char want[LOTTERY_SEED_HEX + 1];
    if (lottery_seed_parse(seed, bytes) < 0) { vdiff(&v, "stats.lottery_seed is not 64 lowercase hex digits"); goto report; }
    lottery_commit(seed, want);
    if (commit && strcmp(commit, want)) vdiff(&v, "SHA-256 of the revealed seed is %s, not the commitment", want);
    snprintf(v.pool.seed, sizeof v.pool.seed, "%s", seed);
    if (lottery_pool_draw(&v.pool, NULL) < 0 || (talk && show_draw(&v, show) < 0) ||
        check_results(&v, served) < 0) {
        if (talk) errmsg(x, "out of memory or Redis error");
        rc = EX_REDIS;
        goto out;
    }
report:
    if (talk && v.diffs > MAX_SHOWN) printf("... %zu differences in all\n", v.diffs);
    if (talk) printf("%s\n", v.diffs ? "MISMATCH: what was served is not the replayed draw" : "MATCH: the replayed draw is what was served");
    rc = v.diffs ? EX_NOT : EX_OK;
out:
    lottery_pool_free(&v.pool);
    freeReplyObject(ex);
    return rc;
}

int lottery_verify_batch(ctx *x, const char *b, lottery_diff_fn quiet, void *ud)
{
    return verify_batch(x, b, 0, quiet, ud);
}

int cmd_lottery(ctx *x, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *b, *show_s = NULL;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "show", 0, &show_s, NULL } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_LOTTERY) : rc;
    if (npos < 1 || strcmp(pos[0], "verify")) {
        errmsg(x, "usage: allocctl lottery verify B (try --help)");
        return EX_USAGE;
    }
    int64_t show = 10;
    if (opt_int(x, "show", show_s, 0, 1000000000, &show) < 0) return EX_USAGE;
    rc = one_batch(x, npos - 1, pos + 1, &b);
    if (rc) return rc;
    if (!b) { errmsg(x, "which batch? (allocctl lottery verify B)"); return EX_USAGE; }
    return verify_batch(x, b, (long)show, NULL, NULL);
}
