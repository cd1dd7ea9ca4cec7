/* chaos_check.c -- the chaos run's checker. It trusts nothing allocd
 * wrote about itself: it replays the event log (P:{B}:log) from the first
 * entry with the one replayer (core/replay.h through allocctl's
 * ctl_replay), checking capacity and per-user limits at every step, and
 * compares the outcome with holders, free and capacity; it matches every
 * result and every log entry to a pushed request, and adds up the stats. */
#include "chaos_int.h"

/* ---------------------------------------------------------- checker -- */

typedef struct idmap {
    rec **slot;
    size_t cap;
} idmap;

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
    return h;
}

static void idmap_init(idmap *m, size_t n)
{
    m->cap = 16;
    while (m->cap < n * 2) m->cap *= 2;
    m->slot = chaos__xcalloc(m->cap, sizeof *m->slot);
}

static void idmap_put(idmap *m, rec *r)
{
    size_t i = hash_str(r->id, strlen(r->id)) & (m->cap - 1);
    while (m->slot[i]) i = (i + 1) & (m->cap - 1);
    m->slot[i] = r;
}

static rec *idmap_get(const idmap *m, const char *s, size_t n)
{
    size_t i = hash_str(s, n) & (m->cap - 1);
    while (m->slot[i]) {
        rec *r = m->slot[i];
        if (strlen(r->id) == n && !memcmp(r->id, s, n)) return r;
        i = (i + 1) & (m->cap - 1);
    }
    return NULL;
}

typedef struct checker {
    chaos_ctx *cx;
    rconn rc;
    idmap ids;
    chaos_report *rep;
} checker;

/* A command on the node of batch bi (every key of the batch is there). */
static redisReply *cmd(checker *k, int bi, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = chaos__rcmdv(k->cx, &k->rc, k->cx->bslot[bi], fmt, ap);
    va_end(ap);
    if (!r) chaos__violation(k->cx, &k->rep->other, "checker: Redis error on the node of batch %s", k->cx->b[bi].name);
    return r;
}

#define KINT(k, bi, ...) chaos__rint_((k)->cx, &(k)->rc, (k)->cx->bslot[bi], __VA_ARGS__)

