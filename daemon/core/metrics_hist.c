/* metrics_hist.c -- see metrics_hist.h. */
#include "core/metrics_hist.h"

const double metrics_bucket_bounds[METRICS_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5,
};

void metrics_hist_observe(metrics_hist *h, double seconds)
{
    size_t i = 0;
    while (i < METRICS_BUCKETS && seconds > metrics_bucket_bounds[i]) i++;
    h->buckets[i]++;
    h->count++;
    h->sum += seconds;
}

double metrics_hist_quantile(const metrics_hist *h, double q)
{
    if (!h->count) return 0;
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.5), seen = 0;
    if (rank < 1) rank = 1;
    for (size_t i = 0; i <= METRICS_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) return i < METRICS_BUCKETS ? metrics_bucket_bounds[i] : metrics_bucket_bounds[METRICS_BUCKETS - 1];
    }
    return metrics_bucket_bounds[METRICS_BUCKETS - 1];
}
