/* test_daemon_ops.c -- what an operator meets when allocd's surroundings
 * are wrong or change (issue 36): a metrics port already taken stops the
 * start (it used to log an ERROR and run on without metrics), SIGHUP
 * applies a changed metrics_listen (it used to say "reloaded" and keep the
 * old port), and a Redis socket that is not there is named again every
 * 10 s until it appears (it used to be logged once). And the heap reserve
 * (base/heap_reserve.h): touched at start, kept through a batch's load,
 * changed only by a restart. Real allocd, real redis-server, loopback
 * sockets only. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"

/* A socket listening on 127.0.0.1:port (the "other process"). */
static int hold_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

static void wait_for_log(const harness_allocd *d, const char *needle, int ms)
{
    if (itest_wait_log(d, needle, 1, ms) == 0) {
        harness_allocd_dump_log(d);
        fail_msg("allocd never logged '%s'", needle);
    }
}

static void test_metrics_port_taken_refuses_start(void **state)
{
    itest *t = *state;
    int port = itest_free_port(), fd = hold_port(port);
    char conf[100];
    snprintf(conf, sizeof conf, "metrics_listen = \"127.0.0.1:%d\";", port);
    itest_start(t, conf);
    wait_for_log(&t->allocd, "not starting: metrics_listen names a port", 5000);
    assert_true(itest_count_in_log(&t->allocd, "cannot listen on metrics_listen") == 1);
    assert_int_equal(itest_count_in_log(&t->allocd, "started: instance"), 0);
    assert_int_equal(harness_allocd_stop(&t->allocd), 1);   /* it had exited 1 */
    close(fd);
}

/* Rewrites d's config with `name = value;` (libconfig refuses a setting
 * given twice, so the line is replaced, not added). */
