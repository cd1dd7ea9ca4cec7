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
 * Parsing happens in the shell (it needs jansson, or a hand-written fast path
 * for the common flat shape, see request.c); both feed one validator
 * (wire/request_fields.h). The engine only ever sees validated requests.
 */
#ifndef ALLOCD_REQUEST_H
#define ALLOCD_REQUEST_H

#include <stddef.h>
#include "core/engine.h"

typedef enum { REQUEST_OK = 0, REQUEST_DEAD, REQUEST_INVALID } request_outcome;

#define REQUEST_MAX_LIST 256  /* longest prefs / members array */
#define REQUEST_INLINE_BYTES 256 /* fast-path storage inside the struct */

typedef struct request {
    request_outcome outcome;
    engine_request r;         /* valid when outcome == REQUEST_OK; id/user
                                 also set for REQUEST_INVALID when readable */
    char error[200];          /* dead reason or invalid detail */
    const char *op_name;      /* the op as given (for the result), may be NULL */
    void *doc;                /* the parsed JSON document (jansson json_t *);
                                 NULL when the fast path parsed it */
    const char **lists;       /* the elements of the array fields (prefs,
                                 members), one allocation (jansson path only) */
    engine_kv *filter;
    char **filter_values;     /* canonical JSON of each filter value */
    size_t n_filter_values;
    /* Storage of the fast path (see request.c): the copied strings and the
     * prefs/members pointers of a request parsed without jansson live in
     * `inline_buf`, or in `heap` (one malloc) when they do not fit. Then the
     * pointers in `r` point into this struct itself, so a parsed request
     * must not be copied or moved (memcpy, realloc of an array of them)
     * between request_parse() and request_clear(). */
    char *heap;
    union { void *align; char bytes[REQUEST_INLINE_BYTES]; } inline_buf;
} request;

/* Parses raw[0..len). `admin` selects the ctl grammar (pause, resume, close,
 * set_capacity) instead of the queue grammar. Never fails: the outcome says
 * what happened. Call request_clear() afterwards in every case. */
void request_parse(request *q, const char *raw, size_t len, size_t max_bytes,
                   int admin);
void request_clear(request *q);

/* request_parse() without its fast path: always jansson. Exists for the
 * differential test (tests/unit/test_request_fast.c), which checks that
 * both paths give the same result; the daemon has no reason to call it. */
void request_parse_slow(request *q, const char *raw, size_t len, size_t max_bytes,
                        int admin);

/* Canonical JSON text of a jansson value (compact, keys sorted): how attrs
 * and filter values are compared. malloc'd; NULL on failure. */
char *request_canonical_json(const void *json_value);

#endif
