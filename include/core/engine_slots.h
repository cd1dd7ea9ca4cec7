/* engine_slots.h -- selection slots (contract 9.4), part of the engine.
 *
 * P:{B}:slots maps a user to the ms from which that user may be served (a
 * housing office's appointment). Before it a request of that user is
 * refused `not_open`, with the slot as the result's opens_at; a user
 * without a slot uses the batch's opens_at. A `group` uses its members'
 * slots by meta group_slot: the earliest (default), the latest, or the
 * leader's (the requester). The shell reads the hash (worker/batch_load.c
 * at load, then worker/slots_scan.c in pages every second: docs/PROTOCOL.md)
 * and replaces the engine's table with engine_slots_clear + engine_slot_set.
 */
#ifndef ALLOCD_ENGINE_SLOTS_H
#define ALLOCD_ENGINE_SLOTS_H

#include <stdint.h>

#include "core/engine.h"

/* Sets (or replaces) a user's slot. 0, -EINVAL (bad id), -ENOMEM. */
int engine_slot_set(engine *e, const char *user, int64_t at);
/* Forgets every slot (before a refresh loads the hash again). */
void engine_slots_clear(engine *e);
/* A slot is a time in ms, >= 0; a slot of 0 lets its user in at once. */
#define ENGINE_NO_SLOT (-1)
/* A user's slot, or ENGINE_NO_SLOT when none. */
int64_t engine_slot_get(const engine *e, const char *user);
/* When request r may be served from: its user's slot (a group's by
 * group_slot), else the batch's opens_at. */
int64_t engine_opens_for(const engine *e, const engine_request *r);

#endif
