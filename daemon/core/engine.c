/* engine.c -- the allocation engine: every decision allocd makes (engine.h).
 *
 * Pure C, no I/O and no clock, so any sequence of requests and times can be
 * replayed in a test and gives the same answers. The rules themselves
 * (order of checks, reasons, events) are those of the engine spec; this file
 * is about keeping them cheap at a million participants:
 *
 * - Users and items live in arrays of structs, found through a seeded hash
 *   map (strmap) from id to index. Growing an array is a realloc; nothing
 *   else holds pointers into it. Ids are interned with one malloc each, so
 *   the pointers handed out (result items, event users, views) stay put.
 * - A user record is kept small (about 56 bytes): the room fields and the
 *   stock fields share a union because a batch is one kind for its whole
 *   life, and the orders array exists only once a user has an order.
 * - Reservations wait in a min-heap on (expires_at, order id). Confirm and
 *   cancel leave their heap entry behind (lazy deletion); an entry is live
 *   only while its order is still HELD. The heap top is kept live so that
 *   engine_next_expiry() is O(1) and const.
 * - Every decision first reserves room in the output lists (events, dirty
 *   users/items, ended orders) and allocates any strings it will keep, and
 *   only then changes state. When memory runs out the result is STATUS_NONE,
 *   nothing was half-applied, and engine_error() tells the shell to throw
 *   this engine away and load a fresh one.
 * - Invariants are asserted (core/assert.h). Where a decision changes state
 *   it checks, in O(1) and in every build, what that change must keep true:
 *   a grant takes only free units, a give-back returns only held ones, a
 *   user never goes past per_user, a bed is never given to someone holding
 *   one, the counters move by exactly one decision. The whole-state sweep,
 *   engine_check_invariants(), runs after decisions in ALLOCD_DEBUG builds.
 *
 *   Loaded state is the exception the assertions are built around: the
 *   store may hold more than an item's capacity or a user's per_user (an
 *   operator lowered P:{B}:capacity or meta.per_user by hand between two
 *   runs), and refusing to load it would stop the batch for good. Loading
 *   accepts it and marks the item or user (ITEM_LOADED_OVER,
 *   USER_LOADED_OVER); decisions never make it worse (a grant needs free
 *   >= qty, set_capacity refuses to go below what is held), so outside the
 *   marked records free >= 0 and units <= per_user hold exactly.
 */
#include "core/engine.h"
#include "core/assert.h"
#include "core/engine_swap.h"
#include "core/strmap.h"
#include "core/engine_slots.h"
#include "core/engine_wait.h"
#include "core/vec.h"
#include "engine_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

/* Times come from a clock but limits from an operator: never overflow. */
static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

/* 1 to ENGINE_ID_MAX bytes; never reads past the limit. */
static int id_ok(const char *s)
{
    if (!s || !*s) return 0;
    for (size_t n = 0; n <= ENGINE_ID_MAX; n++)
        if (!s[n]) return 1;
    return 0;
}

