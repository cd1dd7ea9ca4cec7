/* test_web.c -- allocd's HTTP listener (libmicrohttpd on the loop) against
 * a real daemon and Redis: slow clients are capped and timed out, label
 * values from the command line are escaped (the whole scrape parses, by
 * promtool, which make deps installs), the bearer token is required beyond loopback
 * and checked, and the operator's series (oldest queued age, free,
 * capacity, state, process) are there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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

static double metric(const char *text, const char *series)
{
    char needle[300];
    snprintf(needle, sizeof needle, "\n%s ", series);
    const char *p = strstr(text, needle);
    return p ? atof(p + strlen(needle)) : -1;
}

static char *scrape(int port, const char *headers)
{
    char *text = NULL;
    for (int i = 0; i < 100 && !text; i++) {
        text = itest_http_get_with(port, "/metrics", headers);
        if (text && !*text) { free(text); text = NULL; }
        if (!text) harness_sleep_ms(50);
    }
    return text;
}

/* A connection that sends half a request and never the rest. The connect
 * does not wait: past the server's cap clients sit in the listen backlog. */
static int open_slow(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS) { close(fd); return -1; }
    static const char part[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    if (write(fd, part, sizeof part - 1) < 0 && errno != EAGAIN && errno != ENOTCONN) { close(fd); return -1; }
    return fd;
}

/* Closed by the server: EOF or a reset, not "nothing yet". */
static int closed_by_peer(int fd)
{
    char b[256];
    ssize_t n = read(fd, b, sizeof b);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN);
}

static int open_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

#define SLOW 300
#define CAP  32

/* 300 clients that open a connection and never finish their request: the
 * daemon never holds more than the cap (the rest wait in the backlog), the
 * ones it holds are closed after metrics_timeout_ms, and once the clients
 * are gone the endpoint answers again. The hand-written server accepted
 * all 300 and kept them open. */
