/* ctl_replay.c -- see ctl_replay.h. Part of libctl.a, allocctl's
 * library in tools/allocctl/; the daemon does not link it.
 *
 * The rebuilt state is kept in jansson objects (user -> holder document in
 * the P:{B}:holders format, item -> units): an operator tool runs this once
 * per batch, and keeping the very format the daemon writes makes the
 * comparison a matter of normalising both sides and calling json_equal().
 */
#include "allocctl/ctl_replay.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "core/numtext.h"

struct ctl_replay {
    int room;
    int64_t per_user;
    ctl_finding_fn fn;
    void *ud;
    json_t *users;      /* user -> holder document, as the daemon writes it */
    json_t *held;       /* item -> units held */
    json_t *cap_log;    /* item -> capacity of its last `capacity` entry */
    json_t *seg_max;    /* item -> most units held at once since that entry */
    json_t *waiting;    /* request id -> ticket, from wait / wait_served */
    json_t *moving;     /* rooms: user -> {req, hold} between a switch's release and grant */
    ctl_replay_counts counts;
};

typedef struct entry {
    const char *id, *type, *user, *item, *order, *req;
    int64_t qty, at, expires_at, wait_no;
} entry;

static const char *const EV_NAMES[CTL_EV_N] = {
    "grant", "release", "confirm", "cancel", "expire", "capacity", "state", "wait",
    "wait_served", "other",
};

const char *ctl_event_name(int type)
{
    return type >= 0 && type < CTL_EV_N ? EV_NAMES[type] : "other";
}

static void finding(ctl_replay *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void finding(ctl_replay *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->counts.findings++;
    if (r->fn) r->fn(r->ud, msg);
}

void ctl_replay_finding(ctl_replay *r, const char *msg)
{
    finding(r, "%s", msg);
}

ctl_replay *ctl_replay_new(int room, int64_t per_user, ctl_finding_fn fn, void *ud)
{
    ctl_replay *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->room = room;
    r->per_user = per_user;
    r->fn = fn;
    r->ud = ud;
    r->users = json_object();
    r->held = json_object();
    r->cap_log = json_object();
    r->seg_max = json_object();
    r->waiting = json_object();
    r->moving = json_object();
    if (!r->users || !r->held || !r->cap_log || !r->seg_max || !r->waiting || !r->moving) {
        ctl_replay_free(r);
        return NULL;
    }
    return r;
}

void ctl_replay_free(ctl_replay *r)
{
    if (!r) return;
    json_decref(r->users);
    json_decref(r->held);
    json_decref(r->cap_log);
    json_decref(r->seg_max);
    json_decref(r->waiting);
    json_decref(r->moving);
    free(r);
}

const ctl_replay_counts *ctl_replay_counts_get(const ctl_replay *r)
{
    return &r->counts;
}

/* ---- small helpers ----------------------------------------------------- */

static int64_t map_get(json_t *m, const char *k)
{
    return json_integer_value(json_object_get(m, k));
}

static void map_set(json_t *m, const char *k, int64_t v)
{
    json_object_set_new(m, k, json_integer(v));
}

static char *compact(json_t *v)
{
    return v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
}

/* ---- reading one entry -------------------------------------------------- */

static const char *field(const ctl_kv *f, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(f[i].key, name) == 0) return f[i].val;
    return "";
}

static int entry_int(ctl_replay *r, const entry *e, const ctl_kv *f, size_t n,
                     const char *name, int64_t *out)
{
    const char *s = field(f, n, name);
    *out = 0;
    if (!*s || numtext_parse_i64(s, out) == 0) return 0;
    finding(r, "log %s: field %s '%s' is not an integer", e->id, name, s);
    return -1;
}

static int entry_type(const char *t)
{
    for (int i = 0; i < CTL_EV_OTHER; i++)
        if (strcmp(t, EV_NAMES[i]) == 0) return i;
    return CTL_EV_OTHER;
}

static int entry_read(ctl_replay *r, entry *e, const char *id, const ctl_kv *f, size_t n)
{
    e->id = id;
    e->type = field(f, n, "type");
    e->user = field(f, n, "user");
    e->item = field(f, n, "item");
    e->order = field(f, n, "order");
    e->req = field(f, n, "req");
    int bad = entry_int(r, e, f, n, "qty", &e->qty) |
              entry_int(r, e, f, n, "at", &e->at) |
              entry_int(r, e, f, n, "expires_at", &e->expires_at) |
              entry_int(r, e, f, n, "wait_no", &e->wait_no);
    return bad ? -1 : 0;
}

