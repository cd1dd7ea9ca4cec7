/* heap_reserve.c -- touch the heap a sale will need before the sale (see
 * heap_reserve.h).
 *
 * Three glibc settings make the touched block stay usable:
 * - M_TOP_PAD: when the heap grows or is trimmed, keep this much free at
 *   its top, so neither free() nor malloc_trim hands the reserve back;
 * - M_TRIM_THRESHOLD: trim only when more than the reserve is free at the
 *   top (setting it also stops glibc's moving mmap threshold);
 * - M_MMAP_THRESHOLD at its maximum: a table that doubles (the users', the
 *   orders') takes its new array from the heap, not from a fresh mapping
 *   whose every page would fault again and be unmapped when it is freed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#include <unistd.h>
#endif

#include "base/heap_reserve.h"

#if defined(__SANITIZE_ADDRESS__)
#define HEAP_RESERVE_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_RESERVE_OFF 1
#endif
#endif

#if defined(__GLIBC__) && !defined(HEAP_RESERVE_OFF)

/* glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2: 32 MB on 64-bit */
#define MMAP_THRESHOLD_MAX (4 * 1024 * 1024 * (int)sizeof(long))
/* the block is touched in pieces below that threshold, so that they come
 * from the heap (one block of the whole size would be a mapping of its own,
 * unmapped again by its free) and merge into its free top when freed */
#define PIECE (4u << 20)

static void touch(volatile char *p, size_t len, size_t page)
{
    for (size_t off = 0; off < len; off += page) p[off] = 0;
}

int heap_reserve_start(size_t bytes)
{
    if (bytes == 0) return 1;
    /* glibc's settings are ints: heap_reserve_mb stops at 2047 for that */
    int pad = bytes > (size_t)INT32_MAX ? INT32_MAX : (int)bytes;
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX);
    mallopt(M_TOP_PAD, pad);
    mallopt(M_TRIM_THRESHOLD, pad);
    size_t n = (bytes + PIECE - 1) / PIECE, page = (size_t)sysconf(_SC_PAGESIZE);
    void **pieces = calloc(n, sizeof *pieces);
    if (!pieces) return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        pieces[i] = malloc(PIECE);
        if (pieces[i]) touch(pieces[i], PIECE, page);
        else rc = -ENOMEM;
    }
    /* freed last first, each merging into the free top */
    for (size_t i = n; i-- > 0;) free(pieces[i]);
    free(pieces);
    return rc;
}

void heap_reserve_trim(size_t bytes)
{
    malloc_trim(bytes);
}

#else

int heap_reserve_start(size_t bytes)
{
    return bytes == 0 ? 1 : HEAP_RESERVE_UNSUPPORTED;
}

void heap_reserve_trim(size_t bytes)
{
    (void)bytes;
}

#endif
