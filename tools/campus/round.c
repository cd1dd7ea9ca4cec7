/* round.c -- the phases of a housing round (round.h), each waited for
 * through the contract only: a phase's requests are pushed, and the next
 * begins once the results hash holds a result for every one of them.
 * Without --redis the round starts its own redis-server and allocd
 * (tools/proc, as the tests and allocbench do) and stops them at the end. */
#include "round_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc/proc.h"

enum { PHASE_TIMEOUT_S = 120, PROFILES_READ_MS = 1600 };

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int load_campus(rctx *r)
{
    char path[600], line[200];
    snprintf(path, sizeof path, "%s/campus.txt", r->o->dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "alloccampus: %s: missing (run `alloccampus gen` first)\n", path);
        return -1;
    }
    r->campus = json_object();
    while (fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        json_object_set_new(r->campus, line, json_integer(strtoll(eq + 1, NULL, 10)));
    }
    fclose(f);
    return 0;
}

/* One line per op of the requests in l: how their results came out. */
static void tally(rctx *r, const rlines *l, const char *label)
{
    const char **ids = malloc(l->n * sizeof *ids);
    if (!ids) return;
    for (size_t i = 0; i < l->n; i++) ids[i] = jstr(l->json[i], "id");
    json_t *res = rio_hmget(r, RK_RESULTS, ids, l->n), *by_op = json_object();
    for (size_t i = 0; i < l->n; i++) {
        const json_t *x = json_object_get(res, ids[i]);
        const char *op = jstr(l->json[i], "op"), *st = x ? jstr(x, "status") : "no result";
        char what[80];
        snprintf(what, sizeof what, "%s%s%s", st ? st : "?", x && jstr(x, "reason") ? " " : "",
                 x && jstr(x, "reason") ? jstr(x, "reason") : "");
        json_t *m = json_object_get(by_op, op);
        if (!m) json_object_set_new(by_op, op, m = json_object());
        json_object_set_new(m, what, json_integer(json_integer_value(json_object_get(m, what)) + 1));
    }
    const char *op;
    json_t *m;
    json_object_foreach(by_op, op, m) {
        char buf[400];
        size_t len = 0;
        const char *what;
        json_t *n;
        buf[0] = '\0';
        json_object_foreach(m, what, n) {
            if (len >= sizeof buf - 1) break;
            int k = snprintf(buf + len, sizeof buf - len, "%s%lld %s", len ? ", " : "",
                             (long long)json_integer_value(n), what);
            len += k > 0 ? (size_t)k : 0;
        }
        rio_fact(r, "%s %s: %s", label, op, buf);
    }
    json_decref(by_op);
    json_decref(res);
    free(ids);
}

static int setup(rctx *r, long long *opens_at)
{
    char rooms[600], profiles[600], at[32];
    snprintf(rooms, sizeof rooms, "%s/rooms.json", r->o->dir);
    snprintf(profiles, sizeof profiles, "%s/profiles.csv", r->o->dir);
    rio_say(r, "1. the office creates the batch: an opening in %.1f s with a lottery (early shuffle) drawn by "
               "points, groups that fill a room exactly", r->o->open_in_ms / 1000.0);
    *opens_at = proc_now_ms() + r->o->open_in_ms;
    snprintf(at, sizeof at, "%lld", *opens_at);
    const char *create[] = { "batch", "create", r->o->batch, "--kind", "room", "--from", rooms, "--early", "shuffle",
                             "--draw-by", "points", "--group-fill", "exact", "--max-group", "4", "--opens-at", at,
                             "--replace", NULL };
    const char *load[] = { "profiles", "load", r->o->batch, "--from", profiles, "--replace", NULL };
    char *out = NULL;
    int rc = rio_allocctl(r, &out, 1, create);
    if (rc != 0) fprintf(stderr, "alloccampus: batch create failed (exit %d):\n%s", rc, out ? out : "");
    free(out);
    out = NULL;
    if (rc == 0 && (rc = rio_allocctl(r, &out, 1, load)) != 0)
        fprintf(stderr, "alloccampus: profiles load failed (exit %d):\n%s", rc, out ? out : "");
    r->profiles_at = proc_now_ms();
    free(out);
    return rc == 0 ? 0 : -1;
}

/* Everyone's early requests, then the staff placements, all before the
 * opening: the pool must hold every early request when it is drawn, and
 * the draw must find the staff's beds taken. The early requests go first
 * because they only need allocd to serve the batch, while the staff's
 * checks need the profiles read (allocd holds an edit of them for every
 * request dequeued 1.5 s after it: docs/PROTOCOL.md, 11.2). */
