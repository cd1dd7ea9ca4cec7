/* tickets.h -- the `tickets` scenario of allocbench (issue 14): a ticket
 * sale where reservations expire and return tickets, with allocd's
 * waitlist ("wait":true) against the Lua-script design where the losers
 * poll and retry. Reports, for each design, the first wave's throughput,
 * the calls made while tickets came back, how many tickets came back and
 * how many of them went to the buyer who had waited longest. */
#ifndef ALLOCBENCH_TICKETS_H
#define ALLOCBENCH_TICKETS_H

#include "bench/bench.h"

typedef struct tickets_opts {
    const bench_target *target;
    const char *prefix;          /* allocd's key prefix */
    long buyers, tickets;
    int hold_ms;                 /* reservations not paid expire after this */
    int seconds;                 /* each design runs this long after its first wave */
    int retry_ms;                /* Lua design: a loser retries this often */
    uint64_t seed;
} tickets_opts;

typedef struct tickets_result {
    double first_wave_s;         /* every buyer's first request decided */
    double first_wave_rps;
    long calls;                  /* requests (allocd) or EVALSHAs (Lua) over the whole run */
    double calls_per_s;
    long paid, returned;         /* tickets paid; tickets that came back by expiry */
    long regranted;              /* returned tickets given to a buyer again */
    long to_longest_waiting;     /* ... of which to the buyer waiting longest */
    int ok;
} tickets_result;

/* allocd must already serve target with prefix. 0, or -1 with err. */
int tickets_allocd(const tickets_opts *o, tickets_result *r, char *err, size_t errlen);
int tickets_lua(const tickets_opts *o, tickets_result *r, char *err, size_t errlen);

#endif
