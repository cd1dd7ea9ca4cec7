/* apply_txn.c -- a decided chunk as its apply transaction (see
 * apply_txn.h). The order of the commands is part of the design: FENCE
 * and the small chunks_applied HSET lead, the LTRIM and stats.dequeued
 * move together at the end. Each add_* writes one part; a command that
 * ends up with no field is dropped again (cmd_close), so the transaction
 * carries nothing Redis would reject.
 */
#include "worker/apply_txn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"

#include "core/engine_wait.h"
#include "wire/log_entry.h"
#include "wire/records.h"
#include "worker/log_trim.h"
#include "worker/scripts.h"

/* "HSET key" (or another command and key) opening a command of the apply;
 * cmd_close drops it again when no field followed. */
static void cmd_open(argbuf *a, const char *cmd, const char *key)
{
    argbuf_cmd_begin(a);
    argbuf_str(a, cmd);
    argbuf_str(a, key);
}

static void cmd_close(argbuf *a)
{
    if (argbuf_cmd_nargs(a) > 2) argbuf_cmd_end(a);
    else argbuf_cmd_cancel(a);
}

/* FENCE's keys, in KEYS order (scripts.h). */
static void fence_keys(const apply_txn_ctx *c, const char *keys[FENCE_NKEYS])
{
    const batch_keys *k = c->keys;
    const char *all[FENCE_NKEYS] = {
        [FENCE_KEY_LEASE] = k->lease, [FENCE_KEY_INTERNAL] = k->internal,
        [FENCE_KEY_TRIP] = c->trip_key, [FENCE_KEY_RESULTS] = k->results,
        [FENCE_KEY_HOLDERS] = k->holders, [FENCE_KEY_FREE] = k->free,
        [FENCE_KEY_STATS] = k->stats, [FENCE_KEY_LOG] = k->log,
        [FENCE_KEY_DEAD] = k->dead, [FENCE_KEY_PARTICIPANTS] = k->participants,
        [FENCE_KEY_CAPACITY] = k->capacity, [FENCE_KEY_ORDERS_ENDED] = k->orders_ended,
        [FENCE_KEY_EARLY] = k->early, [FENCE_KEY_QUEUE] = k->queue,
        [FENCE_KEY_CTL] = k->ctl, [FENCE_KEY_WAITLIST] = k->waitlist,
        [FENCE_KEY_GROUPS] = k->groups,
    };
    memcpy(keys, all, sizeof all);
}

/* WATCH, FENCE (scripts.h), MULTI: the head of every apply pipeline.
 * FENCE's last argument, which keys the transaction writes, is written as
 * all '0' here and marked once the transaction is built (fence_mark);
 * returns the offset of its bytes in a->resp. */
static size_t add_fence(argbuf *a, const apply_txn_ctx *c, const chunk *ch,
                        const char *const keys[FENCE_NKEYS])
{
    /* Fault injection for tests (as SQLite does it): an apply containing
     * ALLOCD_FAULT_APPLY_ID has FENCE refuse it. */
    int fault = c->fault_apply_id && ch && chunk_has_id(ch, c->fault_apply_id);
    argbuf_cmd_begin(a);
    argbuf_str(a, "WATCH");
    for (int i = 0; i < FENCE_NWATCH; i++) argbuf_str(a, keys[i]);
    argbuf_cmd_end(a);
    argbuf_cmd_begin(a);
    argbuf_str(a, "EVAL");
    argbuf_str(a, c->fence_src);
    argbuf_int(a, FENCE_NKEYS);
    for (int i = 0; i < FENCE_NKEYS; i++) argbuf_str(a, keys[i]);
    argbuf_str(a, c->token);
    argbuf_str(a, c->epoch);
    argbuf_int(a, c->chunks_applied);
    argbuf_str(a, fault ? "1" : "0");
    char none[FENCE_NKEYS];
    memset(none, '0', sizeof none);
    argbuf_ext(a, none, sizeof none);
    size_t written_at = a->resp.len - 2 - sizeof none;   /* before its "\r\n" */
    argbuf_cmd_end(a);
    argbuf_cmd_begin(a);
    argbuf_str(a, "MULTI");
    argbuf_cmd_end(a);
    /* A small first command, so that it reaches Redis in the same read as
     * FENCE as often as possible (scripts.h, BUSY). */
    argbuf_cmd_begin(a);
    argbuf_str(a, "HSET");
    argbuf_str(a, c->keys->internal);
    argbuf_str(a, "chunks_applied");
    argbuf_int(a, c->chunks_applied + 1);
    argbuf_cmd_end(a);
    return written_at;
}

