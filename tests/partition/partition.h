/* partition.h -- allocd under real network faults: two instances, each in
 * a network namespace of its own, one Redis in a third, and the links
 * between them cut, cut one way, delayed with loss, or flapped, while a
 * producer pushes and a poller reads (tests/partition/part_check.h says
 * what is checked).
 *
 * Why: every other fault test kills or pauses a process. A partition
 * leaves the process running with sockets that hang, and its writes may
 * arrive late or never; the lease and its fencing must hold all the same.
 *
 * Scenarios (one per run, on a fresh Redis and fresh instances):
 *   cut       both directions of the serving instance's link dropped
 *             silently, long past the lease; the other instance must hold
 *             the lease within lease TTL + 1 s (the time until it has also
 *             applied a chunk, "served again", is measured and reported);
 *             then healed, and the next round cuts the instance serving now
 *   oneway    the same with one direction dropped: replies (Redis ->
 *             allocd) in the first round and every other, requests
 *             (allocd -> Redis) in the others -- writes that land while
 *             their sender hears nothing. With only the replies dropped,
 *             the owner's last renewal (one in flight at most, sent every
 *             TTL/3) lands after the cut and extends the lease by a TTL, so
 *             there the bound is TTL + TTL/3 + 1 s
 *   delay     both instances behind the relay (tests/partition/netrelay.c):
 *             even rounds 200 +/- 100 ms with 20% of segments lost and
 *             resent after an RTO (no takeover bound, the history must
 *             hold); odd rounds the serving instance's relay stalls (TCP
 *             stays up, nothing moves), timed like a cut
 *   flap      the serving instance's link going down and up, each round
 *             one flap of 0.2-1.5 s (even rounds: link down, an error at
 *             once; odd rounds: silent drops), then 0.2-1 s of peace
 * Used by tests/integration/test_partition.c (a short form in `make
 * test`) and tests/partition/partition_main.c (`make partition`).
 */
#ifndef ALLOCD_PARTITION_H
#define ALLOCD_PARTITION_H

#include <stdint.h>
#include <stdio.h>

#include "partition/part_check.h"

typedef enum part_scenario { PART_CUT, PART_ONEWAY, PART_DELAY, PART_FLAP } part_scenario;

typedef struct part_params {
    part_scenario scenario;
    int rounds;        /* faults, one after another */
    int fault_ms;      /* how long each fault lasts (not flap: its own lengths) */
    int rate;          /* requests pushed per second */
    int ttl_ms;        /* allocd's lease_ttl_ms */
    uint64_t seed;
    int verbose;       /* progress on stderr */
} part_params;

void part_params_default(part_params *p, part_scenario s);
const char *part_scenario_name(part_scenario s);
/* "cut", "oneway", "delay", "flap" -> 0, else -1. */
int part_scenario_parse(const char *name, part_scenario *s);

/* Runs it; 0 when nothing was violated, 1 when something was (rep says
 * what), -1 when the run could not be set up. */
int part_run(const part_params *p, part_report *rep);
void part_print_report(FILE *f, const part_params *p, const part_report *rep);

#endif
