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
 * when the scan's cursor comes back to 0, so no decision sees a table
 * built from part of the pages. HSCAN returns every field that is in the
 * hash for the whole scan; a field added or removed meanwhile is right
 * after the next scan. The worker sends the pages one at a time, on the
 * connection of its takes (batch_worker.c), and holds a take back while
 * the table it would be decided with comes from a scan that began more
 * than SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS ago -- after an idle
 * spell, say -- until a new scan is in: so a request dequeued that long
 * after an operator's change is decided with it. Under a steady load a
 * scan starts every SLOTS_SCAN_EVERY_MS and is in long before the grace
 * runs out, and no take waits.
 *
 * Times are monotonic ms (a wall clock stepped back would stall the scans).
 */
#ifndef ALLOCD_SLOTS_SCAN_H
#define ALLOCD_SLOTS_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "core/engine.h"

#define SLOTS_SCAN_EVERY_MS 1000
#define SLOTS_SCAN_GRACE_MS 500
#define SLOTS_SCAN_WATCHED_EVERY_MS 30000   /* watched: read anyway, however quiet */
#define SLOTS_SCAN_COUNT 1000
#define SLOTS_SCAN_CURSOR_MAX 24   /* a decimal uint64 and its NUL */

/* What a whole scan is installed into: clear() empties the engine's
 * table, pair() sets one field. The selection slots by default
 * (slots_scan_init); the profiles of contract 11.2 are the same kind of
 * per-user hash of the operator's, read the same way
 * (worker/profiles_scan.h).
 *
 * A target whose fields stand alone (a user's profile says nothing about
 * another's) may be `streamed`: its pairs go in page by page as they come
 * instead of being gathered first, so a scan holds no copy of the hash
 * (100,000 profiles are 7.6 MB of it). Such a target gets clear() at the
 * first page of every scan, also of a scan begun again after a bad page,
 * may see a field twice (HSCAN's rehash), and gets end() after the last
 * page. */
typedef struct slots_scan_target {
    void (*clear)(engine *e, void *data);
    void (*pair)(engine *e, const char *batch, const char *user, const char *value, void *data);
    void (*end)(engine *e, void *data);   /* after the last pair; NULL: none */
    void *data;
    int streamed;
} slots_scan_target;

typedef struct slots_scan {
    int64_t started_at;       /* when the current or last scan began */
    int64_t installed_from;   /* when the scan (or load) behind the engine's table began */
    int running;              /* a scan is between its first and last page */
    int page_out;             /* a page is asked and not answered */
    char cursor[SLOTS_SCAN_CURSOR_MAX]; /* the next page's cursor */
    int cleared;              /* streamed: clear() was called for this scan */
    int64_t watch_from;       /* a watch reports every change after this (0: none) */
    int64_t dirty_at;         /* a change reported and not read yet (0: none) */
    int64_t clean_at;         /* the watch last found nothing written (when it asked) */
    char *staged;             /* "user\0value\0" of the pages so far */
    size_t staged_len, staged_cap;
    slots_scan_target target;
} slots_scan;

void slots_scan_init(slots_scan *s);
/* The same scan of another hash, installed with t. */
void slots_scan_init_target(slots_scan *s, const slots_scan_target *t);
void slots_scan_free(slots_scan *s);
/* The load read the whole hash at `now`: that is the table, and a scan
 * under way is forgotten. */
void slots_scan_loaded(slots_scan *s, int64_t now);
/* A page will not be answered (dropped, or its connection went down): the
 * scan under way is forgotten; the next begins when due. */
void slots_scan_abandon(slots_scan *s);
/* A watch of the hash (worker/profiles_watch.h), when there is one: armed
 * at `now`, it reports every change made after it (slots_scan_changed),
 * and when it asked and found none (slots_scan_clean). While it stands, a
 * scan is due when a change was reported, when the table comes from a
 * read begun before the watch, and at the latest every
 * SLOTS_SCAN_WATCHED_EVERY_MS; and the table is current for the interval
 * and its grace from its read or the watch's last clean answer, whichever
 * is later -- so a take held after an idle spell waits for one answer, not
 * a whole read. Lost (or never armed), the scan reads every
 * SLOTS_SCAN_EVERY_MS as without one. A load (slots_scan_loaded, called
 * before its read is sent) is such a read: with a watch armed before it,
 * no other read follows. */
void slots_scan_watch_armed(slots_scan *s, int64_t now);
void slots_scan_watch_lost(slots_scan *s);
void slots_scan_changed(slots_scan *s, int64_t now);
void slots_scan_clean(slots_scan *s, int64_t asked_at);
/* The cursor of the page to ask for now (HSCAN key <cursor> COUNT
 * SLOTS_SCAN_COUNT), or NULL when none is due: a page is out, or no scan
 * runs, the last began less than SLOTS_SCAN_EVERY_MS ago and the table is
 * current. The caller calls slots_scan_sent once the page is asked. */
const char *slots_scan_due(slots_scan *s, int64_t now);
void slots_scan_sent(slots_scan *s);
/* 1 when a take may be decided with the engine's table now: its scan
 * began at most SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS ago. */
int slots_scan_current(const slots_scan *s, int64_t now);
/* A page's reply: 1 when it was the last (the engine's table is now the
 * hash as scanned), 0 when more pages follow, -EPROTO for a reply that is
 * no HSCAN page, -ENOMEM. After an error the scan starts over from its
 * first page. */
int slots_scan_page(slots_scan *s, const redisReply *r, engine *e, const char *batch);

#endif
