/* metrics.h -- Prometheus text exposition over a tiny HTTP server.
 *
 * `GET /metrics` on metrics_listen (loopback only, off by default) answers
 * with the text format 0.0.4, rendered on demand by a callback; anything
 * else gets 404. One request per connection, then close: Prometheus
 * scrapes every few seconds, so keep-alive buys nothing and costs state.
 * The histograms it renders are core/metrics_hist.h.
 */
#ifndef ALLOCD_METRICS_H
#define ALLOCD_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/jsonw.h"
#include "core/metrics_hist.h"

/* Text-format helpers; `labels` is e.g. `batch="b1"` or "" . A label value
 * that is not known to be plain (an instance name from the config) goes
 * through metrics_label_escape first, into buf (returned). */
const char *metrics_label_escape(const char *v, char *buf, size_t len);
void metrics_header(jsonw *out, const char *name, const char *type, const char *help);
void metrics_value(jsonw *out, const char *name, const char *labels, double v);
void metrics_hist_render(jsonw *out, const char *name, const char *labels,
                         const metrics_hist *h);

typedef void (*metrics_render_fn)(jsonw *out, void *data);

typedef struct metrics_server metrics_server;

/* Listens on host:port. Returns 0 or a negative libuv error (nothing is
 * left open then). */
int metrics_server_start(metrics_server **out, uv_loop_t *loop, const char *host,
                         int port, metrics_render_fn render, void *data);
/* Closes the listener and every open connection; frees asynchronously. */
void metrics_server_close(metrics_server *m);

#endif