static char *intern(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

#define GROW(e, name, extra) \
    vec_reserve((void **)&(e)->name, &(e)->cap_##name, (e)->n_##name + (extra), \
         sizeof *(e)->name)

static const char *user_key(const void *ctx, uint32_t i)
{
    return ((const engine *)ctx)->users[i].id;
}

static const char *item_key(const void *ctx, uint32_t i)
{
    return ((const engine *)ctx)->items[i].id;
}




/* Records that an allocation failed: the engine is still consistent
 * (every decision allocates before it changes anything) but refuses further
 * decisions, and the shell sees -ENOMEM through engine_error(). Memory is
 * the only thing a pure engine can run out of, hence the one error code. */
static void stop_out_of_memory(engine *e)
{
    if (!e->error) e->error = -ENOMEM;
}

/* ---------------------------------------------------------------- records */

static uint32_t add_user_hashed(engine *e, const char *id, uint32_t h)
{
    if (e->n_users >= STRMAP_NONE - 1 || GROW(e, users, 1) < 0) return STRMAP_NONE;
    char *s = intern(id);
    if (!s) return STRMAP_NONE;
    uint32_t i = (uint32_t)e->n_users;
    user *u = &e->users[i];
    memset(u, 0, sizeof *u);
    u->id = s;
    if (is_rooms(e)) u->u.r.room = NO_ROOM;
    if (strmap_insert_hashed(&e->user_map, s, i, h) < 0) {
        free(s);
        return STRMAP_NONE;
    }
    e->n_users++;
    e->counters.participants = (int64_t)e->n_users;
    return i;
}

/* Every user record is a participant: users enter the engine only by being
 * seen (a request, an invalid, a group grant) or by being loaded. The key
 * is hashed once for the find and the insert. */
static uint32_t get_or_load_user(engine *e, const char *id)
{
    uint32_t h = strmap_hash32(&e->user_map, id);
    uint32_t i = strmap_find_hashed(&e->user_map, id, h);
    return i != STRMAP_NONE ? i : add_user_hashed(e, id, h);
}

/* A user seen by a decision: new ones are listed for the writer once. */
static uint32_t touch_user(engine *e, const char *id)
{
    uint32_t h = strmap_hash32(&e->user_map, id);
    uint32_t i = strmap_find_hashed(&e->user_map, id, h);
    if (i != STRMAP_NONE) return i;
    if (GROW(e, fresh, 1) < 0) return STRMAP_NONE;
    i = add_user_hashed(e, id, h);
    if (i != STRMAP_NONE) e->fresh[e->n_fresh++] = i;
    return i;
}

static uint32_t add_item(engine *e, const char *id, int64_t capacity)
{
    if (e->n_items >= STRMAP_NONE - 1 || GROW(e, items, 1) < 0) return STRMAP_NONE;
    char *s = intern(id);
    if (!s) return STRMAP_NONE;
    uint32_t i = (uint32_t)e->n_items;
    e->items[i] = (item){ .id = s, .capacity = capacity, .free = capacity };
    if (strmap_insert(&e->item_map, s, i) < 0) {
        free(s);
        return STRMAP_NONE;
    }
    e->n_items++;
    e->counters.free_units += capacity;
    if (capacity > 0) e->wait_kick = 1;
    return i;
}

/* free and the batch-wide free_units move together. Loading calls this
 * directly (it may take free below 0); decisions go through take_free and
 * return_free, which assert that the units are there to move. */
static void add_free(engine *e, uint32_t it, int64_t delta)
{
    if (delta > 0) e->wait_kick = 1;   /* units came back: serve the waitlist */
    e->items[it].free += delta;
    e->counters.free_units += delta;
}

/* A grant takes n free units (beds). Every grant checks free >= n before
 * it gets here, which is what keeps free >= 0 for every decision. */
static void take_free(engine *e, uint32_t it, int64_t n)
{
    ALLOC_DEBUG_ASSERT(it < e->n_items && n >= 1);
    ALLOC_ASSERT(e->items[it].free >= n);
    add_free(e, it, -n);
}

/* A release, cancel or expiry gives back n units that were held, so free
 * can at most come back to capacity (held, capacity - free, stays >= 0). */
static void return_free(engine *e, uint32_t it, int64_t n)
{
    ALLOC_DEBUG_ASSERT(it < e->n_items && n >= 1);
    ALLOC_ASSERT(n <= e->items[it].capacity - e->items[it].free);
    add_free(e, it, n);
}

/* Grows a user's orders array by one slot when it is full; the capacity is
 * the smallest power of two >= n_orders. */
static int orders_reserve(user *u)
{
    uint32_t n = u->u.s.n_orders;
    if (n != 0 && (n & (n - 1)) != 0) return 0;
    if (n >= UINT32_MAX / 2) return -ENOMEM;
    size_t cap = n ? (size_t)n * 2 : 1;
    engine_order *p = realloc(u->u.s.orders, cap * sizeof *p);
    if (!p) return -ENOMEM;
    u->u.s.orders = p;
    return 0;
}


/* Appends a live order after the other live ones (orders_reserve first). */
static void orders_add_live(user *u, engine_order o)
{
    ALLOC_ASSERT(order_is_live(o.state) && o.qty >= 1 && o.id != 0);
    engine_order *v = u->u.s.orders;
    uint32_t n = u->u.s.n_orders++;
    if (u->u.s.n_live < n) v[n] = v[u->u.s.n_live]; /* first tombstone to the end */
    v[u->u.s.n_live++] = o;
    u->u.s.units += o.qty;
}

static void orders_add_tombstone(user *u, engine_order o)
{
    ALLOC_ASSERT(order_is_tombstone(o.state));
    u->u.s.orders[u->u.s.n_orders++] = o;
}


/* Moves live order i to the tombstones with `state`; live order stays in
 * grant order. Returns the order as it is now. Only a live order ends, and
 * only once: its units leave the user's total exactly once. */
static engine_order orders_end(user *u, uint32_t i, uint8_t state)
{
    ALLOC_ASSERT(i < u->u.s.n_live && order_is_tombstone(state));
    engine_order *v = u->u.s.orders;
    engine_order o = v[i];
    ALLOC_ASSERT(order_is_live(o.state));
    uint32_t last = --u->u.s.n_live;
    memmove(&v[i], &v[i + 1], (last - i) * sizeof *v);
    o.state = state;
    v[last] = o;
    u->u.s.units -= o.qty;
    ALLOC_ASSERT(u->u.s.units >= 0);
    return o;
}

/* ---------------------------------------------------------------- heap */


static void heap_push(engine *e, expiry x)
{
    ALLOC_ASSERT(e->n_heap < e->cap_heap);
    size_t i = e->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!expiry_less(&x, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = x;
}

static void heap_pop(engine *e)
{
    expiry x = e->heap[--e->n_heap];
    size_t n = e->n_heap, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && expiry_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!expiry_less(&e->heap[c], &x)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = x;
}


static void heap_settle(engine *e)
{
    while (e->n_heap && !expiry_live(e, &e->heap[0])) heap_pop(e);
}

/* ---------------------------------------------------------------- outputs */

/* Reserves room in the output lists so that the pushes of one decision
 * cannot fail halfway. */
static int reserve(engine *e, size_t n_ev, size_t n_users, size_t n_items,
                   size_t n_ends)
{
    if (GROW(e, events, n_ev) < 0 || GROW(e, dirty_users, n_users) < 0 ||
        GROW(e, dirty_items, n_items) < 0 || GROW(e, ended, n_ends) < 0) {
        stop_out_of_memory(e);
        return -ENOMEM;
    }
    return 0;
}

static void emit(engine *e, const engine_event *ev)
{
    ALLOC_ASSERT(e->n_events < e->cap_events);
    e->events[e->n_events++] = *ev;
}

static void dirty_user(engine *e, uint32_t u)
{
    if (e->users[u].flags & USER_DIRTY) return;
    ALLOC_ASSERT(e->n_dirty_users < e->cap_dirty_users);
    e->users[u].flags |= USER_DIRTY;
    e->dirty_users[e->n_dirty_users++] = u;
}

static void dirty_item(engine *e, uint32_t it, int capacity_changed)
{
    item *p = &e->items[it];
    if (capacity_changed) p->flags |= ITEM_CAP_CHANGED;
    if (p->flags & ITEM_DIRTY) return;
    ALLOC_ASSERT(e->n_dirty_items < e->cap_dirty_items);
    p->flags |= ITEM_DIRTY;
    e->dirty_items[e->n_dirty_items++] = it;
}

static void note_ended(engine *e, uint32_t u, engine_order o)
{
    ALLOC_ASSERT(e->n_ended < e->cap_ended);
    e->ended[e->n_ended++] = (ended){ u, o };
}

/* ---------------------------------------------------------------- lifecycle */

engine *engine_new(const engine_meta *meta, uint64_t hash_seed)
{
    if (!meta || (meta->kind != BATCH_STOCK && meta->kind != BATCH_ROOM))
        return NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->meta = *meta;
    /* Users and items get different keys: knowing one map's layout tells
     * nothing about the other's. */
    strmap_init(&e->user_map, hash_seed, user_key, e);
    strmap_init(&e->item_map, hash_seed ^ 0x5bd1e9955bd1e995ULL, item_key, e);
    e->next_order = 1;
    return e;
}

static void free_user(engine *e, user *u)
{
    if (is_rooms(e)) free(u->u.r.req);
    else free(u->u.s.orders);
    free(u->id);
}

static void free_item(item *it)
{
    for (uint32_t i = 0; i < it->n_attrs; i++) {
        free(it->attrs[i].key);
        free(it->attrs[i].value);
    }
    free(it->attrs);
    free(it->id);
}

void engine_free(engine *e)
{
    if (!e) return;
    for (size_t i = 0; i < e->n_users; i++) free_user(e, &e->users[i]);
    for (size_t i = 0; i < e->n_items; i++) free_item(&e->items[i]);
    free(e->users);
    free(e->items);
    strmap_free(&e->user_map);
    strmap_free(&e->item_map);
    free(e->heap);
    free(e->dirty_users);
    free(e->dirty_items);
    free(e->fresh);
    free(e->ended);
    free(e->events);
    engine_groups_free(e);
    engine_swaps_free(e);
    engine_wait_free(e);
    engine_hold_free(e);
    engine_slots_free(e);
    free(e);
}

const engine_meta *engine_get_meta(const engine *e) { return &e->meta; }

void engine_set_order_source(engine *e, engine_order_fn fn, void *ctx)
{
    e->order_fn = fn;
    e->order_ctx = ctx;
}

int engine_error(const engine *e) { return e->error; }

/* One call to the order source per granted buy. Without a source (tests,
 * tools) ids count up from 1. */
static uint64_t new_order_id(engine *e)
{
    if (e->n_spare) return e->spare[--e->n_spare];
    if (e->order_fn) return e->order_fn(e->order_ctx);
    return e->next_order++;
}

/* ---------------------------------------------------------------- loading */

int engine_load_item(engine *e, const char *id, int64_t capacity)
{
    if (!id_ok(id) || capacity < 0) return -EINVAL;
    if (find_item(e, id) != STRMAP_NONE) return -EEXIST;
    return add_item(e, id, capacity) == STRMAP_NONE ? -ENOMEM : 0;
}

int engine_load_attr(engine *e, const char *id, const char *key,
                     const char *value)
{
    if (!id || !key || !value) return -EINVAL;
    uint32_t i = find_item(e, id);
    if (i == STRMAP_NONE) return -ENOENT;
    item *it = &e->items[i];
    char *k = intern(key), *v = intern(value);
    attr *a = realloc(it->attrs, (it->n_attrs + 1) * sizeof *a);
    if (!k || !v || !a) {
        if (a) it->attrs = a;
        free(k);
        free(v);
        return -ENOMEM;
    }
    it->attrs = a;
    /* A key given twice keeps the last value, like a JSON object would. */
    for (uint32_t j = 0; j < it->n_attrs; j++)
        if (strcmp(a[j].key, key) == 0) {
            free(k);
            free(a[j].value);
            a[j].value = v;
            return 0;
        }
    a[it->n_attrs++] = (attr){ k, v };
    return 0;
}

int engine_load_room_holder(engine *e, const char *uid, const char *room,
                            int64_t since, const char *req)
{
    if (!is_rooms(e) || !id_ok(uid) || !room) return -EINVAL;
    uint32_t it = find_item(e, room);
    if (it == STRMAP_NONE) return -ENOENT;
    uint32_t ui = find_user(e, uid);
    if (ui != STRMAP_NONE && e->users[ui].u.r.room != NO_ROOM) return -EEXIST;
    char *r = req ? intern(req) : NULL;
    if (req && !r) return -ENOMEM;
    if (ui == STRMAP_NONE) ui = get_or_load_user(e, uid);
    if (ui == STRMAP_NONE) {
        free(r);
        return -ENOMEM;
    }
    user *u = &e->users[ui];
    u->u.r.room = it;
    u->u.r.since = since;
    u->u.r.req = r;
    add_free(e, it, -1);   /* may go below 0: no grant until it is back */
    if (e->items[it].free < 0) e->items[it].flags |= ITEM_LOADED_OVER;
    return 0;
}

static int order_state_ok(int state)
{
    return state >= ORDER_HELD && state <= ORDER_CANCELLED;
}

int engine_load_order(engine *e, const char *uid, uint64_t order,
                      const char *item_id, int64_t qty, int state,
                      int64_t expires_at)
{
    if (is_rooms(e) && id_ok(uid) && item_id && order != 0 && order_state_ok(state))
        return engine_hold_load(e, uid, order, item_id, state, expires_at);
    if (is_rooms(e) || !id_ok(uid) || !item_id || order == 0 || qty < 1 ||
        qty > INT32_MAX || !order_state_ok(state))
        return -EINVAL;
    uint32_t it = find_item(e, item_id);
    if (it == STRMAP_NONE) return -ENOENT;
    uint32_t ui = get_or_load_user(e, uid);
    if (ui == STRMAP_NONE) return -ENOMEM;
    user *u = &e->users[ui];
    if (orders_find(u, order) != STRMAP_NONE) return -EEXIST;
    int held = state == ORDER_HELD;
    if (orders_reserve(u) < 0 || (held && GROW(e, heap, 1) < 0)) return -ENOMEM;
    engine_order o = { .id = order, .item = it, .qty = (int32_t)qty,
                       .expires_at = expires_at, .state = (uint8_t)state };
    if (state == ORDER_CONFIRMED) o.expires_at = 0;
    if (order_is_live(o.state)) {
        orders_add_live(u, o);
        add_free(e, it, -qty);   /* may go below 0, like a room holder */
        if (e->items[it].free < 0) e->items[it].flags |= ITEM_LOADED_OVER;
        if (u->u.s.units > e->meta.per_user) u->flags |= USER_LOADED_OVER;
    } else {
        orders_add_tombstone(u, o);
    }
    if (held) heap_push(e, (expiry){ expires_at, order, ui });
    return 0;
}

int engine_load_participant(engine *e, const char *uid)
{
    if (!id_ok(uid)) return -EINVAL;
    return get_or_load_user(e, uid) == STRMAP_NONE ? -ENOMEM : 0;
}

void engine_load_counters(engine *e, const engine_counters *c)
{
    e->counters.processed = c->processed;
    e->counters.granted = c->granted;
    e->counters.done = c->done;
    e->counters.rejected = c->rejected;
    e->counters.invalid = c->invalid;
    e->counters.dead = c->dead;
    e->counters.duplicates = c->duplicates;
    e->counters.ctl = c->ctl;
    /* waiting is what was loaded; tickets never go back */
    if (e->counters.wait_joined < c->wait_joined) e->counters.wait_joined = c->wait_joined;
    e->counters.wait_served = c->wait_served;
    e->counters.wait_ended = c->wait_ended;
}

void engine_load_admin_state(engine *e, engine_admin_state s) { e->admin = s; }

/* ---------------------------------------------------------------- expiry */

/* Ends live order `oi` of user `ui` as EXPIRED: units return, EXPIRE event
 * (req NULL), ended list. Caller reserved 1 event/user/item/ended. */
static void expire_order(engine *e, uint32_t ui, uint32_t oi, int64_t now)
{
    user *u = &e->users[ui];
    /* Only a reservation expires; a confirmed order is final. The heap
     * hands out only HELD orders (expiry_live), so: debug only. orders_end
     * checks that oi is a live order in every build. */
    ALLOC_DEBUG_ASSERT(oi < u->u.s.n_live && u->u.s.orders[oi].state == ORDER_HELD);
    engine_order o = orders_end(u, oi, ORDER_EXPIRED);
    return_free(e, o.item, o.qty);
    emit(e, &(engine_event){ .type = EVENT_EXPIRE, .user = u->id,
                             .item = e->items[o.item].id, .qty = o.qty,
                             .order = o.id, .at = now });
    dirty_user(e, ui);
    dirty_item(e, o.item, 0);
    note_ended(e, ui, o);
}

/* Ends every reservation due by `now`, earliest first. Afterwards none is
 * left due, unless memory ran out (then the engine has failed and decides
 * nothing more until it is replaced). */
static size_t expire_due(engine *e, int64_t now)
{
    size_t n = 0;
    heap_settle(e);
    while (e->n_heap && e->heap[0].at <= now) {
        if (reserve(e, 1, 1, 1, 1) < 0) break;
        expiry x = e->heap[0];
        heap_pop(e);
        if (is_rooms(e)) engine_hold_expire(e, x.user, now);
        else expire_order(e, x.user, orders_find(&e->users[x.user], x.order), now);
        n++;
        heap_settle(e);
    }
    /* The loop's own exit condition, unless memory ran out: debug only. */
    ALLOC_DEBUG_ASSERT(e->error || e->n_heap == 0 || e->heap[0].at > now);
    /* closes_at passed: open swap offers end `closed` (contract 9.3) */
    if (e->swaps && e->meta.closes_at != 0 && now >= e->meta.closes_at) engine_swaps_close(e, now);
    return n;
}

size_t engine_expire(engine *e, int64_t now)
{
    size_t n = expire_due(e, now);
    engine_wait_step(e, now);
    if (ALLOC_DEBUG) engine_debug_sweep(e);
    return n;
}

int64_t engine_next_expiry(const engine *e)
{
    int64_t at = e->n_heap ? e->heap[0].at : INT64_MAX;
    int64_t wait = engine_wait_next_deadline(e);
    return wait < at ? wait : at;
}

/* ---------------------------------------------------------------- phase */

engine_phase engine_phase_at(const engine *e, int64_t now)
{
    if (e->admin == ADMIN_CLOSED || (e->meta.closes_at != 0 && now >= e->meta.closes_at))
        return PHASE_CLOSED;
    if (e->admin == ADMIN_PAUSED) return PHASE_PAUSED;
    if (now < e->meta.opens_at) return PHASE_WAITING;
    return PHASE_OPEN;
}

engine_admin_state engine_get_admin_state(const engine *e) { return e->admin; }
const engine_counters *engine_get_counters(const engine *e) { return &e->counters; }

/* ---------------------------------------------------------------- results */

/* Keeps only the times a refusal owes the user (section 9.6 of the
 * contract): retry_at for throttled, opens_at for not_open. */
static void reject(engine_result *out, engine_reason r)
{
    /* a group refusal names the group, and `conflict` the current version;
     * throttled keeps retry_at, not_open opens_at (contract 9.6) */
    const char *group = out->group;
    int64_t version = out->version;
    int has_version = out->has_version;
    int64_t retry_at = r == REASON_THROTTLED ? out->retry_at : 0;
    int64_t opens_at = r == REASON_NOT_OPEN ? out->opens_at : 0;
    memset(out, 0, sizeof *out);
    out->status = STATUS_REJECTED;
    out->reason = r;
    out->group = group;
    out->version = version;
    out->has_version = has_version;
    out->retry_at = retry_at;
    out->opens_at = opens_at;
}

static void granted(engine *e, engine_result *out, const char *item_id)
{
    out->status = STATUS_GRANTED;
    out->item = item_id;
    out->rank = e->counters.granted + 1;   /* counted right after */
}

static void done(engine_result *out, const char *item_id)
{
    out->status = STATUS_DONE;
    out->item = item_id;
}

/* Counts a decided queue request in `processed` and in the counter of its
 * status. Only a decision is counted: engine_decide returns before this
 * when memory ran out (STATUS_NONE), so a request without a status here would
 * get no result at all -- the shell would lose it. */
static void count_decision(engine *e, const engine_result *out)
{
    engine_counters *c = &e->counters;
    switch (out->status) {
    case STATUS_GRANTED: c->granted++; break;
    case STATUS_DONE: c->done++; break;
    case STATUS_REJECTED: c->rejected++; break;
    case STATUS_INVALID: c->invalid++; break;
    case STATUS_WAITING: break;   /* counted in `waiting` by engine_wait_join, or in
                                 `swap_offers` by engine_swaps_decide */
    default: ALLOC_PANIC("invariant: a request decided without a result");
    }
    c->processed++;
}

/* ---------------------------------------------------------------- throttle */

/* Fixed window per user. A request refused during a penalty does not count
 * in the window, so a penalty is not extended by knocking on the door. */
static int throttled(engine *e, user *u, int64_t now)
{
    const engine_meta *m = &e->meta;
    if (m->rate_max <= 0) return 0;
    if (now < u->penalty_until) return 1;
    if (!(u->flags & USER_WINDOW) || now - u->win_start >= m->rate_window_ms) {
        u->flags |= USER_WINDOW;
        u->win_start = now;
        u->win_count = 0;
    }
    if (u->win_count < UINT32_MAX) u->win_count++;
    if (u->win_count > m->rate_max) {
        u->penalty_until = sat_add(now, m->penalty_ms);
        return 1;
    }
    return 0;
}

static batch_kind op_kind(engine_op op)
{
    return op <= OP_CANCEL ? BATCH_STOCK : BATCH_ROOM;
}

/* Steps 2-6 of the spec: everything that is not about the op itself. */
static engine_reason gate(engine *e, user *u, const engine_request *r, int64_t now)
{
    engine_op op = r->op;
    switch (engine_phase_at(e, now)) {
    case PHASE_CLOSED: return REASON_CLOSED;
    case PHASE_WAITING:
        /* early=shuffle: before the batch's opening the throttle counts
         * early requests as they are read (contract 9.1) and the rest wait
         * for the draw; a user's own slot (9.4) applies from the opening */
        if (e->meta.early == EARLY_SHUFFLE)
            return throttled(e, u, now) ? REASON_THROTTLED : REASON_KEEP_FOR_LOTTERY;
        break;
    case PHASE_PAUSED: return REASON_PAUSED;
    case PHASE_OPEN: break;
    }
    /* the batch's opens_at, or the user's own selection slot (engine_slots.c) */
    if (now < engine_opens_for(e, r)) return REASON_NOT_OPEN;
    if (throttled(e, u, now)) return REASON_THROTTLED;
    if (op_kind(op) != e->meta.kind && !engine_hold_op_ok(e, op)) return REASON_WRONG_KIND;
    return REASON_NONE;
}

/* ---------------------------------------------------------------- stock */

/* The op handlers below return the reason of a refusal, or REASON_NONE when they
 * filled *out themselves (granted/done, or STATUS_NONE when memory ran out). */

static engine_reason decide_buy(engine *e, uint32_t ui, const engine_request *r,
                                int64_t now, engine_result *out)
{
    uint32_t it = find_item(e, r->item);
    if (it == STRMAP_NONE) return REASON_UNKNOWN_ITEM;
    if (r->qty > e->items[it].free) return REASON_SOLD_OUT;
    if (e->users[ui].u.s.units + r->qty > e->meta.per_user) return REASON_LIMIT;
    int hold = e->meta.hold_ms > 0;
    /* Everything that can fail happens before the order source is asked. */
    if (reserve(e, 1, 1, 1, 0) < 0 || orders_reserve(&e->users[ui]) < 0 ||
        (hold && GROW(e, heap, 1) < 0)) {
        stop_out_of_memory(e);
        return REASON_NONE;
    }
    engine_order o = { .id = new_order_id(e), .item = it, .qty = (int32_t)r->qty,
                       .state = hold ? ORDER_HELD : ORDER_CONFIRMED,
                       .expires_at = hold ? sat_add(now, e->meta.hold_ms) : 0 };
    user *u = &e->users[ui];
    /* A repeated id would make confirm and cancel act on the wrong order
     * (the source promises fresh ids: a search, so debug builds only). */
    ALLOC_DEBUG_ASSERT(orders_find(u, o.id) == STRMAP_NONE);
    orders_add_live(u, o);
    ALLOC_ASSERT(u->u.s.units <= e->meta.per_user);
    take_free(e, it, o.qty);
    if (hold) heap_push(e, (expiry){ o.expires_at, o.id, ui });
    emit(e, &(engine_event){ .type = EVENT_GRANT, .user = u->id,
                             .item = e->items[it].id, .qty = o.qty, .order = o.id,
                             .req = r->id, .at = now, .expires_at = o.expires_at });
    dirty_user(e, ui);
    dirty_item(e, it, 0);
    granted(e, out, e->items[it].id);
    out->qty = o.qty;
    out->order = o.id;
    out->expires_at = o.expires_at;
    return REASON_NONE;
}

/* The shared start of confirm and cancel: finds the order and answers for
 * tombstones and for a reservation that ran out. Sets *oi to the live
 * order's index, or to STRMAP_NONE when there is nothing left to do. */
static engine_reason live_order(engine *e, uint32_t ui, const engine_request *r,
                                int64_t now, uint32_t *oi)
{
    user *u = &e->users[ui];
    *oi = STRMAP_NONE;
    uint32_t i = orders_find(u, r->order);
    if (i == STRMAP_NONE) return REASON_UNKNOWN_ORDER;
    const engine_order *o = &u->u.s.orders[i];
    if (o->state == ORDER_EXPIRED) return REASON_EXPIRED;
    if (o->state == ORDER_CANCELLED) return REASON_UNKNOWN_ORDER;
    if (o->state == ORDER_HELD && now >= o->expires_at) {
        /* engine_decide expires due orders first, so this is a safety net
         * for a caller that decides at an earlier `now` than it expired. */
        if (reserve(e, 1, 1, 1, 1) < 0) return REASON_NONE;
        expire_order(e, ui, i, now);
        heap_settle(e);
        return REASON_EXPIRED;
    }
    *oi = i;
    return REASON_NONE;
}

static void order_done(engine *e, engine_result *out, const engine_order *o)
{
    done(out, e->items[o->item].id);
    out->qty = o->qty;
    out->order = o->id;
}

static engine_reason decide_confirm(engine *e, uint32_t ui,
                                    const engine_request *r, int64_t now,
                                    engine_result *out)
{
    uint32_t oi;
    engine_reason why = live_order(e, ui, r, now, &oi);
    if (oi == STRMAP_NONE) return why;
    user *u = &e->users[ui];
    engine_order *o = &u->u.s.orders[oi];
    if (o->state == ORDER_HELD) {   /* a second confirm is done, silently */
        if (reserve(e, 1, 1, 0, 0) < 0) return REASON_NONE;
        o->state = ORDER_CONFIRMED;
        o->expires_at = 0;
        emit(e, &(engine_event){ .type = EVENT_CONFIRM, .user = u->id,
                                 .item = e->items[o->item].id, .qty = o->qty,
                                 .order = o->id, .req = r->id, .at = now });
        dirty_user(e, ui);
        heap_settle(e);
    }
    order_done(e, out, o);
    return REASON_NONE;
}

static engine_reason decide_cancel(engine *e, uint32_t ui,
                                   const engine_request *r, int64_t now,
                                   engine_result *out)
{
    uint32_t oi;
    engine_reason why = live_order(e, ui, r, now, &oi);
    if (oi == STRMAP_NONE) return why;
    if (reserve(e, 1, 1, 1, 1) < 0) return REASON_NONE;
    user *u = &e->users[ui];
    engine_order o = orders_end(u, oi, ORDER_CANCELLED);
    return_free(e, o.item, o.qty);
    emit(e, &(engine_event){ .type = EVENT_CANCEL, .user = u->id,
                             .item = e->items[o.item].id, .qty = o.qty,
                             .order = o.id, .req = r->id, .at = now });
    dirty_user(e, ui);
    dirty_item(e, o.item, 0);
    note_ended(e, ui, o);
    order_done(e, out, &o);
    heap_settle(e);
    return REASON_NONE;
}

/* ---------------------------------------------------------------- rooms */

/* Gives user `ui` a bed in room `it`; `req` is their own copy of the request
 * id. Caller reserved 1 event, 1 user, 1 item. */
static void seat(engine *e, uint32_t ui, uint32_t it, char *req,
                 const char *req_id, int64_t now)
{
    user *u = &e->users[ui];
    ALLOC_ASSERT(u->u.r.room == NO_ROOM);   /* one bed per user */
    take_free(e, it, 1);                    /* never past the room's beds */
    u->u.r.room = it;
    u->u.r.since = now;
    free(u->u.r.req);
    u->u.r.req = req;
    emit(e, &(engine_event){ .type = EVENT_GRANT, .user = u->id,
                             .item = e->items[it].id, .qty = 1, .req = req_id,
                             .at = now });
    dirty_user(e, ui);
    dirty_item(e, it, 0);
}

/* Takes the bed away from user `ui` (who holds one). Caller reserved. */
static uint32_t unseat(engine *e, uint32_t ui, const char *req_id, int64_t now)
{
    user *u = &e->users[ui];
    uint32_t it = u->u.r.room;
    ALLOC_ASSERT(it != NO_ROOM);
    return_free(e, it, 1);
    u->u.r.room = NO_ROOM;
    free(u->u.r.req);
    u->u.r.req = NULL;
    emit(e, &(engine_event){ .type = EVENT_RELEASE, .user = u->id,
                             .item = e->items[it].id, .qty = 1, .req = req_id,
                             .at = now });
    dirty_user(e, ui);
    dirty_item(e, it, 0);
    return it;
}

static int holds_bed(const engine *e, uint32_t ui)
{
    return ui != STRMAP_NONE && e->users[ui].u.r.room != NO_ROOM;
}

/* Allocates what seating one user needs: their copy of the request id and
 * room in the output lists. NULL (and the engine failed) without memory. */
static char *prepare_seat(engine *e, const char *req_id, size_t events, size_t items)
{
    char *s = intern(req_id ? req_id : "");
    if (!s) {
        stop_out_of_memory(e);
        return NULL;
    }
    if (reserve(e, events, 1, items, 0) < 0 || engine_hold_reserve(e, 1) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

static engine_reason decide_choose(engine *e, uint32_t ui,
                                   const engine_request *r, int64_t now,
                                   engine_result *out)
{
    uint32_t it = find_item(e, r->item);
    if (it == STRMAP_NONE) return REASON_UNKNOWN_ITEM;
    if (holds_bed(e, ui)) return REASON_ALREADY_HOLDING;
    if (e->items[it].free <= 0) return REASON_ROOM_FULL;
    char *req = prepare_seat(e, r->id, 1, 1);
    if (!req) return REASON_NONE;
    seat(e, ui, it, req, r->id, now);
    engine_hold_start(e, ui, now, out);
    granted(e, out, e->items[it].id);
    return REASON_NONE;
}

static int attrs_match(const item *it, const engine_kv *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t j = 0;
        while (j < it->n_attrs && strcmp(it->attrs[j].key, f[i].key) != 0) j++;
        if (j == it->n_attrs || strcmp(it->attrs[j].value, f[i].value) != 0)
            return 0;
    }
    return 1;
}

/* The room for auto and group: the first of prefs with `need` free beds,
 * else (with a filter) the matching room with the fewest free beds that
 * still fits, ties by id -- filling rooms up keeps whole rooms free for
 * groups. A linear scan: room batches have thousands of rooms, not more. */
static uint32_t pick_room(const engine *e, const engine_request *r, int64_t need)
{
    for (size_t i = 0; i < r->n_prefs; i++) {
        uint32_t it = find_item(e, r->prefs[i]);
        if (it != STRMAP_NONE && e->items[it].free >= need) return it;
    }
    if (!r->has_filter) return STRMAP_NONE;
    uint32_t best = STRMAP_NONE;
    for (uint32_t it = 0; it < e->n_items; it++) {
        const item *p = &e->items[it];
        if (p->free < need || !attrs_match(p, r->filter, r->n_filter)) continue;
        if (best == STRMAP_NONE || p->free < e->items[best].free ||
            (p->free == e->items[best].free && strcmp(p->id, e->items[best].id) < 0))
            best = it;
    }
    return best;
}

static engine_reason decide_auto(engine *e, uint32_t ui, const engine_request *r,
                                 int64_t now, engine_result *out)
{
    if (holds_bed(e, ui)) return REASON_ALREADY_HOLDING;
    uint32_t it = pick_room(e, r, 1);
    if (it == STRMAP_NONE) return REASON_NO_ROOM;
    char *req = prepare_seat(e, r->id, 1, 1);
    if (!req) return REASON_NONE;
    seat(e, ui, it, req, r->id, now);
    engine_hold_start(e, ui, now, out);
    granted(e, out, e->items[it].id);
    return REASON_NONE;
}

/* Seats every member in room `it`, or nobody: all allocations (member
 * records, request id copies, output room) happen before the first seat. */
static void seat_group(engine *e, const engine_request *r, uint32_t it,
                       int64_t now, engine_result *out)
{
    size_t n = r->n_members;
    char **reqs = calloc(n, sizeof *reqs);
    uint32_t *ids = calloc(n, sizeof *ids);
    int ok = reqs && ids && reserve(e, n, n, 1, 0) == 0 && engine_hold_reserve(e, n) == 0;
    for (size_t i = 0; ok && i < n; i++) {
        reqs[i] = intern(r->id ? r->id : "");
        ids[i] = reqs[i] ? touch_user(e, r->members[i]) : STRMAP_NONE;
        ok = ids[i] != STRMAP_NONE;
    }
    if (ok) {
        int64_t free_before = e->items[it].free;
        for (size_t i = 0; i < n; i++) seat(e, ids[i], it, reqs[i], r->id, now);
        /* every member holds their own bed (and pays their own deposit);
         * the result carries the requester's order */
        for (size_t i = 0; i < n; i++)
            engine_hold_start(e, ids[i], now, strcmp(r->members[i], r->user) ? NULL : out);
        /* All members in one room: n beds of room `it`, and each member
         * there (a search of n users: debug builds only). */
        ALLOC_ASSERT(e->items[it].free == free_before - (int64_t)n);
        for (size_t i = 0; ALLOC_DEBUG && i < n; i++)
            ALLOC_DEBUG_ASSERT(e->users[ids[i]].u.r.room == it);
        granted(e, out, e->items[it].id);
    } else {
        stop_out_of_memory(e);
        for (size_t i = 0; reqs && i < n; i++) free(reqs[i]);
    }
    free(reqs);
    free(ids);
}

static engine_reason decide_group(engine *e, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    size_t n = r->n_members;
    if ((int64_t)n > e->meta.max_group) return REASON_GROUP_TOO_LARGE;
    for (size_t i = 0; i < n; i++)
        if (holds_bed(e, find_user(e, r->members[i]))) return REASON_MEMBER_BUSY;
    uint32_t it = pick_room(e, r, (int64_t)n);
    if (it == STRMAP_NONE) return REASON_NO_ROOM;
    seat_group(e, r, it, now, out);
    return REASON_NONE;
}

/* ---------------------------------------------------------------- hooks for engine_groups.c */

engine_reason engine_seat_members(engine *e, const engine_request *r, int64_t now, engine_result *out)
{
    return decide_group(e, r, now, out);
}

uint32_t engine_touch_user(engine *e, const char *id) { return touch_user(e, id); }
int engine_holds_bed(const engine *e, uint32_t ui) { return holds_bed(e, ui); }

int engine_exchange_beds(engine *e, uint32_t ui, uint32_t vi, const char *req_u,
                         const char *req_v, int64_t now)
{
    char *ru = prepare_seat(e, req_u, 4, 2), *rv = ru ? intern(req_v ? req_v : "") : NULL;
    if (!ru || !rv || reserve(e, 4, 2, 2, 0) < 0) {
        free(ru);
        free(rv);
        return -ENOMEM;
    }
    uint32_t a = unseat(e, ui, req_u, now), b = unseat(e, vi, req_v, now);
    seat(e, ui, b, ru, req_u, now);
    seat(e, vi, a, rv, req_v, now);
    return 0;
}
uint32_t engine_load_user(engine *e, const char *id) { return id_ok(id) ? get_or_load_user(e, id) : STRMAP_NONE; }
int engine_reserve_users(engine *e, size_t n) { return GROW(e, dirty_users, n); }
void engine_out_of_memory(engine *e) { stop_out_of_memory(e); }

static engine_reason decide_switch(engine *e, uint32_t ui,
                                   const engine_request *r, int64_t now,
                                   engine_result *out)
{
    uint32_t it = find_item(e, r->item);
    if (it == STRMAP_NONE) return REASON_UNKNOWN_ITEM;
    if (!holds_bed(e, ui)) return REASON_NOT_HOLDING;
    if (e->users[ui].u.r.room == it) return REASON_ALREADY_HOLDING;
    if (e->items[it].free <= 0) return REASON_ROOM_FULL;   /* the old bed stays */
    char *req = prepare_seat(e, r->id, 2, 2);
    if (!req) return REASON_NONE;
    if (engine_swaps_bed_gone(e, ui, now) < 0) { free(req); return REASON_NONE; }
    unseat(e, ui, r->id, now);
    seat(e, ui, it, req, r->id, now);
    granted(e, out, e->items[it].id);
    return REASON_NONE;
}

static engine_reason decide_release(engine *e, uint32_t ui,
                                    const engine_request *r, int64_t now,
                                    engine_result *out)
{
    if (!holds_bed(e, ui)) return REASON_NOT_HOLDING;
    if (reserve(e, 1, 1, 1, 0) < 0 || engine_swaps_bed_gone(e, ui, now) < 0) return REASON_NONE;
    engine_hold_clear(e, ui);   /* a held bed given back ends its hold */
    done(out, e->items[unseat(e, ui, r->id, now)].id);
    return REASON_NONE;
}

/* ---------------------------------------------------------------- admin */

static void set_state(engine *e, engine_admin_state s, const engine_request *r,
                      int64_t now)
{
    e->admin = s;
    if (s == ADMIN_CLOSED) engine_swaps_close(e, now);
    emit(e, &(engine_event){ .type = EVENT_STATE, .req = r->id, .at = now,
                             .state = engine_phase_name(engine_phase_at(e, now)) });
}

/* Capacity may go down, but never below what is held now (REASON_LIMIT): free
 * is capacity - held, never clamped, so it stays >= 0 -- also for an item
 * loaded beyond its capacity, which this is the way back from. */
static engine_reason decide_set_capacity(engine *e, const engine_request *r,
                                         int64_t now, engine_result *out)
{
    uint32_t it = find_item(e, r->item);
    int64_t held = it == STRMAP_NONE ? 0 : e->items[it].capacity - e->items[it].free;
    if (r->qty < held) return REASON_LIMIT;
    if (reserve(e, 1, 0, 1, 0) < 0) return REASON_NONE;
    if (it == STRMAP_NONE) {
        it = add_item(e, r->item, r->qty);
        if (it == STRMAP_NONE) {
            stop_out_of_memory(e);
            return REASON_NONE;
        }
    } else {
        add_free(e, it, r->qty - e->items[it].capacity);
        e->items[it].capacity = r->qty;
    }
    ALLOC_ASSERT(e->items[it].free >= 0 &&
                 e->items[it].capacity - e->items[it].free == held);
    dirty_item(e, it, 1);
    emit(e, &(engine_event){ .type = EVENT_CAPACITY, .item = e->items[it].id,
                             .qty = r->qty, .req = r->id, .at = now });
    done(out, e->items[it].id);
    out->qty = r->qty;
    return REASON_NONE;
}

/* pause/resume/close: no phase, throttle or kind gate, except that a
 * closed batch stays closed. A state event only when the state changes. */
static engine_reason decide_state(engine *e, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    if (r->op != OP_CLOSE && engine_phase_at(e, now) == PHASE_CLOSED)
        return REASON_CLOSED;
    if (reserve(e, 1, 0, 0, 0) < 0) return REASON_NONE;
    if (r->op == OP_PAUSE && e->admin != ADMIN_PAUSED) set_state(e, ADMIN_PAUSED, r, now);
    if (r->op == OP_RESUME && e->admin == ADMIN_PAUSED) set_state(e, ADMIN_NONE, r, now);
    if (r->op == OP_CLOSE && e->admin != ADMIN_CLOSED) set_state(e, ADMIN_CLOSED, r, now);
    done(out, NULL);
    return REASON_NONE;
}

static engine_reason decide_admin(engine *e, const engine_request *r,
                                  int64_t now, engine_result *out)
{
    if (r->op != OP_SET_CAPACITY) return decide_state(e, r, now, out);
    if (!id_ok(r->item) || r->qty < 0) {
        out->status = STATUS_INVALID;
        return REASON_NONE;
    }
    return decide_set_capacity(e, r, now, out);
}

/* ---------------------------------------------------------------- decide */

static int names_ok(const char *const *v, size_t n)
{
    if (n && !v) return 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i]) return 0;
    return 1;
}

static int ids_ok(const char *const *v, size_t n)
{
    if (!names_ok(v, n)) return 0;
    for (size_t i = 0; i < n; i++)
        if (!id_ok(v[i])) return 0;
    return 1;
}

/* Group members: valid ids, no one twice, and the sender among them. A
 * member twice would get two beds, so this is checked here even though the
 * parser should never let it through. */
static int members_ok(const engine_request *r)
{
    int has_sender = 0;
    if (r->n_members == 0 || !names_ok(r->members, r->n_members)) return 0;
    for (size_t i = 0; i < r->n_members; i++) {
        if (!id_ok(r->members[i])) return 0;
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->members[i], r->members[j]) == 0) return 0;
        has_sender |= strcmp(r->members[i], r->user) == 0;
    }
    return has_sender;
}

