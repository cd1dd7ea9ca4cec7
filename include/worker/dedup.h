/* dedup.h -- which requests of a chunk already have a result.
 *
 * A resubmitted id must not be decided twice (docs/DESIGN.md, "Dedup").
 * Two things can know it was answered: Redis (P:{B}:results, asked with
 * one HMGET per chunk) and the chunks still in flight, whose results may
 * not be in Redis yet when the HMGET runs. This module holds both sides'
 * memory:
 *
 * - an idfilter of every id with a result (loaded at start, grown with
 *   every chunk decided), so the HMGET asks only about the few ids that
 *   may have one instead of every id of the chunk;
 * - a table rebuilt per chunk over the ids of every chunk in the ring, so
 *   an id seen earlier in flight, or earlier in the same chunk, marks the
 *   later occurrence a duplicate.
 *
 * Ids are hashed once per item with a keyed hash (a producer cannot aim ids
 * at the same filter bits or table slots).
 */
#ifndef ALLOCD_DEDUP_H
#define ALLOCD_DEDUP_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "core/idfilter.h"
#include "core/strmap.h"
#include "redis/argbuf.h"
#include "worker/chunk.h"

typedef struct dedup_slot {
    const chunk_item *it;
    uint32_t stamp;           /* the slot is used when it is the table's stamp */
} dedup_slot;

typedef struct dedup {
    strmap hasher;            /* only its SipHash key: hashes ids */
    idfilter answered;        /* every id with a result (idfilter.h) */
    dedup_slot *table;        /* ids in flight, open addressing */
    uint32_t mask, stamp;
} dedup;

void dedup_init(dedup *d, uint64_t seed);
void dedup_free(dedup *d);
/* Forgets every answered id (a load fills the filter again). */
void dedup_forget_answered(dedup *d);
/* An id found in P:{B}:results at load. 0 or -ENOMEM. */
int dedup_add_answered(dedup *d, const char *id, size_t len);
/* Hashes the chunk's ids and writes `HMGET results <ids that may have a
 * result>` into a (reset first). Returns how many ids it asks about: 0
 * means there is nothing to send. Check argbuf_failed(a). */
size_t dedup_ask(dedup *d, chunk *ch, argbuf *a, const char *results_key);
/* The HMGET's reply: the ids it found are duplicates. 0, or -EPROTO when
 * the reply is not an array of exactly one element per id asked (the
 * count dedup_ask returned); then nothing is marked. */
int dedup_take_reply(chunk *ch, const redisReply *r);
/* Marks ch's items whose id occurs in an older chunk of the ring or
 * earlier in ch. 0 or -ENOMEM. */
int dedup_mark_in_flight(dedup *d, chunk_ring *ring, chunk *ch);
/* Remembers the ids that got a result in the decided chunk ch. 0, or
 * -ENOMEM: then the chunk must not be applied, since a later resubmission
 * of a forgotten id would not be asked about. */
int dedup_remember(dedup *d, const chunk *ch);

#endif
