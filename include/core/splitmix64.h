/* splitmix64.h -- Vigna's splitmix64: a 64-bit state stepped by the golden
 * ratio and finalised into well-spread output.
 *
 * Used to expand one seed into several words (strmap's SipHash key,
 * shuffle's xoshiro256** state) and by tests that want a small seeded
 * stream. It is not a secure generator; base/random.c gives the process
 * its seeds. One copy, so the seed expansion stays the same everywhere.
 */
#ifndef ALLOCD_SPLITMIX64_H
#define ALLOCD_SPLITMIX64_H

#include <stdint.h>

/* The next output; advances *state. */
uint64_t splitmix64_next(uint64_t *state);

#endif
