/* report_html.c -- `allocctl report --html FILE`: one self-contained page
 * (inline CSS and SVG, no script, nothing fetched from elsewhere) that an
 * office can mail or print after a round. It prints the same report_sum as
 * the text summary (report_calc.c), as charts with axes and tables.
 *
 * The charts are drawn here, in plain SVG: a time chart (requests and
 * grants per bin, value axis with ticks, time axis in UTC) and labelled
 * horizontal bars (fill, rejections, priority bands) with a scale.
 */
#include "allocctl/report_data.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A round step (1, 2 or 5 x 10^k) that divides an axis up to max into
 * about four ticks. */
static int64_t nice_step(int64_t max)
{
    int64_t raw = max > 4 ? (max + 3) / 4 : 1, mag = 1;
    while (mag * 10 <= raw) mag *= 10;
    if (raw <= mag) return mag;
    if (raw <= 2 * mag) return 2 * mag;
    return raw <= 5 * mag ? 5 * mag : 10 * mag;
}

static const char CSS[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:980px;color:#1d2433;padding:0 16px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d5dae3}"
    ".sub{color:#5b6475}table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 12px 3px 0;text-align:left}"
    "th{font-weight:600;color:#5b6475}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #d5dae3;border-radius:6px;padding:8px 14px}"
    ".card b{display:block;font-size:22px}.ok{color:#1a7f37}.bad{color:#cf222e}.note{color:#5b6475;font-style:italic}"
    "code{font-size:12px;word-break:break-all}svg text{font:11px system-ui,sans-serif;fill:#1d2433}";

/* Requests and grants per bin, bars side by side, with both axes. */
static void time_chart(FILE *f, const report_sum *s)
{
    const int W = 900, H = 260, L = 56, B = 40, T = 14, pw = W - L - 40, ph = H - B - T;
    int64_t max = 1;
    for (int i = 0; i < REPORT_BINS; i++) if (s->req_bins[i] > max) max = s->req_bins[i];
    int64_t step = nice_step(max), top = (max + step - 1) / step * step;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"requests and grants over time\">\n", W, H);
    for (int64_t v = 0; v <= top; v += step) {
        double y = T + ph - (double)ph * (double)v / (double)top;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e7ee\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%" PRId64 "</text>\n", L, L + pw, y, y, L - 6, y + 4, v);
    }
    double bw = (double)pw / REPORT_BINS;
    for (int i = 0; i < REPORT_BINS; i++) {
        double x = L + i * bw, hr = (double)ph * (double)s->req_bins[i] / (double)top,
               hg = (double)ph * (double)s->grant_bins[i] / (double)top;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#8fb3e8\"><title>%" PRId64
                   " decided</title></rect>", x + 2, T + ph - hr, bw / 2 - 2, hr, s->req_bins[i]);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#1a7f37\"><title>%" PRId64
                   " granted</title></rect>\n", x + bw / 2, T + ph - hg, bw / 2 - 2, hg, s->grant_bins[i]);
    }
    for (int i = 0; i <= REPORT_BINS; i += REPORT_BINS / 4) {
        char hhmm[32];
        int64_t ms = s->first_at + (int64_t)i * s->bin_ms;
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(hhmm, sizeof hhmm, "%H:%M:%S", &tm);
        if (s->bin_ms * REPORT_BINS < 60000)   /* a short round: tenths tell the ticks apart */
            snprintf(hhmm + n, sizeof hhmm - n, ".%d", (int)(ms % 1000 / 100));
        double x = L + i * bw;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#5b6475\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, x, T + ph, T + ph + 5, x, T + ph + 18, hhmm);
    }
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#5b6475\"/>"
               "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#5b6475\"/>\n", L, L + pw, T + ph, T + ph, L, L, T, T + ph);
    char bin[32];
    if (s->bin_ms < 1000) snprintf(bin, sizeof bin, "%" PRId64 " ms", s->bin_ms);
    else snprintf(bin, sizeof bin, "%.1f s", (double)s->bin_ms / 1000.0);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (UTC), bins of %s</text>"
               "<rect x=\"%d\" y=\"2\" width=\"10\" height=\"10\" fill=\"#8fb3e8\"/><text x=\"%d\" y=\"11\">decided</text>"
               "<rect x=\"%d\" y=\"2\" width=\"10\" height=\"10\" fill=\"#1a7f37\"/><text x=\"%d\" y=\"11\">granted</text>"
               "</svg>\n", L + pw / 2, H - 4, bin, W - 190, W - 176, W - 100, W - 86);
}

typedef struct bar { char label[80]; int64_t value, of; } bar;

/* Horizontal bars: value (of `of`, drawn as a share when of > 0), a scale
 * below. */
