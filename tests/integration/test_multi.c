/* test_multi.c -- several allocd instances on one Redis: batches spread
 * over the instances (each served by exactly one), takeover after a
 * SIGKILL within the lease TTL + 1 s, and an instance paused past its lease
 * (SIGSTOP) that, once resumed, writes nothing for the batch it lost.
 *
 * "Writes nothing" is checked on what Redis executed, not on what the
 * daemon says about itself: Redis's MONITOR lists every command it runs
 * (inside scripts and transactions too, and nothing of a transaction that
 * WATCH aborted), and every apply writes stats.owner; so each write to the
 * batch must name the instance whose token the lease held at that moment. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "itest.h"

#define TTL_MS 2000
#define CONF "registry_interval_ms = 200; lease_ttl_ms = 2000; backoff_max_ms = 200;"

static void create(redisContext *c, const char *b, int units)
{
    itest_cmd(c, "HSET alloc:{%s}:meta kind stock per_user 1000", b);
    itest_cmd(c, "HSET alloc:{%s}:capacity sku %d", b, units);
    itest_cmd(c, "SADD alloc:batches %s", b);
}

static void push(redisContext *c, const char *b, const char *id)
{
    itest_cmd(c, "RPUSH alloc:{%s}:queue {\"id\":\"%s\",\"user\":\"u\",\"op\":\"buy\",\"item\":\"sku\"}", b, id);
}

/* The instance name in the batch's lease ("test-N/pid/rand" -> "test-N"). */
static char *lease_owner(redisContext *c, const char *b)
{
    char *v = harness_str(c, "GET alloc:{%s}:lease", b);
    if (v) { char *slash = strchr(v, '/'); if (slash) *slash = '\0'; }
    return v;
}

/* The owner of b's lease once it has stayed the same for a second: right
 * after instances start, placement may hand a batch over, and between the
 * old owner's release and the new one's acquire nobody holds it. */
static char *stable_owner(redisContext *c, const char *b)
{
    char *last = NULL;
    int64_t since = harness_now_ms();
    for (int waited = 0; waited < 20000; waited += 50) {
        char *o = lease_owner(c, b);
        if (!o || !last || strcmp(o, last)) { free(last); last = o; since = harness_now_ms(); }
        else free(o);
        if (last && harness_now_ms() - since >= 1000) return last;
        harness_sleep_ms(50);
    }
    free(last);
    return NULL;
}

/* SIGSTOPs whichever of a, b holds b's lease, and checks it still held it
 * once stopped (a hand-over between the read and the signal would pause
 * the wrong instance: then it is resumed and the choice made again). */
static harness_allocd *pause_owner(redisContext *c, const char *batch,
                                   harness_allocd *a, harness_allocd *b)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        char *o = stable_owner(c, batch);
        assert_non_null(o);
        harness_allocd *owner = !strcmp(o, a->instance) ? a : !strcmp(o, b->instance) ? b : NULL;
        free(o);
        assert_non_null(owner);
        kill(owner->pid, SIGSTOP);
        o = lease_owner(c, batch);
        int still = o && !strcmp(o, owner->instance);
        free(o);
        if (still) return owner;
        kill(owner->pid, SIGCONT);
    }
    fail_msg("the lease of %s kept moving", batch);
    return NULL;
}

static int wait_served(redisContext *c, const char *b, const char *id, int timeout_ms)
{
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:results", b);
    char *v = harness_wait_hget(c, key, id, timeout_ms);
    free(v);
    return v != NULL;
}

/* MONITOR on the batch's Redis, into a file, until monitor_stop. */
static pid_t monitor_start(const harness_redis *r, char *path, size_t len)
{
    snprintf(path, len, "%s/monitor.log", r->dir);
    char *argv[] = { "redis-cli", "-s", (char *)r->sock, "monitor", NULL };
    pid_t pid = harness_spawn(argv, path);
    for (int waited = 0; waited < 5000; waited += 10) {   /* "OK" once it is on */
        FILE *f = fopen(path, "r");
        char line[64] = "";
        if (f) { if (!fgets(line, sizeof line, f)) line[0] = '\0'; fclose(f); }
        if (!strncmp(line, "OK", 2)) return pid;
        harness_sleep_ms(10);
    }
    return -1;
}

