/* ctl_util.h -- small pieces allocctl's commands share: times as
 * operators write them, argument vectors for hiredis and the fields of
 * flat key/value replies.
 *
 * In libctl.a (tools/allocctl/) so that every command parses an ISO 8601
 * time, builds a long HSET or looks up a reply's field the same way.
 */
#ifndef ALLOCD_CTL_UTIL_H
#define ALLOCD_CTL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

/* "1767261600000" (ms since the epoch) or ISO 8601 with a zone:
 * "2026-01-01T10:00:00[.123](Z|+02:00|+0200)" (a space may replace the T).
 * A time without a zone is refused: it would mean different instants on
 * different machines. Returns 0 or -1. */
int ctl_parse_time_ms(const char *s, int64_t *out);
/* ms -> "2025-11-22T08:26:40.123Z" in buf. */
const char *ctl_iso_ms(int64_t ms, char *buf, size_t len);
/* ms -> "2026-12-01T09:00:00Z (in 3 min)" or "(2 h ago)", relative to now
 * (ms); whole seconds are printed without their ".000". */
const char *ctl_when_ms(int64_t ms, int64_t now, char *buf, size_t len);
/* |d| ms -> "45 s", "3 min", "2 h", "4 d" (one unit, rounded down). */
const char *ctl_span_ms(int64_t d, char *buf, size_t len);

/* An argument vector for redisCommandArgv / redisAppendCommandArgv. Each
 * argument is copied; allocation failure is sticky in `failed`. */
typedef struct ctl_args {
    char **v;
    size_t *len;
    size_t n, cap;
    int failed;
} ctl_args;

void ctl_args_addn(ctl_args *a, const char *s, size_t n);
void ctl_args_add(ctl_args *a, const char *s);
void ctl_args_addi(ctl_args *a, int64_t v);
void ctl_args_reset(ctl_args *a);      /* empty, keeps the vector */
void ctl_args_free(ctl_args *a);

/* The value of field name in a flat key/value array reply (HGETALL, XINFO
 * STREAM, one group of XINFO GROUPS), or NULL when it has none. */
const redisReply *ctl_reply_field(const redisReply *flat, const char *name);
/* That value as an integer (an integer reply, or a string holding one);
 * dflt when the field is absent or holds no integer. */
int64_t ctl_reply_field_int(const redisReply *flat, const char *name, int64_t dflt);

#endif
