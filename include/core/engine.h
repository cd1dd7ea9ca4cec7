/* engine.h -- the allocation engine: every decision allocd makes, and nothing else.
 *
 * The engine is the functional core of allocd. It holds one batch's state in
 * memory (items with capacity and free units, users with what they hold,
 * per-user throttle windows, counters) and decides one request at a time.
 * It does no I/O, knows nothing of Redis or JSON, and has no clock: the
 * caller passes `now` (ms since the Unix epoch) into every call that needs
 * time, and supplies order ids through a callback. That makes every decision
 * reproducible: a test can replay any sequence of requests and times and get
 * the same results, byte for byte.
 *
 * The worker modules are the imperative shell around it: batch_load.c and
 * wire/state_load.c load state from Redis with the engine_load_* calls,
 * decide.c feeds a chunk's parsed requests to engine_decide(), and
 * apply_txn.c drains what changed (dirty users and items, new participants,
 * log events) into one atomic transaction; batch_worker.c only sequences
 * them. If that write fails the worker throws the engine away and loads a
 * fresh one, so the engine never needs to undo anything.
 *
 * Strings passed in are copied when the engine keeps them; pointers the engine
 * hands out (item ids, user ids) stay valid until engine_free(). Event `req`
 * pointers point at the caller's request id and are only valid until the
 * caller frees that request: drain events before that.
 */
#ifndef ALLOCD_ENGINE_H
#define ALLOCD_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#define ENGINE_ID_MAX 64 /* longest request, user, item id in bytes */

typedef enum { BATCH_STOCK = 1, BATCH_ROOM = 2 } batch_kind;
typedef enum { EARLY_REJECT = 0, EARLY_SHUFFLE = 1 } early_mode;
/* Contract 9.2: formed = groups exist only through invite/accept (default);
 * listed = a `group` places the members it names (version 1). */
typedef enum { GROUPS_FORMED = 0, GROUPS_LISTED = 1 } groups_mode;
/* Whose selection slot a group uses (contract 9.4, core/engine_slots.h). */
typedef enum { GROUP_SLOT_EARLIEST = 0, GROUP_SLOT_LATEST, GROUP_SLOT_LEADER } group_slot_rule;
/* Contract 11.3: the opening draw ordered by profile points (core/lottery.h;
 * the engine only carries the setting for the shell). */
typedef enum { DRAW_BY_NONE = 0, DRAW_BY_POINTS = 1 } draw_by_mode;
/* Contract 11.4: any = a group takes a room with enough free beds; exact =
 * a group takes only an empty room of its size, a single user only a bed
 * in a room that has a holder or is a single. */
typedef enum { GROUP_FILL_ANY = 0, GROUP_FILL_EXACT = 1 } group_fill_mode;

/* Batch definition, from P:{B}:meta (section 2 of the contract). */
typedef struct engine_meta {
    batch_kind kind;
    int64_t opens_at;       /* ms; 0 = open from the start */
    int64_t closes_at;      /* ms; 0 = never */
    early_mode early;
    int64_t per_user;       /* stock: units one user may hold (held+confirmed) */
    int64_t hold_ms;        /* stock: 0 = buys are final */
    int64_t max_group;      /* rooms */
    int64_t rate_max;       /* 0 = throttle off */
    int64_t rate_window_ms;
    int64_t penalty_ms;
    groups_mode groups;     /* rooms */
    int64_t wait_ms;        /* waitlist: longest wait, 0 = until close */
    group_slot_rule group_slot; /* rooms: whose slot a group uses */
    draw_by_mode draw_by;   /* 11.3: early=shuffle's draw order */
    group_fill_mode group_fill; /* 11.4: rooms */
} engine_meta;

void engine_meta_defaults(engine_meta *m); /* kind left 0: caller must set it */

