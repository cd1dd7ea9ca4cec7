/* order_id.h -- order ids: unique everywhere, roughly time-ordered, opaque.
 *
 * Layout of the 64-bit id (printed in decimal, at most 19 digits):
 *
 *   bit 63      0 (so the id also fits a signed 64-bit integer)
 *   bits 62..32 seconds since 2025-01-01T00:00:00Z (31 bits: until 2093)
 *   bits 31..0  perm(counter mod 2^32), a keyed 32-bit permutation
 *
 * The counter is one global Redis counter (P:{allocd:orders}:counter) that daemons
 * draw from in blocks with INCRBY, so minting an id costs no round trip and
 * no two daemons ever use the same counter value. perm is a 4-round Feistel
 * network over 16-bit halves keyed by P:{allocd:orders}:key (one random key per
 * deployment, created on first start), so consecutive counter values give
 * unrelated-looking low bits and an observer cannot tell how many orders
 * were made between two ids. Two ids can only collide if counter values
 * 2^32 apart are minted within the same second: more than 4 billion orders
 * per second. Ids sort by the second they were minted in.
 */
#ifndef ALLOCD_ORDER_ID_H
#define ALLOCD_ORDER_ID_H

#include <stdint.h>

#define ORDER_ID_EPOCH_MS 1735689600000LL
#define ORDER_ID_BLOCK 4096          /* counter values drawn per INCRBY */

uint32_t order_id_permute(uint32_t x, uint64_t key);
uint32_t order_id_unpermute(uint32_t y, uint64_t key);
uint64_t order_id_make(uint64_t key, int64_t now_ms, uint64_t counter);
/* Seconds since the Unix epoch at which the id was minted. */
int64_t order_id_seconds(uint64_t id);

/* A block of counter values [next, end) drawn from Redis. */
typedef struct order_block {
    uint64_t key;
    uint64_t next, end;
    int64_t now_ms;              /* time stamped into ids minted now */
} order_block;

static inline uint64_t order_block_left(const order_block *b)
{
    return b->end > b->next ? b->end - b->next : 0;
}
/* Mints the next id (0 when the block is used up). Matches engine_order_fn. */
uint64_t order_block_mint(void *block);

#endif
