/* ctl_replay.c -- see ctl_replay.h. Part of libctl.a, allocctl's
 * library in tools/allocctl/; the daemon does not link it.
 *
 * The replay itself is core/replay.c. The comparison renders each
 * replayed holding in the very format the daemon writes to P:{B}:holders
 * (jansson), so that it is a matter of normalising both sides and calling
 * json_equal(); an operator tool runs it once per batch.
 */
#include "allocctl/ctl_replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numtext.h"

struct ctl_replay {
    replay *core;
    ctl_event_fn on_event;
    void *event_ud;
    ctl_replay_counts counts;
};

#define finding(r, kind, ...) replay_finding((r)->core, kind, __VA_ARGS__)

static const char *const EV_NAMES[CTL_EV_N] = {
    "grant", "release", "confirm", "cancel", "expire", "capacity", "state", "wait",
    "wait_served", "other",
};

/* The core's type of each CTL_EV_ (the summary keeps its own order). */
static const int EV_TYPES[CTL_EV_N] = {
    EVENT_GRANT, EVENT_RELEASE, EVENT_CONFIRM, EVENT_CANCEL, EVENT_EXPIRE, EVENT_CAPACITY, EVENT_STATE, EVENT_WAIT,
    EVENT_WAIT_SERVED, REPLAY_TYPE_OTHER,
};

const char *ctl_event_name(int type)
{
    return type >= 0 && type < CTL_EV_N ? EV_NAMES[type] : "other";
}

ctl_replay *ctl_replay_new(int room, int64_t per_user, ctl_finding_fn fn, void *ud)
{
    ctl_replay *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->core = replay_new(room, per_user, fn, ud);
    if (!r->core) {
        free(r);
        return NULL;
    }
    return r;
}

void ctl_replay_free(ctl_replay *r)
{
    if (!r) return;
    replay_free(r->core);
    free(r);
}

void ctl_replay_observe(ctl_replay *r, ctl_event_fn fn, void *ud)
{
    r->on_event = fn;
    r->event_ud = ud;
}

static void out_of_memory(ctl_replay *r, const char *id)
{
    finding(r, REPLAY_BAD_ENTRY, "log %s: out of memory, the replay is incomplete", id);
}

void ctl_replay_capacity(ctl_replay *r, const char *item, int64_t cap)
{
    if (replay_capacity(r->core, item, cap) < 0) out_of_memory(r, "(capacity)");
}

const replay *ctl_replay_state(const ctl_replay *r)
{
    return r->core;
}

const ctl_replay_counts *ctl_replay_counts_get(ctl_replay *r)
{
    const replay_counts *c = replay_counts_get(r->core);
    r->counts.entries = c->events;
    for (int i = 0; i < CTL_EV_N; i++) r->counts.by_type[i] = c->by_type[EV_TYPES[i]];
    r->counts.findings = c->findings;
    return &r->counts;
}

/* ---- one entry -------------------------------------------------------------- */

typedef struct entry_ctx {
    ctl_replay *r;
    const char *id;
} entry_ctx;

static int replay_one(void *ud, const log_field *f, size_t n)
{
    entry_ctx *o = ud;
    replay_event ev;
    char err[160];
    if (log_entry_event(f, n, &ev, err, sizeof err) < 0) {
        finding(o->r, REPLAY_BAD_ENTRY, "log %s: %s", o->id, err);
        return 0;
    }
    if (o->r->on_event) o->r->on_event(o->r->event_ud, o->id, &ev);
    if (replay_apply(o->r->core, o->id, &ev) < 0) out_of_memory(o->r, o->id);
    return 0;
}

/* Both log formats through the one decoder (wire/log_entry.h): an
 * event-format entry is one event, a chunk entry all of its events. */
void ctl_replay_entry(ctl_replay *r, const char *id, const ctl_kv *fields, size_t n)
{
    entry_ctx o = { r, id };
    char err[160];
    if (log_entry_decode(fields, n, replay_one, &o, err, sizeof err) < 0)
        finding(r, REPLAY_BAD_ENTRY, "log %s: %s", id, err);
}

/* ---- the replayed holders as the daemon writes them ------------------------- */

static const char *state_name(int state)
{
    return state == ORDER_HELD ? "held" : "confirmed";
}

