/* engine_staff_int.h -- staff placements (engine_staff.c, contract 11.5):
 * the admin commands assign and unassign, for engine.c's admin dispatch.
 */
#ifndef ALLOCD_ENGINE_STAFF_INT_H
#define ALLOCD_ENGINE_STAFF_INT_H

#include "core/engine.h"

/* r->op is OP_ASSIGN or OP_UNASSIGN; whatever the phase, slots, throttle
 * and draw. The reason of a refusal, or REASON_NONE with *out filled. */
engine_reason engine__staff_decide(engine *e, const engine_request *r, int64_t now,
                                   engine_result *out);

#endif
