/* test_slots.c -- selection slots end to end (contract 9.4) against a real
 * redis-server: `allocctl batch slots` builds them from a lottery file and
 * prints the schedule; before a user's slot the daemon answers not_open
 * with the slot as opens_at, after it serves; a group by each group_slot
 * rule; an operator's change is seen by the running daemon within about a
 * second, in HSCAN pages when the hash is large; `status --user` shows
 * the slot; a bad file is refused with FILE:LINE. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "itest.h"

typedef itest fixture;

/* longer than the slots scan's interval and grace (worker/slots_scan.h:
 * 1000 + 500 ms) */
#define SLOTS_WAIT_MS 2000

static void dorm(fixture *f, const char *b, const char *rule)
{
    itest_cmd(f->c, "HSET alloc:{%s}:meta kind room groups listed group_slot %s", b, rule);
    itest_cmd(f->c, "HSET alloc:{%s}:capacity R1 3 R2 3", b);
    itest_cmd(f->c, "SADD alloc:batches %s", b);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void expect_not_open(fixture *f, const char *b, const char *id, long long opens_at)
{
    json_t *r = itest_result(f, b, id);
    assert_string_equal(itest_jstr(r, "reason"), "not_open");
    assert_int_equal(itest_jint(r, "opens_at"), opens_at);
    json_decref(r);
}

static void test_slots_from_a_lottery_file(void **state)
{
    fixture *f = *state;
    dorm(f, "d", "earliest");
    char csv[600], cmd[1600];
    snprintf(csv, sizeof csv, "%s/lottery.csv", f->redis.dir);
    write_file(csv, "user,number\ns3,30\ns1,10\ns2,20\n");
    long long start = harness_now_ms() + 5000;   /* a1 is decided before it, even under load */
    snprintf(cmd, sizeof cmd, "%s/allocctl --redis %s batch slots d --from %s --start %lld --every 1h "
             "--per-slot 2 --order number > %s/out.txt", harness_build_dir(), f->redis.url, csv, start, f->redis.dir);
    assert_int_equal(itest_sh("%s", cmd), 0);
    assert_int_equal(itest_sh("grep -q 'users 1-2: s1 .. s2' %s/out.txt && grep -q 'slot 2 ' %s/out.txt",
                              f->redis.dir, f->redis.dir), 0);
    assert_int_equal(proc_int(f->c, "HGET alloc:{d}:slots s1"), start);
    assert_int_equal(proc_int(f->c, "HGET alloc:{d}:slots s3"), start + 3600000);
    assert_int_equal(itest_sh("%s/allocctl --redis %s status d --user s3 | grep -q 'selection slot: .*(%lld)'",
                              harness_build_dir(), f->redis.url, start + 3600000), 0);
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    /* before the slot */
    itest_push(f, "d", "{\"id\":\"a1\",\"user\":\"s1\",\"op\":\"choose\",\"room\":\"R1\"}");
    expect_not_open(f, "d", "a1", start);
    itest_push(f, "d", "{\"id\":\"n1\",\"user\":\"nobody\",\"op\":\"choose\",\"room\":\"R1\"}");
    itest_expect(f, "d", "n1", "granted", "R1");       /* no slot: the batch's opens_at (0) */
    /* after it */
    while (harness_now_ms() < start + 50) harness_sleep_ms(20);
    itest_push(f, "d", "{\"id\":\"a2\",\"user\":\"s1\",\"op\":\"choose\",\"room\":\"R1\"}");
    itest_expect(f, "d", "a2", "granted", "R1");
    itest_push(f, "d", "{\"id\":\"c1\",\"user\":\"s3\",\"op\":\"choose\",\"room\":\"R1\"}");
    expect_not_open(f, "d", "c1", start + 3600000);    /* the second slot */
    /* the operator moves s3 earlier: it holds within 1.5 s */
    itest_cmd(f->c, "HSET alloc:{d}:slots s3 0");
    harness_sleep_ms(ITEST_EDIT_HOLDS_MS);
    itest_push(f, "d", "{\"id\":\"c2\",\"user\":\"s3\",\"op\":\"choose\",\"room\":\"R2\"}");
    itest_expect(f, "d", "c2", "granted", "R2");
    /* and a later slot for a user is honoured too */
    long long later = harness_now_ms() + 3600000;
    itest_cmd(f->c, "HSET alloc:{d}:slots late %lld", later);
    harness_sleep_ms(ITEST_EDIT_HOLDS_MS);
    itest_push(f, "d", "{\"id\":\"l1\",\"user\":\"late\",\"op\":\"choose\",\"room\":\"R2\"}");
    expect_not_open(f, "d", "l1", later);
}

static void test_group_slot_rules(void **state)
{
    fixture *f = *state;
    const char *rules[] = { "earliest", "latest", "leader" };
    long long past = harness_now_ms() - 1000, future = harness_now_ms() + 3600000;
    for (int i = 0; i < 3; i++) {
        char b[4] = { 'g', (char)('0' + i), 0 };
        dorm(f, b, rules[i]);
        itest_cmd(f->c, "HSET alloc:{%s}:slots m1 %lld m2 %lld", b, past, future);
    }
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    const char *grp = "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"group\",\"members\":[\"m1\",\"m2\"],\"prefs\":[\"R1\"]}";
    itest_push(f, "g0", grp, "x", "m2");
    itest_expect(f, "g0", "x", "granted", "R1");       /* earliest: m1's, past */
    itest_push(f, "g1", grp, "x", "m1");
    expect_not_open(f, "g1", "x", future);              /* latest: m2's */
    itest_push(f, "g2", grp, "x", "m2");
    expect_not_open(f, "g2", "x", future);              /* leader m2 */
    itest_push(f, "g2", grp, "y", "m1");
    itest_expect(f, "g2", "y", "granted", "R1");       /* leader m1 */
}

/* A round's worth of slots (5,000 users): the running daemon reads the
 * hash again in HSCAN pages, not in one HGETALL that would block Redis
 * (slots_scan.h). Changes made while it is idle -- a slot moved later, one
 * moved earlier, one deleted -- hold for the very first requests dequeued
 * two seconds after them (the interval and its grace: slots_scan.h). */
static void choose(fixture *f, const char *id, const char *user)
{
    itest_push(f, "big", "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"R1\"}", id, user);
}

static void test_large_hash_read_in_pages(void **state)
{
    fixture *f = *state;
    itest_cmd(f->c, "HSET alloc:{big}:meta kind room");
    itest_cmd(f->c, "HSET alloc:{big}:capacity R1 10");
    long long future = harness_now_ms() + 3600000;
    for (int i = 0; i < 5000; i++) itest_cmd(f->c, "HSET alloc:{big}:slots u%d %lld", i, i == 10 ? 0 : future);
    itest_cmd(f->c, "SADD alloc:batches big");
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    choose(f, "a1", "u1");
    expect_not_open(f, "big", "a1", future);
    itest_cmd(f->c, "CONFIG RESETSTAT");
    itest_cmd(f->c, "HSET alloc:{big}:slots u10 %lld", future);   /* moved later */
    itest_cmd(f->c, "HSET alloc:{big}:slots u30 0");              /* moved earlier */
    itest_cmd(f->c, "HDEL alloc:{big}:slots u40");                /* deleted: the batch's opens_at */
    harness_sleep_ms(SLOTS_WAIT_MS);
    choose(f, "b10", "u10");
    expect_not_open(f, "big", "b10", future);
    choose(f, "b30", "u30");
    itest_expect(f, "big", "b30", "granted", "R1");
    choose(f, "b40", "u40");
    itest_expect(f, "big", "b40", "granted", "R1");
    choose(f, "b4999", "u4999");
    expect_not_open(f, "big", "b4999", future);                    /* the rest kept */
    /* the scan that saw the changes took several pages of about
     * SLOTS_SCAN_COUNT */
    char *info = harness_str(f->c, "INFO commandstats");
    assert_non_null(info);
    const char *h = strstr(info, "cmdstat_hscan:calls=");
    assert_non_null(h);
    assert_true(atol(h + strlen("cmdstat_hscan:calls=")) >= 3);
    free(info);
}

static void test_bad_file(void **state)
{
    fixture *f = *state;
    char csv[600];
    snprintf(csv, sizeof csv, "%s/bad.csv", f->redis.dir);
    write_file(csv, "user,points\nu1,5\nu2,five\n");
    assert_int_equal(itest_sh("%s/allocctl --redis %s batch slots d --from %s --start 0 --every 5m "
                              "--per-slot 40 --order points 2> %s/err.txt", harness_build_dir(), f->redis.url, csv,
                              f->redis.dir), 4);
    assert_int_equal(itest_sh("grep -q 'bad.csv:3: not an integer' %s/err.txt", f->redis.dir), 0);
    assert_int_equal(proc_int(f->c, "EXISTS alloc:{d}:slots"), 0);    /* nothing written */
    assert_int_equal(itest_sh("%s/allocctl --redis %s batch slots d --from %s --start 0 --every 5x "
                              "--per-slot 40 2>/dev/null", harness_build_dir(), f->redis.url, csv), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_slots_from_a_lottery_file),
        ITEST_CASE(test_group_slot_rules),
        ITEST_CASE(test_large_hash_read_in_pages),
        ITEST_CASE(test_bad_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
