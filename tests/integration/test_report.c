/* test_report.c -- `allocctl report` after a real round: a room batch with
 * buildings, an opening lottery drawn by points, a group, a waitlist and
 * rejections, decided by a real allocd. The text summary's figures are
 * checked against the batch as Redis has it (counted here, independently);
 * the HTML page is rendered by headless chromium (screenshot kept in
 * $ALLOCD_TEST_OUT, default BUILD/test-output); then the batch is archived
 * into a private PostgreSQL, purged from Redis, and reported from the
 * archive with the same fill by building and the draw replayed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"
#include "base/textfile.h"
#include "allocctl/report_data.h"
#include <libpq-fe.h>

/* One integer from the archive (count(*) and the like). */
static long long pg_int(const char *conninfo, const char *sql)
{
    PGconn *db = PQconnectdb(conninfo);
    assert_int_equal(PQstatus(db), CONNECTION_OK);
    PGresult *r = PQexec(db, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", sql, PQerrorMessage(db));
    long long v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(db);
    return v;
}

static void pg_exec(const char *conninfo, const char *sql)
{
    PGconn *db = PQconnectdb(conninfo);
    PGresult *r = PQexec(db, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s: %s", sql, PQerrorMessage(db));
    PQclear(r);
    PQfinish(db);
}

static const char *out_dir(void)
{
    static char dir[512];
    const char *o = getenv("ALLOCD_TEST_OUT");
    if (o && *o) snprintf(dir, sizeof dir, "%s", o);
    else snprintf(dir, sizeof dir, "%s/test-output", harness_build_dir());
    itest_sh("mkdir -p '%s'", dir);
    char *abs = realpath(dir, NULL);   /* chromium takes a file:// URL */
    if (abs) { snprintf(dir, sizeof dir, "%s", abs); free(abs); }
    return dir;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The round: 6 users ask before the opening (drawn by points, 5 beds for
 * them), a listed group takes the C building, one joins the waitlist, one
 * names a room that does not exist. */
static void run_round(itest *t, const char *requests)
{
    char rooms[600];
    snprintf(rooms, sizeof rooms, "%s/rooms.csv", t->redis.dir);
    write_file(rooms, "id,capacity,building\nR1,2,\"A\"\nR2,2,\"A\"\nR3,1,\"B\"\nR4,2,\"C\"\n");
    /* time for six allocctl runs and allocd's start on a loaded machine:
     * a request taken after the opening is not in the draw */
    long long opens = (long long)harness_now_ms() + 10000;
    assert_int_equal(itest_ctl(t, NULL, "batch create r1 --kind room --from %s --early shuffle --groups listed "
                                        "--opens-at %lld", rooms, opens), 0);
    itest_cmd(t->c, "HSET alloc:{r1}:meta draw_by points");
    FILE *rq = fopen(requests, "w");
    assert_non_null(rq);
    for (int i = 1; i <= 6; i++) {
        char json[200];
        itest_cmd(t->c, "HSET alloc:{r1}:profiles u%d {\"points\":%d}", i, i * 10);
        snprintf(json, sizeof json, "{\"id\":\"a%d\",\"user\":\"u%d\",\"op\":\"auto\",\"prefs\":[\"R%d\",\"R1\",\"R2\",\"R3\"]}",
                 i, i, i % 2 ? 1 : 2);
        fprintf(rq, "%s\n", json);
        assert_int_equal(itest_ctl(t, NULL, "push r1 --json '%s'", json), 0);
    }
    fclose(rq);
    itest_start(t, NULL);
    for (int i = 1; i <= 6; i++)
        assert_int_equal(itest_ctl(t, NULL, "wait r1 --id a%d --timeout 40", i), 0);
    assert_int_equal(proc_int(t->c, "HEXISTS alloc:{r1}:stats lottery_seed"), 1);
    assert_int_equal(itest_ctl(t, NULL, "push r1 --id g1 --user g1 --op group --members g1,g2 --prefs R4 --wait"), 0);
    assert_int_equal(itest_ctl(t, NULL, "push r1 --id w1 --user u7 --op choose --room R3 --waitlist --wait --timeout 0.5"), 1);
    assert_int_equal(itest_ctl(t, NULL, "push r1 --id x1 --user u8 --op choose --room R9 --wait"), 0);
}

/* Counted here from Redis, to compare with the report's lines. */
static void expected(itest *t, char *line, size_t len)
{
    redisReply *r = redisCommand(t->c, "HVALS alloc:{r1}:results");
    assert_non_null(r);
    int n = (int)r->elements, st[4] = { 0 };
    const char *names[] = { "\"granted\"", "\"done\"", "\"rejected\"", "\"waiting\"" };
    for (size_t i = 0; i < r->elements; i++)
        for (int k = 0; k < 4; k++) st[k] += strstr(r->element[i]->str, names[k]) != NULL;
    freeReplyObject(r);
    snprintf(line, len, "results: %d (granted %d, done %d, rejected %d, waiting %d, invalid 0)", n, st[0], st[1], st[2], st[3]);
}

static void render(itest *t, const char *html)
{
    const char *flags = "--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
                        "--disable-dev-shm-usage";
    char png[700];
    snprintf(png, sizeof png, "%s/report.png", out_dir());
    assert_int_equal(itest_sh("command -v chromium >/dev/null"), 0);   /* make deps installs it */
    assert_int_equal(itest_sh("timeout 60 chromium %s --user-data-dir='%s/chromium' --window-size=1000,2200 "
                              "--screenshot='%s' 'file://%s' >/dev/null 2>&1", flags, t->redis.dir, png, html), 0);
    struct stat sb;
    assert_int_equal(stat(png, &sb), 0);
    assert_true(sb.st_size > 20000);
    fprintf(stderr, "screenshot: %s (%lld bytes)\n", png, (long long)sb.st_size);
}

static void test_report_from_redis_and_archive(void **state)
{
    itest *t = *state;
    char requests[600], html[600], want[200], *out;
    snprintf(requests, sizeof requests, "%s/requests.jsonl", t->redis.dir);
    snprintf(html, sizeof html, "%s/report.html", out_dir());
    run_round(t, requests);
    expected(t, want, sizeof want);
    /* no --requests: auto and group grants carry `pref` */
    assert_int_equal(itest_ctl(t, &out, "report r1 --html %s", html), 0);
    fprintf(stderr, "%s", out);
    if (!strstr(out, want)) fail_msg("expected '%s' in:\n%s", want, out);
    assert_non_null(strstr(out, "rejected no_room: 1\n"));
    assert_non_null(strstr(out, "rejected unknown_item: 1\n"));
    assert_non_null(strstr(out, "  A                    4 / 4 (100%)"));
    assert_non_null(strstr(out, "  B                    1 / 1 (100%)"));
    assert_non_null(strstr(out, "  C                    2 / 2 (100%)"));
    /* drawn by points (11.3): the six users' 10..60 points are distinct, so
     * the draw is their order by points and the 10-point user gets no bed */
    assert_non_null(strstr(out, "priority band 52-60 points: 1 users, 1 placed (100%)"));
    assert_non_null(strstr(out, "priority band 10-15 points: 1 users, 0 placed (0%)"));
    assert_non_null(strstr(out, "groups placed whole: 1 (2 members)"));
    assert_non_null(strstr(out, "first choice (auto): 4 of 5 grants (80%)"));
    assert_non_null(strstr(out, "first choice (groups): 1 of 1"));
    assert_non_null(strstr(out, "waitlist: 1 joined, 0 served, 0 ended unserved, 1 waiting now"));
    char *commit = harness_str(t->c, "HGET alloc:{r1}:stats lottery_commit");
    char *seed = harness_str(t->c, "HGET alloc:{r1}:stats lottery_seed");
    char line[300];
    snprintf(line, sizeof line, "lottery: commitment sha256 %s\nlottery: seed %s\n", commit, seed);
    assert_non_null(strstr(out, line));
    assert_non_null(strstr(out, "lottery: SHA-256 of the seed matches the commitment"));
    assert_non_null(strstr(out, "lottery: replay of the draw: MATCH"));
    free(out);
    char *page = textfile_read(html, NULL);
    assert_non_null(page);
    assert_non_null(strstr(page, "<svg"));
    assert_null(strstr(page, "<script"));
    assert_null(strstr(page, "http://"));
    assert_null(strstr(page, "https://"));
    assert_non_null(strstr(page, commit));
    free(page);
    render(t, html);
    free(commit);
    free(seed);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

static void test_report_from_archive(void **state)
{
    itest *t = *state;
    proc_pg pg;
    assert_int_equal(proc_pg_start(&pg, "pg"), 0);
    char requests[600], *out;
    snprintf(requests, sizeof requests, "%s/requests.jsonl", t->redis.dir);
    run_round(t, requests);
    assert_int_equal(itest_ctl(t, NULL, "push r1 --ctl --op close --wait"), 2);
    assert_int_equal(itest_ctl(t, NULL, "push r1 --ctl --op close --id close1"), 0);
    json_decref(itest_result(t, "r1", "close1"));
    json_t *w = itest_result(t, "r1", "w1");   /* the close ends the waitlist */
    assert_string_equal(itest_jstr(w, "status"), "rejected");
    json_decref(w);
    /* archivers killed (-9) part way, a pool entry and a result per page:
     * the next run writes what they did not, and nothing twice */
    static const int kill_after_ms[3] = { 30, 90, 180 };
    for (int round = 0; round < 3; round++) {
        char *argv[] = { (char *)harness_allocctl_bin(), "--redis", t->redis.url, "archive", "--pg", pg.conninfo,
                         "--chunk", "1", "r1", NULL };
        char log[600];
        snprintf(log, sizeof log, "%s/archive-killed.log", t->redis.dir);
        pid_t ar = proc_spawn(argv, log);
        assert_true(ar > 0);
        harness_sleep_ms(kill_after_ms[round]);
        proc_reap(ar, SIGKILL);
    }
    assert_int_equal(itest_ctl(t, &out, "archive --pg '%s' r1", pg.conninfo), 0);
    free(out);
    /* again, a pool entry per page: what was there is not written twice */
    assert_int_equal(itest_ctl(t, &out, "archive --pg '%s' --chunk 1 r1", pg.conninfo), 0);
    free(out);
    long long pool = proc_int(t->c, "LLEN alloc:{r1}:early"), items = proc_int(t->c, "HLEN alloc:{r1}:capacity");
    assert_true(pool >= 6);
    assert_int_equal(pg_int(pg.conninfo, "SELECT count(*) FROM alloc_lottery_pool WHERE batch = 'r1'"), pool);
    assert_int_equal(pg_int(pg.conninfo, "SELECT count(*) FROM alloc_items WHERE batch = 'r1' "
                                         "AND attrs->>'building' IS NOT NULL"), items);
    assert_int_equal(pg_int(pg.conninfo, "SELECT count(*) FROM alloc_lottery WHERE batch = 'r1' AND lottery_done "
                                         "AND early_served = 6"), 1);
    /* from Redis too, a drawn result altered names the first difference */
    char *a3 = harness_str(t->c, "HGET alloc:{r1}:results a3"), *at = strstr(a3, "\"draw\":");
    assert_non_null(at);
    char *tampered = malloc(strlen(a3) + 8);
    assert_non_null(tampered);
    snprintf(tampered, strlen(a3) + 8, "%.*s\"draw\":99%s", (int)(at - a3), a3, strpbrk(at + 7, ",}"));
    itest_cmd(t->c, "HSET alloc:{r1}:results a3 %s", tampered);
    assert_int_equal(itest_ctl(t, &out, "report r1"), 0);
    assert_non_null(strstr(out, "lottery: replay of the draw: MISMATCH (first: a3: result says draw 99, the replay "));
    free(out);
    itest_cmd(t->c, "HSET alloc:{r1}:results a3 %s", a3);
    free(tampered);
    free(a3);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
    assert_int_equal(itest_ctl(t, NULL, "purge r1 --force"), 0);
    assert_int_equal(itest_ctl(t, &out, "report r1"), 1);   /* gone from Redis: says where to look */
    assert_non_null(strstr(out, "--pg"));
    free(out);
    assert_int_equal(itest_ctl(t, &out, "report r1 --pg '%s'", pg.conninfo), 0);
    fprintf(stderr, "%s", out);
    assert_non_null(strstr(out, "from the PostgreSQL archive"));
    assert_non_null(strstr(out, "results: 10 (granted 6, done 1, rejected 3, waiting 0, invalid 0)"));
    /* alloc_items: by building, as from Redis; alloc_lottery_pool: the replay */
    assert_non_null(strstr(out, "fill by building (beds held now / beds):\n"));
    assert_non_null(strstr(out, "  A                    4 / 4 (100%)"));
    assert_non_null(strstr(out, "  B                    1 / 1 (100%)"));
    assert_non_null(strstr(out, "  C                    2 / 2 (100%)"));
    assert_non_null(strstr(out, "lottery: SHA-256 of the seed matches the commitment"));
    assert_non_null(strstr(out, "lottery: replay of the draw: MATCH\n"));
    free(out);
    /* a drawn result altered in the archive: the replay names it */
    pg_exec(pg.conninfo, "UPDATE alloc_results SET result = jsonb_set(result, '{draw}', '99') "
                         "WHERE batch = 'r1' AND req_id = 'a3'");
    assert_int_equal(itest_ctl(t, &out, "report r1 --pg '%s'", pg.conninfo), 0);
    assert_non_null(strstr(out, "lottery: replay of the draw: MISMATCH (first: a3: result says draw 99, the replay "));
    free(out);
    /* an archive written before allocctl kept items and the pool */
    pg_exec(pg.conninfo, "DELETE FROM alloc_items; DELETE FROM alloc_lottery; DELETE FROM alloc_lottery_pool");
    assert_int_equal(itest_ctl(t, &out, "report r1 --pg '%s'", pg.conninfo), 0);
    assert_non_null(strstr(out, "fill by room (beds held now / beds): attrs not in this archive"));
    assert_non_null(strstr(out, "  R1                   2 / 2 (100%)"));
    assert_non_null(strstr(out, "replay of the draw: not run (the lottery pool is not in this archive"));
    free(out);
    proc_pg_stop(&pg);
}

/* Priority bands from results that carry points (contract 11.3: each drawn
 * result has `points` beside `draw`), written here as allocd would. */
static void test_report_priority_bands(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "p1", "kind room", "R1 5", NULL);
    for (int i = 1; i <= 6; i++)
        itest_cmd(t->c, "HSET alloc:{p1}:results a%d {\"id\":\"a%d\",\"user\":\"u%d\",\"op\":\"auto\","
                  "\"status\":\"%s\",%s\"draw\":%d,\"points\":%d,\"at\":%lld}", i, i, i,
                  i == 1 ? "rejected" : "granted", i == 1 ? "\"reason\":\"no_room\"," : "\"item\":\"R1\",",
                  7 - i, i * 10, 1795800000000LL + i);
    char *out;
    assert_int_equal(itest_ctl(t, &out, "report p1"), 0);
    assert_non_null(strstr(out, "results: 6 (granted 5, done 0, rejected 1, waiting 0, invalid 0)"));
    assert_non_null(strstr(out, "priority band 52-60 points: 1 users, 1 placed (100%)"));
    assert_non_null(strstr(out, "priority band 10-15 points: 1 users, 0 placed (0%)"));
    assert_non_null(strstr(out, "lottery: none"));
    free(out);
}

/* Stock: units granted per item, and when each sold out (the grant that
 * reached capacity), against the results as Redis has them. */
static void test_report_stock_sold_out(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "s1", "kind stock per_user 1", "a 2 b 5", NULL);
    itest_start(t, NULL);
    for (int i = 1; i <= 3; i++)
        assert_int_equal(itest_ctl(t, NULL, "push s1 --id b%d --user u%d --op buy --item a --wait", i, i), 0);
    json_t *r = itest_result(t, "s1", "b2");
    char when[40], line[200], *out;
    report_time(itest_jint(r, "at"), when, sizeof when);
    json_decref(r);
    assert_int_equal(itest_ctl(t, &out, "report s1"), 0);
    snprintf(line, sizeof line, "  a                    2 / 2, granted 2, %s\n", when);
    if (!strstr(out, line)) fail_msg("expected '%s' in:\n%s", line, out);
    assert_non_null(strstr(out, "  b                    0 / 5, granted 0, not sold out\n"));
    assert_non_null(strstr(out, "results: 3 (granted 2, done 0, rejected 1, waiting 0, invalid 0)"));
    assert_non_null(strstr(out, "rejected sold_out: 1\n"));
    free(out);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_report_from_redis_and_archive),
        ITEST_CASE(test_report_from_archive),
        ITEST_CASE(test_report_priority_bands),
        ITEST_CASE(test_report_stock_sold_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
