/* ctl_items.h -- the items of a batch read from an operator's file, for
 * `allocctl batch create`.
 *
 * Two formats, told apart by the first non-blank character ('{' or '['
 * means JSON, anything else CSV):
 * - CSV with a header line `id,capacity[,attr...]`; every further column
 *   becomes a room attribute. A cell that is a JSON number, true or false
 *   becomes that JSON value; a double-quoted cell is always a string (so
 *   "7" stays the string "7"); empty cells are left out.
 * - JSON: an object {"id": capacity, ...}, or an array of
 *   {"id": "...", "capacity": N, "attrs": {...}}.
 * Item ids are 1 to 64 characters without control characters, unique;
 * capacities are integers 0..2000000000 (the range of set_capacity).
 * Every error is `FILE:LINE: message`, so an operator can jump to it.
 */
#ifndef ALLOCD_CTL_ITEMS_H
#define ALLOCD_CTL_ITEMS_H

#include <stddef.h>
#include <stdint.h>

#define CTL_ITEM_ID_MAX 64
#define CTL_CAPACITY_MAX 2000000000LL

typedef struct ctl_item {
    char *id;
    int64_t capacity;
    char *attrs;        /* compact JSON object, NULL when the item has none */
    int line;           /* where it was defined */
} ctl_item;

typedef struct ctl_items {
    ctl_item *v;
    size_t n, cap;
} ctl_items;

/* Returns 0, or -1 with "FILE:LINE: message" (or "FILE: message") in err. */
int ctl_items_load(ctl_items *out, const char *path, char *err, size_t errlen);
/* The same from text already in memory; name is used in messages. */
int ctl_items_parse(ctl_items *out, const char *name, const char *text,
                    size_t len, char *err, size_t errlen);
void ctl_items_free(ctl_items *items);

/* The CSV reader behind the items file, for other files of the same
 * dialect (profiles): header() gets line 1 (no cells when it is blank),
 * row() every further line that is not blank, with the header's cells.
 * A callback returns 0, or -1 with "FILE:LINE: message" in err like the
 * items file's. Quoted cells may hold commas and "" but no line break. */
typedef struct ctl_csv_cell {
    char *s;            /* unquoted and unescaped, NUL-terminated */
    size_t n;
    int quoted;
} ctl_csv_cell;

typedef struct ctl_csv_reader {
    int (*header)(void *data, const ctl_csv_cell *h, size_t n, char *err, size_t errlen);
    int (*row)(void *data, int line, const ctl_csv_cell *h, size_t nh, const ctl_csv_cell *c,
               size_t n, char *err, size_t errlen);
} ctl_csv_reader;

int ctl_csv_read(const char *name, const char *text, size_t len, const ctl_csv_reader *rd,
                 void *data, char *err, size_t errlen);

/* A command-line or CSV cell as a JSON value: a JSON number, true, false,
 * else a string. New reference, NULL without memory. */
void *ctl_cell_json(const char *s, size_t n);

#endif
