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

/* Appends the rows of one XRANGE/XREADGROUP entry ([id, [f, v, ...]]) to
 * rows, each {"id":"<stream id>","i":<index in the entry>,"f":{field:value}}.
 * An entry whose fields are gone (nil: trimmed while pending) adds nothing.
 * Returns the number of rows added, or -1 for a reply that is not an entry,
 * a malformed chunk entry, or without memory. */
int archive_log_entry_decode(const redisReply *entry, json_t *rows);

/* P:{B}:archive, the archiver's progress hash (docs/ARCHIVE.md); here,
 * away from libpq, because `top` reads it too. */
void archive_progress_key(char *out, size_t len, const char *prefix, const char *batch);

/* The stream id of an entry reply, or NULL. */
const char *archive_log_entry_id(const redisReply *entry);

#endif
