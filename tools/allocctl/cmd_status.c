/* cmd_status.c -- `allocctl status` and `allocctl wait`: a batch's stats,
 * a request's result or its place in the queue, what a user holds; and
 * waiting for a request's result. */
#include "allocctl/cmd_status.h"
#include "core/numtext.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "base/clock.h"
#include "allocctl/ctl_queue.h"
#include "allocctl/ctl_sync.h"
#include "allocctl/print.h"
#include "allocctl/cmd_groups.h"
#include "allocctl/ctl_eligibility.h"

/* ---- status ------------------------------------------------------------------ */

typedef struct status_opts { const char *id, *user, *ordinal, *room; int raw; } status_opts;

static const char *const STAT_FIELDS[] = {
    "state", "owner", "updated_at", "dequeued", "processed", "granted", "done", "rejected",
    "invalid", "dead", "duplicates", "ctl", "participants", "free_units",
    "waiting", "wait_served", "wait_ended", "wait_head",
    "swap_offers",   /* `waiting` results too, not on the waitlist (9.3, 9.5) */
};

static int status_overview(ctx *x)
{
    redisAppendCommand(x->c, "HGETALL %s", x->k.stats);
    redisAppendCommand(x->c, "HGET %s kind", x->k.meta);
    redisAppendCommand(x->c, "SISMEMBER %s %s", x->batches_key, x->batch);
    const char *lists[] = { x->k.queue, x->k.ctl, x->k.dead, x->k.early };
    const char *names[] = { "queue", "ctl_queue", "dead_list", "lottery_pool" };
    for (size_t i = 0; i < 4; i++) redisAppendCommand(x->c, "LLEN %s", lists[i]);
    redisAppendCommand(x->c, "HGETALL %s", x->k.meta);
    redisReply *r[8];
    if (replies(x, 8, r) < 0) return EX_REDIS;
    int known = r[0]->elements || r[1]->type == REDIS_REPLY_STRING || r[2]->integer;
    if (!known) {
        errmsg(x, "no batch %s (no meta, no stats, not in %s)", x->batch, x->batches_key);
        free_replies(r, 8);
        return EX_NOT;
    }
    printf("%-14s %s\n", "batch", x->batch);
    printf("%-14s %s\n", "kind", r[1]->type == REDIS_REPLY_STRING ? r[1]->str : "?");
    printf("%-14s %s\n", "live", r[2]->integer ? "yes" : "no");
    int64_t now = clock_wall_ms();
    for (size_t i = 0; i < sizeof STAT_FIELDS / sizeof *STAT_FIELDS; i++) {
        const char *v = hfield(r[0], STAT_FIELDS[i]);
        print_field("", 14, STAT_FIELDS[i], v ? v : (i == 0 ? "unserved" : "-"), now);
    }
    print_field("", 14, "opens_at", hfield(r[7], "opens_at"), now);
    print_lottery("", hfield(r[0], "lottery_commit"), hfield(r[0], "lottery_seed"), hfield(r[0], "lottery_users"));
    for (size_t i = 0; i < 4; i++) printf("%-14s %lld\n", names[i], r[3 + i]->integer);
    free_replies(r, 8);
    return EX_OK;
}

static int64_t stat_int(ctx *x, const char *field, int *err)
{
    redisReply *r = rcmd(x, "HGET %s %s", x->k.stats, field);
    if (!r) { *err = 1; return 0; }
    int64_t v = ctl_reply_int(r);
    freeReplyObject(r);
    return v;
}

/* With early=shuffle, a request queued before opens_at joins the opening
 * lottery: its place in the queue says nothing about when it is served. */
static int before_shuffled_opening(ctx *x, int64_t *opens_at)
{
    redisReply *r = rcmd(x, "HMGET %s early opens_at", x->k.meta);
    if (!r) return -1;
    int shuffled = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                   r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "shuffle");
    *opens_at = shuffled && r->element[1]->type == REDIS_REPLY_STRING ? strtoll(r->element[1]->str, NULL, 10) : 0;
    freeReplyObject(r);
    return shuffled && clock_wall_ms() < *opens_at;
}

static int print_position(ctx *x, const char *id, int64_t ordinal)
{
    int64_t opens_at;
    int early = before_shuffled_opening(x, &opens_at);
    if (early < 0) return EX_REDIS;
    if (early) {
        printf("%s: queued before the opening (in %.1f s): it joins the opening lottery and is "
               "served in a random order, so it has no place in line yet\n", id,
               (double)(opens_at - clock_wall_ms()) / 1000.0);
        return EX_OK;
    }
    int err = 0;
    int64_t dequeued = stat_int(x, "dequeued", &err);
    if (err) return EX_REDIS;
    int64_t ahead = ordinal - 1 - dequeued;
    if (ahead >= 0)
        printf("%s: queued, ordinal %" PRId64 ", %" PRId64 " ahead of you\n", id, ordinal, ahead);
    else
        printf("%s: ordinal %" PRId64 ", taken off the queue, being decided\n", id, ordinal);
    return EX_OK;
}

