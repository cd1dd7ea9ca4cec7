/* test_metrics.c -- the Prometheus endpoint of a real allocd: counters by
 * status and reason, histograms, process gauges, 404 for other paths, and
 * the latency percentiles published in P:{B}:stats for dashboards. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"

/* The value of the sample line "SERIES VALUE". */
static double metric(const char *text, const char *series)
{
    char needle[300];
    snprintf(needle, sizeof needle, "\n%s ", series);
    const char *p = strstr(text, needle);
    if (!p) return -1;
    return atof(p + strlen(needle));
}

/* A private Redis with one stock batch, and allocd serving /metrics on a
 * free port with `conf` (printf: %d is the port) added; returns the port. */
static int start_metrics(harness_redis *redis, redisContext **c, harness_allocd *d, const char *batch,
                         const char *capacity, const char *conf)
{
    assert_int_equal(harness_redis_start(redis, NULL), 0);
    *c = harness_redis_connect(redis);
    itest_batch(*c, batch, "kind stock per_user 1", capacity, NULL);
    int port = itest_free_port();
    char text[160];
    snprintf(text, sizeof text, conf, port);
    assert_int_equal(harness_allocd_start(d, redis, text), 0);
    return port;
}

/* The whole /metrics response (malloc'd), retried while the listener starts. */
static char *scrape(int port)
{
    char *text = NULL;
    for (int i = 0; i < 50 && !text; i++) { text = itest_http_get(port, "/metrics"); if (!text) harness_sleep_ms(50); }
    assert_non_null(text);
    return text;
}

