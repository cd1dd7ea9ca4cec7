/* chunk.c -- a chunk of requests and the ring of chunks in flight (see
 * chunk.h). Plain data: no Redis, no engine calls, so every step of the
 * worker and the apply_txn test can build and inspect chunks alike.
 */
#include "worker/chunk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"

void chunk_clear(chunk *ch)
{
    for (size_t i = 0; i < ch->n_items; i++) {
        request_clear(&ch->items[i].q);
        free(ch->items[i].raw);
    }
    chunk_item *items = ch->items;
    size_t cap = ch->cap_items;
    memset(ch, 0, sizeof *ch);
    ch->items = items;            /* the array is kept for the next chunk */
    ch->cap_items = cap;
}

int chunk_reserve(chunk *ch, size_t n)
{
    if (n <= ch->cap_items) return 0;
    /* realloc moves the items: fine, since none is parsed yet (a parsed
     * request may point into itself, request.h) */
    chunk_item *it = realloc(ch->items, n * sizeof *it);
    if (!it) return -ENOMEM;
    ch->items = it;
    ch->cap_items = n;
    return 0;
}

int chunk_add(chunk *ch, const char *raw, size_t len, int64_t seq,
              size_t max_bytes, const char *dead_reason)
{
    /* the take reserved room for every entry it asked for (chunk_reserve
     * may not run here: a parsed request may point into itself) */
    ALLOC_ASSERT(ch->n_items < ch->cap_items);
    chunk_item *it = &ch->items[ch->n_items];
    memset(it, 0, sizeof *it);
    request_parse(&it->q, raw, len, max_bytes, ch->kind == CHUNK_CTL);
    it->seq = seq;
    if (dead_reason) {
        request_clear(&it->q);
        it->q.outcome = REQUEST_DEAD;
        snprintf(it->q.error, sizeof it->q.error, "%s", dead_reason);
        ch->dead_lettering = 1;
    }
    ch->n_items++;
    if (it->q.outcome == REQUEST_DEAD || ch->early) {
        /* only dead entries keep the bytes: they are written as they came;
         * and an early chunk's, which may join the lottery pool */
        it->raw = malloc(len + 1);
        if (!it->raw) return -ENOMEM;
        memcpy(it->raw, raw, len);
        it->raw[len] = '\0';
        it->raw_len = len;
    }
    return 0;
}

void chunk_count_result(chunk *ch, engine_status st, engine_reason reason)
{
    if (st <= STATUS_INVALID) ch->status[st]++;
    if (st == STATUS_REJECTED && reason <= REASON_LAST) ch->rejects[reason]++;
}

size_t chunk_buys(const chunk *ch, size_t group_ids)
{
    size_t n = 0;
    for (size_t i = 0; i < ch->n_items; i++) {
        const chunk_item *it = &ch->items[i];
        if (it->q.outcome != REQUEST_OK || it->dup) continue;
        /* a buy takes an order id; so does a bed with hold_ms (contract
         * 9.4), one per member of a group: counted for every room grant,
         * a few unused ids cost nothing */
        if (it->q.r.op == OP_BUY || it->q.r.op == OP_CHOOSE || it->q.r.op == OP_AUTO) n++;
        else if (it->q.r.op == OP_GROUP) n += group_ids ? group_ids : it->q.r.n_members;
    }
    return n;
}

int chunk_has_id(const chunk *ch, const char *id)
{
    for (size_t i = 0; i < ch->n_items; i++)
        if (ch->items[i].q.r.id && !strcmp(ch->items[i].q.r.id, id)) return 1;
    return 0;
}

/* ---------------------------------------------------------------- ring -- */

chunk *chunk_ring_at(chunk_ring *r, size_t i)
{
    return &r->slots[(r->head + i) % CHUNK_RING_MAX];
}

chunk *chunk_ring_newest(chunk_ring *r)
{
    return r->n ? chunk_ring_at(r, r->n - 1) : NULL;
}

chunk *chunk_ring_push(chunk_ring *r, chunk_kind kind)
{
    if (r->n == CHUNK_RING_MAX) return NULL;
    chunk *ch = chunk_ring_at(r, r->n++);
    chunk_clear(ch);
    ch->kind = kind;
    return ch;
}

void chunk_ring_pop_newest(chunk_ring *r)
{
    ALLOC_ASSERT(r->n > 0);
    chunk_clear(chunk_ring_newest(r));
    r->n--;
}

void chunk_ring_pop_oldest(chunk_ring *r)
{
    ALLOC_ASSERT(r->n > 0);
    chunk_clear(chunk_ring_at(r, 0));
    r->head = (r->head + 1) % CHUNK_RING_MAX;
    r->n--;
}

void chunk_ring_pop_done(chunk_ring *r)
{
    while (r->n && chunk_ring_at(r, 0)->state == CS_DONE) chunk_ring_pop_oldest(r);
}

void chunk_ring_clear(chunk_ring *r)
{
    while (r->n) chunk_ring_pop_oldest(r);
    r->head = 0;
}

void chunk_ring_free(chunk_ring *r)
{
    chunk_ring_clear(r);
    for (size_t i = 0; i < CHUNK_RING_MAX; i++) {
        chunk_clear(&r->slots[i]);
        free(r->slots[i].items);
        r->slots[i].items = NULL;
        r->slots[i].cap_items = 0;
    }
}

size_t chunk_ring_busy(chunk_ring *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) n += chunk_ring_at(r, i)->state != CS_DONE;
    return n;
}

long chunk_ring_requests(chunk_ring *r)
{
    long n = 0;
    for (size_t i = 0; i < r->n; i++) {
        const chunk *ch = chunk_ring_at(r, i);
        if (ch->state != CS_DONE) n += ch->queue_len + ch->ctl_len + (long)ch->pool_len;
    }
    return n;
}

size_t chunk_ring_items(chunk_ring *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) n += chunk_ring_at(r, i)->n_items;
    return n;
}
