/* test_daemon.c -- allocd as a process: its command line, and Redis being
 * absent, restarted or slow while it serves. Real binaries only. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "itest.h"

/* Runs allocd with args; returns the exit status and the combined output. */
static int run_allocd(const char *args, char *out, size_t outlen)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/allocd %s 2>&1", harness_build_dir(), args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_command_line(void **state)
{
    char out[4096];
    assert_int_equal(run_allocd("--version", out, sizeof out), 0);
    assert_non_null(strstr(out, "allocd "));
    assert_int_equal(run_allocd("--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "--check-config"));
    assert_int_equal(run_allocd("--no-such-flag", out, sizeof out), 2);
    assert_non_null(strstr(out, "command line"));
    assert_int_equal(run_allocd("-c conf/allocd.conf --check-config", out, sizeof out), 0);
    assert_non_null(strstr(out, "OK"));

    char path[400];
    snprintf(path, sizeof path, "%s/allocd-bad-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    close(fd);
    write_file(path, "prefix = \"alloc\";\n\nchunck = 5;\n");
    char args[600];
    snprintf(args, sizeof args, "-c %s --check-config", path);
    assert_int_equal(run_allocd(args, out, sizeof out), 1);
    char want[600];
    snprintf(want, sizeof want, "%s:3:", path);
    assert_non_null(strstr(out, want));
    write_file(path, "redis = \"http://x\";\n");
    assert_int_equal(run_allocd(args, out, sizeof out), 1);
    snprintf(want, sizeof want, "%s:1:", path);
    assert_non_null(strstr(out, want));
    snprintf(args, sizeof args, "-c %s --redis unix:///tmp/x.sock --check-config", path);
    assert_int_equal(run_allocd(args, out, sizeof out), 1); /* the file is still bad */
    unlink(path);
    assert_int_equal(run_allocd("-c /nonexistent/allocd.conf --check-config", out, sizeof out), 1);
    assert_int_equal(run_allocd("-c conf/allocd.conf --redis nope://x --check-config", out, sizeof out), 1);
    assert_non_null(strstr(out, "--redis"));
}

static void setup_batch(redisContext *c, const char *b, int units)
{
    redisReply *r = redisCommand(c, "HSET alloc:{%s}:meta kind stock per_user 1000000", b);
    freeReplyObject(r);
    r = redisCommand(c, "HSET alloc:{%s}:capacity sku %d", b, units);
    freeReplyObject(r);
    r = redisCommand(c, "SADD alloc:batches %s", b);
    freeReplyObject(r);
}

static void push_n(redisContext *c, const char *b, const char *tag, int n)
{
    for (int i = 0; i < n; i++)
        redisAppendCommand(c, "RPUSH alloc:{%s}:queue {\"id\":\"%s%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku\"}",
                           b, tag, i, i % 50);
    for (int i = 0; i < n; i++) {
        redisReply *r;
        assert_int_equal(redisGetReply(c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
}

/* allocd started before Redis exists: it waits (no crash, no busy loop),
 * then serves once Redis appears. */
static void test_redis_absent_at_start(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    harness_redis_kill(&redis);                 /* keep the dir, no server */
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, "backoff_max_ms = 300;"), 0);
    harness_sleep_ms(1500);
    assert_true(harness_allocd_alive(&d));
    assert_int_equal(harness_redis_restart(&redis), 0);
    redisContext *c = harness_redis_connect(&redis);
    setup_batch(c, "a1", 100);
    push_n(c, "a1", "x", 10);
    assert_int_equal(harness_wait_hlen(c, "alloc:{a1}:results", 10, 10000), 10);
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* Redis restarts (with AOF) while allocd serves: allocd reconnects, reloads
 * and finishes; every request gets one result and stock adds up. */
static void test_redis_restart_while_serving(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, "--appendonly yes --appendfsync always"), 0);
    redisContext *c = harness_redis_connect(&redis);
    setup_batch(c, "r1", 100000);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, "backoff_max_ms = 300; chunk = 64;"), 0);
    push_n(c, "r1", "a", 3000);
    /* serving: a link is up, so the restart is a connection lost (not
     * one never made, as it was when allocd under ASan took longer than
     * a fixed 50 ms to connect) */
    assert_true(harness_wait_hlen(c, "alloc:{r1}:results", 1, 30000) >= 1);
    redisFree(c);
    assert_int_equal(harness_redis_restart(&redis), 0);
    c = harness_redis_connect(&redis);
    push_n(c, "r1", "b", 3000);
    long long n = harness_wait_hlen(c, "alloc:{r1}:results", 6000, 30000);
    if (n != 6000) harness_allocd_dump_log(&d);
    assert_int_equal(n, 6000);
    harness_sleep_ms(300);
    assert_int_equal(proc_int(c, "HGET alloc:{r1}:free sku"), 100000 - 6000);
    assert_int_equal(proc_int(c, "HGET alloc:{r1}:stats granted"), 6000);
    assert_int_equal(itest_log_len(c, "r1"), 6000);
    assert_true(harness_allocd_alive(&d));
    assert_true(itest_count_in_log(&d, "connection lost") >= 1);
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* A Redis that blocks for longer than the command deadline: allocd gives
 * up on that connection, reconnects, and applies nothing twice. The sleep
 * begins once the batch is served, and the idle wait is short, so that
 * even an idle worker's BLMOVE (idle_wait_ms + redis_timeout_ms) is past
 * its deadline within the sleep. */
static void test_slow_redis(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, "--enable-debug-command yes"), 0);
    redisContext *c = harness_redis_connect(&redis);
    setup_batch(c, "s1", 100000);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis,
                     "redis_timeout_ms = 300; backoff_max_ms = 200; chunk = 32; idle_wait_ms = 100;"), 0);
    push_n(c, "s1", "a", 2000);
    /* serving before the sleep: a worker still connecting or waiting to
     * load (its profiles' WATCH) has only commands under the connect
     * deadline out */
    assert_true(harness_wait_hlen(c, "alloc:{s1}:results", 1, 30000) >= 1);
    redisReply *r = redisCommand(c, "DEBUG SLEEP 1");
    freeReplyObject(r);
    push_n(c, "s1", "b", 2000);
    long long n = harness_wait_hlen(c, "alloc:{s1}:results", 4000, 30000);
    if (n != 4000) harness_allocd_dump_log(&d);
    assert_int_equal(n, 4000);
    harness_sleep_ms(300);
    assert_int_equal(proc_int(c, "HGET alloc:{s1}:free sku"), 100000 - 4000);
    assert_int_equal(itest_log_len(c, "s1"), 4000);
    assert_true(itest_count_in_log(&d, "timeout") >= 1); /* the deadline did fire */
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* A request whose apply always fails is isolated, then moved to dead after
 * 2 * max_attempts failed applies; the requests around it are served. */
