/* strmap.c -- the engine's id -> index map (see strmap.h for the why).
 *
 * Linear probing over a power-of-two table kept at most 3/4 full. Slots keep
 * the low 32 bits of the hash, which serve twice: they skip most strcmp calls
 * on a probe, and growing rehashes from them without reading any key.
 */
#include "core/strmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/splitmix64.h"
#include "core/vec.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sip_round(uint64_t v[4])
{
    v[0] += v[1]; v[1] = ROTL(v[1], 13); v[1] ^= v[0]; v[0] = ROTL(v[0], 32);
    v[2] += v[3]; v[3] = ROTL(v[3], 16); v[3] ^= v[2];
    v[0] += v[3]; v[3] = ROTL(v[3], 21); v[3] ^= v[0];
    v[2] += v[1]; v[1] = ROTL(v[1], 17); v[1] ^= v[2]; v[2] = ROTL(v[2], 32);
}

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = (x << 8) | p[i];
    return x;
}

/* SipHash-2-4, as in the reference implementation. */
uint64_t strmap_hash(const strmap *m, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t v[4] = { m->k0 ^ 0x736f6d6570736575ULL, m->k1 ^ 0x646f72616e646f6dULL,
                      m->k0 ^ 0x6c7967656e657261ULL, m->k1 ^ 0x7465646279746573ULL };
    size_t full = n - n % 8;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t w = load_le64(p + i);
        v[3] ^= w; sip_round(v); sip_round(v); v[0] ^= w;
    }
    uint64_t last = (uint64_t)n << 56;
    for (size_t i = 0; i < n % 8; i++) last |= (uint64_t)p[full + i] << (8 * i);
    v[3] ^= last; sip_round(v); sip_round(v); v[0] ^= last;
    v[2] ^= 0xff;
    for (int i = 0; i < 4; i++) sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

void strmap_init(strmap *m, uint64_t seed, strmap_key_fn key, const void *ctx)
{
    memset(m, 0, sizeof *m);
    /* Two independent key halves from one seed. */
    m->k0 = splitmix64_next(&seed);
    m->k1 = splitmix64_next(&seed);
    m->key = key;
    m->ctx = ctx;
}

void strmap_free(strmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->mask = m->count = 0;
}

uint32_t strmap_hash32(const strmap *m, const char *key)
{
    return (uint32_t)strmap_hash(m, key, strlen(key));
}

uint32_t strmap_find(const strmap *m, const char *key)
{
    if (!key) return STRMAP_NONE;
    return strmap_find_hashed(m, key, strmap_hash32(m, key));
}

uint32_t strmap_find_hashed(const strmap *m, const char *key, uint32_t h)
{
    if (!m->slots || !key) return STRMAP_NONE;
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        const strmap_slot *s = &m->slots[i];
        if (!s->ref) return STRMAP_NONE;
        if (s->hash == h && strcmp(m->key(m->ctx, s->ref - 1), key) == 0)
            return s->ref - 1;
    }
}

uint32_t strmap_guess(const strmap *m, uint32_t h)
{
    if (!m->slots) return STRMAP_NONE;
    for (uint32_t k = 0, i = h & m->mask; k < 2; k++, i = (i + 1) & m->mask) {
        const strmap_slot *s = &m->slots[i];
        if (!s->ref) return STRMAP_NONE;
        if (s->hash == h) return s->ref - 1;
    }
    return STRMAP_NONE;
}

static void place(strmap_slot *slots, uint32_t mask, strmap_slot s)
{
    uint32_t i = s.hash & mask;
    while (slots[i].ref) i = (i + 1) & mask;
    slots[i] = s;
}

/* Rehashes into n slots (a power of two, more than count). */
static int resize(strmap *m, uint32_t n)
{
    strmap_slot *slots = calloc(n, sizeof *slots);
    if (!slots) return -ENOMEM;
    if (m->slots)
        for (uint32_t i = 0; i <= m->mask; i++)
            if (m->slots[i].ref) place(slots, n - 1, m->slots[i]);
    free(m->slots);
    m->slots = slots;
    m->mask = n - 1;
    return 0;
}

static int grow(strmap *m)
{
    uint32_t n = m->slots ? (m->mask + 1) * 2 : 16;
    if (n == 0 || n > (UINT32_MAX / 2)) return -ENOMEM;
    return resize(m, n);
}

int strmap_reserve(strmap *m, uint32_t n)
{
    uint32_t slots = m->slots ? m->mask + 1 : 16;
    while ((uint64_t)n * 4 > (uint64_t)slots * 3) {
        if (slots > UINT32_MAX / 4) return -ENOMEM;
        slots *= 2;
    }
    if (m->slots && slots == m->mask + 1) return 0;
    int rc = resize(m, slots);
    if (rc == 0) vec_prefault(m->slots, (size_t)slots * sizeof *m->slots);
    return rc;
}

int strmap_insert(strmap *m, const char *key, uint32_t idx)
{
    if (!key) return -EINVAL;
    return strmap_insert_hashed(m, key, idx, strmap_hash32(m, key));
}

/* One probe: the chain is walked once, for the duplicate check and for the
 * free slot at its end (a user's first request does a find and an insert;
 * hashing and walking twice was a visible part of the decision cost). */
int strmap_insert_hashed(strmap *m, const char *key, uint32_t idx, uint32_t h)
{
    if (!key || idx >= STRMAP_NONE) return -EINVAL;
    /* Keep the load at or under 3/4 so probe chains stay short. */
    if (!m->slots || (uint64_t)(m->count + 1) * 4 > (uint64_t)(m->mask + 1) * 3) {
        int rc = grow(m);
        if (rc < 0) return rc;
    }
    uint32_t i = h & m->mask;
    for (;; i = (i + 1) & m->mask) {
        const strmap_slot *s = &m->slots[i];
        if (!s->ref) break;
        if (s->hash == h && strcmp(m->key(m->ctx, s->ref - 1), key) == 0) return -EEXIST;
    }
    m->slots[i] = (strmap_slot){ h, idx + 1 };
    m->count++;
    return 0;
}
