/* batch_load.c -- reading a batch's state from Redis into a fresh engine
 * (see batch_load.h). Only at load time, so clarity wins over speed here:
 * one HGETALL per hash, and the replies parsed as they come.
 */
#include "worker/batch_load.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/numtext.h"
#include "core/engine_slots.h"
#include "wire/state_load.h"
#include "worker/apply_txn.h"

/* The replies of one load, in the order they are sent (and answered). */
enum {
    LOAD_META, LOAD_CAPACITY, LOAD_ATTRS, LOAD_HOLDERS, LOAD_ENDED, LOAD_WAITLIST, LOAD_SLOTS,
    LOAD_PROFILES, LOAD_UPGRADE, LOAD_PARTICIPANTS, LOAD_GROUPS, LOAD_STATS, LOAD_INTERNAL
};
#define BATCH_LOAD_STEPS (LOAD_INTERNAL + 1)

typedef struct batch_load_step {
    batch_load_run *run;
    int tag;
} batch_load_step;

struct batch_load_run {
    batch_load *l;            /* NULL once abandoned */
    int outstanding;          /* replies not in yet */
    batch_load_step steps[BATCH_LOAD_STEPS];
    batch_load_step scan;     /* every HSCAN page */
};

/* A new run for a new load; the old one is abandoned (freed now if all its
 * replies are in, else by the last of them). */
static batch_load_run *run_new(batch_load *l)
{
    if (l->run) {
        l->run->l = NULL;
        if (!l->run->outstanding) free(l->run);
        l->run = NULL;
    }
    batch_load_run *run = calloc(1, sizeof *run);
    if (!run) return NULL;
    run->l = l;
    for (int i = 0; i < BATCH_LOAD_STEPS; i++) { run->steps[i].run = run; run->steps[i].tag = i; }
    run->scan.run = run;
    run->scan.tag = -1;
    l->run = run;
    return run;
}

/* A reply arrived: the load it belongs to, or NULL when that load was
 * abandoned (and the run freed with its last reply). */
static batch_load *run_reply(batch_load_step *s)
{
    batch_load_run *run = s->run;
    run->outstanding--;
    if (run->l) return run->l;
    if (!run->outstanding) free(run);
    return NULL;
}

/* Counts a command whose callback will come (a refused send gets none). */
static int sent(batch_load_run *run, int rc)
{
    if (rc == 0) run->outstanding++;
    return rc;
}

void batch_load_free(batch_load *l)
{
    batch_load_clear(l);
    argbuf_free(&l->staged);
    if (!l->run) return;
    l->run->l = NULL;
    if (!l->run->outstanding) free(l->run);
    l->run = NULL;
}

void batch_load_init(batch_load *l, redis_conn *conn, const allocd_config *cfg,
                     const allocd_scripts *scripts, const batch_keys *keys,
                     const char *batch, dedup *d, const batch_load_callbacks *cb, void *data)
{
    memset(l, 0, sizeof *l);
    l->conn = conn;
    l->cfg = cfg;
    l->scripts = scripts;
    l->keys = keys;
    l->batch = batch;
    l->dedup = d;
    l->cb = cb;
    l->data = data;
    argbuf_init(&l->staged);
}

void batch_load_fail(batch_load *l, const char *fmt, ...)
{
    if (l->failed) return;
    l->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, sizeof l->err, fmt, ap);
    va_end(ap);
}

engine *batch_load_take_engine(batch_load *l)
{
    engine *e = l->eng;
    l->eng = NULL;
    return e;
}

void batch_load_clear(batch_load *l)
{
    if (l->eng) engine_free(l->eng);
    l->eng = NULL;
}

static const char *reply_error(const redisReply *r, const char *err)
{
    if (err) return err;
    if (!r) return "no reply";
    if (r->type == REDIS_REPLY_ERROR) return r->str;
    return NULL;
}

/* ---------------------------------------------------------------- meta -- */

