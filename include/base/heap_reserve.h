/* heap_reserve.h -- touch the heap a sale will need before the sale.
 *
 * Every page allocd's heap grows into costs a page fault the first time it
 * is written, and a flash sale grows the heap (users, orders, holders)
 * exactly when the requests come fastest. heap_reserve_start, called once
 * before the loop runs, writes one byte into every page of a block of the
 * configured size and frees it, and tells glibc's malloc to keep that much
 * free memory at the top of the heap rather than give it back, and to serve
 * large blocks from the heap rather than from fresh mappings. The batches'
 * growth then lands on pages already there.
 *
 * The cost is resident memory from the start (heap_reserve_mb, 64 by
 * default; 0 turns it off). Without glibc, or under AddressSanitizer (its
 * own allocator would quarantine the block, not reuse it), nothing is
 * reserved.
 */
#ifndef ALLOCD_HEAP_RESERVE_H
#define ALLOCD_HEAP_RESERVE_H

#include <stddef.h>

/* Reserves and touches `bytes`. Returns 0 when reserved, 1 for 0 bytes,
 * HEAP_RESERVE_UNSUPPORTED without glibc or under ASan, -ENOMEM when the
 * block could not be allocated (the daemon runs without it). */
#define HEAP_RESERVE_UNSUPPORTED 2
int heap_reserve_start(size_t bytes);

/* Gives the heap's free memory back to the system, except `bytes` at the
 * top: what a batch's load leaves behind goes, the reserve stays. */
void heap_reserve_trim(size_t bytes);

#endif
