/* engine_int.h -- the engine's records, shared by the files of the engine
 * only (engine.c decides; engine_view.c reads; engine_check.c sweeps). Not
 * a public header: everything outside the engine goes through engine.h.
 * The small lookups are static inline so the split costs the hot path
 * nothing.
 */
#ifndef ALLOCD_ENGINE_INT_H
#define ALLOCD_ENGINE_INT_H

#include "core/engine.h"
#include "core/strmap.h"

#define NO_ROOM UINT32_MAX
#define REQUEST_SPARE_IDS 260   /* > the largest group (256 members) */

/* gate()'s answer for an early=shuffle request before opens_at that passed
 * the throttle: kept for the lottery (engine_result.kept), never a result. */
#define REASON_KEEP_FOR_LOTTERY ((engine_reason)1000)

/* *_LOADED_OVER: loaded holding more than capacity / per_user (see engine.c's
 * note at its top); the only records the sweep lets break those limits. */
enum { USER_DIRTY = 1, USER_WINDOW = 2, USER_LOADED_OVER = 4 };
enum { ITEM_DIRTY = 1, ITEM_CAP_CHANGED = 2, ITEM_LOADED_OVER = 4 };

typedef struct attr {
    char *key;
    char *value;   /* canonical JSON, compared with strcmp */
} attr;

typedef struct item {
    char *id;
    int64_t capacity;
    int64_t free;  /* capacity - held; < 0 only if ITEM_LOADED_OVER */
    attr *attrs;
    uint32_t n_attrs;
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
 * on this record staying small; see engine.c's note at its top. */
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

struct engine {
    engine_meta meta;
    engine_admin_state admin;
    engine_counters counters;
    int error;

    item *items;
    size_t n_items, cap_items;
    strmap item_map;
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

/* An entry is live while its order is still HELD (confirm and cancel do
 * not search the heap; they leave the entry to be dropped here). */
int engine_hold_live(const engine *e, const expiry *x);

static inline int expiry_live(const engine *e, const expiry *x)
{
    if (is_rooms(e)) return engine_hold_live(e, x);
    const user *u = &e->users[x->user];
    uint32_t i = orders_find(u, x->order);
    return i != STRMAP_NONE && u->u.s.orders[i].state == ORDER_HELD;
}

/* Hooks between engine.c and engine_groups.c (groups formed by consent). */
engine_reason engine_groups_decide(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out);
const char *engine_groups_user_group(const engine *e, uint32_t ui);
/* The members of user ui's formed group (members[0] leads), or 0 when the
 * user is in none. */
size_t engine_groups_members(const engine *e, uint32_t ui, const char *const **members);
void engine_groups_drain_clear(engine *e);
void engine_groups_free(engine *e);
/* engine_check_invariants' part for groups / swaps: NULL or the breach. */
const char *engine_groups_check(const engine *e);
const char *engine_swaps_check(const engine *e);
/* Hooks between engine.c and engine_swap.c (swaps, contract 9.3). */
engine_reason engine_swaps_decide(engine *e, uint32_t ui, const engine_request *r,
                                  int64_t now, engine_result *out);
/* User ui's bed is about to go (release, switch): their offers and the
 * offers to them end not_holding. -ENOMEM (nothing changed) or 0. */
int engine_swaps_bed_gone(engine *e, uint32_t ui, int64_t now);
/* The batch closed (by command or at closes_at): every offer ends closed. */
void engine_swaps_close(engine *e, int64_t now);
void engine_swaps_drain_clear(engine *e);
void engine_swaps_free(engine *e);
/* engine.c: exchanges the beds of ui and vi (both hold one), as two
 * releases and two grants in the log. -ENOMEM (nothing changed) or 0. */
int engine_exchange_beds(engine *e, uint32_t ui, uint32_t vi, const char *req_u,
                         const char *req_v, int64_t now);
int engine_holds_bed(const engine *e, uint32_t ui);

/* engine.c's own steps, for engine_groups.c */
engine_reason engine_seat_members(engine *e, const engine_request *r, int64_t now, engine_result *out);
uint32_t engine_touch_user(engine *e, const char *id);
uint32_t engine_load_user(engine *e, const char *id);   /* not a new participant */
int engine_reserve_users(engine *e, size_t n);
void engine_out_of_memory(engine *e);

/* ALLOCD_DEBUG builds: the whole-state sweep after a decision or an
 * expiry (engine_check.c); a no-op otherwise. */
void engine_debug_sweep(engine *e);

/* The waitlist's hooks (engine_wait.c). join: a request refused `why`
 * joins instead when it asked to wait and may (1, *out is STATUS_WAITING);
 * step: ends what ran out and serves what fits, at the end of every
 * decision and expiry; the engine's drain and free. */
int engine_wait_join(engine *e, const engine_request *r, engine_reason *why,
                     int64_t now, engine_result *out);
void engine_wait_step(engine *e, int64_t now);
void engine_wait_drain_clear(engine *e);
void engine_wait_free(engine *e);
/* Holds for rooms (engine_hold.c): on (rooms with hold_ms), reserve room
 * for n more before a decision, start one after a seat (out gets order and
 * expires_at), clear at release, expire (from the heap), confirm and
 * cancel, the gate's exception for confirm/cancel, views, loading. */
int engine_hold_on(const engine *e);
int engine_hold_reserve(engine *e, size_t n);
void engine_hold_start(engine *e, uint32_t ui, int64_t now, engine_result *out);
void engine_hold_clear(engine *e, uint32_t ui);
void engine_hold_expire(engine *e, uint32_t ui, int64_t now);
engine_reason engine_hold_confirm(engine *e, uint32_t ui, const engine_request *r,
                                  int64_t now, engine_result *out);
engine_reason engine_hold_cancel(engine *e, uint32_t ui, const engine_request *r,
                                 int64_t now, engine_result *out);
int engine_hold_op_ok(const engine *e, engine_op op);
void engine_hold_view(const engine *e, uint32_t ui, engine_user_view *v);
int engine_hold_load(engine *e, const char *uid, uint64_t order, const char *room,
                     int state, int64_t expires_at);
void engine_hold_free(engine *e);
/* check_heap for a room batch: NULL when the heap and the holds agree. */
const char *engine_hold_check(const engine *e);
/* engine.c's own steps, for engine_hold.c: an order id, a heap entry (room
 * reserved), the output reservation, an event, a dirty user, and taking a
 * user's bed away (an EVENT_RELEASE; returns the room). */
uint64_t engine_new_order_id(engine *e);
void engine_heap_push(engine *e, expiry x);
void engine_heap_settle(engine *e);   /* drops dead entries off the top */
int engine_reserve(engine *e, size_t n_ev, size_t n_users, size_t n_items, size_t n_ends);
void engine_emit(engine *e, const engine_event *ev);
void engine_dirty_user(engine *e, uint32_t ui);
uint32_t engine_unseat(engine *e, uint32_t ui, const char *req_id, int64_t now);

void engine_slots_free(engine *e);

/* The waitlist's part of engine_check_invariants (NULL when sound). */
const char *engine_wait_check(const engine *e);
/* One op's own decision (engine.c's decide_op) for the waitlist's serving:
 * no phase, throttle or kind gate, no counting. */
engine_reason engine_op_decide(engine *e, uint32_t ui, const engine_request *r,
                               int64_t now, engine_result *out);

#endif
