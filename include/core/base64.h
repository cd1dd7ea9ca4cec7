/* base64.h -- standard base64 (RFC 4648, '+' and '/'), both ways.
 *
 * A dead request that is not valid UTF-8 is kept as raw_base64 in its dead
 * entry (wire/records); allocctl and the tests decode it back. One table,
 * one decoder.
 */
#ifndef ALLOCD_BASE64_H
#define ALLOCD_BASE64_H

#include <stddef.h>

/* Characters base64_encode writes for n bytes (padded). */
#define BASE64_LEN(n) (((n) + 2) / 3 * 4)

/* Writes BASE64_LEN(n) characters (no NUL) to out; returns that. */
size_t base64_encode(char *out, const unsigned char *in, size_t n);
/* Decodes s (padding optional) into malloc'd bytes, *n set; NULL when s
 * is malformed or memory runs out. The result has a NUL after *n bytes. */
char *base64_decode(const char *s, size_t *n);

#endif