/* The shape the parser promises; the engine checks it again rather than
 * trust it, because a slip there would break an invariant here. */
static int request_ok(const engine_request *r)
{
    if (!names_ok(r->prefs, r->n_prefs)) return 0;
    if (r->n_filter && !r->filter) return 0;
    for (size_t i = 0; i < r->n_filter; i++)
        if (!r->filter[i].key || !r->filter[i].value) return 0;
    switch (r->op) {
    case OP_BUY: return r->item && r->qty >= 1 && r->qty <= INT32_MAX;
    case OP_CHOOSE: case OP_SWITCH: return r->item != NULL;
    case OP_GROUP: return r->n_members == 0 || members_ok(r);  /* formed: none */
    case OP_INVITE: return r->n_to > 0 && ids_ok(r->to, r->n_to);
    case OP_ACCEPT: case OP_DECLINE: return id_ok(r->peer);
    case OP_LEAVE: case OP_PREFS: return 1;
    case OP_SWAP: return id_ok(r->peer);
    case OP_CONFIRM: case OP_CANCEL: case OP_AUTO: case OP_RELEASE: return 1;
    default: return 0;
    }
}

static engine_reason decide_op(engine *e, uint32_t ui, const engine_request *r,
                               int64_t now, engine_result *out)
{
    switch (r->op) {
    case OP_BUY: return decide_buy(e, ui, r, now, out);
    case OP_CONFIRM:
        return is_rooms(e) ? engine_hold_confirm(e, ui, r, now, out) : decide_confirm(e, ui, r, now, out);
    case OP_CANCEL:
        return is_rooms(e) ? engine_hold_cancel(e, ui, r, now, out) : decide_cancel(e, ui, r, now, out);
    case OP_CHOOSE: return decide_choose(e, ui, r, now, out);
    case OP_AUTO: return decide_auto(e, ui, r, now, out);
    case OP_GROUP: case OP_INVITE: case OP_ACCEPT: case OP_DECLINE: case OP_LEAVE: case OP_PREFS:
        return engine_groups_decide(e, ui, r, now, out);
    case OP_SWAP: return engine_swaps_decide(e, ui, r, now, out);
    case OP_SWITCH: return decide_switch(e, ui, r, now, out);
    case OP_RELEASE: return decide_release(e, ui, r, now, out);
    default: return REASON_NONE;   /* request_ok() let no other op through */
    }
}

