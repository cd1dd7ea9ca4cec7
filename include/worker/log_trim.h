/* log_trim.h -- trimming P:{B}:log without dropping what the archive has
 * not committed (config archive_group, docs/ARCHIVE.md).
 *
 * Without an archive, each XADD carries MAXLEN ~ log_maxlen. With one,
 * the XADDs carry no MAXLEN and the apply transaction ends its log part
 * with one EVAL of LOG_TRIM (below): it trims at most XLEN - log_maxlen
 * entries, and only entries below the archive group's acknowledged
 * position -- the oldest entry still pending in the group, or, with none
 * pending, the group's last-delivered-id -- with XTRIM MINID ~ ... LIMIT.
 * Without the group (no archiver has run yet) it trims nothing. It never
 * fails (a failing command would fail the chunk's EXEC): XINFO is called
 * under pcall.
 */
#ifndef ALLOCD_LOG_TRIM_H
#define ALLOCD_LOG_TRIM_H

#include <stdint.h>

#include "redis/argbuf.h"

/* KEYS: log; ARGV: group, log_maxlen. Reply: entries removed. */
extern const char log_trim_src[];

/* Appends "EVAL LOG_TRIM 1 log group maxlen" as one command to a. */
void log_trim_encode(argbuf *a, const char *log_key, const char *group, int64_t maxlen);

#endif