/* One RESP bulk string at *p ("$len\r\n<bytes>\r\n"): its bytes and
 * length; *p moves past it. The commands are argbuf's own, well formed. */
static const char *resp_bulk(const char **p, size_t *len)
{
    const char *s = *p;
    ALLOC_ASSERT(*s == '$');
    size_t n = 0;
    for (s++; *s != '\r'; s++) n = n * 10 + (size_t)(*s - '0');
    *len = n;
    *p = s + 2 + n + 2;
    return s + 2;
}

/* Marks in written[] the FENCE key that key[0..len) is, if any. */
static void mark_key(const char *const keys[FENCE_NKEYS], const char *key, size_t len, char *written)
{
    for (int i = 0; i < FENCE_NKEYS; i++)
        if (strlen(keys[i]) == len && !memcmp(keys[i], key, len)) { written[i] = '1'; return; }
}

/* Sets FENCE's `written` argument (add_fence) from the commands after
 * MULTI as they were encoded: the key of each, and the keys of a script
 * (the log trim), so no write can go unchecked because a list kept apart
 * from the code that writes missed it. A key the command before already
 * had (the events' XADDs) is not looked up again. */
static void fence_mark(argbuf *a, const char *const keys[FENCE_NKEYS], size_t first_cmd,
                       size_t written_at)
{
    char *written = a->resp.buf + written_at;
    const char *last = NULL;
    size_t last_len = 0;
    for (size_t i = first_cmd; i < a->ncmds; i++) {
        const char *p = a->resp.buf + a->cmd_start[i];
        ALLOC_ASSERT(*p == '*');
        while (*p++ != '\n') {}
        size_t len, key_len;
        const char *cmd = resp_bulk(&p, &len);
        size_t nkeys = 1;
        if (len == 4 && !memcmp(cmd, "EVAL", 4)) {        /* EVAL script numkeys key... */
            resp_bulk(&p, &len);
            nkeys = (size_t)strtoul(resp_bulk(&p, &len), NULL, 10);
        }
        for (size_t k = 0; k < nkeys; k++) {
            const char *key = resp_bulk(&p, &key_len);
            if (last && key_len == last_len && !memcmp(key, last, key_len)) continue;
            mark_key(keys, key, key_len, written);
            last = key;
            last_len = key_len;
        }
    }
}

/* One HSET of every result: the engine's, or the parser's `invalid`. The
 * JSON is written straight into the transaction (through argbuf's scratch
 * buffer), once per result. */
/* A pool request's result: its place in the draw and, with draw_by=points,
 * the points recorded for its ticket (contract 11.3), as pool_chunk put
 * them in the request. */
static void drawn_result(argbuf *a, const apply_txn_ctx *c, const chunk_item *it)
{
    const engine_request *r = &it->q.r;
    records_result_drawn(&a->data, &it->q, &it->res, it->seq, c->now, it->draw, r->has_points ? &r->points : NULL);
}

