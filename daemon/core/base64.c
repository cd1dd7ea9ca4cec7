/* base64.c -- see base64.h. */
#include "core/base64.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char base64_table[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(char *out, const unsigned char *in, size_t n)
{
    char *o = out;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        *o++ = base64_table[v >> 18];
        *o++ = base64_table[(v >> 12) & 63];
        *o++ = i + 1 < n ? base64_table[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? base64_table[v & 63] : '=';
    }
    return (size_t)(o - out);
}

static int base64_value(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

char *base64_decode(const char *s, size_t *n)
{
    size_t len = strlen(s);
    char *out = malloc(len / 4 * 3 + 4);
    uint32_t acc = 0;
    int bits = 0;
    *n = 0;
    if (!out) return NULL;
    size_t i = 0;
    for (; i < len && s[i] != '='; i++) {
        int v = base64_value((unsigned char)s[i]);
        if (v < 0) { free(out); return NULL; }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) { bits -= 8; out[(*n)++] = (char)(acc >> bits & 0xff); }
    }
    for (; i < len; i++) if (s[i] != '=') { free(out); return NULL; }  /* text after padding */
    out[*n] = '\0';
    return out;
}
