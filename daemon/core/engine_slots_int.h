/* engine_slots_int.h -- selection slots (engine_slots.c), for engine.c. */
#ifndef ALLOCD_ENGINE_SLOTS_INT_H
#define ALLOCD_ENGINE_SLOTS_INT_H

#include "core/engine.h"

void engine__slots_free(engine *e);

#endif