static void add_results(argbuf *a, const apply_txn_ctx *c, const chunk *ch)
{
    cmd_open(a, "HSET", c->keys->results);
    for (size_t i = 0; i < ch->n_items; i++) {
        const chunk_item *it = &ch->items[i];
        if (!chunk_item_answered(it) || it->res.kept) continue;  /* kept: answered when drawn */
        argbuf_str(a, it->q.r.id);
        size_t start = argbuf_begin(a);
        if (it->q.outcome == REQUEST_INVALID) records_invalid(&a->data, &it->q, it->seq, c->now);
        else if (it->draw) drawn_result(a, c, it);
        else records_result(&a->data, &it->q, &it->res, it->seq, c->now);
        argbuf_end(a, start);
    }
    cmd_close(a);
}

/* The waitlist's part (contract 9.5), after the chunk's results: the
 * requests that joined (their `waiting` result is in add_results) are
 * saved whole in P:{B}:waitlist, so a restart puts them back in place;
 * the ones that left it get their final result -- written after
 * add_results, so one that joined and left in this chunk ends final --
 * and leave the hash. All in the chunk's transaction: the units that came
 * back and the requests they served are one atomic step. */
static void add_waitlist(argbuf *a, const apply_txn_ctx *c, const chunk *ch, const engine *e)
{
    cmd_open(a, "HSET", c->keys->waitlist);
    for (size_t i = 0; i < ch->n_items; i++) {
        const chunk_item *it = &ch->items[i];
        /* a swap offer's `waiting` (9.3) is no waitlist place: no ticket */
        if (!chunk_item_answered(it) || it->q.outcome != REQUEST_OK || it->res.status != STATUS_WAITING ||
            !it->res.wait_no)
            continue;
        argbuf_str(a, it->q.r.id);
        size_t start = argbuf_begin(a);
        records_wait_entry(&a->data, &it->res, engine_reason_name(engine_wait_reason_of(it->q.r.op)),
                           it->seq, c->now, &it->q.r);
        argbuf_end(a, start);
    }
    cmd_close(a);
    size_t n = engine_wait_done_count(e);
    cmd_open(a, "HSET", c->keys->results);
    for (size_t i = 0; i < n; i++) {
        const engine_request *r;
        engine_result res;
        engine_wait_done_at(e, i, &r, &res);
        request q;
        memset(&q, 0, sizeof q);
        q.r = *r;
        q.op_name = engine_op_name(r->op);
        argbuf_str(a, r->id);
        size_t start = argbuf_begin(a);
        /* a pool request keeps its draw (9.1) through the waitlist */
        if (r->draw) records_result_drawn(&a->data, &q, &res, r->seq, c->now, r->draw, r->has_points ? &r->points : NULL);
        else records_result(&a->data, &q, &res, r->seq, c->now);
        argbuf_end(a, start);
    }
    cmd_close(a);
    cmd_open(a, "HDEL", c->keys->waitlist);
    for (size_t i = 0; i < n; i++) {
        const engine_request *r;
        engine_wait_done_at(e, i, &r, NULL);
        argbuf_str(a, r->id);
    }
    cmd_close(a);
}

static int user_holds_something(const engine_user_view *v)
{
    return v->room != NULL || v->units > 0;
}

/* Dirty users: rewritten when they hold something, deleted when not. */
static void add_holders(argbuf *a, const apply_txn_ctx *c, const engine *e)
{
    size_t n = engine_dirty_user_count(e);
    engine_user_view v;
    cmd_open(a, "HSET", c->keys->holders);
    for (size_t i = 0; i < n; i++) {
        engine_dirty_user_at(e, i, &v);
        if (!user_holds_something(&v)) continue;
        argbuf_str(a, v.id);
        size_t start = argbuf_begin(a);
        records_holder(&a->data, e, &v);
        argbuf_end(a, start);
    }
    cmd_close(a);
    cmd_open(a, "HDEL", c->keys->holders);
    for (size_t i = 0; i < n; i++) {
        engine_dirty_user_at(e, i, &v);
        if (!user_holds_something(&v)) argbuf_str(a, v.id);
    }
    cmd_close(a);
}

