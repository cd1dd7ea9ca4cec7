/* cmd_batch.c -- `allocctl batch create|list|rm`: defining a batch from an
 * items file and making it live, listing the live batches, and taking one
 * out of P:batches. */
#include "base/clock.h"
#include "allocctl/cmd_batch.h"
#include "allocctl/cmd_groups.h"
#include "allocctl/cmd_slots.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocctl/ctl_items.h"

/* ---- batch create ---------------------------------------------------------- */

typedef struct create_opts {
    const char *kind, *from, *opens_at, *closes_at, *early, *groups, *draw_by, *group_fill;
    const char *per_user, *hold_ms, *max_group, *rate_max, *rate_window_ms, *penalty_ms;
    int replace;
} create_opts;

/* All of a batch's keys, contract and internal: batch_keys is a struct of
 * char[BATCH_KEY_MAX] names only, so walking it as an array picks up any
 * key the daemon adds later without a change here. */
_Static_assert(sizeof(batch_keys) % BATCH_KEY_MAX == 0, "batch_keys holds only key names");
#define BATCH_NKEYS (sizeof(batch_keys) / BATCH_KEY_MAX)

static size_t batch_key_list(const batch_keys *k, const char **out)
{
    const char (*names)[BATCH_KEY_MAX] = (const char (*)[BATCH_KEY_MAX])(const void *)k;
    size_t n = 0;
    for (size_t i = 0; i < BATCH_NKEYS; i++)
        if (names[i][0]) out[n++] = names[i];
    return n;
}

/* An option of two values (contract 11.3, 11.4), as a meta field. */
static int choice_args(const ctx *x, ctl_args *a, const char *opt_name, const char *field,
                       const char *v, const char *one, const char *other, int applies)
{
    if (!v) return 0;
    if ((strcmp(v, one) && strcmp(v, other)) || !applies) {
        errmsg(x, "--%s must be %s or %s%s (got '%s')", opt_name, one, other,
               applies ? "" : ", for a room batch", v);
        return -1;
    }
    ctl_args_add(a, field);
    ctl_args_add(a, v);
    return 0;
}

/* Checks the meta options and appends field/value pairs to a. */
static int meta_args(const ctx *x, const create_opts *o, ctl_args *a)
{
    int room = !strcmp(o->kind, "room");
    if (!room && strcmp(o->kind, "stock")) {
        errmsg(x, "--kind must be stock or room (got '%s')", o->kind);
        return -1;
    }
    if ((room && o->per_user) || (!room && o->max_group)) {
        errmsg(x, "%s does not apply to a %s batch", room ? "--per-user" : "--max-group", o->kind);
        return -1;
    }
    if (o->early && strcmp(o->early, "reject") && strcmp(o->early, "shuffle")) {
        errmsg(x, "--early must be reject or shuffle (got '%s')", o->early);
        return -1;
    }
    if (o->groups && ((strcmp(o->groups, "formed") && strcmp(o->groups, "listed")) || !room)) {
        errmsg(x, "--groups must be formed or listed, for a room batch (got '%s')", o->groups);
        return -1;
    }
    ctl_args_add(a, "kind");
    ctl_args_add(a, o->kind);
    if (o->early) { ctl_args_add(a, "early"); ctl_args_add(a, o->early); }
    if (o->groups) { ctl_args_add(a, "groups"); ctl_args_add(a, o->groups); }
    if (choice_args(x, a, "draw-by", "draw_by", o->draw_by, "none", "points", 1) < 0 ||
        choice_args(x, a, "group-fill", "group_fill", o->group_fill, "any", "exact", room) < 0)
        return -1;
    const char *times[][2] = { { "opens_at", o->opens_at }, { "closes_at", o->closes_at } };
    for (size_t i = 0; i < 2; i++) {
        int64_t t;
        if (!times[i][1]) continue;
        if (ctl_parse_time_ms(times[i][1], &t) < 0) {
            errmsg(x, "--%s: '%s' is neither ms since the epoch nor an ISO 8601 time "
                   "with a zone (2026-01-01T10:00:00Z, ...+02:00)", times[i][0], times[i][1]);
            return -1;
        }
        ctl_args_add(a, times[i][0]);
        ctl_args_addi(a, t);
    }
    struct { const char *field, *opt, *v; int64_t min; } ints[] = {
        { "per_user", "per-user", o->per_user, 1 }, { "hold_ms", "hold-ms", o->hold_ms, 0 },
        { "max_group", "max-group", o->max_group, 1 }, { "rate_max", "rate-max", o->rate_max, 0 },
        { "rate_window_ms", "rate-window-ms", o->rate_window_ms, 1 },
        { "penalty_ms", "penalty-ms", o->penalty_ms, 0 },
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t v;
        if (!ints[i].v) continue;
        if (opt_int(x, ints[i].opt, ints[i].v, ints[i].min, INT64_MAX / 2, &v) < 0) return -1;
        ctl_args_add(a, ints[i].field);
        ctl_args_addi(a, v);
    }
    return 0;
}

