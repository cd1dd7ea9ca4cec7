/* archive_results.h -- turning a page of P:{B}:results into archive rows.
 *
 * The results pass of `allocctl archive` (cmd_archive.c) reads the hash by
 * HSCAN pages and sends each page by one COPY into alloc_results
 * (archive_pg_copy_results). The typed columns are what
 * PostgreSQL's `result->>'x'` gives for the result's member x: a string's
 * value, an integer's digits, NULL for null or a missing member (status:
 * ""); a member of another type is its compact JSON. qty, seq, rank and
 * at_ms take such a text when it is an integer of at most 18 digits, at is
 * at_ms as a time (archive_copy.h). A value that is not JSON is kept as a
 * JSON string, with no typed columns.
 */
#ifndef ALLOCD_CTL_ARCHIVE_RESULTS_H
#define ALLOCD_CTL_ARCHIVE_RESULTS_H

#include <hiredis/hiredis.h>

#include "allocctl/archive_copy.h"
#include "allocctl/archive_seen.h"

/* alloc_results' columns but archived_at, in the order of the rows below */
#define ARCHIVE_RESULT_COLUMNS "batch, req_id, user_id, op, status, reason, item, order_id, qty, " \
    "seq, rank, at_ms, at, result"

/* Appends a row to out for every field of the page ([field, value, ...],
 * an HSCAN reply's second element) but those in seen (may be NULL: in
 * the database already, archive_seen.h) and `waiting` results: they are the only
 * ones ever replaced, and a later pass takes the final one. sent (may be
 * NULL) gets a flag per field, 1 where a row was added. Returns the number
 * of rows added, or -1 for a field that is not UTF-8 text (no request id
 * the daemon answers is), a page that is not one, or without memory. The
 * rows go between archive_copy_begin and archive_copy_end. */
int archive_results_copy(const redisReply *page, const char *batch, const archive_seen *seen,
                         unsigned char *sent, archive_buf *out);

#endif