static const char *js(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static int item_index(const batch_def *b, const char *item)
{
    for (int i = 0; i < b->n_items; i++)
        if (!strcmp(b->items[i], item)) return i;
    return -1;
}

/* What check_results counts across a batch's results. */
typedef struct result_tally {
    size_t n;                  /* results in the hash */
    long long dequeued;        /* stats.dequeued: the highest seq */
    long long max_rank, n_granted;
    unsigned char *ranks;      /* [1..n]: how often each rank was seen */
    unsigned char *seqs;       /* [1..dequeued]: how often each seq was seen */
} result_tally;

/* One result against its first push: the id, user and op it answers, the
 * kind of status its push calls for. Returns the status as check_results
 * counts it (1 granted, 2 done, 3 rejected, 4 invalid, 5 an open swap
 * offer) or 0 for a status no result may have. */
static int result_status(checker *k, const batch_def *b, rec *rc, json_t *doc, const redisReply *vr)
{
    chaos_ctx *cx = k->cx;
    const char *status = js(doc, "status");
    if (strcmp(js(doc, "id"), rc->id))
        chaos__violation(cx, &k->rep->other, "%s: result under '%s' carries id '%s'", b->name, rc->id, js(doc, "id"));
    snprintf(rc->result_op, sizeof rc->result_op, "%s", js(doc, "op"));
    if (rc->expect == EXP_VALID &&
        (strcmp(js(doc, "user"), rc->user) || strcmp(js(doc, "op"), rc->op)))
        chaos__violation(cx, &k->rep->applied_twice,
                  "%s: result of '%s' is not that of its first push (user %s op %s), a duplicate was applied: %.200s",
                  b->name, rc->id, rc->user, rc->op, vr->str);
    if (rc->expect == EXP_INVALID && strcmp(status, "invalid"))
        chaos__violation(cx, &k->rep->other, "%s: '%s' must be invalid: pushed %.120s, got %.200s",
                  b->name, rc->id, rc->json, vr->str);
    if (rc->expect == EXP_VALID && !strcmp(status, "invalid"))
        chaos__violation(cx, &k->rep->other, "%s: valid request '%s' answered invalid: pushed %.160s, got %.200s",
                  b->name, rc->id, rc->json, vr->str);
    if (rc->expect == EXP_CTL && strcmp(status, "done") && strcmp(status, "rejected") &&
        (strcmp(status, "granted") || strcmp(rc->op, "assign")))
        chaos__violation(cx, &k->rep->other, "%s: admin command '%s' answered %s", b->name, rc->id, status);
    if (rc->expect == EXP_CTL && (!strcmp(rc->op, "assign") || !strcmp(rc->op, "unassign")) &&
        strcmp(status, "rejected") && strcmp(js(doc, "by"), "staff"))
        chaos__violation(cx, &k->rep->other, "%s: '%s' (%s) answered %s without by = staff", b->name, rc->id, rc->op,
                         status);
    k->rep->not_eligible += !strcmp(js(doc, "reason"), "not_eligible");
    int st = !strcmp(status, "granted") ? 1 : !strcmp(status, "done") ? 2
           : !strcmp(status, "rejected") ? 3 : !strcmp(status, "invalid") ? 4
           : !strcmp(status, "waiting") && !strcmp(rc->op, "swap") ? 5 : 0;
    if (!st) chaos__violation(cx, &k->rep->other, "%s: result of '%s' has status '%s'", b->name, rc->id, status);
    rc->status = (uint8_t)st;
    return st;
}

/* A grant's rank (1..n, each once) and members; every request's seq
 * (1..dequeued, each once). */
static void tally_result(checker *k, const batch_def *b, rec *rc, json_t *doc, result_tally *t)
{
    chaos_ctx *cx = k->cx;
    if (rc->status == 1) {
        json_t *members = json_object_get(doc, "members");
        rc->want_grants = (uint16_t)(json_is_array(members) ? json_array_size(members) : 1);
        if (!strcmp(rc->op, "group") && !json_is_array(members))
            chaos__violation(cx, &k->rep->other, "%s: granted group '%s' lists no members", b->name, rc->id);
        long long rank = json_integer_value(json_object_get(doc, "rank"));
        t->n_granted++;
        if (rank < 1 || (size_t)rank > t->n) chaos__violation(cx, &k->rep->other, "%s: '%s' has rank %lld", b->name, rc->id, rank);
        else if (t->ranks[rank]++) chaos__violation(cx, &k->rep->applied_twice, "%s: rank %lld given twice (again to '%s')", b->name, rank, rc->id);
        if (rank > t->max_rank) t->max_rank = rank;
    }
    if (rc->expect != EXP_CTL) {
        long long seq = json_integer_value(json_object_get(doc, "seq"));
        if (seq < 1 || seq > t->dequeued)
            chaos__violation(cx, &k->rep->other, "%s: '%s' has seq %lld, dequeued is %lld", b->name, rc->id, seq, t->dequeued);
        else if (t->seqs[seq]++)
            chaos__violation(cx, &k->rep->applied_twice, "%s: seq %lld answered twice (again for '%s')", b->name, seq, rc->id);
    }
}

/* Results of batch b: each must belong to a pushed id of this batch, be the
 * result of the first push (user and op), have the right kind of status,
 * and together they must show ranks 1..granted and distinct seqs. counts:
 * by status (1..5) of the queue's requests, [6] the assigns granted (11.5:
 * in granted and processed, not in dequeued). */
static void check_results(checker *k, int bi, long long *granted_out, long long *counts)
{
    draw_tally *draw = chaos__draw_new(k->cx, bi);
    chaos_ctx *cx = k->cx;
    const batch_def *b = &cx->b[bi];
    redisReply *r = cmd(k, bi, "HGETALL alloc:{%s}:results", b->name);
    if (!r) return;
    result_tally t = { .n = r->elements / 2 };
    t.ranks = chaos__xcalloc(t.n + 2, 1);
    t.dequeued = chaos__hget_ll(cx, &k->rc, bi, "stats", "dequeued");
    t.seqs = chaos__xcalloc((size_t)(t.dequeued > 0 ? t.dequeued : 0) + 2, 1);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        redisReply *kr = r->element[i], *vr = r->element[i + 1];
        rec *rc = idmap_get(&k->ids, kr->str, kr->len);
        if (!rc || rc->batch != bi) {
            chaos__violation(cx, &k->rep->phantom, "%s: result for id '%.80s' that was never pushed to this batch: %.200s",
                      b->name, kr->str, vr->str);
            continue;
        }
        rc->seen = 1;
        k->rep->results++;
        json_t *doc = json_loadb(vr->str, vr->len, 0, NULL);
        if (!json_is_object(doc)) {
            chaos__violation(cx, &k->rep->other, "%s: result of '%s' is not a JSON object: %.200s", b->name, rc->id, vr->str);
            json_decref(doc);
            continue;
        }
        int st = result_status(k, b, rc, doc, vr);
        /* an open swap offer (waiting, 9.3) is counted in processed and in
         * stats.swap_offers, not in stats.waiting (the waitlist, 9.5) */
        if (rc->expect != EXP_CTL && st) counts[st]++;
        if (rc->expect == EXP_CTL && st == 1) counts[6]++;
        tally_result(k, b, rc, doc, &t);
        chaos__draw_note(draw, rc, doc);
        json_decref(doc);
    }
    chaos__draw_check(draw);
    if (t.max_rank != t.n_granted)
        chaos__violation(cx, &k->rep->stats_errors, "%s: %lld granted results but the highest rank is %lld", b->name,
                  t.n_granted, t.max_rank);
    *granted_out = t.n_granted;
    free(t.ranks);
    free(t.seqs);
    freeReplyObject(r);
}

