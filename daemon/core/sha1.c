/* sha1.c -- SHA-1 (FIPS 180-4), written for this project.
 *
 * Only used to name Lua scripts for EVALSHA: Redis identifies a script by the
 * SHA-1 of its source, so computing it locally saves a SCRIPT LOAD round trip
 * and lets EVALSHA be the first thing sent. Nothing here is security
 * relevant, so a plain, small, one-shot implementation is enough: no
 * streaming API, no OpenSSL dependency for one hash.
 */
#include "core/sha1.h"

#include <stdint.h>
#include <string.h>

static uint32_t rol32(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

static uint32_t load_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* One 64-byte block into the five-word state. */
static void sha1_block(uint32_t h[5], const unsigned char block[64])
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++) w[i] = load_be32(block + 4 * i);
    for (int i = 16; i < 80; i++)
        w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);

    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20)      { f = (b & c) | (~b & d);          k = 0x5A827999u; }
        else if (i < 40) { f = b ^ c ^ d;                   k = 0x6ED9EBA1u; }
        else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8F1BBCDCu; }
        else             { f = b ^ c ^ d;                   k = 0xCA62C1D6u; }
        uint32_t t = rol32(a, 5) + f + e + k + w[i];
        e = d; d = c; c = rol32(b, 30); b = a; a = t;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
}

void sha1_hex(const void *data, size_t len, char hex[41])
{
    uint32_t h[5] = { 0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u,
                      0xC3D2E1F0u };
    const unsigned char *p = data;
    size_t left = len;
    for (; left >= 64; p += 64, left -= 64) sha1_block(h, p);

    /* Padding: 0x80, zeros, then the message length in bits (big-endian) in
     * the last 8 bytes; that takes one more block, or two when fewer than 9
     * bytes are free after the tail. */
    unsigned char tail[128] = { 0 };
    memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t tail_len = left + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tail_len - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha1_block(h, tail);
    if (tail_len == 128) sha1_block(h, tail + 64);

    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 20; i++) {
        unsigned byte = (h[i / 4] >> (24 - 8 * (i % 4))) & 0xffu;
        hex[2 * i] = digits[byte >> 4];
        hex[2 * i + 1] = digits[byte & 0xf];
    }
    hex[40] = '\0';
}
