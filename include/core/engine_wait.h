/* engine_wait.h -- the waitlist of a batch (contract 9.5), part of the engine.
 *
 * A `buy`, `choose`, `auto` or `group` with "wait":true that would be
 * refused only for sold_out, room_full or no_room joins the waitlist: its
 * result is STATUS_WAITING with a ticket (wait_no, batch-wide, increasing) and
 * its place at joining (wait_pos). The engine keeps a copy of the request.
 *
 * Whenever units or beds come back (cancel, expiry, release, switch,
 * set_capacity, a new item) the engine serves the waitlist at the end of
 * the same call (engine_decide, engine_expire), so the shell writes the
 * return and the serving in one atomic step: in ticket order, each waiting
 * request is decided again with every rule of its op (per_user, one bed,
 * member_busy, ...). One that is again refused only for lack of units or
 * beds stays (it does not block the requests behind it: a group needs a
 * room with a bed for every member, and holding beds back for it would
 * leave them empty while single students wait); any other answer is its
 * final result. While the batch is paused nothing is served; at resume
 * the pass runs. After wait_ms (meta, 0 = no limit) from joining, and at
 * close or closes_at, a waiting request ends with the reason it joined for.
 *
 * Every end (served or not) is listed once for the shell (the "done" list
 * below) until engine_drain_clear(), with an EVENT_WAIT_SERVED event; joining
 * emits EVENT_WAIT. Counters: waiting (length now), wait_joined (tickets
 * drawn), wait_served, wait_ended. processed counts a request when it
 * joins; the final result adds it to granted or rejected, so
 * processed == granted + done + rejected + invalid + waiting + the open
 * swap offers (engine_swap.h: `waiting` results, not on the waitlist).
 */
#ifndef ALLOCD_ENGINE_WAIT_H
#define ALLOCD_ENGINE_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"

/* ---- loading (after the items, holders and orders) ---- */
/* A waiting request as it was persisted: its ticket, when it joined and
 * the reason it joined for (REASON_SOLD_OUT, REASON_ROOM_FULL or REASON_NO_ROOM). The
 * request is copied (its seq included). 0, -EINVAL, -EEXIST (ticket
 * twice), -ENOMEM. Loading sets wait_joined to at least the ticket, and
 * marks the waitlist for a serving pass (the store may have more units
 * than when it was written). */
int engine_wait_load(engine *e, const engine_request *r, int64_t wait_no,
                     int64_t joined_at, engine_reason why);

/* 1 when the last serving pass stopped because the order source ran dry:
 * the shell brings ids (a chunk's own buys are its to provide; units
 * returned in bulk are not) and makes another engine call, which goes on
 * serving. */
int engine_wait_stalled(const engine *e);

/* Requests waiting now. */
size_t engine_wait_count(const engine *e);
/* The ticket of the oldest request still waiting, 0 when none. */
int64_t engine_wait_head(const engine *e);
/* When the oldest waiting request runs out of wait_ms, INT64_MAX when
 * none (engine_next_expiry includes it). */
int64_t engine_wait_next_deadline(const engine *e);

/* ---- draining what ended since the last drain ---- */
/* Waiting requests that got their final result (served, or ended by
 * wait_ms or close), in the order they got it: the request (its id, user,
 * op, seq, members, ...) and the result. Valid until engine_drain_clear. */
size_t engine_wait_done_count(const engine *e);
void engine_wait_done_at(const engine *e, size_t i, const engine_request **r,
                         engine_result *res);

/* A live waiting request, i in [0, engine_wait_count): oldest first
 * (tools and tests: allocctl verify compares it with the store). */
void engine_wait_at(const engine *e, size_t i, const engine_request **r,
                    int64_t *wait_no, int64_t *joined_at, engine_reason *why);

/* The refusal an op joins the waitlist instead of (buy: sold_out, choose:
 * room_full, auto and group: no_room), and the one it ends with after
 * wait_ms or at close; REASON_NONE for an op that cannot wait. */
engine_reason engine_wait_reason_of(engine_op op);

/* The reason a request may join for, by name ("sold_out", "room_full",
 * "no_room"); REASON_NONE for anything else. */
engine_reason engine_wait_reason_parse(const char *name);

#endif