/* The replay of one batch's log: the rules are core/replay.h's, run by
 * allocctl's ctl_replay (both log formats); the checker adds what only it
 * knows -- which request each event names and the batch's items. */
typedef struct replay {
    checker *k;
    const batch_def *b;
    ctl_replay *cr;
    rules_hist *rules;   /* contract 11 through the log (chaos_rules.c) */
} replay;

/* A rule of the replay the log broke, counted by what it means. */
static void replay_finding_seen(void *ud, replay_kind kind, const char *msg)
{
    replay *rp = ud;
    chaos_report *rep = rp->k->rep;
    long *counter = kind == REPLAY_OVERSOLD ? &rep->oversold : kind == REPLAY_MISMATCH ? &rep->mismatches
                  : &rep->other;
    chaos__violation(rp->k->cx, counter, "%s: %s", rp->b->name, msg);
}

/* Entries that change no holding: a phase change, a waitlist join or
 * service (contract 9.5). Returns 1 if `e` was one. */
static int replay_bookkeeping(replay *rp, const char *sid, const replay_event *e, rec *rc)
{
    if (e->type == EVENT_STATE) { if (rc) rc->ev_state++; return 1; }
    if (e->type != EVENT_WAIT && e->type != EVENT_WAIT_SERVED) return 0;
    if (!rc) return 1;
    if (e->type == EVENT_WAIT_SERVED) rc->ev_wait_served++;
    else rc->ev_wait++;
    if (rc->ev_wait_served > rc->ev_wait)
        chaos__violation(rp->k->cx, &rp->k->rep->mismatches, "%s: log %s: '%s' served from the waitlist without joining it",
                  rp->b->name, sid, e->req);
    rp->k->rep->waits += e->type == EVENT_WAIT;
    return 1;
}

/* Every event before the replay applies it: the request it names was
 * pushed to this batch, its item is one of the batch's, and each request's
 * events are counted for check_effects. */
static void replay_seen(void *ud, const char *sid, const replay_event *e)
{
    replay *rp = ud;
    checker *k = rp->k;
    const batch_def *b = rp->b;
    k->rep->log_entries++;
    rec *rc = *e->req ? idmap_get(&k->ids, e->req, strlen(e->req)) : NULL;
    if (*e->req && (!rc || rc->batch != (uint8_t)(b - k->cx->b)))
        chaos__violation(k->cx, &k->rep->phantom, "%s: log %s (%s) names request '%s' that was never pushed here", b->name, sid,
                  e->type_name, e->req);
    if (replay_bookkeeping(rp, sid, e, rc) || e->type == REPLAY_TYPE_OTHER) return;
    if (item_index(b, e->item) < 0)
        chaos__violation(k->cx, &k->rep->mismatches, "%s: log %s (%s) names unknown item '%s'", b->name, sid, e->type_name,
                  e->item);
    if (e->type == EVENT_GRANT) k->rep->grants_logged++;
    if (e->type == EVENT_EXPIRE) k->rep->expiries++;
    const replay_item *ri = replay_item_get(ctl_replay_state(rp->cr), e->item);
    chaos__rules_event(rp->rules, sid, e, rc, ri ? ri->held : 0);
    if (!rc) return;
    switch (e->type) {
    case EVENT_GRANT: rc->ev_grant++; break;
    case EVENT_RELEASE: rc->ev_release++; break;
    case EVENT_CONFIRM: rc->ev_confirm++; break;
    case EVENT_CANCEL: rc->ev_cancel++; break;
    case EVENT_CAPACITY: rc->ev_capacity++; break;
    default: break;
    }
}