static void bar_chart(FILE *f, const char *what, const bar *b, size_t n, int share)
{
    const int W = 900, L = 170, R = 150, row = 24, pw = W - L - R, H = (int)n * row + 40;
    int64_t max = 1;
    for (size_t i = 0; i < n; i++) if (b[i].value > max) max = b[i].value;
    int64_t top = share ? 100 : (max + nice_step(max) - 1) / nice_step(max) * nice_step(max), step = share ? 25 : nice_step(max);
    fprintf(f, "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"", W, H);
    esc(f, what);
    fprintf(f, "\">\n");
    for (int64_t v = 0; v <= top; v += step) {
        double x = L + (double)pw * (double)v / (double)top;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"4\" y2=\"%d\" stroke=\"#e3e7ee\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%" PRId64 "%s</text>\n",
                x, x, (int)n * row + 8, x, (int)n * row + 24, v, share ? "%" : "");
    }
    for (size_t i = 0; i < n; i++) {
        double v = share ? (b[i].of ? 100.0 * (double)b[i].value / (double)b[i].of : 0) : (double)b[i].value;
        double w = (double)pw * v / (double)top;
        int y = 6 + (int)i * row;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", L - 8, y + 14);
        esc(f, b[i].label);
        fprintf(f, "</text><rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"#3b6fd4\"/>", L, y, w);
        if (share) fprintf(f, "<text x=\"%.1f\" y=\"%d\">%" PRId64 " / %" PRId64 " (%.0f%%)</text>\n", L + w + 6, y + 13, b[i].value, b[i].of, v);
        else fprintf(f, "<text x=\"%.1f\" y=\"%d\">%" PRId64 "</text>\n", L + w + 6, y + 13, b[i].value);
    }
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"4\" y2=\"%d\" stroke=\"#5b6475\"/></svg>\n", L, L, (int)n * row + 8);
}

static void cards(FILE *f, const report_sum *s)
{
    const struct { const char *label; int64_t v; } c[] = {
        { "results", s->results }, { "granted", s->granted }, { "done", s->done },
        { "rejected", s->rejected }, { "waiting", s->waiting }, { "invalid", s->invalid },
    };
    fprintf(f, "<div class=\"cards\">");
    for (size_t i = 0; i < sizeof c / sizeof *c; i++)
        fprintf(f, "<div class=\"card\"><b>%" PRId64 "</b>%s</div>", c[i].v, c[i].label);
    fprintf(f, "</div>\n");
}

static void fill_section(FILE *f, const report_sum *s)
{
    size_t n = json_array_size(s->fill), i;
    bar b[64];
    json_t *row;
    char when[40];
    fprintf(f, "<h2>%s</h2>\n", s->room ? "Fill by building" : "Items: units granted and when they sold out");
    if (!s->room) {
        fprintf(f, "<table><tr><th>item</th><th>capacity</th><th>granted</th><th>held now</th><th>sold out at</th></tr>\n");
        json_array_foreach(s->fill, i, row) {
            int64_t out = json_integer_value(json_object_get(row, "sold_out_at"));
            fprintf(f, "<tr><td>");
            esc(f, json_string_value(json_object_get(row, "item")));
            fprintf(f, "</td><td class=n>%" JSON_INTEGER_FORMAT "</td><td class=n>%" JSON_INTEGER_FORMAT
                       "</td><td class=n>%" JSON_INTEGER_FORMAT "</td><td>%s</td></tr>\n",
                    json_integer_value(json_object_get(row, "capacity")), json_integer_value(json_object_get(row, "sold")),
                    json_integer_value(json_object_get(row, "held")), out ? report_time(out, when, sizeof when) : "not sold out");
        }
        fprintf(f, "</table>\n");
    }
    size_t m = 0;
    json_array_foreach(s->fill, i, row) {
        if (m == sizeof b / sizeof *b) break;
        snprintf(b[m].label, sizeof b[m].label, "%s", json_string_value(json_object_get(row, s->room ? "building" : "item")));
        b[m].value = json_integer_value(json_object_get(row, s->room ? "taken" : "held"));
        b[m++].of = json_integer_value(json_object_get(row, s->room ? "beds" : "capacity"));
    }
    if (m) bar_chart(f, s->room ? "beds held by building" : "units held by item", b, m, 1);
    if (n > m) fprintf(f, "<p class=note>the first %zu of %zu are drawn</p>\n", m, n);
}

static void reasons_section(FILE *f, const report_sum *s)
{
    fprintf(f, "<h2>Rejections by reason</h2>\n");
    bar b[32];
    size_t m = 0, i;
    json_t *k;
    json_array_foreach(s->reason_order, i, k) {
        if (m == sizeof b / sizeof *b) break;
        snprintf(b[m].label, sizeof b[m].label, "%s", json_string_value(k));
        b[m].value = json_integer_value(json_object_get(s->reasons, json_string_value(k)));
        b[m++].of = 0;
    }
    if (m) bar_chart(f, "rejections by reason", b, m, 0);
    else fprintf(f, "<p class=note>no request was rejected</p>\n");
}