/* How many of the batch's keys exist, and whether it is in P:batches.
 * Leaves the keys WATCHed. Returns 0 or -1 (Redis error printed). */
static int batch_exists(ctx *x, long long *keys, int *live)
{
    const char *names[BATCH_NKEYS];
    size_t n = batch_key_list(&x->k, names);
    ctl_args a = { 0 };
    ctl_args_add(&a, "WATCH");
    for (size_t i = 0; i < n; i++) ctl_args_add(&a, names[i]);
    redisReply *r = rargv(x, &a);
    ctl_args_reset(&a);
    if (r) freeReplyObject(r);
    ctl_args_add(&a, "EXISTS");
    for (size_t i = 0; i < n; i++) ctl_args_add(&a, names[i]);
    redisReply *e = r ? rargv(x, &a) : NULL;
    ctl_args_free(&a);
    redisReply *m = e ? rcmd(x, "SISMEMBER %s %s", x->batches_key, x->batch) : NULL;
    *keys = e ? e->integer : 0;
    *live = m ? (int)m->integer : 0;
    if (e) freeReplyObject(e);
    if (m) freeReplyObject(m);
    return m ? 0 : -1;
}

/* --replace of a live batch: take it out of P:batches and give the daemon
 * time to stop serving it before its keys are deleted. */
static int unlist_and_wait(ctx *x)
{
    redisReply *r = rcmd(x, "UNWATCH");
    if (r) freeReplyObject(r);
    r = r ? rcmd(x, "SREM %s %s", x->batches_key, x->batch) : NULL;
    if (!r) return -1;
    freeReplyObject(r);
    int wait = x->cfg.registry_interval_ms * 2 + 500;
    fprintf(stderr, "allocctl batch create: %s is live; removed it from %s, waiting %d ms "
            "for the daemon to stop serving it\n", x->batch, x->batches_key, wait);
    clock_sleep_ms(wait);
    long long keys;
    int live;
    return batch_exists(x, &keys, &live);
}

/* HSET key f1 v1 f2 v2 ... in slices, appended to the pipeline. */
static size_t append_hset(ctx *x, const char *key, const ctl_items *items, int attrs)
{
    size_t sent = 0, i = 0;
    ctl_args a = { 0 };
    while (i < items->n) {
        ctl_args_reset(&a);
        ctl_args_add(&a, "HSET");
        ctl_args_add(&a, key);
        for (; i < items->n && a.n < 1002; i++) {
            if (attrs && !items->v[i].attrs) continue;
            ctl_args_add(&a, items->v[i].id);
            if (attrs) ctl_args_add(&a, items->v[i].attrs);
            else ctl_args_addi(&a, items->v[i].capacity);
        }
        if (a.n > 2) {
            redisAppendCommandArgv(x->c, (int)a.n, (const char **)a.v, a.len);
            sent++;
        }
    }
    ctl_args_free(&a);
    return sent;
}

/* MULTI; [DEL every key]; HSET meta; HSET capacity...; HSET attrs...; EXEC.
 * Returns EX_OK, EX_NOT (the batch changed under us) or EX_REDIS. */
