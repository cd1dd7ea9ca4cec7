/* lottery_pool.c -- the early=shuffle lottery pool (see lottery_pool.h). */
#include "worker/lottery_pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "core/engine.h"
#include "core/numtext.h"
#include "core/shuffle.h"

void lottery_pool_free(lottery_pool *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->raw[i]);
    free(p->raw);
    free(p->len);
    free(p->perm);
    memset(p, 0, sizeof *p);
}

static int load(lottery_pool *p, const redisReply *items, int64_t base, size_t served, uint64_t seed)
{
    size_t n = items->elements;
    p->raw = calloc(n ? n : 1, sizeof *p->raw);
    p->len = calloc(n ? n : 1, sizeof *p->len);
    p->perm = calloc(n ? n : 1, sizeof *p->perm);
    if (!p->raw || !p->len || !p->perm) return -ENOMEM;
    p->n = n;
    for (size_t i = 0; i < n; i++) {
        p->raw[i] = malloc(items->element[i]->len + 1);
        if (!p->raw[i]) return -ENOMEM;
        memcpy(p->raw[i], items->element[i]->str, items->element[i]->len);
        p->len[i] = items->element[i]->len;
    }
    /* the same seed gives the same order after a restart */
    shuffle_permutation(p->perm, n, seed);
    p->base = base;
    p->served = served > n ? n : served;
    p->active = 1;
    return 0;
}

static int is_str(const redisReply *e)
{
    return e && (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) && e->str;
}

static int is_int(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_INTEGER;
}

/* Every element is checked before it is used: the reply comes from our own
 * script, but a wrong shape (an older script, a stray key) must fail the
 * worker, not read a NULL or load a pool with a made-up seed. */
int lottery_pool_from_reply(lottery_pool *p, const redisReply *r, int *done, int64_t *dequeued)
{
    *done = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !is_str(r->element[0])) return -EPROTO;
    if (!strcmp(r->element[0]->str, "done")) {
        *done = 1;
        return 0;
    }
    if (strcmp(r->element[0]->str, "pool") || r->elements != 6) return -EPROTO;
    const redisReply *base = r->element[1], *served = r->element[2], *seedtext = r->element[3],
                     *items = r->element[4], *deq = r->element[5];
    if (!is_int(base) || !is_int(served) || served->integer < 0 || !is_str(seedtext) ||
        !items || items->type != REDIS_REPLY_ARRAY || !is_int(deq))
        return -EPROTO;
    for (size_t i = 0; i < items->elements; i++)
        if (!is_str(items->element[i])) return -EPROTO;
    /* the seed is one allocd wrote (the script's ARGV): anything but its
     * digits means the hash was changed under us */
    uint64_t seed;
    if (numtext_parse_u64(seedtext->str, &seed) < 0) return -EPROTO;
    int rc = load(p, items, base->integer, (size_t)served->integer, seed);
    if (rc < 0) return rc;
    *dequeued = deq->integer;   /* the rename counted the pool */
    return 0;
}

void lottery_pool_at(const lottery_pool *p, size_t j, const char **raw, size_t *len, int64_t *seq)
{
    ALLOC_ASSERT(p->served + j < p->n);
    uint32_t idx = p->perm[p->served + j];
    *raw = p->raw[idx];
    *len = p->len[idx];
    *seq = p->base + idx + 1;
}

int lottery_pool_served(lottery_pool *p, size_t k)
{
    ALLOC_ASSERT(k <= p->n - p->served);
    p->served += k;
    if (p->served != p->n) return 0;
    lottery_pool_free(p);
    return 1;
}
