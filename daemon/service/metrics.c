/* metrics.c -- see metrics.h. */
#include "service/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/log.h"

static void printf_out(jsonw *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void printf_out(jsonw *out, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) jsonw_raw(out, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void metrics_header(jsonw *out, const char *name, const char *type, const char *help)
{
    printf_out(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The exposition format's label value escapes: backslash, double quote and
 * line feed. Anything else is copied; a value cut for room stays escaped
 * whole (an escape is never split). */
const char *metrics_label_escape(const char *v, char *buf, size_t len)
{
    size_t o = 0;
    for (; *v && len; v++) {
        const char *esc = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
        size_t n = esc ? 2 : 1;
        if (o + n >= len) break;
        if (esc) { buf[o++] = esc[0]; buf[o++] = esc[1]; }
        else buf[o++] = *v;
    }
    if (len) buf[o] = '\0';
    return buf;
}

void metrics_value(jsonw *out, const char *name, const char *labels, double v)
{
    if (labels && *labels) printf_out(out, "%s{%s} %.17g\n", name, labels, v);
    else printf_out(out, "%s %.17g\n", name, v);
}

void metrics_hist_render(jsonw *out, const char *name, const char *labels,
                         const metrics_hist *h)
{
    const char *sep = labels && *labels ? "," : "";
    uint64_t cum = 0;
    for (size_t i = 0; i < METRICS_BUCKETS; i++) {
        cum += h->buckets[i];
        printf_out(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels ? labels : "", sep,
                   metrics_bucket_bounds[i], (unsigned long long)cum);
    }
    printf_out(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels ? labels : "", sep,
               (unsigned long long)h->count);
    printf_out(out, "%s_sum{%s} %.17g\n%s_count{%s} %llu\n", name, labels ? labels : "", h->sum,
               name, labels ? labels : "", (unsigned long long)h->count);
}

/* ---- the process ---- */

/* The standard process_* series (the names client libraries use, so the
 * usual dashboards work): CPU seconds, resident memory, open and allowed
 * file descriptors, start time. Read from /proc/self on each scrape. */
void metrics_process_render(jsonw *out, double start_time_s)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
        metrics_header(out, "process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.");
        metrics_value(out, "process_cpu_seconds_total", "", cpu);
    }
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages_virt = 0, pages_res = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &pages_virt, &pages_res) == 2) {
            double page = (double)sysconf(_SC_PAGESIZE);
            metrics_header(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
            metrics_value(out, "process_resident_memory_bytes", "", (double)pages_res * page);
            metrics_header(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
            metrics_value(out, "process_virtual_memory_bytes", "", (double)pages_virt * page);
        }
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        long n = 0;
        for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
        closedir(d);
        metrics_header(out, "process_open_fds", "gauge", "Number of open file descriptors.");
        metrics_value(out, "process_open_fds", "", (double)(n - 1)); /* not the one reading it */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        metrics_header(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        metrics_value(out, "process_max_fds", "", rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
    }
    metrics_header(out, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.");
    metrics_value(out, "process_start_time_seconds", "", start_time_s);
}
