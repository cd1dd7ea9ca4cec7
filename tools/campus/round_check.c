/* round_check.c -- the end of a round (round_int.h): what must hold, and
 * the figures a housing office reports.
 *
 * Checks, each a FAIL line when it does not hold:
 * - `allocctl verify`: the log replays to the holders and free beds, and
 *   no holder breaks a rule of their room (contract 11.2) but the staff
 *   exceptions the campus planned (RAs on the first-year hall and on LLC
 *   floors), which it lists as STAFF;
 * - `allocctl lottery verify`: the draw replays from the pool, the seed and
 *   the recorded points (MATCH);
 * - every group whole (all its members in one room, of exactly its size)
 *   or absent (none of them holds a bed);
 * - every student has an outcome: a bed, or a final answer that says why
 *   not; nothing is left waiting after the close; the staff placements the
 *   campus planned were made, and the one it planned to be refused was.
 * Figures: `allocctl report` (first choice, priority bands, waitlist), and
 * placement by points band from the holders and profiles as they end.
 */
#include "round_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int count_lines(const char *out, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += !strncmp(p, prefix, len);
    return n;
}

static void check_verify(rctx *r)
{
    const char *verify[] = { "verify", r->o->batch, NULL }, *lottery[] = { "lottery", "verify", r->o->batch, NULL };
    char *out = NULL;
    int rc = rio_allocctl(r, &out, 1, verify);
    int staff = count_lines(out, "STAFF "), breaks = count_lines(out, "BREAK ");
    if (rc != 0 || !strstr(out ? out : "", "\nOK: ") || breaks)
        rio_fail(r, "allocctl verify exited %d with %d rule(s) broken", rc, breaks);
    else if (staff != rio_campus(r, "staff_exceptions"))
        rio_fail(r, "verify lists %d staff exceptions, the campus placed %lld", staff, rio_campus(r, "staff_exceptions"));
    else
        rio_fact(r, "verify: OK: the log replays to every holder and free bed, no holder breaks a rule of their "
                    "room, %d staff exceptions (RAs placed without check, listed as STAFF)", staff);
    free(out);
    out = NULL;
    rc = rio_allocctl(r, &out, 1, lottery);
    if (rc != 0 || !strstr(out ? out : "", "MATCH")) rio_fail(r, "allocctl lottery verify exited %d", rc);
    else rio_fact(r, "lottery verify: MATCH: the draw replays from the pool, the revealed seed and the recorded points");
    free(out);
}

/* Every group whole (one room of its size) or absent. */
static void check_groups(rctx *r, json_t *groups, json_t *holders, json_t *capacity)
{
    long long whole = 0, absent = 0, members = 0;
    const char *gid;
    json_t *g;
    json_object_foreach(groups, gid, g) {
        json_t *m = json_object_get(g, "members");
        size_t i, holding = 0, n = json_array_size(m);
        const char *room = NULL;
        int same = 1;
        json_t *u;
        json_array_foreach(m, i, u) {
            const char *item = jstr(json_object_get(holders, json_string_value(u)), "item");
            if (!item) continue;
            holding++;
            same &= !room || !strcmp(room, item);
            room = room ? room : item;
        }
        if (!holding) absent++;
        else if (holding == n && same && json_integer_value(json_object_get(capacity, room)) == (json_int_t)n) {
            whole++;
            members += (long long)n;
        } else rio_fail(r, "group %s: %zu of its %zu members hold a bed%s", gid, holding, n, same ? "" : ", in different rooms");
    }
    if ((long long)json_object_size(groups) != rio_campus(r, "groups"))
        rio_fail(r, "%zu groups were formed, the campus has %lld", json_object_size(groups), rio_campus(r, "groups"));
    rio_fact(r, "groups: %zu formed by invitation; %lld placed whole (%lld students, each group in an empty room of "
                "its size), %lld found no room and hold nothing; none split", json_object_size(groups), whole,
             members, absent);
}

/* Per user: the results of their requests, by kind: the request id
 * without its "-<user>" end ("au", "wl", "gr", "c-un", ...). */
static json_t *results_by_user(json_t *results)
{
    json_t *by = json_object();
    const char *id;
    json_t *x;
    json_object_foreach(results, id, x) {
        const char *u = jstr(x, "user");
        size_t len = strlen(id), ul = u ? strlen(u) : 0;
        if (!u || len <= ul + 1 || strcmp(id + len - ul, u) || id[len - ul - 1] != '-') continue;
        json_t *ops = json_object_get(by, u);
        if (!ops) json_object_set_new(by, u, ops = json_object());
        char kind[40];
        snprintf(kind, sizeof kind, "%.*s", (int)(len - ul - 1), id);
        json_object_set(ops, kind, x);
    }
    return by;
}

