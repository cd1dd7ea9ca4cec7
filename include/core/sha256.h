/* sha256.h -- SHA-256 (FIPS 180-4), for the opening lottery: the seed's
 * public commitment (stats.lottery_commit) and the generator that drives
 * the draw (core/lottery.h). Pure code, so it lives in the core and both
 * the daemon and allocctl (`lottery verify`, and `acl` for the `#<sha256>`
 * of ACL passwords) use the same one.
 */
#ifndef ALLOCD_SHA256_H
#define ALLOCD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

void sha256(const void *data, size_t len, uint8_t out[SHA256_LEN]);
/* Writes 64 lowercase hex digits and a NUL into hex. */
void sha256_hex(const void *data, size_t len, char hex[2 * SHA256_LEN + 1]);

#endif
