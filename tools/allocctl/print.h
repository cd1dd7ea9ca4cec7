/* print.h -- how allocctl prints what allocd stored: results, holdings
 * and dead entries, as labelled text (or, with --raw, the JSON as it is).
 * Shared by status, wait and dead, so a field reads the same everywhere;
 * and the "DIFF" lines of the commands that compare.
 */
#ifndef ALLOCD_CTL_PRINT_H
#define ALLOCD_CTL_PRINT_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

/* A result (P:{B}:results), one field per line, times also in ISO 8601,
 * plus "you beat X%" for a grant when participants > 0. */
void print_result(const char *text, size_t len, int64_t participants, int raw);
/* What user holds (P:{B}:holders): a bed, or units and their orders. */
void print_holder(const char *user, const char *text, size_t len, int raw);
/* One element of P:{B}:dead, numbered by its index in the list; its raw
 * request cut after max_raw bytes (0 = whole), saying how long it was. */
void print_dead(int64_t index, const redisReply *e, size_t max_raw);
/* "key value" for a meta or stats field, a time (opens_at, closes_at,
 * updated_at, ...) in ms as "2026-12-01T09:00:00Z (in 3 min) [ms]". */
void print_field(const char *indent, int width, const char *key, const char *value, int64_t now);
/* The opening lottery (contract 9.1): its commitment, and the seed once
 * revealed; each may be NULL. */
void print_lottery(const char *indent, const char *commit, const char *seed, const char *users);
/* A difference found by verify, reconcile or lottery verify: counted in
 * *count, printed as "DIFF ..." while *count <= max_shown. */
void print_diff(size_t *count, size_t max_shown, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
