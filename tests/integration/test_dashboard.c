/* test_dashboard.c -- the web dashboard in a real browser: Debian's
 * chromium, headless, loads the page from a live allocd (token given in the
 * URL fragment, as an operator would), runs its JavaScript, and the DOM it
 * leaves must show what Redis holds: every batch with its state, queue,
 * rejections by reason, dead count, owner; every instance with its leases;
 * the batch page with its event log and dead entries (escaped). A
 * screenshot of each page goes to $ALLOCD_TEST_OUT (default
 * $BUILD/test-output). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "base/textfile.h"
#include "itest.h"

#define TOKEN "dashboard-test-token-0123"
#define AUTH "Authorization: Bearer " TOKEN "\r\n"

static const char *out_dir(void)
{
    static char dir[400];
    const char *o = getenv("ALLOCD_TEST_OUT");
    if (o && *o) snprintf(dir, sizeof dir, "%s", o);
    else snprintf(dir, sizeof dir, "%s/test-output", harness_build_dir());
    itest_sh("mkdir -p '%s'", dir);
    return dir;
}

/* chromium --dump-dom (after the page's scripts ran) into a malloc'd string,
 * and a screenshot of the same URL into out_dir()/shot. */
static char *browse_sized(const itest *t, int port, const char *frag, const char *shot, int height)
{
    char dom[400], url[300];
    snprintf(dom, sizeof dom, "%s/dom.html", t->redis.dir);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/%s", port, frag);
    /* root in CI: chromium's sandbox needs a user namespace it may not get */
    const char *flags = "--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
                        "--disable-dev-shm-usage --virtual-time-budget=4000";
    int rc = itest_sh("timeout 60 chromium %s --user-data-dir='%s/chromium' --dump-dom '%s' > '%s' 2>/dev/null",
                      flags, t->redis.dir, url, dom);
    assert_int_equal(rc, 0);
    rc = itest_sh("timeout 60 chromium %s --user-data-dir='%s/chromium' --window-size=1400,%d "
                  "--screenshot='%s/%s' '%s' >/dev/null 2>&1", flags, t->redis.dir, height, out_dir(), shot, url);
    assert_int_equal(rc, 0);
    char png[600];
    snprintf(png, sizeof png, "%s/%s", out_dir(), shot);
    struct stat st;
    assert_int_equal(stat(png, &st), 0);
    assert_true(st.st_size > 5000);
    fprintf(stderr, "screenshot: %s (%lld bytes)\n", png, (long long)st.st_size);
    return textfile_read(dom, NULL);
}

static char *browse(const itest *t, int port, const char *frag, const char *shot)
{
    return browse_sized(t, port, frag, shot, 800);
}

/* GET path with the token: the JSON body, or NULL. */
static json_t *api_get(int port, const char *path)
{
    char *resp = itest_http_get_with(port, path, AUTH);
    const char *body = resp ? strstr(resp, "\r\n\r\n") : NULL;
    json_t *doc = body ? json_loads(body + 4, 0, NULL) : NULL;
    free(resp);
    return doc;
}

/* The element of the array a whose string `key` is value, or NULL. */
static json_t *find_by(const json_t *a, const char *key, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
        if (!strcmp(itest_jstr(e, key), value)) return e;
    return NULL;
}

static int has_string(const json_t *a, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
        if (json_is_string(e) && !strcmp(json_string_value(e), value)) return 1;
    return 0;
}

/* /api/batch?id=d1 holds what its page is checked for: a grant in the
 * log, the dead entry, 5 granted by this instance. */
static int batch_ready(json_t *doc, const void *unused)
{
    int dead = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "dead_recent"), i, e)
        dead |= !strcmp(itest_jstr(e, "raw"), "not-json<b>x</b>");
    return dead && find_by(json_object_get(doc, "log"), "type", "grant") &&
           itest_jint(json_object_get(doc, "results_by_status"), "granted") == 5;
}

/* /api/overview holds what its page is checked for: d1 open with 3
 * sold_out, d2 paused with 2 queued, both leased by the instance. */
