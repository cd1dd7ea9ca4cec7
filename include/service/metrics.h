/* metrics.h -- the Prometheus text exposition format (0.0.4): headers,
 * samples, escaped label values, histograms (core/metrics_hist.h) and the
 * process series. service/web.c serves it as GET /metrics through
 * service/http.c.
 */
#ifndef ALLOCD_METRICS_H
#define ALLOCD_METRICS_H

#include <stddef.h>
#include <stdint.h>

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

/* process_cpu_seconds_total, process_resident_memory_bytes,
 * process_open_fds, process_max_fds, process_start_time_seconds. */
void metrics_process_render(jsonw *out, double start_time_s);

#endif
