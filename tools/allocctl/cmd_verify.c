/* cmd_verify.c -- `allocctl verify`: reads a batch's hashes and the end of
 * its log in one MULTI (ctl_snapshot), replays the log (ctl_replay) and
 * prints every difference and a summary. */
#include "allocctl/cmd_verify.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocctl/ctl_eligibility.h"
#include "allocctl/ctl_queue.h"
#include "allocctl/ctl_replay.h"
#include "allocctl/ctl_snapshot.h"
#include "allocctl/ctl_sync.h"
#include "allocctl/print.h"

#define MAX_FINDINGS_SHOWN 200 /* verify prints at most this many */

static void on_finding(void *ud, replay_kind kind, const char *msg)
{
    print_diff(ud, MAX_FINDINGS_SHOWN, "%s", msg);
}

/* Every entry as it stands: ctl_replay decodes both log formats. */
static void replay_page(ctl_replay *rp, const redisReply *page)
{
    for (size_t i = 0; i < page->elements; i++) {
        const redisReply *e = page->element[i], *f = e->element[1];
        ctl_kv fields[32];
        size_t n = 0;
        for (size_t j = 0; j + 1 < f->elements && n < 32; j += 2)
            fields[n++] = (ctl_kv){ f->element[j]->str, f->element[j + 1]->str, f->element[j + 1]->len };
        ctl_replay_entry(rp, e->element[0]->str, fields, n);
    }
}

/* XRANGE from the start up to last_id, CTL_QUEUE_PAGE entries at a time. */
static int replay_log(ctx *x, ctl_replay *rp, const char *last_id)
{
    char start[80] = "-";
    for (;;) {
        redisReply *r = rcmd(x, "XRANGE %s %s %s COUNT %d", x->k.log, start, last_id, CTL_QUEUE_PAGE);
        if (!r) return -1;
        replay_page(rp, r);
        size_t n = r->elements;
        if (n) snprintf(start, sizeof start, "(%s", r->element[n - 1]->element[0]->str);
        freeReplyObject(r);
        if (n < CTL_QUEUE_PAGE) return 0;
    }
}

/* 1 when entries were removed from the log (MAXLEN trimming, XDEL): then
 * replaying it cannot rebuild the state. Needs Redis 7 (entries-added). */
static int log_trimmed(const redisReply *xinfo, int64_t xlen, int64_t *added)
{
    *added = ctl_reply_field_int(xinfo, "entries-added", -1);
    return *added > xlen;
}

static void verify_summary(const ctl_replay_counts *c)
{
    printf("replayed %zu log entries (", c->entries);
    for (int i = 0; i < CTL_EV_N; i++)
        printf("%s%s %zu", i ? ", " : "", ctl_event_name(i), c->by_type[i]);
    printf("); users holding: %zu (holders: %zu); items: %zu; waiting: %zu\n", c->users, c->holders,
           c->items, c->waiting);
    size_t total = c->findings;
    if (total > MAX_FINDINGS_SHOWN)
        printf("(%zu more differences not shown)\n", total - MAX_FINDINGS_SHOWN);
    if (total) printf("FAIL: %zu difference%s\n", total, total == 1 ? "" : "s");
    else printf("OK: holders and free match the log (the waitlist too), and the invariants hold\n");
}

static int verify_run(ctx *x, redisReply *sn, ctl_replay *rp, size_t *shown)
{
    int64_t xlen = ctl_reply_int(sn->element[CTL_SN_XLEN]), added;
    const redisReply *last = sn->element[CTL_SN_LAST];
    if (log_trimmed(sn->element[CTL_SN_XINFO], xlen, &added)) {
        char msg[200];
        snprintf(msg, sizeof msg, "the log was trimmed: %" PRId64 " of %" PRId64 " entries are "
                 "left, so it cannot rebuild the state (log_maxlen must be 0 to verify)", xlen, added);
        on_finding(shown, REPLAY_MISMATCH, msg);
        printf("FAIL: nothing else was compared\n");
        return EX_NOT;
    }
    if (xlen > 0 && replay_log(x, rp, last->element[0]->element[0]->str) < 0) return EX_REDIS;
    if (ctl_snapshot_finish(x, rp, sn) < 0) return EX_REDIS;
    const ctl_replay_counts *c = ctl_replay_counts_get(rp);
    verify_summary(c);
    return c->findings ? EX_NOT : EX_OK;
}

static int verify_batch(ctx *x, const char *batch)
{
    int rc = ctx_batch(x, batch);
    if (rc == EX_OK) rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    redisReply *sn = ctl_snapshot_read(x);
    if (!sn) return EX_REDIS;
    const char *kind = hfield(sn->element[CTL_SN_META], "kind");
    if (!kind || (strcmp(kind, "stock") && strcmp(kind, "room"))) {
        errmsg(x, "batch %s has no valid meta kind; nothing to verify", batch);
        freeReplyObject(sn);
        return EX_NOT;
    }
    printf("verify %s (%s), log %s: %lld entries\n", batch, kind, x->k.log,
           sn->element[CTL_SN_XLEN]->integer);
    size_t shown = 0;
    ctl_replay *rp = ctl_snapshot_replay(sn, on_finding, &shown);
    rc = rp ? verify_run(x, sn, rp, &shown) : EX_REDIS;
    int elig = rc == EX_REDIS ? EX_OK : ctl_eligibility_audit(x);   /* contract 11.2 */
    if (elig != EX_OK) rc = elig;
    ctl_replay_free(rp);
    freeReplyObject(sn);
    return rc;
}

static const char HELP_VERIFY[] =
"Usage: allocctl verify B\n"
"\n"
"Replays P:{B}:log from the start and compares the rebuilt holdings with P:{B}:holders\n"
"and P:{B}:free (free = capacity - held), and checks the invariants (free + held =\n"
"capacity, free >= 0, stock units = sum of orders <= per_user, stats.free_units = sum of\n"
"free). Works on a live batch: the hashes and the log's end are read in one MULTI.\n"
"Then audits every holder against the only_X/same_X rules of their items with the\n"
"profiles as they are now (contract 11.2): BREAK lines, and STAFF lines for staff\n"
"placements made without check, which do not fail it.\n"
"Prints every difference (DIFF ...) and a summary. Exit 0 clean, 1 differences or a BREAK.\n";

int cmd_verify(ctx *x, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *b;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x) };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_VERIFY) : rc;
    rc = one_batch(x, npos, pos, &b);
    return rc ? rc : verify_batch(x, b);
}
