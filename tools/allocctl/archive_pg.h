/* archive_pg.h -- the PostgreSQL side of the archive (docs/ARCHIVE.md):
 * one libpq connection that survives a server restart, the schema, and the
 * two idempotent inserts (a chunk of log entries, a page of results).
 *
 * A chunk of the log travels by one COPY straight into alloc_events (a
 * statement that commits by itself), and only when a row of it is there
 * already through a temporary staging table and one INSERT ... SELECT, in
 * one transaction: PostgreSQL's fastest way in, and no value is ever
 * spliced into SQL text. A page of results travels the same way. The
 * smaller inserts (items, the pool) and reconcile's reads travel as
 * ONE jsonb parameter (a JSON array) that the server splits
 * (jsonb_array_elements). Every insert is ON CONFLICT DO NOTHING on the
 * primary key, (batch, stream id, index in entry) for events and (batch,
 * request id) for results, so re-sending a chunk after a crash between the
 * commit and the XACK changes nothing.
 */
#ifndef ALLOCD_CTL_ARCHIVE_PG_H
#define ALLOCD_CTL_ARCHIVE_PG_H

#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "allocctl/archive_seen.h"

typedef struct archive_pg {
    PGconn *conn;
    const char *conninfo;
    char err[512];        /* the last error, one line */
    /* the chunk in flight (archive_pg_copy_start): its COPY rows, how much
     * of it libpq has taken, and where it stands (archive_pg.c) */
    const char *fl_copy;
    size_t fl_len, fl_sent;
    int fl_state;
} archive_pg;

/* Connects (once; again after archive_pg_lost) and creates the schema if it
 * is missing. Returns 0, or -1 with err set. */
int archive_pg_open(archive_pg *p, const char *conninfo);
void archive_pg_close(archive_pg *p);
/* 1 when the last failure was the connection (retry after archive_pg_open),
 * 0 when the server refused the statement (retrying will not help). */
int archive_pg_lost(const archive_pg *p);

/* Inserts the events of a chunk of the log, given as COPY rows
 * (archive_log_entry_copy): one COPY into alloc_events, and only when a row
 * of it is there already a COPY into the session's staging table and one
 * INSERT ... ON CONFLICT DO NOTHING, in one transaction; *inserted gets the
 * rows that were new. Returns 0 or -1. */
int archive_pg_copy_events(archive_pg *p, const char *copy, size_t len, int64_t *inserted);

/* The same insert in three steps, so that the caller reads and encodes the
 * next chunk from Redis while PostgreSQL copies this one (cmd_archive.c).
 * _start sends the COPY (one statement: it commits by itself) and returns
 * once the server takes data; copy must stay unchanged until _finish.
 * _pump hands libpq more of it without blocking (call it while working on
 * something else). _finish sends the rest, waits for the COMMIT and, when a
 * row was there already, takes the staging table's way (as
 * archive_pg_copy_events); *inserted as there. Each returns 0 or -1 (err
 * set; archive_pg_lost tells whether a retry may help); after a -1 from
 * _start or _pump, call _finish anyway: it ends the COPY and returns -1. */
int archive_pg_copy_start(archive_pg *p, const char *copy, size_t len);
int archive_pg_copy_pump(archive_pg *p);
/* The socket to wait on (POLLOUT) while the chunk in flight still has rows
 * libpq has not sent, else -1. */
int archive_pg_copy_fd(archive_pg *p);
int archive_pg_copy_finish(archive_pg *p, int64_t *inserted);
/* Inserts a page of final results, given as COPY rows
 * (archive_results_copy), as archive_pg_copy_events inserts a chunk: one
 * COPY, through the staging table only when a row is there already;
 * *inserted gets the rows that were new. Returns 0 or -1. */
int archive_pg_copy_results(archive_pg *p, const char *copy, size_t len, int64_t *inserted);
/* Adds to into the request id of every alloc_results row of batch: what a
 * new run need not offer again (archive_seen.h). Returns 0 (also when the
 * set ran out of memory: those ids are offered again), or -1. */
int archive_pg_results_ids(archive_pg *p, const char *batch, archive_seen *into);
/* Upserts the batch's definition and latest stats (alloc_batches): meta,
 * capacity and stats as JSON objects of their hash fields. */
int archive_pg_put_batch(archive_pg *p, const char *batch, const char *meta, const char *capacity,
                         const char *stats);

/* What the report needs after a purge (alloc_items, alloc_lottery,
 * alloc_lottery_pool): items as [{"k":item,"c":capacity,"a":attrs}, ...]
 * (upserted); pool entries as a JSON array of strings, the first at
 * position `from` of P:{B}:early (kept: the list only grows); the pool's
 * progress (internal.early_served, lottery_done, the list's length). */
int archive_pg_put_items(archive_pg *p, const char *batch, const char *json_rows);
int archive_pg_put_pool(archive_pg *p, const char *batch, int64_t from, const char *json_entries);
int archive_pg_put_lottery(archive_pg *p, const char *batch, const char *early_served, const char *done,
                           const char *entries);
/* The pool entries an earlier run archived whole (alloc_lottery's
 * pool_entries, written after them; 0 without a row): where a run goes on. */
int archive_pg_pool_entries(archive_pg *p, const char *batch, int64_t *n);

/* Runs a query with text parameters; the result (PGRES_TUPLES_OK or
 * PGRES_COMMAND_OK) or NULL with err set. */
PGresult *archive_pg_query(archive_pg *p, const char *sql, int n, const char *const *params);

#endif
