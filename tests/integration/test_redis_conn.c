/* test_redis_conn.c -- redis_conn against a real redis-server.
 *
 * Each case drives its own libuv loop and counts every callback, because the
 * module's main promise is a counting one: exactly one reply callback per
 * accepted command, whatever happens to the connection (reply, timeout,
 * restart, close, close from inside a callback), and on_ready/on_down once
 * per change. Failures are produced for real: no server on the socket, a
 * TCP port nobody listens on, DEBUG SLEEP from a second connection, a
 * restarted or killed server, a wrong password. Nothing is mocked.
 *
 * A shared server (with DEBUG enabled) serves the cases that do not break
 * it; the others start their own. The whole file runs in about 8 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "harness.h"
#include "base/log.h"
#include "redis/redis_conn.h"

/* ---- one test's loop and counters --------------------------------------- */

typedef struct tctx {
    uv_loop_t loop;
    uv_timer_t tick;          /* keeps UV_RUN_ONCE returning every few ms */
    redis_conn *conn;
    int ready, down, closed;
    char down_why[200];
    int close_on_ready, close_on_down;
} tctx;

/* One command's callback record. */
typedef struct call {
    tctx *t;
    int calls;
    int type;                 /* reply type, -1 when err */
    char err[200];
    char str[200];
    long long integer;
    int64_t at_ms;
    int close_in_cb;
} call;

static void on_tick(uv_timer_t *h) { (void)h; }

static void on_ready(redis_conn *c, void *data)
{
    tctx *t = data;
    t->ready++;
    if (t->close_on_ready) redis_conn_close(c, NULL, NULL);
}

static void on_closed(redis_conn *c, void *data)
{
    tctx *t = data;
    t->closed++;
}

static void on_down(redis_conn *c, const char *why, void *data)
{
    tctx *t = data;
    t->down++;
    snprintf(t->down_why, sizeof t->down_why, "%s", why);
    if (t->close_on_down) redis_conn_close(c, on_closed, t);
}

static void call_cb(redis_conn *c, redisReply *r, const char *err, void *p)
{
    call *k = p;
    k->calls++;
    k->at_ms = harness_now_ms();
    if (err) {
        assert_null(r);
        k->type = -1;
        snprintf(k->err, sizeof k->err, "%s", err);
    } else {
        assert_non_null(r);
        k->type = r->type;
        k->integer = r->integer;
        if (r->str) snprintf(k->str, sizeof k->str, "%.*s", (int)r->len, r->str);
    }
    if (k->close_in_cb) redis_conn_close(c, on_closed, k->t);
}

#define RUN_UNTIL(t, cond, ms) do {                                      \
        int64_t end_ = harness_now_ms() + (ms);                          \
        while (!(cond) && harness_now_ms() < end_)                       \
            uv_run(&(t)->loop, UV_RUN_ONCE);                             \
    } while (0)

static void loop_open(tctx *t)
{
    memset(t, 0, sizeof *t);
    assert_int_equal(uv_loop_init(&t->loop), 0);
    uv_timer_init(&t->loop, &t->tick);
    uv_timer_start(&t->tick, on_tick, 5, 5);
}

