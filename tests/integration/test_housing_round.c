/* test_housing_round.c -- a whole university housing round, end to end,
 * on a real redis-server and allocd (issue 35, item 3): the short form of
 * `make run-housing`, 300 students and 122 rooms in six buildings.
 *
 * alloccampus gen must write the same files for the same seed, and
 * alloccampus round must report every check held. Then the test reads the
 * batch itself, trusting neither the tool nor allocctl: every request has
 * exactly one final result (none left waiting) and every result is JSON;
 * every student holds a bed or was told why not; every group of
 * P:{B}:groups is whole in one room of its size, or holds nothing; every
 * pool result carries draw and points, and nobody was drawn before
 * someone with more points; the staff placements the campus planned were
 * made (and the mistaken one refused); `allocctl verify` lists exactly the
 * planned staff exceptions and no holder who breaks a rule.
 *
 * The draw's seed is allocd's, different in every run, so the test
 * asserts what must hold whatever it is, never who got which room. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "itest.h"
#include "base/textfile.h"

#define BATCH "housing"
#define STUDENTS "300"

typedef struct round_data {
    json_t *results, *holders, *groups, *capacity;   /* the batch's hashes, values parsed */
    char dir[600];
} round_data;

/* HGETALL alloc:{housing}:<name>, each value parsed as JSON (failing the
 * test on one that is not). */
static json_t *hash(itest *t, const char *name)
{
    redisReply *x = redisCommand(t->c, "HGETALL alloc:{" BATCH "}:%s", name);
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_ARRAY);
    json_t *h = json_object();
    for (size_t i = 0; i + 1 < x->elements; i += 2) {
        json_error_t e;
        json_t *v = json_loads(x->element[i + 1]->str, JSON_DECODE_ANY, &e);
        if (!v) fail_msg("%s %s is not JSON (%s): %s", name, x->element[i]->str, e.text, x->element[i + 1]->str);
        json_object_set_new(h, x->element[i]->str, v);
    }
    freeReplyObject(x);
    return h;
}

static long long campus_value(const round_data *d, const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/campus.txt", d->dir);
    char *text = textfile_read(path, NULL);
    assert_non_null(text);
    char key[64];
    snprintf(key, sizeof key, "%s=", name);
    const char *at = text;
    while (at && strncmp(at, key, strlen(key))) at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL;
    if (!at) fail_msg("campus.txt has no %s", name);
    long long v = strtoll(at + strlen(key), NULL, 10);
    free(text);
    return v;
}

/* Lines of a file of the campus, as JSON. */
static json_t *jsonl(const round_data *d, const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", d->dir, name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    json_t *a = json_array();
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        assert_non_null(j);
        json_array_append_new(a, j);
    }
    fclose(f);
    return a;
}

static void gen_is_deterministic(itest *t, round_data *d)
{
    snprintf(d->dir, sizeof d->dir, "%s/campus", t->redis.dir);
    char *out;
    int rc = itest_sh("%s/alloccampus gen --out '%s' --seed 7 --students " STUDENTS " > '%s.out' 2>&1 && "
                      "%s/alloccampus gen --out '%s.again' --seed 7 --students " STUDENTS " > /dev/null && "
                      "diff -r '%s' '%s.again' > /dev/null",
                      harness_build_dir(), d->dir, d->dir, harness_build_dir(), d->dir, d->dir, d->dir);
    assert_int_equal(rc, 0);
    char path[700];
    snprintf(path, sizeof path, "%s.out", d->dir);
    out = textfile_read(path, NULL);
    assert_non_null(out);
    assert_non_null(strstr(out, "campus: 300 students (seed 7)"));
    assert_non_null(strstr(out, "in 6 buildings"));
    free(out);
    assert_true(campus_value(d, "rooms") >= 120 && campus_value(d, "rooms") <= 130);
    assert_true(campus_value(d, "groups") > 50);
    assert_true(campus_value(d, "staff_exceptions") >= 2);
}