/* Free units of the dirty items (of every item on the first apply: Redis
 * may hold anything there before), and capacities that changed. */
static void add_items(argbuf *a, const apply_txn_ctx *c, const engine *e)
{
    engine_item_view v;
    int cap_changed;
    cmd_open(a, "HSET", c->keys->free);
    size_t n = c->first_apply ? engine_item_count(e) : engine_dirty_item_count(e);
    for (size_t i = 0; i < n; i++) {
        if (c->first_apply) engine_item_view_at(e, i, &v);
        else engine_dirty_item_at(e, i, &v, &cap_changed);
        argbuf_str(a, v.id);
        argbuf_int(a, v.free);
    }
    cmd_close(a);
    cmd_open(a, "HSET", c->keys->capacity);
    for (size_t i = 0; i < engine_dirty_item_count(e); i++) {
        engine_dirty_item_at(e, i, &v, &cap_changed);
        if (!cap_changed) continue;
        argbuf_str(a, v.id);
        argbuf_int(a, v.capacity);
    }
    cmd_close(a);
}

static void add_ended(argbuf *a, const apply_txn_ctx *c, const engine *e)
{
    size_t n = engine_ended_count(e);
    cmd_open(a, "HSET", c->keys->orders_ended);
    for (size_t i = 0; i < n; i++) {
        const char *user;
        engine_order o;
        engine_ended_at(e, i, &user, &o);
        argbuf_u64(a, o.id);
        size_t start = argbuf_begin(a);
        records_ended(&a->data, e, user, &o);
        argbuf_end(a, start);
    }
    cmd_close(a);
}

static const char *admin_state_name(engine_admin_state s)
{
    return s == ADMIN_PAUSED ? "paused" : s == ADMIN_CLOSED ? "closed" : "none";
}

/* The admin state (after an admin chunk, and on the first apply), the
 * lottery's progress, and the users seen for the first time. */
static void add_internal_and_participants(argbuf *a, const apply_txn_ctx *c, const chunk *ch,
                                          const engine *e)
{
    cmd_open(a, "HSET", c->keys->internal);
    if (ch->kind == CHUNK_CTL || c->first_apply) {
        argbuf_str(a, "admin_state");
        argbuf_str(a, admin_state_name(engine_get_admin_state(e)));
    }
    if (ch->kind == CHUNK_POOL) {
        size_t served = c->pool_served + ch->pool_len;
        argbuf_str(a, "early_served");
        argbuf_int(a, (int64_t)served);
        if (served == c->pool_n) { argbuf_str(a, "lottery_done"); argbuf_str(a, "1"); }
    }
    cmd_close(a);   /* P:{B}:early stays: `allocctl lottery verify` replays it */
    size_t n = engine_new_participant_count(e);
    /* a list, not a set: every user is appended once (the engine knows who
     * is new), and appending costs Redis far less than a set insert */
    cmd_open(a, "RPUSH", c->keys->participants);
    for (size_t i = 0; i < n; i++) argbuf_str(a, engine_new_participant_at(e, i));
    cmd_close(a);
}

static void add_dead(argbuf *a, const apply_txn_ctx *c, const chunk *ch)
{
    cmd_open(a, "RPUSH", c->keys->dead);
    for (size_t i = 0; i < ch->n_items; i++) {
        const chunk_item *it = &ch->items[i];
        if (it->q.outcome != REQUEST_DEAD) continue;
        size_t start = argbuf_begin(a);
        records_dead(&a->data, it->raw, it->raw_len, it->q.error, c->now);
        argbuf_end(a, start);
    }
    cmd_close(a);
}

static void open_xadd(argbuf *a, const apply_txn_ctx *c)
{
    cmd_open(a, "XADD", c->keys->log);
    if (c->log_maxlen > 0 && !(c->archive_group && *c->archive_group)) {
        argbuf_str(a, "MAXLEN");
        argbuf_str(a, "~");
        argbuf_int(a, c->log_maxlen);
    }
    argbuf_str(a, "*");
}

