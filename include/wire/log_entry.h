/* log_entry.h -- the two shapes of a P:{B}:log entry, and the one decoder
 * every reader uses (allocctl verify's replay, the chaos checker, the
 * archive).
 *
 * `log_format = "event"` (the contract's section 7, version 2): one
 * stream entry per change, fields type, user, item, qty, order, req, at
 * (and expires_at for a reservation's grant, state for a state change).
 *
 * `log_format = "chunk"` (the default, contract 11.1): one stream entry per applied chunk that changed
 * something, fields
 *     format  "chunk"
 *     n       the number of events
 *     events  a JSON array with one array per event, in order:
 *             [type, user, item, qty, order, req, at]
 *             [type, user, item, qty, order, req, at, expires_at]
 *             [type, user, item, qty, order, req, at, expires_at, state]
 *             [type, user, item, qty, order, req, at, expires_at, state, {extras}]
 *             strings except qty, at, expires_at (integers); "" where the
 *             event has no value (user and item of a state change, order
 *             of a room event, req of an expiry); expires_at 0 = none;
 *             state "" = none when extras follow. {extras} is an object of
 *             the fields an event type adds (log_entry_extras: wait_no,
 *             status, reason of the waitlist's wait and wait_served).
 * One XADD per chunk instead of one per grant: Redis's work for the log
 * drops from about 0.45 us to a few hundredths of a us per request
 * (commit 5f644f7). The entry is written in the same transaction as
 * the changes, so the log still replays to holders and free exactly.
 *
 * Readers never look at the setting: an entry with `format` = "chunk" is
 * decoded into its events, any other entry is one event as it stands, so
 * a log whose setting changed on the way (SIGHUP) reads the same. Every
 * event a reader sees has the event format's field names and values.
 */
#ifndef ALLOCD_LOG_ENTRY_H
#define ALLOCD_LOG_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/jsonw.h"
#include "core/replay.h"

typedef struct log_field {
    const char *key;
    const char *val;
    size_t vlen;
} log_field;

/* Fields an event type adds to the common ones (a waitlist entry's
 * wait_no, status and reason): one list for both formats. */
#define LOG_EVENT_MAX_EXTRAS 4
#define LOG_EVENT_MAX_FIELDS (9 + LOG_EVENT_MAX_EXTRAS)

typedef struct log_extra {
    const char *key;
    const char *str;        /* NULL: the value is num */
    int64_t num;
} log_extra;

/* The extra fields of one event, in the order both formats write them. */
size_t log_entry_extras(const engine_event *ev, log_extra out[LOG_EVENT_MAX_EXTRAS]);

/* One event, in the event format's field names; the strings live until the
 * callback returns. Non-zero stops the decoding (returned as is). */
typedef int (*log_event_fn)(void *ud, const log_field *fields, size_t n);

/* 1 when the entry's fields say chunk format. */
int log_entry_is_chunk(const log_field *entry, size_t n);

/* Calls fn for every event of one stream entry (its field/value pairs).
 * Returns the number of events, -1 when a chunk entry is malformed (err
 * says why), or what a non-zero fn returned. */
int log_entry_decode(const log_field *entry, size_t n, log_event_fn fn, void *ud,
                     char *err, size_t errlen);

/* One event's fields (as log_entry_decode hands them) -> the typed event
 * the replay takes (core/replay.h), its strings pointing into the fields
 * (which must be NUL-terminated, as hiredis and jansson give them). An
 * unknown type is REPLAY_TYPE_OTHER; an added field the replay knows
 * (`by`, contract 11.5) is kept. Returns 0, or -1 when qty, at,
 * expires_at or wait_no is not an integer (err names it). */
int log_entry_event(const log_field *f, size_t n, replay_event *out, char *err, size_t errlen);

/* The `events` value of a chunk entry: every event the engine recorded
 * since its last drain, as described above. */
void log_entry_write_events(jsonw *w, const engine *e);

#endif
