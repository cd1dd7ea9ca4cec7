/* vec.h -- room in a realloc'd array, one way everywhere.
 *
 * The engine, its waitlist, holds, groups and swaps, the lottery and the
 * worker's pool all keep plain arrays with a count and a capacity; they grow
 * them here so the growth policy and the overflow check are written once.
 */
#ifndef ALLOCD_VEC_H
#define ALLOCD_VEC_H

#include <stddef.h>

/* Makes room for `need` elements of `elem` bytes in *p (capacity *cap).
 * Grows by half, so pushes stay amortised O(1) while a million-element
 * array wastes at most a third. New slots are not initialised. Returns 0,
 * or -ENOMEM (on overflow too) with *p and *cap unchanged. */
int vec_reserve(void **p, size_t *cap, size_t need, size_t elem);

/* Writes to every page of the n bytes at p (their contents unchanged), so
 * that the kernel maps them now: room reserved ahead of use (the users of
 * a loading batch) is then not paid for in page faults, a fault per page,
 * by the first decisions that touch it. */
void vec_prefault(void *p, size_t n);

#endif
