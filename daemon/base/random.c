/* random.c -- see random.h. */
#include "base/random.h"

#include <sys/random.h>
#include <unistd.h>

#include "base/clock.h"

/* splitmix64's finalizer: spreads every input bit over the output, so
 * inputs that differ in a few low bits give unrelated values. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t random_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v) return v;
    static uint64_t calls;    /* one thread (DESIGN.md); tools are one too */
    calls++;
    v = mix((uint64_t)clock_mono_us() + 0x9e3779b97f4a7c15ULL * calls);
    v = mix(v ^ (uint64_t)clock_wall_us());
    return mix(v ^ (uint64_t)getpid());
}