static void loop_close(tctx *t)
{
    uv_close((uv_handle_t *)&t->tick, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    /* UV_EBUSY here would mean a handle of redis_conn was left open. */
    assert_int_equal(uv_loop_close(&t->loop), 0);
}

static void conn_open(tctx *t, const redis_target *target, const char *name,
                      int backoff_max_ms)
{
    redis_conn_options opt = { .name = name, .backoff_max_ms = backoff_max_ms };
    redis_conn_callbacks cb = { on_ready, on_down };
    assert_int_equal(redis_conn_init(&t->conn, &t->loop, target, &opt, &cb, t), 0);
}

/* Close, wait for close_cb, and close the loop (checks no handle is left). */
static void conn_finish(tctx *t)
{
    if (!t->closed) redis_conn_close(t->conn, on_closed, t);
    RUN_UNTIL(t, t->closed, 2000);
    assert_int_equal(t->closed, 1);
    loop_close(t);
}

static void unix_target(redis_target *tg, const harness_redis *r)
{
    char err[200];
    assert_int_equal(redis_url_parse(r->url, tg, err, sizeof err), 0);
}

static void wait_ready(tctx *t, int n, int ms)
{
    RUN_UNTIL(t, t->ready >= n, ms);
    assert_int_equal(t->ready, n);
    assert_true(redis_conn_is_ready(t->conn));
}

/* Sends a command and runs the loop until its reply. */
static void roundtrip(tctx *t, call *k, const char *fmt, const char *arg)
{
    memset(k, 0, sizeof *k);
    k->t = t;
    assert_int_equal(redis_conn_command(t->conn, call_cb, k, 0, fmt, arg), 0);
    RUN_UNTIL(t, k->calls, 3000);
    assert_int_equal(k->calls, 1);
}

static void assert_calls_once(call *ks, int n)
{
    for (int i = 0; i < n; i++) assert_int_equal(ks[i].calls, 1);
}

/* ---- the shared server --------------------------------------------------- */

static harness_redis shared;

static int group_setup(void **state)
{
    log_init(getenv("TEST_DEBUG") ? ALOG_DEBUG : ALOG_INFO, 1);
    return harness_redis_start(&shared, "--enable-debug-command yes");
}

static int group_teardown(void **state)
{
    harness_redis_stop(&shared);
    return 0;
}

/* A server of the test's own, stopped by own_teardown even when an
 * assertion fails half-way (cmocka longjmps out of the test). */
static harness_redis *own_server(void **state, const char *extra)
{
    harness_redis *r = calloc(1, sizeof *r);
    assert_non_null(r);
    *state = r;
    assert_int_equal(harness_redis_start(r, extra), 0);
    return r;
}

static int own_teardown(void **state)
{
    harness_redis *r = *state;
    if (r) harness_redis_stop(r);
    free(r);
    *state = NULL;
    return 0;
}

/* ---- cases --------------------------------------------------------------- */

static void test_connect_and_commands(void **state)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, &shared);
    conn_open(&t, &tg, "test basic", 0);
    assert_string_equal(redis_conn_name(t.conn), "test basic");

    /* Not ready yet (connecting is asynchronous): refused, no callback. */
    call early = { .t = &t };
    assert_int_equal(redis_conn_command(t.conn, call_cb, &early, 0, "PING"), -ENOTCONN);
    wait_ready(&t, 1, 2000);

    call k;
    roundtrip(&t, &k, "SET basic:k %s", "hello");
    assert_int_equal(k.type, REDIS_REPLY_STATUS);
    roundtrip(&t, &k, "GET %s", "basic:k");
    assert_string_equal(k.str, "hello");
    /* The name reached CLIENT SETNAME with its space replaced. */
    roundtrip(&t, &k, "CLIENT %s", "GETNAME");
    assert_string_equal(k.str, "test-basic");
    /* An error reply is a reply, not an err. */
    roundtrip(&t, &k, "INCR %s", "basic:k");
    assert_int_equal(k.type, REDIS_REPLY_ERROR);
    assert_string_equal(k.err, "");

    /* Binary-safe argv. */
    const char *argv[] = { "SET", "basic:bin", "a\0b" };
    const size_t lens[] = { 3, 9, 3 };
    call b = { .t = &t };
    assert_int_equal(redis_conn_commandargv(t.conn, call_cb, &b, 0, 3, argv, lens), 0);
    RUN_UNTIL(&t, b.calls, 2000);
    roundtrip(&t, &k, "STRLEN %s", "basic:bin");
    assert_int_equal(k.integer, 3);

    /* A pipeline: every reply, in order, once. */
    enum { N = 200 };
    call ks[N];
    uint64_t before = redis_conn_get_stats(t.conn)->commands;
    for (int i = 0; i < N; i++) {
        memset(&ks[i], 0, sizeof ks[i]);
        ks[i].t = &t;
        assert_int_equal(redis_conn_command(t.conn, call_cb, &ks[i], 0,
                                            "INCR %s", "basic:n"), 0);
    }
    RUN_UNTIL(&t, ks[N - 1].calls, 3000);
    assert_calls_once(ks, N);
    for (int i = 0; i < N; i++) assert_int_equal(ks[i].integer, i + 1);
    assert_int_equal(redis_conn_get_stats(t.conn)->commands - before, N);
    assert_int_equal(redis_conn_get_stats(t.conn)->connects, 1);
    assert_int_equal(early.calls, 0);
    assert_int_equal(b.calls, 1);
    assert_int_equal(t.down, 0);
    conn_finish(&t);
}