/* Per member: their group's leader. */
static json_t *leaders_by_member(json_t *groups)
{
    json_t *by = json_object(), *g, *u;
    const char *gid;
    size_t i;
    json_object_foreach(groups, gid, g)
        json_array_foreach(json_object_get(g, "members"), i, u)
            json_object_set(by, json_string_value(u), json_object_get(g, "leader"));
    return by;
}

/* The reason their group's request got, for a member of a group that
 * holds no room. */
static const char *group_reason(json_t *leaders, json_t *by_user, const char *user)
{
    const char *lead = json_string_value(json_object_get(leaders, user));
    const json_t *x = lead ? json_object_get(json_object_get(by_user, lead), "gr") : NULL;
    return x ? jstr(x, "reason") : NULL;
}

/* Why a student without a bed has none, or NULL when nothing says. */
static const char *why_not(json_t *ops, json_t *leaders, json_t *by_user, const char *user)
{
    if (json_object_get(ops, "wd")) return "withdrew (released their bed)";
    if (json_object_get(ops, "c-un")) return "accommodation ended (unassigned by staff)";
    const char *g = group_reason(leaders, by_user, user);
    if (g) return !strcmp(g, "no_room") ? "their group found no room they may hold (no_room)" : g;
    const json_t *w = json_object_get(ops, "wl"), *a = json_object_get(ops, "au");
    const char *reason = jstr(w ? w : a, "reason");
    const char *kind;
    json_t *x;
    json_object_foreach(ops, kind, x) reason = reason ? reason : jstr(x, "reason");
    if (!reason) return NULL;
    if (!strcmp(reason, "no_room"))
        return w ? "waited; no bed they may hold came back before the close (no_room)"
                 : "no room they may hold was free at their turn (no_room)";
    return reason;
}

typedef struct band {
    long long points, students, staff, placed, single;
} band;

static band *band_of(band *b, size_t *n, long long points)
{
    for (size_t i = 0; i < *n; i++)
        if (b[i].points == points) return &b[i];
    b[*n] = (band){ .points = points };
    return &b[(*n)++];
}

static int by_points(const void *x, const void *y)
{
    long long a = ((const band *)x)->points, b = ((const band *)y)->points;
    return a > b ? -1 : a < b;
}

/* The students as profiles.csv lists them: user -> points. */
static json_t *students(rctx *r)
{
    char path[600], line[256];
    snprintf(path, sizeof path, "%s/profiles.csv", r->o->dir);
    FILE *f = fopen(path, "r");
    json_t *s = json_object();
    if (!f) return s;
    int first = 1;
    while (fgets(line, sizeof line, f)) {
        if (first) { first = 0; continue; }
        char *comma = strchr(line, ','), *last = strrchr(line, ',');
        if (!comma || !last) continue;
        *comma = '\0';
        json_object_set_new(s, line, json_integer(strtoll(last + 1, NULL, 10)));
    }
    fclose(f);
    return s;
}

typedef struct tallies {
    json_t *why;                 /* reason -> students */
    long long placed, by_staff, waiting, unknown;
    band bands[16];
    size_t n_bands;
} tallies;

static void tally_student(rctx *r, tallies *t, const char *user, long long points, json_t *held, json_t *ops,
                          json_t *leaders, json_t *by_user, json_t *capacity)
{
    band *b = t->n_bands < 16 ? band_of(t->bands, &t->n_bands, points) : &t->bands[15];
    b->students++;
    const char *k;
    json_t *x;
    json_object_foreach(ops, k, x) t->waiting += jstr(x, "status") && !strcmp(jstr(x, "status"), "waiting");
    if (held) {
        const char *req = jstr(held, "req");
        int staff = req && !strncmp(req, "c-", 2);
        t->placed++;
        t->by_staff += staff;
        b->staff += staff;
        b->placed += !staff;
        b->single += !staff && json_integer_value(json_object_get(capacity, jstr(held, "item"))) == 1;
        return;
    }
    const char *why = why_not(ops, leaders, by_user, user);
    if (!why) {
        if (t->unknown++ < 5) rio_fail(r, "%s holds no bed and no result says why", user);
        return;
    }
    json_object_set_new(t->why, why, json_integer(json_integer_value(json_object_get(t->why, why)) + 1));
}