static void replay_log(checker *k, replay *rp)
{
    const batch_def *b = rp->b;
    char start[64] = "-";
    for (;;) {
        redisReply *r = cmd(k, (int)(b - k->cx->b), "XRANGE alloc:{%s}:log %s + COUNT 5000", b->name, start);
        if (!r) return;
        if (r->type != REDIS_REPLY_ARRAY) { freeReplyObject(r); return; }
        for (size_t i = 0; i < r->elements; i++) {
            redisReply *e = r->element[i];
            const char *sid = e->element[0]->str;
            redisReply *f = e->element[1];
            ctl_kv fields[32];
            size_t nf = 0;
            for (size_t j = 0; j + 1 < f->elements && nf < 32; j += 2)
                fields[nf++] = (ctl_kv){ f->element[j]->str, f->element[j + 1]->str, f->element[j + 1]->len };
            ctl_replay_entry(rp->cr, sid, fields, nf);
            snprintf(start, sizeof start, "(%s", sid);
        }
        size_t n = r->elements;
        freeReplyObject(r);
        if (n < 5000) break;
    }
}

/* A stock holder's orders: held units per item into held_h, the units
 * field equal to their sum and within per_user, no held order long past
 * its expiry. */
static void check_stock_holder(checker *k, const batch_def *b, const char *user, json_t *h, long long *held_h,
                               long long now_ms)
{
    chaos_ctx *cx = k->cx;
    long long units = 0;
    size_t j;
    json_t *o;
    json_array_foreach(json_object_get(h, "orders"), j, o) {
        int it = item_index(b, js(o, "item"));
        long long q = json_integer_value(json_object_get(o, "qty"));
        if (it >= 0) held_h[it] += q;
        units += q;
        if (!strcmp(js(o, "state"), "held") &&
            json_integer_value(json_object_get(o, "expires_at")) < now_ms - 1500)
            chaos__violation(cx, &k->rep->other, "%s: order %s of %s is still held %lld ms after it expired",
                      b->name, js(o, "order"), user,
                      now_ms - json_integer_value(json_object_get(o, "expires_at")));
    }
    if (units != json_integer_value(json_object_get(h, "units")))
        chaos__violation(cx, &k->rep->mismatches, "%s: holders[%s] says %lld units, its orders sum to %lld", b->name, user,
                  (long long)json_integer_value(json_object_get(h, "units")), units);
    if (units > b->per_user)
        chaos__violation(cx, &k->rep->oversold, "%s: %s holds %lld units, per_user is %d", b->name, user, units, b->per_user);
}

/* free and capacity of every item against the replay, and free + held
 * (from the holders hash) == capacity. */
static void compare_items(checker *k, replay *rp, const long long *held_h, long long *free_sum)
{
    chaos_ctx *cx = k->cx;
    const batch_def *b = rp->b;
    int bi = (int)(b - cx->b);
    *free_sum = 0;
    for (int it = 0; it < b->n_items; it++) {
        long long fr = KINT(k, bi, "HGET alloc:{%s}:free %s", b->name, b->items[it]);
        long long cap = KINT(k, bi, "HGET alloc:{%s}:capacity %s", b->name, b->items[it]);
        *free_sum += fr;
        const replay_item *ri = replay_item_get(ctl_replay_state(rp->cr), b->items[it]);
        long long rcap = ri ? ri->cap : 0, rheld = ri ? ri->held : 0;
        if (cap != rcap)
            chaos__violation(cx, &k->rep->mismatches, "%s: capacity[%s] = %lld, the log replays to %lld", b->name, b->items[it], cap, rcap);
        if (fr != rcap - rheld)
            chaos__violation(cx, &k->rep->mismatches, "%s: free[%s] = %lld, the log replays to %lld - %lld held",
                      b->name, b->items[it], fr, rcap, rheld);
        if (fr + held_h[it] != cap || fr < 0)
            chaos__violation(cx, &k->rep->oversold, "%s: %s: free %lld + held %lld != capacity %lld",
                      b->name, b->items[it], fr, held_h[it], cap);
    }
    long long n_free = KINT(k, bi, "HLEN alloc:{%s}:free", b->name);
    if (n_free != b->n_items)
        chaos__violation(cx, &k->rep->mismatches, "%s: free has %lld fields for %d items", b->name, n_free, b->n_items);
}

