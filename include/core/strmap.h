/* strmap.h -- string -> uint32 index, open addressing with a seeded hash.
 *
 * The engine keeps its records (users, items) in plain arrays of structs and
 * needs only "which index has this id?". So the map stores no strings and no
 * records: a slot is a 32-bit hash and an index, 8 bytes, and the key of an
 * index is read back through a callback into the owner's array. That keeps
 * the map small (about 16 bytes per key at a million keys) and lets the
 * owner grow its array with realloc without the map noticing.
 *
 * The hash is SipHash-2-4 keyed from a seed: user ids come from the outside,
 * and an unkeyed hash would let a crafted set of ids pile into one probe
 * chain (hash flooding). Keys are never removed (the engine never forgets a
 * user or an item), so there are no tombstones to manage.
 */
#ifndef ALLOCD_STRMAP_H
#define ALLOCD_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#define STRMAP_NONE UINT32_MAX

/* The key stored for `idx`, read from the owner's records. */
typedef const char *(*strmap_key_fn)(const void *ctx, uint32_t idx);

typedef struct strmap_slot {
    uint32_t hash;   /* low 32 bits of the keyed hash */
    uint32_t ref;    /* index + 1; 0 = empty slot */
} strmap_slot;

typedef struct strmap {
    strmap_slot *slots;
    uint32_t mask;   /* slot count - 1 (a power of two), 0 before first insert */
    uint32_t count;
    uint64_t k0, k1; /* SipHash key */
    strmap_key_fn key;
    const void *ctx;
} strmap;

void strmap_init(strmap *m, uint64_t seed, strmap_key_fn key, const void *ctx);
void strmap_free(strmap *m);
/* Index of `key`, or STRMAP_NONE. */
uint32_t strmap_find(const strmap *m, const char *key);
/* Maps `key` to `idx` (idx < STRMAP_NONE). 0, -EEXIST, -ENOMEM, -EINVAL. */
int strmap_insert(strmap *m, const char *key, uint32_t idx);
/* The same with the key's hash computed once by the caller (strmap_hash32),
 * for a find that may be followed by an insert of the same key. */
uint32_t strmap_hash32(const strmap *m, const char *key);
uint32_t strmap_find_hashed(const strmap *m, const char *key, uint32_t h);
int strmap_insert_hashed(strmap *m, const char *key, uint32_t idx, uint32_t h);
/* Room for n keys without a rehash, its slots mapped now (done once,
 * ahead of a known number of inserts: vec_prefault). 0 or -ENOMEM. */
int strmap_reserve(strmap *m, uint32_t n);
/* The index whose slot carries hash h among the first two of its probe
 * (linear probing: almost always there), without comparing keys, or
 * STRMAP_NONE: a guess for cache warming (a collision gives a wrong one),
 * never an answer. */
uint32_t strmap_guess(const strmap *m, uint32_t h);
/* The keyed 64-bit hash of n bytes (exposed for tests). */
uint64_t strmap_hash(const strmap *m, const void *data, size_t n);

#endif
