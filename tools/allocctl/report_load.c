/* report_load.c -- reads one batch for `allocctl report`: from Redis while
 * its keys are there, or from the PostgreSQL archive (docs/ARCHIVE.md:
 * alloc_batches, alloc_results, alloc_events) once it has been purged.
 *
 * Redis is read a page at a time (HSCAN) so a large round does not block
 * the server. From the archive, fill is by building from alloc_items and
 * the draw is replayed from alloc_lottery_pool with allocctl lottery
 * verify's own check (worker/lottery_verify.h). What the archive does not
 * keep is said, not guessed: group preferences, and, in an archive written
 * before allocctl kept them, the attrs (fill by room) and the pool (the
 * commitment is still checked against the seed).
 */
#include "allocctl/report_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocctl/archive_pg.h"
#include "allocctl/cmd_archive.h"
#include "allocctl/cmd_lottery.h"
#include "allocctl/ctl_util.h"
#include "worker/lottery_pool.h"
#include "worker/lottery_verify.h"

enum { REPORT_PAGE = 1000 };

static json_t *hash_strings(const redisReply *h)
{
    json_t *o = json_object();
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        json_object_set_new(o, h->element[i]->str, json_stringn(h->element[i + 1]->str, h->element[i + 1]->len));
    return o;
}

static json_t *parse(const char *s, size_t len)
{
    json_error_t je;
    return json_loadb(s, len, 0, &je);
}

/* HSCANs key, calling fn on each field and value. Returns 0 or -1. */
static int scan_hash(ctx *x, const char *key, void (*fn)(report_in *, const redisReply *, const redisReply *),
                     report_in *in)
{
    char cursor[32] = "0";
    do {
        redisReply *r = rcmd(x, "HSCAN %s %s COUNT %d", key, cursor, REPORT_PAGE);
        if (!r) return -1;
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        const redisReply *m = r->element[1];
        for (size_t i = 0; i + 1 < m->elements; i += 2) fn(in, m->element[i], m->element[i + 1]);
        freeReplyObject(r);
    } while (strcmp(cursor, "0"));
    return 0;
}

static void on_result(report_in *in, const redisReply *k, const redisReply *v)
{
    json_t *r = parse(v->str, v->len);
    if (json_is_object(r)) json_array_append_new(in->results, r);
    else json_decref(r);
}

static void add_taken(json_t *taken, const char *item, int64_t n)
{
    json_t *t = json_object_get(taken, item);
    json_object_set_new(taken, item, json_integer((t ? json_integer_value(t) : 0) + n));
}

/* A room holder {"item":..}; a stock holder {"units":..,"orders":[..]}. */
static void on_holder(report_in *in, const redisReply *k, const redisReply *v)
{
    json_t *h = parse(v->str, v->len);
    const char *room = json_string_value(json_object_get(h, "item"));
    if (room) add_taken(in->taken, room, 1);
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(h, "orders"), i, o) {
        const char *item = json_string_value(json_object_get(o, "item"));
        if (item) add_taken(in->taken, item, json_integer_value(json_object_get(o, "qty")));
    }
    json_decref(h);
}

static void on_group(report_in *in, const redisReply *k, const redisReply *v)
{
    json_t *g = parse(v->str, v->len);
    json_t *first = json_array_get(json_object_get(g, "prefs"), 0);
    if (json_is_string(first)) json_object_set(in->group_prefs, k->str, first);
    json_decref(g);
}

static void on_attrs(report_in *in, const redisReply *k, const redisReply *v)
{
    json_t *a = parse(v->str, v->len);
    if (json_is_object(a)) json_object_set_new(in->attrs, k->str, a);
    else json_decref(a);
}

static void on_capacity(report_in *in, const redisReply *k, const redisReply *v)
{
    json_object_set_new(in->capacity, k->str, json_integer(strtoll(v->str, NULL, 10)));
}