static void test_metrics_endpoint(void **state)
{
    harness_redis redis;
    redisContext *c;
    harness_allocd d;
    /* an instance name with a quote and a backslash must not break the
     * scrape: label values are escaped per the exposition format */
    int port = start_metrics(&redis, &c, &d, "m1", "sku 3",
                             "metrics_listen = \"127.0.0.1:%d\"; instance = \"web\\\"1\\\\x\";");
    redisReply *r;
    for (int i = 0; i < 10; i++) {
        r = redisCommand(c, "RPUSH alloc:{m1}:queue {\"id\":\"r%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku\"}", i, i % 4);
        freeReplyObject(r);
    }
    r = redisCommand(c, "RPUSH alloc:{m1}:queue garbage");
    freeReplyObject(r);
    assert_int_equal(harness_wait_hlen(c, "alloc:{m1}:results", 10, 10000), 10);
    harness_sleep_ms(200);

    char *text = scrape(port);
    assert_non_null(strstr(text, "HTTP/1.1 200 OK"));
    assert_non_null(strstr(text, "text/plain; version=0.0.4"));
    assert_true(metric(text, "allocd_results_total{batch=\"m1\",status=\"granted\"}") == 3);
    /* u0..u3 buy once each: 3 granted, the 4th user sold out; repeats of u0..u2 hit the limit
     * or sold_out: every rejected request is counted by its reason */
    double sold = metric(text, "allocd_rejects_total{batch=\"m1\",reason=\"sold_out\"}");
    double limit = metric(text, "allocd_rejects_total{batch=\"m1\",reason=\"limit\"}");
    assert_true(sold + limit == 7);
    assert_true(metric(text, "allocd_dead_total{batch=\"m1\"}") == 1);
    assert_true(metric(text, "allocd_batches") == 1);
    assert_true(metric(text, "allocd_redis_up") == 1);
    assert_true(metric(text, "allocd_loop_idle_seconds_total") > 0);
    assert_non_null(strstr(text, "allocd_chunk_latency_seconds_bucket{batch=\"m1\",le=\"+Inf\"}"));
    assert_non_null(strstr(text, "# TYPE allocd_apply_seconds histogram"));
    assert_non_null(strstr(text, "allocd_info{version=\""));
    assert_non_null(strstr(text, ",instance=\"web\\\"1\\\\x\"} 1\n"));
    free(text);
    text = itest_http_get(port, "/nope");
    assert_non_null(text);
    assert_non_null(strstr(text, "404"));
    free(text);

    /* stats carry the latency of earlier chunks: one more chunk publishes it */
    r = redisCommand(c, "RPUSH alloc:{m1}:queue {\"id\":\"late\",\"user\":\"u9\",\"op\":\"buy\",\"item\":\"sku\"}");
    freeReplyObject(r);
    assert_int_equal(harness_wait_hlen(c, "alloc:{m1}:results", 11, 10000), 11);
    long long p99 = proc_int(c, "HGET alloc:{m1}:stats decision_p99_us");
    assert_true(p99 > 0);
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* allocd_chunks_total of batch a1, scraped. */
static double chunks_applied(int port)
{
    char *text = scrape(port);
    double v = metric(text, "allocd_chunks_total{batch=\"a1\"}");
    free(text);
    assert_true(v >= 0);
    return v;
}

/* n buys queued while the batch is paused, then served after a resume;
 * returns the chunks their serving took (the resume's own included). */
static double serve_backlog(redisContext *c, int port, int n, int *next_id, int *next_ctl)
{
    char id[16], user[24];
    snprintf(id, sizeof id, "c%d", (*next_ctl)++);
    redisReply *r = redisCommand(c, "RPUSH alloc:{a1}:ctl {\"id\":\"%s\",\"op\":\"pause\"}", id);
    freeReplyObject(r);
    free(harness_wait_hget(c, "alloc:{a1}:results", id, 10000));
    harness_sleep_ms(100);
    double before = chunks_applied(port);
    for (int i = 0; i < n; i++, (*next_id)++) {
        snprintf(user, sizeof user, "u%d", *next_id);
        r = redisCommand(c, "RPUSH alloc:{a1}:queue {\"id\":\"r%d\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"sku\"}",
                         *next_id, user);
        freeReplyObject(r);
    }
    snprintf(id, sizeof id, "c%d", (*next_ctl)++);
    r = redisCommand(c, "RPUSH alloc:{a1}:ctl {\"id\":\"%s\",\"op\":\"resume\"}", id);
    freeReplyObject(r);
    long long want = *next_id + *next_ctl;
    assert_int_equal(harness_wait_hlen(c, "alloc:{a1}:results", want, 20000), want);
    harness_sleep_ms(100);
    return chunks_applied(port) - before;
}

/* Takes adapt to the backlog (batch_worker.c, take_size): with chunk 512,
 * 1,000 queued requests (under 4 x chunk) are taken at most 128 at a time,
 * so their serving takes at least 8 chunks, not 2; 3,000 (over 4 x chunk)
 * are taken a whole chunk at a time, about 6 chunks, not 24. */
static void test_takes_adapt_to_the_backlog(void **state)
{
    harness_redis redis;
    redisContext *c;
    harness_allocd d;
    int port = start_metrics(&redis, &c, &d, "a1", "sku 100000", "metrics_listen = \"127.0.0.1:%d\"; chunk = 512;");
    int next_id = 0, next_ctl = 0;
    double short_queue = serve_backlog(c, port, 1000, &next_id, &next_ctl);
    double burst = serve_backlog(c, port, 3000, &next_id, &next_ctl);
    printf("chunks: 1000 queued -> %.0f, 3000 queued -> %.0f (resume included)\n", short_queue, burst);
    assert_true(short_queue >= 1 + 8);
    assert_true(burst <= 1 + 11);
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* Results decided from a waitlist are results too: allocd_results_total
 * counts the final result that replaces a `waiting` one, so its granted
 * series equals stats.granted (a sale whose
 * waitlist served 455 once showed 271 granted where stats said 541). */
static void test_results_count_waitlist_grants(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "w1", "kind stock per_user 1", "sku 2", NULL);
    int port = itest_start_metrics(t, "w1");
    itest_push(t, "w1", "{\"id\":\"b1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku\"}");
    itest_push(t, "w1", "{\"id\":\"b2\",\"user\":\"u2\",\"op\":\"buy\",\"item\":\"sku\"}");
    itest_push(t, "w1", "{\"id\":\"b3\",\"user\":\"u3\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    itest_push(t, "w1", "{\"id\":\"b4\",\"user\":\"u4\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    itest_expect(t, "w1", "b4", "waiting", NULL);
    json_t *b1 = itest_result(t, "w1", "b1"), *b2 = itest_result(t, "w1", "b2");
    itest_push(t, "w1", "{\"id\":\"x1\",\"user\":\"u1\",\"op\":\"cancel\",\"order\":\"%s\"}", itest_jstr(b1, "order"));
    itest_push(t, "w1", "{\"id\":\"x2\",\"user\":\"u2\",\"op\":\"cancel\",\"order\":\"%s\"}", itest_jstr(b2, "order"));
    json_decref(b1);
    json_decref(b2);
    itest_expect(t, "w1", "x2", "done", NULL);
    itest_expect(t, "w1", "b3", "granted", NULL);
    itest_expect(t, "w1", "b4", "granted", NULL);
    assert_int_equal(proc_int(t->c, "HGET alloc:{w1}:stats granted"), 4);
    /* and a place the close ends: rejected, counted by its reason */
    itest_push(t, "w1", "{\"id\":\"b5\",\"user\":\"u5\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    itest_expect(t, "w1", "b5", "waiting", NULL);
    itest_cmd(t->c, "RPUSH alloc:{w1}:ctl {\"id\":\"k1\",\"op\":\"close\"}");
    json_decref(itest_result(t, "w1", "k1"));           /* the close ends the place in its step */
    itest_expect(t, "w1", "b5", "rejected", "sold_out");
    assert_int_equal(proc_int(t->c, "HGET alloc:{w1}:stats rejected"), 1);
    harness_sleep_ms(200);
    char *text = scrape(port);
    assert_true(metric(text, "allocd_results_total{batch=\"w1\",status=\"granted\"}") == 4);
    assert_true(metric(text, "allocd_results_total{batch=\"w1\",status=\"rejected\"}") == 1);
    assert_true(metric(text, "allocd_rejects_total{batch=\"w1\",reason=\"sold_out\"}") == 1);
    assert_true(metric(text, "allocd_results_total{batch=\"w1\",status=\"done\"}") == 3);   /* 2 cancels, the close */
    free(text);
    /* the dashboard's "results (this instance)" reads the same tallies */
    text = itest_http_get(port, "/api/batch?id=w1");
    assert_non_null(text);
    const char *body = strstr(text, "\r\n\r\n");
    assert_non_null(body);
    json_t *doc = json_loads(body + 4, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "results_by_status"), "granted")), 4);
    json_decref(doc);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_endpoint),
        cmocka_unit_test(test_takes_adapt_to_the_backlog),
        ITEST_CASE(test_results_count_waitlist_grants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
