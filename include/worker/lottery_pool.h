/* lottery_pool.h -- the early=shuffle lottery pool.
 *
 * With early=shuffle, every request queued before opens_at goes into a
 * pool at the opening (the lottery script renames the queue, scripts.h)
 * and is served in the order of a permutation drawn from a seed kept in
 * Redis. Redis also keeps how many were served, so a restarted worker
 * rebuilds the same permutation and continues the same lottery where it
 * stopped (docs/DESIGN.md, "The opening lottery"). The pool holds copies
 * of the raw requests: they are parsed chunk by chunk as they are served.
 */
#ifndef ALLOCD_LOTTERY_POOL_H
#define ALLOCD_LOTTERY_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

typedef struct lottery_pool {
    int active;
    char **raw;
    size_t *len;
    uint32_t *perm;
    size_t n, served;
    int64_t base;             /* dequeued before the pool: seq = base + index + 1 */
} lottery_pool;

void lottery_pool_free(lottery_pool *p);
/* The lottery script's reply: {"done"} (then *done = 1), or {"pool",
 * early_base, early_served, seed, items, dequeued}: the pool is loaded and
 * *dequeued is stats.dequeued after the rename. 0, -EPROTO (unexpected
 * reply) or -ENOMEM. */
int lottery_pool_from_reply(lottery_pool *p, const redisReply *r, int *done, int64_t *dequeued);
/* Requests not served yet. */
static inline size_t lottery_pool_left(const lottery_pool *p) { return p->n - p->served; }
/* The j-th request not served yet, in lottery order, and its seq. */
void lottery_pool_at(const lottery_pool *p, size_t j, const char **raw, size_t *len, int64_t *seq);
/* k more requests were applied. 1 when that was the last of the pool (the
 * pool is then freed), else 0. */
int lottery_pool_served(lottery_pool *p, size_t k);

#endif
