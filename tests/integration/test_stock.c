/* test_stock.c -- stock batches end to end: the real allocd against a real
 * redis-server. Requests are pushed exactly as a producer would (RPUSH, or
 * the MULTI position transaction of the contract), results are read from
 * P:{B}:results, and the final free/holders/stats are checked against what
 * the pushed requests must have produced -- including after kill -9. */
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

/* meta: "field value field value ..." */
static void create_batch(redisContext *c, const char *b, const char *meta,
                         const char *items[], const int caps[], size_t n)
{
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:meta", b);
    redisReply *r = redisCommand(c, "DEL %s", key);
    freeReplyObject(r);
    char line[512];
    snprintf(line, sizeof line, "HSET %s %s", key, meta);
    itest_cmd(c, line);
    for (size_t i = 0; i < n; i++) itest_cmd(c, "HSET alloc:{%s}:capacity %s %d", b, items[i], caps[i]);
    itest_cmd(c, "SADD alloc:batches %s", b);
}

static void push(redisContext *c, const char *b, const char *json)
{
    itest_cmd(c, "RPUSH alloc:{%s}:queue %s", b, json);
}

static void push_buy(redisContext *c, const char *b, const char *id, const char *user,
                     const char *item, int qty)
{
    char json[256];
    snprintf(json, sizeof json, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"%s\",\"qty\":%d}",
             id, user, item, qty);
    push(c, b, json);
}

static long long hget_int(fixture *f, const char *b, const char *name, const char *field)
{
    return proc_int(f->c, "HGET alloc:{%s}:%s %s", b, name, field);
}

/* ------------------------------------------------------------------ */

static void test_buy_and_every_rejection(void **state)
{
    fixture *f = *state;
    const char *items[] = { "sku1", "sku2" };
    int caps[] = { 3, 1 };
    create_batch(f->c, "s1", "kind stock per_user 2", items, caps, 2);
    itest_start(f, NULL);
    push_buy(f->c, "s1", "r1", "alice", "sku1", 2);
    push_buy(f->c, "s1", "r2", "alice", "sku1", 1);      /* over per_user */
    push_buy(f->c, "s1", "r3", "bob", "sku1", 2);        /* only 1 left */
    push_buy(f->c, "s1", "r4", "bob", "sku1", 1);        /* exactly the last */
    push_buy(f->c, "s1", "r5", "carol", "sku1", 1);      /* none left */
    push_buy(f->c, "s1", "r6", "carol", "nope", 1);
    push(f->c, "s1", "{\"id\":\"r7\",\"user\":\"carol\",\"op\":\"choose\",\"room\":\"R1\"}");
    push_buy(f->c, "s1", "r8", "carol", "sku2", 1);
    itest_expect(f, "s1", "r1", "granted", NULL);
    itest_expect(f, "s1", "r2", "rejected", "limit");
    itest_expect(f, "s1", "r3", "rejected", "sold_out");
    itest_expect(f, "s1", "r4", "granted", NULL);
    itest_expect(f, "s1", "r5", "rejected", "sold_out");
    itest_expect(f, "s1", "r6", "rejected", "unknown_item");
    itest_expect(f, "s1", "r7", "rejected", "wrong_kind");
    itest_expect(f, "s1", "r8", "granted", NULL);

    json_t *r = itest_result(f, "s1", "r1");
    assert_string_equal(itest_jstr(r, "user"), "alice");
    assert_string_equal(itest_jstr(r, "op"), "buy");
    assert_string_equal(itest_jstr(r, "item"), "sku1");
    assert_int_equal(itest_jint(r, "qty"), 2);
    assert_int_equal(itest_jint(r, "seq"), 1);
    assert_int_equal(itest_jint(r, "rank"), 1);
    assert_true(strlen(itest_jstr(r, "order")) >= 10);
    assert_true(itest_jint(r, "at") > 1700000000000LL);
    json_decref(r);
    r = itest_result(f, "s1", "r8");
    assert_int_equal(itest_jint(r, "rank"), 3);
    assert_int_equal(itest_jint(r, "seq"), 8);
    json_decref(r);

    assert_int_equal(hget_int(f, "s1", "free", "sku1"), 0);
    assert_int_equal(hget_int(f, "s1", "free", "sku2"), 0);
    char *h = harness_str(f->c, "HGET alloc:{s1}:holders alice");
    json_error_t e;
    json_t *hold = json_loads(h, 0, &e);
    assert_int_equal(itest_jint(hold, "units"), 2);
    json_t *orders = json_object_get(hold, "orders");
    assert_int_equal(json_array_size(orders), 1);
    assert_string_equal(itest_jstr(json_array_get(orders, 0), "state"), "confirmed");
    json_decref(hold);
    free(h);
    assert_int_equal(hget_int(f, "s1", "stats", "dequeued"), 8);
    assert_int_equal(hget_int(f, "s1", "stats", "processed"), 8);
    assert_int_equal(hget_int(f, "s1", "stats", "granted"), 3);
    assert_int_equal(hget_int(f, "s1", "stats", "rejected"), 5);
    assert_int_equal(hget_int(f, "s1", "stats", "participants"), 3);
    assert_int_equal(hget_int(f, "s1", "stats", "free_units"), 0);
    char *st = harness_str(f->c, "HGET alloc:{s1}:stats state");
    assert_string_equal(st, "open");
    free(st);
    assert_int_equal(itest_log_len(f->c, "s1"), 3);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{s1}:queue"), 0);
}

