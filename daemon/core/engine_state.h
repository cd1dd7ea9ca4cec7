/* engine_state.h -- the engine's state layer (engine_state.c): the records
 * (users, items, orders, room holds), the expiry heap, the output lists the
 * shell drains, and the moves of units between items and holders. Every
 * other engine file stands on this one; it calls none of them, so a rule
 * (stock, rooms, groups, swaps, holds, the waitlist) can only change state
 * through the functions below, where the no-oversell and capacity asserts
 * live. Not a public header: everything outside the engine goes through
 * core/engine.h. Private functions are named engine__x (libuv's uv__x).
 * The small lookups are static inline so the split costs the hot path
 * nothing.
 */
#ifndef ALLOCD_ENGINE_STATE_H
#define ALLOCD_ENGINE_STATE_H

#include "core/engine.h"
#include "core/strmap.h"
#include "core/vec.h"

#define NO_ROOM UINT32_MAX
#define REQUEST_SPARE_IDS 260   /* > the largest group (256 members) */

/* gate()'s answer for an early=shuffle request before opens_at that passed
 * the throttle: kept for the lottery (engine_result.kept), never a result. */
#define REASON_KEEP_FOR_LOTTERY ((engine_reason)1000)

/* *_LOADED_OVER: loaded holding more than capacity / per_user (see engine_load.c's
 * note at its top); the only records the sweep lets break those limits. */
/* USER_STAFF: rooms: the bed was placed by staff without check (11.5). */
enum { USER_DIRTY = 1, USER_WINDOW = 2, USER_LOADED_OVER = 4, USER_STAFF = 8 };
enum { ITEM_DIRTY = 1, ITEM_CAP_CHANGED = 2, ITEM_LOADED_OVER = 4 };

typedef struct attr {
    const char *key;     /* both interned (engine__attr_intern): two attrs */
    const char *value;   /* with the same text share one pointer; canonical JSON */
} attr;

typedef struct item {
    char *id;
    int64_t capacity;
    int64_t free;  /* capacity - held; < 0 only if ITEM_LOADED_OVER */
    attr *attrs;
    struct item_rules *rules;  /* only_X / same_X (engine_elig.c), NULL if none */
    int64_t staff_held;        /* units (beds) held by staff without check (11.5):
                                  same_X does not read its value from them while
                                  the item has other holders (engine_elig.c) */
    uint32_t n_attrs;
    uint32_t free_at;          /* 1 + its place in engine.free_items; 0: free <= 0 */
    uint8_t flags;
} item;

typedef struct user {
    char *id;
    union {
        struct {             /* rooms */
            char *req;       /* request that gave the bed, NULL without one */
            int64_t since;
            uint32_t room;   /* item index or NO_ROOM */
        } r;
        struct {             /* stock */
            /* Live orders (HELD, CONFIRMED) first in grant order, then
             * tombstones. The capacity is implicit: the smallest power of
             * two >= n_orders, which saves a field per user. */
            engine_order *orders;
            int64_t units;
            uint32_t n_live;
            uint32_t n_orders;
        } s;
    } u;
    int64_t win_start;       /* throttle: fixed window start */
    int64_t penalty_until;
    uint32_t win_count;
    uint8_t flags;
} user;

/* The per-participant memory budget (256 bytes at a million users) rests
 * on this record staying small; see engine_state.c's note at its top. */
_Static_assert(sizeof(user) <= 56, "user record grew past its memory budget");

typedef struct expiry {
    int64_t at;
    uint64_t order;
    uint32_t user;
} expiry;

typedef struct ended {
    uint32_t user;
    engine_order order;
} ended;

/* A room batch's hold on a bed (contract 9.4, engine_hold.c), in a side
 * array by user index: the user record has no room for it. */
struct room_hold {
    uint64_t order;
    int64_t expires_at;   /* HELD only */
    uint8_t state;        /* 0 (none), ORDER_HELD, ORDER_CONFIRMED */
};

struct room_ended {
    uint64_t order;
    uint32_t user;
    uint8_t state;        /* ORDER_EXPIRED or ORDER_CANCELLED */
};

struct engine {
    engine_meta meta;
    engine_admin_state admin;
    engine_counters counters;
    int error;