/* Where a request without a result is: the queue (with its position; it
 * stays there until the chunk deciding it is applied) or the opening
 * lottery pool. */
static int locate(ctx *x, const char *id)
{
    int64_t ordinal;
    char err[300];
    int found = ctl_queue_find(x->c, &x->k, id, &ordinal, err, sizeof err);
    if (found == 1) return print_position(x, id, ordinal);
    if (found == 0) found = ctl_list_find(x->c, x->k.early, id, err, sizeof err);
    if (found == 1) {
        printf("%s: in the opening lottery pool: decided when its user's ticket is drawn\n", id);
        return EX_OK;
    }
    if (found < 0) errmsg(x, "redis: %s", err);
    return found < 0 ? EX_REDIS : EX_NOT;
}

/* Prints the result if there is one: EX_OK, or EX_NOT when there is none. */
static int show_result(ctx *x, const char *id, int raw)
{
    redisAppendCommand(x->c, "HGET %s %s", x->k.results, id);
    redisAppendCommand(x->c, "HGET %s participants", x->k.stats);
    redisReply *r[2];
    if (replies(x, 2, r) < 0) return EX_REDIS;
    int found = r[0]->type == REDIS_REPLY_STRING;
    if (found) print_result(r[0]->str, r[0]->len, ctl_reply_int(r[1]), raw);
    free_replies(r, 2);
    return found ? EX_OK : EX_NOT;
}

static int status_id(ctx *x, const status_opts *o)
{
    int64_t ordinal = 0;
    if (o->ordinal && opt_int(x, "ordinal", o->ordinal, 1, INT64_MAX / 2, &ordinal) < 0)
        return EX_USAGE;
    int rc = show_result(x, o->id, o->raw);
    if (rc != EX_NOT) return rc;
    if (ordinal) return print_position(x, o->id, ordinal);
    rc = locate(x, o->id);
    if (rc != EX_NOT) return rc;
    rc = show_result(x, o->id, o->raw);   /* decided while we looked */
    if (rc == EX_NOT) errmsg(x, "%s: no result, and not queued in batch %s", o->id, x->batch);
    return rc;
}

static int status_user(ctx *x, const status_opts *o)
{
    redisReply *h = rcmd(x, "HGET %s %s", x->k.holders, o->user);
    if (!h) return EX_REDIS;
    int found = h->type == REDIS_REPLY_STRING;
    if (found) print_holder(o->user, h->str, h->len, o->raw);
    else printf("%s holds nothing in batch %s\n", o->user, x->batch);
    redisReply *r = rcmd(x, "HGET %s %s", x->k.slots, o->user);   /* contract 9.4 */
    if (!r) { freeReplyObject(h); return EX_REDIS; }
    if (r->type == REDIS_REPLY_STRING) {
        int64_t at = 0;
        char iso[40];
        if (numtext_parse_i64(r->str, &at) == 0) printf("selection slot: %s (%s)\n", ctl_iso_ms(at, iso, sizeof iso), r->str);
        else printf("selection slot: '%s' (not a time: the daemon ignores it)\n", r->str);
    }
    freeReplyObject(r);
    /* a group, invitations and swap offers are about the user too (9.2, 9.3) */
    int more = o->raw ? 0 : groups_user_status(x, o->user, h);
    freeReplyObject(h);
    if (more < 0) return EX_REDIS;
    /* eligibility (11.2): which rule, which profile value */
    int elig = o->raw && !o->room ? EX_OK : ctl_eligibility_user(x, o->user, o->room);
    if (elig == EX_REDIS || o->room) return elig;
    return found || more ? EX_OK : EX_NOT;
}

static int status_run(ctx *x, const char *batch, const status_opts *o)
{
    int rc = ctx_batch(x, batch);
    if (rc != EX_OK) return rc;
    if (o->id && o->user) { errmsg(x, "--id and --user exclude each other"); return EX_USAGE; }
    if (o->ordinal && !o->id) { errmsg(x, "--ordinal goes with --id"); return EX_USAGE; }
    if (o->room && !o->user) { errmsg(x, "--room goes with --user"); return EX_USAGE; }
    rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    if (o->id) return status_id(x, o);
    if (o->user) return status_user(x, o);
    return status_overview(x);
}

/* ---- wait ---------------------------------------------------------------------- */

/* 1 when P:{B}:results has id's final result, 0 when it has none or only
 * `waiting` (9.5: the one status that is replaced, once), -1 on error. */