static void print_outcomes(rctx *r, tallies *t, size_t n)
{
    rio_fact(r, "placed: %lld of %zu students hold a bed (%lld%%): %lld placed by staff, %lld by the round", t->placed,
             n, n ? 100 * t->placed / (long long)n : 0, t->by_staff, t->placed - t->by_staff);
    const char *why;
    json_t *c;
    json_object_foreach(t->why, why, c) rio_fact(r, "  not placed: %lld %s", (long long)json_integer_value(c), why);
    if (t->waiting) rio_fail(r, "%lld requests are still waiting after the close", t->waiting);
    qsort(t->bands, t->n_bands, sizeof *t->bands, by_points);
    rio_fact(r, "by band (profile points; the draw serves every student of a band before the next):");
    rio_fact(r, "  %-7s %9s %7s %18s %15s", "points", "students", "staff", "placed by round", "in a single");
    for (size_t i = 0; i < t->n_bands; i++) {
        const band *b = &t->bands[i];
        long long asked = b->students - b->staff;
        rio_fact(r, "  %-7lld %9lld %7lld %11lld (%3lld%%) %8lld (%3lld%%)", b->points, b->students, b->staff,
                 b->placed, asked ? 100 * b->placed / asked : 0, b->single, b->placed ? 100 * b->single / b->placed : 0);
    }
}

static void check_outcomes(rctx *r, json_t *results, json_t *holders, json_t *groups, json_t *capacity)
{
    json_t *by_user = results_by_user(results), *all = students(r), *leaders = leaders_by_member(groups);
    json_t *none = json_object();
    tallies t = { .why = json_object() };
    const char *u;
    json_t *pts;
    json_object_foreach(all, u, pts) {
        json_t *ops = json_object_get(by_user, u);
        tally_student(r, &t, u, json_integer_value(pts), json_object_get(holders, u), ops ? ops : none, leaders,
                      by_user, capacity);
    }
    json_decref(none);
    json_decref(leaders);
    if ((long long)json_object_size(all) != rio_campus(r, "students"))
        rio_fail(r, "profiles.csv lists %zu students, campus.txt %lld", json_object_size(all), rio_campus(r, "students"));
    print_outcomes(r, &t, json_object_size(all));
    long long refused = 0, granted = 0;
    const char *id;
    json_t *x;
    json_object_foreach(results, id, x) {
        if (strncmp(id, "c-", 2) || !jstr(x, "status")) continue;
        granted += !strcmp(jstr(x, "op"), "assign") && !strcmp(jstr(x, "status"), "granted");
        refused += !strcmp(jstr(x, "op"), "assign") && jstr(x, "reason") && !strcmp(jstr(x, "reason"), "not_eligible");
    }
    if (granted + refused != rio_campus(r, "staff_commands") || refused != rio_campus(r, "staff_refused"))
        rio_fail(r, "staff: %lld placements made and %lld refused, the campus planned %lld and %lld", granted, refused,
                 rio_campus(r, "staff_commands") - rio_campus(r, "staff_refused"), rio_campus(r, "staff_refused"));
    json_decref(t.why);
    json_decref(all);
    json_decref(by_user);
}

/* allocctl report, and its figures restated among the round's. */
static void report(rctx *r)
{
    char path[600];
    snprintf(path, sizeof path, "%s/requests.jsonl", r->o->dir);
    const char *args[] = { "report", r->o->batch, "--requests", path, NULL };
    char *out = NULL;
    int rc = rio_allocctl(r, &out, 1, args);
    if (rc != 0) rio_fail(r, "allocctl report exited %d", rc);
    for (const char *p = out; p && *p;) {
        size_t len = strcspn(p, "\n");
        if (!strncmp(p, "first choice", 12) || !strncmp(p, "waitlist:", 9))
            rio_fact(r, "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
    }
    free(out);
}

void round_check(rctx *r)
{
    fflush(r->requests);
    rio_say(r, "9. the checks: the log replayed and every holder against the rules, the draw replayed, the groups, "
               "an outcome for every student; then the figures");
    check_verify(r);
    json_t *results = rio_hash(r, RK_RESULTS), *holders = rio_hash(r, RK_HOLDERS);
    json_t *groups = rio_hash(r, RK_GROUPS), *capacity = rio_hash(r, RK_CAPACITY);
    if (!results || !holders || !groups || !capacity) rio_fail(r, "cannot read the batch's hashes");
    else {
        check_groups(r, groups, holders, capacity);
        report(r);
        check_outcomes(r, results, holders, groups, capacity);
    }
    json_decref(results);
    json_decref(holders);
    json_decref(groups);
    json_decref(capacity);
    if (r->failed) rio_fact(r, "FAILED: a check above did not hold (%.1f s)", rio_elapsed(r));
    else rio_fact(r, "OK: every check holds (%.1f s)", rio_elapsed(r));
}
