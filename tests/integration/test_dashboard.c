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
static char *browse(const itest *t, int port, const char *frag, const char *shot)
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
    rc = itest_sh("timeout 60 chromium %s --user-data-dir='%s/chromium' --window-size=1400,800 "
                  "--screenshot='%s/%s' '%s' >/dev/null 2>&1", flags, t->redis.dir, out_dir(), shot, url);
    assert_int_equal(rc, 0);
    char png[600];
    snprintf(png, sizeof png, "%s/%s", out_dir(), shot);
    struct stat st;
    assert_int_equal(stat(png, &st), 0);
    assert_true(st.st_size > 5000);
    fprintf(stderr, "screenshot: %s (%lld bytes)\n", png, (long long)st.st_size);
    return textfile_read(dom, NULL);
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
    json_array_foreach(json_object_get(doc, "dead_recent"), i, e) {
        json_t *entry = json_loads(json_is_string(e) ? json_string_value(e) : "", 0, NULL);
        dead |= !strcmp(itest_jstr(entry, "raw"), "not-json<b>x</b>");
        json_decref(entry);
    }
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_dashboard_in_chromium),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