static json_t *room_json(const replay_user *u)
{
    json_t *doc = json_pack("{s:s, s:I, s:s}", "item", u->item, "since", (json_int_t)u->since,
                            "req", u->req ? u->req : "");
    if (doc && u->order) {   /* a held bed (contract 9.4) */
        json_object_set_new(doc, "order", json_string(u->order));
        json_object_set_new(doc, "state", json_string(state_name(u->state)));
        if (u->state == ORDER_HELD) json_object_set_new(doc, "expires_at", json_integer(u->expires_at));
    }
    return doc;
}

static json_t *stock_json(const replay_user *u)
{
    json_t *orders = json_array();
    for (size_t i = 0; orders && i < u->n_orders; i++) {
        const replay_order *o = &u->orders[i];
        json_t *j = json_pack("{s:s, s:s, s:I, s:s}", "order", o->order, "item", o->item,
                              "qty", (json_int_t)o->qty, "state", state_name(o->state));
        if (j && o->state == ORDER_HELD) json_object_set_new(j, "expires_at", json_integer(o->expires_at));
        json_array_append_new(orders, j);
    }
    return json_pack("{s:I, s:o}", "units", (json_int_t)u->units, "orders", orders);
}

json_t *ctl_replay_holder_json(const ctl_replay *r, const char *user)
{
    const replay_user *u = replay_user_get(r->core, user);
    if (!u || !replay_user_holds(u)) return NULL;
    return replay_is_room(r->core) ? room_json(u) : stock_json(u);
}

static char *compact(json_t *v)
{
    return v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
}

static int64_t map_get(json_t *m, const char *k)
{
    return json_integer_value(json_object_get(m, k));
}

static void map_set(json_t *m, const char *k, int64_t v)
{
    json_object_set_new(m, k, json_integer(v));
}

/* ---- the waitlist ------------------------------------------------------ */

/* The rebuilt waitlist against P:{B}:waitlist (same requests, same
 * tickets) and stats.waiting. */
