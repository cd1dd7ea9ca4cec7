/* cmd_dead.c -- `allocctl dead`: lists a batch's dead requests, or pushes
 * them back to the queue, one atomic script per entry. */
#include "allocctl/cmd_dead.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "allocctl/ctl_queue.h"
#include "allocctl/print.h"
#include "wire/request.h"

typedef struct dead_opts { const char *index, *limit, *json; int requeue, all, del, full; } dead_opts;

/* How much of a dead request `dead` prints unless --full. */
enum { DEAD_RAW_SHOWN = 300 };

static int dead_list(ctx *x, int64_t limit, int full)
{
    redisReply *len = rcmd(x, "LLEN %s", x->k.dead);
    if (!len) return EX_REDIS;
    int64_t total = len->integer, shown = limit > 0 && limit < total ? limit : total;
    freeReplyObject(len);
    for (int64_t start = 0; start < shown; start += CTL_QUEUE_PAGE) {
        int64_t stop = start + CTL_QUEUE_PAGE < shown ? start + CTL_QUEUE_PAGE - 1 : shown - 1;
        redisReply *r = rcmd(x, "LRANGE %s %lld %lld", x->k.dead, (long long)start, (long long)stop);
        if (!r) return EX_REDIS;
        for (size_t i = 0; i < r->elements; i++) print_dead(start + (int64_t)i, r->element[i], full ? 0 : DEAD_RAW_SHOWN);
        freeReplyObject(r);
    }
    printf("%" PRId64 " dead entr%s in %s", total, total == 1 ? "y" : "ies", x->k.dead);
    if (shown < total) printf(" (%" PRId64 " shown; --limit 0 shows all)", shown);
    printf("\n");
    return EX_OK;
}

/* Requeues (or deletes) the entry at index whose bytes are
 * expected[0..len); with o->json, the edited request is pushed instead. */
static int requeue_one(ctx *x, const dead_opts *o, int64_t index, const char *expected, size_t len)
{
    int64_t ordinal;
    char err[300];
    int rc = o->del ? ctl_dead_delete(x->c, &x->k, index, expected, len, err, sizeof err)
           : ctl_dead_requeue_as(x->c, &x->k, index, expected, len, o->json,
                                 o->json ? strlen(o->json) : 0, &ordinal, err, sizeof err);
    if (rc == 0 && o->del) printf("deleted dead entry %" PRId64 "\n", index);
    else if (rc == 0) printf("requeued dead entry %" PRId64 "%s: ordinal=%" PRId64 "\n", index,
                             o->json ? " as edited" : "", ordinal);
    else errmsg(x, "%s%s", rc < 0 ? "redis: " : "", err);
    return rc == 0 ? EX_OK : rc > 0 ? EX_NOT : EX_REDIS;
}

/* An edited request must be one allocd accepts, or it would die again. */
static int check_edit(ctx *x, const char *json)
{
    request q;
    request_parse(&q, json, strlen(json), (size_t)x->cfg.max_request_bytes, 0);
    int ok = q.outcome == REQUEST_OK;
    if (!ok) errmsg(x, "allocd would not accept --json %s: %s", json, q.error);
    request_clear(&q);
    return ok ? EX_OK : EX_USAGE;
}

static int dead_requeue(ctx *x, const dead_opts *o)
{
    int64_t index = 0;
    if (!o->all == !o->index) {
        errmsg(x, "--%s needs --index N or --all", o->del ? "delete" : "requeue");
        return EX_USAGE;
    }
    if (o->json && (o->all || o->del)) {
        errmsg(x, "--json (the edited request) goes with --requeue --index N");
        return EX_USAGE;
    }
    if (o->json && check_edit(x, o->json) != EX_OK) return EX_USAGE;
    if (o->index && opt_int(x, "index", o->index, 0, INT64_MAX / 2, &index) < 0) return EX_USAGE;
    /* --all: a snapshot of the list; each entry is then at index 0 in turn,
     * since only we remove and the daemon only appends. */
    redisReply *snap = o->all ? rcmd(x, "LRANGE %s 0 -1", x->k.dead)
                              : rcmd(x, "LRANGE %s %lld %lld", x->k.dead, (long long)index, (long long)index);
    if (!snap) return EX_REDIS;
    int rc = EX_OK;
    if (snap->elements == 0 && o->index) {
        errmsg(x, "no dead entry at index %" PRId64, index);
        rc = EX_NOT;
    }
    for (size_t i = 0; i < snap->elements && rc == EX_OK; i++)
        rc = requeue_one(x, o, o->all ? 0 : index, snap->element[i]->str, snap->element[i]->len);
    freeReplyObject(snap);
    return rc;
}

static int dead_run(ctx *x, const char *batch, const dead_opts *o)
{
    int rc = ctx_batch(x, batch);
    if (rc != EX_OK) return rc;
    int64_t limit = 100;
    if (opt_int(x, "limit", o->limit, 0, INT64_MAX / 2, &limit) < 0) return EX_USAGE;
    if (o->requeue && o->del) {
        errmsg(x, "--requeue or --delete, not both");
        return EX_USAGE;
    }
    if (!o->requeue && !o->del && (o->index || o->all || o->json)) {
        errmsg(x, "--index, --all and --json go with --requeue or --delete");
        return EX_USAGE;
    }
    rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    return o->requeue || o->del ? dead_requeue(x, o) : dead_list(x, limit, o->full);
}

static const char HELP_DEAD[] =
"Usage: allocctl dead B [--limit N] [--full] | dead B --requeue (--index N [--json '{...}'] | --all)\n"
"       allocctl dead B --delete (--index N | --all)\n"
"\n"
"Lists P:{B}:dead (index, at, error, raw; --limit N, default 100, 0 = all). A raw request\n"
"longer than 300 bytes is cut there (its length is printed); --full prints it whole.\n"
"--requeue pushes the raw bytes (raw_base64 when present) of entry N, or of all, back to\n"
"the queue and removes them from dead, in one Lua script per entry that also reads the\n"
"position (prints the ordinal). Safe while the daemon appends. Exit 1 if an entry changed.\n"
"--requeue --index N --json '{...}' pushes this edited request instead (checked as allocd\n"
"would parse it). --delete removes entry N, or all, for good (same atomic check).\n";

int cmd_dead(ctx *x, int argc, char **argv, int at)
{
    dead_opts o = { 0 };
    const char *pos[MAX_POS], *b;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "requeue", 0, NULL, &o.requeue },
                         { "index", 0, &o.index, NULL }, { "all", 0, NULL, &o.all },
                         { "limit", 0, &o.limit, NULL }, { "delete", 0, NULL, &o.del },
                         { "json", 0, &o.json, NULL }, { "full", 0, NULL, &o.full } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_DEAD) : rc;
    rc = one_batch(x, npos, pos, &b);
    return rc ? rc : dead_run(x, b, &o);
}