    item *items;
    size_t n_items, cap_items;
    strmap item_map;
    /* the items with a unit free, in no order: what auto's filter and a
     * waitlist pass look through late in a round, when most are full
     * (kept by engine__free_add; as long as items, so never grown there) */
    uint32_t *free_items;
    size_t n_free_items, cap_free_items;
    /* every attr key and value, each text once: items' attrs point here,
     * so auto's filter compares pointers, not strings, with each room */
    strmap attr_map;
    char **attr_strs;
    size_t n_attr_strs, cap_attr_strs;
    user *users;
    size_t n_users, cap_users;
    strmap user_map;

    expiry *heap;
    size_t n_heap, cap_heap;

    uint32_t *dirty_users;
    size_t n_dirty_users, cap_dirty_users;
    uint32_t *dirty_items;
    size_t n_dirty_items, cap_dirty_items;
    uint32_t *fresh;            /* new participants */
    size_t n_fresh, cap_fresh;
    ended *ended;
    size_t n_ended, cap_ended;
    engine_event *events;
    size_t n_events, cap_events;

    /* the waitlist (engine_wait.c): live entries in wl[wl_head..n_wl) */
    struct wait_entry **wl;
    size_t n_wl, cap_wl, wl_head;
    struct wait_entry **wdone;  /* ended since the last drain */
    size_t n_wdone, cap_wdone;
    uint8_t wait_kick;          /* units came back: serve at the end of the call */
    uint8_t wait_unsorted;      /* loaded in hash order: sort before use */
    /* room holds (engine_hold.c): by user index; ended room orders */
    struct room_hold *holds;
    size_t cap_holds;
    struct room_ended *room_ended;
    size_t n_room_ended, cap_room_ended;

    /* selection slots (engine_slots.c): user -> ms, apart from the users */
    struct slot_entry *slots;
    size_t n_slots, cap_slots;
    strmap slot_map;
    int slots_ready;

    /* order ids drawn ahead by the waitlist's serving (engine_wait.c), used
     * first by new_order_id; wait_stalled: a serving pass stopped because
     * the source had none left (the shell brings more, then calls again) */
    uint64_t spare[REQUEST_SPARE_IDS];
    size_t n_spare;
    uint8_t wait_stalled;

    engine_order_fn order_fn;
    void *order_ctx;
    uint64_t next_order;        /* fallback order ids without a source */
    size_t unchecked;           /* ALLOCD_DEBUG: decisions since the last sweep */
    struct engine_groups *groups; /* formed groups (engine_groups.c), NULL until one */
    struct engine_swaps *swaps;   /* open swap offers (engine_swap.c), NULL until one */
    struct engine_profiles *prof; /* profiles (engine_elig.c), NULL until one */
    uint8_t elig_stale;           /* loaded holders: same_X values to recompute */
};

static inline int is_rooms(const engine *e) { return e->meta.kind == BATCH_ROOM; }

/* Index of a user or item, STRMAP_NONE when unknown. */
static inline uint32_t find_user(const engine *e, const char *id)
{
    return strmap_find(&e->user_map, id);
}

static inline uint32_t find_item(const engine *e, const char *id)
{
    return strmap_find(&e->item_map, id);
}

static inline int order_is_live(uint8_t state)
{
    return state == ORDER_HELD || state == ORDER_CONFIRMED;
}

static inline int order_is_tombstone(uint8_t state)
{
    return state == ORDER_EXPIRED || state == ORDER_CANCELLED;
}

static inline uint32_t orders_find(const user *u, uint64_t id)
{
    for (uint32_t i = 0; i < u->u.s.n_orders; i++)
        if (u->u.s.orders[i].id == id) return i;
    return STRMAP_NONE;
}

