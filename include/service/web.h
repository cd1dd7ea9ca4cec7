/* web.h -- what allocd serves over HTTP on metrics_listen.
 *
 *   GET /metrics            Prometheus text (token required when set)
 *   GET /api/overview       JSON: every batch and every instance
 *   GET /api/batch?id=B     JSON: one batch, its recent log and dead entries
 *                           (each dead entry's raw cut to 300 bytes)
 *   GET /api/dead?id=B&index=I&at=MS  one dead entry whole
 *   GET /api/rooms, /api/room, /api/round  the round (web_round.h)
 *   GET /, /app.js, /app.css  the read-only dashboard (static, embedded in
 *                           the binary: no data in them, so no token needed;
 *                           the page sends the token with its API calls)
 *
 * Everything is answered from memory: the registry's workers (this
 * instance's batches) and the watcher (every batch, from Redis, each
 * second).
 */
#ifndef ALLOCD_WEB_H
#define ALLOCD_WEB_H

#include <uv.h>

#include "base/config.h"
#include "core/jsonw.h"
#include "service/registry.h"

typedef struct web web;

/* Renders the daemon-wide series (allocd_info, uptime, ...). */
typedef void (*web_render_fn)(jsonw *out, void *data);

/* *reg is read on each request (it becomes NULL when the registry has
 * stopped). Returns 0, or -1 with a message in err. */
int web_start(web **out, uv_loop_t *loop, const allocd_config *cfg, registry *const *reg,
              web_render_fn render, void *data, char *err, size_t errlen);
void web_stop(web *w);

#endif