static void test_slow_connections_capped_and_timed_out(void **state)
{
    itest *t = *state;
    int port = itest_free_port();
    char conf[200];
    snprintf(conf, sizeof conf, "metrics_listen = \"127.0.0.1:%d\"; metrics_max_connections = %d; "
             "metrics_timeout_ms = 1000;", port, CAP);
    itest_start(t, conf);
    char *text = scrape(port, "");
    assert_non_null(text);
    free(text);
    harness_sleep_ms(300);
    int base = open_fds(t->allocd.pid);
    assert_true(base > 0);
    int fds[SLOW];
    for (int i = 0; i < SLOW; i++) fds[i] = open_slow(port);
    int most = 0, closed = 0;
    int64_t end = harness_now_ms() + 3000;
    while (harness_now_ms() < end) {
        int n = open_fds(t->allocd.pid);
        if (n > most) most = n;
        for (int i = 0; i < SLOW; i++)
            if (fds[i] >= 0 && closed_by_peer(fds[i])) { close(fds[i]); fds[i] = -1; closed++; }
        harness_sleep_ms(100);
    }
    fprintf(stderr, "fds: %d before, at most %d during; %d slow clients closed by the server in 3 s\n",
            base, most, closed);
    assert_true(most <= base + CAP + 2);
    assert_true(closed >= CAP);          /* idle ones are timed out */
    for (int i = 0; i < SLOW; i++) if (fds[i] >= 0) close(fds[i]);
    text = scrape(port, "");
    assert_non_null(text);
    assert_non_null(strstr(text, "HTTP/1.1 200 OK"));
    free(text);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

static int promtool_ok(const char *text)
{
    if (itest_sh("command -v promtool >/dev/null 2>&1") != 0)
        fail_msg("promtool not found (make deps installs prometheus): the exposition format is not checked");
    char path[] = "/tmp/allocd-scrape-XXXXXX";
    int fd = mkstemp(path);
    const char *body = strstr(text, "\r\n\r\n");
    body = body ? body + 4 : text;
    assert_true(write(fd, body, strlen(body)) == (ssize_t)strlen(body));
    close(fd);
    /* check metrics exits 1 for lint advice too; a parse error says "error while linting" */
    int rc = itest_sh("promtool check metrics < %s 2>&1 | grep -q 'error while linting'", path);
    unlink(path);
    return rc != 0;
}

/* allocd with the metrics listener on port, started through a shell with
 * a soft limit of 64 open files (allocd raises it to the hard limit) and
 * an --instance name that needs escaping. Returns its pid. */
static pid_t start_escaped_instance(itest *t, int port)
{
    char conf[300], log[300];
    snprintf(conf, sizeof conf, "%s/web.conf", t->redis.dir);
    snprintf(log, sizeof log, "%s/web.log", t->redis.dir);
    FILE *f = fopen(conf, "w");
    fprintf(f, "redis = \"%s\"; metrics_listen = \"127.0.0.1:%d\"; registry_interval_ms = 100;\n",
            t->redis.url, port);
    fclose(f);
    /* started with a soft limit of 64 open files: allocd raises it to the hard limit */
    char *argv[] = { "/bin/sh", "-c", "ulimit -Sn 64 && exec \"$0\" \"$@\"", (char *)harness_allocd_bin(), "-c", conf,
                     "--instance", "web\"1\\x", NULL };
    pid_t pid = harness_spawn(argv, log);
    assert_true(pid > 0);
    return pid;
}

/* Pauses q1, then queues three requests there: they wait and age. */
static void pause_and_queue(redisContext *c)
{
    itest_cmd(c, "RPUSH alloc:{q1}:ctl {\"id\":\"p1\",\"op\":\"pause\"}");
    int paused = 0;
    for (int i = 0; i < 100 && !paused; i++) {
        char *st = harness_str(c, "HGET alloc:{q1}:stats state");
        paused = st && !strcmp(st, "paused");
        free(st);
        if (!paused) harness_sleep_ms(100);
    }
    assert_true(paused);   /* else the queued requests below would be served */
    for (int i = 0; i < 3; i++)
        itest_cmd(c, "RPUSH alloc:{q1}:queue {\"id\":\"r%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"a\"}", i, i);
}

/* The scrape while q1 is paused: escaped labels, the batches' gauges, the
 * process metrics, and promtool accepts the whole of it. */
static void assert_paused_scrape(const char *text)
{
    assert_non_null(strstr(text, "instance=\"web\\\"1\\\\x\"} 1\n"));
    assert_non_null(strstr(text, "allocd_instance_up{name=\"web\\\"1\\\\x\"} 1\n"));
    double age = metric(text, "allocd_batch_oldest_queued_age_seconds{batch=\"q1\"}");
    assert_true(age >= 1.5 && age <= 5);
    assert_true(metric(text, "allocd_batch_queued{batch=\"q1\"}") == 3);
    assert_true(metric(text, "allocd_batch_capacity_units{batch=\"q1\"}") == 7);
    assert_true(metric(text, "allocd_batch_free_units{batch=\"q1\"}") == 7);
    assert_true(metric(text, "allocd_batch_state{batch=\"q1\",state=\"paused\"}") == 1);
    assert_true(metric(text, "allocd_batch_state{batch=\"q1\",state=\"open\"}") == 0);
    assert_true(metric(text, "allocd_batch_waiting{batch=\"q1\"}") == 0);
    assert_true(metric(text, "allocd_batch_swap_offers{batch=\"q1\"}") == 0);
    assert_true(metric(text, "allocd_batch_waiting{batch=\"q2\"}") == 0);
    assert_true(metric(text, "allocd_batch_swap_offers{batch=\"q2\"}") == 1);
    assert_true(metric(text, "allocd_batch_served{batch=\"q1\"}") == 1);
    assert_true(metric(text, "process_open_fds") > 5);
    assert_true(metric(text, "process_resident_memory_bytes") > 1e6);
    assert_true(metric(text, "process_cpu_seconds_total") >= 0);
    assert_true(metric(text, "process_max_fds") > 64);
    assert_true(promtool_ok(text));
}

/* Resumed: served at once, the age drops to 0. */
static void assert_resumed_scrape(redisContext *c, int port)
{
    char *text;
    itest_cmd(c, "RPUSH alloc:{q1}:ctl {\"id\":\"p2\",\"op\":\"resume\"}");
    assert_int_equal(harness_wait_hlen(c, "alloc:{q1}:results", 5, 10000), 5);
    int64_t t0 = harness_now_ms();   /* the next probe sets it: polled, for a loaded machine */
    for (;;) {
        text = scrape(port, "");
        if (metric(text, "allocd_batch_oldest_queued_age_seconds{batch=\"q1\"}") == 0 ||
            harness_now_ms() - t0 > 10000) break;
        free(text);
        harness_sleep_ms(100);
    }
    assert_true(metric(text, "allocd_batch_oldest_queued_age_seconds{batch=\"q1\"}") == 0);
    assert_true(metric(text, "allocd_batch_free_units{batch=\"q1\"}") == 4);
    free(text);
}

/* --instance 'web"1' on the command line: every label value escaped, the
 * whole scrape parses; the operator's series are there. */
static void test_escaping_and_operator_series(void **state)
{
    itest *t = *state;
    redisContext *c = t->c;
    itest_batch(c, "q1", "kind stock per_user 5", "a 3 b 4", NULL);
    /* a room batch with one swap offer open: a `waiting` result that is no
     * waitlist place (contract 9.3, 9.5) */
    itest_batch(c, "q2", "kind room", "R1 1 R2 1", NULL);
    itest_cmd(c, "RPUSH alloc:{q2}:queue {\"id\":\"c1\",\"user\":\"ann\",\"op\":\"choose\",\"room\":\"R1\"} "
                 "{\"id\":\"c2\",\"user\":\"bob\",\"op\":\"choose\",\"room\":\"R2\"} "
                 "{\"id\":\"s1\",\"user\":\"ann\",\"op\":\"swap\",\"with\":\"bob\"}");
    int port = itest_free_port();
    pid_t pid = start_escaped_instance(t, port);
    itest_expect_hget(c, "alloc:{q1}:stats", "state");
    pause_and_queue(c);
    assert_int_equal(harness_wait_hlen(c, "alloc:{q2}:results", 3, 10000), 3);
    harness_sleep_ms(3200);
    char *text = scrape(port, "");
    assert_non_null(text);
    assert_paused_scrape(text);
    free(text);
    assert_resumed_scrape(c, port);
    harness_reap(pid, SIGTERM);
}

/* Beyond loopback: refused without a token (file:line), then the token is
 * required for data and checked; the static page needs none. */
static void test_token(void **state)
{
    itest *t = *state;
    int port = itest_free_port();
    char conf[300], tokfile[300];
    snprintf(conf, sizeof conf, "%s/open.conf", t->redis.dir);
    FILE *f = fopen(conf, "w");
    fprintf(f, "prefix = \"alloc\";\nmetrics_listen = \"0.0.0.0:%d\";\n", port);
    fclose(f);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "%s/allocd -c %s --check-config 2>&1 | grep -q '%s:2: metrics_listen .* is not a loopback "
             "address: set metrics_token'", harness_build_dir(), conf, conf);
    assert_int_equal(itest_sh("%s", cmd), 0);
    /* under journald ($JOURNAL_STREAM names stderr) the start-up error is
     * filed as an error: <3> */
    snprintf(cmd, sizeof cmd, "f=%s/err.txt; : > $f; JOURNAL_STREAM=$(stat -c %%d:%%i $f) %s/allocd -c %s 2>>$f; "
             "grep -q '^<3>%s:2: metrics_listen' $f", t->redis.dir, harness_build_dir(), conf, conf);
    assert_int_equal(itest_sh("%s", cmd), 0);
    /* a short token is refused too */
    f = fopen(conf, "w");
    fprintf(f, "metrics_listen = \"0.0.0.0:%d\";\nmetrics_token = \"short\";\n", port);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/allocd -c %s --check-config 2>&1 | grep -q '%s:2: metrics_token must be at least 16'",
             harness_build_dir(), conf, conf);
    assert_int_equal(itest_sh("%s", cmd), 0);

    snprintf(tokfile, sizeof tokfile, "%s/token", t->redis.dir);
    f = fopen(tokfile, "w");
    fprintf(f, "s3cr3t-t0ken-0123456789\n");
    fclose(f);
    char extra[400];
    snprintf(extra, sizeof extra, "metrics_listen = \"0.0.0.0:%d\"; metrics_token_file = \"%s\";", port, tokfile);
    itest_start(t, extra);
    char *text = NULL;
    for (int i = 0; i < 100; i++) {
        text = itest_http_get(port, "/metrics");
        if (text && *text) break;
        free(text);
        text = NULL;
        harness_sleep_ms(50);
    }
    assert_non_null(text);
    assert_non_null(strstr(text, "HTTP/1.1 401"));
    assert_non_null(strstr(text, "WWW-Authenticate: Bearer"));
    assert_null(strstr(text, "allocd_info"));
    free(text);
    text = itest_http_get_with(port, "/metrics", "Authorization: Bearer s3cr3t-t0ken-012345678X\r\n");
    assert_non_null(strstr(text, "HTTP/1.1 401"));
    free(text);
    text = itest_http_get_with(port, "/api/overview", "Authorization: Bearer s3cr3t-t0ken-0123456789x\r\n");
    assert_non_null(strstr(text, "HTTP/1.1 401"));
    free(text);
    text = itest_http_get_with(port, "/metrics", "Authorization: Bearer s3cr3t-t0ken-0123456789\r\n");
    assert_non_null(strstr(text, "HTTP/1.1 200"));
    assert_non_null(strstr(text, "allocd_info"));
    free(text);
    text = itest_http_get_with(port, "/api/overview", "Authorization: bearer s3cr3t-t0ken-0123456789\r\n");
    assert_non_null(strstr(text, "HTTP/1.1 200"));
    assert_non_null(strstr(text, "\"batches\""));
    free(text);
    text = itest_http_get(port, "/");
    assert_non_null(strstr(text, "HTTP/1.1 200"));
    assert_non_null(strstr(text, "<html"));
    free(text);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* A plain Redis restarted: every connection reconnects and asks CLUSTER
 * SLOTS again; that is no reason for a warning (there was one per
 * connection per reconnect). */