/* log_format chunk: one XADD carrying every event of the chunk
 * (wire/log_entry.h); none when nothing changed. */
static void add_chunk_log(argbuf *a, const apply_txn_ctx *c, const engine *e)
{
    size_t n = engine_event_count(e);
    if (!n) return;
    open_xadd(a, c);
    argbuf_str(a, "format"); argbuf_str(a, "chunk");
    argbuf_str(a, "n");      argbuf_int(a, (int64_t)n);
    argbuf_str(a, "events");
    size_t start = argbuf_begin(a);
    log_entry_write_events(&a->data, e);
    argbuf_end(a, start);
    argbuf_cmd_end(a);
}

/* One XADD per event: the contract wants one stream entry per change. */
static void add_event(argbuf *a, const apply_txn_ctx *c, const engine_event *ev)
{
    open_xadd(a, c);
    argbuf_str(a, "type");  argbuf_str(a, engine_event_name(ev->type));
    argbuf_str(a, "user");  argbuf_str(a, ev->user ? ev->user : "");
    argbuf_str(a, "item");  argbuf_str(a, ev->item ? ev->item : "");
    argbuf_str(a, "qty");   argbuf_int(a, ev->qty);
    argbuf_str(a, "order");
    if (ev->order) argbuf_u64(a, ev->order); else argbuf_str(a, "");
    argbuf_str(a, "req");   argbuf_str(a, ev->req ? ev->req : "");
    argbuf_str(a, "at");    argbuf_int(a, ev->at);
    if (ev->expires_at) { argbuf_str(a, "expires_at"); argbuf_int(a, ev->expires_at); }
    if (ev->state) { argbuf_str(a, "state"); argbuf_str(a, ev->state); }
    log_extra x[LOG_EVENT_MAX_EXTRAS];
    size_t nx = log_entry_extras(ev, x);
    for (size_t i = 0; i < nx; i++) {
        argbuf_str(a, x[i].key);
        if (x[i].str) argbuf_str(a, x[i].str); else argbuf_int(a, x[i].num);
    }
    argbuf_cmd_end(a);
}

/* Takes the chunk's requests off the head of their list, and (for the
 * queue) advances dequeued in the same transaction: the position formula
 * of the contract needs both to move together. Counters are absolute
 * values (HSET, never HINCRBY): no command depends on what Redis holds. */
static void add_consume_and_stats(argbuf *a, const apply_txn_ctx *c, const chunk *ch,
                                  const engine *e)
{
    if (ch->queue_len || ch->ctl_len) {
        cmd_open(a, "LTRIM", ch->queue_len ? c->keys->queue : c->keys->ctl);
        argbuf_int(a, ch->queue_len ? ch->queue_len : ch->ctl_len);
        argbuf_str(a, "-1");
        argbuf_cmd_end(a);
    }
    const engine_counters *n = engine_get_counters(e);
    struct { const char *name; int64_t v; } f[] = {
        { "dequeued", c->dequeued + ch->queue_len },
        { "processed", n->processed }, { "granted", n->granted }, { "done", n->done },
        { "rejected", n->rejected }, { "invalid", n->invalid }, { "dead", n->dead },
        { "duplicates", n->duplicates }, { "ctl", n->ctl },
        { "participants", n->participants }, { "free_units", n->free_units },
        /* the contract's `waiting` (9.5): the waitlist's length, the
         * requests on P:{B}:waitlist now. Open swap offers (9.3) are
         * `waiting` results too but no waitlist places: they are
         * stats.swap_offers (add_swap_results); processed counts both */
        { "waiting", n->waiting },
        { "wait_served", n->wait_served },
        { "wait_ended", n->wait_ended }, { "wait_joined", n->wait_joined },
        { "wait_head", engine_wait_head(e) },
        { "updated_at", c->now },
        { "decision_p50_us", c->decision_p50_us },
        { "decision_p99_us", c->decision_p99_us },
    };
    cmd_open(a, "HSET", c->keys->stats);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) { argbuf_str(a, f[i].name); argbuf_int(a, f[i].v); }
    if (c->bad_profiles) { argbuf_str(a, "bad_profiles"); argbuf_int(a, *c->bad_profiles); }
    /* 11.5: written once there is one, so batches without staff keep their bytes */
    if (n->staff_granted) { argbuf_str(a, "staff_granted"); argbuf_int(a, n->staff_granted); }
    argbuf_str(a, "state"); argbuf_str(a, engine_phase_name(engine_phase_at(e, c->now)));
    argbuf_str(a, "owner"); argbuf_str(a, c->instance);
    argbuf_cmd_end(a);
}