static int meta_choice(int *dst, const char *k, const char *v, const char *a, int va,
                       const char *b, int vb, char *err, size_t errlen)
{
    if (!strcmp(v, a)) *dst = va;
    else if (!strcmp(v, b)) *dst = vb;
    else { snprintf(err, errlen, "meta %s '%s' is neither %s nor %s", k, v, a, b); return -EINVAL; }
    return 0;
}

int batch_load_meta_field(engine_meta *m, const char *k, const char *v, char *err, size_t errlen)
{
    struct { const char *name; int64_t *dst; int64_t min; } ints[] = {
        { "opens_at", &m->opens_at, 0 }, { "closes_at", &m->closes_at, 0 },
        { "per_user", &m->per_user, 1 }, { "hold_ms", &m->hold_ms, 0 },
        { "max_group", &m->max_group, 1 }, { "rate_max", &m->rate_max, 0 },
        { "rate_window_ms", &m->rate_window_ms, 1 }, { "penalty_ms", &m->penalty_ms, 0 },
        { "wait_ms", &m->wait_ms, 0 },
    };
    int choice, rc;
    if (!strcmp(k, "kind")) {
        rc = meta_choice(&choice, k, v, "stock", BATCH_STOCK, "room", BATCH_ROOM, err, errlen);
        if (rc == 0) m->kind = (batch_kind)choice;
        return rc;
    }
    if (!strcmp(k, "group_slot")) {
        if (!strcmp(v, "earliest")) m->group_slot = GROUP_SLOT_EARLIEST;
        else if (!strcmp(v, "latest")) m->group_slot = GROUP_SLOT_LATEST;
        else if (!strcmp(v, "leader")) m->group_slot = GROUP_SLOT_LEADER;
        else { snprintf(err, errlen, "meta group_slot '%s' is not earliest, latest or leader", v); return -EINVAL; }
        return 0;
    }
    if (!strcmp(k, "early")) {
        rc = meta_choice(&choice, k, v, "reject", EARLY_REJECT, "shuffle", EARLY_SHUFFLE, err, errlen);
        if (rc == 0) m->early = (early_mode)choice;
        return rc;
    }
    if (!strcmp(k, "groups")) {
        rc = meta_choice(&choice, k, v, "formed", GROUPS_FORMED, "listed", GROUPS_LISTED, err, errlen);
        if (rc == 0) m->groups = (groups_mode)choice;
        return rc;
    }
    if (!strcmp(k, "draw_by")) {   /* contract 11.3 */
        rc = meta_choice(&choice, k, v, "none", DRAW_BY_NONE, "points", DRAW_BY_POINTS, err, errlen);
        if (rc == 0) m->draw_by = (draw_by_mode)choice;
        return rc;
    }
    if (!strcmp(k, "group_fill")) {   /* contract 11.4 */
        rc = meta_choice(&choice, k, v, "any", GROUP_FILL_ANY, "exact", GROUP_FILL_EXACT, err, errlen);
        if (rc == 0) m->group_fill = (group_fill_mode)choice;
        return rc;
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(k, ints[i].name)) continue;
        if (numtext_parse_i64(v, ints[i].dst) < 0 || *ints[i].dst < ints[i].min) {
            snprintf(err, errlen, "meta %s '%s' must be an integer >= %" PRId64, k, v, ints[i].min);
            return -EINVAL;
        }
        return 0;
    }
    return 0; /* unknown meta fields are the operator's own */
}

static void load_meta(batch_load *l, const redisReply *r)
{
    engine_meta m;
    engine_meta_defaults(&m);
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        batch_load_fail(l, "%s is missing: the batch is not defined", l->keys->meta);
        return;
    }
    char err[200];
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (batch_load_meta_field(&m, r->element[i]->str, r->element[i + 1]->str, err, sizeof err) < 0) {
            batch_load_fail(l, "%s", err);
            return;
        }
    if (!m.kind) { batch_load_fail(l, "%s has no kind (stock or room)", l->keys->meta); return; }
    l->eng = engine_new(&m, l->seed);
    if (!l->eng) batch_load_fail(l, "out of memory");
}