static void set_setting(const harness_allocd *d, const char *name, const char *value)
{
    char text[4096], line[512];
    size_t n = 0, len = strlen(name);
    FILE *f = fopen(d->conf, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, len) || line[len] != ' ')
            n += (size_t)snprintf(text + n, sizeof text - n, "%s", line);
    fclose(f);
    assert_true(n < sizeof text - 100);
    snprintf(text + n, sizeof text - n, "%s = %s;\n", name, value);
    f = fopen(d->conf, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void set_metrics_port(const harness_allocd *d, int port)
{
    char value[64];
    snprintf(value, sizeof value, "\"127.0.0.1:%d\"", port);
    set_setting(d, "metrics_listen", value);
}

static void test_sighup_moves_metrics(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "m1", "kind stock", "a 5", NULL);
    int a = itest_start_metrics(t, "m1"), b = itest_free_port();
    while (b == a) b = itest_free_port();
    char *got = itest_http_get(a, "/metrics");
    assert_non_null(got);
    free(got);
    set_metrics_port(&t->allocd, b);
    kill(t->allocd.pid, SIGHUP);
    wait_for_log(&t->allocd, "SIGHUP: metrics: GET http://127.0.0.1:", 5000);
    got = itest_http_get(b, "/metrics");
    assert_non_null(got);
    assert_non_null(strstr(got, "allocd_info"));
    free(got);
    got = itest_http_get(a, "/metrics");
    assert_null(got);
    /* back to the first port: the same code path, and the old socket is free */
    set_metrics_port(&t->allocd, a);
    kill(t->allocd.pid, SIGHUP);
    for (int i = 0; i < 100 && !(got = itest_http_get(a, "/metrics")); i++) harness_sleep_ms(50);
    assert_non_null(got);
    free(got);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

static void test_missing_redis_socket_reminded(void **state)
{
    itest *t = *state;
    char conf[600];
    snprintf(conf, sizeof conf, "redis = \"unix://%s/not-there.sock\";", t->redis.dir);
    itest_start(t, conf);
    wait_for_log(&t->allocd, "cannot connect to unix:", 3000);
    wait_for_log(&t->allocd, "redis: still not connected to unix:", 13000);
    assert_true(itest_count_in_log(&t->allocd, "not-there.sock after 10 s; retrying") == 1);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* The page faults allocd takes while it serves n buys of new users in
 * batch b after r1 (pipelined pushes, then until every one is processed):
 * the heap's growth, which the reserve is there to have made already. */
#define SERVED 20000
static long long faults_serving(itest *t, const char *b)
{
    unsigned long long f0, f1, ticks;
    assert_int_equal(proc_stat_usage(t->allocd.pid, &f0, &ticks), 0);
    for (int i = 0; i < SERVED; i++)
        redisAppendCommand(t->c, "RPUSH alloc:{%s}:queue {\"id\":\"s%d\",\"user\":\"v%d\",\"op\":\"buy\","
                           "\"item\":\"sku1\"}", b, i, i);
    for (int i = 0; i < SERVED; i++) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(t->c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    for (int i = 0; i < 400 && proc_int(t->c, "HGET alloc:{%s}:stats processed", b) < SERVED + 1; i++)
        harness_sleep_ms(50);
    assert_int_equal(proc_int(t->c, "HGET alloc:{%s}:stats processed", b), SERVED + 1);
    assert_int_equal(proc_stat_usage(t->allocd.pid, &f1, &ticks), 0);
    printf("allocd's page faults while serving %d requests: %llu\n", SERVED, f1 - f0);
    return (long long)(f1 - f0);
}

/* The reserve is resident once allocd says so, is still there after a
 * batch's load gave back what it parsed, serving grows into it without
 * page faults (840 without it, 1 with it, on the development VM), and a
 * new size waits for a restart (SIGHUP says so instead of half-applying
 * it). */
static void test_heap_reserve_touched_and_kept(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "h1", "kind stock per_user 1", "sku1 30000", NULL);
    itest_start(t, "heap_reserve_mb = 32;");
    wait_for_log(&t->allocd, "heap: ", 5000);
    if (itest_count_in_log(&t->allocd, "heap: heap_reserve_mb is not used under AddressSanitizer") == 1) {
        printf("allocd is an ASan build: no reserve (its allocator)\n");
    } else {
        assert_int_equal(itest_count_in_log(&t->allocd, "heap: 32 MB reserved and touched in "), 1);
        assert_true(proc_status_kb(t->allocd.pid, "VmRSS") >= 32 * 1024);
        itest_push(t, "h1", "{\"id\":\"r1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\"}");
        itest_expect(t, "h1", "r1", "granted", "sku1");
        wait_for_log(&t->allocd, "batch h1: loaded", 5000);
        long kb = proc_status_kb(t->allocd.pid, "VmRSS");
        printf("VmRSS after the load: %ld kB\n", kb);
        assert_true(kb >= 32 * 1024);
        assert_true(faults_serving(t, "h1") < 100);
    }
    set_setting(&t->allocd, "heap_reserve_mb", "48");
    kill(t->allocd.pid, SIGHUP);
    wait_for_log(&t->allocd, "heap_reserve_mb take effect at the next restart", 5000);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* heap_reserve_mb = 0: nothing touched, nothing said, and serving takes
 * page faults (the measure above sees them). */
static void test_heap_reserve_off(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "h0", "kind stock per_user 1", "sku1 30000", NULL);
    itest_start(t, "heap_reserve_mb = 0;");
    itest_push(t, "h0", "{\"id\":\"r1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\"}");
    itest_expect(t, "h0", "r1", "granted", "sku1");
    assert_int_equal(itest_count_in_log(&t->allocd, "heap: "), 0);
    long kb = proc_status_kb(t->allocd.pid, "VmRSS");
    printf("VmRSS without a reserve: %ld kB\n", kb);
    assert_true(kb > 0 && kb < 32 * 1024);
    long long faults = faults_serving(t, "h0");
    if (!proc_is_asan(t->allocd.pid)) assert_true(faults > 200);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_metrics_port_taken_refuses_start),
        ITEST_CASE(test_sighup_moves_metrics),
        ITEST_CASE(test_missing_redis_socket_reminded),
        ITEST_CASE(test_heap_reserve_touched_and_kept),
        ITEST_CASE(test_heap_reserve_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
