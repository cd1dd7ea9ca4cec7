/* test_reservations.c -- flash-sale reservations end to end: buy with
 * hold_ms > 0, confirm, cancel, expiry while allocd runs (units return within
 * a second, no request needed) and while it is stopped (expired at once on
 * start, exactly once), and order ids that are unique and opaque. */
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

static void push(fixture *f, const char *fmt, ...)
{
    char json[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(json, sizeof json, fmt, ap);
    va_end(ap);
    itest_cmd(f->c, "RPUSH alloc:{rs}:queue %s", json);
}

static json_t *result(fixture *f, const char *id)
{
    return itest_result(f, "rs", id);
}

static void expect(fixture *f, const char *id, const char *status, const char *reason)
{
    itest_expect(f, "rs", id, status, reason);
}

/* buys and returns the order id (static buffer per call site) */
static void buy(fixture *f, const char *id, const char *user, int qty, char *order, size_t len)
{
    push(f, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"sku\",\"qty\":%d}", id, user, qty);
    json_t *r = result(f, id);
    assert_string_equal(itest_jstr(r, "status"), "granted");
    snprintf(order, len, "%s", itest_jstr(r, "order"));
    assert_true(json_integer_value(json_object_get(r, "expires_at")) > harness_now_ms());
    json_decref(r);
}

static void sale(fixture *f, int units, int hold_ms)
{
    itest_cmd(f->c, "HSET alloc:{rs}:meta kind stock per_user 3 hold_ms %d", hold_ms);
    itest_cmd(f->c, "HSET alloc:{rs}:capacity sku %d", units);
    itest_cmd(f->c, "SADD alloc:batches rs");
}

static long long free_units(fixture *f)
{
    return proc_int(f->c, "HGET alloc:{rs}:free sku");
}

static void test_confirm_cancel_and_limits(void **state)
{
    fixture *f = *state;
    char o1[32], o2[32], o3[32];
    sale(f, 10, 60000);
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"rs\";"), 0);
    buy(f, "b1", "ann", 2, o1, sizeof o1);
    buy(f, "b2", "ann", 1, o2, sizeof o2);
    push(f, "{\"id\":\"b3\",\"user\":\"ann\",\"op\":\"buy\",\"item\":\"sku\"}");
    expect(f, "b3", "rejected", "limit");                 /* held counts toward per_user */
    push(f, "{\"id\":\"c1\",\"user\":\"ann\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    expect(f, "c1", "done", NULL);
    push(f, "{\"id\":\"c2\",\"user\":\"ann\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    expect(f, "c2", "done", NULL);                        /* confirming twice is harmless */
    push(f, "{\"id\":\"b4\",\"user\":\"ann\",\"op\":\"buy\",\"item\":\"sku\"}");
    expect(f, "b4", "rejected", "limit");                 /* confirmed counts too */
    push(f, "{\"id\":\"x1\",\"user\":\"bob\",\"op\":\"confirm\",\"order\":\"%s\"}", o2);
    expect(f, "x1", "rejected", "unknown_order");         /* not bob's order */
    push(f, "{\"id\":\"k1\",\"user\":\"ann\",\"op\":\"cancel\",\"order\":\"%s\"}", o1);
    expect(f, "k1", "done", NULL);                        /* cancel after confirm returns units */
    push(f, "{\"id\":\"k2\",\"user\":\"ann\",\"op\":\"cancel\",\"order\":\"%s\"}", o1);
    expect(f, "k2", "rejected", "unknown_order");
    assert_int_equal(free_units(f), 9);
    buy(f, "b5", "ann", 2, o3, sizeof o3);
    assert_int_equal(free_units(f), 7);
    char *h = harness_str(f->c, "HGET alloc:{rs}:holders ann");
    json_error_t e;
    json_t *hold = json_loads(h, 0, &e);
    assert_int_equal(json_integer_value(json_object_get(hold, "units")), 3);
    assert_int_equal(json_array_size(json_object_get(hold, "orders")), 2);
    json_decref(hold);
    free(h);
    assert_true(strcmp(o1, o2) && strcmp(o2, o3) && strcmp(o1, o3));
}

/* Units come back within a second after expires_at without any request. */
static void test_expiry_while_running(void **state)
{
    fixture *f = *state;
    char o1[32];
    sale(f, 5, 1000);
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"rs\";"), 0);
    buy(f, "b1", "ann", 3, o1, sizeof o1);
    json_t *r = result(f, "b1");
    long long expires = json_integer_value(json_object_get(r, "expires_at"));
    json_decref(r);
    assert_int_equal(free_units(f), 2);
    while (free_units(f) != 5 && harness_now_ms() < expires + 3000) harness_sleep_ms(10);
    long long back = harness_now_ms();
    assert_int_equal(free_units(f), 5);
    assert_true(back - expires < 1000);
    print_message("units back %lld ms after expires_at\n", back - expires);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{rs}:holders ann"), 0);
    push(f, "{\"id\":\"c1\",\"user\":\"ann\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    expect(f, "c1", "rejected", "expired");
    push(f, "{\"id\":\"k1\",\"user\":\"ann\",\"op\":\"cancel\",\"order\":\"%s\"}", o1);
    expect(f, "k1", "rejected", "expired");
    json_t *log = itest_log(f->c, "rs");
    assert_int_equal(json_array_size(log), 2);
    assert_string_equal(itest_jstr(json_array_get(log, 1), "type"), "expire");
    json_decref(log);
}