static void test_poison_request_goes_to_dead(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    redisContext *c = harness_redis_connect(&redis);
    setup_batch(c, "p1", 1000);
    for (int i = 0; i < 20; i++) {
        redisReply *r = redisCommand(c, "RPUSH alloc:{p1}:queue {\"id\":\"%s%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku\"}",
                                     i == 5 ? "poison" : "ok", i, i);
        freeReplyObject(r);
    }
    setenv("ALLOCD_FAULT_APPLY_ID", "poison5", 1);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, "max_attempts = 2; backoff_min_ms = 10; backoff_max_ms = 50;"), 0);
    unsetenv("ALLOCD_FAULT_APPLY_ID");
    long long n = harness_wait_hlen(c, "alloc:{p1}:results", 19, 15000);
    if (n != 19) harness_allocd_dump_log(&d);
    assert_int_equal(n, 19);
    for (int w = 0; w < 300 && proc_int(c, "LLEN alloc:{p1}:dead") < 1; w++) harness_sleep_ms(10);
    assert_int_equal(proc_int(c, "LLEN alloc:{p1}:dead"), 1);
    char *dead = harness_str(c, "LINDEX alloc:{p1}:dead 0");
    assert_non_null(strstr(dead, "could not be applied after 4 attempts"));
    assert_non_null(strstr(dead, "poison5"));
    free(dead);
    assert_int_equal(proc_int(c, "HEXISTS alloc:{p1}:results poison5"), 0);
    assert_int_equal(proc_int(c, "HGET alloc:{p1}:stats dead"), 1);
    assert_int_equal(proc_int(c, "HGET alloc:{p1}:stats processed"), 19);
    assert_int_equal(proc_int(c, "HGET alloc:{p1}:free sku"), 1000 - 19);
    assert_true(itest_count_in_log(&d, "one request at a time") >= 1);
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* Admin commands arriving while a queue request is being isolated are
 * served, and only the poison goes to dead: dead-lettering took the head
 * of the next chunk whatever it held, and ctl chunks come first (the
 * simulator found set_capacity and assign commands in dead). */
