/* archive_log.h -- turning entries of P:{B}:log into archive rows.
 *
 * The ONE place that knows what a stream entry looks like to the archive
 * (and to reconcile and export, which read rows back). Both log formats
 * are read through wire/log_entry.h: an event-format entry is one row, a
 * chunk-format entry one row per event (ev_idx 0, 1, ...), each with the
 * event format's field names. Every field is kept as it was read, known or
 * not, so event types and fields added later (waitlists, groups) are
 * archived faithfully in alloc_events.fields.
 */
#ifndef ALLOCD_CTL_ARCHIVE_LOG_H
#define ALLOCD_CTL_ARCHIVE_LOG_H

#include <stddef.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "allocctl/archive_copy.h"

/* Appends the rows of one XRANGE/XREADGROUP entry ([id, [f, v, ...]]) to
 * rows, each {"id":"<stream id>","i":<index in the entry>,"f":{field:value}}.
 * An entry whose fields are gone (nil: trimmed while pending) adds nothing.
 * Returns the number of rows added, or -1 for a reply that is not an entry,
 * a malformed chunk entry, or without memory. */
int archive_log_entry_decode(const redisReply *entry, json_t *rows);

/* Appends the events of one entry to out as rows of COPY's binary format,
 * the columns of alloc_events but archived_at (archive_pg.h): batch,
 * stream_id, id_ms, id_seq, ev_idx, type, user_id, item, qty, order_id,
 * req, at_ms, at, expires_at_ms, state, fields. The typed columns take what
 * the JSON rows above would give (an empty user, item, order, req or state
 * is NULL; a number that is not an integer of at most 18 digits is NULL; at
 * is at_ms as a time, NULL outside the years 1 - 9999); fields is the JSON
 * object of every field, and a value that is not UTF-8 text (or holds a
 * NUL) is "(not utf-8)" (archive_copy.h). Returns the number of rows, 0
 * for an entry whose fields are gone, or -1 as archive_log_entry_decode.
 * The rows of one COPY go between archive_copy_begin and archive_copy_end. */
int archive_log_entry_copy(const redisReply *entry, const char *batch, archive_buf *out);

/* P:{B}:archive, the archiver's progress hash (docs/ARCHIVE.md); here,
 * away from libpq, because `top` reads it too. */
void archive_progress_key(char *out, size_t len, const char *prefix, const char *batch);

/* The stream id of an entry reply, or NULL. */
const char *archive_log_entry_id(const redisReply *entry);

#endif
