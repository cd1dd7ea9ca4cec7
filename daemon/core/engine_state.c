/* engine_state.c -- the engine's state layer (engine_state.h): records,
 * orders, the expiry heap, the output lists, and every move of units.
 *
 * The rules live in the files above this one (engine_stock, engine_rooms,
 * engine_groups, engine_swap, engine_hold, engine_wait); they change state
 * only through these functions, and this file calls none of them. That is
 * what puts the no-oversell and capacity asserts in one place: a grant
 * takes units only through engine__free_take (free >= n), a give-back
 * returns them only through engine__free_return (never past capacity),
 * and a bed is given only through engine__seat (one bed per user).
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
 */
#include "engine_state.h"
#include "core/assert.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Times come from a clock but limits from an operator: never overflow. */
int64_t engine__sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

/* 1 to ENGINE_ID_MAX bytes; never reads past the limit. */
int engine__id_ok(const char *s)
{
    if (!s || !*s) return 0;
    for (size_t n = 0; n <= ENGINE_ID_MAX; n++)
        if (!s[n]) return 1;
    return 0;
}

char *engine__intern(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static const char *user_key(const void *ctx, uint32_t i)
{
    return ((const engine *)ctx)->users[i].id;
}

static const char *item_key(const void *ctx, uint32_t i)
{
    return ((const engine *)ctx)->items[i].id;
}

static const char *attr_key(const void *ctx, uint32_t i)
{
    return ((const engine *)ctx)->attr_strs[i];
}

const char *engine__attr_find(const engine *e, const char *s)
{
    uint32_t i = strmap_find(&e->attr_map, s);
    return i == STRMAP_NONE ? NULL : e->attr_strs[i];
}

const char *engine__attr_intern(engine *e, const char *s)
{
    uint32_t h = strmap_hash32(&e->attr_map, s);
    uint32_t i = strmap_find_hashed(&e->attr_map, s, h);
    if (i != STRMAP_NONE) return e->attr_strs[i];
    if (e->n_attr_strs >= STRMAP_NONE - 1 || ENGINE__GROW(e, attr_strs, 1) < 0) return NULL;
    char *c = engine__intern(s);
    if (!c) return NULL;
    i = (uint32_t)e->n_attr_strs;
    e->attr_strs[i] = c;
    if (strmap_insert_hashed(&e->attr_map, c, i, h) < 0) {
        free(c);
        return NULL;
    }
    e->n_attr_strs++;
    return c;
}

/* Records that an allocation failed: the engine is still consistent
 * (every decision allocates before it changes anything) but refuses further
 * decisions, and the shell sees -ENOMEM through engine_error(). Memory is
 * the only thing a pure engine can run out of, hence the one error code. */
void engine__out_of_memory(engine *e)
{
    if (!e->error) e->error = -ENOMEM;
}

static uint32_t add_user_hashed(engine *e, const char *id, uint32_t h)
{
    if (e->n_users >= STRMAP_NONE - 1 || ENGINE__GROW(e, users, 1) < 0) return STRMAP_NONE;
    char *s = engine__intern(id);
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

int engine__users_expect(engine *e, size_t n)
{
    if (n <= e->cap_users || n >= STRMAP_NONE - 1) return 0;
    if (ENGINE__GROW(e, users, n - e->n_users) < 0) return -ENOMEM;
    vec_prefault(e->users + e->n_users, (n - e->n_users) * sizeof *e->users);   /* n, not the spare */
    return strmap_reserve(&e->user_map, (uint32_t)n);
}

/* Every user record is a participant: users enter the engine only by being
 * seen (a request, an invalid, a group grant) or by being loaded. The key
 * is hashed once for the find and the insert. */
uint32_t engine__user_load(engine *e, const char *id)
{
    uint32_t h = strmap_hash32(&e->user_map, id);
    uint32_t i = strmap_find_hashed(&e->user_map, id, h);
    return i != STRMAP_NONE ? i : add_user_hashed(e, id, h);
}

/* A user seen by a decision: new ones are listed for the writer once. */
uint32_t engine__user_touch(engine *e, const char *id)
{
    return engine__user_touch_hashed(e, id, strmap_hash32(&e->user_map, id));
}

uint32_t engine__user_touch_hashed(engine *e, const char *id, uint32_t h)
{
    ALLOC_DEBUG_ASSERT(h == strmap_hash32(&e->user_map, id));
    uint32_t i = strmap_find_hashed(&e->user_map, id, h);
    if (i != STRMAP_NONE) return i;
    if (ENGINE__GROW(e, fresh, 1) < 0) return STRMAP_NONE;
    i = add_user_hashed(e, id, h);
    if (i != STRMAP_NONE) e->fresh[e->n_fresh++] = i;
    return i;
}

/* Keeps item it in free_items exactly while it has a unit free. */
static void free_list_update(engine *e, uint32_t it)
{
    item *p = &e->items[it];
    if (p->free > 0 && !p->free_at) {
        ALLOC_ASSERT(e->n_free_items < e->cap_free_items);
        e->free_items[e->n_free_items++] = it;
        p->free_at = (uint32_t)e->n_free_items;
    } else if (p->free <= 0 && p->free_at) {
        uint32_t last = e->free_items[--e->n_free_items];
        e->free_items[p->free_at - 1] = last;
        e->items[last].free_at = p->free_at;
        p->free_at = 0;
    }
}

uint32_t engine__item_add(engine *e, const char *id, int64_t capacity)
{
    if (e->n_items >= STRMAP_NONE - 1 || ENGINE__GROW(e, items, 1) < 0 ||
        vec_reserve((void **)&e->free_items, &e->cap_free_items, e->n_items + 1, sizeof *e->free_items) < 0)
        return STRMAP_NONE;
    char *s = engine__intern(id);
    if (!s) return STRMAP_NONE;
    uint32_t i = (uint32_t)e->n_items;
    e->items[i] = (item){ .id = s, .capacity = capacity, .free = capacity };
    if (strmap_insert(&e->item_map, s, i) < 0) {
        free(s);
        return STRMAP_NONE;
    }
    e->n_items++;
    free_list_update(e, i);
    e->counters.free_units += capacity;
    if (capacity > 0) e->wait_kick = 1;
    return i;
}

/* free and the batch-wide free_units move together. Loading calls this
 * directly (it may take free below 0); decisions go through take_free and
 * return_free, which assert that the units are there to move. */
void engine__free_add(engine *e, uint32_t it, int64_t delta)
{
    if (delta > 0) e->wait_kick = 1;   /* units came back: serve the waitlist */
    e->items[it].free += delta;
    e->counters.free_units += delta;
    free_list_update(e, it);
}

/* A grant takes n free units (beds). Every grant checks free >= n before
 * it gets here, which is what keeps free >= 0 for every decision. */
void engine__free_take(engine *e, uint32_t it, int64_t n)
{
    ALLOC_DEBUG_ASSERT(it < e->n_items && n >= 1);
    ALLOC_ASSERT(e->items[it].free >= n);
    engine__free_add(e, it, -n);
}

/* A release, cancel or expiry gives back n units that were held, so free
 * can at most come back to capacity (held, capacity - free, stays >= 0). */
void engine__free_return(engine *e, uint32_t it, int64_t n)
{
    ALLOC_DEBUG_ASSERT(it < e->n_items && n >= 1);
    ALLOC_ASSERT(n <= e->items[it].capacity - e->items[it].free);
    engine__free_add(e, it, n);
}

/* Grows a user's orders array by one slot when it is full; the capacity is
 * the smallest power of two >= n_orders. */
int engine__orders_reserve(user *u)
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
void engine__orders_add_live(user *u, engine_order o)
{
    ALLOC_ASSERT(order_is_live(o.state) && o.qty >= 1 && o.id != 0);
    engine_order *v = u->u.s.orders;
    uint32_t n = u->u.s.n_orders++;
    if (u->u.s.n_live < n) v[n] = v[u->u.s.n_live]; /* first tombstone to the end */
    v[u->u.s.n_live++] = o;
    u->u.s.units += o.qty;
}

void engine__orders_add_tombstone(user *u, engine_order o)
{
    ALLOC_ASSERT(order_is_tombstone(o.state));
    u->u.s.orders[u->u.s.n_orders++] = o;
}

/* Moves live order i to the tombstones with `state`; live order stays in
 * grant order. Returns the order as it is now. Only a live order ends, and
 * only once: its units leave the user's total exactly once. */
engine_order engine__orders_end(user *u, uint32_t i, uint8_t state)
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

void engine__heap_push(engine *e, expiry x)
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

void engine__heap_pop(engine *e)
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

void engine__heap_settle(engine *e)
{
    while (e->n_heap && !expiry_live(e, &e->heap[0])) engine__heap_pop(e);
}

/* Reserves room in the output lists so that the pushes of one decision
 * cannot fail halfway. */
int engine__reserve(engine *e, size_t n_ev, size_t n_users, size_t n_items,
                   size_t n_ends)
{
    if (ENGINE__GROW(e, events, n_ev) < 0 || ENGINE__GROW(e, dirty_users, n_users) < 0 ||
        ENGINE__GROW(e, dirty_items, n_items) < 0 || ENGINE__GROW(e, ended, n_ends) < 0) {
        engine__out_of_memory(e);
        return -ENOMEM;
    }
    return 0;
}

void engine__emit(engine *e, const engine_event *ev)
{
    ALLOC_ASSERT(e->n_events < e->cap_events);
    e->events[e->n_events++] = *ev;
}

void engine__dirty_user(engine *e, uint32_t u)
{
    if (e->users[u].flags & USER_DIRTY) return;
    ALLOC_ASSERT(e->n_dirty_users < e->cap_dirty_users);
    e->users[u].flags |= USER_DIRTY;
    e->dirty_users[e->n_dirty_users++] = u;
}

void engine__dirty_item(engine *e, uint32_t it, int capacity_changed)
{
    item *p = &e->items[it];
    if (capacity_changed) p->flags |= ITEM_CAP_CHANGED;
    if (p->flags & ITEM_DIRTY) return;
    ALLOC_ASSERT(e->n_dirty_items < e->cap_dirty_items);
    p->flags |= ITEM_DIRTY;
    e->dirty_items[e->n_dirty_items++] = it;
}

void engine__note_ended(engine *e, uint32_t u, engine_order o)
{
    ALLOC_ASSERT(e->n_ended < e->cap_ended);
    e->ended[e->n_ended++] = (ended){ u, o };
}

/* One call to the order source per granted buy. Without a source (tests,
 * tools) ids count up from 1. */
uint64_t engine__order_id_new(engine *e)
{
    if (e->n_spare) return e->spare[--e->n_spare];
    if (e->order_fn) return e->order_fn(e->order_ctx);
    return e->next_order++;
}

static void free_user(engine *e, user *u)
{
    if (is_rooms(e)) free(u->u.r.req);
    else free(u->u.s.orders);
    free(u->id);
}

static void free_item(item *it)
{
    free(it->attrs);   /* their texts are the engine's (attr_strs) */
    free(it->id);
}

/* Gives user `ui` a bed in room `it`; `req` is their own copy of the request
 * id. Caller reserved 1 event, 1 user, 1 item. */
void engine__seat(engine *e, uint32_t ui, uint32_t it, char *req,
                 const char *req_id, int64_t now)
{
    user *u = &e->users[ui];
    ALLOC_ASSERT(u->u.r.room == NO_ROOM);   /* one bed per user */
    engine__free_take(e, it, 1);                    /* never past the room's beds */
    u->u.r.room = it;
    u->u.r.since = now;
    free(u->u.r.req);
    u->u.r.req = req;
    engine__emit(e, &(engine_event){ .type = EVENT_GRANT, .user = u->id,
                             .item = e->items[it].id, .qty = 1, .req = req_id,
                             .at = now });
    engine__dirty_user(e, ui);
    engine__dirty_item(e, it, 0);
}

/* Takes the bed away from user `ui` (who holds one). Caller reserved. */
uint32_t engine__unseat(engine *e, uint32_t ui, const char *req_id, int64_t now)
{
    user *u = &e->users[ui];
    uint32_t it = u->u.r.room;
    ALLOC_ASSERT(it != NO_ROOM);
    engine__free_return(e, it, 1);
    u->u.r.room = NO_ROOM;
    if (u->flags & USER_STAFF) e->items[it].staff_held--;
    u->flags &= (uint8_t)~USER_STAFF;   /* a staff placement ends with its bed */
    free(u->u.r.req);
    u->u.r.req = NULL;
    engine__emit(e, &(engine_event){ .type = EVENT_RELEASE, .user = u->id,
                             .item = e->items[it].id, .qty = 1, .req = req_id,
                             .at = now });
    engine__dirty_user(e, ui);
    engine__dirty_item(e, it, 0);
    return it;
}

/* Allocates what seating one user needs: their copy of the request id and
 * room in the output lists. NULL (and the engine failed) without memory. */
char *engine__seat_prepare(engine *e, const char *req_id, size_t events, size_t items)
{
    char *s = engine__intern(req_id ? req_id : "");
    if (!s) {
        engine__out_of_memory(e);
        return NULL;
    }
    if (engine__reserve(e, events, 1, items, 0) < 0 || engine__hold_reserve(e, 1) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

void engine__granted(engine *e, engine_result *out, const char *item_id)
{
    out->status = STATUS_GRANTED;
    out->item = item_id;
    out->rank = e->counters.granted + 1;   /* counted right after */
}

void engine__done(engine_result *out, const char *item_id)
{
    out->status = STATUS_DONE;
    out->item = item_id;
}

engine_phase engine_phase_at(const engine *e, int64_t now)
{
    if (e->admin == ADMIN_CLOSED || (e->meta.closes_at != 0 && now >= e->meta.closes_at))
        return PHASE_CLOSED;
    if (e->admin == ADMIN_PAUSED) return PHASE_PAUSED;
    if (now < e->meta.opens_at) return PHASE_WAITING;
    return PHASE_OPEN;
}


/* ---------------------------------------------------------------- lifecycle */

void engine__state_init(engine *e, uint64_t hash_seed)
{
    /* Users and items get different keys: knowing one map's layout tells
     * nothing about the other's. */
    strmap_init(&e->user_map, hash_seed, user_key, e);
    strmap_init(&e->item_map, hash_seed ^ 0x5bd1e9955bd1e995ULL, item_key, e);
    strmap_init(&e->attr_map, hash_seed ^ 0xc2b2ae3d27d4eb4fULL, attr_key, e);
    e->next_order = 1;
}

void engine__state_free(engine *e)
{
    for (size_t i = 0; i < e->n_users; i++) free_user(e, &e->users[i]);
    for (size_t i = 0; i < e->n_items; i++) free_item(&e->items[i]);
    free(e->users);
    free(e->items);
    free(e->free_items);
    for (size_t i = 0; i < e->n_attr_strs; i++) free(e->attr_strs[i]);
    free(e->attr_strs);
    strmap_free(&e->attr_map);
    strmap_free(&e->user_map);
    strmap_free(&e->item_map);
    free(e->heap);
    free(e->dirty_users);
    free(e->dirty_items);
    free(e->fresh);
    free(e->ended);
    free(e->events);
    free(e->holds);
    free(e->room_ended);
}

/* vec_reserve, with the new slots zeroed: a slot holds nothing until set. */
static int hgrow(void **p, size_t *cap, size_t need, size_t elem)
{
    size_t old = *cap;
    int rc = vec_reserve(p, cap, need, elem);
    if (rc == 0 && *cap > old) memset((char *)*p + old * elem, 0, (*cap - old) * elem);
    return rc;
}

/* Room for `n` more holds (users that may be new), their heap entries and
 * ended orders: before a decision changes anything. */
int engine__hold_reserve(engine *e, size_t n)
{
    if (!engine__hold_on(e)) return 0;
    if (hgrow((void **)&e->holds, &e->cap_holds, e->n_users + n, sizeof *e->holds) < 0 ||
        hgrow((void **)&e->heap, &e->cap_heap, e->n_heap + n, sizeof *e->heap) < 0 ||
        hgrow((void **)&e->ended, &e->cap_ended, e->n_ended + 1, sizeof *e->ended) < 0 ||
        hgrow((void **)&e->room_ended, &e->cap_room_ended, e->n_room_ended + 1,
              sizeof *e->room_ended) < 0) {
        engine__out_of_memory(e);
        return -ENOMEM;
    }
    return 0;
}

int engine__reserve_users(engine *e, size_t n) { return ENGINE__GROW(e, dirty_users, n); }
