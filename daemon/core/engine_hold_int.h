/* engine_hold_int.h -- holds on beds (engine_hold.c, contract 9.4), for the
 * engine's own files: start one after a seat (out gets order and
 * expires_at), clear at release, expire (from the heap), confirm and
 * cancel, the gate's exception for confirm/cancel, views, loading, and its
 * part of the invariants. Stands on engine_state.h only: ending a hold's
 * swap offers first is the caller's step (engine_rooms.c).
 */
#ifndef ALLOCD_ENGINE_HOLD_INT_H
#define ALLOCD_ENGINE_HOLD_INT_H

#include "core/engine.h"

void engine__hold_start(engine *e, uint32_t ui, int64_t now, engine_result *out);
void engine__hold_clear(engine *e, uint32_t ui);
void engine__hold_expire(engine *e, uint32_t ui, int64_t now);
/* REASON_NONE when user ui holds a live hold with that order, else the refusal. */
engine_reason engine__hold_find(const engine *e, uint32_t ui, uint64_t order);
engine_reason engine__hold_confirm(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out);
engine_reason engine__hold_cancel(engine *e, uint32_t ui, const engine_request *r,
                                  int64_t now, engine_result *out);
int engine__hold_op_ok(const engine *e, engine_op op);
void engine__hold_view(const engine *e, uint32_t ui, engine_user_view *v);
int engine__hold_load(engine *e, const char *uid, uint64_t order, const char *room,
                      int state, int64_t expires_at);
/* The heap for a room batch: NULL when the heap and the holds agree. */
const char *engine__hold_check(const engine *e);

#endif
