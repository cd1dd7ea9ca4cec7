/* engine_rooms_int.h -- the room decisions (engine_rooms.c): choose, auto,
 * group (the seating of members, also for engine_groups.c's formed
 * groups), switch, release, and a hold's cancel and expiry (which end the
 * holder's swap offers first). Stands on engine_state.h, engine_hold and
 * engine_swap.
 */
#ifndef ALLOCD_ENGINE_ROOMS_INT_H
#define ALLOCD_ENGINE_ROOMS_INT_H

#include "core/engine.h"

engine_reason engine__rooms_choose(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out);
engine_reason engine__rooms_auto(engine *e, uint32_t ui, const engine_request *r,
                                 int64_t now, engine_result *out);
/* r->members all in one room, or none (REASON_GROUP_TOO_LARGE,
 * REASON_MEMBER_BUSY, REASON_NO_ROOM). */
engine_reason engine__rooms_group(engine *e, const engine_request *r, int64_t now,
                                  engine_result *out);
engine_reason engine__rooms_switch(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out);
engine_reason engine__rooms_release(engine *e, uint32_t ui, const engine_request *r,
                                    int64_t now, engine_result *out);
engine_reason engine__rooms_cancel(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out);
/* The heap's entry for user ui's hold ran out (caller reserved 1 event,
 * user, item and ended order). */
void engine__rooms_expire(engine *e, uint32_t ui, int64_t now);

#endif
