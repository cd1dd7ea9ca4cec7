/* lottery_result.h -- the fields of a result that `lottery verify` checks
 * against the replayed draw (contract 9.1, 11.3): seq, draw, rank, points
 * and whether it came from the waitlist. One reader of them, so that
 * allocctl and the dashboard parse a result the same way.
 */
#ifndef ALLOCD_LOTTERY_RESULT_H
#define ALLOCD_LOTTERY_RESULT_H

#include <stddef.h>
#include <stdint.h>

typedef struct lottery_result {
    int has;                  /* a result exists for the request's id */
    int64_t seq, draw, rank;  /* 0 when absent */
    int has_points;           /* `points` is an integer */
    int64_t points;
    int has_other_points;     /* `points` present but not an integer */
    /* may be decided after its turn in the draw, by design: from the
     * waitlist (`wait_no`, 9.5), or a swap that waited as an offer and was
     * answered later (9.3) */
    int late;
} lottery_result;

/* Parses a P:{B}:results value. A value that is not a JSON object is a
 * result with every field absent (has = 1). */
void lottery_result_parse(lottery_result *out, const char *s, size_t len);
/* The same from a parsed value (NULL: no object, has = 1 all the same);
 * jansson's json_t, named so that the worker's headers need no jansson. */
struct json_t;
void lottery_result_from_json(lottery_result *out, const struct json_t *j);

#endif
