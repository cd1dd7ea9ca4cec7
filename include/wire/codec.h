/* codec.h -- the JSON documents allocd writes to Redis, and reading back the
 * ones it needs after a restart.
 *
 * Writing uses jsonw (no allocation on the hot path); reading (only at load
 * time) uses jansson. Both directions live here so the formats of
 * docs/PROTOCOL.md section "Results" and "Holders" are defined in one place.
 */
#ifndef ALLOCD_CODEC_H
#define ALLOCD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/jsonw.h"
#include "wire/request.h"

/* A result for a request the engine decided. seq 0 = admin command (no seq). */
void codec_result(jsonw *w, const request *q, const engine_result *res,
                  int64_t seq, int64_t at);
/* An `invalid` result: reason bad_request, detail = q->error. */
void codec_invalid(jsonw *w, const request *q, int64_t seq, int64_t at);
/* The P:{B}:holders value of a user (rooms or stock form). */
void codec_holder(jsonw *w, const engine *e, const engine_user_view *v);
/* A P:{B}:dead entry: {"raw":..., "error":..., "at":ms}, plus "raw_base64"
 * when raw is not valid UTF-8 (so nothing is lost). Raw bytes beyond
 * CODEC_DEAD_RAW_MAX are cut (then "raw_bytes" gives the full length and
 * "truncated" is true): an entry must stay far below Redis's 1 MB bulk
 * limit, or one oversized request would make every apply fail. */
#define CODEC_DEAD_RAW_MAX 65536
void codec_dead(jsonw *w, const char *raw, size_t len, const char *error,
                int64_t at);
/* A P:{B}:orders_ended value. */
void codec_ended(jsonw *w, const engine *e, const char *user,
                 const engine_order *o);

/* Load one holders entry / one tombstone into the engine. Returns 0, or -1
 * with a message in err. */
int codec_load_holder(engine *e, const char *user, const char *json,
                      size_t len, char *err, size_t errlen);
/* One P:{B}:attrs entry: a JSON object whose values become canonical JSON. */
int codec_load_attrs(engine *e, const char *item, const char *json,
                     size_t len, char *err, size_t errlen);
int codec_load_ended(engine *e, const char *order, const char *json,
                     size_t len, char *err, size_t errlen);

#endif
