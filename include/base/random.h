/* random.h -- random 64-bit values for seeds, tokens and ids.
 *
 * Not for cryptography: the values seed hash keys (so producers cannot aim
 * ids at the same slots), make lease tokens unique and name requests. One
 * helper, so every caller has the same fallback when getrandom fails.
 */
#ifndef ALLOCD_RANDOM_H
#define ALLOCD_RANDOM_H

#include <stdint.h>

/* getrandom(2); if it fails (an old kernel, a seccomp filter), the
 * monotonic and wall clocks, the pid and a call counter mixed together:
 * weaker, but still different for every call and every process. */
uint64_t random_u64(void);

#endif