/* The lottery (lottery_pool.h): the requests this chunk kept and the users
 * it throttled before the opening join P:{B}:early; the seed is stored
 * and its commitment published with the first of them; the first chunk
 * served from the pool reveals the seed. */
static void add_lottery(argbuf *a, const apply_txn_ctx *c, const chunk *ch)
{
    const lottery_pool *p = c->pool;
    if (!p) return;
    cmd_open(a, "RPUSH", c->keys->early);
    for (size_t i = 0; i < p->n_pending; i++) argbuf_str(a, p->pending[i]);
    cmd_close(a);
    if (p->seed_unsaved) {
        char commit[LOTTERY_SEED_HEX + 1];
        lottery_commit(p->seed, commit);
        cmd_open(a, "HSET", c->keys->internal);
        argbuf_str(a, "lottery_seed"); argbuf_str(a, p->seed);
        argbuf_cmd_end(a);
        cmd_open(a, "HSET", c->keys->stats);
        argbuf_str(a, "lottery_commit"); argbuf_str(a, commit);
        argbuf_cmd_end(a);
    }
    cmd_open(a, "HSET", c->keys->stats);
    if (p->n_pending) {
        argbuf_str(a, "early_kept"); argbuf_int(a, (int64_t)p->n);
        argbuf_str(a, "lottery_users"); argbuf_int(a, (int64_t)lottery_ticket_count(&p->lot));
    }
    if (ch->kind == CHUNK_POOL && c->pool_served == 0 && p->seed[0]) {
        argbuf_str(a, "lottery_seed"); argbuf_str(a, p->seed);
    }
    cmd_close(a);
}

/* Groups formed by consent (contract 9.2) the chunk changed: written
 * whole, or deleted once dissolved. */
static void add_groups(argbuf *a, const apply_txn_ctx *c, const engine *e)
{
    size_t n = engine_dirty_group_count(e);
    engine_group_view g;
    cmd_open(a, "HSET", c->keys->groups);
    for (size_t i = 0; i < n; i++) {
        engine_dirty_group_at(e, i, &g);
        if (!g.alive) continue;
        argbuf_str(a, g.id);
        size_t start = argbuf_begin(a);
        records_group(&a->data, &g);
        argbuf_end(a, start);
    }
    cmd_close(a);
    cmd_open(a, "HDEL", c->keys->groups);
    for (size_t i = 0; i < n; i++) {
        engine_dirty_group_at(e, i, &g);
        if (!g.alive) argbuf_str(a, g.id);
    }
    cmd_close(a);
}

/* Swap offers that ended in this chunk (contract 9.3): their `waiting`
 * result is replaced by the final one, in the same transaction as the
 * change that ended them. */
