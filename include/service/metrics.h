/* metrics.h -- Prometheus text exposition over a tiny HTTP server.
 *
 * `GET /metrics` on metrics_listen (loopback only, off by default) answers
 * with the text format 0.0.4, rendered on demand by a callback; anything
 * else gets 404. One request per connection, then close: Prometheus
 * scrapes every few seconds, so keep-alive buys nothing and costs state.
 * The histograms here are plain fixed-bucket counters, cheap enough to
 * observe on every chunk.
 */
#ifndef ALLOCD_METRICS_H
#define ALLOCD_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "jsonw.h"

#define METRICS_BUCKETS 14

/* Seconds; bucket i counts observations <= metrics_bucket_bounds[i]. */
extern const double metrics_bucket_bounds[METRICS_BUCKETS];

typedef struct metrics_hist {
    uint64_t buckets[METRICS_BUCKETS + 1]; /* the last is +Inf */
    uint64_t count;
    double sum;
} metrics_hist;

void metrics_hist_observe(metrics_hist *h, double seconds);
/* Approximate quantile (upper bound of the bucket it falls in), seconds;
 * 0 when empty. */
double metrics_hist_quantile(const metrics_hist *h, double q);

/* Text-format helpers; `labels` is e.g. `batch="b1"` or "" . */
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
