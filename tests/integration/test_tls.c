/* test_tls.c -- the TLS-to-Redis recipe of docs/DEPLOYMENT.md, run for
 * real: hiredis 0.14 has no TLS, so allocd talks to a local stunnel (client
 * mode, a unix socket, the server's certificate verified against a CA and a
 * host name), which talks TLS to a redis-server that listens only for TLS
 * on TCP. allocd serves a batch through it; a plain connection to the TLS
 * port gets nothing; a stunnel that does not trust the certificate lets no
 * command through. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"

static pid_t start_stunnel(const char *dir, const char *name, int port, const char *ca)
{
    char conf[600], sock[500], log[500];
    snprintf(conf, sizeof conf, "%s/%s.conf", dir, name);
    snprintf(sock, sizeof sock, "%s/%s.sock", dir, name);
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    FILE *f = fopen(conf, "w");
    fprintf(f, "foreground = yes\npid =\n[redis]\nclient = yes\naccept = %s\nconnect = 127.0.0.1:%d\n"
               "verifyChain = yes\nCAfile = %s\ncheckHost = localhost\n", sock, port, ca);
    fclose(f);
    char *argv[] = { "stunnel", conf, NULL };
    pid_t pid = harness_spawn(argv, log);
    for (int i = 0; i < 100 && access(sock, F_OK) != 0; i++) harness_sleep_ms(20);
    return pid;
}

static void test_allocd_through_stunnel(void **state)
{
    if (itest_sh("command -v stunnel >/dev/null && command -v openssl >/dev/null") != 0) {
        fprintf(stderr, "note: stunnel or openssl not installed (make deps installs stunnel4)\n");
        fail();
    }
    char dir[400];
    assert_int_equal(proc_temp_dir(dir, sizeof dir, "allocd-tls"), 0);
    /* a CA-less self-signed server certificate for localhost, and another
     * one nobody should trust */
    assert_int_equal(itest_sh("cd %s && for n in redis other; do openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
                              "-subj /CN=localhost -addext subjectAltName=DNS:localhost "
                              "-keyout $n.key -out $n.crt >/dev/null 2>&1 || exit 1; done", dir), 0);
    int port = itest_free_port();
    char extra[1500];
    snprintf(extra, sizeof extra, "--tls-port %d --tls-cert-file %s/redis.crt --tls-key-file %s/redis.key "
             "--tls-ca-cert-file %s/redis.crt --tls-auth-clients no", port, dir, dir, dir);
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, extra), 0);
    redisContext *c = harness_redis_connect(&redis);
    itest_batch(c, "t1", "kind stock", "a 2", NULL);

    /* the TLS port speaks only TLS */
    assert_int_equal(itest_sh("timeout 3 redis-cli -p %d PING 2>&1 | grep -q PONG", port), 1);

    char ca[500], bad_ca[500];
    snprintf(ca, sizeof ca, "%s/redis.crt", dir);
    snprintf(bad_ca, sizeof bad_ca, "%s/other.crt", dir);
    pid_t good = start_stunnel(dir, "tunnel", port, ca);
    pid_t bad = start_stunnel(dir, "untrusting", port, bad_ca);
    assert_int_equal(itest_sh("timeout 5 redis-cli -s %s/untrusting.sock PING 2>&1 | grep -q PONG", dir), 1);
    assert_int_equal(itest_sh("timeout 5 redis-cli -s %s/tunnel.sock PING | grep -q PONG", dir), 0);

    char conf[700];
    snprintf(conf, sizeof conf, "redis = \"unix://%s/tunnel.sock\"; registry_interval_ms = 100;", dir);
    harness_allocd d;
    assert_int_equal(harness_allocd_start(&d, &redis, conf), 0);
    for (int i = 0; i < 3; i++)
        itest_cmd(c, "RPUSH alloc:{t1}:queue {\"id\":\"r%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"a\"}", i, i);
    if (harness_wait_hlen(c, "alloc:{t1}:results", 3, 10000) != 3) {
        harness_allocd_dump_log(&d);
        fail_msg("allocd did not serve the batch through stunnel");
    }
    assert_int_equal(proc_int(c, "HGET alloc:{t1}:stats granted"), 2);
    assert_int_equal(harness_allocd_stop(&d), 0);
    harness_reap(good, SIGTERM);
    harness_reap(bad, SIGTERM);
    redisFree(c);
    harness_redis_stop(&redis);
    itest_sh("rm -rf %s", dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocd_through_stunnel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