static void test_unix_no_server_then_start(void **state)
{
    harness_redis *r = own_server(state, NULL);
    harness_redis_kill(r);   /* keeps the dir, removes the socket */

    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, r);
    conn_open(&t, &tg, "nosrv", 400);
    int64_t t0 = harness_now_ms();
    RUN_UNTIL(&t, 0, 800);
    assert_true(harness_now_ms() - t0 < 1500);   /* the loop did not hang */
    assert_int_equal(t.ready, 0);
    assert_false(redis_conn_is_ready(t.conn));
    uint64_t fails = redis_conn_get_stats(t.conn)->failures;
    assert_true(fails >= 2);     /* it keeps trying ... */
    assert_true(fails <= 12);    /* ... with backoff, not in a loop */

    assert_int_equal(harness_redis_restart(r), 0);
    wait_ready(&t, 1, 3000);     /* by itself */
    call k;
    roundtrip(&t, &k, "PING%s", "");
    assert_string_equal(k.str, "PONG");
    assert_int_equal(t.down, 0);
    conn_finish(&t);
}

static int free_tcp_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_tcp_refused_then_start(void **state)
{
    int port = free_tcp_port();
    char url[64], err[200];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    redis_target tg;
    assert_int_equal(redis_url_parse(url, &tg, err, sizeof err), 0);

    tctx t;
    loop_open(&t);
    conn_open(&t, &tg, "tcp", 400);
    int64_t t0 = harness_now_ms();
    RUN_UNTIL(&t, 0, 800);
    assert_true(harness_now_ms() - t0 < 1500);
    assert_int_equal(t.ready, 0);
    uint64_t fails = redis_conn_get_stats(t.conn)->failures;
    assert_true(fails >= 2);
    assert_true(fails <= 12);

    /* The same port now gets a server (TCP as well as the harness socket). */
    char extra[80];
    snprintf(extra, sizeof extra, "--port %d --bind 127.0.0.1", port);
    own_server(state, extra);
    wait_ready(&t, 1, 3000);
    call k;
    roundtrip(&t, &k, "ECHO %s", "over-tcp");
    assert_string_equal(k.str, "over-tcp");
    conn_finish(&t);
}

/* A listener that never accepts: the kernel completes the connect from its
 * backlog, so only the connect deadline (covering AUTH/SETNAME) ends it. */
static void test_connect_timeout_silent_server(void **state)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char url[64], err[200];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
    redis_target tg;
    assert_int_equal(redis_url_parse(url, &tg, err, sizeof err), 0);

    tctx t;
    loop_open(&t);
    redis_conn_options opt = { .name = "silent", .connect_timeout_ms = 300 };
    redis_conn_callbacks cb = { on_ready, on_down };
    assert_int_equal(redis_conn_init(&t.conn, &t.loop, &tg, &opt, &cb, &t), 0);
    RUN_UNTIL(&t, 0, 200);
    assert_int_equal(redis_conn_get_stats(t.conn)->failures, 0);   /* still waiting */
    RUN_UNTIL(&t, redis_conn_get_stats(t.conn)->failures >= 1, 1000);
    assert_int_equal(redis_conn_get_stats(t.conn)->failures, 1);
    assert_int_equal(t.ready, 0);
    assert_int_equal(t.down, 0);
    conn_finish(&t);

    /* Closed while the handshake is outstanding. */
    loop_open(&t);
    assert_int_equal(redis_conn_init(&t.conn, &t.loop, &tg, &opt, &cb, &t), 0);
    RUN_UNTIL(&t, 0, 50);
    conn_finish(&t);
    assert_int_equal(t.ready, 0);
    close(fd);
}

