/* watch_lottery.h -- the dashboard's `lottery verify`: the watcher replays
 * a batch's opening draw once its seed is revealed and its pool is served,
 * with the same check as allocctl (worker/lottery_verify.h).
 *
 * It reads the pool (P:{B}:early) and the pool requests' results in pages
 * of 2,000, one page per reply, so that allocd's loop never
 * parses a big pool in one go; the pool is drawn once (it cannot change
 * once lottery_done is set), and a recheck reads the results again, only
 * when the batch's processed count has changed, at most once every
 * WATCH_LOTTERY_RECHECK_MS. While the draw is still being served
 * the verdict is "serving": results written meanwhile would read as
 * differences.
 */
#ifndef ALLOCD_WATCH_LOTTERY_H
#define ALLOCD_WATCH_LOTTERY_H

#include <stdint.h>
#include <jansson.h>

#include "base/config.h"
#include "redis/redis_router.h"
#include "service/watch.h"

#define WATCH_LOTTERY_RECHECK_MS 30000

/* Starts a read for b when its verdict is missing or stale (no-op while
 * one is under way or the seed is not revealed). Its commands are not in
 * b->pending, so the batch's own polls go on; watch_lottery_busy says
 * whether any is in flight (b may not be freed then). */
void watch_lottery_poll(redis_router *conn, const allocd_config *cfg, watch_batch *b, int64_t now_ms);
int watch_lottery_busy(const watch_batch *b);
/* The verdict as JSON (borrowed; NULL before the first):
 * {"state": "match"|"mismatch"|"serving"|"error", "pool": requests,
 *  "served": n, "differences": n, "first": sentence|null, "checked_at": ms} */
const json_t *watch_lottery_verdict(const watch_batch *b);
void watch_lottery_free(watch_batch *b);

#endif
