/* order_id.c -- see order_id.h for the layout and its limits. */
#include "core/order_id.h"

/* Round function: a 64-bit mix of the half, the round and the key. Any
 * function makes the Feistel network a permutation; a good mix makes it
 * look random. */
static uint16_t round_fn(uint16_t half, int round, uint64_t key)
{
    uint64_t z = key ^ ((uint64_t)half << 16) ^ ((uint64_t)(round + 1) * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (uint16_t)(z ^ (z >> 31));
}

uint32_t order_id_permute(uint32_t x, uint64_t key)
{
    uint16_t l = (uint16_t)(x >> 16), r = (uint16_t)x;
    for (int i = 0; i < 4; i++) {
        uint16_t t = r;
        r = l ^ round_fn(r, i, key);
        l = t;
    }
    return ((uint32_t)l << 16) | r;
}

uint32_t order_id_unpermute(uint32_t y, uint64_t key)
{
    uint16_t l = (uint16_t)(y >> 16), r = (uint16_t)y;
    for (int i = 3; i >= 0; i--) {
        uint16_t t = l;
        l = r ^ round_fn(l, i, key);
        r = t;
    }
    return ((uint32_t)l << 16) | r;
}

uint64_t order_id_make(uint64_t key, int64_t now_ms, uint64_t counter)
{
    int64_t secs = (now_ms - ORDER_ID_EPOCH_MS) / 1000;
    if (secs < 1) secs = 1; /* never 0: an id of 0 means "none" */
    uint64_t high = (uint64_t)secs & 0x7fffffffULL;
    return (high << 32) | order_id_permute((uint32_t)counter, key);
}

int64_t order_id_seconds(uint64_t id)
{
    return (int64_t)(id >> 32) + ORDER_ID_EPOCH_MS / 1000;
}

uint64_t order_block_mint(void *block)
{
    order_block *b = block;
    if (b->next >= b->end) return 0;
    return order_id_make(b->key, b->now_ms, b->next++);
}
