/* shuffle.h -- the lottery's random order: a uniformly random permutation
 * of 0..n-1 from a 64-bit seed.
 *
 * Fisher-Yates driven by xoshiro256** seeded through splitmix64, with
 * rejection sampling so every position is equally likely. The same seed
 * gives the same order on every machine and after every restart, which is
 * what lets the early=shuffle pool survive a restart and lets anyone
 * replay a draw from its seed.
 */
#ifndef ALLOCD_SHUFFLE_H
#define ALLOCD_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>

void shuffle_permutation(uint32_t *perm, size_t n, uint64_t seed);

#endif