/* Reservations that fall due while allocd is down expire at once when it
 * comes back, exactly once; and a confirm after that says expired. */
static void test_expiry_while_stopped(void **state)
{
    fixture *f = *state;
    char o1[32], o2[32];
    sale(f, 10, 1500);
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"rs\";"), 0);
    buy(f, "b1", "ann", 2, o1, sizeof o1);
    buy(f, "b2", "bob", 3, o2, sizeof o2);
    push(f, "{\"id\":\"c2\",\"user\":\"bob\",\"op\":\"confirm\",\"order\":\"%s\"}", o2);
    expect(f, "c2", "done", NULL);
    harness_allocd_kill(&f->allocd);
    harness_sleep_ms(2000);
    assert_int_equal(free_units(f), 5);                   /* nobody expired it yet */
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"rs\";"), 0);
    int64_t t0 = harness_now_ms();
    while (free_units(f) != 7 && harness_now_ms() - t0 < 5000) harness_sleep_ms(10);
    assert_int_equal(free_units(f), 7);                   /* ann's 2 back, bob's confirmed 3 kept */
    push(f, "{\"id\":\"c1\",\"user\":\"ann\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    expect(f, "c1", "rejected", "expired");
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"rs\";"), 0);
    push(f, "{\"id\":\"c3\",\"user\":\"ann\",\"op\":\"confirm\",\"order\":\"%s\"}", o1);
    expect(f, "c3", "rejected", "expired");               /* still known after a restart */
    assert_int_equal(itest_log_count(f->c, "rs", "expire"), 1);
    assert_int_equal(free_units(f), 7);
}

/* Order ids: unique, time-ordered by second, and consecutive orders do not
 * differ by small steps. */
static void test_order_ids(void **state)
{
    fixture *f = *state;
    enum { N = 400 };
    itest_cmd(f->c, "HSET alloc:{rs}:meta kind stock per_user 1");
    itest_cmd(f->c, "HSET alloc:{rs}:capacity sku %d", N);
    itest_cmd(f->c, "SADD alloc:batches rs");
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, "instance = \"rs\";"), 0);
    for (int i = 0; i < N; i++)
        push(f, "{\"id\":\"o%d\",\"user\":\"u%d\",\"op\":\"buy\",\"item\":\"sku\"}", i, i);
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{rs}:results", N, 10000), N);
    unsigned long long ids[N];
    int small_steps = 0;
    for (int i = 0; i < N; i++) {
        char id[16];
        snprintf(id, sizeof id, "o%d", i);
        json_t *r = result(f, id);
        const char *o = itest_jstr(r, "order");
        assert_true(strlen(o) >= 10 && strspn(o, "0123456789") == strlen(o));
        ids[i] = strtoull(o, NULL, 10);
        json_decref(r);
        for (int j = 0; j < i; j++) assert_true(ids[j] != ids[i]);
        if (i > 0) {
            unsigned long long d = ids[i] > ids[i - 1] ? ids[i] - ids[i - 1] : ids[i - 1] - ids[i];
            if (d < 1000) small_steps++;
        }
    }
    assert_true(small_steps < 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_confirm_cancel_and_limits),
        ITEST_CASE(test_expiry_while_running),
        ITEST_CASE(test_expiry_while_stopped),
        ITEST_CASE(test_order_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
