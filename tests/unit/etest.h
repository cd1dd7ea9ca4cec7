/* etest.h -- what the engine's unit tests share (test_engine,
 * test_engine_hold, test_engine_wait): a decision that must leave the engine
 * sound. Header-only: test_engine links libcore.a and libc alone, the
 * others the whole daemon, and no test object is linked into both. Include
 * it after <cmocka.h>. */
#ifndef ALLOCD_TEST_ETEST_H
#define ALLOCD_TEST_ETEST_H

#include <stdint.h>

#include "core/engine.h"

/* engine_decide(r) at now; fails the test when the decision broke an
 * invariant (engine_check_invariants). */
static inline engine_result etest_decide(engine *e, engine_request r, int64_t now)
{
    engine_result out;
    engine_decide(e, &r, now, &out);
    const char *why = engine_check_invariants(e);
    if (why) fail_msg("invariant broken: %s", why);
    return out;
}

#endif
