/* lottery_verify.h -- what was served against the replayed draw: the one
 * check behind `allocctl lottery verify` and the dashboard's lottery view.
 *
 * Given a drawn pool (lottery_pool_draw, without an engine) and the
 * results of its requests in serving order, every served request's result
 * must name its user's place in the draw (`draw`) and, with
 * draw_by=points, the points recorded for its ticket; the requests served
 * are exactly the first `served` of the order; the grants' ranks follow it
 * (a grant the waitlist made later does not count, 9.5). The readers fetch
 * the results their own way (hiredis in allocctl, the loop in allocd).
 */
#ifndef ALLOCD_LOTTERY_VERIFY_H
#define ALLOCD_LOTTERY_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "wire/lottery_result.h"
#include "worker/lottery_pool.h"

/* One difference, as a sentence. */
typedef void (*lottery_diff_fn)(void *ud, const char *msg);

/* res[k] is the result of the request at serving position k
 * (p->serve[k]), k < p->n. Calls fn for each difference; returns how many. */
size_t lottery_verify_results(const lottery_pool *p, const lottery_result *res, int64_t served,
                              lottery_diff_fn fn, void *ud);

#endif