static int phase_pool(rctx *r, const rlines *staff, const rlines *early, long long opens_at)
{
    char *state = NULL;
    for (int i = 0; i < 100 && !(state = rio_stat_str(r, "state")); i++) proc_sleep_ms(100);
    if (!state) {
        fprintf(stderr, "alloccampus: allocd does not serve batch %s after 10 s\n", r->o->batch);
        return -1;
    }
    free(state);
    rio_say(r, "2. before the opening %lld students ask alone (auto with 3 preferences and most with a filter: "
               "any single, or any bed, they may hold) and %lld group leaders invite their roommates and set the "
               "group's preferences: %zu requests, all kept for the draw", rio_campus(r, "singles"),
            rio_campus(r, "groups"), early->n);
    if (rio_push(r, RK_QUEUE, early->text, early->n) < 0) return -1;
    r->expected -= (long long)early->n;   /* no results before the opening */
    while (proc_now_ms() < r->profiles_at + PROFILES_READ_MS) proc_sleep_ms(20);
    rio_say(r, "3. staff place %lld RAs, %lld students with accessibility needs and %lld transfers, before the "
               "opening (assign on the ctl list)", rio_campus(r, "ras"), rio_campus(r, "access_staff"),
            rio_campus(r, "transfers"));
    if (rio_push(r, RK_CTL, staff->text, staff->n) < 0 || rio_wait(r, "staff placements", PHASE_TIMEOUT_S) < 0)
        return -1;
    tally(r, staff, "staff");
    while (rio_stat(r, "early_kept") < (long long)early->n && proc_now_ms() < opens_at) proc_sleep_ms(20);
    if (proc_now_ms() >= opens_at) {
        rio_fail(r, "the opening came before the staff placements and the pool were done (%lld of %zu early "
                    "requests kept): give more time with --open-in", rio_stat(r, "early_kept"), early->n);
        return -1;
    }
    char *commit = rio_stat_str(r, "lottery_commit");
    rio_fact(r, "pool: %lld requests from %lld students, commitment %s (SHA-256 of the seed, public now)",
             rio_stat(r, "early_kept"), rio_stat(r, "lottery_users"), commit ? commit : "?");
    free(commit);
    r->expected += (long long)early->n;
    return 0;
}

static int phase_opening(rctx *r, const rlines *early, long long opens_at)
{
    long long wait = opens_at - proc_now_ms();
    rio_say(r, "4. the opening, in %.1f s: the tickets are shuffled with the committed seed, then ordered by "
               "points (seniors 30, juniors 20, sophomores 10, first-years 0), random within equal points",
            wait > 0 ? wait / 1000.0 : 0.0);
    if (rio_wait(r, "the draw", PHASE_TIMEOUT_S) < 0) return -1;
    char *seed = rio_stat_str(r, "lottery_seed");
    rio_fact(r, "draw: seed %s revealed; every early request decided (%.1f s into the round)", seed ? seed : "?",
             rio_elapsed(r));
    free(seed);
    tally(r, early, "draw");
    return 0;
}

static int by_draw(const void *a, const void *b)
{
    long long x = ((const long long *)a)[0], y = ((const long long *)b)[0];
    return x < y ? -1 : x > y;
}

/* The lines of l in the order of their users' tickets: the draw of the
 * result of "<ref>-<user>", each user's early request of that kind. With
 * refused, only users whose that request was refused and who hold no bed.
 * Returns how many were put in out (l->n slots). */
static size_t by_turn(rctx *r, const rlines *l, const char *ref, int refused, char **out)
{
    const char **ids = malloc(l->n * sizeof *ids), **users = malloc(l->n * sizeof *users);
    char (*id)[40] = malloc(l->n * sizeof *id);
    long long (*order)[2] = malloc(l->n * sizeof *order);
    size_t n = 0;
    if (ids && users && id && order) {
        for (size_t i = 0; i < l->n; i++) {
            users[i] = jstr(l->json[i], "user");
            snprintf(id[i], sizeof id[i], "%s-%s", ref, users[i]);
            ids[i] = id[i];
        }
        json_t *res = rio_hmget(r, RK_RESULTS, ids, l->n);
        json_t *held = refused ? rio_hmget(r, RK_HOLDERS, users, l->n) : json_object();
        for (size_t i = 0; i < l->n; i++) {
            const json_t *x = json_object_get(res, ids[i]);
            const char *st = x ? jstr(x, "status") : NULL;
            if (refused && (!st || strcmp(st, "rejected") || json_object_get(held, users[i]))) continue;
            json_t *d = x ? json_object_get(x, "draw") : NULL;
            order[n][0] = d ? json_integer_value(d) : (long long)1 << 40;
            order[n++][1] = (long long)i;
        }
        qsort(order, n, sizeof *order, by_draw);
        for (size_t k = 0; k < n; k++) out[k] = l->text[order[k][1]];
        json_decref(res);
        json_decref(held);
    }
    free(ids);
    free(users);
    free(id);
    free(order);
    return n;
}

