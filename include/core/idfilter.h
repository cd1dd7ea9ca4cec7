/* idfilter.h -- "has this request id ever been answered?", in memory.
 *
 * Before deciding a chunk the worker must skip requests whose id already has
 * a result (resubmissions). Asking Redis for every id (HMGET results) cost
 * Redis about 0.3 us per request -- a big hash lookup each, nearly always a
 * miss. This Bloom filter holds every id with a result: the ones found in
 * Redis when the batch was loaded and every one the worker has answered
 * since. Only ids it reports as "maybe" are asked about, so Redis sees a
 * lookup for the resubmissions and about 1% false positives.
 *
 * It never reports "no" for an id that was added (no false negatives),
 * which is what makes skipping the lookup safe. It grows as a chain of
 * filters, each twice the size of the one before, so it needs no estimate
 * of the batch size. Ids come in as 64-bit keyed hashes (strmap_hash), so a
 * producer cannot aim ids at the same bits. Pure C, no I/O.
 */
#ifndef ALLOCD_IDFILTER_H
#define ALLOCD_IDFILTER_H

#include <stddef.h>
#include <stdint.h>

typedef struct idfilter_part {
    uint64_t *bits;
    uint64_t mask;          /* 512-bit block count - 1 (a power of two) */
    uint64_t cap, n;        /* ids it takes before the next part starts, ids in it */
} idfilter_part;

typedef struct idfilter {
    idfilter_part *parts;
    size_t nparts;
} idfilter;

void idfilter_init(idfilter *f);
void idfilter_free(idfilter *f);     /* also empties it: init state again */
/* Adds the id with keyed hash h. 0 or -ENOMEM (the filter is unchanged). */
int idfilter_add(idfilter *f, uint64_t h);
/* 0: the id was never added. 1: it may have been. */
int idfilter_maybe(const idfilter *f, uint64_t h);
/* Starts loading the cache lines a later idfilter_maybe(h) reads: a chunk
 * prefetches all its ids first, so the misses overlap. */
void idfilter_prefetch(const idfilter *f, uint64_t h);
/* Bytes allocated (for memory accounting). */
size_t idfilter_bytes(const idfilter *f);

#endif
