/* metrics_hist.h -- fixed-bucket latency histograms.
 *
 * Plain counters, cheap enough to observe on every chunk: the worker keeps
 * them, the metrics endpoint renders them (service/metrics.h) and the
 * worker's stats read quantiles from them. Seconds in, no clock read here.
 */
#ifndef ALLOCD_METRICS_HIST_H
#define ALLOCD_METRICS_HIST_H

#include <stddef.h>
#include <stdint.h>

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

#endif
