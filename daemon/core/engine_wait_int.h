/* engine_wait_int.h -- the waitlist's hooks (engine_wait.c), for engine.c
 * and the engine's views. join: a request refused `why` joins instead when
 * it asked to wait and may (1, *out is STATUS_WAITING); step: ends what ran
 * out and serves what fits, at the end of every decision and expiry.
 */
#ifndef ALLOCD_ENGINE_WAIT_INT_H
#define ALLOCD_ENGINE_WAIT_INT_H

#include "core/engine.h"

int engine__wait_join(engine *e, const engine_request *r, engine_reason *why,
                      int64_t now, engine_result *out);
void engine__wait_step(engine *e, int64_t now);
void engine__wait_drain_clear(engine *e);
void engine__wait_free(engine *e);
const char *engine__wait_check(const engine *e);   /* NULL when sound */

#endif