static void test_command_timeout(void **state)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, &shared);
    conn_open(&t, &tg, "timeout", 0);
    wait_ready(&t, 1, 2000);

    /* Put the server to sleep from a second connection, without waiting. */
    redisContext *sync = harness_redis_connect(&shared);
    assert_non_null(sync);
    assert_int_equal(redisAppendCommand(sync, "DEBUG SLEEP 1"), REDIS_OK);
    int done = 0;
    while (!done) assert_int_equal(redisBufferWrite(sync, &done), REDIS_OK);
    harness_sleep_ms(50);

    call fast = { .t = &t }, slow = { .t = &t };
    int64_t t0 = harness_now_ms();
    assert_int_equal(redis_conn_command(t.conn, call_cb, &fast, 200, "PING"), 0);
    assert_int_equal(redis_conn_command(t.conn, call_cb, &slow, 0, "PING"), 0);
    RUN_UNTIL(&t, fast.calls, 2000);
    int64_t took = fast.at_ms - t0;
    assert_int_equal(fast.calls, 1);
    assert_string_equal(fast.err, "timeout");
    assert_true(took >= 190 && took < 600);
    /* The connection is condemned: the other pending command goes too,
     * before on_down. */
    assert_int_equal(slow.calls, 1);
    assert_int_equal(slow.type, -1);
    assert_int_equal(t.down, 1);

    /* It comes back once the server wakes up. */
    wait_ready(&t, 2, 3000);
    call k;
    roundtrip(&t, &k, "PING%s", "");
    assert_string_equal(k.str, "PONG");
    assert_int_equal(fast.calls, 1);
    assert_int_equal(slow.calls, 1);
    assert_int_equal(t.down, 1);

    redisReply *rep;
    assert_int_equal(redisGetReply(sync, (void **)&rep), REDIS_OK);
    freeReplyObject(rep);
    redisFree(sync);
    conn_finish(&t);
}

static void test_restart_under_live_connection(void **state)
{
    harness_redis *r = own_server(state, NULL);
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, r);
    conn_open(&t, &tg, "restart", 0);
    wait_ready(&t, 1, 2000);

    call blocked[3];
    for (int i = 0; i < 3; i++) {
        memset(&blocked[i], 0, sizeof blocked[i]);
        blocked[i].t = &t;
        assert_int_equal(redis_conn_command(t.conn, call_cb, &blocked[i], 15000,
                                            "BLPOP restart:q%d 10", i), 0);
    }
    RUN_UNTIL(&t, 0, 100);   /* let them reach the server */
    assert_int_equal(harness_redis_restart(r), 0);

    RUN_UNTIL(&t, t.down, 2000);
    assert_int_equal(t.down, 1);
    assert_calls_once(blocked, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(blocked[i].type, -1);
    wait_ready(&t, 2, 3000);
    call k;
    roundtrip(&t, &k, "PING%s", "");
    assert_string_equal(k.str, "PONG");
    assert_calls_once(blocked, 3);
    assert_int_equal(t.down, 1);
    assert_int_equal(redis_conn_get_stats(t.conn)->connects, 2);
    conn_finish(&t);
}

/* The pre-formatted EVALSHA (what the batch worker's apply uses): the
 * same NOSCRIPT fallback, built from the caller's RESP tail. */
static void test_noscript_fallback_resp(void **state)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, &shared);
    conn_open(&t, &tg, "eval-resp", 0);
    wait_ready(&t, 1, 2000);
    redis_script s;
    redis_script_init(&s, "return ARGV[1] .. ':' .. KEYS[1] .. '#' .. #ARGV");
    call k;
    char buf[REDIS_CONN_RESP_HEADROOM + 128];
    static const char tail[] = "$1\r\n1\r\n$4\r\nkey9\r\n$5\r\nhello\r\n$0\r\n\r\n";
    memcpy(buf + REDIS_CONN_RESP_HEADROOM, tail, sizeof tail - 1);
    for (int round = 0; round < 3; round++) {
        if (round != 1) roundtrip(&t, &k, "SCRIPT %s", "FLUSH");
        uint64_t before = redis_conn_get_stats(t.conn)->commands;
        call e = { .t = &t };
        assert_int_equal(redis_conn_eval_resp(t.conn, &s, call_cb, &e, 0, 4, buf,
                                              REDIS_CONN_RESP_HEADROOM, sizeof tail - 1), 0);
        RUN_UNTIL(&t, e.calls, 2000);
        assert_int_equal(e.calls, 1);
        assert_int_equal(e.type, REDIS_REPLY_STRING);
        assert_string_equal(e.str, "hello:key9#2");
        uint64_t sent = redis_conn_get_stats(t.conn)->commands - before;
        assert_int_equal(sent, round == 1 ? 1 : 2);
    }
    /* a complete pre-formatted command */
    static const char ping[] = "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n";
    call e = { .t = &t };
    assert_int_equal(redis_conn_command_resp(t.conn, call_cb, &e, 0, ping, sizeof ping - 1), 0);
    RUN_UNTIL(&t, e.calls, 2000);
    assert_string_equal(e.str, "hi");
    conn_finish(&t);
}