uint64_t engine_new_order_id(engine *e) { return new_order_id(e); }
void engine_heap_push(engine *e, expiry x) { heap_push(e, x); }
void engine_heap_settle(engine *e) { heap_settle(e); }
int engine_reserve(engine *e, size_t n_ev, size_t n_users, size_t n_items, size_t n_ends)
{
    return reserve(e, n_ev, n_users, n_items, n_ends);
}
void engine_emit(engine *e, const engine_event *ev) { emit(e, ev); }
void engine_dirty_user(engine *e, uint32_t ui) { dirty_user(e, ui); }
uint32_t engine_unseat(engine *e, uint32_t ui, const char *req_id, int64_t now)
{
    return unseat(e, ui, req_id, now);
}

engine_reason engine_op_decide(engine *e, uint32_t ui, const engine_request *r,
                               int64_t now, engine_result *out)
{
    return decide_op(e, ui, r, now, out);
}

static int is_admin(engine_op op)
{
    return op >= OP_PAUSE && op <= OP_SET_CAPACITY;
}

/* Steps 1-7 of the spec for a request from the queue. */
static engine_reason decide_user(engine *e, const engine_request *r,
                                 int64_t now, engine_result *out)
{
    if (!id_ok(r->user)) {
        out->status = STATUS_INVALID;
        return REASON_NONE;
    }
    uint32_t ui = touch_user(e, r->user);
    if (ui == STRMAP_NONE) {
        stop_out_of_memory(e);
        return REASON_NONE;
    }
    if (!request_ok(r)) {
        out->status = STATUS_INVALID;
        return REASON_NONE;
    }
    engine_reason why = gate(e, &e->users[ui], r, now);
    if (why == REASON_KEEP_FOR_LOTTERY) {
        out->kept = 1;
        return REASON_NONE;
    }
    if (why == REASON_THROTTLED) out->retry_at = e->users[ui].penalty_until;
    if (why == REASON_NOT_OPEN) out->opens_at = engine_opens_for(e, r);
    if (why != REASON_NONE) return why;
    return decide_op(e, ui, r, now, out);
}

