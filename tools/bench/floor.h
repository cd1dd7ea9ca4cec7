/* floor.h -- what Redis itself does for the work one end-to-end request
 * needs at the least: the producer's RPUSH and one HGET of the result, each
 * pipelined (redis-benchmark -P), on the bench's own Redis. allocd's
 * end-to-end rate is reported as a fraction of it (allocbench --e2e-pairs):
 * no design that writes the request and reads its answer through Redis can
 * pass it, so the fraction says how much room is left on this machine. */
#ifndef ALLOCBENCH_FLOOR_H
#define ALLOCBENCH_FLOOR_H

#include "bench/bench.h"

typedef struct floor_result {
    double rpush, hget;      /* requests/s of each, alone */
    double per_request;      /* both for one request: 1 / (1/rpush + 1/hget) */
    int pipeline, clients;
    long n;
} floor_result;

/* Runs redis-benchmark (PATH) against t: n RPUSH of a request-sized value
 * to a list, then n HGET of a result-sized value, pipeline P, 4 clients.
 * Deletes its two keys after. Returns 0, or -1 with err set. */
int floor_measure(const bench_target *t, long n, int pipeline, floor_result *out, char *err, size_t errlen);

#endif