static int write_batch(ctx *x, const ctl_args *meta, const ctl_items *items, int replace)
{
    const char *names[BATCH_NKEYS];
    size_t nk = batch_key_list(&x->k, names), sent = 2;
    redisAppendCommand(x->c, "MULTI");
    if (replace) {
        ctl_args d = { 0 };
        ctl_args_add(&d, "DEL");
        for (size_t i = 0; i < nk; i++) ctl_args_add(&d, names[i]);
        redisAppendCommandArgv(x->c, (int)d.n, (const char **)d.v, d.len);
        ctl_args_free(&d);
        sent++;
    }
    ctl_args m = { 0 };
    ctl_args_add(&m, "HSET");
    ctl_args_add(&m, x->k.meta);
    for (size_t i = 0; i < meta->n; i++) ctl_args_add(&m, meta->v[i]);
    redisAppendCommandArgv(x->c, (int)m.n, (const char **)m.v, m.len);
    ctl_args_free(&m);
    sent += 1 + append_hset(x, x->k.capacity, items, 0) + append_hset(x, x->k.attrs, items, 1);
    redisAppendCommand(x->c, "EXEC");
    redisReply **r = calloc(sent, sizeof *r);
    if (!r || replies(x, sent, r) < 0) { free(r); return EX_REDIS; }
    int rc = EX_OK;
    redisReply *exec = r[sent - 1];
    if (exec->type == REDIS_REPLY_NIL) {
        errmsg(x, "batch %s changed while it was being created; nothing was written", x->batch);
        rc = EX_NOT;
    }
    for (size_t i = 0; rc == EX_OK && i < exec->elements; i++)
        if (exec->element[i]->type == REDIS_REPLY_ERROR) {
            errmsg(x, "redis: %s", exec->element[i]->str);
            rc = EX_REDIS;
        }
    free_replies(r, sent);
    free(r);
    return rc;
}

static void create_summary(const ctx *x, const ctl_args *meta, const ctl_items *items)
{
    int64_t units = 0;
    size_t with_attrs = 0;
    for (size_t i = 0; i < items->n; i++) {
        units += items->v[i].capacity;
        with_attrs += items->v[i].attrs != NULL;
    }
    printf("created batch %s: %zu items, %" PRId64 " %s, %zu with attrs;", x->batch, items->n,
           units, strcmp(meta->v[1], "room") ? "units" : "beds", with_attrs);
    for (size_t i = 0; i + 1 < meta->n; i += 2) printf(" %s=%s", meta->v[i], meta->v[i + 1]);
    printf("; live in %s\n", x->batches_key);
}

static int create_in_redis(ctx *x, const create_opts *o, const ctl_args *meta, const ctl_items *items)
{
    long long keys;
    int live, rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    if (batch_exists(x, &keys, &live) < 0) return EX_REDIS;
    if ((keys || live) && !o->replace) {
        redisReply *r = rcmd(x, "UNWATCH");
        if (r) freeReplyObject(r);
        errmsg(x, "batch %s already exists (%lld keys%s); --replace deletes it first",
               x->batch, keys, live ? ", live" : "");
        return EX_NOT;
    }
    if (live && unlist_and_wait(x) < 0) return EX_REDIS;
    rc = write_batch(x, meta, items, o->replace);
    if (rc != EX_OK) return rc;
    redisReply *r = rcmd(x, "SADD %s %s", x->batches_key, x->batch);
    if (!r) return EX_REDIS;
    freeReplyObject(r);
    create_summary(x, meta, items);
    return EX_OK;
}

static int batch_create(ctx *x, const char *batch, create_opts *o)
{
    int rc = ctx_batch(x, batch);
    if (rc != EX_OK) return rc;
    if (!o->kind || !o->from) {
        errmsg(x, "--kind and --from are required (try --help)");
        return EX_USAGE;
    }
    ctl_args meta = { 0 };
    if (meta_args(x, o, &meta) < 0) { ctl_args_free(&meta); return EX_USAGE; }
    ctl_items items;
    char err[600];
    if (ctl_items_load(&items, o->from, err, sizeof err) < 0) {
        errmsg(x, "%s", err);
        ctl_args_free(&meta);
        return EX_INPUT;
    }
    rc = create_in_redis(x, o, &meta, &items);
    ctl_items_free(&items);
    ctl_args_free(&meta);
    return rc;
}