static void test_noscript_fallback(void **state)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, &shared);
    conn_open(&t, &tg, "eval", 0);
    wait_ready(&t, 1, 2000);

    redis_script s;
    redis_script_init(&s, "return ARGV[1] .. ':' .. KEYS[1] .. ':' .. ARGV[2]");
    call k;
    roundtrip(&t, &k, "SCRIPT %s", "FLUSH");

    const char *argv[] = { "key1", "v1", "v2" };
    for (int round = 0; round < 3; round++) {
        if (round == 2) roundtrip(&t, &k, "SCRIPT %s", "FLUSH");
        uint64_t before = redis_conn_get_stats(t.conn)->commands;
        call e = { .t = &t };
        char a1[8] = "v1", a2[8] = "v2";
        const char *av[] = { argv[0], a1, a2 };
        assert_int_equal(redis_conn_eval(t.conn, &s, call_cb, &e, 0, 1, 3, av, NULL), 0);
        /* The arguments were copied: scribbling on them changes nothing. */
        strcpy(a1, "XX");
        strcpy(a2, "YY");
        RUN_UNTIL(&t, e.calls, 2000);
        assert_int_equal(e.calls, 1);
        assert_int_equal(e.type, REDIS_REPLY_STRING);
        assert_string_equal(e.str, "v1:key1:v2");
        /* First and after-flush: EVALSHA then EVAL; cached: EVALSHA only. */
        uint64_t sent = redis_conn_get_stats(t.conn)->commands - before;
        assert_int_equal(sent, round == 1 ? 1 : 2);
    }
    /* An error in the script is a reply, not retried. */
    redis_script bad;
    redis_script_init(&bad, "return redis.call('NOSUCHCOMMAND')");
    call e = { .t = &t };
    assert_int_equal(redis_conn_eval(t.conn, &bad, call_cb, &e, 0, 0, 0, NULL, NULL), 0);
    RUN_UNTIL(&t, e.calls, 2000);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.type, REDIS_REPLY_ERROR);
    assert_int_equal(t.down, 0);
    conn_finish(&t);
}

/* The EVAL resent after NOSCRIPT misses its deadline: still one callback. */
static void test_noscript_retry_times_out(void **state)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, &shared);
    conn_open(&t, &tg, "eval-slow", 0);
    wait_ready(&t, 1, 2000);
    call k;
    roundtrip(&t, &k, "SCRIPT %s", "FLUSH");

    redis_script slow;
    redis_script_init(&slow,
        "local s = redis.call('TIME') "
        "repeat local n = redis.call('TIME') "
        "until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 500000 "
        "return 1");
    uint64_t before = redis_conn_get_stats(t.conn)->commands;
    call e = { .t = &t };
    assert_int_equal(redis_conn_eval(t.conn, &slow, call_cb, &e, 250, 0, 0, NULL, NULL), 0);
    RUN_UNTIL(&t, e.calls, 2000);
    assert_int_equal(e.calls, 1);
    assert_string_equal(e.err, "timeout");
    assert_int_equal(redis_conn_get_stats(t.conn)->commands - before, 2);
    assert_int_equal(t.down, 1);
    wait_ready(&t, 2, 3000);
    RUN_UNTIL(&t, 0, 100);
    assert_int_equal(e.calls, 1);
    conn_finish(&t);
}

/* Points fd 2 at a file while the body runs, to count log lines. */
static int capture_begin(char *path, size_t len)
{
    snprintf(path, len, "%s/redis_conn_log_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int saved = dup(2);
    dup2(fd, 2);
    close(fd);
    return saved;
}

static int capture_end(int saved, const char *path, const char *needle)
{
    log_flush();
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        fputs(line, stderr);   /* still shown */
        if (strstr(line, needle)) n++;
    }
    fclose(f);
    unlink(path);
    return n;
}

