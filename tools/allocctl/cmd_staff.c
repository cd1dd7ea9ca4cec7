/* cmd_staff.c -- `allocctl assign B --user U --item X [--qty N] [--check]`
 * and `allocctl unassign B --user U [--order O]`: a staff placement
 * (contract 11.5) pushed to P:{B}:ctl, and its result waited for.
 *
 * An admin command is served whatever the batch's state (waiting for its
 * opening, paused, closed), so the answer normally comes within a take;
 * the command waits for it (`allocctl wait`'s loop) and exits 0 only when
 * the placement was made (granted / done), 1 when it was refused, so a
 * script of pre-placements stops at the first bed that was not given.
 */
#include "allocctl/cmd_staff.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/cmd_status.h"
#include "base/random.h"
#include "wire/request.h"

typedef struct staff_opts {
    const char *user, *item, *qty, *order, *id, *timeout;
    int check, unassign;
} staff_opts;

/* The command's JSON (malloc'd), checked as allocd will check it; NULL
 * after a message. */
static char *staff_command(ctx *x, const staff_opts *o, char *id, size_t idlen)
{
    if (!o->user || (!o->unassign && !o->item)) {
        errmsg(x, "%s (try --help)", o->unassign ? "--user is required" : "--user and --item are required");
        return NULL;
    }
    if (o->id) snprintf(id, idlen, "%s", o->id);
    else snprintf(id, idlen, "c-%s-%016" PRIx64, o->unassign ? "unassign" : "assign", random_u64());
    json_t *doc = json_pack("{s:s, s:s, s:s}", "id", id, "op", o->unassign ? "unassign" : "assign",
                            "user", o->user);
    int64_t qty = 0;
    if (o->qty && opt_int(x, "qty", o->qty, 1, 1000000, &qty) < 0) { json_decref(doc); return NULL; }
    if (o->item) json_object_set_new(doc, "item", json_string(o->item));
    if (qty) json_object_set_new(doc, "qty", json_integer(qty));
    if (o->check) json_object_set_new(doc, "check", json_true());
    if (o->order) json_object_set_new(doc, "order", json_string(o->order));
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) { errmsg(x, "out of memory"); return NULL; }
    request q;
    request_parse(&q, text, strlen(text), (size_t)x->cfg.max_request_bytes, 1);
    int ok = q.outcome == REQUEST_OK;
    if (!ok) errmsg(x, "allocd would not accept %s: %s", text, q.error);
    request_clear(&q);
    if (!ok) { free(text); return NULL; }
    return text;
}

/* 0 granted/done, 1 anything else (its result is printed by wait). */
static int placed(ctx *x, const char *id)
{
    redisReply *r = rcmd(x, "HGET %s %s", x->k.results, id);
    if (!r) return EX_REDIS;
    json_error_t je;
    json_t *res = r->type == REDIS_REPLY_STRING ? json_loadb(r->str, r->len, 0, &je) : NULL;
    const char *st = json_string_value(json_object_get(res, "status"));
    int rc = st && (!strcmp(st, "granted") || !strcmp(st, "done")) ? EX_OK : EX_NOT;
    json_decref(res);
    freeReplyObject(r);
    return rc;
}

static int staff_run(ctx *x, int argc, char **argv, const char *batch, const staff_opts *o)
{
    int rc = ctx_batch(x, batch);
    if (rc == EX_OK) rc = ctx_config(x);
    if (rc != EX_OK) return rc;
    char id[96];
    char *text = staff_command(x, o, id, sizeof id);
    if (!text) return EX_USAGE;
    rc = ctx_connect(x);
    redisReply *r = rc == EX_OK ? rcmd(x, "RPUSH %s %s", x->k.ctl, text) : NULL;
    free(text);
    if (!r) return rc == EX_OK ? EX_REDIS : rc;
    freeReplyObject(r);
    printf("id=%s\n", id);
    fflush(stdout);
    /* allocctl wait's own loop and printing, as if called as
     * `allocctl wait B --id ID [--timeout S]` */
    char *wargv[] = { argv[0], "wait", (char *)batch, "--id", id, "--timeout",
                      (char *)(o->timeout ? o->timeout : "30"), NULL };
    const char *cmd = x->cmd;
    rc = cmd_wait(x, 7, wargv, 2);
    x->cmd = cmd;
    return rc == EX_OK ? placed(x, id) : rc;
}

static const char HELP_ASSIGN[] =
"Usage: allocctl assign B --user U --item X [--qty N] [--check] [--id ID] [--timeout S]\n"
"\n"
"A staff placement (contract 11.5): gives U that bed (rooms) or N units (stock, default 1)\n"
"now, whatever the batch's state, slots, throttle and draw. Capacity, one bed per user and\n"
"per_user still hold; eligibility (only_X, same_X) is checked only with --check. Pushed to\n"
"P:{B}:ctl; waits for the result (default 30 s) and prints it. The result and the log's\n"
"grant carry by=staff; `allocctl verify` lists placements made without --check as staff\n"
"exceptions.\n"
"\n"
"Exit: 0 granted, 1 refused or no result in time, 2 usage, 3 Redis.\n";

static const char HELP_UNASSIGN[] =
"Usage: allocctl unassign B --user U [--order O] [--id ID] [--timeout S]\n"
"\n"
"Takes U's bed back (or, with --order, one stock order), whatever the batch's state; the\n"
"waitlist is then served as for any return. Waits for the result and prints it.\n"
"\n"
"Exit: 0 done, 1 refused (not_holding, unknown_order) or no result in time, 2 usage, 3 Redis.\n";

static int staff_main(ctx *x, int argc, char **argv, int at, int unassign)
{
    staff_opts o = { .unassign = unassign };
    const char *pos[MAX_POS], *b;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "user", 0, &o.user, NULL }, { "item", 0, &o.item, NULL },
                         { "room", 0, &o.item, NULL }, { "qty", 0, &o.qty, NULL },
                         { "order", 0, &o.order, NULL }, { "id", 0, &o.id, NULL },
                         { "timeout", 0, &o.timeout, NULL }, { "check", 0, NULL, &o.check } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(unassign ? HELP_UNASSIGN : HELP_ASSIGN) : rc;
    if (unassign && (o.item || o.qty || o.check)) {
        errmsg(x, "unassign takes --user and --order only");
        return EX_USAGE;
    }
    if (!unassign && o.order) { errmsg(x, "assign takes no --order"); return EX_USAGE; }
    rc = one_batch(x, npos, pos, &b);
    if (!rc && !b) { errmsg(x, "which batch? (try --help)"); rc = EX_USAGE; }
    return rc ? rc : staff_run(x, argc, argv, b, &o);
}

int cmd_assign(ctx *x, int argc, char **argv, int at)
{
    return staff_main(x, argc, argv, at, 0);
}

int cmd_unassign(ctx *x, int argc, char **argv, int at)
{
    return staff_main(x, argc, argv, at, 1);
}
