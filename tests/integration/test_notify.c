/* test_notify.c -- allocd under a (fake) systemd: the test listens on a
 * NOTIFY_SOCKET of its own and checks READY, STATUS, WATCHDOG, RELOADING and
 * STOPPING; and the heartbeat an instance leaves in Redis. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"

typedef struct listener {
    int fd;
    char path[400];
    char seen[64][256];
    int n;
} listener;

static void listen_notify(listener *l, const char *dir)
{
    memset(l, 0, sizeof *l);
    snprintf(l->path, sizeof l->path, "%s/notify.sock", dir);
    l->fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(l->fd >= 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    assert_true(strlen(l->path) < sizeof a.sun_path);
    memcpy(a.sun_path, l->path, strlen(l->path) + 1);
    assert_int_equal(bind(l->fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = { 0, 100000 };
    setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* Reads datagrams until one contains `want` or the timeout passes. */
static int wait_for(listener *l, const char *want, int timeout_ms)
{
    int64_t end = harness_now_ms() + timeout_ms;
    while (harness_now_ms() < end) {
        char buf[256];
        ssize_t n = recv(l->fd, buf, sizeof buf - 1, 0);
        if (n <= 0) continue;
        buf[n] = '\0';
        if (l->n < 64) snprintf(l->seen[l->n++], sizeof l->seen[0], "%s", buf);
        if (strstr(buf, want)) return 1;
    }
    return 0;
}

static void test_notify_protocol_and_heartbeat(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    redisContext *c = harness_redis_connect(&redis);
    itest_batch(c, "n1", "kind stock", "sku 5", NULL);

    listener l;
    listen_notify(&l, redis.dir);
    setenv("NOTIFY_SOCKET", l.path, 1);
    setenv("WATCHDOG_USEC", "400000", 1);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, "registry_interval_ms = 200;"), 0);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");

    assert_true(wait_for(&l, "READY=1", 3000));
    assert_true(wait_for(&l, "STATUS=redis connected; serving 1 batches", 3000));
    int64_t t0 = harness_now_ms();
    int pings = 0;
    while (harness_now_ms() - t0 < 1000) pings += wait_for(&l, "WATCHDOG=1", 300);
    assert_true(pings >= 3);                         /* every 200 ms */

    /* the heartbeat */
    char *hb = harness_str(c, "HGET alloc:instances test-%d", 1);
    if (!hb) {                                       /* instance name depends on the harness counter */
        redisReply *all = redisCommand(c, "HKEYS alloc:instances");
        assert_true(all->elements == 1);
        hb = harness_str(c, "HGET alloc:instances %s", all->element[0]->str);
        freeReplyObject(all);
    }
    assert_non_null(hb);
    assert_non_null(strstr(hb, "\"state\":\"running\""));
    assert_non_null(strstr(hb, "\"serving\":[\"n1\"]"));
    free(hb);
    redisReply *keys = redisCommand(c, "KEYS alloc:instance:*");
    assert_int_equal(keys->elements, 1);
    long long ttl = proc_int(c, "PTTL %s", keys->element[0]->str);
    assert_true(ttl > 0 && ttl <= 2000);   /* liveness: 3 intervals, at least 2 s */
    char key[200];
    snprintf(key, sizeof key, "%s", keys->element[0]->str);
    freeReplyObject(keys);

    kill(d.pid, SIGHUP);
    assert_true(wait_for(&l, "RELOADING=1", 2000));
    assert_true(wait_for(&l, "READY=1", 2000));
    kill(d.pid, SIGTERM);
    assert_true(wait_for(&l, "STOPPING=1", 2000));
    for (int i = 0; i < 500 && harness_allocd_alive(&d); i++) harness_sleep_ms(10);
    assert_false(harness_allocd_alive(&d));          /* exits on its own after the drain */
    assert_int_equal(proc_int(c, "EXISTS %s", key), 0);
    redisReply *all = redisCommand(c, "HVALS alloc:instances");
    assert_int_equal(all->elements, 1);
    assert_non_null(strstr(all->element[0]->str, "\"state\":\"stopped\""));
    freeReplyObject(all);
    close(l.fd);
    redisFree(c);
    harness_redis_stop(&redis);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notify_protocol_and_heartbeat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
