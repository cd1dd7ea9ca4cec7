/* engine_swap_int.h -- swaps (engine_swap.c, contract 9.3), for the engine's
 * own files. Stands on engine_state.h only.
 */
#ifndef ALLOCD_ENGINE_SWAP_INT_H
#define ALLOCD_ENGINE_SWAP_INT_H

#include "core/engine.h"

engine_reason engine__swaps_decide(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out);
/* User ui's bed is about to go (release, switch, cancel, expiry): their
 * offers and the offers to them end not_holding. -ENOMEM (nothing
 * changed) or 0. */
int engine__swaps_bed_gone(engine *e, uint32_t ui, int64_t now);
/* The batch closed (by command or at closes_at): every offer ends closed. */
void engine__swaps_close(engine *e, int64_t now);
void engine__swaps_drain_clear(engine *e);
void engine__swaps_free(engine *e);
const char *engine__swaps_check(const engine *e);   /* NULL or the breach */

#endif