static void add_swap_results(argbuf *a, const apply_txn_ctx *c, const chunk *ch, const engine *e)
{
    size_t n = engine_swap_resolved_count(e);
    /* stats.swap_offers: the open offers, whenever an offer came or went
     * (not in stats.waiting, the waitlist's length: add_consume_and_stats) */
    int changed = n > 0;
    int rooms = engine_get_meta(e)->kind == BATCH_ROOM;   /* swaps are rooms only */
    for (size_t i = 0; rooms && i < ch->n_items && !changed; i++)
        changed = chunk_item_answered(&ch->items[i]) && ch->items[i].res.status == STATUS_WAITING &&
                  ch->items[i].q.r.op == OP_SWAP;
    if (changed) {
        cmd_open(a, "HSET", c->keys->stats);
        argbuf_str(a, "swap_offers");
        argbuf_int(a, (int64_t)engine_swap_open_count(e));
        argbuf_cmd_end(a);
    }
    cmd_open(a, "HSET", c->keys->results);
    for (size_t i = 0; i < n; i++) {
        engine_swap_resolved s;
        engine_swap_resolved_at(e, i, &s);
        request q;
        memset(&q, 0, sizeof q);
        q.r.op = OP_SWAP;
        q.r.id = s.req;
        q.r.user = s.user;
        q.op_name = "swap";
        argbuf_str(a, s.req);
        size_t start = argbuf_begin(a);
        if (s.drawn.draw)   /* an early swap keeps its place in the draw (9.1) */
            records_result_drawn(&a->data, &q, &s.res, s.seq, c->now, s.drawn.draw,
                                 s.drawn.has_points ? &s.drawn.points : NULL);
        else records_result(&a->data, &q, &s.res, s.seq, c->now);
        argbuf_end(a, start);
    }
    cmd_close(a);
}

/* Everything the chunk changed, as commands (the transaction's body,
 * between the chunks_applied HSET and EXEC). */
static void add_effect(argbuf *out, const apply_txn_ctx *ctx, const chunk *ch, const engine *e)
{
    add_results(out, ctx, ch);
    add_swap_results(out, ctx, ch, e);
    add_waitlist(out, ctx, ch, e);
    add_holders(out, ctx, e);
    add_groups(out, ctx, e);
    add_items(out, ctx, e);
    add_ended(out, ctx, e);
    add_internal_and_participants(out, ctx, ch, e);
    add_lottery(out, ctx, ch);
    add_dead(out, ctx, ch);
    if (ctx->log_chunk) add_chunk_log(out, ctx, e);
    else for (size_t i = 0; i < engine_event_count(e); i++) add_event(out, ctx, engine_event_at(e, i));
    if (ctx->log_maxlen > 0 && ctx->archive_group && *ctx->archive_group && engine_event_count(e))
        log_trim_encode(out, ctx->keys->log, ctx->archive_group, ctx->log_maxlen);
    add_consume_and_stats(out, ctx, ch, e);
}

/* FENCE's written keys from the body, then EXEC. In Redis Cluster, while
 * the batch's slot migrates, the source refuses WATCH and FENCE with
 * TRYAGAIN (several keys, one of them already moved or never created --
 * the trip key) without running them, yet queues and commits a body whose
 * own keys it still has: a write no FENCE checked (the simulator's
 * `cluster` fault; test_sim_model shows it on redis-server). The body's last command names every FENCE key, so the
 * cluster refuses the transaction whenever it would have refused FENCE:
 * at queue time (TRYAGAIN or MOVED flag it, EXEC answers EXECABORT) and
 * at EXEC, which checks the queue's keys together. */
static int txn_close(argbuf *out, const apply_txn_ctx *ctx, const char *const keys[FENCE_NKEYS],
                     size_t first_cmd, size_t written_at)
{
    if (argbuf_failed(out)) return -ENOMEM;
    fence_mark(out, keys, first_cmd, written_at);
    if (ctx->cluster) {
        argbuf_cmd_begin(out);
        argbuf_str(out, "EXISTS");
        for (int i = 0; i < FENCE_NKEYS; i++) argbuf_str(out, keys[i]);
        argbuf_cmd_end(out);
    }
    argbuf_cmd_begin(out);
    argbuf_str(out, "EXEC");
    argbuf_cmd_end(out);
    return argbuf_failed(out) ? -ENOMEM : 0;
}

