/* numtext.c -- see numtext.h. */
#include "core/numtext.h"

#include <string.h>

/* Two digits per division: every result carries a 19-digit order id and
 * 13-digit times, and formatting them was 4.5% of allocd's CPU. */
static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static const uint64_t pow10_u64[NUMTEXT_MAX] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
    100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
    10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
    100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull,
};

/* The length is counted first so the digits go straight to out, right to
 * left: no copy through a temporary (a call to memcpy per number). */
size_t numtext_u64(char *out, uint64_t v)
{
    size_t len = 1;
    while (len < NUMTEXT_MAX && v >= pow10_u64[len]) len++;
    char *o = out + len;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        o -= 2;
        o[0] = digit_pairs[2 * r];
        o[1] = digit_pairs[2 * r + 1];
    }
    if (v >= 10) {
        o -= 2;
        o[0] = digit_pairs[2 * v];
        o[1] = digit_pairs[2 * v + 1];
    } else {
        *--o = (char)('0' + v);
    }
    return len;
}

size_t numtext_i64(char *out, int64_t v)
{
    if (v >= 0) return numtext_u64(out, (uint64_t)v);
    out[0] = '-';
    return 1 + numtext_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

int numtext_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s) return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int numtext_parse_hex_u64(const char *s, uint64_t *out)
{
    if (!s || !*s) return -1;
    uint64_t v = 0;
    size_t n = 0;
    for (; *s; s++, n++) {
        unsigned d;
        if (*s >= '0' && *s <= '9') d = (unsigned)(*s - '0');
        else if (*s >= 'a' && *s <= 'f') d = (unsigned)(*s - 'a' + 10);
        else if (*s >= 'A' && *s <= 'F') d = (unsigned)(*s - 'A' + 10);
        else return -1;
        if (n == 16) return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

int numtext_parse_i64(const char *s, int64_t *out)
{
    if (!s) return -1;
    int neg = *s == '-';
    uint64_t v;
    if (numtext_parse_u64(s + neg, &v) < 0) return -1;
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return -1;
    *out = neg ? (int64_t)((uint64_t)0 - v) : (int64_t)v;
    return 0;
}
