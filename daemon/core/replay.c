/* replay.c -- see replay.h; the rules are listed in docs/ALLOCCTL.md.
 *
 * Users, items and waitlist tickets each live in a table: a realloc'd
 * array of records (the id first) and a strmap from id to index. Records
 * are never removed -- a user who gives back everything keeps a record
 * that holds nothing -- so the map needs no deletion, as in the engine.
 */
#include "core/replay.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "core/strmap.h"
#include "core/vec.h"

typedef struct replay_wait {
    char *id;               /* the request */
    int64_t no;             /* its ticket; 0 once served */
} replay_wait;

/* Records whose first member is their id (char *). */
typedef struct table {
    void *v;
    size_t n, cap, elem;
    strmap map;
} table;

struct replay {
    int room;
    int64_t per_user;
    replay_finding_fn fn;
    void *ud;
    table users, items, waits;
    size_t waiting, holding;
    replay_counts counts;
};

#define REPLAY_MAP_SEED 0x7265706c6179ULL   /* ids from a log already written */

/* ---- tables --------------------------------------------------------------- */

static void *replay__rec(const table *t, size_t i)
{
    return (char *)t->v + i * t->elem;
}

static const char *replay__key(const void *ctx, uint32_t idx)
{
    return *(char *const *)replay__rec(ctx, idx);
}

static void replay__table_init(table *t, size_t elem)
{
    memset(t, 0, sizeof *t);
    t->elem = elem;
    strmap_init(&t->map, REPLAY_MAP_SEED, replay__key, t);
}

static void *replay__find(const table *t, const char *id)
{
    uint32_t i = strmap_find(&t->map, id);
    return i == STRMAP_NONE ? NULL : replay__rec(t, i);
}

/* The record of id, added (zeroed, with its id) when new; NULL without memory. */
static void *replay__get(table *t, const char *id)
{
    void *rec = replay__find(t, id);
    if (rec) return rec;
    char *copy = strdup(id);
    if (!copy || t->n >= STRMAP_NONE - 1 || vec_reserve(&t->v, &t->cap, t->n + 1, t->elem) < 0) {
        free(copy);
        return NULL;
    }
    rec = replay__rec(t, t->n);
    memset(rec, 0, t->elem);
    *(char **)rec = copy;
    if (strmap_insert(&t->map, copy, (uint32_t)t->n) < 0) {
        free(copy);
        return NULL;
    }
    t->n++;
    return rec;
}

/* ---- lifecycle ------------------------------------------------------------ */

replay *replay_new(int room, int64_t per_user, replay_finding_fn fn, void *ud)
{
    replay *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->room = room;
    r->per_user = per_user;
    r->fn = fn;
    r->ud = ud;
    replay__table_init(&r->users, sizeof(replay_user));
    replay__table_init(&r->items, sizeof(replay_item));
    replay__table_init(&r->waits, sizeof(replay_wait));
    return r;
}

static void replay__order_clear(replay_order *o)
{
    free(o->order);
    free(o->item);
    free(o->by);
}

static void replay__user_clear(replay_user *u)
{
    free(u->item);
    free(u->req);
    free(u->order);
    free(u->by);
    free(u->moving_req);
    free(u->moving_order);
    for (size_t i = 0; i < u->n_orders; i++) replay__order_clear(&u->orders[i]);
    free(u->orders);
}

void replay_free(replay *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->users.n; i++) {
        replay_user *u = replay__rec(&r->users, i);
        replay__user_clear(u);
        free(u->id);
    }
    for (size_t i = 0; i < r->items.n; i++) free(((replay_item *)replay__rec(&r->items, i))->id);
    for (size_t i = 0; i < r->waits.n; i++) free(((replay_wait *)replay__rec(&r->waits, i))->id);
    free(r->users.v);
    free(r->items.v);
    free(r->waits.v);
    strmap_free(&r->users.map);
    strmap_free(&r->items.map);
    strmap_free(&r->waits.map);
    free(r);
}

void replay_finding(replay *r, replay_kind kind, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->counts.findings++;
    if (r->fn) r->fn(r->ud, kind, msg);
}

/* ---- units per item -------------------------------------------------------- */

static void replay__held(replay *r, const char *id, replay_item *it, int64_t d)
{
    it->held += d;
    if (it->held < 0)
        replay_finding(r, REPLAY_OVERSOLD, "log %s: item '%s' would have %" PRId64 " units held",
                       id, it->id, it->held);
    if (it->held > it->max_held) it->max_held = it->held;
    if (d > 0 && it->cap_known && it->held > it->cap)
        replay_finding(r, REPLAY_OVERSOLD, "log %s: %" PRId64 " units of '%s' held, its capacity is %"
                       PRId64, id, it->held, it->id, it->cap);
}