static inline int expiry_less(const expiry *a, const expiry *b)
{
    return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static inline int engine__hold_on(const engine *e)
{
    return is_rooms(e) && e->meta.hold_ms > 0;
}

static inline struct room_hold *engine__hold_of(const engine *e, uint32_t ui)
{
    return ui < e->cap_holds ? &e->holds[ui] : NULL;
}

/* An entry is live while its order is still HELD (confirm and cancel do
 * not search the heap; they leave the entry to be dropped at the top). */
static inline int expiry_live(const engine *e, const expiry *x)
{
    if (is_rooms(e)) {
        const struct room_hold *h = engine__hold_of(e, x->user);
        return h && h->state == ORDER_HELD && h->order == x->order;
    }
    const user *u = &e->users[x->user];
    uint32_t i = orders_find(u, x->order);
    return i != STRMAP_NONE && u->u.s.orders[i].state == ORDER_HELD;
}

static inline int engine__holds_bed(const engine *e, uint32_t ui)
{
    return ui != STRMAP_NONE && e->users[ui].u.r.room != NO_ROOM;
}

#define ENGINE__GROW(e, name, extra) \
    vec_reserve((void **)&(e)->name, &(e)->cap_##name, (e)->n_##name + (extra), \
                sizeof *(e)->name)

/* ---- small helpers ---- */
int64_t engine__sat_add(int64_t a, int64_t b);   /* saturating */
int engine__id_ok(const char *s);                 /* 1 to ENGINE_ID_MAX bytes */
char *engine__intern(const char *s);              /* a malloc'd copy, NULL without memory */
/* The engine's one copy of an attr text (added when new; NULL without
 * memory), and the copy if there is one (NULL: no item has that text). */
const char *engine__attr_intern(engine *e, const char *s);
const char *engine__attr_find(const engine *e, const char *s);
/* An allocation failed: the engine stays consistent (every decision
 * allocates before it changes anything) but decides nothing more. */
void engine__out_of_memory(engine *e);

/* ---- records ---- */
void engine__state_init(engine *e, uint64_t hash_seed);
void engine__state_free(engine *e);
/* A user by id, added when unknown (loading: not a new participant). */
uint32_t engine__user_load(engine *e, const char *id);
/* A user seen by a decision: new ones are listed for the writer once. */
uint32_t engine__user_touch(engine *e, const char *id);
/* The same with the id's engine_user_hash known (h). */
uint32_t engine__user_touch_hashed(engine *e, const char *id, uint32_t h);
/* Room for n users in the records and their map, made ahead of them and
 * mapped (vec_prefault): a user with a profile is expected to take part
 * (engine_profiles_expect_users). Growing while requests are decided copies the records
 * and rehashes the map in the middle of a chunk, and first touches of
 * fresh pages fault one by one; done while the profiles load, none of it
 * falls on a decision. A hint: 0, or -ENOMEM with nothing lost. */
int engine__users_expect(engine *e, size_t n);
uint32_t engine__item_add(engine *e, const char *id, int64_t capacity);

/* ---- units: every move of free units goes through these ---- */
/* Loading and set_capacity: free may go below 0 only when loading. */
void engine__free_add(engine *e, uint32_t it, int64_t delta);
/* A grant takes n free units; asserts they are free (no oversell). */
void engine__free_take(engine *e, uint32_t it, int64_t n);
/* A give-back returns n held units; asserts they were held. */
void engine__free_return(engine *e, uint32_t it, int64_t n);

/* ---- orders (stock) ---- */
int engine__orders_reserve(user *u);
void engine__orders_add_live(user *u, engine_order o);
void engine__orders_add_tombstone(user *u, engine_order o);
engine_order engine__orders_end(user *u, uint32_t i, uint8_t state);
uint64_t engine__order_id_new(engine *e);

/* ---- the expiry heap ---- */
void engine__heap_push(engine *e, expiry x);   /* room reserved */
void engine__heap_pop(engine *e);
void engine__heap_settle(engine *e);           /* drops dead entries off the top */

/* ---- outputs (reserve first, then push: a decision never fails halfway) ---- */
int engine__reserve(engine *e, size_t n_ev, size_t n_users, size_t n_items, size_t n_ends);
int engine__reserve_users(engine *e, size_t n);
/* Room for n more room holds, their heap entries and ended orders
 * (no-op without hold_ms). */
int engine__hold_reserve(engine *e, size_t n);
void engine__emit(engine *e, const engine_event *ev);
void engine__dirty_user(engine *e, uint32_t ui);
void engine__dirty_item(engine *e, uint32_t it, int capacity_changed);
void engine__note_ended(engine *e, uint32_t ui, engine_order o);

/* ---- beds (rooms) ---- */
/* What seating one user needs: their copy of the request id and room in
 * the output lists (`events`, `items`) and the holds. NULL (and the engine
 * failed) without memory. */
char *engine__seat_prepare(engine *e, const char *req_id, size_t events, size_t items);
/* Gives user ui (holding no bed) a bed in room it; req is their own copy of
 * the request id. Caller reserved 1 event, user, item. */
void engine__seat(engine *e, uint32_t ui, uint32_t it, char *req, const char *req_id,
                  int64_t now);
/* Takes user ui's bed back (an EVENT_RELEASE); returns the room. */
uint32_t engine__unseat(engine *e, uint32_t ui, const char *req_id, int64_t now);

/* ---- results ---- */
void engine__granted(engine *e, engine_result *out, const char *item_id);
void engine__done(engine_result *out, const char *item_id);

#endif