static int final_result(ctx *x, const char *id, int *said_waiting)
{
    redisReply *r = rcmd(x, "HGET %s %s", x->k.results, id);
    if (!r) return -1;
    int final = 0;
    if (r->type == REDIS_REPLY_STRING) {
        json_error_t je;
        json_t *doc = json_loadb(r->str, r->len, 0, &je);
        const char *st = json_string_value(json_object_get(doc, "status"));
        final = !st || strcmp(st, "waiting");
        if (!final && !*said_waiting) {
            fprintf(stderr, "%s: waiting (%s): not decided yet, waiting for its final result\n", id, r->str);
            *said_waiting = 1;
        }
        json_decref(doc);
    }
    freeReplyObject(r);
    return final;
}

int status_wait_final(ctx *x, const char *id, double secs, int raw)
{
    int64_t deadline = clock_wall_ms() + (int64_t)(secs * 1000);
    int delay = 10, said_waiting = 0;
    for (;;) {
        int final = final_result(x, id, &said_waiting);
        if (final < 0) return EX_REDIS;
        if (final) return show_result(x, id, raw);
        int64_t left = deadline - clock_wall_ms();
        if (secs > 0 && left <= 0) break;
        clock_sleep_ms(secs > 0 && left < delay ? (int)left : delay);
        delay = delay * 3 / 2 > 200 ? 200 : delay * 3 / 2;
    }
    errmsg(x, "no final result for %s in batch %s after %g s%s", id, x->batch, secs,
           said_waiting ? " (it is still waiting)" : "");
    return EX_NOT;
}

int status_wait_timeout(const ctx *x, const char *timeout, double *secs)
{
    char *end = NULL;
    *secs = timeout ? strtod(timeout, &end) : 30.0;
    if (timeout && (end == timeout || *end || *secs < 0 || *secs > 1e9)) {
        errmsg(x, "--timeout must be a number of seconds >= 0 (got '%s')", timeout);
        return EX_USAGE;
    }
    return EX_OK;
}

static int wait_run(ctx *x, const char *batch, const char *id, const char *timeout, int raw)
{
    int rc = ctx_batch(x, batch);
    if (rc != EX_OK) return rc;
    if (!id) { errmsg(x, "--id is required"); return EX_USAGE; }
    double secs;
    if ((rc = status_wait_timeout(x, timeout, &secs)) != EX_OK) return rc;
    rc = ctx_connect(x);
    return rc != EX_OK ? rc : status_wait_final(x, id, secs, raw);
}

static const char HELP_STATUS[] =
"Usage: allocctl status B [--id ID [--ordinal N] | --user U] [--raw]\n"
"\n"
"  (none)        stats, state, owner and the lengths of queue, ctl, dead, lottery pool\n"
"  --id ID       the result, with \"you beat X%\" for a grant; else the live position\n"
"                (\"N ahead of you\"). Without --ordinal the queue is scanned in pages of\n"
"                1000 (O(queue length): fine for an operator, not for a front end)\n"
"  --user U      what U holds now, U's group, pending invitations and swap offers, and\n"
"                for how many items with only_X/same_X rules U is eligible (which rule\n"
"                refuses the others, with U's profile value)\n"
"  --room R      with --user: whether U may be given R now; if not, why (then exit 1)\n"
"  --raw         print the stored JSON as it is\n"
"\n"
"Exit: 0 found, 1 unknown batch / no result and not queued / user holds nothing.\n";

static const char HELP_WAIT[] =
"Usage: allocctl wait B --id ID [--timeout SECONDS] [--raw]\n"
"\n"
"Polls for the final result (10 ms backing off to 200 ms) and prints it. A `waiting`\n"
"result (a waitlist, a swap offer: contract 9.5) is not final: wait says so on stderr\n"
"and goes on waiting. Default timeout 30 s, 0 = no limit. Exit 1 on timeout.\n";

int cmd_status(ctx *x, int argc, char **argv, int at)
{
    status_opts o = { 0 };
    const char *pos[MAX_POS], *b;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "id", 0, &o.id, NULL }, { "user", 0, &o.user, NULL },
                         { "ordinal", 0, &o.ordinal, NULL }, { "raw", 0, NULL, &o.raw },
                         { "room", 0, &o.room, NULL }, { "item", 0, &o.room, NULL } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_STATUS) : rc;
    rc = one_batch(x, npos, pos, &b);
    return rc ? rc : status_run(x, b, &o);
}

int cmd_wait(ctx *x, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *b, *id = NULL, *timeout = NULL;
    int raw = 0;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "id", 0, &id, NULL }, { "timeout", 0, &timeout, NULL },
                         { "raw", 0, NULL, &raw } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_WAIT) : rc;
    rc = one_batch(x, npos, pos, &b);
    return rc ? rc : wait_run(x, b, id, timeout, raw);
}
