/* sim_c11.h -- contract 11 (PROTOCOL.md 11.2-11.5) in the simulator: the
 * seed's profiles, item rules, draw_by and group_fill, the operator's
 * profile edits while the batch is served, and the invariants they add,
 * checked on every transaction the model commits (sim_run.c calls in):
 *
 *   - eligibility: every grant that is not a staff placement without
 *     `check` admits its user under a profile the user had (a user whose
 *     profile never changes: exactly that one), and no such holder of an
 *     only_X item breaks it; the holders of a same_X item, staff
 *     exceptions aside, all have the same X;
 *   - groups: a group's grants are one per member, all into the room its
 *     result names, in one step (whole or absent); with group_fill = exact
 *     the room was empty and has exactly as many beds, and a single user's
 *     grant (choose, auto, switch, a waitlist's) takes only a bed in a
 *     room already held or of one bed;
 *   - the draw replays: each drawn result's `draw` and `points` are the
 *     replay's (core/lottery.h over the pool, the revealed seed and the
 *     points recorded with the draw), the recorded points are the users'
 *     profile points, and no pool request is answered before its turn;
 *   - stats.bad_profiles counts the profiles that are not profiles;
 *   - freshness (the drain): a profile edited after the faults stopped is
 *     what a request pushed 3.5 s later is decided with.
 *
 * The draws come from the simulator's seeded stream, like everything else.
 */
#ifndef ALLOCD_SIM_C11_H
#define ALLOCD_SIM_C11_H

#include <stddef.h>
#include <stdint.h>

#include "allocctl/ctl_replay.h"
#include "sim/sim_redis.h"
#include "worker/batch_keys.h"

typedef struct c11 c11;

/* How the checks reach the rest of the run. */
typedef struct c11_env {
    const batch_keys *keys;
    /* runs a command as the operator (the producer's connection): 0, or
     * -1 when Redis refused it (out of memory) */
    int (*cmd)(void *ud, int argc, const char **argv);
    /* the raw request pushed under id, NULL when none was */
    const char *(*request)(void *ud, const char *id);
    void *ud;
} c11_env;

/* Draws this seed's settings: room or stock batch, users u1..u<nusers>,
 * items <prefix>1..<prefix><nitems>. NULL never (aborts without memory). */
c11 *c11_new(const c11_env *env, int room, int nusers, int nitems);
void c11_free(c11 *c);
/* Profiles and rules are on for this seed. */
int c11_on(const c11 *c);
/* The attrs JSON of item i (1-based) into buf: its rules, with "floor"
 * for rooms. Empty ("") when the item has no attrs. */
void c11_item_attrs(const c11 *c, int i, char *buf, size_t n);
/* The item's capacity, as the setup wrote it (for the replay's checks). */
void c11_item_capacity(c11 *c, int i, int64_t cap);
/* Writes the profiles and the meta fields (draw_by, group_fill). */
void c11_setup(c11 *c);
/* One of the operator's profile edits (a mover's new profile). */
void c11_edit(c11 *c);

/* A new replay of the log: c11 watches its events (call after each
 * ctl_replay_new). */
void c11_attach(c11 *c, ctl_replay *r);
/* A transaction is about to commit: the result ids it writes (HSET
 * results ...). */
void c11_pre(c11 *c, int argc, char **argv, size_t *lens);
/* The transaction committed and its log entries were replayed;
 * holders_written: it wrote P:{B}:holders. */
void c11_commit(c11 *c, int holders_written);
/* A restart put back an older copy of the keyspace. */
void c11_restored(c11 *c);

/* The drain's freshness probe: 1 when this seed has one. _edit changes
 * the probe user's profile now; _request writes the probe request (to
 * push 3.5 s later) into buf; _check looks at its result once drained. */
int c11_probe_edit(c11 *c);
int c11_probe_request(c11 *c, char *buf, size_t n);
void c11_probe_check(c11 *c);

/* For the report. */
typedef struct c11_counts {
    uint64_t grants_checked, not_eligible, staff, edits, draws_checked, groups_checked;
    uint64_t probes_refused;   /* probes refused for their edited profile (not the batch's state) */
} c11_counts;
const c11_counts *c11_counts_get(const c11 *c);
/* -v: the profiles and rules of the seed */
void c11_dump(const c11 *c);

#endif
