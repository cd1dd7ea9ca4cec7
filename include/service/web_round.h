/* web_round.h -- the dashboard's view of a round, for the office running
 * it: rooms by building and floor, who holds a room, groups, the lottery,
 * selection slots and swap offers.
 *
 *   GET /api/rooms?id=B[&building=X]  beds taken and free by building and
 *                           floor (from attrs `building`, `floor`); with
 *                           building, that building's rooms and their
 *                           eligibility rules (attrs only_X / same_X)
 *   GET /api/room?id=B&room=R  the holders of one room
 *   GET /api/round?id=B[&offset=N]  groups (100 a page), the lottery's
 *                           commitment and seed, slots, open swap offers
 *
 * Built from the watcher's round snapshot (watch_want_round), of the parts
 * each needs: the first call asks for them and answers "loading" until a
 * tick has read them.
 * A building of a 1,200-room round is a page, not the whole round, so the
 * answer stays small; the aggregates are computed here, on each request,
 * from memory.
 */
#ifndef ALLOCD_WEB_ROUND_H
#define ALLOCD_WEB_ROUND_H

#include <jansson.h>

#include "service/watch.h"

#define WEB_ROUND_PAGE 100

/* The parts of the watcher's round snapshot each view reads. */
#define WEB_ROUND_ROOMS  WATCH_PART(WATCH_ROOMS)
#define WEB_ROUND_ROOM   (WATCH_PART(WATCH_ROOMS) | WATCH_PART(WATCH_HOLDERS))
#define WEB_ROUND_PEOPLE (WATCH_PART(WATCH_PEOPLE) | WATCH_PART(WATCH_HOLDERS))

/* Each adds its fields to out (an object). */
void web_round_rooms(const watch_batch *b, const char *building, json_t *out);
void web_round_room(const watch_batch *b, const char *room, json_t *out);
void web_round_people(const watch_batch *b, long offset, int64_t now_ms, json_t *out);

#endif