/* ---- units per item ----------------------------------------------------- */

static void held_add(ctl_replay *r, const entry *e, const char *item, int64_t d)
{
    int64_t h = map_get(r->held, item) + d;
    map_set(r->held, item, h);
    if (h < 0)
        finding(r, "log %s: item '%s' would have %" PRId64 " units held", e->id, item, h);
    if (h > map_get(r->seg_max, item)) map_set(r->seg_max, item, h);
}

static void on_capacity(ctl_replay *r, const entry *e)
{
    json_t *prev = json_object_get(r->cap_log, e->item);
    int64_t most = map_get(r->seg_max, e->item), held = map_get(r->held, e->item);
    if (prev && most > json_integer_value(prev))
        finding(r, "log %s: item '%s' had %" PRId64 " units held at once while its "
                "capacity was %" PRId64, e->id, e->item, most, (int64_t)json_integer_value(prev));
    if (held > e->qty)
        finding(r, "log %s: capacity of '%s' set to %" PRId64 " below the %" PRId64
                " units held", e->id, e->item, e->qty, held);
    map_set(r->cap_log, e->item, e->qty);
    map_set(r->seg_max, e->item, held);
}

/* ---- rooms ----------------------------------------------------------------- */

static void room_grant(ctl_replay *r, const entry *e)
{
    json_t *u = json_object_get(r->users, e->user);
    if (u) {
        const char *old = json_string_value(json_object_get(u, "item"));
        finding(r, "log %s: grant of '%s' to '%s', who already holds a bed in '%s'",
                e->id, e->item, e->user, old ? old : "?");
        if (old) held_add(r, e, old, -1);
    }
    json_t *doc = json_pack("{s:s, s:I, s:s}", "item", e->item, "since", (json_int_t)e->at,
                            "req", e->req);
    json_t *mv = json_object_get(r->moving, e->user);
    if (*e->order) {   /* a held bed (contract 9.4) */
        json_object_set_new(doc, "order", json_string(e->order));
        json_object_set_new(doc, "state", json_string("held"));
        json_object_set_new(doc, "expires_at", json_integer(e->expires_at));
    } else if (mv && !strcmp(json_string_value(json_object_get(mv, "req")), e->req)) {
        /* the grant of a switch: the hold moves with the bed */
        const char *k[] = { "order", "state", "expires_at" };
        for (int i = 0; i < 3; i++)
            if (json_object_get(mv, k[i])) json_object_set(doc, k[i], json_object_get(mv, k[i]));
    }
    json_object_del(r->moving, e->user);
    json_object_set_new(r->users, e->user, doc);
    held_add(r, e, e->item, 1);
}

static void room_release(ctl_replay *r, const entry *e)
{
    json_t *u = json_object_get(r->users, e->user);
    const char *old = json_string_value(json_object_get(u, "item"));
    if (!old) {
        finding(r, "log %s: release of '%s' by '%s', who holds no bed", e->id,
                e->item, e->user);
        return;
    }
    if (strcmp(old, e->item))
        finding(r, "log %s: release of '%s' by '%s', whose bed is in '%s'", e->id,
                e->item, e->user, old);
    held_add(r, e, old, -1);
    json_object_set_new(u, "req", json_string(e->req));   /* remembered for a switch's grant */
    json_object_set(r->moving, e->user, u);
    json_object_del(r->users, e->user);
}

/* confirm, cancel and expire of a held bed (rooms with hold_ms). */
static void room_order(ctl_replay *r, const entry *e, int type)
{
    json_t *u = json_object_get(r->users, e->user);
    const char *order = json_string_value(json_object_get(u, "order"));
    if (!order || strcmp(order, e->order)) {
        finding(r, "log %s: %s of order '%s', which '%s' does not hold", e->id, e->type,
                e->order, e->user);
        return;
    }
    if (type == CTL_EV_CONFIRM) {
        json_object_set_new(u, "state", json_string("confirmed"));
        json_object_del(u, "expires_at");
        return;
    }
    if (type == CTL_EV_EXPIRE && strcmp(json_string_value(json_object_get(u, "state")), "held"))
        finding(r, "log %s: expiry of order '%s', which was confirmed", e->id, e->order);
    held_add(r, e, json_string_value(json_object_get(u, "item")), -1);
    json_object_del(r->users, e->user);
}