static void round_reports_ok(itest *t, round_data *d)
{
    char line[2000];
    snprintf(line, sizeof line, "%s/alloccampus round --dir '%s' --redis '%s' --allocctl %s/allocctl --quiet",
             harness_build_dir(), d->dir, t->redis.url, harness_build_dir());
    char *const argv[] = { "/bin/sh", "-c", line, NULL };
    char *out = NULL;
    int rc = proc_run_capture(argv, &out);
    if (rc != 0) fail_msg("alloccampus round exited %d:\n%s", rc, out ? out : "");
    assert_non_null(strstr(out, "housing: verify: OK"));
    assert_non_null(strstr(out, "housing: lottery verify: MATCH"));
    assert_non_null(strstr(out, "none split"));
    assert_non_null(strstr(out, "housing: first choice (auto): "));
    assert_non_null(strstr(out, "housing: by band"));
    assert_non_null(strstr(out, "housing: OK: every check holds"));
    assert_null(strstr(out, "FAIL"));
    free(out);
}

/* Every request pushed has one final result, and the close one. */
static void every_request_answered(round_data *d)
{
    json_t *pushed = jsonl(d, "requests.jsonl"), *staff = jsonl(d, "staff.jsonl"), *r;
    size_t i;
    long long ctl = json_array_size(staff) + campus_value(d, "unassigns") + 1;
    assert_int_equal(json_object_size(d->results), json_array_size(pushed) + ctl);
    json_array_foreach(pushed, i, r) assert_non_null(json_object_get(d->results, json_string_value(json_object_get(r, "id"))));
    const char *id;
    json_object_foreach(d->results, id, r) {
        const char *st = json_string_value(json_object_get(r, "status"));
        assert_non_null(st);
        if (!strcmp(st, "waiting")) fail_msg("%s is still waiting after the close", id);
    }
    json_decref(pushed);
    json_decref(staff);
}

/* A student without a bed has a result saying why: rejected with a
 * reason (theirs or their group's), or their own release or unassign. */
static void every_student_has_an_outcome(round_data *d)
{
    json_t *told = json_object(), *r;
    const char *id;
    json_object_foreach(d->results, id, r)
        if (json_object_get(r, "reason") || !strcmp(json_string_value(json_object_get(r, "op")), "release") ||
            !strcmp(json_string_value(json_object_get(r, "op")), "unassign"))
            json_object_set_new(told, json_string_value(json_object_get(r, "user")), json_true());
    /* a group's answer is its members' too */
    const char *gid;
    json_t *g, *u;
    size_t i;
    json_object_foreach(d->groups, gid, g) {
        json_t *x = json_object_get(told, json_string_value(json_object_get(g, "leader")));
        if (x) json_array_foreach(json_object_get(g, "members"), i, u) json_object_set(told, json_string_value(u), x);
    }
    char path[700];
    snprintf(path, sizeof path, "%s/profiles.csv", d->dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    int students = 0;
    assert_non_null(fgets(line, sizeof line, f));   /* the header */
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, ",")] = '\0';
        students++;
        if (!json_object_get(d->holders, line) && !json_object_get(told, line))
            fail_msg("%s holds no bed and no result says why", line);
    }
    fclose(f);
    assert_int_equal(students, 300);
    json_decref(told);
}

/* Whole in one room of its size, or holding nothing. */
static void groups_whole_or_absent(round_data *d)
{
    const char *gid;
    json_t *g;
    int whole = 0;
    assert_int_equal(json_object_size(d->groups), campus_value(d, "groups"));
    json_object_foreach(d->groups, gid, g) {
        json_t *members = json_object_get(g, "members"), *u;
        size_t i, holding = 0;
        const char *room = NULL;
        json_array_foreach(members, i, u) {
            json_t *h = json_object_get(d->holders, json_string_value(u));
            if (!h) continue;
            const char *item = json_string_value(json_object_get(h, "item"));
            if (room && strcmp(room, item)) fail_msg("group %s is split: %s and %s", gid, room, item);
            room = item;
            holding++;
        }
        if (!holding) continue;
        if (holding != json_array_size(members)) fail_msg("group %s: %zu of its members hold a bed", gid, holding);
        assert_int_equal(json_integer_value(json_object_get(d->capacity, room)), json_array_size(members));
        whole++;
    }
    assert_true(whole > 0);
}