static void test_garbage_between_valid_requests(void **state)
{
    fixture *f = *state;
    const char *items[] = { "sku1" };
    int caps[] = { 100 };
    create_batch(f->c, "g1", "kind stock per_user 5", items, caps, 1);
    itest_start(f, NULL);
    push_buy(f->c, "g1", "v1", "u1", "sku1", 1);
    push(f->c, "g1", "{\"id\":\"broken\"");
    push(f->c, "g1", "not json at all");
    push(f->c, "g1", "{\"user\":\"u2\",\"op\":\"buy\"}");
    push(f->c, "g1", "{\"id\":\"i1\",\"user\":\"u2\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":\"x\"}");
    push(f->c, "g1", "{\"id\":\"i2\",\"user\":\"u2\",\"op\":\"fly\"}");
    itest_cmd(f->c, "RPUSH alloc:{g1}:queue %b", "\xff\xfe\x00garbage", (size_t)10);
    push_buy(f->c, "g1", "v2", "u3", "sku1", 2);
    itest_expect(f, "g1", "v1", "granted", NULL);
    itest_expect(f, "g1", "i1", "invalid", "bad_request");
    itest_expect(f, "g1", "v2", "granted", NULL);
    json_t *r = itest_result(f, "g1", "i2");
    assert_string_equal(itest_jstr(r, "status"), "invalid");
    assert_non_null(strstr(itest_jstr(r, "detail"), "unknown op"));
    json_decref(r);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{g1}:dead"), 4);
    char *d = harness_str(f->c, "LINDEX alloc:{g1}:dead 0");
    json_error_t e;
    json_t *dead = json_loads(d, 0, &e);
    assert_non_null(dead);
    assert_string_equal(itest_jstr(dead, "raw"), "{\"id\":\"broken\"");
    assert_non_null(strstr(itest_jstr(dead, "error"), "invalid JSON"));
    assert_true(itest_jint(dead, "at") > 0);
    json_decref(dead);
    free(d);
    d = harness_str(f->c, "LINDEX alloc:{g1}:dead 3");
    dead = json_loads(d, JSON_ALLOW_NUL, &e); /* the raw had a NUL byte */
    assert_non_null(dead);
    assert_string_equal(itest_jstr(dead, "raw_base64"), "//4AZ2FyYmFnZQ==");
    json_decref(dead);
    free(d);
    assert_int_equal(hget_int(f, "g1", "stats", "dead"), 4);
    assert_int_equal(hget_int(f, "g1", "stats", "invalid"), 2);
    assert_int_equal(hget_int(f, "g1", "free", "sku1"), 97);
}

static void test_resubmitted_ids_are_not_applied_again(void **state)
{
    fixture *f = *state;
    const char *items[] = { "sku1" };
    int caps[] = { 10 };
    create_batch(f->c, "d1", "kind stock per_user 10", items, caps, 1);
    push_buy(f->c, "d1", "same", "u1", "sku1", 1);
    push_buy(f->c, "d1", "same", "u1", "sku1", 1);   /* same chunk */
    itest_start(f, NULL);
    itest_expect(f, "d1", "same", "granted", NULL);
    json_t *first = itest_result(f, "d1", "same");
    push_buy(f->c, "d1", "same", "u1", "sku1", 5);   /* a later chunk */
    push_buy(f->c, "d1", "marker", "u2", "sku1", 1);
    itest_expect(f, "d1", "marker", "granted", NULL);
    json_t *again = itest_result(f, "d1", "same");
    assert_true(json_equal(first, again));
    json_decref(first);
    json_decref(again);
    assert_int_equal(hget_int(f, "d1", "free", "sku1"), 8);
    assert_int_equal(hget_int(f, "d1", "stats", "duplicates"), 2);
    assert_int_equal(hget_int(f, "d1", "stats", "dequeued"), 4);
}

