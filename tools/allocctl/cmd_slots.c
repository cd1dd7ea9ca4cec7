/* cmd_slots.c -- `allocctl batch slots B --from FILE --start T --every D
 * --per-slot N [--order number|points]`: selection slots (contract 9.4)
 * from a lottery file, written to P:{B}:slots in one MULTI/EXEC (the old
 * slots are replaced as a whole), and the schedule printed. The daemon
 * reads the hash at load and again every second, so a running round sees
 * the new slots within a second (docs/PROTOCOL.md). */
#include "allocctl/cmd_slots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocctl/ctl_slots.h"
#include "allocctl/ctl_util.h"
#include "base/textfile.h"

typedef struct slots_opts { const char *from, *start, *every, *per_slot, *order; } slots_opts;

static const char HELP_SLOTS[] =
"Usage: allocctl batch slots B --from FILE --start T --every D --per-slot N [--order number|points]\n"
"\n"
"Gives every user of FILE a selection slot (P:{B}:slots, user -> ms): the best --per-slot\n"
"users get T, the next ones T + D, and so on. Before their slot a user's requests are\n"
"refused not_open (with the slot as opens_at); users without a slot wait for opens_at.\n"
"The old slots of B are replaced. Prints the schedule.\n"
"\n"
"  --from FILE     CSV: a header `user,number` or `user,points`, then `user,value` lines\n"
"  --start T       the first slot: ms since the epoch or ISO 8601 with a zone\n"
"  --every D       between slots: 5m, 30s, 1h, 250ms or plain ms\n"
"  --per-slot N    users per slot\n"
"  --order O       number: lowest lottery number first (default); points: most first\n"
"\n"
"Exit: 0 written, 2 usage, 3 Redis, 4 bad FILE (FILE:LINE: message).\n";

/* DEL + HSET in one MULTI/EXEC, a thousand users per HSET. */
static int write_slots(ctx *x, const slots_plan *p)
{
    size_t queued = 1 + (p->n + 999) / 1000;   /* DEL, then an HSET per 1000 users */
    redisAppendCommand(x->c, "MULTI");
    redisAppendCommand(x->c, "DEL %s", x->k.slots);
    ctl_args a = { 0 };
    for (size_t i = 0; i < p->n; i += 1000) {
        ctl_args_reset(&a);
        ctl_args_add(&a, "HSET");
        ctl_args_add(&a, x->k.slots);
        for (size_t j = i; j < p->n && j < i + 1000; j++) {
            ctl_args_add(&a, p->users[j].user);
            ctl_args_addi(&a, p->users[j].at);
        }
        if (a.failed) break;
        redisAppendCommandArgv(x->c, (int)a.n, (const char **)a.v, a.len);
    }
    int failed = a.failed;
    ctl_args_free(&a);
    if (failed) { errmsg(x, "out of memory"); return EX_REDIS; }
    redisAppendCommand(x->c, "EXEC");
    redisReply *exec = exec_reply(x, queued, "the slots were not written (EXEC refused)");
    if (!exec) return EX_REDIS;
    freeReplyObject(exec);
    return EX_OK;
}

static void print_schedule(const ctx *x, const slots_plan *p, int64_t per_slot, int64_t every)
{
    char iso[40];
    size_t slots = (p->n + (size_t)per_slot - 1) / (size_t)per_slot;
    printf("batch %s: %zu users in %zu slot%s of up to %lld, every %lld ms\n", x->batch, p->n,
           slots, slots == 1 ? "" : "s", (long long)per_slot, (long long)every);
    for (size_t s = 0; s < slots; s++) {
        size_t from = s * (size_t)per_slot, to = from + (size_t)per_slot;
        if (to > p->n) to = p->n;
        printf("slot %zu  %s  (%lld)  users %zu-%zu: %s .. %s\n", s + 1,
               ctl_iso_ms(p->users[from].at, iso, sizeof iso), (long long)p->users[from].at,
               from + 1, to, p->users[from].user, p->users[to - 1].user);
    }
}

static int slots_run(ctx *x, const char *batch, const slots_opts *o)
{
    int64_t start, every, per_slot = 0;
    slots_order order = SLOTS_BY_NUMBER;
    if (!o->from || !o->start || !o->every || !o->per_slot) {
        errmsg(x, "--from, --start, --every and --per-slot are required (try --help)");
        return EX_USAGE;
    }
    if (ctl_parse_time_ms(o->start, &start) < 0) { errmsg(x, "--start '%s' is not a time", o->start); return EX_USAGE; }
    if (slots_parse_duration(o->every, &every) < 0) { errmsg(x, "--every '%s' is not a duration", o->every); return EX_USAGE; }
    if (opt_int(x, "per-slot", o->per_slot, 1, 1000000000, &per_slot) < 0) return EX_USAGE;
    if (o->order && !strcmp(o->order, "points")) order = SLOTS_BY_POINTS;
    else if (o->order && strcmp(o->order, "number")) { errmsg(x, "--order is number or points"); return EX_USAGE; }
    int rc = ctx_batch(x, batch);
    if (rc != EX_OK) return rc;
    size_t len;
    char *text = textfile_read(o->from, &len);
    if (!text) { errmsg(x, "%s: %s", o->from, strerror(errno)); return EX_INPUT; }
    slots_plan p;
    char err[256];
    rc = slots_parse(text, len, &p, err, sizeof err);
    free(text);
    if (rc < 0) { errmsg(x, "%s:%s", o->from, err); return EX_INPUT; }
    slots_schedule(&p, order, start, every, per_slot);
    rc = ctx_connect(x);
    if (rc == EX_OK) rc = write_slots(x, &p);
    if (rc == EX_OK) print_schedule(x, &p, per_slot, every);
    slots_free(&p);
    return rc;
}

int cmd_batch_slots(ctx *x, int argc, char **argv, int at)
{
    slots_opts o = { 0 };
    const char *pos[MAX_POS];
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x),
        { "from", 0, &o.from, NULL }, { "start", 0, &o.start, NULL }, { "every", 0, &o.every, NULL },
        { "per-slot", 0, &o.per_slot, NULL }, { "order", 0, &o.order, NULL } };
    x->cmd = "batch slots";
    int rc = parse_opts(x, argc, argv, at + 1, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_SLOTS) : rc;
    if (npos != 1) { errmsg(x, "one batch (try --help)"); return EX_USAGE; }
    return slots_run(x, pos[0], &o);
}
