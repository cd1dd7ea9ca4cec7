/* ctl_replay.h -- a batch's event log, as Redis holds it, replayed and
 * compared with what Redis holds (`allocctl verify`, `reconcile`, the
 * chaos checker and the simulator).
 *
 * The contract promises that the log (P:{B}:log) is written in the same
 * atomic step as every change of holders and free, so replaying it from
 * the start must give exactly P:{B}:holders and P:{B}:free. That is how an
 * operator proves nothing was lost or given twice before archiving a
 * batch. The replay rules are core/replay.h's (listed in docs/ALLOCCTL.md);
 * this is its shell: stream entries of either log format decoded
 * (wire/log_entry.h), and the rebuilt state compared with the hashes, which
 * are JSON.
 *
 * No Redis, no I/O. The caller feeds log entries in order, then a
 * snapshot of the hashes (taken atomically with the log's end), and gets
 * one finding (a kind and a human-readable line) per difference or broken
 * invariant.
 */
#ifndef ALLOCD_CTL_REPLAY_H
#define ALLOCD_CTL_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "core/replay.h"
#include "wire/log_entry.h"

/* A field/value pair of a hash or of a log entry. */
typedef log_field ctl_kv;

/* P:{B}:capacity, holders and free as field/value pairs, and stats. */
typedef struct ctl_snapshot {
    const ctl_kv *capacity; size_t n_capacity;
    const ctl_kv *holders;  size_t n_holders;
    const ctl_kv *free;     size_t n_free;
    int has_free_units;     /* stats.free_units present */
    int64_t free_units;
    const ctl_kv *waitlist; size_t n_waitlist;  /* P:{B}:waitlist */
    int has_waiting;        /* stats.waiting present */
    int64_t waiting;
} ctl_snapshot;

enum { CTL_EV_GRANT, CTL_EV_RELEASE, CTL_EV_CONFIRM, CTL_EV_CANCEL,
       CTL_EV_EXPIRE, CTL_EV_CAPACITY, CTL_EV_STATE, CTL_EV_WAIT, CTL_EV_WAIT_SERVED,
       CTL_EV_OTHER, CTL_EV_N };

typedef struct ctl_replay_counts {
    size_t entries;
    size_t by_type[CTL_EV_N];
    size_t users;       /* users holding something after the replay */
    size_t holders;     /* fields of P:{B}:holders */
    size_t items;       /* items seen anywhere */
    size_t waiting;     /* requests on the waitlist after the replay */
    size_t findings;
} ctl_replay_counts;

const char *ctl_event_name(int type);

typedef replay_finding_fn ctl_finding_fn;
typedef struct ctl_replay ctl_replay;
/* Sees every event before it is replayed (the chaos checker counts them
 * per request). */
typedef void (*ctl_event_fn)(void *ud, const char *id, const replay_event *ev);

/* room: 1 for a room batch, 0 for stock. per_user: the meta value, checked
 * against stock holdings. NULL without memory. */
ctl_replay *ctl_replay_new(int room, int64_t per_user, ctl_finding_fn fn, void *ud);
void ctl_replay_free(ctl_replay *r);
void ctl_replay_observe(ctl_replay *r, ctl_event_fn fn, void *ud);
/* An item's capacity before the log starts (replay_capacity). */
void ctl_replay_capacity(ctl_replay *r, const char *item, int64_t cap);

/* One log entry (its stream id and field/value pairs), in log order: one
 * event, or all of a chunk entry's events. */
void ctl_replay_entry(ctl_replay *r, const char *id, const ctl_kv *fields, size_t n);
/* Compares the rebuilt state with the snapshot and checks the invariants. */
void ctl_replay_finish(ctl_replay *r, const ctl_snapshot *s);
const ctl_replay_counts *ctl_replay_counts_get(ctl_replay *r);
/* The rebuilt state, for checks of the caller's own. */
const replay *ctl_replay_state(const ctl_replay *r);
/* A user's holding as P:{B}:holders writes it (rooms {item, since, req}
 * and a hold's order, state, expires_at; stock {units, orders}), or NULL
 * when the log leaves the user holding nothing. The caller decrefs it. */
json_t *ctl_replay_holder_json(const ctl_replay *r, const char *user);

#endif