/* Pool results carry draw and points; more points were always drawn first. */
static void draw_by_points(round_data *d)
{
    json_t *early = jsonl(d, "early.jsonl"), *r;
    size_t i, n = 0;
    long long draw[400], points[400];
    json_t *seen = json_object();
    json_array_foreach(early, i, r) {
        const char *user = json_string_value(json_object_get(r, "user"));
        json_t *x = json_object_get(d->results, json_string_value(json_object_get(r, "id")));
        assert_non_null(x);
        assert_true(json_is_integer(json_object_get(x, "draw")) && json_is_integer(json_object_get(x, "points")));
        if (json_object_get(seen, user)) continue;
        json_object_set_new(seen, user, json_true());
        assert_true(n < 400);
        draw[n] = json_integer_value(json_object_get(x, "draw"));
        points[n++] = json_integer_value(json_object_get(x, "points"));
    }
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            if (points[a] > points[b] && draw[a] > draw[b])
                fail_msg("drawn %lld with %lld points after %lld with %lld", draw[a], points[a], draw[b], points[b]);
    json_decref(seen);
    json_decref(early);
}

static void staff_as_planned(itest *t, round_data *d)
{
    long long granted = 0, refused = 0;
    const char *id;
    json_t *r;
    json_object_foreach(d->results, id, r) {
        if (strcmp(json_string_value(json_object_get(r, "op")), "assign")) continue;
        const char *st = json_string_value(json_object_get(r, "status"));
        if (!strcmp(st, "granted")) {
            assert_string_equal(json_string_value(json_object_get(r, "by")), "staff");
            granted++;
        } else {
            assert_string_equal(json_string_value(json_object_get(r, "reason")), "not_eligible");
            refused++;
        }
    }
    assert_int_equal(refused, campus_value(d, "staff_refused"));
    assert_int_equal(granted + refused, campus_value(d, "staff_commands"));
    char *out;
    int rc = itest_ctl(t, &out, "verify " BATCH);
    if (rc) fail_msg("allocctl verify exited %d:\n%s", rc, out);
    int staff = 0;
    for (const char *p = out; (p = strstr(p, "\nSTAFF ")); p++) staff++;
    assert_int_equal(staff, campus_value(d, "staff_exceptions"));
    assert_null(strstr(out, "BREAK"));
    free(out);
}

static void test_housing_round_short(void **state)
{
    itest *t = *state;
    round_data d;
    itest_start(t, NULL);
    gen_is_deterministic(t, &d);
    round_reports_ok(t, &d);
    d.results = hash(t, "results");
    d.holders = hash(t, "holders");
    d.groups = hash(t, "groups");
    d.capacity = hash(t, "capacity");
    every_request_answered(&d);
    every_student_has_an_outcome(&d);
    groups_whole_or_absent(&d);
    draw_by_points(&d);
    staff_as_planned(t, &d);
    json_decref(d.results);
    json_decref(d.holders);
    json_decref(d.groups);
    json_decref(d.capacity);
}

/* Bad input gets a clear answer, and no round starts. */
static void test_housing_bad_input(void **state)
{
    itest *t = *state;
    char line[1200];
    snprintf(line, sizeof line, "%s/alloccampus gen --out '%s/x' --students 5 2>&1", harness_build_dir(), t->redis.dir);
    char *const gen[] = { "/bin/sh", "-c", line, NULL };
    char *out = NULL;
    assert_int_equal(proc_run_capture(gen, &out), 2);
    assert_non_null(strstr(out, "--students 30.."));
    free(out);
    snprintf(line, sizeof line, "%s/alloccampus round --dir '%s/none' --redis '%s' 2>&1", harness_build_dir(),
             t->redis.dir, t->redis.url);
    char *const round[] = { "/bin/sh", "-c", line, NULL };
    assert_int_equal(proc_run_capture(round, &out), 4);
    assert_non_null(strstr(out, "run `alloccampus gen` first"));
    free(out);
    assert_int_equal(proc_int(t->c, "EXISTS alloc:{" BATCH "}:meta"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_housing_round_short),
        ITEST_CASE(test_housing_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
