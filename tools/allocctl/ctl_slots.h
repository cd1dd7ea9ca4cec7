/* ctl_slots.h -- selection slots from a lottery file (`allocctl batch
 * slots`, contract 9.4): reading the file, ranking the users, and the
 * schedule of a slot every `every` ms for `per_slot` users, best first.
 *
 * Pure (no Redis, no I/O but the text handed in), so the file format and
 * the schedule are tested apart from the command (tests/unit/test_ctl_slots.c).
 */
#ifndef ALLOCD_CTL_SLOTS_H
#define ALLOCD_CTL_SLOTS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { SLOTS_BY_NUMBER = 0, SLOTS_BY_POINTS = 1 } slots_order;

typedef struct slots_user {
    char *user;
    int64_t value;      /* lottery number or points */
    size_t line;        /* in the file: ties keep file order */
    int64_t at;         /* the slot, once scheduled */
} slots_user;

typedef struct slots_plan {
    slots_user *users;
    size_t n;
} slots_plan;

/* Reads a CSV: a header `user,number` or `user,points` (the second column's
 * name is free; a line starting with # is a comment), then one `user,value`
 * per line, value an integer. On error returns -1 with "LINE: message" in
 * err (the caller prefixes the file name) and frees what it read. */
int slots_parse(const char *text, size_t len, slots_plan *p, char *err, size_t errlen);
/* Ranks (number: lowest first; points: highest first; ties in file order)
 * and gives user i (0-based, in rank order) the slot
 * start + (i / per_slot) * every. */
void slots_schedule(slots_plan *p, slots_order order, int64_t start, int64_t every,
                    int64_t per_slot);
/* "5m", "30s", "2h", "250ms" or plain ms; > 0. 0 or -1. */
int slots_parse_duration(const char *s, int64_t *ms);
void slots_free(slots_plan *p);

#endif