typedef enum {
    OP_NONE = 0,
    /* stock */
    OP_BUY, OP_CONFIRM, OP_CANCEL,
    /* rooms */
    OP_CHOOSE, OP_AUTO, OP_GROUP, OP_SWITCH, OP_RELEASE,
    /* admin (P:{B}:ctl) */
    OP_PAUSE, OP_RESUME, OP_CLOSE, OP_SET_CAPACITY,
    /* rooms, groups formed by consent (contract 9.2: core/engine_groups.c) */
    OP_INVITE, OP_ACCEPT, OP_DECLINE, OP_LEAVE, OP_PREFS,
    OP_SWAP,                   /* rooms, contract 9.3: core/engine_swap.c */
    /* admin (P:{B}:ctl), contract 11.5: staff placements (core/engine_staff.c) */
    OP_ASSIGN, OP_UNASSIGN
} engine_op;

const char *engine_op_name(engine_op op);
engine_op engine_op_parse(const char *name); /* OP_NONE when unknown */

/* One filter pair of `auto`/`group`: attribute key and its value as canonical
 * JSON text (compact, object keys sorted), so equality is strcmp. */
typedef struct engine_kv {
    const char *key;
    const char *value;
} engine_kv;

/* A parsed, validated request. All strings NUL-terminated, owned by the caller. */
typedef struct engine_request {
    engine_op op;
    const char *id;
    const char *user;          /* NULL for admin commands but assign/unassign */
    int64_t seq;               /* dequeue ordinal, 1-based; 0 for admin commands */
    const char *item;          /* buy: item; choose/switch: room; set_capacity,
                                  assign: item */
    int64_t qty;               /* buy, assign (stock): units (>= 1); set_capacity:
                                  new capacity */
    uint64_t order;            /* confirm, cancel; unassign (stock): 0 = all */
    const char *const *prefs;  /* auto, group: room ids in preference order */
    size_t n_prefs;
    /* engine_item_hash of prefs[0..ENGINE_PREF_HASHES), computed ahead by a
     * caller that warmed them (engine_prefetch_item); NULL: hashed here */
    const uint32_t *pref_hashes;
    /* engine_user_hash of user, computed ahead likewise (engine_prefetch_user);
     * NULL: hashed here */
    const uint32_t *user_hash;
    const char *const *members;/* group: user ids, including `user` */
    size_t n_members;
    const engine_kv *filter;   /* auto, group: NULL when absent */
    size_t n_filter;
    int has_filter;            /* a filter object was given (maybe empty) */
    const char *const *to;     /* invite: the users invited */
    size_t n_to;
    const char *peer;          /* accept, decline: `from` (the inviter); swap: `with` */
    int64_t version;           /* prefs: the version the sender read */
    int wait;                  /* "wait":true: join the waitlist instead of
                                  sold_out/room_full/no_room (core/engine_wait.h) */
    int check;                 /* assign: "check":true, eligibility (11.2) applies */
    /* A pool request's place in the opening draw and its points (9.1,
     * 11.3): carried, never read by the engine, so that a result the
     * waitlist decides later still carries them. draw 0: not drawn. */
    int64_t draw, points;
    int has_points;
} engine_request;

typedef enum {
    STATUS_NONE = 0, STATUS_GRANTED, STATUS_DONE, STATUS_REJECTED, STATUS_INVALID,
    STATUS_WAITING   /* replaced exactly once later: a waitlist place (engine_wait.h)
                    or a swap offer (engine_swap.h), contract 9.5 */
} engine_status;

typedef enum {
    REASON_NONE = 0,
    REASON_SOLD_OUT, REASON_ROOM_FULL, REASON_NO_ROOM, REASON_LIMIT, REASON_ALREADY_HOLDING,
    REASON_MEMBER_BUSY, REASON_NOT_HOLDING, REASON_UNKNOWN_ITEM, REASON_UNKNOWN_ORDER, REASON_EXPIRED,
    REASON_NOT_OPEN, REASON_CLOSED, REASON_PAUSED, REASON_THROTTLED, REASON_WRONG_KIND,
    REASON_GROUP_TOO_LARGE,
    REASON_NO_INVITATION, REASON_NOT_IN_GROUP, REASON_CONFLICT,
    REASON_NOT_ELIGIBLE,       /* 11.2: a rule of the item's attrs (engine_elig.h) */
    REASON_LAST = REASON_NOT_ELIGIBLE
} engine_reason;

const char *engine_status_name(engine_status s);
const char *engine_reason_name(engine_reason r);