/* "by":"staff" on a bed or an order (11.5) marks exactly a placement by an
 * assign without check; the mark is no log event, so it is taken off
 * before the holder is compared with the replay. */
static void check_staff_mark(checker *k, const batch_def *b, const char *user, json_t *h)
{
    json_t *docs[65] = { h };
    size_t n = 1, j;
    json_t *o;
    json_array_foreach(json_object_get(h, "orders"), j, o) if (n < 65) docs[n++] = o;
    for (size_t i = b->room ? 0 : 1; i < (b->room ? 1 : n); i++) {
        const char *req = js(docs[i], "req");
        const rec *rc = *req ? idmap_get(&k->ids, req, strlen(req)) : NULL;
        int marked = !strcmp(js(docs[i], "by"), "staff"), exception = rc && !strcmp(rc->op, "assign") && rc->nocheck;
        if (b->room && marked != exception)
            chaos__violation(k->cx, &k->rep->mismatches, "%s: holders[%s] %s by = staff, its request '%s' %s an assign"
                             " without check", b->name, user, marked ? "says" : "lacks", req, exception ? "is" : "is not");
        json_object_del(docs[i], "by");
    }
}

/* holders, free and capacity in Redis against the replay; free + held ==
 * capacity with held counted from the holders hash itself. */
static void compare_state(checker *k, replay *rp, long long *free_sum)
{
    chaos_ctx *cx = k->cx;
    const batch_def *b = rp->b;
    long long held_h[MAX_ITEMS] = { 0 };
    long long now_ms = harness_now_ms();
    int bi = (int)(b - cx->b);
    redisReply *r = cmd(k, bi, "HGETALL alloc:{%s}:holders", b->name);
    size_t n_holders = 0;
    for (size_t i = 0; r && i + 1 < r->elements; i += 2) {
        const char *user = r->element[i]->str;
        json_t *h = json_loadb(r->element[i + 1]->str, r->element[i + 1]->len, 0, NULL);
        n_holders++;
        if (!h) { chaos__violation(cx, &k->rep->other, "%s: holder %s is not JSON", b->name, user); continue; }
        json_t *want = ctl_replay_holder_json(rp->cr, user);
        /* the log rebuilds the bed; a group and open swap offers are not
         * log events (P:{B}:groups, 9.2 and 9.3) */
        json_object_del(h, "group");
        json_object_del(h, "swap_offers");
        check_staff_mark(k, b, user, h);
        if (!want || !json_equal(h, want)) {
            char *w = want ? json_dumps(want, JSON_COMPACT) : NULL;
            chaos__violation(cx, &k->rep->mismatches, "%s: holders[%s] = %.150s but the log replays to %.150s",
                      b->name, user, r->element[i + 1]->str, w ? w : "nothing");
            free(w);
        }
        json_decref(want);
        if (b->room) {
            int it = item_index(b, js(h, "item"));
            if (it >= 0) held_h[it]++;
        } else {
            check_stock_holder(k, b, user, h, held_h, now_ms);
        }
        json_decref(h);
    }
    size_t n_replayed = replay_holding_count(ctl_replay_state(rp->cr));
    if (r && n_holders != n_replayed)
        chaos__violation(cx, &k->rep->mismatches, "%s: %zu holders in Redis, the log replays to %zu",
                  b->name, n_holders, n_replayed);
    chaos__rules_final(cx, bi, r);
    if (r) freeReplyObject(r);
    compare_items(k, rp, held_h, free_sum);
}

/* Every result against its log entries: a granted request has exactly one
 * grant per unit holder it created, a done cancel/release exactly one
 * event, and nothing else left a trace. */