static void report_in_init(report_in *in)
{
    memset(in, 0, sizeof *in);
    in->attrs = json_object();
    in->capacity = json_object();
    in->results = json_array();
    in->taken = json_object();
    in->group_prefs = json_object();
    in->first_pref = json_object();
    in->replay = -1;
}

/* The check's first difference goes in replay_why (the Redis replay and
 * the archive's alike). */
static void on_first_diff(void *ud, const char *msg)
{
    report_in *in = ud;
    if (!*in->replay_why) snprintf(in->replay_why, sizeof in->replay_why, "%s", msg);
}

static int load_lottery(ctx *x, report_in *in)
{
    if (!json_object_get(in->stats, "lottery_seed")) {
        snprintf(in->replay_why, sizeof in->replay_why, "%s",
                 json_object_get(in->stats, "lottery_commit") ? "the seed is not revealed yet" : "no lottery");
        return 0;
    }
    int rc = lottery_verify_batch(x, x->batch, on_first_diff, in);
    if (rc == EX_REDIS) return -1;
    in->replay = rc == EX_OK;
    if (rc != EX_OK && rc != EX_NOT) snprintf(in->replay_why, sizeof in->replay_why, "the replay could not run");
    return 0;
}

int report_load_redis(ctx *x, report_in *in)
{
    report_in_init(in);
    char where[300];
    snprintf(in->source, sizeof in->source, "Redis %s", redis_target_describe(&x->cfg.redis, where, sizeof where));
    redisAppendCommand(x->c, "HGETALL %s", x->k.meta);
    redisAppendCommand(x->c, "HGETALL %s", x->k.stats);
    redisReply *r[2];
    if (replies(x, 2, r) < 0) return EX_REDIS;
    in->meta = hash_strings(r[0]);
    in->stats = hash_strings(r[1]);
    int empty = r[0]->elements == 0;
    free_replies(r, 2);
    if (empty) {
        errmsg(x, "no batch %s in Redis (%s is empty); a purged batch is read from the archive with --pg",
               x->batch, x->k.meta);
        return EX_NOT;
    }
    if (scan_hash(x, x->k.capacity, on_capacity, in) < 0 || scan_hash(x, x->k.attrs, on_attrs, in) < 0 ||
        scan_hash(x, x->k.results, on_result, in) < 0 || scan_hash(x, x->k.holders, on_holder, in) < 0 ||
        scan_hash(x, x->k.groups, on_group, in) < 0 || load_lottery(x, in) < 0)
        return EX_REDIS;
    return EX_OK;
}

/* A jsonb column of the first row as a JSON value. */
static json_t *pg_json(PGresult *res, int col)
{
    if (PQntuples(res) < 1 || PQgetisnull(res, 0, col)) return json_object();
    json_t *v = parse(PQgetvalue(res, 0, col), (size_t)PQgetlength(res, 0, col));
    return v ? v : json_object();
}

/* alloc_batches keeps meta and stats as JSON objects of the hash fields. */
static int pg_batch(ctx *x, archive_pg *pg, report_in *in)
{
    const char *params[] = { x->batch };
    PGresult *res = archive_pg_query(pg, "SELECT meta, capacity, stats FROM alloc_batches WHERE batch = $1", 1, params);
    if (!res) { errmsg(x, "%s", pg->err); return EX_DB; }
    int found = PQntuples(res) > 0;
    json_decref(in->capacity);
    in->meta = pg_json(res, 0);
    in->capacity = pg_json(res, 1);
    in->stats = pg_json(res, 2);
    PQclear(res);
    if (!found) { errmsg(x, "no batch %s in the archive (alloc_batches)", x->batch); return EX_NOT; }
    const char *k;
    json_t *v;
    json_object_foreach(in->capacity, k, v)   /* hash fields: strings */
        if (json_is_string(v)) json_object_set_new(in->capacity, k, json_integer(strtoll(json_string_value(v), NULL, 10)));
    return EX_OK;
}

