/* test_waitlist.c -- waitlists end to end (contract 9.5) against a real
 * redis-server: a request with "wait":true that finds nothing gets
 * `waiting` with its place; cancel, expiry, release, switch and
 * set_capacity each serve the head in the same step; per_user is checked
 * again at serve time; the final result replaces `waiting` once (one
 * wait_served entry in the log); wait_ms and close end the wait; the
 * waitlist survives kill -9, also with units returned (expired) while the
 * daemon was down; with log_format = "chunk" the waitlist's extras
 * (wait_no, status, reason) ride in the chunk entries and verify rebuilds
 * the waitlist from them. */
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

/* A reservation's hold_ms where a test pushes and checks things while one
 * is still held (a cancel that must find it, a waiting request that must
 * not have been served yet): wide enough for those steps on a loaded
 * machine. Each test waits it out at most once, so it costs that long. */
enum { HOLD_MS = 3000 };

static void start(fixture *f)
{
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"wl\";"), 0);
}

/* The result of id once it is no longer `waiting` (10 s at most). */
static json_t *final_result(fixture *f, const char *b, const char *id)
{
    int64_t t0 = harness_now_ms();
    for (;;) {
        json_t *r = itest_result(f, b, id);
        if (strcmp(itest_jstr(r, "status"), "waiting") != 0) return r;
        json_decref(r);
        if (harness_now_ms() - t0 > 10000) fail_msg("%s is still waiting", id);
        harness_sleep_ms(10);
    }
}

static void expect_final(fixture *f, const char *b, const char *id, const char *status,
                         const char *detail)
{
    json_t *r = final_result(f, b, id);
    assert_string_equal(itest_jstr(r, "status"), status);
    if (detail)
        assert_string_equal(itest_jstr(r, strcmp(status, "rejected") ? "item" : "reason"), detail);
    json_decref(r);
}

static void expect_waiting(fixture *f, const char *b, const char *id, long long pos)
{
    json_t *r = itest_result(f, b, id);
    assert_string_equal(itest_jstr(r, "status"), "waiting");
    assert_int_equal(itest_jint(r, "wait_pos"), pos);
    assert_true(itest_jint(r, "wait_no") >= 1);
    assert_true(itest_jint(r, "seq") >= 1);
    json_decref(r);
}

static long long stat(fixture *f, const char *b, const char *field)
{
    return proc_int(f->c, "HGET alloc:{%s}:stats %s", b, field);
}

/* wait_served entries of the log for request id: the result replaced once. */
static int served_entries(fixture *f, const char *b, const char *id)
{
    json_t *log = itest_log(f->c, b), *ev;
    size_t i;
    int n = 0;
    json_array_foreach(log, i, ev)
        n += !strcmp(itest_jstr(ev, "type"), "wait_served") && !strcmp(itest_jstr(ev, "req"), id);
    json_decref(log);
    return n;
}

/* allocctl verify: the log rebuilds holders, free and the waitlist. */
static void verify(fixture *f, const char *b)
{
    assert_int_equal(itest_sh("%s/allocctl --redis %s verify %s >&2", harness_build_dir(), f->redis.url, b), 0);
}

/* verify notices a waiting request that vanished from P:{B}:waitlist. */
static void allocd_stop_and_tamper(fixture *f)
{
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    itest_cmd(f->c, "HDEL alloc:{d}:waitlist w5");
    const char *build = harness_build_dir();
    assert_int_not_equal(itest_sh("%s/allocctl --redis %s verify d 2>&1 | grep -q \"waitlist: request 'w5'\"; "
                                  "%s/allocctl --redis %s verify d >/dev/null 2>&1",
                                  build, f->redis.url, build, f->redis.url), 0);
    assert_int_equal(itest_sh("%s/allocctl --redis %s verify d 2>&1 | grep -q \"waitlist: request 'w5'\"",
                              build, f->redis.url), 0);
}

static char *order_of(fixture *f, const char *b, const char *id)
{
    json_t *r = final_result(f, b, id);
    assert_string_equal(itest_jstr(r, "status"), "granted");
    char *o = strdup(itest_jstr(r, "order"));
    json_decref(r);
    return o;
}