static int overview_ready(json_t *doc, const void *instance)
{
    json_t *d1 = find_by(json_object_get(doc, "batches"), "id", "d1");
    json_t *d2 = find_by(json_object_get(doc, "batches"), "id", "d2");
    json_t *leases = json_object_get(find_by(json_object_get(doc, "instances"), "name", instance), "leases");
    return d1 && d2 && !strcmp(itest_jstr(d1, "state"), "open") &&
           itest_jint(json_object_get(d1, "rejects"), "sold_out") == 3 &&
           !strcmp(itest_jstr(d2, "state"), "paused") && itest_jint(d2, "queued") == 2 &&
           has_string(leases, "d1") && has_string(leases, "d2");
}

/* Polls GET path until ready says yes; fails with the last answer after
 * 15 s (the watcher refreshes every second: generous for a loaded machine). */
static void wait_api(int port, const char *path, int (*ready)(json_t *, const void *),
                     const void *arg)
{
    int64_t end = harness_now_ms() + 15000;
    for (;;) {
        json_t *doc = api_get(port, path);
        if (doc && ready(doc, arg)) {
            json_decref(doc);
            return;
        }
        if (harness_now_ms() > end) {
            char *text = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
            fail_msg("GET %s: not yet what the page is checked for after 15 s:\n%s", path,
                     text ? text : "(no JSON)");
        }
        json_decref(doc);
        harness_sleep_ms(100);
    }
}