int replay_capacity(replay *r, const char *item, int64_t cap)
{
    replay_item *it = replay__get(&r->items, item);
    if (!it) return -ENOMEM;
    it->cap = cap;
    it->cap_known = 1;
    it->max_held = it->held;
    return 0;
}

static int replay__on_capacity(replay *r, const char *id, const replay_event *e)
{
    replay_item *it = replay__get(&r->items, e->item);
    if (!it) return -ENOMEM;
    if (it->held > e->qty)
        replay_finding(r, REPLAY_OVERSOLD, "log %s: capacity of '%s' set to %" PRId64 " below the %"
                       PRId64 " units held", id, e->item, e->qty, it->held);
    return replay_capacity(r, e->item, e->qty);
}

/* ---- strings kept ------------------------------------------------------------ */

/* *dst = a copy of src, NULL for "". 0 or -ENOMEM. */
static int replay__set(char **dst, const char *src)
{
    char *copy = src && *src ? strdup(src) : NULL;
    if (src && *src && !copy) return -ENOMEM;
    free(*dst);
    *dst = copy;
    return 0;
}

static const char *replay__str(const char *s)
{
    return s ? s : "";
}

/* ---- rooms ------------------------------------------------------------------ */

static void replay__bed_clear(replay_user *u)
{
    free(u->item);
    free(u->req);
    free(u->order);
    free(u->by);
    u->item = u->req = u->order = u->by = NULL;
    u->state = 0;
    u->since = u->expires_at = 0;
}

/* The hold a grant's bed carries: its own order (a held bed, contract
 * 9.4), or for a switch's grant (the same request as the release before
 * it) the hold of the bed it left. */
static int replay__bed_hold(replay_user *u, const replay_event *e)
{
    if (*e->order) {
        if (replay__set(&u->order, e->order) < 0) return -ENOMEM;
        u->state = ORDER_HELD;
        u->expires_at = e->expires_at;
    } else if (u->moving && u->moving_req && !strcmp(u->moving_req, e->req)) {
        u->order = u->moving_order;
        u->moving_order = NULL;
        u->state = u->moving_state;
        u->expires_at = u->moving_expires_at;
    }
    u->moving = 0;
    free(u->moving_req);
    free(u->moving_order);
    u->moving_req = u->moving_order = NULL;
    return 0;
}

static int replay__room_grant(replay *r, const char *id, const replay_event *e, replay_user *u)
{
    replay_item *it = replay__get(&r->items, e->item);
    if (!it) return -ENOMEM;
    if (u->item) {
        replay_finding(r, REPLAY_OVERSOLD, "log %s: grant of '%s' to '%s', who already holds a bed in '%s'",
                       id, e->item, e->user, u->item);
        replay_item *old = replay__get(&r->items, u->item);
        if (!old) return -ENOMEM;
        replay__held(r, id, old, -1);
        replay__bed_clear(u);
    }
    if (replay__set(&u->item, e->item) < 0 || replay__set(&u->req, e->req) < 0 ||
        replay__set(&u->by, e->by) < 0 || replay__bed_hold(u, e) < 0)
        return -ENOMEM;
    u->since = e->at;
    replay__held(r, id, it, 1);
    return 0;
}

/* A bed given back: kept aside, with its hold, for a switch's grant. */
static int replay__room_release(replay *r, const char *id, const replay_event *e, replay_user *u)
{
    if (!u->item) {
        replay_finding(r, REPLAY_MISMATCH, "log %s: release of '%s' by '%s', who holds no bed", id,
                       e->item, e->user);
        return 0;
    }
    if (strcmp(u->item, e->item))
        replay_finding(r, REPLAY_MISMATCH, "log %s: release of '%s' by '%s', whose bed is in '%s'", id,
                       e->item, e->user, u->item);
    replay_item *it = replay__get(&r->items, u->item);
    if (!it) return -ENOMEM;
    replay__held(r, id, it, -1);
    free(u->moving_req);
    free(u->moving_order);
    u->moving = 1;
    u->moving_req = NULL;
    if (replay__set(&u->moving_req, e->req) < 0) return -ENOMEM;
    u->moving_order = u->order;
    u->order = NULL;
    u->moving_state = u->state;
    u->moving_expires_at = u->expires_at;
    replay__bed_clear(u);
    return 0;
}

