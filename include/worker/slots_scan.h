/* slots_scan.h -- the selection slots (contract 9.4) read again while a
 * batch is served, a page at a time.
 *
 * The operator may change P:{B}:slots during a round (move a user, add
 * one, rewrite the hash), so the worker reads it again at most every
 * SLOTS_SCAN_EVERY_MS. One HGETALL of a housing round's tens of thousands
 * of users blocks Redis for milliseconds every second (50,000 fields:
 * 9.3 ms), which every other client of that Redis waits out. HSCAN pages
 * of SLOTS_SCAN_COUNT fields each cost Redis a fraction of a millisecond;
 * a small hash (Redis's listpack encoding) still comes back whole in the
 * first page.
 *
 * The pages are gathered here and replace the engine's table in one step
 * when the scan's cursor comes back to 0, so no decision ever sees half a
 * table. HSCAN returns every field that is in the hash for the whole
 * scan; a field added or removed meanwhile is right after the next scan,
 * at most about a second later. The worker sends the pages one at a time,
 * on the connection of its takes (batch_worker.c).
 */
#ifndef ALLOCD_SLOTS_SCAN_H
#define ALLOCD_SLOTS_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "core/engine.h"

#define SLOTS_SCAN_EVERY_MS 1000
#define SLOTS_SCAN_COUNT 1000
#define SLOTS_SCAN_CURSOR_MAX 24   /* a decimal uint64 and its NUL */

typedef struct slots_scan {
    int64_t started_at;       /* ms: when the current or last scan began */
    int running;              /* a scan is between its first and last page */
    int page_out;             /* a page is asked and not answered */
    char cursor[SLOTS_SCAN_CURSOR_MAX]; /* the next page's cursor */
    char *staged;             /* "user\0value\0" of the pages so far */
    size_t staged_len, staged_cap;
} slots_scan;

void slots_scan_init(slots_scan *s);
void slots_scan_free(slots_scan *s);
/* Forgets a scan under way (a reload reads the whole hash itself) and
 * counts the next one from now. */
void slots_scan_reset(slots_scan *s, int64_t now);
/* The cursor of the page to ask for now (HSCAN key <cursor> COUNT
 * SLOTS_SCAN_COUNT), or NULL when none is due: a page is out, or no scan
 * runs and the last began less than SLOTS_SCAN_EVERY_MS ago. The caller
 * calls slots_scan_sent once the page is asked. */
const char *slots_scan_due(slots_scan *s, int64_t now);
void slots_scan_sent(slots_scan *s);
/* A page's reply: 1 when it was the last (the engine's table is now the
 * hash as scanned), 0 when more pages follow, -EPROTO for a reply that is
 * no HSCAN page, -ENOMEM. After an error the scan starts over from its
 * first page. */
int slots_scan_page(slots_scan *s, const redisReply *r, engine *e, const char *batch);

#endif