static void check_waitlist(ctl_replay *r, const ctl_snapshot *s)
{
    json_t *seen = json_object();
    for (size_t i = 0; i < s->n_waitlist; i++) {
        const ctl_kv *kv = &s->waitlist[i];
        json_error_t jerr;
        json_t *doc = json_loadb(kv->val, kv->vlen, 0, &jerr);
        int64_t want = replay_wait_get(r->core, kv->key);
        json_t *no = json_object_get(doc, "no");
        if (!json_is_integer(no)) finding(r, REPLAY_MISMATCH, "waitlist[%s]: malformed", kv->key);
        else if (!want) finding(r, REPLAY_MISMATCH, "waitlist[%s]: on the waitlist, but the log says it is not", kv->key);
        else if (want != json_integer_value(no))
            finding(r, REPLAY_MISMATCH, "waitlist[%s]: ticket %" JSON_INTEGER_FORMAT ", the log says %" PRId64,
                    kv->key, json_integer_value(no), want);
        json_object_set_new(seen, kv->key, json_true());
        json_decref(doc);
    }
    int64_t no;
    const char *req;
    for (size_t i = 0; (req = replay_wait_at(r->core, i, &no)); i++)
        if (no && !json_object_get(seen, req))
            finding(r, REPLAY_MISMATCH, "waitlist: request '%s' (ticket %" PRId64 ") is waiting by the log, "
                    "but not in the waitlist", req, no);
    size_t waiting = replay_wait_count(r->core);
    if (s->has_waiting && s->waiting != (int64_t)waiting)
        finding(r, REPLAY_MISMATCH, "stats.waiting is %" PRId64 " but the log leaves %zu waiting", s->waiting, waiting);
    r->counts.waiting = waiting;
    json_decref(seen);
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
    int room = replay_is_room(r->core);
    json_t *a = want ? norm_holder(want, room) : NULL;
    json_t *b = have ? norm_holder(have, room) : NULL;
    if (!a || !b || !json_equal(a, b)) {
        char *ws = compact(want), *hs = compact(have);
        if (have && !b)
            finding(r, REPLAY_MISMATCH, "holders[%s]: malformed entry %s", user, hs);
        else
            finding(r, REPLAY_MISMATCH, "holders[%s]: the log gives %s, holders has %s", user,
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
            finding(r, REPLAY_MISMATCH, "holders[%s]: not a JSON object: %.*s", s->holders[i].key,
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
    for (size_t i = 0; i < replay_user_count(r->core); i++) {
        user = replay_user_at(r->core, i)->id;
        json_t *want = ctl_replay_holder_json(r, user), *have = json_object_get(actual, user);
        if (want && !json_is_null(have)) compare_user(r, user, want, have);
        json_decref(want);
    }
    json_object_foreach(actual, user, v) {
        const replay_user *u = replay_user_get(r->core, user);
        if (!json_is_null(v) && (!u || !replay_user_holds(u))) compare_user(r, user, NULL, v);
    }
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
            finding(r, REPLAY_MISMATCH, "holders[%s]: order %zu is malformed", user, i);
            continue;
        }
        if (!strcmp(st, "held") && !json_is_integer(json_object_get(o, "expires_at")))
            finding(r, REPLAY_MISMATCH, "holders[%s]: held order %zu has no expires_at", user, i);
        sum += qty;
        map_set(held_now, item, map_get(held_now, item) + qty);
    }
    int64_t units = map_get(doc, "units");
    if (units != sum)
        finding(r, REPLAY_MISMATCH, "holders[%s]: units is %" PRId64 " but the orders add up to %" PRId64,
                user, units, sum);
    if (units > replay_per_user(r->core))
        finding(r, REPLAY_OVERSOLD, "holders[%s]: %" PRId64 " units, per_user is %" PRId64, user, units,
                replay_per_user(r->core));
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
        if (replay_is_room(r->core) && item) map_set(held_now, item, map_get(held_now, item) + 1);
        else if (replay_is_room(r->core)) finding(r, REPLAY_MISMATCH, "holders[%s]: no room", user);
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
            finding(r, REPLAY_MISMATCH, "%s[%s]: '%s' is not an integer", what, kv[i].key, kv[i].val);
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
    const replay_item *it = replay_item_get(r->core, item);
    int64_t held = it ? it->held : 0, now = map_get(m->held_now, item);
    int64_t cap = json_integer_value(c), fr = json_integer_value(f);
    if (!c) { finding(r, REPLAY_MISMATCH, "capacity[%s]: missing, but the item is in use", item); return; }
    if (it && it->cap_known && it->cap != cap)
        finding(r, REPLAY_MISMATCH, "capacity[%s] is %" PRId64 " but the last capacity entry of the log says %"
                PRId64, item, cap, it->cap);
    /* with a capacity from the log, each grant was checked against it */
    if (it && !it->cap_known && it->max_held > cap)
        finding(r, REPLAY_OVERSOLD, "log: up to %" PRId64 " units of '%s' were held at once, capacity is %"
                PRId64, it->max_held, item, cap);
    if (!f) { finding(r, REPLAY_MISMATCH, "free[%s]: missing (capacity %" PRId64 ")", item, cap); return; }
    if (fr != cap - held)
        finding(r, REPLAY_MISMATCH, "free[%s] is %" PRId64 " but the log gives capacity %" PRId64
                " - held %" PRId64 " = %" PRId64, item, fr, cap, held, cap - held);
    if (fr < 0) finding(r, REPLAY_OVERSOLD, "free[%s] is negative: %" PRId64, item, fr);
    if (fr + now != cap)
        finding(r, REPLAY_OVERSOLD, "free[%s] + units held in holders = %" PRId64 " + %" PRId64 " = %" PRId64
                ", capacity is %" PRId64, item, fr, now, fr + now, cap);
}

static void check_items(ctl_replay *r, const ctl_snapshot *s, json_t *held_now)
{
    item_maps m = { kv_ints(r, "capacity", s->capacity, s->n_capacity),
                    kv_ints(r, "free", s->free, s->n_free), held_now };
    json_t *logged = json_object();
    for (size_t i = 0; i < replay_item_count(r->core); i++)
        json_object_set_new(logged, replay_item_at(r->core, i)->id, json_null());
    json_t *maps[] = { m.cap, m.free, logged, held_now };
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
        finding(r, REPLAY_MISMATCH, "stats.free_units is %" PRId64 " but free adds up to %" PRId64,
                s->free_units, sum);
    free(items);
    json_decref(acc);
    json_decref(logged);
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
    r->counts.users = replay_holding_count(r->core);
    r->counts.holders = s->n_holders;
    json_decref(held_now);
    json_decref(actual);
}
