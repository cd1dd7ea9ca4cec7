/* clock.h -- the clocks the edges read, and sleeping.
 *
 * The core never reads a clock (time is passed in); the worker, the
 * registry, allocctl, the bench and the tests do, through these, so that
 * "now" means the same everywhere: wall time in ms for what is written to
 * Redis and compared with opens_at, monotonic time for measuring.
 */
#ifndef ALLOCD_CLOCK_H
#define ALLOCD_CLOCK_H

#include <stdint.h>

int64_t clock_wall_ms(void);    /* CLOCK_REALTIME, ms since the epoch */
int64_t clock_wall_us(void);
int64_t clock_mono_us(void);    /* CLOCK_MONOTONIC */
static inline int64_t clock_mono_ms(void) { return clock_mono_us() / 1000; }
/* Sleeps the whole time, signals notwithstanding; <= 0 returns at once. */
void clock_sleep_us(int64_t us);
void clock_sleep_ms(int ms);

#endif