/* What engine_decide() answers. Pointers stay valid until engine_free(). */
typedef struct engine_result {
    engine_status status;
    engine_reason reason;   /* REASON_NONE unless STATUS_REJECTED */
    const char *item;       /* granted/affected item or room, NULL if none */
    int64_t qty;            /* stock: units of the order; set_capacity: capacity */
    uint64_t order;         /* stock: order id, 0 if none */
    int64_t expires_at;     /* stock reservation: ms, 0 if final */
    int64_t rank;           /* granted: grants so far including this one */
    const char *group;      /* group ops: the group id, NULL if none */
    int64_t version;        /* prefs: the new version (done) or the current
                               one (conflict); has_version says it is set */
    int has_version;
    const char *const *members; /* a formed group's grant: its members */
    size_t n_members;
    int kept;               /* early=shuffle before opens_at: no result yet; the
                               request waits in the lottery pool (status STATUS_NONE,
                               not counted until it is served) */
    int64_t retry_at;       /* rejected/throttled: ms the penalty ends */
    int64_t opens_at;       /* rejected/not_open: ms the user may be served */
    int64_t wait_pos;       /* waiting: place on the waitlist when it joined, 1 = first */
    int64_t wait_no;        /* waiting, and the final result the waitlist gave:
                               its ticket on the waitlist, batch-wide */
    const char *by;         /* "staff" for assign/unassign (11.5), else NULL */
    int64_t pref;           /* auto/group grant: the room's place in prefs, 1 =
                               first choice; 0 = found by the filter */
} engine_result;

/* One state change, for P:{B}:log. Replaying all events of a batch in order
 * rebuilds every user's holding and every item's free units. */
typedef enum {
    EVENT_GRANT = 1, EVENT_RELEASE, EVENT_EXPIRE, EVENT_CONFIRM, EVENT_CANCEL, EVENT_CAPACITY,
    EVENT_STATE, EVENT_WAIT, EVENT_WAIT_SERVED
} engine_event_type;

const char *engine_event_name(engine_event_type t);

typedef struct engine_event {
    engine_event_type type;
    const char *user;       /* NULL for capacity/state */
    const char *item;       /* NULL for state */
    int64_t qty;            /* units (stock), 1 (rooms), new capacity (capacity) */
    uint64_t order;         /* stock, 0 otherwise */
    const char *req;        /* request or command id; NULL for expiry */
    int64_t at;             /* ms */
    int64_t expires_at;     /* grant of a reservation, else 0 */
    const char *state;      /* EVENT_STATE: "open", "paused", "closed", ... */
    int64_t wait_no;        /* EVENT_WAIT, EVENT_WAIT_SERVED: the ticket */
    engine_status status;   /* EVENT_WAIT_SERVED: the final result */
    engine_reason reason;   /* EVENT_WAIT_SERVED: REASON_NONE unless rejected */
    const char *by;         /* grant, release, cancel of an assign/unassign
                               (11.5): "staff"; NULL otherwise */
} engine_event;

/* Order states. HELD and CONFIRMED orders are live (in holders); EXPIRED and
 * CANCELLED are tombstones the engine keeps so that a later confirm or
 * cancel of that order is answered `expired` / `unknown_order` correctly,
 * also after a restart (the shell persists them, see engine_ended_*). */
enum { ORDER_HELD = 1, ORDER_CONFIRMED = 2, ORDER_EXPIRED = 3, ORDER_CANCELLED = 4 };

typedef struct engine_order {
    uint64_t id;
    uint32_t item;          /* index into the item table */
    int32_t qty;
    int64_t expires_at;     /* 0 when confirmed or final */
    uint8_t state;          /* ORDER_HELD or ORDER_CONFIRMED */
    uint8_t staff;          /* placed by staff without check (11.5): verify's
                               exception */
} engine_order;

/* Read-only views for the writer of holders/free (the shell encodes them). */
typedef struct engine_user_view {
    const char *id;
    /* rooms */
    const char *room;       /* NULL when holding no bed */
    int64_t since;
    const char *req;
    uint64_t room_order;    /* with hold_ms: the bed's order, 0 without */
    int room_state;         /* ORDER_HELD or ORDER_CONFIRMED, 0 without */
    int64_t room_expires_at;/* ORDER_HELD: the deadline */
    int staff;              /* the bed was placed by staff without check
                               (11.5): verify lists it as an exception */
    /* stock */
    const char *group;      /* rooms: the user's group id, NULL when none */
    int64_t units;          /* held + confirmed */
    const engine_order *orders; /* live orders only (HELD, CONFIRMED), oldest first */
    size_t n_orders;
} engine_user_view;