/* ---- stock -------------------------------------------------------------- */

static json_t *order_find(json_t *u, const char *order, size_t *index)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(u, "orders"), i, o) {
        if (strcmp(json_string_value(json_object_get(o, "order")), order) == 0) {
            if (index) *index = i;
            return o;
        }
    }
    return NULL;
}

static void stock_grant(ctl_replay *r, const entry *e)
{
    json_t *u = json_object_get(r->users, e->user);
    if (!u) {
        u = json_pack("{s:I, s:[]}", "units", (json_int_t)0, "orders");
        json_object_set_new(r->users, e->user, u);
    }
    if (!*e->order || order_find(u, e->order, NULL))
        finding(r, "log %s: grant with a missing or repeated order id '%s'", e->id, e->order);
    if (e->qty < 1)
        finding(r, "log %s: grant of %" PRId64 " units", e->id, e->qty);
    json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "order", e->order, "item", e->item,
                          "qty", (json_int_t)e->qty, "state",
                          e->expires_at ? "held" : "confirmed");
    if (e->expires_at) json_object_set_new(o, "expires_at", json_integer(e->expires_at));
    json_array_append_new(json_object_get(u, "orders"), o);
    int64_t units = map_get(u, "units") + e->qty;
    map_set(u, "units", units);
    held_add(r, e, e->item, e->qty);
    if (units > r->per_user)
        finding(r, "log %s: '%s' holds %" PRId64 " units, per_user is %" PRId64,
                e->id, e->user, units, r->per_user);
}

static json_t *live_order(ctl_replay *r, const entry *e, size_t *index)
{
    json_t *o = order_find(json_object_get(r->users, e->user), e->order, index);
    if (!o) {
        finding(r, "log %s: %s of order '%s', which '%s' does not hold", e->id,
                e->type, e->order, e->user);
        return NULL;
    }
    if (map_get(o, "qty") != e->qty ||
        strcmp(json_string_value(json_object_get(o, "item")), e->item))
        finding(r, "log %s: %s of order '%s' names %" PRId64 " x '%s', the grant said %"
                PRId64 " x '%s'", e->id, e->type, e->order, e->qty, e->item,
                map_get(o, "qty"), json_string_value(json_object_get(o, "item")));
    return o;
}

static void stock_confirm(ctl_replay *r, const entry *e)
{
    json_t *o = live_order(r, e, NULL);
    if (!o) return;
    if (strcmp(json_string_value(json_object_get(o, "state")), "held"))
        finding(r, "log %s: confirm of order '%s', which is not held", e->id, e->order);
    json_object_set_new(o, "state", json_string("confirmed"));
    json_object_del(o, "expires_at");
}

/* cancel and expire: the order leaves the list and its units return. */
static void stock_end(ctl_replay *r, const entry *e)
{
    size_t index;
    json_t *o = live_order(r, e, &index);
    if (!o) return;
    json_t *u = json_object_get(r->users, e->user);
    int64_t qty = map_get(o, "qty");
    held_add(r, e, json_string_value(json_object_get(o, "item")), -qty);
    if (e->type[0] == 'e' && strcmp(json_string_value(json_object_get(o, "state")), "held"))
        finding(r, "log %s: expiry of order '%s', which was confirmed", e->id, e->order);
    json_array_remove(json_object_get(u, "orders"), index);
    map_set(u, "units", map_get(u, "units") - qty);
    if (json_array_size(json_object_get(u, "orders")) == 0)
        json_object_del(r->users, e->user);
}

/* ---- one entry ----------------------------------------------------------- */

/* ---- the waitlist ------------------------------------------------------ */

/* wait puts a request on the waitlist with its ticket, wait_served takes
 * it off (its grant, if any, is a grant entry of its own). */
static void on_wait(ctl_replay *r, const entry *e, int join)
{
    json_t *have = json_object_get(r->waiting, e->req);
    if (join) {
        if (have) finding(r, "log %s: request '%s' joins the waitlist twice", e->id, e->req);
        else if (e->wait_no < 1) finding(r, "log %s: wait entry without a wait_no", e->id);
        else json_object_set_new(r->waiting, e->req, json_integer(e->wait_no));
        return;
    }
    if (!have) finding(r, "log %s: request '%s' served from the waitlist but not on it", e->id, e->req);
    else json_object_del(r->waiting, e->req);
}

