/* records.h -- the JSON documents allocd writes to Redis: results,
 * holders, dead entries and tombstones (docs/PROTOCOL.md, "Results" and
 * "Holders"). Written with jsonw: no allocation on the hot path. Reading
 * the ones a restart needs back is wire/state_load.h.
 */
#ifndef ALLOCD_RECORDS_H
#define ALLOCD_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/jsonw.h"
#include "wire/request.h"
#include "core/engine_groups.h"
#include "core/engine_swap.h"

/* A result for a request the engine decided. seq 0 = admin command (no seq). */
void records_result(jsonw *w, const request *q, const engine_result *res,
                    int64_t seq, int64_t at);
/* The same for a request served from the early=shuffle lottery pool: with
 * `draw`, the 1-based position of its user's ticket in the draw, and with
 * draw_by=points the points it was drawn with (contract 11.3; NULL: none)
 * -- what `allocctl lottery verify` checks against the replay. */
void records_result_drawn(jsonw *w, const request *q, const engine_result *res,
                          int64_t seq, int64_t at, int64_t draw, const int64_t *points);
/* The fields of a `waiting` result (contract 9.5): wait_pos, wait_no. */
void records_waiting_fields(jsonw *w, const engine_result *res);
/* A P:{B}:waitlist value: what a restart needs to put a waiting request
 * back in its place -- {"no":ticket,"at":joined ms,"why":reason,
 * "seq":seq,"req":{the request, as records_request writes it}}. */
void records_wait_entry(jsonw *w, const engine_result *res, const char *why,
                        int64_t seq, int64_t at, const engine_request *r);
/* A validated queue request as JSON the parser reads back to the same
 * engine_request: id, user, op and the op's own fields ("wait":true when
 * set); filter values are already canonical JSON. */
void records_request(jsonw *w, const engine_request *r);
/* An `invalid` result: reason bad_request, detail = q->error. */
void records_invalid(jsonw *w, const request *q, int64_t seq, int64_t at);
/* The P:{B}:holders value of a user (rooms or stock form). */
void records_holder(jsonw *w, const engine *e, const engine_user_view *v);
/* A P:{B}:dead entry: {"raw":..., "error":..., "at":ms}, plus "raw_base64"
 * when raw is not valid UTF-8 (so nothing is lost). Raw bytes beyond
 * RECORDS_DEAD_RAW_MAX are cut (then "raw_bytes" gives the full length and
 * "truncated" is true): an entry must stay far below Redis's 1 MB bulk
 * limit, or one oversized request would make every apply fail. */
#define RECORDS_DEAD_RAW_MAX 65536
void records_dead(jsonw *w, const char *raw, size_t len, const char *error,
                  int64_t at);
/* A P:{B}:orders_ended value. */
void records_ended(jsonw *w, const engine *e, const char *user,
                   const engine_order *o);

/* An order's state as the records spell it ("held", ...), and back (0 for
 * anything else). */
const char *records_order_state_name(int s);
int records_order_state_parse(const char *s);

/* A live group of P:{B}:groups (contract 9.2): {"leader","members",
 * "invited","prefs","filter","version"}. */
void records_group(jsonw *w, const engine_group_view *g);

#endif