typedef struct engine_item_view {
    const char *id;
    int64_t capacity;
    int64_t free;
} engine_item_view;

/* Batch-wide counters, mirrored into P:{B}:stats. `processed` counts queue
 * requests that got a result (granted + done + rejected + invalid +
 * waiting + the open swap offers, engine_swap_open_count: a `waiting`
 * result is counted when given, and moves to granted or rejected when
 * replaced); admin commands are counted in `ctl` only. */
typedef struct engine_counters {
    int64_t processed, granted, done, rejected, invalid, dead, duplicates, ctl;
    /* staff placements (11.5): in granted and ctl, not in processed, which
     * counts queue requests (processed + staff_granted = the statuses) */
    int64_t staff_granted;
    /* waitlist (engine_wait.h): waiting now, the waitlist's length -- not
     * the open swap offers (read-only: derived), tickets
     * drawn so far, served from it (granted or refused at serve time),
     * ended by wait_ms or close */
    int64_t waiting, wait_joined, wait_served, wait_ended;
    int64_t participants;   /* distinct users seen (read-only: derived) */
    int64_t free_units;     /* sum of free over items (read-only: derived) */
} engine_counters;

typedef enum {
    ADMIN_NONE = 0, ADMIN_PAUSED = 1, ADMIN_CLOSED = 2
} engine_admin_state;

typedef enum {
    PHASE_WAITING = 0, PHASE_OPEN, PHASE_PAUSED, PHASE_CLOSED
} engine_phase;

const char *engine_phase_name(engine_phase p); /* "waiting", "open", ... */

typedef struct engine engine;

/* Supplies a fresh order id (never 0) each call. */
typedef uint64_t (*engine_order_fn)(void *ctx);

engine *engine_new(const engine_meta *meta, uint64_t hash_seed);
void engine_free(engine *e);
const engine_meta *engine_get_meta(const engine *e);
void engine_set_order_source(engine *e, engine_order_fn fn, void *ctx);
/* Added: 0, or -ENOMEM once an allocation failed in engine_decide,
 * engine_expire or engine_note_invalid. The engine is still consistent
 * (nothing was half-applied; the failed decision's result is STATUS_NONE) but
 * refuses further decisions: throw it away and load a fresh one. */
int engine_error(const engine *e);

/* ---- loading (before the first decision) ---- */
/* Returns 0, or -EINVAL (bad arguments), -EEXIST (item twice),
 * -ENOENT (unknown item), -ENOMEM. Loading does not mark anything dirty and
 * emits no events. */
int engine_load_item(engine *e, const char *item, int64_t capacity);
int engine_load_attr(engine *e, const char *item, const char *key,
                     const char *value_canonical);
int engine_load_room_holder(engine *e, const char *user, const char *room,
                            int64_t since, const char *req);
/* state: ORDER_HELD, ORDER_CONFIRMED, or a tombstone (EXPIRED/CANCELLED,
 * which holds no units). Room batches with hold_ms (contract 9.4): the
 * hold of a bed loaded with engine_load_room_holder (item = its room,
 * qty 1), or a tombstone. */
int engine_load_order(engine *e, const char *user, uint64_t order,
                      const char *item, int64_t qty, int state,
                      int64_t expires_at);
int engine_load_participant(engine *e, const char *user);
void engine_load_counters(engine *e, const engine_counters *c);
void engine_load_admin_state(engine *e, engine_admin_state s);
/* 11.5: a loaded holding was placed by staff without check: the user's bed
 * (rooms, order 0) or that stock order. 0, -EINVAL, -ENOENT. */
int engine_load_staff(engine *e, const char *user, uint64_t order);

/* ---- deciding ---- */
/* Decides one request at time `now`. Always fills *out. A request that gets
 * STATUS_GRANTED or STATUS_DONE may change state and emit events. Reservations due
 * by `now` are expired first, exactly as engine_expire(now) would (EXPIRE
 * events, ended orders), so any call may emit those. */
