/* report_data.h -- what `allocctl report` knows about one batch, read from
 * Redis or from the PostgreSQL archive (report_load.c), and the figures it
 * computes from it (report_calc.c). Both the text summary and the HTML page
 * (report_html.c) print the same report_sum, so they never disagree.
 *
 * Everything is kept as jansson values: a round is at most a few hundred
 * thousand results, read once.
 */
#ifndef ALLOCD_CTL_REPORT_DATA_H
#define ALLOCD_CTL_REPORT_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "allocctl/context.h"

/* The batch as read. */
typedef struct report_in {
    char source[200];     /* "Redis unix:///..." or "PostgreSQL archive" */
    json_t *meta;         /* field -> string */
    json_t *capacity;     /* item -> integer */
    json_t *attrs;        /* item -> object (rooms), {} when unknown */
    json_t *stats;        /* field -> string */
    json_t *results;      /* array of result objects */
    json_t *taken;        /* item -> beds or units held now */
    json_t *group_prefs;  /* group id -> first preference (string) */
    json_t *first_pref;   /* request id -> prefs[0], from --requests */
    int replay;           /* lottery replay: 1 MATCH, 0 MISMATCH, -1 not run */
    char replay_why[600]; /* why it was not run; with MISMATCH, the first difference */
    char attrs_why[600];  /* why fill is by room, not building ("" when not) */
} report_in;

enum { REPORT_BINS = 24, REPORT_BANDS = 6 };

typedef struct report_band {
    int64_t lo, hi;       /* points, inclusive */
    int64_t users, placed;
} report_band;

/* The figures of the report. */
typedef struct report_sum {
    int room;
    int64_t results, granted, done, rejected, waiting, invalid, other;
    int64_t first_at, last_at, bin_ms;
    int64_t req_bins[REPORT_BINS], grant_bins[REPORT_BINS];
    json_t *reasons;      /* reason -> count, sorted by count in `reason_order` */
    json_t *reason_order; /* array of reasons, most frequent first */
    json_t *fill;         /* rooms: [{"building","beds","taken"}]; stock: [{"item","capacity","sold","sold_out_at"}] */
    size_t n_bands;
    report_band bands[REPORT_BANDS];
    int64_t pointed;      /* results that carry points */
    int64_t auto_granted, auto_first, auto_known;
    int64_t group_granted, group_members, group_rejected, group_first, group_known;
    int64_t wait_joined, wait_served, wait_ended, wait_now;
    const char *commit, *seed, *lottery_users;
    int commit_ok;        /* SHA-256(seed) == commit: 1, 0, -1 unknown */
} report_sum;

/* report_load.c: fill in from Redis (x connected, batch set) or from the
 * archive (conninfo). Return EX_OK, EX_NOT (no such batch), EX_REDIS/EX_PG. */
int report_load_redis(ctx *x, report_in *in);
int report_load_pg(ctx *x, const char *conninfo, report_in *in);
/* --requests FILE: one request JSON per line, as pushed; keeps auto's prefs[0]. */
int report_load_requests(ctx *x, const char *path, report_in *in);
void report_in_free(report_in *in);

/* report_calc.c */
void report_calc(const report_in *in, report_sum *s);
void report_sum_free(report_sum *s);
/* The text summary, to f. */
void report_text(FILE *f, const char *batch, const report_in *in, const report_sum *s);
/* "2026-12-01 09:00:00 UTC" */
const char *report_time(int64_t ms, char *buf, size_t len);

/* report_html.c: the self-contained page. Returns 0, or -1 (errno). */
int report_html(FILE *f, const char *batch, const report_in *in, const report_sum *s);

#endif