/* A batch that an earlier run (or an older allocd) left behind: an id with
 * a result before this start is still a duplicate (the idfilter is loaded
 * from results), participants kept in a set are turned into the list, and a
 * request left in the old processing list is decided with its own seq. */
static void test_state_left_by_an_earlier_run(void **state)
{
    fixture *f = *state;
    const char *items[] = { "sku1" };
    int caps[] = { 10 };
    create_batch(f->c, "e1", "kind stock per_user 10", items, caps, 1);
    redisReply *r = redisCommand(f->c, "HSET alloc:{e1}:results old {\"id\":\"old\",\"status\":\"granted\",\"marker\":1}");
    freeReplyObject(r);
    r = redisCommand(f->c, "SADD alloc:{e1}:participants u1 u2");
    freeReplyObject(r);
    /* the old take had moved p1 (the 2nd request ever) and counted it */
    r = redisCommand(f->c, "RPUSH alloc:{e1}:processing {\"id\":\"p1\",\"user\":\"u4\",\"op\":\"buy\",\"item\":\"sku1\"}");
    freeReplyObject(r);
    r = redisCommand(f->c, "HSET alloc:{e1}:stats dequeued 2 processed 1 granted 1 participants 2");
    freeReplyObject(r);
    push_buy(f->c, "e1", "old", "u1", "sku1", 1);
    push_buy(f->c, "e1", "new", "u3", "sku1", 1);
    itest_start(f, NULL);
    itest_expect(f, "e1", "new", "granted", NULL);
    itest_expect(f, "e1", "p1", "granted", NULL);
    json_t *p1 = itest_result(f, "e1", "p1");
    assert_int_equal(json_integer_value(json_object_get(p1, "seq")), 2);
    json_decref(p1);
    assert_int_equal(proc_int(f->c, "EXISTS alloc:{e1}:processing"), 0);
    assert_int_equal(hget_int(f, "e1", "stats", "dequeued"), 4);
    char *old = harness_str(f->c, "HGET alloc:{e1}:results old");
    assert_non_null(strstr(old, "\"marker\":1"));
    free(old);
    assert_int_equal(hget_int(f, "e1", "stats", "duplicates"), 1);
    assert_int_equal(hget_int(f, "e1", "stats", "participants"), 4);
    assert_int_equal(hget_int(f, "e1", "free", "sku1"), 8);
    char *type = harness_str(f->c, "TYPE alloc:{e1}:participants");
    assert_string_equal(type, "list");
    free(type);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{e1}:participants"), 4);
}

static void test_queue_position_is_exact(void **state)
{
    fixture *f = *state;
    const char *items[] = { "sku1" };
    int caps[] = { 1000 };
    create_batch(f->c, "p1", "kind stock per_user 1", items, caps, 1);
    itest_start(f, NULL);
    /* push in waves while allocd drains; every ordinal must equal the seq
     * the daemon later reports for that request */
    char id[32], json[256];
    long long ordinals[600];
    for (int i = 0; i < 600; i++) {
        snprintf(id, sizeof id, "q%d", i);
        snprintf(json, sizeof json, "{\"id\":\"%s\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku1\"}", id, i);
        redisAppendCommand(f->c, "MULTI");
        redisAppendCommand(f->c, "RPUSH alloc:{p1}:queue %s", json);
        redisAppendCommand(f->c, "HGET alloc:{p1}:stats dequeued");
        redisAppendCommand(f->c, "EXEC");
        redisReply *r;
        for (int k = 0; k < 3; k++) { assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK); freeReplyObject(r); }
        assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        long long l = r->element[0]->integer;
        long long d = r->element[1]->type == REDIS_REPLY_STRING ? atoll(r->element[1]->str) : 0;
        ordinals[i] = l + d;
        freeReplyObject(r);
        if (i % 97 == 0) harness_sleep_ms(5);
    }
    for (int i = 0; i < 600; i++) {
        snprintf(id, sizeof id, "q%d", i);
        json_t *r = itest_result(f, "p1", id);
        if (itest_jint(r, "seq") != ordinals[i]) fail_msg("%s: ordinal %lld, seq %lld", id, ordinals[i], itest_jint(r, "seq"));
        json_decref(r);
    }
}