static void test_poison_beside_admin_commands(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    redisContext *c = harness_redis_connect(&redis);
    setup_batch(c, "p2", 1000);
    for (int i = 0; i < 6; i++) {
        redisReply *r = redisCommand(c, "RPUSH alloc:{p2}:queue {\"id\":\"%s%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku\"}",
                                     i == 0 ? "poison" : "ok", i, i);
        freeReplyObject(r);
    }
    setenv("ALLOCD_FAULT_APPLY_ID", "poison0", 1);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, "max_attempts = 2; backoff_min_ms = 20; backoff_max_ms = 1000;"), 0);
    unsetenv("ALLOCD_FAULT_APPLY_ID");
    /* the poison's 3rd refusal is logged as the take of its 4th try; the
     * 4th refusal is followed by a backoff of 320 ms, then the take that
     * dead-letters: admin commands pushed now are in that take, first */
    for (int w = 0; w < 1000 && !itest_count_in_log(&d, "3 applies failed in a row"); w++) harness_sleep_ms(2);
    assert_true(itest_count_in_log(&d, "3 applies failed in a row") >= 1);
    int ctl = 0;
    for (; ctl < 3; ctl++) {
        redisReply *r = redisCommand(c, "RPUSH alloc:{p2}:ctl {\"id\":\"c%d\",\"op\":\"resume\"}", ctl);
        freeReplyObject(r);
    }
    long long n = harness_wait_hlen(c, "alloc:{p2}:results", 5 + ctl, 15000);
    if (n != 5 + ctl) {
        harness_allocd_dump_log(&d);
        for (long long i = 0; i < proc_int(c, "LLEN alloc:{p2}:dead"); i++) {
            char *e = harness_str(c, "LINDEX alloc:{p2}:dead %lld", i);
            fprintf(stderr, "dead %lld: %s\n", i, e);
            free(e);
        }
        char *res = harness_str(c, "HKEYS alloc:{p2}:results");
        fprintf(stderr, "results: %s\n", res ? res : "?");
        free(res);
    }
    assert_int_equal(n, 5 + ctl);
    assert_int_equal(proc_int(c, "LLEN alloc:{p2}:dead"), 1);
    char *dead = harness_str(c, "LINDEX alloc:{p2}:dead 0");
    assert_non_null(strstr(dead, "poison0"));
    free(dead);
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* Out of memory (maxmemory reached) is no fault of a request's: after a
 * spell of -OOM refusals every request is answered, none goes to dead. */
static void test_out_of_memory_spell(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    redisContext *c = harness_redis_connect(&redis);
    setup_batch(c, "o1", 100000);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, "max_attempts = 1; backoff_min_ms = 10; backoff_max_ms = 40;"), 0);
    push_n(c, "o1", "a", 200);
    assert_int_equal(harness_wait_hlen(c, "alloc:{o1}:results", 200, 10000), 200);
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory 1"));
    /* pushes are refused too: the queue filled before, served after */
    redisReply *r = redisCommand(c, "RPUSH alloc:{o1}:queue x");
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "OOM"));
    freeReplyObject(r);
    harness_sleep_ms(1500);
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory 0"));
    push_n(c, "o1", "b", 200);
    long long n = harness_wait_hlen(c, "alloc:{o1}:results", 400, 15000);
    if (n != 400) harness_allocd_dump_log(&d);
    assert_int_equal(n, 400);
    assert_int_equal(proc_int(c, "LLEN alloc:{o1}:dead"), 0);
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* A 1 MB payload goes to dead, cut to 64 KB so the entry stays far below
 * Redis's bulk limit, and the requests around it are served. */
static void test_megabyte_payload(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    redisContext *c = harness_redis_connect(&redis);
    setup_batch(c, "m1", 1000);
    size_t n = 1 << 20;
    char *big = malloc(n);
    memset(big, 0xfe, n);                       /* not UTF-8: base64 too */
    redisReply *r = redisCommand(c, "RPUSH alloc:{m1}:queue {\"id\":\"a\",\"user\":\"u\",\"op\":\"buy\",\"item\":\"sku\"}");
    freeReplyObject(r);
    r = redisCommand(c, "RPUSH alloc:{m1}:queue %b", big, n);
    freeReplyObject(r);
    r = redisCommand(c, "RPUSH alloc:{m1}:queue {\"id\":\"b\",\"user\":\"u\",\"op\":\"buy\",\"item\":\"sku\"}");
    freeReplyObject(r);
    free(big);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, NULL), 0);
    assert_int_equal(harness_wait_hlen(c, "alloc:{m1}:results", 2, 10000), 2);
    char *dead = harness_str(c, "LINDEX alloc:{m1}:dead 0");
    assert_non_null(dead);
    assert_true(strlen(dead) < 300000);
    assert_non_null(strstr(dead, "\"raw_bytes\":1048576"));
    assert_non_null(strstr(dead, "\"truncated\":true"));
    free(dead);
    assert_int_equal(harness_allocd_stop(&d), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

static void test_sighup_reloads(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, NULL), 0);
    /* "started" is logged after the handler is installed: a SIGHUP
     * before it would take the default action and end allocd */
    assert_int_equal(itest_wait_log(&d, "started:", 1, 10000), 1);
    kill(d.pid, SIGHUP);
    assert_int_equal(itest_wait_log(&d, "configuration reloaded", 1, 10000), 1);
    harness_sleep_ms(100);
    assert_true(harness_allocd_alive(&d));
    assert_int_equal(itest_count_in_log(&d, "configuration reloaded"), 1);
    assert_int_equal(harness_allocd_stop(&d), 0);
    harness_redis_stop(&redis);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_command_line),
        cmocka_unit_test(test_redis_absent_at_start),
        cmocka_unit_test(test_redis_restart_while_serving),
        cmocka_unit_test(test_slow_redis),
        cmocka_unit_test(test_poison_request_goes_to_dead),
        cmocka_unit_test(test_poison_beside_admin_commands),
        cmocka_unit_test(test_out_of_memory_spell),
        cmocka_unit_test(test_megabyte_payload),
        cmocka_unit_test(test_sighup_reloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