/* With TEST_DEBUG set every attempt is logged, so only "at least once". */
static void expect_logged_once(int n)
{
    if (log_get_level() >= ALOG_DEBUG) assert_true(n >= 1);
    else assert_int_equal(n, 1);
}

static void auth_case(const harness_redis *r, const char *user,
                      const char *password, int expect_ready)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, r);
    snprintf(tg.user, sizeof tg.user, "%s", user);
    snprintf(tg.password, sizeof tg.password, "%s", password);
    conn_open(&t, &tg, "auth", 200);
    if (expect_ready) {
        wait_ready(&t, 1, 2000);
        call k;
        roundtrip(&t, &k, "SET auth:k %s", "1");
        assert_int_equal(k.type, REDIS_REPLY_STATUS);
    } else {
        RUN_UNTIL(&t, 0, 800);
        assert_int_equal(t.ready, 0);
        uint64_t fails = redis_conn_get_stats(t.conn)->failures;
        assert_true(fails >= 3);    /* retried ... */
        assert_true(fails <= 16);   /* ... with backoff */
        assert_int_equal(redis_conn_get_stats(t.conn)->connects, 0);
    }
    conn_finish(&t);
}

static void test_auth(void **state)
{
    /* The harness checks a new server with PING, so the password is set
     * once it runs. */
    harness_redis *r = own_server(state, NULL);
    redisContext *admin = harness_redis_connect(r);
    assert_non_null(admin);
    char *ok = harness_str(admin, "CONFIG SET requirepass secret");
    assert_non_null(ok);
    free(ok);
    redisFree(admin);
    auth_case(r, "", "secret", 1);
    auth_case(r, "default", "secret", 1);   /* ACL form: AUTH user password */

    char path[300];
    int saved = capture_begin(path, sizeof path);
    auth_case(r, "", "wrong", 0);
    /* Logged once (the change of state); the retries only at debug level. */
    expect_logged_once(capture_end(saved, path, "WRONGPASS"));

    saved = capture_begin(path, sizeof path);
    auth_case(r, "", "", 0);                 /* no password: NOAUTH */
    expect_logged_once(capture_end(saved, path, "NOAUTH"));
}

static void test_close_with_pending(void **state)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, &shared);
    conn_open(&t, &tg, "close", 0);
    wait_ready(&t, 1, 2000);

    enum { N = 8 };
    call ks[N];
    for (int i = 0; i < N; i++) {
        memset(&ks[i], 0, sizeof ks[i]);
        ks[i].t = &t;
        int rc = i % 2 ? redis_conn_command(t.conn, call_cb, &ks[i], 0, "BLPOP close:q 5")
                       : redis_conn_command(t.conn, call_cb, &ks[i], 0, "PING");
        assert_int_equal(rc, 0);
    }
    RUN_UNTIL(&t, 0, 50);   /* on the wire: the PING before the first BLPOP is answered */
    assert_int_equal(ks[0].calls, 1);
    redis_conn_close(t.conn, on_closed, &t);
    /* Answered before close returned, with "closed". */
    assert_calls_once(ks, N);
    for (int i = 1; i < N; i++) assert_string_equal(ks[i].err, "closed");
    /* Refused after close, and nothing else runs. */
    call late = { .t = &t };
    assert_int_equal(redis_conn_command(t.conn, call_cb, &late, 0, "PING"), -ENOTCONN);
    assert_int_equal(t.closed, 0);
    RUN_UNTIL(&t, t.closed, 2000);
    assert_int_equal(t.closed, 1);
    assert_calls_once(ks, N);
    assert_int_equal(late.calls, 0);
    assert_int_equal(t.down, 0);
    loop_close(&t);
}

static void test_close_in_reply_callback(void **state)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, &shared);
    conn_open(&t, &tg, "close-cb", 0);
    wait_ready(&t, 1, 2000);

    /* Pipelined: the later replies usually sit in the same read buffer when
     * the first callback closes. */
    enum { N = 5 };
    call ks[N];
    for (int i = 0; i < N; i++) {
        memset(&ks[i], 0, sizeof ks[i]);
        ks[i].t = &t;
        assert_int_equal(redis_conn_command(t.conn, call_cb, &ks[i], 0, "PING"), 0);
    }
    ks[1].close_in_cb = 1;
    RUN_UNTIL(&t, t.closed, 2000);
    assert_int_equal(t.closed, 1);
    assert_calls_once(ks, N);
    assert_string_equal(ks[0].str, "PONG");
    assert_string_equal(ks[1].str, "PONG");
    for (int i = 2; i < N; i++) assert_string_equal(ks[i].err, "closed");
    assert_int_equal(t.down, 0);
    loop_close(&t);
}