/* ---- batch list / rm ------------------------------------------------------- */

static int batch_list(ctx *x)
{
    int rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    redisReply *m = rcmd(x, "SMEMBERS %s", x->batches_key);
    if (!m) return EX_REDIS;
    sort_strings(m);
    for (size_t i = 0; i < m->elements && rc == EX_OK; i++) {
        batch_keys k;
        const char *b = m->element[i]->str;
        if (batch_keys_init(&k, x->cfg.prefix, b) < 0) { printf("%s\t(invalid id)\n", b); continue; }
        redisAppendCommand(x->c, "HGET %s kind", k.meta);
        redisAppendCommand(x->c, "HMGET %s state owner waiting wait_served", k.stats);
        redisAppendCommand(x->c, "LLEN %s", k.queue);
        redisReply *r[3];
        if (replies(x, 3, r) < 0) { rc = EX_REDIS; break; }
        const redisReply *st = r[1]->element[0], *ow = r[1]->element[1];
        const redisReply *wt = r[1]->element[2], *ws = r[1]->element[3];
        printf("%s\t%s\t%s\tqueue=%lld\towner=%s\twaiting=%s\twait_served=%s\n", b,
               r[0]->type == REDIS_REPLY_STRING ? r[0]->str : "?",
               st->type == REDIS_REPLY_STRING ? st->str : "unserved", r[2]->integer,
               ow->type == REDIS_REPLY_STRING ? ow->str : "-",
               wt->type == REDIS_REPLY_STRING ? wt->str : "0",
               ws->type == REDIS_REPLY_STRING ? ws->str : "0");
        free_replies(r, 3);
    }
    freeReplyObject(m);
    return rc;
}

static int batch_rm(ctx *x, const char *batch)
{
    int rc = ctx_batch(x, batch);
    if (rc == EX_OK) rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    redisReply *r = rcmd(x, "SREM %s %s", x->batches_key, batch);
    if (!r) return EX_REDIS;
    long long n = r->integer;
    freeReplyObject(r);
    if (!n) {
        errmsg(x, "%s is not in %s", batch, x->batches_key);
        return EX_NOT;
    }
    printf("removed %s from %s: daemons stop serving it within a second. Its keys are "
           "kept (queue, results, holders, log, ...); add it back with SADD to resume.\n",
           batch, x->batches_key);
    return EX_OK;
}

static const char HELP_CREATE[] =
"Usage: allocctl batch create B --kind stock|room --from FILE [options]\n"
"\n"
"Writes P:{B}:meta, capacity and attrs in one MULTI/EXEC, then adds B to P:batches\n"
"(the batch is live from then on). Refuses an existing batch unless --replace.\n"
"\n"
"  --from FILE          items: CSV with a header `id,capacity[,attr...]` (further columns\n"
"                       are room attributes; unquoted numbers/true/false are JSON values,\n"
"                       quoted cells strings), or JSON: {\"id\":capacity,...} or\n"
"                       [{\"id\":..,\"capacity\":..,\"attrs\":{..}},...]\n"
"  --opens-at T         ms since the epoch, or ISO 8601 with a zone (2026-01-01T10:00:00Z)\n"
"  --closes-at T        likewise; 0 = never\n"
"  --early reject|shuffle\n"
"  --per-user N         stock: most units per user (default 1)\n"
"  --hold-ms N          stock: reservations, rooms: held beds, to confirm within N ms\n"
"                       (default 0 = final; PROTOCOL.md 9.4)\n"
"  --max-group N        rooms: largest group (default 8)\n"
"  --groups formed|listed  rooms: groups formed by invite/accept (default), or version 1's\n"
"                       `group` with the members it names (the back end collected consent)\n"
"  --rate-max N --rate-window-ms N --penalty-ms N   per-user throttle (default off)\n"
"  --draw-by none|points  with --early shuffle: the opening draw ordered by each user's\n"
"                       profile `points`, highest first, random within equal points\n"
"  --group-fill any|exact  rooms: exact = a group takes only an empty room of its size,\n"
"                       and a single user only a room already begun or a single\n"
"  --replace            delete every key of the batch first (a live batch is taken out of\n"
"                       P:batches and the daemon given time to stop serving it)\n"
"\n"
"Exit: 0 created, 1 exists (no --replace), 2 usage, 3 Redis, 4 bad FILE (FILE:LINE: message).\n";

