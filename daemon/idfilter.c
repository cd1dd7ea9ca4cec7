/* idfilter.c -- a growing Bloom filter of request ids (see idfilter.h).
 *
 * Each part has at least 16 bits per id it is sized for and is probed at
 * IDFILTER_K positions derived from the one 64-bit hash by double hashing
 * (Kirsch and Mitzenmacher): about 0.05-0.5% false positives per part. A
 * lookup asks every part; with parts of doubling size there are only a few.
 */
#include "idfilter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define IDFILTER_K 7
#define IDFILTER_FIRST_CAP 65536     /* ids in the first part */

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
    uint64_t nbits = 64;
    while (nbits < cap * 16) nbits *= 2;
    idfilter_part *p = realloc(f->parts, (f->nparts + 1) * sizeof *p);
    if (!p) return -ENOMEM;
    f->parts = p;
    uint64_t *bits = calloc(nbits / 64, sizeof *bits);
    if (!bits) return -ENOMEM;
    f->parts[f->nparts++] = (idfilter_part){ bits, nbits - 1, cap, 0 };
    return 0;
}

/* The i-th probe: h1 + i * h2, h2 odd so the probes differ. */
static inline uint64_t probe(uint64_t h, int i)
{
    uint64_t h2 = (h >> 32 | h << 32) | 1;
    return h + (uint64_t)i * h2;
}

int idfilter_add(idfilter *f, uint64_t h)
{
    if (!f->nparts || f->parts[f->nparts - 1].n >= f->parts[f->nparts - 1].cap)
        if (part_new(f) < 0) return -ENOMEM;
    idfilter_part *p = &f->parts[f->nparts - 1];
    for (int i = 0; i < IDFILTER_K; i++) {
        uint64_t b = probe(h, i) & p->mask;
        p->bits[b >> 6] |= 1ULL << (b & 63);
    }
    p->n++;
    return 0;
}

int idfilter_maybe(const idfilter *f, uint64_t h)
{
    for (size_t k = 0; k < f->nparts; k++) {
        const idfilter_part *p = &f->parts[k];
        int all = 1;
        for (int i = 0; i < IDFILTER_K && all; i++) {
            uint64_t b = probe(h, i) & p->mask;
            all = (p->bits[b >> 6] >> (b & 63)) & 1;
        }
        if (all) return 1;
    }
    return 0;
}

size_t idfilter_bytes(const idfilter *f)
{
    size_t n = f->nparts * sizeof *f->parts;
    for (size_t i = 0; i < f->nparts; i++) n += (size_t)(f->parts[i].mask + 1) / 8;
    return n;
}