/* The quoted argument after `"name" ` on a MONITOR line, into out. */
static int monitor_arg_after(const char *line, const char *name, char *out, size_t len)
{
    char needle[128];
    snprintf(needle, sizeof needle, "\"%s\" \"", name);
    const char *p = strstr(line, needle);
    if (!p) return 0;
    p += strlen(needle);
    size_t n = strcspn(p, "\"");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p);
    return 1;
}

typedef struct fence_audit {
    int writes[3];      /* stats writes by instance a, instance b, anyone else */
    int stale_writes;   /* writes by an instance whose token the lease did not hold */
} fence_audit;

/* Replays the MONITOR log of batch b: the lease holder is the instance of
 * the last token SET on the lease key (none after a DEL), and every HSET of
 * the stats hash (each apply writes one, with owner) must come from it. */
static void fence_audit_read(const char *path, const char *b, const char *name_a,
                             const char *name_b, fence_audit *a)
{
    char lease_set[96], lease_del[96], stats_hset[96];
    snprintf(lease_set, sizeof lease_set, "\"SET\" \"alloc:{%s}:lease\" \"", b);
    snprintf(lease_del, sizeof lease_del, "\"DEL\" \"alloc:{%s}:lease\"", b);
    snprintf(stats_hset, sizeof stats_hset, "\"HSET\" \"alloc:{%s}:stats\"", b);
    memset(a, 0, sizeof *a);
    char holder[64] = "", owner[64];
    char line[8192];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
        const char *p;
        if ((p = strstr(line, lease_set))) {
            p += strlen(lease_set);
            snprintf(holder, sizeof holder, "%.*s", (int)strcspn(p, "/\""), p);
        } else if (strstr(line, lease_del)) {
            holder[0] = '\0';
        } else if (strstr(line, stats_hset) && monitor_arg_after(line, "owner", owner, sizeof owner)) {
            a->writes[!strcmp(owner, name_a) ? 0 : !strcmp(owner, name_b) ? 1 : 2]++;
            if (strcmp(owner, holder)) {
                a->stale_writes++;
                print_message("write by %s while the lease was %s's: %.200s\n", owner,
                              holder[0] ? holder : "nobody", line);
            }
        }
    }
    fclose(f);
}

static const char *batches[] = { "m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7" };
#define NB (sizeof batches / sizeof batches[0])

static void test_spread_and_takeover(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    redisContext *c = harness_redis_connect(&redis);
    harness_allocd a, b;
    assert_int_equal(harness_allocd_start(&a, &redis, CONF), 0);
    assert_int_equal(harness_allocd_start(&b, &redis, CONF), 0);
    harness_sleep_ms(800);                      /* both heartbeats seen */
    for (size_t i = 0; i < NB; i++) create(c, batches[i], 100000);
    for (size_t i = 0; i < NB; i++) push(c, batches[i], "first");
    for (size_t i = 0; i < NB; i++) assert_true(wait_served(c, batches[i], "first", 10000));
    harness_sleep_ms(1500);                     /* let hand-overs settle */

    int on_a = 0, on_b = 0;
    char name_a[32], name_b[32];
    for (size_t i = 0; i < NB; i++) {
        char *o = lease_owner(c, batches[i]);
        assert_non_null(o);
        char *st = harness_str(c, "HGET alloc:{%s}:stats owner", batches[i]);
        if (st) assert_string_equal(st, o);     /* stats.owner names the server */
        free(st);
        if (!on_a || !strcmp(o, name_a)) { snprintf(name_a, sizeof name_a, "%s", o); on_a++; }
        else { snprintf(name_b, sizeof name_b, "%s", o); on_b++; }
        free(o);
    }
    print_message("spread: %d batches on %s, %d on %s\n", on_a, name_a, on_b, name_b);
    assert_true(on_a >= 1 && on_b >= 1);

    /* kill the instance that serves m0 and time how long until m0 is served
     * again: paused first, so that it is surely the owner when it dies */
    harness_allocd *dead = pause_owner(c, "m0", &a, &b);
    harness_allocd *alive = dead == &a ? &b : &a;
    long long epoch = proc_int(c, "HGET alloc:{m0}:internal epoch");
    int64_t t0 = harness_now_ms();
    harness_allocd_kill(dead);
    push(c, "m0", "after-kill");
    assert_true(wait_served(c, "m0", "after-kill", 15000));
    int64_t takeover = harness_now_ms() - t0;
    print_message("takeover after SIGKILL: %lld ms (lease TTL %d ms)\n", (long long)takeover, TTL_MS);
    assert_true(takeover <= TTL_MS + 1000 + 600);   /* + heartbeat staleness margin */
    assert_int_equal(proc_int(c, "HGET alloc:{m0}:internal epoch"), epoch + 1); /* one new lease */
    for (size_t i = 0; i < NB; i++) push(c, batches[i], "second");
    for (size_t i = 0; i < NB; i++) assert_true(wait_served(c, batches[i], "second", 15000));
    assert_int_equal(harness_allocd_stop(alive), 0);
    redisFree(c);
    harness_redis_stop(&redis);
}

