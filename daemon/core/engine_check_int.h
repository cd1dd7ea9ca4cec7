/* engine_check_int.h -- ALLOCD_DEBUG builds: the whole-state sweep after a
 * decision or an expiry (engine_check.c); a no-op otherwise.
 */
#ifndef ALLOCD_ENGINE_CHECK_INT_H
#define ALLOCD_ENGINE_CHECK_INT_H

#include "core/engine.h"

void engine__debug_sweep(engine *e);

#endif