static void test_not_open_and_closed(void **state)
{
    fixture *f = *state;
    const char *items[] = { "sku1" };
    int caps[] = { 10 };
    char meta[128];
    long long now = harness_now_ms();
    snprintf(meta, sizeof meta, "kind stock opens_at %lld", now + 3600 * 1000);
    create_batch(f->c, "w1", meta, items, caps, 1);
    snprintf(meta, sizeof meta, "kind stock closes_at %lld", now - 1000);
    create_batch(f->c, "c1", meta, items, caps, 1);
    itest_start(f, NULL);
    push_buy(f->c, "w1", "early", "u1", "sku1", 1);
    push_buy(f->c, "c1", "late", "u1", "sku1", 1);
    itest_expect(f, "w1", "early", "rejected", "not_open");
    itest_expect(f, "c1", "late", "rejected", "closed");
    json_t *r = itest_result(f, "w1", "early");   /* contract 9.6 */
    assert_int_equal(itest_jint(r, "opens_at"), now + 3600 * 1000);
    json_decref(r);
    char *st = harness_str(f->c, "HGET alloc:{w1}:stats state");
    assert_string_equal(st, "waiting");
    free(st);
    st = harness_str(f->c, "HGET alloc:{c1}:stats state");
    assert_string_equal(st, "closed");
    free(st);
}

static void test_batches_come_and_go_without_restart(void **state)
{
    fixture *f = *state;
    itest_start(f, "registry_interval_ms = 200;");
    assert_int_equal(itest_wait_log(&f->allocd, "started:", 1, 10000), 1);
    const char *items[] = { "sku1" };
    int caps[] = { 2 };
    create_batch(f->c, "late1", "kind stock", items, caps, 1);
    push_buy(f->c, "late1", "x1", "u1", "sku1", 1);
    int64_t t0 = harness_now_ms();
    itest_expect(f, "late1", "x1", "granted", NULL);
    assert_true(harness_now_ms() - t0 < 5000);   /* found by the registry, not at a restart */
    itest_cmd(f->c, "SREM alloc:batches late1");
    assert_int_equal(itest_wait_log(&f->allocd, "batch late1: no longer listed", 1, 10000), 1);
    push_buy(f->c, "late1", "x2", "u2", "sku1", 1);
    harness_sleep_ms(800);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{late1}:results x2"), 0);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{late1}:queue"), 1);
    itest_cmd(f->c, "SADD alloc:batches late1");
    itest_expect(f, "late1", "x2", "granted", NULL);
}

/* The kill -9 test's size: buys, users, items, repeated ids. */
enum { K9_N = 30000, K9_USERS = 5000, K9_ITEMS = 20, K9_REPEATS = 500 };

/* K9_N buys, the last K9_REPEATS ids repeating earlier ones, pipelined. */
static void push_k9(fixture *f)
{
    char json[256];
    for (int i = 0; i < K9_N; i++) {
        snprintf(json, sizeof json, "{\"id\":\"k%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku%d\",\"qty\":%d}",
                 i % (K9_N - K9_REPEATS), (i * 7919) % K9_USERS, (i * 31) % K9_ITEMS, 1 + i % 2);
        redisAppendCommand(f->c, "RPUSH alloc:{k1}:queue %s", json);
    }
    for (int i = 0; i < K9_N; i++) {
        redisReply *r;
        assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
}

/* Units the holders hold, per item, into held (each holder within
 * per_user 3, its orders adding up to its units). */
static void held_units(fixture *f, long long held[K9_ITEMS])
{
    redisReply *h = redisCommand(f->c, "HGETALL alloc:{k1}:holders");
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        json_error_t e;
        json_t *doc = json_loads(h->element[i + 1]->str, 0, &e);
        long long units = itest_jint(doc, "units"), sum = 0;
        assert_true(units <= 3);
        size_t k;
        json_t *o;
        json_array_foreach(json_object_get(doc, "orders"), k, o) {
            int item = atoi(itest_jstr(o, "item") + 3);
            held[item] += itest_jint(o, "qty");
            sum += itest_jint(o, "qty");
        }
        assert_int_equal(sum, units);
        json_decref(doc);
    }
    freeReplyObject(h);
}

/* Units the granted results give, and the highest rank among them. */
static long long granted_in_results(fixture *f, long long *rank_max)
{
    long long granted = 0;
    *rank_max = 0;
    redisReply *res = redisCommand(f->c, "HGETALL alloc:{k1}:results");
    for (size_t i = 0; i + 1 < res->elements; i += 2) {
        json_error_t e;
        json_t *doc = json_loads(res->element[i + 1]->str, 0, &e);
        if (!strcmp(itest_jstr(doc, "status"), "granted")) {
            granted += itest_jint(doc, "qty");
            if (itest_jint(doc, "rank") > *rank_max) *rank_max = itest_jint(doc, "rank");
        }
        json_decref(doc);
    }
    freeReplyObject(res);
    return granted;
}

/* The promise of the product: kill -9 at any moment loses nothing and
 * applies nothing twice. */
