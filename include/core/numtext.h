/* numtext.h -- integers to decimal text and back, one way everywhere.
 *
 * The RESP builder, the connection layer, the JSON writer, the worker's
 * loader and the tools all print and parse integers; they do it here so a
 * fix (an overflow, a sign) is made once. No locale, no allocation.
 */
#ifndef ALLOCD_NUMTEXT_H
#define ALLOCD_NUMTEXT_H

#include <stddef.h>
#include <stdint.h>

/* Longest output of numtext_u64 / numtext_i64 ("-9223372036854775808"). */
#define NUMTEXT_MAX 20

/* Writes v's decimal digits to out (no NUL); returns how many. */
size_t numtext_u64(char *out, uint64_t v);
/* The same with a '-' for negative values. */
size_t numtext_i64(char *out, int64_t v);

/* Strict parse of a whole string: optional '-', decimal digits, nothing
 * else (no blanks, no '+', no trailing text), within range. 0 or -1. */
int numtext_parse_i64(const char *s, int64_t *out);
/* Digits only, within range of uint64_t. 0 or -1. */
int numtext_parse_u64(const char *s, uint64_t *out);
/* Hex digits only (either case, no "0x"), at most 16 of them. 0 or -1. */
int numtext_parse_hex_u64(const char *s, uint64_t *out);

#endif