/* A paused owner loses its lease; the other instance takes over; the
 * paused one, resumed, must not write: every request is applied once, and
 * Redis executed no write of the batch from an instance that did not hold
 * the lease. The resumed owner may learn it lost the lease in several ways
 * (its lease timer, the check before a write, a refused renewal, a FENCED
 * apply, its registry stopping the worker); which one does not matter. */
static void test_paused_owner_is_fenced(void **state)
{
    harness_redis redis;
    assert_int_equal(harness_redis_start(&redis, NULL), 0);
    redisContext *c = harness_redis_connect(&redis);
    char monitor_log[400];
    pid_t monitor = monitor_start(&redis, monitor_log, sizeof monitor_log);
    assert_true(monitor > 0);
    create(c, "f1", 1000000);
    harness_allocd a, b;
    assert_int_equal(harness_allocd_start(&a, &redis, CONF), 0);
    push(c, "f1", "r0");
    assert_true(wait_served(c, "f1", "r0", 10000));
    assert_int_equal(harness_allocd_start(&b, &redis, CONF), 0);
    harness_sleep_ms(1500);
    /* whoever serves f1 now gets paused */
    harness_allocd *owner = pause_owner(c, "f1", &a, &b);
    harness_allocd *other = owner == &a ? &b : &a;
    int64_t t0 = harness_now_ms();
    char id[16];
    for (int i = 1; i <= 200; i++) {
        snprintf(id, sizeof id, "r%d", i);
        push(c, "f1", id);
    }
    assert_true(wait_served(c, "f1", "r200", 15000));
    print_message("served by the other instance %lld ms after SIGSTOP\n", (long long)(harness_now_ms() - t0));
    kill(owner->pid, SIGCONT);
    harness_sleep_ms(TTL_MS);
    for (int i = 201; i <= 300; i++) {
        snprintf(id, sizeof id, "r%d", i);
        push(c, "f1", id);
    }
    assert_true(wait_served(c, "f1", "r300", 15000));
    harness_sleep_ms(500);
    /* every request applied exactly once: 301 grants, 301 logged events */
    assert_int_equal(proc_int(c, "HLEN alloc:{f1}:results"), 301);
    assert_int_equal(proc_int(c, "HGET alloc:{f1}:stats granted"), 301);
    assert_int_equal(itest_log_len(c, "f1"), 301);
    assert_int_equal(proc_int(c, "HGET alloc:{f1}:free sku"), 1000000 - 301);
    assert_int_equal(harness_allocd_stop(owner), 0);
    assert_int_equal(harness_allocd_stop(other), 0);
    harness_reap(monitor, SIGTERM);
    fence_audit audit;
    fence_audit_read(monitor_log, "f1", owner->instance, other->instance, &audit);
    print_message("stats writes: paused %s %d, other %s %d, others %d, without the lease %d\n",
                  owner->instance, audit.writes[0], other->instance, audit.writes[1],
                  audit.writes[2], audit.stale_writes);
    assert_true(audit.writes[0] > 0 && audit.writes[1] > 0);   /* the audit saw both */
    assert_int_equal(audit.writes[2], 0);
    assert_int_equal(audit.stale_writes, 0);
    /* and the resumed instance let go of the batch, one way or another:
     * the lease timer found it run out on our clock or a renewal refused
     * ("lease failed"), the check before a take or an apply found it run
     * out first ("not valid any more"), an apply was refused (FENCED), or
     * its registry, seeing the batch placed on the other instance, stopped
     * the worker */
    int let_go = itest_count_in_log(owner, "batch f1: lease failed") +
                 itest_count_in_log(owner, "the lease is not valid any more") +
                 itest_count_in_log(owner, "FENCED") +
                 itest_count_in_log(owner, "registry: batch f1: ");
    if (!let_go) harness_allocd_dump_log(owner);
    assert_true(let_go >= 1);
    redisFree(c);
    harness_redis_stop(&redis);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spread_and_takeover),
        cmocka_unit_test(test_paused_owner_is_fenced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