/* Students whose early request found no room may join the waitlist, in
 * the order of their tickets. (Not with "wait": true in the pool itself:
 * a pool request served from the waitlist later loses its draw, and
 * `lottery verify` then fails; see docs/HOUSING.md.) */
static int phase_waitlist(rctx *r, const rlines *wait)
{
    rio_say(r, "5. those who got no room may join the waitlist, in the order of the draw: the same request again "
               "with \"wait\": true; it holds their place until a bed they may have comes back");
    char **order = malloc((wait->n + 1) * sizeof *order);
    if (!order) return -1;
    size_t n = by_turn(r, wait, "au", 1, order);
    int rc = rio_push(r, RK_QUEUE, order, n) < 0 || rio_wait(r, "waitlist", PHASE_TIMEOUT_S) < 0 ? -1 : 0;
    if (rc == 0) rio_fact(r, "waitlist: %zu of the %zu who would wait found no room in the draw and joined it "
                             "(stats: %lld waiting)", n, wait->n, rio_stat(r, "waiting"));
    free(order);
    return rc;
}

static int phase_groups(rctx *r, const rlines *form, const rlines *place)
{
    rio_say(r, "6. the invited accept (or decline), some groups edit their shared preferences (a stale edit is "
               "refused: conflict), then every group asks for a room at its leader's turn in the draw: only an "
               "empty room of exactly its size, that every member may hold");
    if (rio_push(r, RK_QUEUE, form->text, form->n) < 0) return -1;
    char **order = malloc((place->n + 1) * sizeof *order);
    size_t n = order ? by_turn(r, place, "in", 0, order) : 0;
    if (!order || rio_push(r, RK_QUEUE, order, n) < 0) {
        free(order);
        return -1;
    }
    free(order);
    if (rio_wait(r, "groups", PHASE_TIMEOUT_S) < 0) return -1;
    tally(r, form, "groups");
    tally(r, place, "groups");
    return 0;
}

/* The lines of `later` to send: unassigns (to ctl) whatever happened,
 * the rest only from students who hold a bed now. */
static void later_pick(rctx *r, const rlines *later, rlines *ctl, rlines *queue)
{
    const char **users = malloc(later->n * sizeof *users);
    for (size_t i = 0; users && i < later->n; i++) users[i] = jstr(later->json[i], "user");
    json_t *holders = users ? rio_hmget(r, RK_HOLDERS, users, later->n) : NULL;
    for (size_t i = 0; holders && i < later->n; i++) {
        rlines *to = !strcmp(jstr(later->json[i], "op"), "unassign") ? ctl
                   : json_object_get(holders, users[i]) ? queue : NULL;
        if (!to) continue;
        to->text[to->n] = later->text[i];
        to->json[to->n++] = later->json[i];
    }
    json_decref(holders);
    free(users);
}

static int phase_later(rctx *r, const rlines *later)
{
    rio_say(r, "7. accommodations end (staff unassign), placed students withdraw (release) and friends trade "
               "beds (swap: the first offer waits for the other's); every freed bed goes to the waitlist in order, "
               "with every rule checked again");
    rlines ctl = { .text = malloc(later->n * sizeof(char *) + 1), .json = malloc(later->n * sizeof(json_t *) + 1) };
    rlines queue = { .text = malloc(later->n * sizeof(char *) + 1), .json = malloc(later->n * sizeof(json_t *) + 1) };
    int rc = ctl.text && ctl.json && queue.text && queue.json ? 0 : -1;
    long long served = rio_stat(r, "wait_served");
    if (rc == 0) later_pick(r, later, &ctl, &queue);
    if (rc == 0 && (rio_push(r, RK_CTL, ctl.text, ctl.n) < 0 || rio_push(r, RK_QUEUE, queue.text, queue.n) < 0 ||
                    rio_wait(r, "withdrawals and trades", PHASE_TIMEOUT_S) < 0)) rc = -1;
    if (rc == 0) {
        rio_fact(r, "later: %zu unassigned by staff; %zu withdrawals and trades sent (%zu planned by students "
                    "holding no bed now were not)", ctl.n, queue.n, later->n - ctl.n - queue.n);
        tally(r, &ctl, "later");
        tally(r, &queue, "later");
        rio_fact(r, "waitlist: %lld requests served from it by the beds that came back, %lld still waiting",
                 rio_stat(r, "wait_served") - served, rio_stat(r, "waiting"));
    }
    free(ctl.text), free(ctl.json), free(queue.text), free(queue.json);
    return rc;
}