static void check_effects(checker *k, rec *rc)
{
    chaos_ctx *cx = k->cx;
    const char *bn = cx->b[rc->batch].name;
    const char *op = rc->expect == EXP_VALID ? rc->op : rc->result_op;
    int g = rc->ev_grant, rel = rc->ev_release, conf = rc->ev_confirm, can = rc->ev_cancel, cap = rc->ev_capacity;
    int want_g = 0, want_rel = 0, max_conf = 0, want_can = 0, want_cap = 0;
    if (rc->status == 1) {
        want_g = rc->want_grants;
        if (!strcmp(op, "switch") || !strcmp(op, "swap")) want_rel = 1;
    } else if (rc->status == 2) {
        if (!strcmp(op, "cancel")) want_can = 1;
        if (!strcmp(op, "release")) want_rel = 1;
        if (!strcmp(op, "confirm")) max_conf = 1;
        if (!strcmp(op, "set_capacity")) want_cap = 1;
        if (!strcmp(op, "unassign")) want_rel = 1;   /* rooms only here (11.5) */
    }
    if (rc->ev_wait > 1 || rc->ev_wait != rc->ev_wait_served)   /* joined once, served once */
        chaos__violation(cx, &k->rep->applied_twice, "%s: '%s' has %d wait and %d wait_served entries", bn, rc->id,
                  rc->ev_wait, rc->ev_wait_served);
    if (g > want_g || rel > want_rel || conf > max_conf || can > want_can || cap > want_cap)
        chaos__violation(cx, &k->rep->applied_twice,
                  "%s: '%s' (%s, status %d) left grant %d release %d confirm %d cancel %d capacity %d in the log (%.120s)",
                  bn, rc->id, op, rc->status, g, rel, conf, can, cap, rc->json);
    else if (g < want_g || rel < want_rel || can < want_can || cap < want_cap)
        chaos__violation(cx, &k->rep->mismatches,
                  "%s: '%s' (%s) was answered status %d but the log has grant %d release %d cancel %d capacity %d",
                  bn, rc->id, op, rc->status, g, rel, can, cap);
}

static void check_stats(checker *k, int bi, long long granted_results, const long long *counts,
                        long long free_sum, long long dead_acked, long long dead_attempts)
{
    chaos_ctx *cx = k->cx;
    const char *n = cx->b[bi].name;
    rconn *rc = &k->rc;
    long long d = chaos__hget_ll(cx, rc, bi, "stats", "dequeued"), p = chaos__hget_ll(cx, rc, bi, "stats", "processed"),
              dd = chaos__hget_ll(cx, rc, bi, "stats", "dead"), du = chaos__hget_ll(cx, rc, bi, "stats", "duplicates"),
              g = chaos__hget_ll(cx, rc, bi, "stats", "granted"), dn = chaos__hget_ll(cx, rc, bi, "stats", "done"),
              rj = chaos__hget_ll(cx, rc, bi, "stats", "rejected"), iv = chaos__hget_ll(cx, rc, bi, "stats", "invalid"),
              ctl = chaos__hget_ll(cx, rc, bi, "stats", "ctl"), fu = chaos__hget_ll(cx, rc, bi, "stats", "free_units"),
              pa = chaos__hget_ll(cx, rc, bi, "stats", "participants"),
              so = chaos__hget_ll(cx, rc, bi, "stats", "swap_offers"), w = chaos__hget_ll(cx, rc, bi, "stats", "waiting"),
              sg = chaos__hget_ll(cx, rc, bi, "stats", "staff_granted");
    k->rep->dead_entries += dd;
    k->rep->duplicates += du;
    k->rep->granted += g;
    k->rep->done += dn;
    k->rep->rejected += rj;
    k->rep->invalid += iv;
    if (d != p + dd + du)
        chaos__violation(cx, &k->rep->stats_errors, "%s: dequeued %lld != processed %lld + dead %lld + duplicates %lld",
                  n, d, p, dd, du);
    if (counts[6] != sg)   /* the granted assigns among the results */
        chaos__violation(cx, &k->rep->stats_errors, "%s: staff_granted %lld, but %lld assigns granted", n, sg, counts[6]);
    if (p + sg != g + dn + rj + iv + w + so)
        chaos__violation(cx, &k->rep->stats_errors, "%s: processed %lld + staff_granted %lld != granted %lld + done %lld + rejected %lld"
                  " + invalid %lld + waiting %lld + swap_offers %lld", n, p, sg, g, dn, rj, iv, w, so);
    /* every wait has ended by now (wait_ms): the waitlist (stats.waiting,
     * contract 9.5) is empty, only open swap offers (9.3) still wait */
    long long wl = KINT(k, bi, "HLEN alloc:{%s}:waitlist", n);
    if (w != 0 || wl != 0 || so != counts[5])
        chaos__violation(cx, &k->rep->stats_errors, "%s: stats.waiting %lld, waitlist %lld (want 0 and 0), swap_offers %lld,"
                  " waiting swap results %lld", n, w, wl, so, counts[5]);
    if (g != counts[1] + sg || dn != counts[2] || rj != counts[3] || iv != counts[4])
        chaos__violation(cx, &k->rep->stats_errors, "%s: stats granted/done/rejected/invalid %lld/%lld/%lld/%lld, results say %lld/%lld/%lld/%lld",
                  n, g, dn, rj, iv, counts[1] + sg, counts[2], counts[3], counts[4]);
    if (g != granted_results)
        chaos__violation(cx, &k->rep->stats_errors, "%s: stats.granted %lld, granted results %lld", n, g, granted_results);
    long long hlen = KINT(k, bi, "HLEN alloc:{%s}:results", n);
    if (hlen != p + ctl)   /* a granted assign is a ctl result (11.5) */
        chaos__violation(cx, &k->rep->stats_errors, "%s: %lld results but processed %lld + ctl %lld", n, hlen, p, ctl);
    if (fu != free_sum)
        chaos__violation(cx, &k->rep->stats_errors, "%s: stats.free_units %lld, sum of free %lld", n, fu, free_sum);
    long long dl = KINT(k, bi, "LLEN alloc:{%s}:dead", n);
    if (dl != dd)
        chaos__violation(cx, &k->rep->stats_errors, "%s: dead list has %lld entries, stats.dead %lld", n, dl, dd);
    if (dl < dead_acked || dl > dead_attempts)
        chaos__violation(cx, &k->rep->lost, "%s: dead list has %lld entries; %lld unreadable pushes were acknowledged (%lld sent)",
                  n, dl, dead_acked, dead_attempts);
    long long sp = KINT(k, bi, "LLEN alloc:{%s}:participants", n);
    if (pa != sp)
        chaos__violation(cx, &k->rep->stats_errors, "%s: stats.participants %lld, participants list %lld", n, pa, sp);
    const char *lists[] = { "queue", "ctl" };
    for (size_t i = 0; i < 2; i++) {
        long long l = KINT(k, bi, "LLEN alloc:{%s}:%s", n, lists[i]);
        if (l != 0) chaos__violation(cx, &k->rep->lost, "%s: %lld entries left in %s", n, l, lists[i]);
    }
}