static void test_no_cluster_warning_on_reconnect(void **state)
{
    itest *t = *state;
    itest_start(t, NULL);
    int before = 0;
    for (int i = 0; i < 100 && before < 2; i++) {
        before = itest_count_in_log(&t->allocd, "connected to");
        harness_sleep_ms(50);
    }
    assert_int_equal(harness_redis_restart(&t->redis), 0);
    redisFree(t->c);
    t->c = harness_redis_connect(&t->redis);
    int after = before;
    for (int i = 0; i < 200 && after < 2 * before; i++) {
        after = itest_count_in_log(&t->allocd, "connected to");
        harness_sleep_ms(50);
    }
    assert_true(after >= 2 * before);
    harness_sleep_ms(300);
    assert_int_equal(itest_count_in_log(&t->allocd, "CLUSTER SLOTS"), 0);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* Editing meta of a live batch does nothing until the batch is reloaded:
 * the instance serving it says so (it used to be silent). */
static void test_meta_edit_warned(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "m1", "kind stock per_user 1", "a 3", NULL);
    itest_start_metrics(t, "m1");                 /* the watcher has seen it */
    itest_cmd(t->c, "HSET alloc:{m1}:meta per_user 3");
    assert_true(itest_wait_log(&t->allocd, "batch m1: meta changed while it is live (per_user)", 1, 6000) > 0);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_slow_connections_capped_and_timed_out),
        ITEST_CASE(test_escaping_and_operator_series),
        ITEST_CASE(test_token),
        ITEST_CASE(test_no_cluster_warning_on_reconnect),
        ITEST_CASE(test_meta_edit_warned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
