/* shuffle.c -- see shuffle.h. */
#include "core/shuffle.h"

#include "core/splitmix64.h"

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** */
static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, bound): draws below 2^64 mod bound are rejected, so every
 * residue has the same number of draws behind it (plain % would favour the
 * small ones). */
static uint64_t below(uint64_t s[4], uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t x = xoshiro_next(s);
        if (x >= threshold) return x % bound;
    }
}

void shuffle_permutation(uint32_t *perm, size_t n, uint64_t seed)
{
    uint64_t s[4];
    for (int i = 0; i < 4; i++) s[i] = splitmix64_next(&seed);
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)below(s, i);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}
