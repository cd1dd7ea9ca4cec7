/* vec.c -- see vec.h. */
#include "core/vec.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int vec_reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 3) return -ENOMEM;
        n += n / 2;
    }
    if (n > SIZE_MAX / elem) return -ENOMEM;
    void *q = realloc(*p, n * elem);
    if (!q) return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

void vec_prefault(void *p, size_t n)
{
    volatile unsigned char *b = p;
    for (size_t i = 0; i < n; i += 4096) b[i] = b[i];
    if (n) b[n - 1] = b[n - 1];
}
