/* archive_seen.h -- the request ids of a batch whose final result is in
 * PostgreSQL, as far as this run of the archiver knows.
 *
 * A results pass reads the whole of P:{B}:results (cmd_archive.c), and on
 * a live batch passes repeat: without this every pass offered every row
 * again, and PostgreSQL spent most of a pass finding the rows it had. A
 * final result never changes (only `waiting` is ever replaced), so a field
 * whose row is in the database is skipped before it is even parsed. The set keeps
 * the ids themselves, not hashes of them (a collision must never skip a
 * result), in an arena indexed by a strmap (core/strmap.h: a keyed hash,
 * since request ids come from the outside). It lives as long as the run,
 * which fills it first with the ids the database has for the batch
 * (archive_pg_results_ids), so that a restarted archiver does not offer
 * them all again.
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
