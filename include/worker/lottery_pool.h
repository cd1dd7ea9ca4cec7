/* lottery_pool.h -- the early=shuffle lottery pool (contract 9.1).
 *
 * Before opens_at the worker reads the queue as usual; the engine keeps
 * every early request that passes the throttle (engine_result.kept), and
 * this pool collects them: their bytes, their seq, and whose they are (a
 * core/lottery.h ticket per user). The pool lives in Redis as the list
 * P:{B}:early, appended in the same transaction as the chunk that kept
 * the requests, one entry per kept request and one per user throttled
 * before the opening, in the order they happened:
 *
 *   "<seq> <request bytes>"     a kept request (seq: its dequeue ordinal)
 *   "! <user>"                  the user was throttled before the opening
 *   "= <points> <user>"         draw_by=points (contract 11.3): the points
 *                               the user's ticket was drawn with, one per
 *                               ticket, appended when the draw is made
 *
 * The seed (64 hex digits) is drawn when the first request is kept and
 * written to internal.lottery_seed with stats.lottery_commit in that same
 * transaction. At the opening the pool is drawn in memory
 * (lottery_pool_draw) and served chunk by chunk; internal.early_served
 * counts how many were applied, so after a kill -9 or a takeover the next
 * worker reads the list and the seed back, draws the same order and goes
 * on where the last apply stopped. The list is kept after the lottery, so
 * that `allocctl lottery verify` can replay the draw.
 */
#ifndef ALLOCD_LOTTERY_POOL_H
#define ALLOCD_LOTTERY_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "core/lottery.h"
#include "worker/chunk.h"

typedef struct lottery_entry {
    char *raw;
    size_t len;
    int64_t seq;
    char *id;                 /* the request's id (ids, below) */
} lottery_entry;

typedef struct lottery_pool {
    int loaded;               /* read from Redis (lottery_pool_from_reply) */
    int active;               /* drawn, being served */
    lottery lot;              /* users and tickets, in pool order */
    lottery_entry *reqs;      /* kept requests, in dequeue order */
    size_t n, cap;
    size_t served;            /* applied, in serving order */
    uint32_t *serve, *draw_pos; /* after the draw: serving order, ticket positions */
    char seed[LOTTERY_SEED_HEX + 1]; /* "" until the first request is kept */
    int seed_unsaved;         /* drawn, not yet in an encoded transaction */
    int points_recorded;      /* draw_by=points: the tickets' points are in p->lot
                                 (the "= " entries, read back or pending) */
    char **pending;           /* list entries not yet in an encoded transaction */
    size_t n_pending, cap_pending;
    strmap ids;               /* request id -> its first entry in reqs: an id kept
                                 has no result yet, so the dedup asks here too */
} lottery_pool;

void lottery_pool_init(lottery_pool *p, uint64_t hash_seed);
void lottery_pool_free(lottery_pool *p);
/* The lottery script's reply (scripts.h): {"done"} (then *done = 1), or
 * {"pool", early_served, seed, entries}. 0, -EPROTO (unexpected reply: a
 * malformed entry, a seed that is not 64 hex digits) or -ENOMEM. */
int lottery_pool_from_reply(lottery_pool *p, const redisReply *r, int *done);
/* One entry of P:{B}:early, appended to the pool (lottery_pool_from_reply
 * and `allocctl lottery verify` read the list with it). 0, -EPROTO, -ENOMEM. */
int lottery_pool_load_entry(lottery_pool *p, const char *s, size_t len);
/* After an early chunk was decided: its kept requests join the pool (the
 * first draws the seed), and users it throttled are marked. Needs the
 * chunk's raw bytes (chunk.early). 0 or -ENOMEM. */
int lottery_pool_take_chunk(lottery_pool *p, const chunk *ch);
/* The opening: the order is drawn from the pool and the seed. With e (the
 * worker) and meta draw_by=points, by the points the pool recorded, or,
 * the first time, by each ticket's profile `points` now, recorded as
 * pending "= " entries; without e (lottery verify), by the recorded points
 * when there are any. 0, -EPROTO (bad seed), -ENOMEM. */
int lottery_pool_draw(lottery_pool *p, const engine *e);
/* Requests not served yet. */
static inline size_t lottery_pool_left(const lottery_pool *p) { return p->n - p->served; }
/* The j-th request not served yet, in lottery order: its bytes, seq and
 * its user's position in the draw (1-based). */
void lottery_pool_at(const lottery_pool *p, size_t j, const char **raw, size_t *len, int64_t *seq,
                     int64_t *draw);
/* k more requests were applied. 1 when that was the last of the pool. */
int lottery_pool_served(lottery_pool *p, size_t k);
/* The points user's ticket was drawn with (contract 11.3): 1 and *points
 * once they are recorded, else 0. */
int lottery_pool_points_of(const lottery_pool *p, const char *user, int64_t *points);
/* The encoded transaction holds the pending entries and the seed. */
void lottery_pool_pending_clear(lottery_pool *p);
/* Marks duplicate (chunk_item.dup) the items of a chunk taken from the
 * queue whose id the pool keeps: kept requests get their results only at
 * the opening, and without this a later push of the same id was kept too
 * and the draw decided which of them was answered (section 4: the first). */
void lottery_pool_mark_kept(const lottery_pool *p, chunk *ch);

#endif
