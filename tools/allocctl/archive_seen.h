/* archive_seen.h -- the request ids whose final result this run of the
 * archiver has committed to PostgreSQL.
 *
 * A results pass reads the whole of P:{B}:results (cmd_archive.c), and on
 * a live batch passes repeat: without this every pass offered every row
 * again, and PostgreSQL spent most of a pass finding the rows it had. A
 * final result never changes (only `waiting` is ever replaced), so a field
 * this run has archived is skipped before it is even parsed. The set keeps
 * the ids themselves, not hashes of them (a collision must never skip a
 * result), in an arena indexed by a strmap (core/strmap.h: a keyed hash,
 * since request ids come from the outside). It lives as long as the run;
 * a new run starts empty and offers everything once, which the primary
 * key turns into nothing.
 */
#ifndef ALLOCD_CTL_ARCHIVE_SEEN_H
#define ALLOCD_CTL_ARCHIVE_SEEN_H

#include <stddef.h>

typedef struct archive_seen archive_seen;

/* An empty set, or NULL without memory. */
archive_seen *archive_seen_new(void);
void archive_seen_free(archive_seen *s);
/* 1 when id (a C string) is in the set; 0 for a NULL set. */
int archive_seen_has(const archive_seen *s, const char *id);
/* Adds id (nothing when it is there); 0, or -1 without memory. */
int archive_seen_add(archive_seen *s, const char *id);
size_t archive_seen_count(const archive_seen *s);

#endif
