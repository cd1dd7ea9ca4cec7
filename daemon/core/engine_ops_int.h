/* engine_ops_int.h -- one op's own decision (engine_ops.c): no phase,
 * throttle or kind gate and no counting, which are engine.c's. Both
 * engine.c and the waitlist's serving (engine_wait.c) decide through it.
 */
#ifndef ALLOCD_ENGINE_OPS_INT_H
#define ALLOCD_ENGINE_OPS_INT_H

#include "core/engine.h"

engine_reason engine__op_decide(engine *e, uint32_t ui, const engine_request *r,
                                int64_t now, engine_result *out);

#endif
