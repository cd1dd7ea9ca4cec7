/* report_calc.c -- the figures of `allocctl report` (report_data.h) from
 * what was read, and the text summary that prints them.
 *
 * Definitions, so the page and the text mean the same:
 * - requests over time: every result by its `at` (when it was decided);
 *   grants: the `granted` ones. REPORT_BINS equal bins from first to last.
 * - fill (rooms): beds held now / beds, per `building` attribute (per room
 *   when no room has one); (stock): units held now, and when the item sold
 *   out: the `at` of the grant that brought the granted units to capacity.
 * - priority bands (contract 11.3): results that carry `points` (a draw by
 *   points); a user is placed when one of their results is `granted`.
 * - first choice: an `auto` or `group` grant with `pref` 1 (the room's
 *   place in the request's prefs, which allocd writes on every such
 *   grant); for results written before `pref`, the request's prefs[0]
 *   (--requests) or the group's first shared preference.
 * - waitlist: stats `wait_served`, `wait_ended`, `waiting` (9.5).
 */
#include "allocctl/report_data.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/lottery.h"

const char *report_time(int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int64_t stat_int(const report_in *in, const char *k)
{
    const char *v = jstr(in->stats, k);
    return v ? strtoll(v, NULL, 10) : 0;
}

static void count(json_t *o, const char *k, int64_t n)
{
    json_t *v = json_object_get(o, k);
    json_object_set_new(o, k, json_integer((v ? json_integer_value(v) : 0) + n));
}

static void calc_status(const report_in *in, report_sum *s)
{
    size_t i;
    json_t *r;
    s->reasons = json_object();
    json_array_foreach(in->results, i, r) {
        const char *st = jstr(r, "status");
        int64_t at = json_integer_value(json_object_get(r, "at"));
        if (at > 0 && (!s->first_at || at < s->first_at)) s->first_at = at;
        if (at > s->last_at) s->last_at = at;
        s->results++;
        if (!st) s->other++;
        else if (!strcmp(st, "granted")) s->granted++;
        else if (!strcmp(st, "done")) s->done++;
        else if (!strcmp(st, "waiting")) s->waiting++;
        else if (!strcmp(st, "invalid")) s->invalid++;
        else if (!strcmp(st, "rejected")) { s->rejected++; count(s->reasons, jstr(r, "reason") ? jstr(r, "reason") : "?", 1); }
        else s->other++;
    }
    s->bin_ms = (s->last_at - s->first_at) / REPORT_BINS + 1;
    json_array_foreach(in->results, i, r) {
        int64_t at = json_integer_value(json_object_get(r, "at"));
        if (at <= 0) continue;
        int64_t b = (at - s->first_at) / s->bin_ms;
        s->req_bins[b]++;
        if (jstr(r, "status") && !strcmp(jstr(r, "status"), "granted")) s->grant_bins[b]++;
    }
    s->reason_order = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(s->reasons, k, v) {   /* insertion sort, most first */
        size_t at = 0;
        while (at < json_array_size(s->reason_order) &&
               json_integer_value(json_object_get(s->reasons, json_string_value(json_array_get(s->reason_order, at)))) >=
               json_integer_value(v)) at++;
        json_array_insert_new(s->reason_order, at, json_string(k));
    }
}

static json_t *fill_rooms(const report_in *in)
{
    json_t *by = json_object(), *order = json_array();
    int any_building = 0;
    const char *item;
    json_t *cap;
    json_object_foreach(in->attrs, item, cap) if (json_object_get(cap, "building")) any_building = 1;
    json_object_foreach(in->capacity, item, cap) {
        json_t *b = json_object_get(json_object_get(in->attrs, item), "building");
        char name[200];
        if (!any_building) snprintf(name, sizeof name, "%s", item);
        else if (json_is_string(b)) snprintf(name, sizeof name, "%s", json_string_value(b));
        else if (json_is_integer(b)) snprintf(name, sizeof name, "%" JSON_INTEGER_FORMAT, json_integer_value(b));
        else snprintf(name, sizeof name, "(no building)");
        json_t *row = json_object_get(by, name);
        if (!row) {
            row = json_pack("{s:s,s:I,s:I}", "building", name, "beds", (json_int_t)0, "taken", (json_int_t)0);
            json_object_set_new(by, name, row);
            json_array_append(order, row);
        }
        count(row, "beds", json_integer_value(cap));
        count(row, "taken", json_integer_value(json_object_get(in->taken, item)));
    }
    json_decref(by);
    return order;
}

typedef struct grant_at { int64_t at, qty; } grant_at;

static int by_at(const void *a, const void *b)
{
    int64_t x = ((const grant_at *)a)->at, y = ((const grant_at *)b)->at;
    return (x > y) - (x < y);
}

/* When item sold out: the grants of item in time order, the one that
 * brought the units granted to capacity; 0 when none did. */
static int64_t sold_out_at(const report_in *in, const char *item, int64_t cap, int64_t *sold)
{
    size_t n = 0, i;
    json_t *r;
    grant_at *g = malloc((json_array_size(in->results) + 1) * sizeof *g);
    *sold = 0;
    if (!g) return 0;
    json_array_foreach(in->results, i, r)
        if (jstr(r, "status") && !strcmp(jstr(r, "status"), "granted") && jstr(r, "item") && !strcmp(jstr(r, "item"), item)) {
            int64_t q = json_integer_value(json_object_get(r, "qty"));
            g[n++] = (grant_at){ json_integer_value(json_object_get(r, "at")), q > 0 ? q : 1 };
        }
    if (n > 1) qsort(g, n, sizeof *g, by_at);
    int64_t out = 0;
    for (i = 0; i < n; i++) {
        *sold += g[i].qty;
        if (!out && cap > 0 && *sold >= cap) out = g[i].at;
    }
    free(g);
    return out;
}

static json_t *fill_stock(const report_in *in)
{
    json_t *order = json_array();
    const char *item;
    json_t *cap;
    json_object_foreach(in->capacity, item, cap) {
        int64_t c = json_integer_value(cap), sold, out = sold_out_at(in, item, c, &sold);
        json_array_append_new(order, json_pack("{s:s,s:I,s:I,s:I,s:I}", "item", item, "capacity", (json_int_t)c,
                                               "sold", (json_int_t)sold, "held",
                                               (json_int_t)json_integer_value(json_object_get(in->taken, item)),
                                               "sold_out_at", (json_int_t)out));
    }
    return order;
}

/* Bands of equal width over the points seen; users placed when granted. */
static void calc_bands(const report_in *in, report_sum *s)
{
    json_t *users = json_object();   /* user -> [points, placed] */
    size_t i;
    json_t *r;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    json_array_foreach(in->results, i, r) {
        json_t *p = json_object_get(r, "points");
        const char *u = jstr(r, "user");
        if (!json_is_integer(p) || !u) continue;
        s->pointed++;
        int64_t pts = json_integer_value(p);
        if (pts < lo) lo = pts;
        if (pts > hi) hi = pts;
        json_t *e = json_object_get(users, u);
        if (!e) json_object_set_new(users, u, e = json_pack("[I,i]", (json_int_t)pts, 0));
        if (jstr(r, "status") && !strcmp(jstr(r, "status"), "granted")) json_array_set_new(e, 1, json_integer(1));
    }
    if (s->pointed) {
        int64_t span = hi - lo + 1, n = span < REPORT_BANDS ? span : REPORT_BANDS, w = (span + n - 1) / n;
        s->n_bands = (size_t)n;
        for (int64_t b = 0; b < n; b++) {
            s->bands[b].lo = hi - (b + 1) * w + 1 < lo ? lo : hi - (b + 1) * w + 1;
            s->bands[b].hi = hi - b * w;
        }
        const char *u;
        json_t *e;
        json_object_foreach(users, u, e) {
            int64_t pts = json_integer_value(json_array_get(e, 0));
            size_t b = (size_t)((hi - pts) / w);
            s->bands[b].users++;
            s->bands[b].placed += json_integer_value(json_array_get(e, 1));
        }
    }
    json_decref(users);
}

static void calc_choices(const report_in *in, report_sum *s)
{
    size_t i;
    json_t *r;
    json_array_foreach(in->results, i, r) {
        const char *op = jstr(r, "op"), *st = jstr(r, "status"), *item = jstr(r, "item");
        if (!op || !st) continue;
        int granted = !strcmp(st, "granted");
        if (!strcmp(op, "auto") && granted) {
            s->auto_granted++;
            const json_t *pref = json_object_get(r, "pref");
            const char *first = json_string_value(json_object_get(in->first_pref, jstr(r, "id") ? jstr(r, "id") : ""));
            if (json_is_integer(pref)) { s->auto_known++; s->auto_first += json_integer_value(pref) == 1; }
            else if (first) { s->auto_known++; s->auto_first += item && !strcmp(first, item); }
        } else if (!strcmp(op, "group")) {
            if (!granted) { s->group_rejected += !strcmp(st, "rejected"); continue; }
            s->group_granted++;
            s->group_members += (int64_t)json_array_size(json_object_get(r, "members"));
            const json_t *pref = json_object_get(r, "pref");
            const char *g = jstr(r, "group"), *first = g ? json_string_value(json_object_get(in->group_prefs, g)) : NULL;
            if (json_is_integer(pref)) { s->group_known++; s->group_first += json_integer_value(pref) == 1; }
            else if (first) { s->group_known++; s->group_first += item && !strcmp(first, item); }
        }
    }
}

void report_calc(const report_in *in, report_sum *s)
{
    memset(s, 0, sizeof *s);
    const char *kind = jstr(in->meta, "kind");
    s->room = kind && !strcmp(kind, "room");
    calc_status(in, s);
    s->fill = s->room ? fill_rooms(in) : fill_stock(in);
    calc_bands(in, s);
    calc_choices(in, s);
    s->wait_served = stat_int(in, "wait_served");
    s->wait_ended = stat_int(in, "wait_ended");
    s->wait_now = stat_int(in, "waiting");
    s->wait_joined = s->wait_served + s->wait_ended + s->wait_now;
    s->commit = jstr(in->stats, "lottery_commit");
    s->seed = jstr(in->stats, "lottery_seed");
    s->lottery_users = jstr(in->stats, "lottery_users");
    s->commit_ok = -1;
    if (s->commit && s->seed && strlen(s->seed) == LOTTERY_SEED_HEX) {
        char want[LOTTERY_SEED_HEX + 1];
        lottery_commit(s->seed, want);
        s->commit_ok = !strcmp(want, s->commit);
    }
}

void report_sum_free(report_sum *s)
{
    json_decref(s->reasons);
    json_decref(s->reason_order);
    json_decref(s->fill);
    memset(s, 0, sizeof *s);
}

static double pct(int64_t a, int64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

static void text_fill(FILE *f, const report_in *in, const report_sum *s)
{
    char when[40];
    size_t i;
    json_t *row;
    if (s->room && *in->attrs_why) fprintf(f, "fill by room (beds held now / beds): %s\n", in->attrs_why);
    else if (s->room) fprintf(f, "fill by building (beds held now / beds):\n");
    else fprintf(f, "items (units held now / capacity, granted in all, sold out at):\n");
    json_array_foreach(s->fill, i, row) {
        if (s->room) {
            int64_t t = json_integer_value(json_object_get(row, "taken")), b = json_integer_value(json_object_get(row, "beds"));
            fprintf(f, "  %-20s %" PRId64 " / %" PRId64 " (%.0f%%)\n", jstr(row, "building"), t, b, pct(t, b));
            continue;
        }
        int64_t out = json_integer_value(json_object_get(row, "sold_out_at"));
        fprintf(f, "  %-20s %" JSON_INTEGER_FORMAT " / %" JSON_INTEGER_FORMAT ", granted %" JSON_INTEGER_FORMAT ", %s\n",
                jstr(row, "item"), json_integer_value(json_object_get(row, "held")),
                json_integer_value(json_object_get(row, "capacity")), json_integer_value(json_object_get(row, "sold")),
                out ? report_time(out, when, sizeof when) : "not sold out");
    }
}

static void text_lottery(FILE *f, const report_in *in, const report_sum *s)
{
    if (!s->commit) { fprintf(f, "lottery: none (no early request was kept for an opening draw)\n"); return; }
    fprintf(f, "lottery: commitment sha256 %s\n", s->commit);
    fprintf(f, "lottery: seed %s\n", s->seed ? s->seed : "not revealed yet");
    fprintf(f, "lottery: users drawn %s\n", s->lottery_users ? s->lottery_users : "-");
    fprintf(f, "lottery: SHA-256 of the seed %s\n", s->commit_ok == 1 ? "matches the commitment"
            : s->commit_ok == 0 ? "DOES NOT match the commitment" : "cannot be checked yet");
    if (in->replay == 0 && *in->replay_why) fprintf(f, "lottery: replay of the draw: MISMATCH (first: %s)\n", in->replay_why);
    else if (in->replay >= 0) fprintf(f, "lottery: replay of the draw: %s\n", in->replay ? "MATCH" : "MISMATCH");
    else fprintf(f, "lottery: replay of the draw: not run (%s)\n", in->replay_why);
}

static void text_people(FILE *f, const report_sum *s)
{
    if (!s->n_bands)
        fprintf(f, "priority bands: none (no result carries points: the batch does not draw by points, "
                   "or nobody was in the draw)\n");
    for (size_t i = 0; i < s->n_bands; i++)
        fprintf(f, "priority band %" PRId64 "-%" PRId64 " points: %" PRId64 " users, %" PRId64 " placed (%.0f%%)\n",
                s->bands[i].lo, s->bands[i].hi, s->bands[i].users, s->bands[i].placed,
                pct(s->bands[i].placed, s->bands[i].users));
    if (s->auto_known)
        fprintf(f, "first choice (auto): %" PRId64 " of %" PRId64 " grants (%.0f%%)\n", s->auto_first, s->auto_known,
                pct(s->auto_first, s->auto_known));
    else
        fprintf(f, "first choice (auto): %" PRId64 " auto grants; not known (results without `pref`, from "
                   "before it was written: give --requests FILE)\n", s->auto_granted);
    fprintf(f, "groups placed whole: %" PRId64 " (%" PRId64 " members), %" PRId64 " group requests rejected\n",
            s->group_granted, s->group_members, s->group_rejected);
    if (s->group_known)
        fprintf(f, "first choice (groups): %" PRId64 " of %" PRId64 "\n", s->group_first, s->group_known);
    fprintf(f, "waitlist: %" PRId64 " joined, %" PRId64 " served, %" PRId64 " ended unserved, %" PRId64 " waiting now\n",
            s->wait_joined, s->wait_served, s->wait_ended, s->wait_now);
}

void report_text(FILE *f, const char *batch, const report_in *in, const report_sum *s)
{
    char a[40], b[40];
    fprintf(f, "report of batch %s (%s, from %s)\n", batch, s->room ? "rooms" : "stock", in->source);
    if (s->results)
        fprintf(f, "decided: from %s to %s\n", report_time(s->first_at, a, sizeof a), report_time(s->last_at, b, sizeof b));
    fprintf(f, "results: %" PRId64 " (granted %" PRId64 ", done %" PRId64 ", rejected %" PRId64 ", waiting %" PRId64
               ", invalid %" PRId64 ")\n", s->results, s->granted, s->done, s->rejected, s->waiting, s->invalid);
    size_t i;
    json_t *k;
    json_array_foreach(s->reason_order, i, k)
        fprintf(f, "rejected %s: %" JSON_INTEGER_FORMAT "\n", json_string_value(k),
                json_integer_value(json_object_get(s->reasons, json_string_value(k))));
    text_fill(f, in, s);
    text_people(f, s);
    text_lottery(f, in, s);
}