/* confirm, cancel and expire of a held bed (rooms with hold_ms). */
static int replay__room_order(replay *r, const char *id, const replay_event *e, replay_user *u)
{
    if (!u->order || strcmp(u->order, e->order) || (*e->item && strcmp(u->item, e->item))) {
        replay_finding(r, REPLAY_MISMATCH, "log %s: %s of order '%s', which '%s' does not hold", id,
                       e->type_name, e->order, e->user);
        return 0;
    }
    if (e->type != EVENT_CANCEL && u->state != ORDER_HELD)
        replay_finding(r, REPLAY_MISMATCH, "log %s: %s of order '%s', which was confirmed", id,
                       e->type_name, e->order);
    if (e->type == EVENT_CONFIRM) {
        u->state = ORDER_CONFIRMED;
        u->expires_at = 0;
        return 0;
    }
    replay_item *it = replay__get(&r->items, u->item);
    if (!it) return -ENOMEM;
    replay__held(r, id, it, -1);
    replay__bed_clear(u);
    return 0;
}

/* ---- stock ------------------------------------------------------------------ */

static replay_order *replay__order_find(replay_user *u, const char *order, size_t *index)
{
    for (size_t i = 0; i < u->n_orders; i++)
        if (!strcmp(u->orders[i].order, order)) {
            if (index) *index = i;
            return &u->orders[i];
        }
    return NULL;
}

static int replay__stock_grant(replay *r, const char *id, const replay_event *e, replay_user *u)
{
    replay_item *it = replay__get(&r->items, e->item);
    if (!it || vec_reserve((void **)&u->orders, &u->cap_orders, u->n_orders + 1, sizeof *u->orders) < 0)
        return -ENOMEM;
    if (!*e->order || replay__order_find(u, e->order, NULL))
        replay_finding(r, REPLAY_MISMATCH, "log %s: grant with a missing or repeated order id '%s'", id, e->order);
    if (e->qty < 1) replay_finding(r, REPLAY_BAD_ENTRY, "log %s: grant of %" PRId64 " units", id, e->qty);
    replay_order o = { .qty = e->qty, .expires_at = e->expires_at,
                       .state = e->expires_at ? ORDER_HELD : ORDER_CONFIRMED };
    o.order = strdup(e->order);
    o.item = strdup(e->item);
    if (!o.order || !o.item || replay__set(&o.by, e->by) < 0) {
        replay__order_clear(&o);
        return -ENOMEM;
    }
    u->orders[u->n_orders++] = o;
    u->units += e->qty;
    replay__held(r, id, it, e->qty);
    if (u->units > r->per_user)
        replay_finding(r, REPLAY_OVERSOLD, "log %s: '%s' holds %" PRId64 " units, per_user is %" PRId64,
                       id, e->user, u->units, r->per_user);
    return 0;
}

/* The order a confirm, cancel or expire names, with the item and qty of
 * its grant. */
static replay_order *replay__live_order(replay *r, const char *id, const replay_event *e,
                                        replay_user *u, size_t *index)
{
    replay_order *o = replay__order_find(u, e->order, index);
    if (!o) {
        replay_finding(r, REPLAY_MISMATCH, "log %s: %s of order '%s', which '%s' does not hold", id,
                       e->type_name, e->order, e->user);
        return NULL;
    }
    if (o->qty != e->qty || strcmp(o->item, e->item))
        replay_finding(r, REPLAY_MISMATCH, "log %s: %s of order '%s' names %" PRId64 " x '%s', the grant said %"
                       PRId64 " x '%s'", id, e->type_name, e->order, e->qty, e->item, o->qty, o->item);
    return o;
}

/* confirm: the order stays, confirmed; cancel and expire: it leaves the
 * list and its units return. */
static int replay__stock_order(replay *r, const char *id, const replay_event *e, replay_user *u)
{
    size_t index;
    replay_order *o = replay__live_order(r, id, e, u, &index);
    if (!o) return 0;
    if (e->type != EVENT_CANCEL && o->state != ORDER_HELD)
        replay_finding(r, REPLAY_MISMATCH, "log %s: %s of order '%s', which is not held", id,
                       e->type_name, e->order);
    if (e->type == EVENT_CONFIRM) {
        o->state = ORDER_CONFIRMED;
        o->expires_at = 0;
        return 0;
    }
    replay_item *it = replay__get(&r->items, o->item);
    if (!it) return -ENOMEM;
    replay__held(r, id, it, -o->qty);
    u->units -= o->qty;
    replay__order_clear(o);
    memmove(o, o + 1, (u->n_orders - index - 1) * sizeof *o);
    u->n_orders--;
    return 0;
}

/* ---- the waitlist -------------------------------------------------------------- */

/* wait puts a request on the waitlist with its ticket, wait_served takes
 * it off (its grant, if any, is a grant event of its own). */