int apply_txn_encode(argbuf *out, const apply_txn_ctx *ctx, const chunk *ch, const engine *e)
{
    argbuf_reset(out);
    const char *keys[FENCE_NKEYS];
    fence_keys(ctx, keys);
    size_t written_at = add_fence(out, ctx, ch, keys);
    size_t first_cmd = out->ncmds - 1;      /* the chunks_applied HSET on */
    add_effect(out, ctx, ch, e);
    return txn_close(out, ctx, keys, first_cmd, written_at);
}

/* The staged chunk's effect, written at last: its commands as they were
 * encoded, then its staged copy deleted, in the same transaction. */
static void add_publish(argbuf *out, const apply_txn_ctx *ctx, const argbuf *staged)
{
    if (!staged || !staged->ncmds) return;
    for (size_t i = 0; i < staged->ncmds; i++)
        argbuf_cmd_raw(out, staged->resp.buf + staged->cmd_start[i], staged->cmd_len[i]);
    cmd_open(out, "HDEL", ctx->keys->internal);
    for (size_t i = 0; i < staged->ncmds; i++) {
        char field[32];
        apply_txn_staged_field(field, sizeof field, i);
        argbuf_str(out, field);
    }
    argbuf_cmd_end(out);
}

int apply_txn_encode_free(argbuf *out, const batch_keys *keys, const engine *e)
{
    argbuf_reset(out);
    engine_item_view v;
    cmd_open(out, "HSET", keys->free);
    for (size_t i = 0; i < engine_item_count(e); i++) {
        engine_item_view_at(e, i, &v);
        argbuf_str(out, v.id);
        argbuf_int(out, v.free);
    }
    cmd_close(out);
    return argbuf_failed(out) ? -ENOMEM : 0;
}

void apply_txn_staged_field(char *buf, size_t len, size_t i)
{
    snprintf(buf, len, "%s%zu", APPLY_TXN_STAGED_PREFIX, i);
}

int apply_txn_encode_staged(argbuf *out, argbuf *effect, const apply_txn_ctx *ctx, const argbuf *staged,
                            const chunk *ch, const engine *e)
{
    argbuf_reset(effect);
    add_effect(effect, ctx, ch, e);
    if (argbuf_failed(effect)) return -ENOMEM;
    argbuf_reset(out);
    const char *keys[FENCE_NKEYS];
    fence_keys(ctx, keys);
    size_t written_at = add_fence(out, ctx, ch, keys);
    size_t first_cmd = out->ncmds - 1;
    for (size_t i = 0; ctx->immediate && i < ctx->immediate->ncmds; i++)
        argbuf_cmd_raw(out, ctx->immediate->resp.buf + ctx->immediate->cmd_start[i], ctx->immediate->cmd_len[i]);
    add_publish(out, ctx, staged);
    cmd_open(out, "HSET", ctx->keys->internal);
    for (size_t i = 0; i < effect->ncmds; i++) {
        char field[32];
        apply_txn_staged_field(field, sizeof field, i);
        argbuf_str(out, field);
        argbuf_ext(out, effect->resp.buf + effect->cmd_start[i], effect->cmd_len[i]);
    }
    cmd_close(out);
    return txn_close(out, ctx, keys, first_cmd, written_at);
}

int apply_txn_encode_publish(argbuf *out, const apply_txn_ctx *ctx, const argbuf *staged)
{
    argbuf_reset(out);
    const char *keys[FENCE_NKEYS];
    fence_keys(ctx, keys);
    size_t written_at = add_fence(out, ctx, NULL, keys);
    size_t first_cmd = out->ncmds - 1;
    add_publish(out, ctx, staged);
    return txn_close(out, ctx, keys, first_cmd, written_at);
}
