/* dedup.c -- which requests of a chunk already have a result (see
 * dedup.h). The in-flight check is an open-addressing table rebuilt for
 * each chunk; a stamp per slot marks the slots of the current build, so
 * rebuilding costs no clearing.
 */
#include "worker/dedup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void dedup_init(dedup *d, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    strmap_init(&d->hasher, seed, NULL, NULL);
    idfilter_init(&d->answered);
}

void dedup_free(dedup *d)
{
    idfilter_free(&d->answered);
    strmap_free(&d->hasher);
    free(d->table);
    d->table = NULL;
    d->mask = d->stamp = 0;
}

void dedup_forget_answered(dedup *d)
{
    idfilter_free(&d->answered);
}

int dedup_add_answered(dedup *d, const char *id, size_t len)
{
    return idfilter_add(&d->answered, strmap_hash(&d->hasher, id, len));
}

/* Dead items have no readable id: they are never duplicates. */
static int readable(const chunk_item *it)
{
    return it->q.outcome != REQUEST_DEAD;
}

size_t dedup_ask(dedup *d, chunk *ch, argbuf *a, const char *results_key)
{
    argbuf_reset(a);
    argbuf_str(a, "HMGET");
    argbuf_str(a, results_key);
    /* hash and prefetch every id first, so the filter's cache misses overlap */
    for (size_t i = 0; i < ch->n_items; i++) {
        chunk_item *it = &ch->items[i];
        if (!readable(it)) continue;
        it->id_hash = strmap_hash(&d->hasher, it->q.r.id, strlen(it->q.r.id));
        idfilter_prefetch(&d->answered, it->id_hash);
    }
    size_t asked = 0;
    for (size_t i = 0; i < ch->n_items; i++) {
        chunk_item *it = &ch->items[i];
        /* never answered: no need to ask (ids answered by chunks still in
         * flight are caught in memory, dedup_mark_in_flight) */
        if (!readable(it) || !idfilter_maybe(&d->answered, it->id_hash)) continue;
        it->asked = 1;
        argbuf_str(a, it->q.r.id);
        asked++;
    }
    return asked;
}

/* A reply with fewer (or more) elements than ids asked cannot be matched
 * to the ids: an id left without its element would be decided a second
 * time, so such a reply is refused before anything is marked. */
int dedup_take_reply(chunk *ch, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ARRAY) return -EPROTO;
    size_t asked = 0;
    for (size_t i = 0; i < ch->n_items; i++) asked += ch->items[i].asked != 0;
    if (r->elements != asked) return -EPROTO;
    size_t k = 0;
    for (size_t i = 0; i < ch->n_items; i++) {
        if (!ch->items[i].asked) continue;
        if (r->element[k]->type != REDIS_REPLY_NIL) ch->items[i].dup = 1;
        k++;
    }
    return 0;
}

static int table_fit(dedup *d, size_t n)
{
    size_t want = 64;
    while (want < 2 * n) want *= 2;
    if (d->table && want <= (size_t)d->mask + 1) return 0;
    dedup_slot *t = calloc(want, sizeof *t);
    if (!t) return -ENOMEM;
    free(d->table);
    d->table = t;
    d->mask = (uint32_t)(want - 1);
    d->stamp = 0;
    return 0;
}

/* 1 when the id was already in the table, else adds it. */
static int seen(dedup *d, const chunk_item *it)
{
    for (uint32_t i = (uint32_t)it->id_hash & d->mask;; i = (i + 1) & d->mask) {
        dedup_slot *s = &d->table[i];
        if (s->stamp != d->stamp) {
            s->it = it;
            s->stamp = d->stamp;
            return 0;
        }
        if (s->it->id_hash == it->id_hash && !strcmp(s->it->q.r.id, it->q.r.id)) return 1;
    }
}

/* The HMGET runs on its own connection, possibly before or after an apply
 * still unconfirmed when it was sent; so the ids of every chunk older than
 * ch are checked here, and the worker keeps a confirmed (DONE) chunk in
 * the ring until every dedup is answered. The first occurrence of an id is
 * the one decided. A request an older chunk kept for the lottery (9.1) got
 * no result there: the pool serves it later, so the same request in a pool
 * chunk is no duplicate of it (the simulator, seed 1282 of --first 1000:
 * with wait_replicas the early chunk that kept r103 was still staged when
 * the pool was served, and r103 was dropped as a duplicate of itself,
 * without a result). */
int dedup_mark_in_flight(dedup *d, chunk_ring *ring, chunk *ch)
{
    if (table_fit(d, chunk_ring_items(ring)) < 0) return -ENOMEM;
    if (++d->stamp == 0) {            /* wrapped: stamps could collide */
        memset(d->table, 0, ((size_t)d->mask + 1) * sizeof *d->table);
        d->stamp = 1;
    }
    for (size_t i = 0; i < ring->n; i++) {
        chunk *o = chunk_ring_at(ring, i);
        for (size_t j = 0; j < o->n_items; j++) {
            chunk_item *it = &o->items[j];
            if (!readable(it) || (o != ch && it->res.kept)) continue;
            if (seen(d, it) && o == ch) it->dup = 1;
        }
        if (o == ch) break;
    }
    return 0;
}

int dedup_remember(dedup *d, const chunk *ch)
{
    int rc = 0;
    for (size_t i = 0; i < ch->n_items; i++)
        if (chunk_item_answered(&ch->items[i]) && idfilter_add(&d->answered, ch->items[i].id_hash) < 0)
            rc = -ENOMEM;
    return rc;
}
