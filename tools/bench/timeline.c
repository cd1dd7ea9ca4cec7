/* timeline.c -- a live run window by window (see timeline.h). */
#include "timeline.h"

#include <stdlib.h>
#include <string.h>

void timeline_init(timeline *t, int64_t every_us)
{
    memset(t, 0, sizeof *t);
    t->every_us = every_us;
}

void timeline_free(timeline *t)
{
    free(t->s);
    memset(t, 0, sizeof *t);
}

int timeline_note(timeline *t, int64_t t_us, int64_t dequeued, long read)
{
    if (t->n && t_us - t->s[t->n - 1].t_us < t->every_us) return 0;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        timeline_sample *s = realloc(t->s, cap * sizeof *s);
        if (!s) return -1;
        t->s = s;
        t->cap = cap;
    }
    t->s[t->n++] = (timeline_sample){ t_us, dequeued, read, -1, -1, -1 };
    return 0;
}

/* The last sample taken at or before t_us, or NULL. */
static const timeline_sample *sample_at(const timeline *t, int64_t t_us)
{
    const timeline_sample *found = NULL;
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->s[mid].t_us <= t_us) { found = &t->s[mid]; lo = mid + 1; }
        else hi = mid;
    }
    return found;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int has_sched(const timeline *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->s[i].redis_run_ns >= 0 || t->s[i].allocd_run_ns >= 0) return 1;
    return 0;
}

/* Percent of dt_us that a ns counter grew by from x to y, or -1 when a
 * reading is missing. */
static double share(int64_t x, int64_t y, int64_t dt_us)
{
    if (x < 0 || y < 0 || dt_us <= 0) return -1;
    return (double)(y - x) / 1000.0 * 100.0 / (double)dt_us;
}

/* One window: n_due requests due in [from, to), the latencies (us) of
 * those of them that were read. */
static void print_window(FILE *out, const timeline *t, int sched, int64_t t0, int64_t from, int64_t to,
                         long due_by_end, long n_due, int64_t *lat, size_t nlat, int64_t lag)
{
    qsort(lat, nlat, sizeof *lat, cmp_i64);
    const timeline_sample *s = sample_at(t, to), *s0 = sample_at(t, from);
    long queue = s ? due_by_end - (long)s->dequeued : -1;
    long poller = s ? (long)s->dequeued - s->read : -1;
    fprintf(out, "  %7.1f %7ld %8.2f %8.2f %8.2f", (double)(from - t0) / 1000.0, n_due,
            nlat ? (double)lat[nlat / 2] / 1000.0 : 0.0,
            nlat ? (double)lat[(size_t)((double)nlat * 0.99)] / 1000.0 : 0.0,
            nlat ? (double)lat[nlat - 1] / 1000.0 : 0.0);
    if (lag >= 0) fprintf(out, " %7.2f", (double)lag / 1000.0);
    fprintf(out, " %9ld %9ld", queue, poller);
    if (sched) {
        int64_t dt = s && s0 ? s->t_us - s0->t_us : 0;
        fprintf(out, " %7.0f %7.0f %7.0f", dt ? share(s0->redis_run_ns, s->redis_run_ns, dt) : -1.0,
                dt ? share(s0->redis_wait_ns, s->redis_wait_ns, dt) : -1.0,
                dt ? share(s0->allocd_run_ns, s->allocd_run_ns, dt) : -1.0);
    }
    fputc('\n', out);
}

void timeline_print(FILE *out, const timeline *t, long n, const int64_t *due_us,
                    const int64_t *sent_us, const int64_t *read_us, int window_ms)
{
    if (n <= 0) return;
    int64_t *lat = malloc((size_t)n * sizeof *lat);
    if (!lat) return;
    /* due times are in push order per producer, not overall: sort a copy */
    int64_t *due = malloc((size_t)n * sizeof *due);
    if (!due) { free(lat); return; }
    memcpy(due, due_us, (size_t)n * sizeof *due);
    qsort(due, (size_t)n, sizeof *due, cmp_i64);
    int64_t t0 = due[0], w = (int64_t)window_ms * 1000;
    fprintf(out, "  %7s %7s %8s %8s %8s", "due_ms", "due", "p50ms", "p99ms", "maxms");
    if (sent_us) fprintf(out, " %7s", "sentms");
    fprintf(out, " %9s %9s", "queue", "poller");
    int sched = has_sched(t);
    if (sched) fprintf(out, " %7s %7s %7s", "redis%", "rwait%", "allocd%");
    fputc('\n', out);
    long at = 0;   /* index into the sorted due times */
    int64_t end = due[n - 1];  /* unpaced runs: on until the last reading */
    if (t->n && t->s[t->n - 1].t_us > end) end = t->s[t->n - 1].t_us;
    for (int64_t from = t0; from <= end; from += w) {
        size_t nlat = 0;
        int64_t lag = sent_us ? 0 : -1;
        for (long i = 0; i < n; i++) {
            if (due_us[i] < from || due_us[i] >= from + w) continue;
            if (read_us[i]) lat[nlat++] = read_us[i] - due_us[i];
            if (sent_us && sent_us[i] - due_us[i] > lag) lag = sent_us[i] - due_us[i];
        }
        long before = at;
        while (at < n && due[at] < from + w) at++;
        print_window(out, t, sched, t0, from, from + w, at, at - before, lat, nlat, lag);
    }
    free(due);
    free(lat);
}

void timeline_print_drain(FILE *out, const timeline *t)
{
    fprintf(out, "  %7s %9s %7s %7s %7s\n", "t_ms", "decided", "redis%", "rwait%", "allocd%");
    for (size_t i = 1; i < t->n; i++) {
        const timeline_sample *a = &t->s[i - 1], *b = &t->s[i];
        int64_t dt = b->t_us - a->t_us;
        fprintf(out, "  %7.0f %9ld %7.0f %7.0f %7.0f\n", (double)(b->t_us - t->s[0].t_us) / 1000.0, b->read - a->read,
                share(a->redis_run_ns, b->redis_run_ns, dt), share(a->redis_wait_ns, b->redis_wait_ns, dt),
                share(a->allocd_run_ns, b->allocd_run_ns, dt));
    }
    fputc('\n', out);
}