/* ------------------------------------------------------------- hashes -- */

static void load_pair(batch_load *l, int tag, const char *k, const char *v, size_t vlen)
{
    char err[256];
    int64_t n;
    switch (tag) {
    case LOAD_CAPACITY:
        if (numtext_parse_i64(v, &n) < 0 || n < 0) batch_load_fail(l, "capacity of '%s' is not a count: '%s'", k, v);
        else if (engine_load_item(l->eng, k, n) < 0) batch_load_fail(l, "capacity item '%s' rejected", k);
        break;
    case LOAD_ATTRS:
        /* a bad attribute only makes a room unmatchable by that filter */
        if (state_load_attrs(l->eng, k, v, vlen, err, sizeof err) < 0)
            log_warn("batch %s: attrs: %s", l->batch, err);
        break;
    case LOAD_HOLDERS:
        if (state_load_holder(l->eng, k, v, vlen, err, sizeof err) < 0) batch_load_fail(l, "%s", err);
        break;
    case LOAD_ENDED:
        if (state_load_ended(l->eng, k, v, vlen, err, sizeof err) < 0)
            log_warn("batch %s: %s", l->batch, err);
        break;
    case LOAD_GROUPS:
        if (state_load_group(l->eng, k, v, vlen, err, sizeof err) < 0) batch_load_fail(l, "%s", err);
        break;
    case LOAD_SLOTS:
        batch_load_slot(l->eng, l->batch, k, v);
        break;
    case LOAD_PROFILES:
        /* a profile that is not one counts as none (profiles_scan.h) */
        profiles_pair(l->profiles, l->eng, l->batch, k, v);
        break;
    case LOAD_WAITLIST:
        /* a waiting request allocd wrote and cannot read back would lose
         * its final result: the load fails, as for a bad holder */
        if (state_load_wait(l->eng, k, v, vlen, l->cfg->max_request_bytes, err, sizeof err) < 0)
            batch_load_fail(l, "%s", err);
        break;
    }
}

/* One P:{B}:slots field (the operator's): a user and ms. A bad one is
 * warned about and skipped -- that user then waits for the batch's
 * opens_at -- rather than stop the whole round. */
void batch_load_slot(engine *e, const char *batch, const char *user, const char *v)
{
    int64_t at;
    if (numtext_parse_i64(v, &at) < 0 || at < 0)
        log_warn("batch %s: slots %s '%s' is not a time in ms: ignored", batch, user, v);
    else if (engine_slot_set(e, user, at) == -EINVAL)
        log_warn("batch %s: slots: '%s' is not a user id: ignored", batch, user);
}

static void load_pairs(batch_load *l, const redisReply *r, int tag)
{
    if (r->type != REDIS_REPLY_ARRAY) { batch_load_fail(l, "unexpected reply loading %s", l->batch); return; }
    if (tag == LOAD_PROFILES) profiles_begin(l->profiles, 1);   /* a new engine */
    for (size_t i = 0; i + 1 < r->elements && !l->failed; i += 2)
        load_pair(l, tag, r->element[i]->str, r->element[i + 1]->str, r->element[i + 1]->len);
    if (tag == LOAD_PROFILES) profiles_end(l->profiles, l->eng);
}

static void load_stats(batch_load *l, const redisReply *r)
{
    engine_counters c;
    memset(&c, 0, sizeof c);
    struct { const char *name; int64_t *dst; } f[] = {
        { "processed", &c.processed }, { "granted", &c.granted }, { "done", &c.done },
        { "rejected", &c.rejected }, { "invalid", &c.invalid }, { "dead", &c.dead },
        { "duplicates", &c.duplicates }, { "ctl", &c.ctl }, { "dequeued", &l->dequeued },
        { "wait_joined", &c.wait_joined }, { "wait_served", &c.wait_served },
        { "wait_ended", &c.wait_ended }, { "staff_granted", &c.staff_granted },
    };
    l->dequeued = 0;
    /* allocd wrote these counters (HINCRBY): one that is not an integer
     * was changed under us, and dequeued places every later take, so the
     * load fails rather than start from a guess */
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        for (size_t j = 0; j < sizeof f / sizeof f[0]; j++)
            if (!strcmp(r->element[i]->str, f[j].name) &&
                numtext_parse_i64(r->element[i + 1]->str, f[j].dst) < 0) {
                batch_load_fail(l, "stats %s '%s' is not an integer", f[j].name, r->element[i + 1]->str);
                return;
            }
    engine_load_counters(l->eng, &c);
}

