/* idfilter.c -- a growing Bloom filter of request ids (see idfilter.h).
 *
 * Blocked: all the bits of one id lie in one 512-bit block (a cache line),
 * so a lookup costs one cache miss per part instead of one per probe. A
 * part has at least 32 bits per id it is sized for and sets IDFILTER_K bits
 * per id, 9 bits of a remixed hash each: about 1e-5 false positives when
 * full. A lookup asks every part; with parts of doubling size there are
 * only a few. Fewer false positives mean fewer chunks that need an HMGET
 * at all.
 */
#include "core/idfilter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define IDFILTER_K 7                 /* 7 x 9 bits of the remixed hash */
#define IDFILTER_FIRST_CAP 65536     /* ids in the first part */
#define BLOCK_WORDS 8                /* 512 bits */

void idfilter_init(idfilter *f)
{
    f->parts = NULL;
    f->nparts = 0;
}

void idfilter_free(idfilter *f)
{
    for (size_t i = 0; i < f->nparts; i++) free(f->parts[i].bits);
    free(f->parts);
    idfilter_init(f);
}

static int part_new(idfilter *f)
{
    uint64_t cap = f->nparts ? f->parts[f->nparts - 1].cap * 2 : IDFILTER_FIRST_CAP;
    uint64_t blocks = 1;
    while (blocks * 512 < cap * 32) blocks *= 2;
    idfilter_part *p = realloc(f->parts, (f->nparts + 1) * sizeof *p);
    if (!p) return -ENOMEM;
    f->parts = p;
    uint64_t *bits = aligned_alloc(64, blocks * BLOCK_WORDS * sizeof *bits);
    if (!bits) return -ENOMEM;
    memset(bits, 0, blocks * BLOCK_WORDS * sizeof *bits);
    f->parts[f->nparts++] = (idfilter_part){ bits, blocks - 1, cap, 0 };
    return 0;
}

/* The block from the low bits; the bit positions from the remixed hash, so
 * they do not depend on the block number. */
static inline uint64_t *block_of(const idfilter_part *p, uint64_t h)
{
    return p->bits + (h & p->mask) * BLOCK_WORDS;
}

static inline uint64_t remix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

int idfilter_add(idfilter *f, uint64_t h)
{
    if (!f->nparts || f->parts[f->nparts - 1].n >= f->parts[f->nparts - 1].cap)
        if (part_new(f) < 0) return -ENOMEM;
    idfilter_part *p = &f->parts[f->nparts - 1];
    uint64_t *b = block_of(p, h), g = remix(h);
    for (int i = 0; i < IDFILTER_K; i++, g >>= 9)
        b[(g & 511) >> 6] |= 1ULL << (g & 63);
    p->n++;
    return 0;
}

int idfilter_maybe(const idfilter *f, uint64_t h)
{
    uint64_t g0 = remix(h);
    for (size_t k = 0; k < f->nparts; k++) {
        const uint64_t *b = block_of(&f->parts[k], h);
        uint64_t g = g0;
        int all = 1;
        for (int i = 0; i < IDFILTER_K && all; i++, g >>= 9)
            all = (b[(g & 511) >> 6] >> (g & 63)) & 1;
        if (all) return 1;
    }
    return 0;
}

void idfilter_prefetch(const idfilter *f, uint64_t h)
{
    for (size_t k = 0; k < f->nparts; k++) __builtin_prefetch(block_of(&f->parts[k], h));
}

size_t idfilter_bytes(const idfilter *f)
{
    size_t n = f->nparts * sizeof *f->parts;
    for (size_t i = 0; i < f->nparts; i++) n += (size_t)(f->parts[i].mask + 1) * BLOCK_WORDS * 8;
    return n;
}