/* engine_decide without the debug sweep. Every request gets exactly one
 * result and is counted exactly once: in ctl (admin) or in processed and
 * the counter of its status, so the counters only ever grow, and a grant's
 * rank is the grant count including it. STATUS_NONE (out of memory) is the one
 * result that is not a decision and counts nowhere. The checks of that are
 * debug only: the two lines before them make it so, and they would cost a
 * release build about 35 instructions a decision (callgrind). */
static void decide_counted(engine *e, const engine_request *r, int64_t now,
                           engine_result *out)
{
    memset(out, 0, sizeof *out);
    /* Reservations that ran out by `now` are gone before anything is
     * decided at `now`, whether or not the shell called engine_expire: a
     * buy must not be refused for units that are already free again. */
    expire_due(e, now);
    engine_wait_step(e, now);   /* returned units go to those waiting first */
    if (e->error) return;   /* out of memory, now or before: no decision */
    const int64_t ctl = e->counters.ctl, processed = e->counters.processed,
                  grants = e->counters.granted;
    const size_t resolved = engine_swap_resolved_count(e);
    int admin = is_admin(r->op);
    engine_reason why = admin ? decide_admin(e, r, now, out)
                              : decide_user(e, r, now, out);
    if (why != REASON_NONE && !admin && engine_wait_join(e, r, &why, now, out)) why = REASON_NONE;
    if (why != REASON_NONE) reject(out, why);
    if (e->error) {
        memset(out, 0, sizeof *out);
        return;
    }
    if (admin) e->counters.ctl++;
    else if (!out->kept) count_decision(e, out);   /* kept: decided and counted when served */
    const engine_counters *c = &e->counters;
    /* swap offers this decision ended (9.3) became granted or rejected */
    int64_t ended_granted = 0;
    for (size_t i = resolved; ALLOC_DEBUG && i < engine_swap_resolved_count(e); i++) {
        engine_swap_resolved s;
        engine_swap_resolved_at(e, i, &s);
        ended_granted += s.res.status == STATUS_GRANTED;
    }
    ALLOC_DEBUG_ASSERT(c->ctl == ctl + admin && c->processed == processed + (!admin && !out->kept));
    ALLOC_DEBUG_ASSERT(c->granted == grants + (out->status == STATUS_GRANTED) + ended_granted);
    ALLOC_DEBUG_ASSERT(out->status != STATUS_GRANTED || out->rank == c->granted);
    ALLOC_DEBUG_ASSERT((out->status == STATUS_REJECTED) == (out->reason != REASON_NONE));
    engine_wait_step(e, now);   /* what this decision returned or closed */
}

void engine_decide(engine *e, const engine_request *r, int64_t now,
                   engine_result *out)
{
    decide_counted(e, r, now, out);
    if (ALLOC_DEBUG) engine_debug_sweep(e);
}

void engine_note_invalid(engine *e, const char *uid, int64_t now)
{
    if (id_ok(uid) && touch_user(e, uid) == STRMAP_NONE) stop_out_of_memory(e);
    e->counters.invalid++;
    e->counters.processed++;
}

void engine_note_dead(engine *e) { e->counters.dead++; }
void engine_note_duplicate(engine *e) { e->counters.duplicates++; }
