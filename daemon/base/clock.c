/* clock.c -- see clock.h. */
#include "base/clock.h"

#include <errno.h>
#include <time.h>

static int64_t read_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_wall_us(void) { return read_us(CLOCK_REALTIME); }
int64_t clock_wall_ms(void) { return read_us(CLOCK_REALTIME) / 1000; }
int64_t clock_mono_us(void) { return read_us(CLOCK_MONOTONIC); }

void clock_sleep_us(int64_t us)
{
    if (us <= 0) return;
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

void clock_sleep_ms(int ms) { clock_sleep_us((int64_t)ms * 1000); }