static int phase_close(rctx *r)
{
    rio_say(r, "8. the office closes the round: whatever still waits (the waitlist, unanswered swap offers) "
               "gets its final answer");
    long long waiting = rio_stat(r, "waiting"), offers = rio_stat(r, "swap_offers");
    char *close[] = { "{\"id\":\"c-close\",\"op\":\"close\"}" };
    if (rio_push(r, RK_CTL, close, 1) < 0 || rio_wait(r, "close", PHASE_TIMEOUT_S) < 0) return -1;
    for (int i = 0; i < 500 && (rio_stat(r, "waiting") > 0 || rio_stat(r, "swap_offers") > 0); i++) proc_sleep_ms(20);
    rio_fact(r, "closed: ended %lld waitlist places and %lld swap offers (%.1f s into the round)", waiting, offers,
             rio_elapsed(r));
    return 0;
}

static int run_phases(rctx *r)
{
    rlines staff = { 0 }, early = { 0 }, wait = { 0 }, form = { 0 }, place = { 0 }, later = { 0 };
    int rc = rio_load(r, "staff.jsonl", &staff) == 0 && rio_load(r, "early.jsonl", &early) == 0 &&
             rio_load(r, "wait.jsonl", &wait) == 0 && rio_load(r, "form.jsonl", &form) == 0 &&
             rio_load(r, "place.jsonl", &place) == 0 && rio_load(r, "later.jsonl", &later) == 0 ? 0 : 4;
    long long opens_at = 0;
    if (rc == 0)
        rc = setup(r, &opens_at) == 0 && phase_pool(r, &staff, &early, opens_at) == 0 &&
             phase_opening(r, &early, opens_at) == 0 && phase_waitlist(r, &wait) == 0 &&
             phase_groups(r, &form, &place) == 0 &&
             phase_later(r, &later) == 0 && phase_close(r) == 0 ? 0 : 3;
    if (rc == 0) round_check(r);
    rio_lines_free(&staff);
    rio_lines_free(&early);
    rio_lines_free(&wait);
    rio_lines_free(&form);
    rio_lines_free(&place);
    rio_lines_free(&later);
    return r->failed ? 1 : rc;
}

/* A private redis-server and allocd for the round, in a temp dir. */
static int start_private(const round_opts *o, proc_redis *redis, pid_t *allocd, char *conf, size_t len)
{
    if (proc_redis_start(redis, "alloccampus", NULL) < 0) {
        fprintf(stderr, "alloccampus: cannot start redis-server\n");
        return -1;
    }
    snprintf(conf, len, "%s/allocd.conf", redis->dir);
    FILE *f = fopen(conf, "w");
    if (!f) return -1;
    fprintf(f, "redis = \"%s\";\nprefix = \"%s\";\ninstance = \"alloccampus\";\n", redis->url, o->prefix);
    fclose(f);
    char log[400];
    snprintf(log, sizeof log, "%s/allocd.log", redis->dir);
    char *argv[] = { (char *)o->allocd, "-c", conf, NULL };
    *allocd = proc_spawn(argv, log);
    return *allocd > 0 ? 0 : -1;
}

int round_run(const round_opts *o)
{
    rctx r = { .o = o, .url = o->redis_url, .t0 = proc_mono_us() };
    proc_redis redis = { 0 };
    pid_t allocd = 0;
    char conf[400];
    if (load_campus(&r) < 0) return 4;
    if (!o->redis_url) {
        if (start_private(o, &redis, &allocd, conf, sizeof conf) < 0) return 3;
        r.url = redis.url;
        rio_say(&r, "a private redis-server and allocd (%s) in %s", o->allocd, redis.dir);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/requests.jsonl", o->dir);
    r.requests = fopen(path, "w");
    int rc = !r.requests ? 4 : rio_connect(&r) < 0 ? 3 : run_phases(&r);
    if (r.requests) fclose(r.requests);
    if (r.c) redisFree(r.c);
    json_decref(r.campus);
    if (allocd > 0 && proc_stop(&allocd, 20000) != 0) rc = rc ? rc : 3;
    if (redis.pid > 0) proc_redis_stop(&redis);
    return rc;
}
