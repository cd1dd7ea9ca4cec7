/* ctl_snapshot.c -- see ctl_snapshot.h. Part of libctl.a, allocctl's
 * library in tools/allocctl/; the daemon does not link it. */
#include "allocctl/ctl_snapshot.h"

#include <stdlib.h>
#include <string.h>

redisReply *ctl_snapshot_read(ctx *x)
{
    const char *hashes[] = { x->k.meta, x->k.capacity, x->k.holders, x->k.free, x->k.stats, x->k.waitlist };
    redisAppendCommand(x->c, "MULTI");
    for (size_t i = 0; i < sizeof hashes / sizeof *hashes; i++) redisAppendCommand(x->c, "HGETALL %s", hashes[i]);
    redisAppendCommand(x->c, "XLEN %s", x->k.log);
    redisAppendCommand(x->c, "XRANGE %s - + COUNT 1", x->k.log);
    redisAppendCommand(x->c, "XREVRANGE %s + - COUNT 1", x->k.log);
    redisAppendCommand(x->c, "XINFO STREAM %s", x->k.log);
    redisAppendCommand(x->c, "EXEC");
    redisReply *exec = exec_reply(x, CTL_SN_N, "the snapshot transaction failed");
    if (!exec) return NULL;
    for (int i = 0; i < CTL_SN_XINFO; i++)   /* XINFO fails when there is no log */
        if (exec->element[i]->type == REDIS_REPLY_ERROR) {
            errmsg(x, "redis: %s", exec->element[i]->str);
            freeReplyObject(exec);
            return NULL;
        }
    return exec;
}

ctl_replay *ctl_snapshot_replay(const redisReply *sn, ctl_finding_fn fn, void *ud)
{
    const char *kind = hfield(sn->element[CTL_SN_META], "kind");
    return ctl_replay_new(kind && !strcmp(kind, "room"), hfield_int(sn->element[CTL_SN_META], "per_user", 1),
                          fn, ud);
}

/* HGETALL reply -> ctl_kv array (pointing into the reply). */
static ctl_kv *kv_of(const redisReply *h, size_t *n)
{
    *n = h->elements / 2;
    ctl_kv *kv = calloc(*n ? *n : 1, sizeof *kv);
    for (size_t i = 0; kv && i < *n; i++)
        kv[i] = (ctl_kv){ h->element[2 * i]->str, h->element[2 * i + 1]->str, h->element[2 * i + 1]->len };
    return kv;
}

int ctl_snapshot_finish(ctx *x, ctl_replay *rp, const redisReply *sn)
{
    const redisReply *stats = sn->element[CTL_SN_STATS];
    ctl_snapshot s;
    ctl_kv *cap = kv_of(sn->element[CTL_SN_CAP], &s.n_capacity);
    ctl_kv *hold = kv_of(sn->element[CTL_SN_HOLDERS], &s.n_holders);
    ctl_kv *fr = kv_of(sn->element[CTL_SN_FREE], &s.n_free);
    ctl_kv *wl = kv_of(sn->element[CTL_SN_WAITLIST], &s.n_waitlist);
    s.capacity = cap;
    s.holders = hold;
    s.free = fr;
    s.waitlist = wl;
    s.has_free_units = hfield(stats, "free_units") != NULL;
    s.free_units = hfield_int(stats, "free_units", 0);
    s.has_waiting = hfield(stats, "waiting") != NULL;
    /* stats.waiting is the waitlist's length (contract 9.5), as the log's
     * waits are: open swap offers (9.3) are in stats.swap_offers */
    s.waiting = hfield_int(stats, "waiting", 0);
    int ok = cap && hold && fr && wl;
    if (ok) ctl_replay_finish(rp, &s);
    else errmsg(x, "out of memory");
    free(cap);
    free(hold);
    free(fr);
    free(wl);
    return ok ? 0 : -1;
}