/* The rebuilt waitlist against P:{B}:waitlist (same requests, same
 * tickets) and stats.waiting. */
static void check_waitlist(ctl_replay *r, const ctl_snapshot *s)
{
    json_t *seen = json_object();
    for (size_t i = 0; i < s->n_waitlist; i++) {
        const ctl_kv *kv = &s->waitlist[i];
        json_error_t jerr;
        json_t *doc = json_loadb(kv->val, kv->vlen, 0, &jerr);
        json_t *want = json_object_get(r->waiting, kv->key);
        json_t *no = json_object_get(doc, "no");
        if (!json_is_integer(no)) finding(r, "waitlist[%s]: malformed", kv->key);
        else if (!want) finding(r, "waitlist[%s]: on the waitlist, but the log says it is not", kv->key);
        else if (json_integer_value(want) != json_integer_value(no))
            finding(r, "waitlist[%s]: ticket %" JSON_INTEGER_FORMAT ", the log says %" JSON_INTEGER_FORMAT,
                    kv->key, json_integer_value(no), json_integer_value(want));
        json_object_set_new(seen, kv->key, json_true());
        json_decref(doc);
    }
    const char *req;
    json_t *v;
    json_object_foreach(r->waiting, req, v)
        if (!json_object_get(seen, req))
            finding(r, "waitlist: request '%s' (ticket %" JSON_INTEGER_FORMAT ") is waiting by the log, "
                    "but not in the waitlist", req, json_integer_value(v));
    if (s->has_waiting && s->waiting != (int64_t)json_object_size(r->waiting))
        finding(r, "stats.waiting is %" PRId64 " but the log leaves %zu waiting", s->waiting,
                json_object_size(r->waiting));
    r->counts.waiting = json_object_size(r->waiting);
    json_decref(seen);
}

void ctl_replay_entry(ctl_replay *r, const char *id, const ctl_kv *fields, size_t n)
{
    entry e;
    r->counts.entries++;
    int bad = entry_read(r, &e, id, fields, n);
    int type = entry_type(e.type);
    r->counts.by_type[type]++;
    if (bad) return;
    if (type == CTL_EV_OTHER) { finding(r, "log %s: unknown type '%s'", id, e.type); return; }
    /* confirm, cancel, expire: rooms too, with hold_ms (contract 9.4) */
    switch (type) {
    case CTL_EV_GRANT:    if (r->room) room_grant(r, &e); else stock_grant(r, &e); break;
    case CTL_EV_RELEASE:
        if (r->room) room_release(r, &e);
        else finding(r, "log %s: a release entry in a stock batch", id);
        break;
    case CTL_EV_CONFIRM:
    case CTL_EV_CANCEL:
    case CTL_EV_EXPIRE:
        if (r->room) room_order(r, &e, type);
        else if (type == CTL_EV_CONFIRM) stock_confirm(r, &e);
        else stock_end(r, &e);
        break;
    case CTL_EV_CAPACITY: on_capacity(r, &e); break;
    case CTL_EV_WAIT:
    case CTL_EV_WAIT_SERVED: on_wait(r, &e, type == CTL_EV_WAIT); break;
    default:              break;      /* state: no effect on holdings */
    }
}

/* ---- comparing holders ------------------------------------------------- */

static json_t *norm_orders(json_t *orders)
{
    json_t *out = json_object();
    size_t i;
    json_t *o;
    json_array_foreach(orders, i, o) {
        json_t *id = json_object_get(o, "order"), *st = json_object_get(o, "state");
        char num[32];
        const char *key = json_string_value(id);
        if (json_is_integer(id)) {
            snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
            key = num;
        }
        if (!key || !json_is_string(st) || !json_is_string(json_object_get(o, "item")) ||
            !json_is_integer(json_object_get(o, "qty"))) {
            json_decref(out);
            return NULL;
        }
        json_t *n = json_pack("{s:O, s:O, s:O}", "item", json_object_get(o, "item"),
                              "qty", json_object_get(o, "qty"), "state", st);
        if (!strcmp(json_string_value(st), "held"))
            json_object_set(n, "expires_at", json_object_get(o, "expires_at"));
        json_object_set_new(out, key, n);
    }
    return out;
}

/* The comparable form of a holder document, or NULL when malformed:
 * rooms item/since/req; stock units and the orders keyed by order id. */