/* Held now = the log replayed: grants minus what came back. */
static const char TAKEN_SQL[] =
    "SELECT item, sum(CASE type WHEN 'grant' THEN coalesce(qty, 1) "
    "WHEN 'release' THEN -coalesce(qty, 1) WHEN 'cancel' THEN -coalesce(qty, 1) "
    "WHEN 'expire' THEN -coalesce(qty, 1) ELSE 0 END) FROM alloc_events "
    "WHERE batch = $1 AND item IS NOT NULL GROUP BY item";

static int pg_rows(ctx *x, archive_pg *pg, report_in *in)
{
    const char *params[] = { x->batch };
    PGresult *res = archive_pg_query(pg, "SELECT result FROM alloc_results WHERE batch = $1", 1, params);
    if (!res) { errmsg(x, "%s", pg->err); return EX_DB; }
    for (int i = 0; i < PQntuples(res); i++) {
        json_t *r = parse(PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
        if (json_is_object(r)) json_array_append_new(in->results, r);
        else json_decref(r);
    }
    PQclear(res);
    res = archive_pg_query(pg, TAKEN_SQL, 1, params);
    if (!res) { errmsg(x, "%s", pg->err); return EX_DB; }
    for (int i = 0; i < PQntuples(res); i++)
        json_object_set_new(in->taken, PQgetvalue(res, i, 0), json_integer(strtoll(PQgetvalue(res, i, 1), NULL, 10)));
    PQclear(res);
    return EX_OK;
}

/* alloc_items: each item's attrs, so fill is by building as from Redis.
 * An archive written before allocctl kept them has none: fill is by room,
 * and the report says why. */
static int pg_items(ctx *x, archive_pg *pg, report_in *in)
{
    const char *params[] = { x->batch };
    PGresult *res = archive_pg_query(pg, "SELECT item, attrs FROM alloc_items WHERE batch = $1 AND attrs IS NOT NULL",
                                     1, params);
    if (!res) {
        snprintf(in->attrs_why, sizeof in->attrs_why, "attrs not in this archive (%s)", pg->err);
        return EX_OK;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        json_t *a = parse(PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1));
        if (json_is_object(a)) json_object_set_new(in->attrs, PQgetvalue(res, i, 0), a);
        else json_decref(a);
    }
    if (!PQntuples(res))
        snprintf(in->attrs_why, sizeof in->attrs_why, "attrs not in this archive (no alloc_items rows: "
                 "archived by an allocctl that did not keep them)");
    PQclear(res);
    return EX_OK;
}

/* The pool as alloc_lottery_pool keeps it, or a reason in replay_why. */
static int pg_pool(archive_pg *pg, const char *batch, lottery_pool *pool, int64_t *served, report_in *in)
{
    const char *params[] = { batch };
    PGresult *res = archive_pg_query(pg, "SELECT early_served, pool_entries FROM alloc_lottery WHERE batch = $1", 1, params);
    if (!res || !PQntuples(res)) {
        snprintf(in->replay_why, sizeof in->replay_why, "the lottery pool is not in this archive%s",
                 res ? " (archived by an allocctl that did not keep it)" : "");
        PQclear(res);
        return -1;
    }
    *served = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    int64_t want = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    res = archive_pg_query(pg, "SELECT entry FROM alloc_lottery_pool WHERE batch = $1 ORDER BY pos", 1, params);
    if (!res) { snprintf(in->replay_why, sizeof in->replay_why, "the lottery pool is not in this archive"); return -1; }
    int n = PQntuples(res), rc = n == want ? 0 : -1;
    if (rc) snprintf(in->replay_why, sizeof in->replay_why, "the archive has %d of the pool's %lld entries", n, (long long)want);
    for (int i = 0; !rc && i < n; i++)
        if (lottery_pool_load_entry(pool, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0)) < 0) {
            snprintf(in->replay_why, sizeof in->replay_why, "pool entry %d is not a pool entry", i);
            rc = -1;
        }
    PQclear(res);
    return rc;
}