static void people_section(FILE *f, const report_sum *s)
{
    fprintf(f, "<h2>Placement by priority band (points, contract 11.3)</h2>\n");
    if (!s->n_bands)
        fprintf(f, "<p class=note>no priority bands: no result carries points (the batch does not draw by points, "
                   "or nobody was in the draw)</p>\n");
    bar b[REPORT_BANDS];
    for (size_t i = 0; i < s->n_bands; i++) {
        snprintf(b[i].label, sizeof b[i].label, "%" PRId64 "-%" PRId64 " points", s->bands[i].lo, s->bands[i].hi);
        b[i].value = s->bands[i].placed;
        b[i].of = s->bands[i].users;
    }
    if (s->n_bands) bar_chart(f, "users placed by priority band", b, s->n_bands, 1);
    fprintf(f, "<h2>Choices, groups, waitlist</h2>\n<table>\n");
    if (s->auto_known)
        fprintf(f, "<tr><th>first choice (auto)</th><td>%" PRId64 " of %" PRId64 " grants (%.0f%%)</td></tr>\n",
                s->auto_first, s->auto_known, 100.0 * (double)s->auto_first / (double)s->auto_known);
    else
        fprintf(f, "<tr><th>first choice (auto)</th><td>%" PRId64 " auto grants; not known: results without "
                   "<code>pref</code>, from before it was written (allocctl report --requests FILE)</td></tr>\n", s->auto_granted);
    fprintf(f, "<tr><th>groups placed whole</th><td>%" PRId64 " groups, %" PRId64 " members; %" PRId64
               " group requests rejected</td></tr>\n", s->group_granted, s->group_members, s->group_rejected);
    if (s->group_known)
        fprintf(f, "<tr><th>first choice (groups)</th><td>%" PRId64 " of %" PRId64 "</td></tr>\n", s->group_first, s->group_known);
    fprintf(f, "<tr><th>waitlist</th><td>%" PRId64 " joined, %" PRId64 " served, %" PRId64 " ended unserved, %" PRId64
               " waiting now</td></tr>\n</table>\n", s->wait_joined, s->wait_served, s->wait_ended, s->wait_now);
}

static void lottery_section(FILE *f, const report_in *in, const report_sum *s)
{
    fprintf(f, "<h2>The opening lottery</h2>\n");
    if (!s->commit) { fprintf(f, "<p class=note>no lottery: no early request was kept for an opening draw</p>\n"); return; }
    fprintf(f, "<table><tr><th>commitment (SHA-256 of the seed)</th><td><code>");
    esc(f, s->commit);
    fprintf(f, "</code></td></tr>\n<tr><th>seed</th><td><code>");
    esc(f, s->seed ? s->seed : "not revealed yet");
    fprintf(f, "</code></td></tr>\n<tr><th>users drawn</th><td>");
    esc(f, s->lottery_users ? s->lottery_users : "-");
    fprintf(f, "</td></tr>\n<tr><th>seed against commitment</th><td class=\"%s\">%s</td></tr>\n",
            s->commit_ok == 1 ? "ok" : s->commit_ok == 0 ? "bad" : "",
            s->commit_ok == 1 ? "matches" : s->commit_ok == 0 ? "DOES NOT match" : "cannot be checked yet");
    fprintf(f, "<tr><th>replay of the draw</th><td class=\"%s\">", in->replay == 1 ? "ok" : in->replay == 0 ? "bad" : "");
    if (in->replay == 0 && *in->replay_why) { fprintf(f, "MISMATCH (first: "); esc(f, in->replay_why); fprintf(f, ")"); }
    else if (in->replay >= 0) fprintf(f, "%s", in->replay ? "MATCH: what was served is the replayed draw" : "MISMATCH");
    else { fprintf(f, "not run ("); esc(f, in->replay_why); fprintf(f, ")"); }
    fprintf(f, "</td></tr></table>\n");
}

int report_html(FILE *f, const char *batch, const report_in *in, const report_sum *s)
{
    char a[40], b[40], now[40];
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
               "<title>Report: ");
    esc(f, batch);
    fprintf(f, "</title><style>%s</style></head><body>\n<h1>Batch ", CSS);
    esc(f, batch);
    fprintf(f, " &mdash; %s</h1>\n<p class=sub>from ", s->room ? "rooms" : "stock");
    esc(f, in->source);
    fprintf(f, "; written %s", report_time((int64_t)time(NULL) * 1000, now, sizeof now));
    if (s->results)
        fprintf(f, "; decided from %s to %s", report_time(s->first_at, a, sizeof a), report_time(s->last_at, b, sizeof b));
    fprintf(f, "</p>\n");
    cards(f, s);
    fprintf(f, "<h2>Requests and grants over time</h2>\n");
    if (s->results) time_chart(f, s);
    else fprintf(f, "<p class=note>no result yet</p>\n");
    fill_section(f, s);
    reasons_section(f, s);
    people_section(f, s);
    lottery_section(f, in, s);
    fprintf(f, "</body></html>\n");
    return ferror(f) ? -1 : 0;
}