static int replay__wait(replay *r, const char *id, const replay_event *e)
{
    replay_wait *w = replay__find(&r->waits, e->req);
    if (e->type == EVENT_WAIT_SERVED) {
        if (!w || !w->no) {
            replay_finding(r, REPLAY_MISMATCH, "log %s: request '%s' served from the waitlist but not on it",
                           id, e->req);
            return 0;
        }
        ALLOC_ASSERT(r->waiting > 0);
        w->no = 0;
        r->waiting--;
        return 0;
    }
    if (w && w->no) {
        replay_finding(r, REPLAY_MISMATCH, "log %s: request '%s' joins the waitlist twice", id, e->req);
    } else if (e->wait_no < 1) {
        replay_finding(r, REPLAY_BAD_ENTRY, "log %s: wait entry without a wait_no", id);
    } else {
        if (!w && !(w = replay__get(&r->waits, e->req))) return -ENOMEM;
        w->no = e->wait_no;
        r->waiting++;
    }
    return 0;
}

/* ---- one event ---------------------------------------------------------------- */

static int replay__holding(replay *r, const char *id, const replay_event *e)
{
    replay_user *u = replay__get(&r->users, e->user);
    if (!u) return -ENOMEM;
    switch (e->type) {
    case EVENT_GRANT:
        return r->room ? replay__room_grant(r, id, e, u) : replay__stock_grant(r, id, e, u);
    case EVENT_RELEASE:
        if (r->room) return replay__room_release(r, id, e, u);
        replay_finding(r, REPLAY_MISMATCH, "log %s: a release entry in a stock batch", id);
        return 0;
    default:   /* confirm, cancel, expire: rooms too, with hold_ms (contract 9.4) */
        return r->room ? replay__room_order(r, id, e, u) : replay__stock_order(r, id, e, u);
    }
}

int replay_apply(replay *r, const char *id, const replay_event *ev)
{
    replay_event e = *ev;
    e.type_name = replay__str(e.type_name);
    e.user = replay__str(e.user);
    e.item = replay__str(e.item);
    e.order = replay__str(e.order);
    e.req = replay__str(e.req);
    e.state = replay__str(e.state);
    e.by = replay__str(e.by);
    if (e.type < EVENT_GRANT || e.type > EVENT_WAIT_SERVED) e.type = REPLAY_TYPE_OTHER;
    r->counts.events++;
    r->counts.by_type[e.type]++;
    switch (e.type) {
    case EVENT_GRANT: case EVENT_RELEASE: case EVENT_CONFIRM: case EVENT_CANCEL: case EVENT_EXPIRE:
        return replay__holding(r, id, &e);
    case EVENT_CAPACITY:
        return replay__on_capacity(r, id, &e);
    case EVENT_WAIT: case EVENT_WAIT_SERVED:
        return replay__wait(r, id, &e);
    case EVENT_STATE:
        return 0;      /* no effect on holdings */
    default:
        replay_finding(r, REPLAY_BAD_ENTRY, "log %s: unknown type '%s'", id, e.type_name);
        return 0;
    }
}

/* ---- reading the state back ------------------------------------------------------ */

int replay_is_room(const replay *r) { return r->room; }
int64_t replay_per_user(const replay *r) { return r->per_user; }
const replay_counts *replay_counts_get(const replay *r) { return &r->counts; }

size_t replay_user_count(const replay *r) { return r->users.n; }

const replay_user *replay_user_at(const replay *r, size_t i)
{
    return i < r->users.n ? replay__rec(&r->users, i) : NULL;
}

const replay_user *replay_user_get(const replay *r, const char *id)
{
    return replay__find(&r->users, id);
}

int replay_user_holds(const replay_user *u)
{
    return u->item != NULL || u->n_orders > 0;
}

size_t replay_holding_count(const replay *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->users.n; i++) n += replay_user_holds(replay__rec(&r->users, i)) ? 1 : 0;
    return n;
}

size_t replay_item_count(const replay *r) { return r->items.n; }

const replay_item *replay_item_at(const replay *r, size_t i)
{
    return i < r->items.n ? replay__rec(&r->items, i) : NULL;
}

const replay_item *replay_item_get(const replay *r, const char *id)
{
    return replay__find(&r->items, id);
}

size_t replay_wait_count(const replay *r) { return r->waiting; }

const char *replay_wait_at(const replay *r, size_t i, int64_t *no)
{
    if (i >= r->waits.n) return NULL;
    const replay_wait *w = replay__rec(&r->waits, i);
    *no = w->no;
    return w->id;
}

int64_t replay_wait_get(const replay *r, const char *req)
{
    const replay_wait *w = replay__find(&r->waits, req);
    return w ? w->no : 0;
}