/* CHAOS_TAMPER=N damages Redis just before the checks, to show that the
 * checker sees each kind of chaos__violation (a checker that passes everything
 * proves nothing): 1 free+1, 2 a second grant of a granted request, 3 a
 * result deleted, 4 a result nobody asked for, 5 a holder changed, 6 a
 * request left in the queue, 7 stats.processed+1, 8 a stock order over
 * per_user in the log, 9 a man's bed in a women's room of cr2 in the log
 * (only_X), 10 a drawn result of cr2 with other points (11.3). */
void chaos__tamper(chaos_ctx *cx)
{
    const char *t = getenv("CHAOS_TAMPER");
    if (!t || !*t) return;
    rconn c = { { NULL } };
    redisReply *r = NULL;
    const rec *g = NULL;
    const char *s1 = cx->b[B_CS1].name, *s2 = cx->b[B_CS2].name, *r1 = cx->b[B_CR1].name;
    uint16_t l1 = cx->bslot[B_CS1], l2 = cx->bslot[B_CS2], lr = cx->bslot[B_CR1];
    for (size_t i = 0; i < cx->prod[0].recs.n && !g; i++) {
        const rec *rc = &cx->prod[0].recs.v[i];
        if (rc->batch != B_CS1 || rc->expect != EXP_VALID || strcmp(rc->op, "buy")) continue;
        redisReply *gr = chaos__rcmd(cx, &c, l1, "HGET alloc:{%s}:results %s", s1, rc->id);
        if (gr && gr->type == REDIS_REPLY_STRING && strstr(gr->str, "\"granted\"")) g = rc;
        if (gr) freeReplyObject(gr);
    }
    switch (atoi(t)) {
    case 1: r = chaos__rcmd(cx, &c, l1, "HINCRBY alloc:{%s}:free sku1 1", s1); break;
    case 2:
        if (g) r = chaos__rcmd(cx, &c, l1, "XADD alloc:{%s}:log * type grant user %s item sku1 qty 1 order 42 req %s at 1",
                        s1, g->user, g->id);
        break;
    case 3: if (g) r = chaos__rcmd(cx, &c, l1, "HDEL alloc:{%s}:results %s", s1, g->id); break;
    case 4: r = chaos__rcmd(cx, &c, l1, "HSET alloc:{%s}:results nobody {\"id\":\"nobody\",\"status\":\"done\"}", s1); break;
    case 5: r = chaos__rcmd(cx, &c, lr, "HSET alloc:{%s}:holders s1 {\"item\":\"R002\",\"since\":1,\"req\":\"x\"}", r1); break;
    case 6: r = chaos__rcmd(cx, &c, l2, "RPUSH alloc:{%s}:queue {}", s2); break;
    case 7: r = chaos__rcmd(cx, &c, l2, "HINCRBY alloc:{%s}:stats processed 1", s2); break;
    case 8:
        r = chaos__rcmd(cx, &c, l1, "XADD alloc:{%s}:log * type grant user zz item sku4 qty 5 order 43 req p0-0 at 1", s1);
        break;
    case 9: case 10: chaos__rules_tamper(cx, &c, atoi(t)); break;
    }
    if (r) freeReplyObject(r);
    chaos__rc_close(&c);
}

