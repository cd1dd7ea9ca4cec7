/* chaos_test.h -- the cmocka side of the chaos tests (test_chaos_short,
 * test_chaos_cluster, test_outage): the seed a run takes from CHAOS_SEED and
 * the checks every chaos run must pass. Header-only: those tests link the
 * chaos core and the harness, not tests/itest.o (mk/chaos.mk). Include it
 * after <cmocka.h>. */
#ifndef ALLOCD_CHAOS_TEST_H
#define ALLOCD_CHAOS_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "chaos/chaos_core.h"

/* CHAOS_SEED when it is set and not empty, else fallback. */
static inline uint64_t chaos_test_seed(uint64_t fallback)
{
    const char *seed = getenv("CHAOS_SEED");
    return seed && *seed ? strtoull(seed, NULL, 10) : fallback;
}

/* Runs p, prints the report and fails the test unless the run went through
 * without a violation: nothing lost, nothing applied twice, nothing oversold. */
static inline void chaos_test_run(const chaos_params *p, chaos_report *rep)
{
    int rc = chaos_run(p, rep);
    chaos_print_report(stdout, p, rep);
    assert_int_equal(rc, 0);
    assert_int_equal(rep->lost, 0);
    assert_int_equal(rep->applied_twice, 0);
    assert_int_equal(rep->oversold, 0);
    assert_int_equal(rep->violations, 0);
}

#endif
