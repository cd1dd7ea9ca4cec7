/* sha1.h -- SHA-1, only to name Lua scripts for EVALSHA without a round trip.
 * Pure (no I/O), so it sits in the core beside sha256. */
#ifndef ALLOCD_SHA1_H
#define ALLOCD_SHA1_H
#include <stddef.h>
/* Writes 40 lowercase hex digits and a NUL into hex. */
void sha1_hex(const void *data, size_t len, char hex[41]);
#endif