static json_t *norm_holder(json_t *doc, int room)
{
    if (room) {
        json_t *req = json_object_get(doc, "req"), *since = json_object_get(doc, "since");
        if (!json_is_string(json_object_get(doc, "item"))) return NULL;
        json_t *n = json_pack("{s:O, s:o, s:o}", "item", json_object_get(doc, "item"),
                              "since", since ? json_incref(since) : json_null(),
                              "req", req ? json_incref(req) : json_string(""));
        const char *k[] = { "order", "state", "expires_at" };   /* a held bed */
        for (int i = 0; n && i < 3; i++)
            if (json_object_get(doc, k[i])) json_object_set(n, k[i], json_object_get(doc, k[i]));
        return n;
    }
    if (!json_is_integer(json_object_get(doc, "units")) ||
        !json_is_array(json_object_get(doc, "orders")))
        return NULL;
    json_t *orders = norm_orders(json_object_get(doc, "orders"));
    if (!orders) return NULL;
    return json_pack("{s:O, s:o}", "units", json_object_get(doc, "units"), "orders", orders);
}

static void compare_user(ctl_replay *r, const char *user, json_t *want, json_t *have)
{
    json_t *a = want ? norm_holder(want, r->room) : NULL;
    json_t *b = have ? norm_holder(have, r->room) : NULL;
    if (!a || !b || !json_equal(a, b)) {
        char *ws = compact(want), *hs = compact(have);
        if (have && !b)
            finding(r, "holders[%s]: malformed entry %s", user, hs);
        else
            finding(r, "holders[%s]: the log gives %s, holders has %s", user,
                    ws ? ws : "nothing", hs ? hs : "nothing");
        free(ws);
        free(hs);
    }
    json_decref(a);
    json_decref(b);
}

static json_t *load_actual(ctl_replay *r, const ctl_snapshot *s)
{
    json_t *all = json_object();
    for (size_t i = 0; i < s->n_holders; i++) {
        json_error_t je;
        json_t *doc = json_loadb(s->holders[i].val, s->holders[i].vlen, 0, &je);
        if (!json_is_object(doc)) {
            finding(r, "holders[%s]: not a JSON object: %.*s", s->holders[i].key,
                    (int)(s->holders[i].vlen > 200 ? 200 : s->holders[i].vlen),
                    s->holders[i].val);
            json_decref(doc);
            doc = json_null();
        }
        json_object_set_new(all, s->holders[i].key, doc);
    }
    return all;
}

static void compare_holders(ctl_replay *r, json_t *actual)
{
    const char *user;
    json_t *v;
    json_object_foreach(r->users, user, v) {
        json_t *have = json_object_get(actual, user);
        if (!json_is_null(have)) compare_user(r, user, v, have);
    }
    json_object_foreach(actual, user, v)
        if (!json_is_null(v) && !json_object_get(r->users, user))
            compare_user(r, user, NULL, v);
}

/* ---- invariants of the holders as they are ------------------------------ */

static void check_stock_holder(ctl_replay *r, const char *user, json_t *doc,
                               json_t *held_now)
{
    int64_t sum = 0;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(doc, "orders"), i, o) {
        const char *item = json_string_value(json_object_get(o, "item"));
        int64_t qty = map_get(o, "qty");
        const char *st = json_string_value(json_object_get(o, "state"));
        if (!item || qty < 1 || !st || (strcmp(st, "held") && strcmp(st, "confirmed"))) {
            finding(r, "holders[%s]: order %zu is malformed", user, i);
            continue;
        }
        if (!strcmp(st, "held") && !json_is_integer(json_object_get(o, "expires_at")))
            finding(r, "holders[%s]: held order %zu has no expires_at", user, i);
        sum += qty;
        map_set(held_now, item, map_get(held_now, item) + qty);
    }
    int64_t units = map_get(doc, "units");
    if (units != sum)
        finding(r, "holders[%s]: units is %" PRId64 " but the orders add up to %" PRId64,
                user, units, sum);
    if (units > r->per_user)
        finding(r, "holders[%s]: %" PRId64 " units, per_user is %" PRId64, user, units,
                r->per_user);
}

/* Units held per item according to the holders hash itself. */
static json_t *check_actual(ctl_replay *r, json_t *actual)
{
    json_t *held_now = json_object();
    const char *user;
    json_t *doc;
    json_object_foreach(actual, user, doc) {
        if (!json_is_object(doc)) continue;
        const char *item = json_string_value(json_object_get(doc, "item"));
        if (r->room && item) map_set(held_now, item, map_get(held_now, item) + 1);
        else if (r->room) finding(r, "holders[%s]: no room", user);
        else check_stock_holder(r, user, doc, held_now);
    }
    return held_now;
}