static void test_dashboard_in_chromium(void **state)
{
    itest *t = *state;
    assert_int_equal(itest_sh("command -v chromium >/dev/null"), 0); /* make deps installs it */
    redisContext *c = t->c;
    itest_cmd(c, "HSET alloc:{d1}:meta kind stock per_user 1");
    itest_cmd(c, "HSET alloc:{d1}:capacity sku 5");
    itest_cmd(c, "HSET alloc:{d2}:meta kind stock per_user 1");
    itest_cmd(c, "HSET alloc:{d2}:capacity sku 9");
    itest_cmd(c, "SADD alloc:batches d1 d2");
    int port = itest_free_port();
    char conf[200];
    snprintf(conf, sizeof conf, "metrics_listen = \"127.0.0.1:%d\"; metrics_token = \"" TOKEN "\";", port);
    itest_start(t, conf);
    for (int i = 0; i < 8; i++)
        itest_push(t, "d1", "{\"id\":\"r%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku\"}", i, i);
    itest_cmd(c, "RPUSH alloc:{d1}:queue %s", "not-json<b>x</b>");
    assert_int_equal(harness_wait_hlen(c, "alloc:{d1}:results", 8, 10000), 8);
    itest_expect_hget(c, "alloc:{d2}:stats", "state");
    itest_cmd(c, "RPUSH alloc:{d2}:ctl {\"id\":\"p1\",\"op\":\"pause\"}");
    json_decref(itest_result(t, "d2", "p1"));       /* paused once p1 has its result */
    itest_push(t, "d2", "{\"id\":\"w1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku\"}");
    itest_push(t, "d2", "{\"id\":\"w2\",\"user\":\"u2\",\"op\":\"buy\",\"item\":\"sku\"}");
    /* the pages show the watcher's copy, read every tick, and the batch
     * page's details only from the tick after they are asked for (each
     * poll asks): the browser starts once the API serves all it is
     * checked for below */
    wait_api(port, "/api/batch?id=d1", batch_ready, NULL);
    wait_api(port, "/api/overview", overview_ready, t->allocd.instance);

    char *dom = browse(t, port, "#token=" TOKEN, "dashboard-overview.png");
    assert_non_null(dom);
    assert_null(strstr(dom, "token required"));
    assert_non_null(strstr(dom, "<tr data-batch=\"d1\">"));
    assert_non_null(strstr(dom, "<tr data-batch=\"d2\">"));
    assert_non_null(strstr(dom, "state-paused"));
    assert_non_null(strstr(dom, "state-open"));
    assert_non_null(strstr(dom, "(sold_out 3)"));        /* 8 buyers, 5 units */
    assert_non_null(strstr(dom, "<td class=\"num queued\">2</td>"));   /* d2 waits */
    char inst[200];
    snprintf(inst, sizeof inst, "<tr data-instance=\"%s\">", t->allocd.instance);
    const char *row = strstr(dom, inst);
    assert_non_null(row);
    const char *leases = strstr(row, "class=\"leases\"");
    assert_non_null(leases);
    assert_non_null(strstr(leases, ">d1</a>"));
    assert_non_null(strstr(leases, ">d2</a>"));
    free(dom);

    dom = browse(t, port, "#/batch/d1?token=" TOKEN, "dashboard-batch.png");
    assert_non_null(dom);
    assert_non_null(strstr(dom, "Batch d1"));
    assert_non_null(strstr(dom, "<table id=\"log\">"));
    assert_non_null(strstr(dom, "<td>grant</td>"));
    assert_non_null(strstr(dom, "<table id=\"dead\">"));
    assert_non_null(strstr(dom, "not-json&lt;b&gt;x&lt;/b&gt;"));   /* shown, not run */
    assert_null(strstr(dom, "not-json<b>"));
    assert_non_null(strstr(dom, "granted 5"));
    free(dom);

    /* without the token the page asks for it and shows no data */
    dom = browse(t, port, "", "dashboard-login.png");
    assert_non_null(strstr(dom, "token required"));
    assert_null(strstr(dom, "data-batch"));
    free(dom);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* /api/rooms?id=h1&building=A: the round was read (not "loading") and A101
 * has its holder counted. */
static int rooms_ready(json_t *doc, const void *unused)
{
    json_t *a101 = find_by(json_object_get(doc, "rooms"), "room", "A101");
    return !json_object_get(doc, "loading") && a101 && itest_jint(a101, "taken") == 2;
}

/* /api/room?id=h1&room=A101: its two holders. */
static int room_ready(json_t *doc, const void *unused)
{
    return json_array_size(json_object_get(json_object_get(doc, "room"), "holders")) == 2;
}

/* /api/round?id=h1: groups, the revealed seed and the draw's replay,
 * slots, the swap offer. */
static int round_ready(json_t *doc, const void *unused)
{
    json_t *g = json_object_get(doc, "groups"), *sw = json_object_get(doc, "swaps");
    json_t *l = json_object_get(doc, "lottery");
    return !json_object_get(doc, "loading") && itest_jint(g, "total") == 1 && itest_jint(g, "invited") == 1 &&
           itest_jint(sw, "total") == 1 && json_is_true(json_object_get(l, "commit_matches_seed")) &&
           !strcmp(itest_jstr(json_object_get(l, "verify"), "state") ?: "", "match") &&
           itest_jint(json_object_get(doc, "slots"), "users") == 4;
}

/* /api/round?id=h2: the draw's replay, over pages of the pool and of the
 * results, found the tampered result. */
static int mismatch_ready(json_t *doc, const void *unused)
{
    json_t *v = json_object_get(json_object_get(doc, "lottery"), "verify");
    return !strcmp(itest_jstr(v, "state") ?: "", "mismatch") && itest_jint(v, "differences") == 1 &&
           itest_jint(v, "pool") == 2101 && strstr(itest_jstr(v, "first") ?: "", "e2: result says draw 99999, the replay ");
}

/* /api/batch?id=h1: the 64 KB dead entry, cut. */
static int dead_cut_ready(json_t *doc, const void *unused)
{
    json_t *e = json_array_get(json_object_get(doc, "dead_recent"), 0);
    return e && json_is_true(json_object_get(e, "raw_cut")) && itest_jint(e, "raw_bytes") == 65536 &&
           strlen(itest_jstr(e, "raw")) <= 300;
}

/* Three results of h1, each awaited (they are decided in order). */
static void push_wait(itest *t, const char *id, const char *body)
{
    itest_push(t, "h1", "{\"id\":\"%s\",%s}", id, body);
    json_decref(itest_result(t, "h1", id));
}

/* A housing round as the office sees it: rooms by building and floor with
 * their rules, a room's holders, a group with a pending invitation, the
 * lottery's seed checked against its commitment, slots, a swap offer, a
 * 64 KB dead entry shortened. Each view in chromium, with a screenshot. */
static void test_round_in_chromium(void **state)
{
    itest *t = *state;
    assert_int_equal(itest_sh("command -v chromium >/dev/null"), 0);
    redisContext *c = t->c;
    int64_t now = harness_now_ms();
    itest_cmd(c, "HSET alloc:{h1}:meta kind room early shuffle hold_ms 3600000 opens_at %lld", (long long)(now + 4000));
    itest_cmd(c, "HSET alloc:{h1}:capacity A101 2 A102 2 A201 3 B101 1 B102 2");
    itest_cmd(c, "HSET alloc:{h1}:attrs A101 %s A102 %s A201 %s B101 %s B102 %s",
              "{\"building\":\"A\",\"floor\":1,\"only_gender\":\"F\",\"same_year\":true}",
              "{\"building\":\"A\",\"floor\":1,\"only_llc\":[\"stem\",\"arts\"]}",
              "{\"building\":\"A\",\"floor\":2,\"view\":\"lake\"}",
              "{\"building\":\"B\",\"floor\":1}", "{\"building\":\"B\",\"floor\":1}");
    itest_cmd(c, "HSET alloc:{h1}:profiles u1 %s u2 %s", "{\"gender\":\"F\",\"year\":2}", "{\"gender\":\"F\",\"year\":2}");
    itest_cmd(c, "HSET alloc:{h1}:slots s1 %lld s2 %lld s3 %lld s4 %lld", (long long)(now - 60000),
              (long long)(now + 180000), (long long)(now + 180000), (long long)(now + 7200000));
    itest_cmd(c, "SADD alloc:batches h1");
    /* h2: a lottery whose one drawn result is altered by hand, in a pool
     * of more than a page (2,000) of entries and of results */
    /* 4 s: the start and the 2,101 early requests taken before it, under ASan too */
    itest_cmd(c, "HSET alloc:{h2}:meta kind room early shuffle opens_at %lld", (long long)(now + 4000));
    itest_cmd(c, "HSET alloc:{h2}:capacity C1 1");
    enum { H2_POOL = 2100 };
    for (int i = 0; i < H2_POOL; i++)
        redisAppendCommand(c, "RPUSH alloc:{h2}:queue {\"id\":\"p%d\",\"user\":\"v%d\",\"op\":\"choose\",\"room\":\"C1\"}",
                           i, i);
    for (int i = 0; i < H2_POOL; i++) {
        redisReply *pr = NULL;
        assert_int_equal(redisGetReply(c, (void **)&pr), REDIS_OK);
        freeReplyObject(pr);
    }
    itest_cmd(c, "SADD alloc:batches h2");
    int port = itest_free_port();
    char conf[200];
    snprintf(conf, sizeof conf, "metrics_listen = \"127.0.0.1:%d\"; metrics_token = \"" TOKEN "\";", port);
    itest_start(t, conf);
    /* an early request: kept for the draw, which reveals the seed */
    itest_push(t, "h1", "{\"id\":\"e1\",\"user\":\"u9\",\"op\":\"choose\",\"room\":\"B101\"}");
    itest_push(t, "h2", "{\"id\":\"e2\",\"user\":\"u9\",\"op\":\"choose\",\"room\":\"C1\"}");
    json_decref(itest_result(t, "h1", "e1"));
    json_decref(itest_result(t, "h2", "e2"));
    char *res2 = harness_str(c, "HGET alloc:{h2}:results e2");
    char *d = res2 ? strstr(res2, "\"draw\":") : NULL;
    assert_non_null(d);
    char *tampered = malloc(strlen(res2) + 8);
    assert_non_null(tampered);
    snprintf(tampered, strlen(res2) + 8, "%.*s\"draw\":99999%s", (int)(d - res2), res2, strpbrk(d + 7, ",}"));
    itest_cmd(c, "HSET alloc:{h2}:results e2 %s", tampered);
    free(tampered);
    free(res2);
    push_wait(t, "i1", "\"user\":\"u1\",\"op\":\"invite\",\"to\":[\"u2\",\"u3\"]");
    push_wait(t, "a1", "\"user\":\"u2\",\"op\":\"accept\",\"from\":\"u1\"");
    push_wait(t, "p1", "\"user\":\"u1\",\"op\":\"prefs\",\"prefs\":[\"A101\",\"A102\"],\"version\":0");
    push_wait(t, "g1", "\"user\":\"u1\",\"op\":\"group\"");
    push_wait(t, "c5", "\"user\":\"u5\",\"op\":\"choose\",\"room\":\"A201\"");
    push_wait(t, "c6", "\"user\":\"u6\",\"op\":\"choose\",\"room\":\"B102\"");
    push_wait(t, "w5", "\"user\":\"u5\",\"op\":\"swap\",\"with\":\"u6\"");
    char *big = malloc(65537);
    memset(big, 'x', 65536);
    big[0] = '{';
    big[65536] = '\0';
    redisReply *r = redisCommand(c, "RPUSH alloc:{h1}:queue %s", big);
    freeReplyObject(r);
    free(big);
    /* each view's parts of the round are read from the tick after they
     * are first asked for, and forgotten a minute after the last ask: the
     * browser starts on a view once its API serves what it is checked for */
    wait_api(port, "/api/rooms?id=h1&building=A", rooms_ready, NULL);

    /* one page: the buildings, building A's rooms, room A101 opened */
    wait_api(port, "/api/room?id=h1&room=A101", room_ready, NULL);
    char *dom = browse(t, port, "#/rooms/h1/A?room=A101&token=" TOKEN, "dashboard-rooms.png");
    assert_non_null(strstr(dom, "<tr data-building=\"A\""));
    assert_non_null(strstr(dom, "<tr data-building=\"B\""));
    assert_non_null(strstr(dom, "floor 2: 2 free"));         /* A201: 3 beds, u5 */
    assert_non_null(strstr(dom, "10 beds: <b>5 taken</b>, <b>5 free</b>"));
    assert_non_null(strstr(dom, "<tr data-room=\"A101\""));
    assert_non_null(strstr(dom, "only gender = F"));
    assert_non_null(strstr(dom, "same year"));
    assert_non_null(strstr(dom, "only llc = stem or arts"));
    const char *panel = strstr(dom, "id=\"room-panel\"");
    assert_non_null(panel);
    assert_non_null(strstr(panel, "<tr data-holder=\"u1\">"));
    assert_non_null(strstr(panel, "<tr data-holder=\"u2\">"));
    assert_non_null(strstr(panel, "ago)"));                  /* since: a readable time */
    const char *held = strstr(panel, "held until");          /* hold_ms: a deposit to pay */
    assert_non_null(held);
    assert_non_null(strstr(held, "min)"));                   /* an hour from the grant */
    free(dom);
    wait_api(port, "/api/round?id=h1", round_ready, NULL);
    dom = browse(t, port, "#/round/h1?token=" TOKEN, "dashboard-round.png");
    assert_non_null(strstr(dom, "<tr data-group=\""));
    assert_non_null(strstr(dom, "u1, u2</td>"));             /* members */
    assert_non_null(strstr(dom, ">u3</td>"));                /* invited, pending */
    assert_non_null(strstr(dom, "A101, A102"));              /* shared prefs */
    assert_non_null(strstr(dom, "equals the commitment"));
    assert_non_null(strstr(dom, "allocctl lottery verify h1"));
    /* the dashboard's own replay of the draw: e1 was the pool */
    const char *verify = strstr(dom, "id=\"lottery-verify\"");
    assert_non_null(verify);
    assert_non_null(strstr(verify, "MATCH: the 1 served of 1 pool requests follow the replayed draw"));
    assert_non_null(strstr(dom, "users with a slot"));
    const char *next = strstr(dom, "<table id=\"next-slots\">");  /* s2, s3 in 3 min, s4 in 2 h */
    assert_non_null(next);
    assert_non_null(strstr(next, "(in "));
    assert_non_null(strstr(dom, "<td class=\"mono\">u6</td>"));  /* the swap offer */
    free(dom);
    wait_api(port, "/api/round?id=h2", mismatch_ready, NULL);
    dom = browse(t, port, "#/round/h2?token=" TOKEN, "dashboard-lottery-mismatch.png");
    verify = strstr(dom, "id=\"lottery-verify\"");
    assert_non_null(verify);
    assert_non_null(strstr(verify, "MISMATCH: 1 difference; the first: e2: result says draw 99999, the replay "));
    free(dom);
    wait_api(port, "/api/batch?id=h1", dead_cut_ready, NULL);
    dom = browse_sized(t, port, "#/batch/h1?token=" TOKEN, "dashboard-dead.png", 1300);
    assert_non_null(strstr(dom, "show all 65,536 bytes"));
    char run[302];                             /* no more than 300 bytes of it */
    memset(run, 'x', 301);
    run[301] = '\0';
    assert_null(strstr(dom, run));
    assert_non_null(strstr(dom, run + 2));
    assert_non_null(strstr(dom, "id=\"instance-figures\""));
    assert_non_null(strstr(dom, "<time datetime="));
    free(dom);
    char *whole = itest_http_get_with(port, "/api/dead?id=h1&index=0", AUTH);
    assert_non_null(whole);
    assert_true(strlen(whole) > 65536);
    free(whole);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_dashboard_in_chromium),
        ITEST_CASE(test_round_in_chromium),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
