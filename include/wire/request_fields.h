/* request_fields.h -- the one validator of requests and admin commands.
 *
 * request.c reads the bytes in two ways (a hand-written scanner for flat
 * requests, jansson for everything else). Neither checks the contract:
 * both only find the raw value of each field that matters -- its kind
 * (string, integer, array, ...) and, where it has one, its value -- and
 * hand them to request_validate(), which holds every rule of the contract
 * (which fields each op needs, their types and limits) and every message a
 * client can see. So the two readers cannot disagree on what is valid;
 * they can only disagree on what the bytes say, which is what the
 * differential test (tests/unit/test_request_fast.c) is left to check.
 *
 * Internal to the wire layer: only request.c and request_fields.c include
 * this header; everybody else sees request.h.
 */
#ifndef ALLOCD_REQUEST_FIELDS_H
#define ALLOCD_REQUEST_FIELDS_H

#include <stddef.h>
#include "core/engine.h"
#include "wire/request.h"

/* The fields the contract gives a meaning to. Any other key of a request
 * is ignored, so the readers skip it. */
typedef enum {
    FIELD_ID, FIELD_USER, FIELD_OP, FIELD_ITEM, FIELD_QTY, FIELD_ORDER,
    FIELD_ROOM, FIELD_PREFS, FIELD_MEMBERS, FIELD_CAPACITY, FIELD_FILTER,
    FIELD_TO, FIELD_FROM, FIELD_VERSION, FIELD_WITH,
    FIELD_WAIT, FIELD_CHECK,
    FIELD_COUNT
} request_field;

/* What a reader found under a key, in JSON's terms: the validator decides
 * what each kind means for each field. */
typedef enum {
    RAW_ABSENT = 0, /* no such key */
    RAW_STRING,     /* .str */
    RAW_INT,        /* an integer JSON number: .i */
    RAW_ARRAY,      /* .n elements, .list (see raw_value) */
    RAW_OBJECT,     /* .n keys; .filter for FIELD_FILTER (see raw_value) */
    RAW_OTHER,      /* null, a real */
    RAW_BOOL,       /* true or false: .i is 1 or 0 */
    RAW_NOMEM       /* the reader ran out of memory storing this value */
} raw_kind;

typedef struct raw_value {
    raw_kind kind;
    size_t n;                       /* RAW_ARRAY: elements; RAW_OBJECT: keys */
    union {
        const char *str;            /* RAW_STRING: NUL-terminated, owned by
                                       the request (inline buffer or doc) */
        long long i;                /* RAW_INT; RAW_BOOL: 1 or 0 */
        const char *const *list;    /* RAW_ARRAY: never NULL; each element's
                                       string, or NULL for an element that
                                       is not a string */
        const engine_kv *filter;    /* RAW_OBJECT of FIELD_FILTER with at
                                       most REQUEST_MAX_LIST keys: key ->
                                       canonical JSON of the value; never
                                       NULL then. NULL for any other object */
    } u;
} raw_value;

/* Everything a reader hands to the validator. */
typedef struct request_fields {
    raw_value v[FIELD_COUNT];
    int number_overflowed;  /* a number beyond a 64-bit integer or a double
                               was read as 0 (jansson path only) */
} request_fields;

/* The JSON key of a field ("id", "user", ...). */
const char *request_field_name(request_field f);

/* The field a key of n bytes names, or -1 for a key the contract ignores. */
int request_field_lookup(const char *key, size_t n);

/* Decides the request from what a reader found: q->outcome becomes
 * REQUEST_OK, REQUEST_INVALID (with the detail in q->error) or, when the
 * id is missing or not a string, REQUEST_DEAD. Sets q->r and q->op_name as
 * far as the checks got; never allocates. `admin` selects the ctl grammar. */
void request_validate(request *q, const request_fields *f, int admin);

/* Sets q->outcome and its message. For the readers' own errors (size,
 * JSON syntax), which come before any field is looked at. */
void request_fail(request *q, request_outcome o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
