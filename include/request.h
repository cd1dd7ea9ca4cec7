/* request.h -- turning the bytes producers push into engine requests.
 *
 * Three outcomes, as the contract demands:
 * - REQUEST_DEAD: the bytes cannot be read as a request at all (too large,
 *   not JSON, not an object, no string `id`). They go to P:{B}:dead with the
 *   reason; nobody can be answered because there is no id to answer.
 * - REQUEST_INVALID: the id is readable but the request breaks the contract
 *   (unknown op, missing or mistyped field, value out of range). It gets an
 *   `invalid` result with reason `bad_request` and a human-readable detail.
 * - REQUEST_OK: a validated engine_request, its strings owned by this struct.
 *
 * Parsing happens in the shell (it needs jansson); the engine only ever sees
 * validated requests.
 */
#ifndef ALLOCD_REQUEST_H
#define ALLOCD_REQUEST_H

#include <stddef.h>
#include "engine.h"

typedef enum { REQUEST_OK = 0, REQUEST_DEAD, REQUEST_INVALID } request_outcome;

#define REQUEST_MAX_LIST 256  /* longest prefs / members array */

typedef struct request {
    request_outcome outcome;
    engine_request r;         /* valid when outcome == REQUEST_OK; id/user
                                 also set for REQUEST_INVALID when readable */
    char error[200];          /* dead reason or invalid detail */
    const char *op_name;      /* the op as given (for the result), may be NULL */
    void *doc;                /* the parsed JSON document (jansson json_t *) */
    const char **lists;       /* prefs then members, one allocation */
    engine_kv *filter;
    char **filter_values;     /* canonical JSON of each filter value */
    size_t n_filter_values;
} request;

/* Parses raw[0..len). `admin` selects the ctl grammar (pause, resume, close,
 * set_capacity) instead of the queue grammar. Never fails: the outcome says
 * what happened. Call request_clear() afterwards in every case. */
void request_parse(request *q, const char *raw, size_t len, size_t max_bytes,
                   int admin);
void request_clear(request *q);

/* Canonical JSON text of a jansson value (compact, keys sorted): how attrs
 * and filter values are compared. malloc'd; NULL on failure. */
char *request_canonical_json(const void *json_value);

#endif