/* ---- items ----------------------------------------------------------------- */

static json_t *kv_ints(ctl_replay *r, const char *what, const ctl_kv *kv, size_t n)
{
    json_t *m = json_object();
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        if (numtext_parse_i64(kv[i].val, &v) < 0) {
            finding(r, "%s[%s]: '%s' is not an integer", what, kv[i].key, kv[i].val);
            continue;
        }
        map_set(m, kv[i].key, v);
    }
    return m;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every item named anywhere, sorted. */
static const char **all_items(json_t *const maps[], size_t nmaps, json_t *acc, size_t *n)
{
    const char *k;
    json_t *v;
    for (size_t i = 0; i < nmaps; i++)
        json_object_foreach(maps[i], k, v) json_object_set(acc, k, json_null());
    *n = json_object_size(acc);
    const char **keys = calloc(*n ? *n : 1, sizeof *keys);
    size_t j = 0;
    if (keys) json_object_foreach(acc, k, v) keys[j++] = k;
    if (keys) qsort(keys, *n, sizeof *keys, cmp_str);
    return keys;
}

typedef struct item_maps { json_t *cap, *free, *held_now; } item_maps;

static void check_item(ctl_replay *r, const char *item, const item_maps *m)
{
    json_t *c = json_object_get(m->cap, item), *f = json_object_get(m->free, item);
    int64_t held = map_get(r->held, item), now = map_get(m->held_now, item);
    int64_t cap = json_integer_value(c), fr = json_integer_value(f);
    json_t *last = json_object_get(r->cap_log, item);
    if (!c) { finding(r, "capacity[%s]: missing, but the item is in use", item); return; }
    if (last && json_integer_value(last) != cap)
        finding(r, "capacity[%s] is %" PRId64 " but the last capacity entry of the log says %"
                JSON_INTEGER_FORMAT, item, cap, json_integer_value(last));
    if (map_get(r->seg_max, item) > cap)
        finding(r, "log: up to %" PRId64 " units of '%s' were held at once, capacity is %"
                PRId64, map_get(r->seg_max, item), item, cap);
    if (!f) { finding(r, "free[%s]: missing (capacity %" PRId64 ")", item, cap); return; }
    if (fr != cap - held)
        finding(r, "free[%s] is %" PRId64 " but the log gives capacity %" PRId64
                " - held %" PRId64 " = %" PRId64, item, fr, cap, held, cap - held);
    if (fr < 0) finding(r, "free[%s] is negative: %" PRId64, item, fr);
    if (fr + now != cap)
        finding(r, "free[%s] + units held in holders = %" PRId64 " + %" PRId64 " = %" PRId64
                ", capacity is %" PRId64, item, fr, now, fr + now, cap);
}

static void check_items(ctl_replay *r, const ctl_snapshot *s, json_t *held_now)
{
    item_maps m = { kv_ints(r, "capacity", s->capacity, s->n_capacity),
                    kv_ints(r, "free", s->free, s->n_free), held_now };
    json_t *maps[] = { m.cap, m.free, r->held, held_now, r->cap_log };
    json_t *acc = json_object();
    size_t n = 0;
    const char **items = all_items(maps, sizeof maps / sizeof maps[0], acc, &n);
    for (size_t i = 0; items && i < n; i++) check_item(r, items[i], &m);
    r->counts.items = n;
    int64_t sum = 0;
    const char *k;
    json_t *v;
    json_object_foreach(m.free, k, v) sum += json_integer_value(v);
    if (s->has_free_units && s->free_units != sum)
        finding(r, "stats.free_units is %" PRId64 " but free adds up to %" PRId64,
                s->free_units, sum);
    free(items);
    json_decref(acc);
    json_decref(m.cap);
    json_decref(m.free);
}

void ctl_replay_finish(ctl_replay *r, const ctl_snapshot *s)
{
    json_t *actual = load_actual(r, s);
    compare_holders(r, actual);
    json_t *held_now = check_actual(r, actual);
    check_items(r, s, held_now);
    check_waitlist(r, s);
    r->counts.users = json_object_size(r->users);
    r->counts.holders = s->n_holders;
    json_decref(held_now);
    json_decref(actual);
}
