/* cmd_purge.c -- `allocctl purge B [--force]`: removes a batch's keys from
 * Redis once the database holds it (results are ~218 bytes each and were
 * otherwise kept for ever).
 *
 * Refused, with every reason listed, unless the batch is closed with
 * nothing left to answer and fully archived: the archive group has no entry
 * pending or undelivered, and the archiver's last completed results pass
 * (P:{B}:archive results_upto) began after the daemon's last write
 * (stats.updated_at). --force skips the checks.
 *
 * Then B leaves P:batches (the daemon lets go of it: purge waits for the
 * lease to go) and every key of B goes, found by SCAN MATCH P:{B}:* plus
 * the known names. A big hash, set, list or stream is emptied a page at a
 * time (HSCAN+HDEL, SSCAN+SREM, LPOP n, XTRIM MAXLEN) before its UNLINK,
 * so no single command holds Redis for long, replicas and the AOF get small
 * steps, and UNLINK frees what is left in the background.
 */
#include "allocctl/cmd_archive.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "allocctl/archive_log.h"
#include "allocctl/ctl_sync.h"

#define PURGE_STEP 1000

typedef struct purge_check {
    ctx *x;
    const char *group;
    int refusals;
} purge_check;

static void refuse(purge_check *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void refuse(purge_check *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("refused: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    p->refusals++;
}

/* The archive group: no entry pending or not yet delivered. */
static void check_log(purge_check *p, const redisReply *groups, const redisReply *last)
{
    if (groups->type == REDIS_REPLY_ERROR) return;   /* no log: nothing to archive */
    const redisReply *g = NULL;
    for (size_t i = 0; groups->type == REDIS_REPLY_ARRAY && i < groups->elements; i++) {
        const redisReply *n = ctl_reply_field(groups->element[i], "name");
        if (n && n->str && !strcmp(n->str, p->group)) g = groups->element[i];
    }
    if (!g) { refuse(p, "the log has no archive group '%s': it was never archived", p->group); return; }
    int64_t pending = ctl_reply_field_int(g, "pending", 0);
    const redisReply *delivered = ctl_reply_field(g, "last-delivered-id");
    const char *newest = last->type == REDIS_REPLY_ARRAY && last->elements ?
                         last->element[0]->element[0]->str : NULL;
    if (pending) refuse(p, "%" PRId64 " log entries are pending in the archive group", pending);
    if (newest && (!delivered || !delivered->str || strcmp(delivered->str, newest)))
        refuse(p, "the archive has read the log up to %s, its end is %s",
               delivered && delivered->str ? delivered->str : "?", newest);
}

static int purge_checks(purge_check *p)
{
    ctx *x = p->x;
    char progress[BATCH_KEY_MAX + 16];
    archive_progress_key(progress, sizeof progress, x->cfg.prefix, x->batch);
    redisAppendCommand(x->c, "HGETALL %s", x->k.stats);
    redisAppendCommand(x->c, "LLEN %s", x->k.queue);
    redisAppendCommand(x->c, "LLEN %s", x->k.ctl);
    redisAppendCommand(x->c, "XINFO GROUPS %s", x->k.log);
    redisAppendCommand(x->c, "XREVRANGE %s + - COUNT 1", x->k.log);
    redisAppendCommand(x->c, "HGET %s results_upto", progress);
    redisReply *r[6];
    for (int i = 0; i < 6; i++)
        if (redisGetReply(x->c, (void **)&r[i]) != REDIS_OK) {
            for (int j = 0; j < i; j++) freeReplyObject(r[j]);
            errmsg(x, "redis: %s", x->c->errstr);
            return EX_REDIS;
        }
    const char *state = hfield(r[0], "state"), *updated = hfield(r[0], "updated_at");
    if (!state || strcmp(state, "closed")) refuse(p, "the batch is %s, not closed", state ? state : "not served");
    if (r[1]->integer || r[2]->integer)
        refuse(p, "%lld requests and %lld commands are still queued", r[1]->integer, r[2]->integer);
    check_log(p, r[3], r[4]);
    const char *upto = r[5]->type == REDIS_REPLY_STRING ? r[5]->str : NULL;
    if (!upto) refuse(p, "the archive has not copied the results yet");
    else if (updated && strcmp(upto, updated))
        refuse(p, "the archive's last results pass began before the daemon's last write "
               "(results_upto %s, stats.updated_at %s)", upto, updated);
    for (int i = 0; i < 6; i++) freeReplyObject(r[i]);
    return EX_OK;
}

/* ---- removal ---- */

/* Empties a big key a page at a time. Returns the members removed, or -1. */
static int64_t drain_key(ctx *x, const char *key, const char *type)
{
    int64_t removed = 0;
    char cursor[32] = "0";
    for (;;) {
        redisReply *r = NULL;
        if (!strcmp(type, "hash") || !strcmp(type, "set")) {
            int hash = type[0] == 'h';
            r = rcmd(x, hash ? "HSCAN %s %s COUNT %d" : "SSCAN %s %s COUNT %d", key, cursor, PURGE_STEP);
            if (!r) return -1;
            snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
            const redisReply *m = r->element[1];
            ctl_args a = { 0 };
            ctl_args_add(&a, hash ? "HDEL" : "SREM");
            ctl_args_add(&a, key);
            for (size_t i = 0; i < m->elements; i += hash ? 2 : 1) ctl_args_addn(&a, m->element[i]->str, m->element[i]->len);
            redisReply *d = a.n > 2 ? rargv(x, &a) : NULL;
            if (d) { removed += d->integer; freeReplyObject(d); }
            ctl_args_free(&a);
            freeReplyObject(r);
            if (!strcmp(cursor, "0")) return removed;
        } else if (!strcmp(type, "list")) {
            r = rcmd(x, "LPOP %s %d", key, PURGE_STEP);
            if (!r) return -1;
            size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
            removed += (int64_t)n;
            freeReplyObject(r);
            if (n < PURGE_STEP) return removed;
        } else if (!strcmp(type, "stream")) {
            int64_t len = ctl_reply_int(r = rcmd(x, "XLEN %s", key));
            if (r) freeReplyObject(r);
            if (!r) return -1;
            if (len <= PURGE_STEP) return removed;
            r = rcmd(x, "XTRIM %s MAXLEN %lld", key, (long long)(len - PURGE_STEP));
            if (!r) return -1;
            removed += r->integer;
            freeReplyObject(r);
        } else {
            return 0;   /* strings, zsets: UNLINK alone */
        }
    }
}

static int purge_key(ctx *x, const char *key, int64_t *keys, int64_t *members)
{
    redisReply *t = rcmd(x, "TYPE %s", key);
    if (!t) return EX_REDIS;
    char type[16];
    snprintf(type, sizeof type, "%s", t->str ? t->str : "none");
    freeReplyObject(t);
    if (!strcmp(type, "none")) return EX_OK;
    int64_t n = drain_key(x, key, type);
    if (n < 0) return EX_REDIS;
    redisReply *u = rcmd(x, "UNLINK %s", key);
    if (!u) return EX_REDIS;
    /* A drained hash, set or list is gone before the UNLINK (which then
     * says 0): the key counts as removed since it existed a moment ago. */
    *keys += 1;
    *members += n;
    freeReplyObject(u);
    return EX_OK;
}

/* Every key of the batch: SCAN MATCH P:{B}:* (keys added later included). */
static int purge_all(ctx *x, int64_t *keys, int64_t *members)
{
    char pattern[BATCH_KEY_MAX + 8], cursor[32] = "0";
    snprintf(pattern, sizeof pattern, "%s:{%s}:*", x->cfg.prefix, x->batch);
    do {
        redisReply *r = rcmd(x, "SCAN %s MATCH %s COUNT %d", cursor, pattern, PURGE_STEP);
        if (!r) return EX_REDIS;
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            int rc = purge_key(x, r->element[1]->element[i]->str, keys, members);
            if (rc) { freeReplyObject(r); return rc; }
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0"));
    return EX_OK;
}

/* After SREM: until the daemon has let go of the lease (and the
 * archiver, which re-reads P:batches every second, has dropped B). */
static int wait_released(ctx *x)
{
    int64_t start = clock_mono_us() / 1000, limit = x->cfg.lease_ttl_ms + 5000;
    for (;;) {
        int64_t waited = clock_mono_us() / 1000 - start;
        redisReply *r = rcmd(x, "EXISTS %s", x->k.lease);
        if (!r) return EX_REDIS;
        long long held = r->integer;
        freeReplyObject(r);
        if (!held && waited >= 2000) return EX_OK;
        if (waited > limit) {
            errmsg(x, "batch %s is out of %s but a daemon still holds its lease; nothing removed, "
                   "try again", x->batch, x->batches_key);
            return EX_NOT;
        }
        clock_sleep_ms(100);
    }
}

static const char HELP_PURGE[] =
"Usage: allocctl purge B [--force] [--group G]\n"
"\n"
"Removes every key of batch B from Redis (P:{B}:*) once the database holds it.\n"
"Refused, with the reasons, unless B is closed with nothing queued, its log is fully\n"
"archived (consumer group G -- config archive_group, else \"archive\" -- has nothing\n"
"pending or unread) and the archive's last results pass began after the daemon's\n"
"last write. --force skips these checks. B leaves P:batches first and purge waits\n"
"until no daemon holds it; big keys are emptied a page at a time, then UNLINKed.\n"
"Exit 0 removed, 1 refused, 3 Redis failed.\n";

int cmd_purge(ctx *x, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *b, *group = NULL;
    size_t npos;
    int force = 0;
    const opt spec[] = { GLOBAL_OPTS(x), { "force", 0, NULL, &force }, { "group", 0, &group, NULL } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_PURGE) : rc;
    if ((rc = one_batch(x, npos, pos, &b)) != EX_OK) return rc;
    if ((rc = ctx_batch(x, b)) != EX_OK || (rc = ctx_connect(x)) != EX_OK) return rc;
    purge_check p = { x, group ? group : *x->cfg.archive_group ? x->cfg.archive_group : ARCHIVE_GROUP_DEFAULT, 0 };
    if (!force && (rc = purge_checks(&p)) != EX_OK) return rc;
    if (p.refusals) { printf("purge %s: nothing removed (--force removes it anyway)\n", b); return EX_NOT; }
    redisReply *r = rcmd(x, "SREM %s %s", x->batches_key, b);
    if (!r) return EX_REDIS;
    freeReplyObject(r);
    if ((rc = wait_released(x)) != EX_OK) return rc;
    int64_t keys = 0, members = 0;
    rc = purge_all(x, &keys, &members);
    if (rc == EX_OK)
        printf("purge %s: removed %" PRId64 " key%s (%" PRId64 " fields and entries in pages first)\n",
               b, keys, keys == 1 ? "" : "s", members);
    return rc;
}