/* A chunk's effect staged and not published yet (apply_txn.h): its
 * commands, in order, into l->staged. They were written whole by one
 * transaction, so a gap or a value that is no command is damage. */
static void load_staged(batch_load *l, const redisReply *r)
{
    size_t n = 0, plen = strlen(APPLY_TXN_STAGED_PREFIX);
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        n += !strncmp(r->element[i]->str, APPLY_TXN_STAGED_PREFIX, plen);
    for (size_t k = 0; k < n; k++) {
        char want[32];
        apply_txn_staged_field(want, sizeof want, k);
        const redisReply *v = NULL;
        for (size_t i = 0; i + 1 < r->elements && !v; i += 2)
            if (!strcmp(r->element[i]->str, want)) v = r->element[i + 1];
        if (!v || v->len < 4 || v->str[0] != '*') {
            batch_load_fail(l, "internal %s: the staged chunk is damaged", want);
            return;
        }
        argbuf_cmd_raw(&l->staged, v->str, v->len);
    }
    if (argbuf_failed(&l->staged)) batch_load_fail(l, "the staged chunk: out of memory");
}

static void load_internal(batch_load *l, const redisReply *r)
{
    l->lottery_done = 0;
    l->chunks_applied = 0;
    load_staged(l, r);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const char *k = r->element[i]->str, *v = r->element[i + 1]->str;
        /* FENCE compares it with ours: a damaged value must fail here,
         * with a message, not as a refused apply later */
        if (!strcmp(k, "chunks_applied") && numtext_parse_i64(v, &l->chunks_applied) < 0) {
            batch_load_fail(l, "internal chunks_applied '%s' is not an integer", v);
            return;
        }
        if (!strcmp(k, "lottery_done")) l->lottery_done = !strcmp(v, "1");
        if (!strcmp(k, "admin_state"))
            engine_load_admin_state(l->eng, !strcmp(v, "paused") ? ADMIN_PAUSED
                                            : !strcmp(v, "closed") ? ADMIN_CLOSED : ADMIN_NONE);
    }
}

/* load_prepare's reply: what it upgraded, for the log. */
static void load_upgraded(batch_load *l, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return;
    if (r->element[0]->integer)
        log_notice("batch %s: %s was a set (an older allocd): now a list", l->batch, l->keys->participants);
    if (r->element[1]->integer || r->element[2]->integer)
        log_notice("batch %s: %lld requests and %lld commands an older allocd left in processing "
                   "are back at the head of the queue", l->batch,
                   r->element[1]->integer, r->element[2]->integer);
}

static void on_load_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_load_step *s = priv;
    batch_load *l = run_reply(s);
    if (!l || !l->cb->loading(l->data)) return;
    const char *e = reply_error(r, err);
    if (e) batch_load_fail(l, "Redis: %s", e);
    else if (s->tag == LOAD_META) load_meta(l, r);
    else if (!l->failed) {
        switch (s->tag) {
        case LOAD_UPGRADE: load_upgraded(l, r); break;
        case LOAD_PARTICIPANTS:
            for (size_t i = 0; i < r->elements; i++) engine_load_participant(l->eng, r->element[i]->str);
            break;
        case LOAD_STATS: load_stats(l, r); break;
        case LOAD_INTERNAL: load_internal(l, r); break;
        default: load_pairs(l, r, s->tag);
        }
    }
    if (s->tag == LOAD_INTERNAL) l->cb->on_read(l->data);
}