/* Cache warming for a run of decisions (engine_prefetch.c): h is
 * engine_user_hash of a request's user; stage 0 asks for the user's hash
 * slot, 1 (once 0 is in cache) for the user's record, 2 for its id. Never
 * changes a decision. */
uint32_t engine_user_hash(const engine *e, const char *id);
void engine_prefetch_user(const engine *e, uint32_t h, int stage);
/* The same for the rooms of a request's preferences: the first
 * ENGINE_PREF_HASHES, hashed once (engine_request.pref_hashes); stage 2
 * warms the room's id and its rules. */
#define ENGINE_PREF_HASHES 3
uint32_t engine_item_hash(const engine *e, const char *id);
void engine_prefetch_item(const engine *e, uint32_t h, int stage);
void engine_decide(engine *e, const engine_request *r, int64_t now,
                   engine_result *out);
/* Counts a result the shell decided without the engine (an `invalid` from the
 * parser) or a request the shell dropped; `user` may be NULL. Marks the
 * user as a participant when given. */
void engine_note_invalid(engine *e, const char *user, int64_t now);
void engine_note_dead(engine *e);
void engine_note_duplicate(engine *e);

/* Expires every held reservation with expires_at <= now: units return,
 * EVENT_EXPIRE events are emitted. Returns how many orders expired. */
size_t engine_expire(engine *e, int64_t now);
/* Earliest pending expires_at, or INT64_MAX when none. */
int64_t engine_next_expiry(const engine *e);

/* ---- state ---- */
engine_phase engine_phase_at(const engine *e, int64_t now);
engine_admin_state engine_get_admin_state(const engine *e);
const engine_counters *engine_get_counters(const engine *e);

int engine_user_view_get(const engine *e, const char *user, engine_user_view *v);
int engine_item_view_get(const engine *e, const char *item, engine_item_view *v);
size_t engine_item_count(const engine *e);
void engine_item_view_at(const engine *e, size_t i, engine_item_view *v);
size_t engine_user_count(const engine *e);
/* Added: user i (0 <= i < engine_user_count) in load/first-seen order. */
void engine_user_view_at(const engine *e, size_t i, engine_user_view *v);

/* ---- draining what changed since the last drain ---- */
/* Users whose holding changed (their holders entry must be rewritten, or
 * deleted when the view holds nothing), items whose free changed or whose
 * capacity changed, users seen for the first time, and events in order.
 * engine_drain_clear() forgets all of them (call once they are encoded
 * for writing; a write that then fails must reload the engine). */
size_t engine_dirty_user_count(const engine *e);
void engine_dirty_user_at(const engine *e, size_t i, engine_user_view *v);
size_t engine_dirty_item_count(const engine *e);
void engine_dirty_item_at(const engine *e, size_t i, engine_item_view *v,
                          int *capacity_changed);
size_t engine_new_participant_count(const engine *e);
const char *engine_new_participant_at(const engine *e, size_t i);
/* Orders that ended (expired or cancelled) since the last drain. */
size_t engine_ended_count(const engine *e);
void engine_ended_at(const engine *e, size_t i, const char **user,
                     engine_order *order);
size_t engine_event_count(const engine *e);
const engine_event *engine_event_at(const engine *e, size_t i);
void engine_drain_clear(engine *e);

/* ---- invariants ---- */
/* Checks the whole state: NULL when every invariant holds, else a short
 * description (a static string) of the first one broken. The invariants:
 * held + free == capacity for every item (free < 0 only for an item loaded
 * beyond its capacity), units == the sum of live orders and <= per_user
 * (unless loaded beyond it), live orders before ended ones, one live heap
 * entry per held reservation, one bed per user in a room that exists, the
 * id maps, free_units and participants, the drain lists. O(users + items +
 * orders); ALLOCD_DEBUG builds run it after decisions and expiries (every
 * one while the engine is small, then amortized to a few dozen record
 * checks a call) and abort naming the breach. Cheap checks on each change
 * run in every build (core/assert.h). */
const char *engine_check_invariants(const engine *e);


#endif
