/* replay.h -- a batch's event log replayed into holders, units held per
 * item and the waitlist: the one set of replay rules.
 *
 * The contract promises that P:{B}:log is written in the same atomic step
 * as every change of holders and free, so replaying it from the start
 * rebuilds them exactly. Four readers rely on that -- `allocctl verify`
 * and `reconcile` (tools/allocctl/ctl_replay.c), the chaos checker, the
 * simulator -- and the engine's property test replays the events it
 * checks. They all feed this module, so a new event type or field is
 * taught once (docs/ALLOCCTL.md lists the rules).
 *
 * Pure: no JSON, no Redis, no I/O. The caller decodes each event of either
 * log format into a replay_event (wire/log_entry.h: log_entry_event) and
 * feeds them in log order; each rule the log breaks becomes a finding (a
 * kind and a human-readable line) through the callback. The rebuilt state
 * is read back through replay_user_* / replay_item_* / replay_wait_* and
 * compared with a snapshot by the caller, which reports its differences
 * through replay_finding() so that every finding is counted in one place.
 */
#ifndef ALLOCD_REPLAY_H
#define ALLOCD_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"

/* What a finding says about the batch: callers that keep tallies (the
 * chaos checker) count them apart. */
typedef enum replay_kind {
    REPLAY_BAD_ENTRY = 1,   /* an entry that cannot be read: unknown type, bad field */
    REPLAY_OVERSOLD,        /* capacity, per_user or one bed per user exceeded */
    REPLAY_MISMATCH,        /* an event about a holding that is not as the log left it,
                               or state that differs from the replay */
} replay_kind;

/* Index 0 of the counts' by_type: a type the replay does not know. */
#define REPLAY_TYPE_OTHER 0
#define REPLAY_TYPES (EVENT_WAIT_SERVED + 1)

/* One decoded event. Strings are "" when the event has none; they need to
 * live only until replay_apply returns. */
typedef struct replay_event {
    int type;               /* an engine_event_type, or REPLAY_TYPE_OTHER */
    const char *type_name;  /* as logged, for findings */
    const char *user, *item, *order, *req, *state;
    const char *by;         /* "staff" for a staff placement (contract 11.5), else "" */
    int64_t qty, at, expires_at, wait_no;
} replay_event;

/* A stock order as the log left it. */
typedef struct replay_order {
    char *order, *item, *by;
    int64_t qty;
    int64_t expires_at;     /* 0 once confirmed */
    int state;              /* ORDER_HELD or ORDER_CONFIRMED */
} replay_order;

/* One user the log has named. Holds nothing when item is NULL (rooms) and
 * n_orders is 0 (stock). */
typedef struct replay_user {
    char *id;
    /* rooms: the bed, and its hold (contract 9.4) when order is set */
    char *item, *req, *order, *by;
    int64_t since, expires_at;
    int state;              /* ORDER_HELD / ORDER_CONFIRMED with order, else 0 */
    /* stock: the live orders, in the order of their grants */
    replay_order *orders;
    size_t n_orders, cap_orders;
    int64_t units;
    /* rooms: the bed a release just gave back, for a switch's grant */
    int moving;
    char *moving_req, *moving_order;
    int moving_state;
    int64_t moving_expires_at;
} replay_user;

typedef struct replay_item {
    char *id;
    int64_t held;           /* units (beds) held now */
    int64_t cap;            /* capacity, when cap_known */
    int cap_known;          /* a capacity event, or replay_capacity() */
    int64_t max_held;       /* most held at once since cap was last set */
} replay_item;

typedef struct replay_counts {
    size_t events;
    size_t by_type[REPLAY_TYPES];
    size_t findings;
} replay_counts;

typedef void (*replay_finding_fn)(void *ud, replay_kind kind, const char *msg);
typedef struct replay replay;

/* room: 1 for a room batch, 0 for stock; per_user: checked against stock
 * holdings. NULL without memory. */
replay *replay_new(int room, int64_t per_user, replay_finding_fn fn, void *ud);
void replay_free(replay *r);

/* A capacity known from outside the log (a batch's definition): grants
 * are then checked against it from the first one. 0 or -ENOMEM. */
int replay_capacity(replay *r, const char *item, int64_t cap);
/* One event; id names its log entry in findings. 0 or -ENOMEM. */
int replay_apply(replay *r, const char *id, const replay_event *ev);
/* A finding the caller made (a log entry it could not decode, the state
 * against a snapshot): counted with the replay's own. */
void replay_finding(replay *r, replay_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int replay_is_room(const replay *r);
int64_t replay_per_user(const replay *r);
const replay_counts *replay_counts_get(const replay *r);

/* Users ever named, in first-seen order; NULL past the end or unknown. */
size_t replay_user_count(const replay *r);
const replay_user *replay_user_at(const replay *r, size_t i);
const replay_user *replay_user_get(const replay *r, const char *id);
int replay_user_holds(const replay_user *u);
/* Users holding something now. */
size_t replay_holding_count(const replay *r);

size_t replay_item_count(const replay *r);
const replay_item *replay_item_at(const replay *r, size_t i);
const replay_item *replay_item_get(const replay *r, const char *id);

/* Requests on the waitlist now, with their tickets. */
size_t replay_wait_count(const replay *r);
/* The i-th request that ever joined (NULL past the end); *no is its ticket,
 * 0 once it was served. */
const char *replay_wait_at(const replay *r, size_t i, int64_t *no);
/* The ticket of a waiting request, 0 when it is not waiting. */
int64_t replay_wait_get(const replay *r, const char *req);

#endif