static void test_kill9_loses_nothing(void **state)
{
    fixture *f = *state;
    const char *items[K9_ITEMS];
    int caps[K9_ITEMS];
    char names[K9_ITEMS][16];
    for (int i = 0; i < K9_ITEMS; i++) {
        snprintf(names[i], sizeof names[i], "sku%d", i);
        items[i] = names[i];
        caps[i] = 300;
    }
    create_batch(f->c, "k1", "kind stock per_user 3", items, caps, K9_ITEMS);
    push_k9(f);
    int kills = 0;
    srand(12345);
    for (int round = 0; round < 8; round++) {
        itest_start(f, "chunk = 256; instance = \"k\";");
        harness_sleep_ms(40 + rand() % 120);
        harness_allocd_kill(&f->allocd);
        kills++;
    }
    itest_start(f, "chunk = 256; instance = \"k\";");
    long long distinct = K9_N - K9_REPEATS;
    long long got = harness_wait_hlen(f->c, "alloc:{k1}:results", distinct, 60000);
    assert_int_equal(got, distinct);
    for (int w = 0; w < 500 && proc_int(f->c, "HGET alloc:{k1}:stats dequeued") < K9_N; w++) harness_sleep_ms(10);
    harness_sleep_ms(200);
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);

    /* units: free + what holders hold == capacity, per item */
    long long held[K9_ITEMS] = { 0 }, granted_units = 0;
    held_units(f, held);
    for (int i = 0; i < K9_ITEMS; i++) {
        assert_int_equal(hget_int(f, "k1", "free", names[i]) + held[i], 300);
        granted_units += held[i];
    }
    /* every granted result is in the holders, and nothing else is */
    long long rank_max;
    assert_int_equal(granted_in_results(f, &rank_max), granted_units);
    assert_int_equal(hget_int(f, "k1", "stats", "dequeued"), K9_N);
    long long processed = hget_int(f, "k1", "stats", "processed");
    long long dups = hget_int(f, "k1", "stats", "duplicates");
    assert_int_equal(processed, distinct);
    assert_int_equal(processed + dups, K9_N);
    assert_int_equal(hget_int(f, "k1", "stats", "granted"), rank_max);
    assert_int_equal(itest_log_len(f->c, "k1"), rank_max);
    print_message("kill -9: %d requests, %d kills, %lld results, %lld units granted, lost 0, doubled 0\n",
                  K9_N, kills, got, granted_units);
}

/* More grants than one order-id block (4096): refills must be drawn
 * without a single failed step. (A refill once used a format hiredis 0.14
 * cannot expand, so every 4096 grants the worker failed and reloaded, which
 * cost a factor of four in throughput without losing anything.) */
static void test_many_grants_never_reload(void **state)
{
    fixture *f = *state;
    enum { N = 10000 };
    const char *items[] = { "sku1" };
    int caps[] = { N };
    create_batch(f->c, "o1", "kind stock per_user 1", items, caps, 1);
    char json[160];
    for (int i = 0; i < N; i++) {
        snprintf(json, sizeof json, "{\"id\":\"g%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku1\"}", i, i);
        redisAppendCommand(f->c, "RPUSH alloc:{o1}:queue %s", json);
    }
    for (int i = 0; i < N; i++) {
        redisReply *r;
        assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    itest_start(f, "chunk = 4096;");
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{o1}:results", N, 30000), N);
    assert_int_equal(hget_int(f, "o1", "stats", "granted"), N);
    assert_int_equal(itest_count_in_log(&f->allocd, "reloading"), 0);
}

static void test_sigterm_drains_and_exits_zero(void **state)
{
    fixture *f = *state;
    const char *items[] = { "sku1" };
    int caps[] = { 100000 };
    create_batch(f->c, "t1", "kind stock per_user 100000", items, caps, 1);
    itest_start(f, NULL);
    push_buy(f->c, "t1", "first", "u1", "sku1", 1);
    itest_expect(f, "t1", "first", "granted", NULL);
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{t1}:queue"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_buy_and_every_rejection),
        ITEST_CASE(test_garbage_between_valid_requests),
        ITEST_CASE(test_resubmitted_ids_are_not_applied_again),
        ITEST_CASE(test_state_left_by_an_earlier_run),
        ITEST_CASE(test_queue_position_is_exact),
        ITEST_CASE(test_not_open_and_closed),
        ITEST_CASE(test_batches_come_and_go_without_restart),
        ITEST_CASE(test_kill9_loses_nothing),
        ITEST_CASE(test_many_grants_never_reload),
        ITEST_CASE(test_sigterm_drains_and_exits_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