int batch_load_start(batch_load *l, const char *trip_key, uint64_t seed)
{
    batch_load_clear(l);
    dedup_forget_answered(l->dedup);
    argbuf_reset(&l->staged);
    l->seed = seed;
    l->failed = 0;
    l->err[0] = '\0';
    const batch_keys *k = l->keys;
    int to = l->cfg->redis_timeout_ms;
    batch_load_run *run = run_new(l);
    if (!run) return -ENOMEM;
    batch_load_step *st = run->steps;
    /* the first refused send's error is the one returned: after it nothing
     * more is sent, since the load is abandoned anyway */
    int rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_META], to, "HGETALL %s", k->meta));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_CAPACITY], to, "HGETALL %s", k->capacity));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_ATTRS], to, "HGETALL %s", k->attrs));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_HOLDERS], to, "HGETALL %s", k->holders));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_ENDED], to, "HGETALL %s", k->orders_ended));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_WAITLIST], to, "HGETALL %s", k->waitlist));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_SLOTS], to, "HGETALL %s", k->slots));
    /* contract 11.2: read with the batch, then again every second while
     * it is served (profiles_scan.h) */
    if (!rc && l->profiles)
        rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_PROFILES], to, "HGETALL %s", k->profiles));
    /* the lists an older allocd kept requests in while it decided them */
    char processing[BATCH_KEY_MAX + 16], ctlprocessing[BATCH_KEY_MAX + 16];
    snprintf(processing, sizeof processing, "%s:{%s}:processing", l->cfg->prefix, l->batch);
    snprintf(ctlprocessing, sizeof ctlprocessing, "%s:{%s}:ctlprocessing", l->cfg->prefix, l->batch);
    const char *prep[] = { k->participants, processing, k->queue, k->stats, ctlprocessing, k->ctl, trip_key };
    if (!rc) rc = sent(run, redis_conn_eval(l->conn, &l->scripts->load_prepare, on_load_reply, &st[LOAD_UPGRADE],
                                    to, 7, 7, prep, NULL));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_PARTICIPANTS], to, "LRANGE %s 0 -1", k->participants));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_GROUPS], to, "HGETALL %s", k->groups));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_STATS], to, "HGETALL %s", k->stats));
    if (!rc) rc = sent(run, redis_conn_command(l->conn, on_load_reply, &st[LOAD_INTERNAL], to, "HGETALL %s", k->internal));
    /* every command sent gets exactly one callback (redis_conn), even one
     * whose send failed later; a send refused now gets none */
    return rc;
}

/* ------------------------------------------------------------ answered -- */

static void scan_page(batch_load *l, const char *cursor);

static void on_scan_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_load *l = run_reply(priv);
    if (!l || !l->cb->loading(l->data)) return;
    const char *e = reply_error(r, err);
    if (e) { batch_load_fail(l, "results: %s", e); l->cb->on_done(l->data); return; }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
        batch_load_fail(l, "results: unexpected reply to HSCAN");
        l->cb->on_done(l->data);
        return;
    }
    const redisReply *kv = r->element[1];
    for (size_t i = 0; i + 1 < kv->elements; i += 2)
        if (dedup_add_answered(l->dedup, kv->element[i]->str, kv->element[i]->len) < 0) {
            batch_load_fail(l, "out of memory");
            l->cb->on_done(l->data);
            return;
        }
    if (strcmp(r->element[0]->str, "0")) scan_page(l, r->element[0]->str);
    else l->cb->on_done(l->data);
}

static void scan_page(batch_load *l, const char *cursor)
{
    const char *argv[] = { "HSCAN", l->keys->results, cursor, "COUNT", "2000" };
    if (sent(l->run, redis_conn_commandargv(l->conn, on_scan_reply, &l->run->scan,
                                            l->cfg->redis_timeout_ms, 5, argv, NULL)) < 0) {
        batch_load_fail(l, "results: Redis not connected");
        l->cb->on_done(l->data);
    }
}

void batch_load_scan(batch_load *l)
{
    if (l->failed) { l->cb->on_done(l->data); return; }
    scan_page(l, "0");
}