void chaos__run_checks(chaos_ctx *cx)
{
    checker k = { .cx = cx, .rep = cx->rep };
    struct timeval tv = { 60, 0 };
    for (int i = 0; i < cx->n_nodes; i++) {
        if (!chaos__rc_node(cx, &k.rc, i)) {
            chaos__violation(cx, &cx->rep->other, "checker: cannot connect to Redis node %d", i);
            chaos__rc_close(&k.rc);
            return;
        }
        redisSetTimeout(k.rc.c[i], tv);
    }
    size_t total = cx->follower.recs.n + cx->admin.recs.n;
    for (int i = 0; i < cx->n_producers; i++) total += cx->prod[i].recs.n;
    idmap_init(&k.ids, total);
    producer *all[66];
    int n_all = 0;
    for (int i = 0; i < cx->n_producers && n_all < 64; i++) all[n_all++] = &cx->prod[i];
    all[n_all++] = &cx->follower;
    all[n_all++] = &cx->admin;
    for (int i = 0; i < n_all; i++)
        for (size_t j = 0; j < all[i]->recs.n; j++) {
            all[i]->recs.v[j].grant_item = -1;
            idmap_put(&k.ids, &all[i]->recs.v[j]);
        }
    cx->rep->distinct_ids = (long)total;
    for (int bi = 0; bi < NB; bi++) {
        long long counts[7] = { 0 }, granted = 0, free_sum = 0, dead_acked = 0, dead_attempts = 0;
        check_results(&k, bi, &granted, counts);
        const batch_def *b = &cx->b[bi];
        replay rp = { .k = &k, .b = b, .rules = chaos__rules_hist_new(cx, bi) };
        rp.cr = ctl_replay_new(b->room, b->per_user, replay_finding_seen, &rp);
        if (!rp.cr) { fprintf(stderr, "chaos: out of memory\n"); abort(); }
        ctl_replay_observe(rp.cr, replay_seen, &rp);
        for (int it = 0; it < b->n_items; it++) ctl_replay_capacity(rp.cr, b->items[it], b->caps[it]);
        replay_log(&k, &rp);
        compare_state(&k, &rp, &free_sum);
        ctl_replay_free(rp.cr);
        chaos__rules_hist_free(rp.rules);
        for (int i = 0; i < n_all; i++) {
            dead_acked += all[i]->k.dead_acked[bi];
            dead_attempts += all[i]->k.dead_attempts[bi];
        }
        check_stats(&k, bi, granted, counts, free_sum, dead_acked, dead_attempts);
    }
    for (int i = 0; i < n_all; i++)
        for (size_t j = 0; j < all[i]->recs.n; j++) {
            rec *rc = &all[i]->recs.v[j];
            if (!rc->seen) {
                chaos__violation(cx, &cx->rep->lost, "%s: '%s' was pushed (acknowledged) but has no result: %.160s",
                          cx->b[rc->batch].name, rc->id, rc->json);
                continue;
            }
            check_effects(&k, rc);
        }
    free(k.ids.slot);
    chaos__rc_close(&k.rc);
}