static const char HELP_LIST[] =
"Usage: allocctl batch list\n\nOne line per batch of P:batches: id, kind, state, queue length, owner.\n";

static const char HELP_SHOW[] =
"Usage: allocctl batch show B\n\n"
"B's definition (meta) and its groups formed by consent (P:{B}:groups): leader,\n"
"members, pending invitations, shared prefs and filter, version.\n";

static const char HELP_RM[] =
"Usage: allocctl batch rm B\n\n"
"Removes B from P:batches: daemons stop serving it within a second. Its keys are\n"
"kept; SADD it back to resume. Exit 1 when B was not in P:batches.\n";

int cmd_batch(ctx *x, int argc, char **argv, int at)
{
    const char *sub = at < argc ? argv[at] : "";
    const char *pos[MAX_POS];
    size_t npos;
    if (!strcmp(sub, "create")) {
        create_opts o = { 0 };
        const opt spec[] = { GLOBAL_OPTS(x),
            { "kind", 0, &o.kind, NULL }, { "from", 0, &o.from, NULL },
            { "opens-at", 0, &o.opens_at, NULL }, { "closes-at", 0, &o.closes_at, NULL },
            { "early", 0, &o.early, NULL }, { "per-user", 0, &o.per_user, NULL },
            { "hold-ms", 0, &o.hold_ms, NULL }, { "max-group", 0, &o.max_group, NULL },
            { "rate-max", 0, &o.rate_max, NULL }, { "rate-window-ms", 0, &o.rate_window_ms, NULL },
            { "penalty-ms", 0, &o.penalty_ms, NULL }, { "replace", 0, NULL, &o.replace },
            { "groups", 0, &o.groups, NULL }, { "draw-by", 0, &o.draw_by, NULL },
            { "group-fill", 0, &o.group_fill, NULL } };
        x->cmd = "batch create";
        int rc = parse_opts(x, argc, argv, at + 1, spec, sizeof spec / sizeof *spec, pos, &npos);
        if (rc) return rc < 0 ? show_help(HELP_CREATE) : rc;
        if (npos > 1) { errmsg(x, "one batch at a time"); return EX_USAGE; }
        return batch_create(x, npos ? pos[0] : NULL, &o);
    }
    if (!strcmp(sub, "list") || !strcmp(sub, "rm")) {
        const opt spec[] = { GLOBAL_OPTS(x) };
        int list = sub[0] == 'l';
        x->cmd = list ? "batch list" : "batch rm";
        int rc = parse_opts(x, argc, argv, at + 1, spec, sizeof spec / sizeof *spec, pos, &npos);
        if (rc) return rc < 0 ? show_help(list ? HELP_LIST : HELP_RM) : rc;
        if (npos != (list ? 0u : 1u)) { errmsg(x, "wrong number of arguments (try --help)"); return EX_USAGE; }
        return list ? batch_list(x) : batch_rm(x, pos[0]);
    }
    if (!strcmp(sub, "show")) {
        const opt spec[] = { GLOBAL_OPTS(x) };
        x->cmd = "batch show";
        int rc = parse_opts(x, argc, argv, at + 1, spec, sizeof spec / sizeof *spec, pos, &npos);
        if (rc) return rc < 0 ? show_help(HELP_SHOW) : rc;
        if (npos != 1) { errmsg(x, "wrong number of arguments (try --help)"); return EX_USAGE; }
        return groups_batch_show(x, pos[0]);
    }
    if (!strcmp(sub, "slots")) return cmd_batch_slots(x, argc, argv, at);
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) return show_help(HELP_CREATE);
    x->cmd = "batch";
    if (!*sub) errmsg(x, "which subcommand? create, list, rm, show or slots (try --help)");
    else errmsg(x, "unknown subcommand '%s' (create, list, rm, show, slots)", sub);
    return EX_USAGE;
}