/* A stock batch; item "sku" (and "a", "b" when given) with its units. */
static void sale(fixture *f, const char *b, int per_user, int hold_ms, int wait_ms, int sku,
                 int a, int bb)
{
    itest_cmd(f->c, "HSET alloc:{%s}:meta kind stock per_user %d hold_ms %d wait_ms %d", b,
              per_user, hold_ms, wait_ms);
    if (sku >= 0) itest_cmd(f->c, "HSET alloc:{%s}:capacity sku %d", b, sku);
    if (a >= 0) itest_cmd(f->c, "HSET alloc:{%s}:capacity a %d b %d", b, a, bb);
    itest_cmd(f->c, "SADD alloc:batches %s", b);
}

static void test_stock_cancel_and_expiry_serve_the_head(void **state)
{
    fixture *f = *state;
    sale(f, "s", 1, HOLD_MS, 0, 1, -1, -1);
    start(f);
    itest_push(f, "s", "{\"id\":\"b1\",\"user\":\"ann\",\"op\":\"buy\",\"item\":\"sku\"}");
    char *o1 = order_of(f, "s", "b1");
    itest_push(f, "s", "{\"id\":\"w1\",\"user\":\"bob\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    itest_push(f, "s", "{\"id\":\"w2\",\"user\":\"cy\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    itest_push(f, "s", "{\"id\":\"n1\",\"user\":\"dan\",\"op\":\"buy\",\"item\":\"sku\"}");
    itest_expect(f, "s", "n1", "rejected", "sold_out");    /* without wait: as before */
    expect_waiting(f, "s", "w1", 1);
    expect_waiting(f, "s", "w2", 2);
    assert_int_equal(stat(f, "s", "waiting"), 2);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{s}:waitlist"), 2);
    /* the operator sees it: top's WAIT/SERVED, batch list, status */
    const char *build = harness_build_dir();
    assert_int_equal(itest_sh("%s/allocctl --redis %s top | grep -q ' 2/0 '", build, f->redis.url), 0);
    assert_int_equal(itest_sh("%s/allocctl --redis %s batch list | grep -q 'waiting=2.wait_served=0'", build,
                              f->redis.url), 0);
    assert_int_equal(itest_sh("%s/allocctl --redis %s status s | grep -q '^waiting  *2'", build,
                              f->redis.url), 0);
    /* ann cancels: bob is served in the same step, a reservation of his own */
    itest_push(f, "s", "{\"id\":\"k1\",\"user\":\"ann\",\"op\":\"cancel\",\"order\":\"%s\"}", o1);
    itest_expect(f, "s", "k1", "done", NULL);
    json_t *r = itest_result(f, "s", "w1");
    assert_string_equal(itest_jstr(r, "status"), "granted");
    assert_true(itest_jint(r, "expires_at") > 0);
    assert_int_equal(itest_jint(r, "rank"), 2);
    json_decref(r);
    expect_waiting(f, "s", "w2", 2);       /* the place it was given when it joined */
    /* bob never confirms: his reservation expires and cy gets it, with no request */
    expect_final(f, "s", "w2", "granted", "sku");
    assert_int_equal(stat(f, "s", "waiting"), 0);
    assert_int_equal(stat(f, "s", "wait_served"), 2);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{s}:waitlist"), 0);
    assert_int_equal(served_entries(f, "s", "w1"), 1);
    assert_int_equal(served_entries(f, "s", "w2"), 1);
    verify(f, "s");
    free(o1);
}

static void test_per_user_checked_again(void **state)
{
    fixture *f = *state;
    sale(f, "p", 1, 0, 0, -1, 1, 1);
    start(f);
    itest_push(f, "p", "{\"id\":\"g\",\"user\":\"owner\",\"op\":\"buy\",\"item\":\"a\"}");
    itest_expect(f, "p", "g", "granted", "a");
    itest_push(f, "p", "{\"id\":\"w1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"a\",\"wait\":true}");
    itest_push(f, "p", "{\"id\":\"w2\",\"user\":\"u2\",\"op\":\"buy\",\"item\":\"a\",\"wait\":true}");
    itest_push(f, "p", "{\"id\":\"x\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"b\"}");
    itest_expect(f, "p", "x", "granted", "b");
    expect_waiting(f, "p", "w1", 1);
    /* one more unit of a: u1 now holds per_user, so u1 gets `limit` and u2 the unit */
    itest_cmd(f->c, "RPUSH alloc:{p}:ctl {\"id\":\"c1\",\"op\":\"set_capacity\",\"item\":\"a\",\"capacity\":2}");
    itest_expect(f, "p", "c1", "done", NULL);
    expect_final(f, "p", "w1", "rejected", "limit");
    expect_final(f, "p", "w2", "granted", "a");
    assert_int_equal(served_entries(f, "p", "w1"), 1);
    assert_int_equal(stat(f, "p", "wait_served"), 2);
    assert_int_equal(proc_int(f->c, "HGET alloc:{p}:free a"), 0);
    verify(f, "p");
}

static void test_wait_ms_and_close(void **state)
{
    fixture *f = *state;
    /* long enough that w1 is seen waiting before it runs out, under load */
    enum { WAIT_MS = 2000 };
    sale(f, "t", 1, 0, WAIT_MS, 0, -1, -1);
    /* the close half on a batch without wait_ms: only the close can end w2 */
    sale(f, "t2", 1, 0, 0, 0, -1, -1);
    start(f);
    int64_t pushed = harness_now_ms();
    itest_push(f, "t", "{\"id\":\"w1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    expect_waiting(f, "t", "w1", 1);
    int64_t t0 = harness_now_ms();
    expect_final(f, "t", "w1", "rejected", "sold_out");   /* no request needed */
    /* ended by wait_ms: not before it ran out (it joined after the push),
     * and seen within 4.3 s after */
    assert_true(harness_now_ms() - pushed >= WAIT_MS);
    assert_true(harness_now_ms() - t0 < WAIT_MS + 4300);
    assert_int_equal(stat(f, "t", "wait_ended"), 1);
    itest_push(f, "t2", "{\"id\":\"w2\",\"user\":\"u2\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    expect_waiting(f, "t2", "w2", 1);
    itest_cmd(f->c, "RPUSH alloc:{t2}:ctl {\"id\":\"c1\",\"op\":\"close\"}");
    itest_expect(f, "t2", "c1", "done", NULL);
    itest_expect(f, "t2", "w2", "rejected", "sold_out");   /* in the same step as the close */
    assert_int_equal(stat(f, "t2", "waiting"), 0);
    assert_int_equal(stat(f, "t2", "wait_ended"), 1);
    assert_int_equal(served_entries(f, "t2", "w2"), 1);
}

static void test_rooms_release_switch_and_capacity(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "d", "kind room", "R1 1 R2 2", NULL);
    start(f);
    itest_push(f, "d", "{\"id\":\"a\",\"user\":\"s1\",\"op\":\"choose\",\"room\":\"R1\"}");
    itest_expect(f, "d", "a", "granted", "R1");
    itest_push(f, "d", "{\"id\":\"w2\",\"user\":\"s2\",\"op\":\"choose\",\"room\":\"R1\",\"wait\":true}");
    itest_push(f, "d", "{\"id\":\"w3\",\"user\":\"s3\",\"op\":\"auto\",\"prefs\":[\"R1\"],\"wait\":true}");
    expect_waiting(f, "d", "w2", 1);
    expect_waiting(f, "d", "w3", 2);
    /* switch frees R1's bed: s2 gets it */
    itest_push(f, "d", "{\"id\":\"sw\",\"user\":\"s1\",\"op\":\"switch\",\"room\":\"R2\"}");
    itest_expect(f, "d", "sw", "granted", "R2");
    itest_expect(f, "d", "w2", "granted", "R1");
    expect_waiting(f, "d", "w3", 2);
    /* release: s3 */
    itest_push(f, "d", "{\"id\":\"rl\",\"user\":\"s2\",\"op\":\"release\"}");
    itest_expect(f, "d", "rl", "done", "R1");
    itest_expect(f, "d", "w3", "granted", "R1");
    /* set_capacity adds a bed: s4, waiting for R1, is seated */
    itest_push(f, "d", "{\"id\":\"w4\",\"user\":\"s4\",\"op\":\"choose\",\"room\":\"R1\",\"wait\":true}");
    expect_waiting(f, "d", "w4", 1);
    itest_cmd(f->c, "RPUSH alloc:{d}:ctl {\"id\":\"c1\",\"op\":\"set_capacity\",\"item\":\"R1\",\"capacity\":2}");
    itest_expect(f, "d", "c1", "done", NULL);
    itest_expect(f, "d", "w4", "granted", "R1");
    char *h = harness_str(f->c, "HGET alloc:{d}:holders s4");
    assert_non_null(strstr(h, "\"R1\""));
    free(h);
    assert_int_equal(stat(f, "d", "wait_served"), 3);
    itest_push(f, "d", "{\"id\":\"w5\",\"user\":\"s5\",\"op\":\"choose\",\"room\":\"R1\",\"wait\":true}");
    expect_waiting(f, "d", "w5", 1);
    verify(f, "d");                          /* with one still waiting */
    allocd_stop_and_tamper(f);
}

/* A waiting group needs a room with beds for all; the single behind it is
 * served first when only one bed comes back. */
static void test_group_does_not_block(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "g", "kind room groups listed", "R3 3", NULL);   /* the group names its members */
    start(f);
    for (int i = 0; i < 3; i++) {
        itest_push(f, "g", "{\"id\":\"o%d\",\"user\":\"o%d\",\"op\":\"choose\",\"room\":\"R3\"}", i, i);
        char id[16];
        snprintf(id, sizeof id, "o%d", i);
        itest_expect(f, "g", id, "granted", "R3");
    }
    itest_push(f, "g", "{\"id\":\"grp\",\"user\":\"g1\",\"op\":\"group\",\"members\":[\"g1\",\"g2\"],"
                       "\"prefs\":[\"R3\"],\"wait\":true}");
    itest_push(f, "g", "{\"id\":\"one\",\"user\":\"s9\",\"op\":\"auto\",\"prefs\":[\"R3\"],\"wait\":true}");
    expect_waiting(f, "g", "one", 2);
    itest_push(f, "g", "{\"id\":\"r0\",\"user\":\"o0\",\"op\":\"release\"}");
    itest_expect(f, "g", "r0", "done", NULL);
    itest_expect(f, "g", "one", "granted", "R3");
    expect_waiting(f, "g", "grp", 1);
    itest_push(f, "g", "{\"id\":\"r1\",\"user\":\"o1\",\"op\":\"release\"}");
    itest_push(f, "g", "{\"id\":\"r2\",\"user\":\"o2\",\"op\":\"release\"}");
    json_t *r = final_result(f, "g", "grp");
    assert_string_equal(itest_jstr(r, "status"), "granted");
    assert_int_equal(json_array_size(json_object_get(r, "members")), 2);
    json_decref(r);
}

/* kill -9 with a waitlist, and a reservation that runs out while the
 * daemon is down: at the restart the units go to the head of the loaded
 * waitlist, and the rest of it is still there, in order. */
static void test_kill9_loses_nothing(void **state)
{
    fixture *f = *state;
    sale(f, "k", 1, HOLD_MS, 0, 1, -1, -1);
    start(f);
    itest_push(f, "k", "{\"id\":\"b1\",\"user\":\"ann\",\"op\":\"buy\",\"item\":\"sku\"}");
    json_t *r = final_result(f, "k", "b1");
    assert_string_equal(itest_jstr(r, "status"), "granted");
    int64_t ann_expires = itest_jint(r, "expires_at");
    json_decref(r);
    itest_push(f, "k", "{\"id\":\"w1\",\"user\":\"bob\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    itest_push(f, "k", "{\"id\":\"w2\",\"user\":\"cy\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    expect_waiting(f, "k", "w2", 2);
    assert_true(harness_now_ms() < ann_expires);   /* killed while ann still holds it */
    harness_allocd_kill(&f->allocd);
    /* ann's reservation runs out meanwhile: allocd reads the same wall
     * clock, so past expires_at it is due at the restart whatever the load */
    while (harness_now_ms() <= ann_expires + 100) harness_sleep_ms(20);
    expect_waiting(f, "k", "w1", 1);        /* nobody served it yet */
    start(f);
    itest_push(f, "k", "{\"id\":\"w3\",\"user\":\"dan\",\"op\":\"buy\",\"item\":\"sku\",\"wait\":true}");
    expect_final(f, "k", "w1", "granted", "sku");
    expect_waiting(f, "k", "w2", 2);
    r = itest_result(f, "k", "w3");
    assert_string_equal(itest_jstr(r, "status"), "waiting");
    assert_int_equal(itest_jint(r, "wait_no"), 3);        /* tickets go on after a restart */
    assert_int_equal(itest_jint(r, "wait_pos"), 2);
    json_decref(r);
    char *ob = order_of(f, "k", "w1");
    itest_push(f, "k", "{\"id\":\"k1\",\"user\":\"bob\",\"op\":\"cancel\",\"order\":\"%s\"}", ob);
    itest_expect(f, "k", "k1", "done", NULL);
    expect_final(f, "k", "w2", "granted", "sku");
    expect_waiting(f, "k", "w3", 2);
    assert_int_equal(served_entries(f, "k", "w1"), 1);
    assert_int_equal(stat(f, "k", "waiting"), 1);
    assert_int_equal(stat(f, "k", "wait_joined"), 3);
    verify(f, "k");
    free(ob);
}

/* ---- log_format = "chunk": the waitlist's extras in chunk entries ---- */

/* Every entry of the log is a chunk entry; returns the sum of their n and
 * the events array of every entry, concatenated (caller frees). */
static char *chunk_log(fixture *f, const char *b, long long *events, long long *entries)
{
    redisReply *x = redisCommand(f->c, "XRANGE alloc:{%s}:log - +", b);
    assert_non_null(x);
    size_t cap = 1, len = 0;
    char *all = calloc(1, cap);
    *events = *entries = 0;
    for (size_t i = 0; i < x->elements; i++) {
        redisReply *kv = x->element[i]->element[1];
        const char *format = NULL, *n = NULL, *ev = NULL;
        for (size_t j = 0; j + 1 < kv->elements; j += 2) {
            if (!strcmp(kv->element[j]->str, "format")) format = kv->element[j + 1]->str;
            if (!strcmp(kv->element[j]->str, "n")) n = kv->element[j + 1]->str;
            if (!strcmp(kv->element[j]->str, "events")) ev = kv->element[j + 1]->str;
        }
        if (!format || strcmp(format, "chunk") || !n || !ev)
            fail_msg("log entry %s is not a chunk entry", x->element[i]->element[0]->str);
        json_t *arr = json_loads(ev, 0, NULL);
        assert_int_equal(json_array_size(arr), atoll(n));
        json_decref(arr);
        *events += atoll(n);
        (*entries)++;
        size_t l = strlen(ev);
        all = realloc(all, cap += l + 1);
        memcpy(all + len, ev, l);
        all[len += l] = '\n';
        all[++len] = '\0';
    }
    freeReplyObject(x);
    return all;
}

static void expect_in(const char *text, const char *needle)
{
    if (!strstr(text, needle)) fail_msg("%s is not in:\n%s", needle, text);
}

/* Whether the events a and b are in the same entry of chunk_log's text. */
static int same_entry(const char *log, const char *a, const char *b)
{
    const char *at = strstr(log, a);
    if (!at) return 0;
    while (at > log && at[-1] != '\n') at--;
    const char *eol = strchr(at, '\n'), *bt = strstr(at, b);
    return bt && bt < eol;
}

/* The story: ann's cancel serves the head (bob refused by per_user, cy
 * granted), cy's expiry serves dan, eve waits; allocd stops at rest. */
static void chunk_story(fixture *f)
{
    sale(f, "c", 1, HOLD_MS, 0, -1, 1, 1);   /* a: 1 unit, b: 1 unit */
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"wl\";\nlog_format = \"chunk\";"), 0);
    itest_push(f, "c", "{\"id\":\"b1\",\"user\":\"ann\",\"op\":\"buy\",\"item\":\"a\"}");
    char *o1 = order_of(f, "c", "b1");
    itest_push(f, "c", "{\"id\":\"w1\",\"user\":\"bob\",\"op\":\"buy\",\"item\":\"a\",\"wait\":true}");
    itest_push(f, "c", "{\"id\":\"w2\",\"user\":\"cy\",\"op\":\"buy\",\"item\":\"a\",\"wait\":true}");
    itest_push(f, "c", "{\"id\":\"w3\",\"user\":\"dan\",\"op\":\"buy\",\"item\":\"a\",\"wait\":true}");
    itest_push(f, "c", "{\"id\":\"x\",\"user\":\"bob\",\"op\":\"buy\",\"item\":\"b\"}");
    itest_expect(f, "c", "x", "granted", "b");       /* bob now holds per_user */
    expect_waiting(f, "c", "w3", 3);
    /* ann cancels: bob is refused (limit), cy gets the unit -- one step */
    itest_push(f, "c", "{\"id\":\"k1\",\"user\":\"ann\",\"op\":\"cancel\",\"order\":\"%s\"}", o1);
    itest_expect(f, "c", "k1", "done", NULL);
    itest_expect(f, "c", "w1", "rejected", "limit");
    itest_expect(f, "c", "w2", "granted", "a");
    /* cy never confirms: the expiry serves dan, who confirms at once */
    char *o3 = order_of(f, "c", "w3");
    itest_push(f, "c", "{\"id\":\"c3\",\"user\":\"dan\",\"op\":\"confirm\",\"order\":\"%s\"}", o3);
    itest_expect(f, "c", "c3", "done", NULL);
    itest_push(f, "c", "{\"id\":\"w4\",\"user\":\"eve\",\"op\":\"buy\",\"item\":\"a\",\"wait\":true}");
    expect_waiting(f, "c", "w4", 1);
    assert_int_equal(stat(f, "c", "wait_served"), 3);
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    free(o1);
    free(o3);
}

/* The log: chunk entries only, some with several events, and the
 * waitlist's extras in them (wait_no; status and reason when served).
 * Returns how many events it holds. */
static long long chunk_log_has_extras(fixture *f)
{
    long long events, entries;
    char *log = chunk_log(f, "c", &events, &entries);
    assert_true(events > entries);
    expect_in(log, "[\"wait_served\",\"bob\",\"\",0,\"\",\"w1\",");
    expect_in(log, "{\"wait_no\":1,\"status\":\"rejected\",\"reason\":\"limit\"}");
    expect_in(log, "{\"wait_no\":2,\"status\":\"granted\"}");
    expect_in(log, "{\"wait_no\":3,\"status\":\"granted\"}");
    expect_in(log, "\"wait\",\"eve\",\"a\",1,\"\",\"w4\",");
    expect_in(log, "{\"wait_no\":4}");
    /* served in the step that gave the unit back */
    assert_true(same_entry(log, "[\"cancel\",\"ann\"", "[\"wait_served\",\"cy\""));
    assert_true(same_entry(log, "[\"cancel\",\"ann\"", "[\"wait_served\",\"bob\""));
    assert_true(same_entry(log, "[\"expire\",\"cy\"", "[\"wait_served\",\"dan\""));
    free(log);
    return events;
}

/* verify replays every event, not every entry, and the waitlist from the
 * extras. */
static void chunk_verify_replays(fixture *f, long long events)
{
    char *out;
    int rc = itest_ctl(f, &out, "verify c");
    if (rc != 0) fail_msg("verify of the chunk log: exit %d\n%s", rc, out);
    char want[64];
    snprintf(want, sizeof want, "replayed %lld log entries (", events);
    expect_in(out, want);
    expect_in(out, "wait 4, wait_served 3,");
    expect_in(out, "waiting: 1\n");
    free(out);
}

/* A hand-altered ticket in P:{c}:waitlist is named, and so is a waiting
 * request that is not on it; restored, verify passes. */
static void chunk_verify_names_altered_ticket(fixture *f)
{
    char *out;
    int rc;
    char *w4 = harness_str(f->c, "HGET alloc:{c}:waitlist w4");
    assert_non_null(w4);
    json_t *doc = json_loads(w4, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(doc, "no")), 4);
    json_object_set_new(doc, "no", json_integer(9));
    char *bad = json_dumps(doc, JSON_COMPACT);
    itest_cmd(f->c, "HSET alloc:{c}:waitlist w4 %s", bad);
    rc = itest_ctl(f, &out, "verify c");
    assert_int_not_equal(rc, 0);
    if (!strstr(out, "waitlist[w4]: ticket 9, the log says 4")) fail_msg("verify says:\n%s", out);
    free(out);
    /* and a waiting request that is not on it */
    itest_cmd(f->c, "HDEL alloc:{c}:waitlist w4");
    rc = itest_ctl(f, &out, "verify c");
    assert_int_not_equal(rc, 0);
    if (!strstr(out, "waitlist: request 'w4' (ticket 4)")) fail_msg("verify says:\n%s", out);
    free(out);
    itest_cmd(f->c, "HSET alloc:{c}:waitlist w4 %s", w4);
    rc = itest_ctl(f, &out, "verify c");
    if (rc != 0) fail_msg("verify after the restore: exit %d\n%s", rc, out);
    free(out);
    free(bad);
    json_decref(doc);
    free(w4);
}

/* The same story as the event-format tests, logged in chunks: cancel and
 * expiry serve the head (one refused at serve time by per_user, with its
 * reason), and verify rebuilds holders, free and the waitlist from the
 * chunks' extras alone; a hand-altered P:{B}:waitlist is reported. */
static void test_chunk_log_carries_the_waitlist(void **state)
{
    fixture *f = *state;
    chunk_story(f);
    chunk_verify_replays(f, chunk_log_has_extras(f));
    chunk_verify_names_altered_ticket(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_stock_cancel_and_expiry_serve_the_head),
        ITEST_CASE(test_per_user_checked_again),
        ITEST_CASE(test_wait_ms_and_close),
        ITEST_CASE(test_rooms_release_switch_and_capacity),
        ITEST_CASE(test_group_does_not_block),
        ITEST_CASE(test_kill9_loses_nothing),
        ITEST_CASE(test_chunk_log_carries_the_waitlist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