/* `allocctl lottery verify`'s check (worker/lottery_verify.h) on the
 * archived pool and results; the first difference goes in replay_why. */
static void pg_lottery(ctx *x, archive_pg *pg, report_in *in)
{
    const char *seed = json_string_value(json_object_get(in->stats, "lottery_seed"));
    if (!seed) {
        snprintf(in->replay_why, sizeof in->replay_why, "%s",
                 json_object_get(in->stats, "lottery_commit") ? "the seed is not revealed yet" : "no lottery");
        return;
    }
    lottery_pool pool;
    lottery_pool_init(&pool, 1);
    int64_t served = 0;
    json_t *by_id = json_object();
    size_t i;
    json_t *r;
    json_array_foreach(in->results, i, r)
        if (json_is_string(json_object_get(r, "id"))) json_object_set(by_id, json_string_value(json_object_get(r, "id")), r);
    lottery_result *res = NULL;
    if (pg_pool(pg, x->batch, &pool, &served, in) == 0) {
        snprintf(pool.seed, sizeof pool.seed, "%s", seed);
        res = calloc(pool.n ? pool.n : 1, sizeof *res);
        if (!res || lottery_pool_draw(&pool, NULL) < 0) {
            snprintf(in->replay_why, sizeof in->replay_why, "the replay could not run (bad seed or out of memory)");
        } else {
            for (size_t k = 0; k < pool.n; k++) {
                const json_t *doc = json_object_get(by_id, pool.reqs[pool.serve[k]].id);
                if (doc) lottery_result_from_json(&res[k], doc);
            }
            in->replay = lottery_verify_results(&pool, res, served, on_first_diff, in) == 0;
        }
    }
    free(res);
    json_decref(by_id);
    lottery_pool_free(&pool);
}

int report_load_pg(ctx *x, const char *conninfo, report_in *in)
{
    report_in_init(in);
    snprintf(in->source, sizeof in->source, "the PostgreSQL archive");
    archive_pg pg;
    memset(&pg, 0, sizeof pg);
    if (archive_pg_open(&pg, conninfo) < 0) {
        errmsg(x, "%s", pg.err);
        archive_pg_close(&pg);   /* libpq keeps a failed connection's memory */
        return EX_DB;
    }
    int rc = pg_batch(x, &pg, in);
    if (rc == EX_OK) rc = pg_rows(x, &pg, in);
    if (rc == EX_OK) rc = pg_items(x, &pg, in);
    if (rc == EX_OK) pg_lottery(x, &pg, in);
    archive_pg_close(&pg);
    return rc;
}

int report_load_requests(ctx *x, const char *path, report_in *in)
{
    FILE *f = fopen(path, "r");
    if (!f) { errmsg(x, "--requests %s: cannot read it", path); return EX_INPUT; }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    for (long no = 1; (n = getline(&line, &cap, f)) >= 0; no++) {
        json_t *q = parse(line, (size_t)n);
        const char *id = json_string_value(json_object_get(q, "id"));
        json_t *first = json_array_get(json_object_get(q, "prefs"), 0);
        if (id && json_is_string(first)) json_object_set(in->first_pref, id, first);
        else if (!json_is_object(q) && strspn(line, " \t\r\n") != (size_t)n)
            fprintf(stderr, "allocctl report: %s:%ld: not a JSON request (skipped)\n", path, no);
        json_decref(q);
    }
    free(line);
    fclose(f);
    return EX_OK;
}

void report_in_free(report_in *in)
{
    json_t *all[] = { in->meta, in->capacity, in->attrs, in->stats, in->results, in->taken,
                      in->group_prefs, in->first_pref };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) json_decref(all[i]);
    memset(in, 0, sizeof *in);
}
