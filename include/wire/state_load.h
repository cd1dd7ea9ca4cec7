/* state_load.h -- reading back what a restart needs from Redis: holders,
 * tombstones and room attributes, into an engine. Only at load time, so it
 * uses jansson; the formats are the ones wire/records.h writes.
 */
#ifndef ALLOCD_STATE_LOAD_H
#define ALLOCD_STATE_LOAD_H

#include <stddef.h>

#include "core/engine.h"

/* Load one holders entry / one tombstone into the engine. Returns 0, or -1
 * with a message in err. */
int state_load_holder(engine *e, const char *user, const char *json,
                      size_t len, char *err, size_t errlen);
/* One P:{B}:attrs entry: a JSON object whose values become canonical JSON. */
int state_load_attrs(engine *e, const char *item, const char *json,
                     size_t len, char *err, size_t errlen);
int state_load_ended(engine *e, const char *order, const char *json,
                     size_t len, char *err, size_t errlen);
/* One P:{B}:groups entry (records_group's format). */
int state_load_group(engine *e, const char *id, const char *json,
                     size_t len, char *err, size_t errlen);
/* One P:{B}:waitlist entry (records_wait_entry): the request is parsed
 * again with the queue's own parser (max_bytes as for the queue) and put
 * back on the engine's waitlist with its ticket, time and seq. */
int state_load_wait(engine *e, const char *id, const char *json, size_t len,
                    size_t max_bytes, char *err, size_t errlen);

#endif