static void test_close_in_on_ready_and_on_down(void **state)
{
    redis_target tg;
    tctx t;
    loop_open(&t);
    unix_target(&tg, &shared);
    t.close_on_ready = 1;
    conn_open(&t, &tg, "close-ready", 0);
    RUN_UNTIL(&t, t.ready, 2000);
    assert_int_equal(t.ready, 1);
    loop_close(&t);   /* close_cb NULL: the loop closing proves no handle left */

    harness_redis *r = own_server(state, NULL);
    loop_open(&t);
    unix_target(&tg, r);
    t.close_on_down = 1;
    conn_open(&t, &tg, "close-down", 0);
    wait_ready(&t, 1, 2000);
    call k = { .t = &t };
    assert_int_equal(redis_conn_command(t.conn, call_cb, &k, 0, "BLPOP down:q 10"), 0);
    RUN_UNTIL(&t, 0, 50);
    harness_redis_kill(r);
    RUN_UNTIL(&t, t.closed, 2000);
    assert_int_equal(t.down, 1);
    assert_int_equal(t.closed, 1);
    assert_int_equal(k.calls, 1);
    assert_int_equal(k.type, -1);
    loop_close(&t);
}

static void test_blpop_longer_deadline(void **state)
{
    tctx t;
    loop_open(&t);
    redis_target tg;
    unix_target(&tg, &shared);
    conn_open(&t, &tg, "blocking", 0);
    wait_ready(&t, 1, 2000);
    call k = { .t = &t };
    int64_t t0 = harness_now_ms();
    assert_int_equal(redis_conn_command(t.conn, call_cb, &k, 3000, "BLPOP blpop:empty 1"), 0);
    RUN_UNTIL(&t, k.calls, 4000);
    assert_int_equal(k.calls, 1);
    assert_int_equal(k.type, REDIS_REPLY_NIL);
    assert_true(k.at_ms - t0 >= 900);
    assert_int_equal(t.down, 0);
    assert_true(redis_conn_is_ready(t.conn));
    conn_finish(&t);
}

static void test_invalid_arguments(void **state)
{
    tctx t;
    loop_open(&t);
    redis_conn *c = NULL;
    redis_target tg;
    memset(&tg, 0, sizeof tg);
    assert_int_equal(redis_conn_init(&c, &t.loop, &tg, NULL, NULL, NULL), -EINVAL);
    assert_null(c);
    unix_target(&tg, &shared);
    conn_open(&t, &tg, NULL, 0);
    assert_string_equal(redis_conn_name(t.conn), "allocd");
    wait_ready(&t, 1, 2000);
    call k = { .t = &t };
    redis_script s;
    redis_script_init(&s, "return 1");
    assert_int_equal(redis_conn_eval(t.conn, &s, call_cb, &k, 0, 2, 1,
                                     (const char *[]){ "a" }, NULL), -EINVAL);
    assert_int_equal(redis_conn_commandargv(t.conn, call_cb, &k, 0, 0, NULL, NULL), -EINVAL);
    assert_int_equal(k.calls, 0);
    conn_finish(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect_and_commands),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test_teardown(test_unix_no_server_then_start, own_teardown),
        cmocka_unit_test_teardown(test_tcp_refused_then_start, own_teardown),
        cmocka_unit_test(test_connect_timeout_silent_server),
        cmocka_unit_test(test_command_timeout),
        cmocka_unit_test_teardown(test_restart_under_live_connection, own_teardown),
        cmocka_unit_test(test_noscript_fallback),
        cmocka_unit_test(test_noscript_fallback_resp),
        cmocka_unit_test(test_noscript_retry_times_out),
        cmocka_unit_test_teardown(test_auth, own_teardown),
        cmocka_unit_test(test_close_with_pending),
        cmocka_unit_test(test_close_in_reply_callback),
        cmocka_unit_test_teardown(test_close_in_on_ready_and_on_down, own_teardown),
        cmocka_unit_test(test_blpop_longer_deadline),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
