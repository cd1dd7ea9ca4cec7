/* test_log_entry.c -- the one decoder of P:{B}:log entries (wire/log_entry.h).
 *
 * The chunk entries here are the exact `events` values of the apply_txn
 * golden files stock_chunklog.resp and admin_chunklog.resp, so the writer
 * (pinned there) and this reader are checked against the same bytes: each
 * must decode to the very fields the event format writes for those events
 * (stock.resp, admin.resp).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "wire/log_entry.h"

typedef struct seen {
    char lines[8][256];
    int n;
} seen;

/* "k=v k=v ..." per event */
static int collect(void *ud, const log_field *f, size_t n)
{
    seen *s = ud;
    if (s->n == 8) return 99;
    char *out = s->lines[s->n++];
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(out + at, 256 - at, "%s%s=%.*s", i ? " " : "", f[i].key, (int)f[i].vlen, f[i].val);
    return 0;
}

static int decode(const char *events, const char *count, seen *s, char *err)
{
    log_field e[3] = { { "format", "chunk", 5 }, { "n", count, strlen(count) }, { "events", events, strlen(events) } };
    memset(s, 0, sizeof *s);
    return log_entry_decode(e, 3, collect, s, err, 160);
}

static void test_stock_chunk(void **state)
{
    (void)state;
    seen s;
    char err[160];
    const char *ev = "[[\"expire\",\"u5\",\"sku1\",1,\"1001\",\"\",1763800000000],"
                     "[\"grant\",\"u1\",\"sku1\",2,\"1003\",\"r1\",1763800000000,1763800060000],"
                     "[\"confirm\",\"u2\",\"sku2\",1,\"1002\",\"r4\",1763800000000]]";
    assert_int_equal(decode(ev, "3", &s, err), 3);
    assert_string_equal(s.lines[0], "type=expire user=u5 item=sku1 qty=1 order=1001 req= at=1763800000000");
    assert_string_equal(s.lines[1], "type=grant user=u1 item=sku1 qty=2 order=1003 req=r1 at=1763800000000 "
                                    "expires_at=1763800060000");
    assert_string_equal(s.lines[2], "type=confirm user=u2 item=sku2 qty=1 order=1002 req=r4 at=1763800000000");
}

static void test_admin_chunk(void **state)
{
    (void)state;
    seen s;
    char err[160];
    const char *ev = "[[\"state\",\"\",\"\",0,\"\",\"c1\",1763800000000,0,\"paused\"],"
                     "[\"capacity\",\"\",\"sku1\",8,\"\",\"c2\",1763800000000]]";
    assert_int_equal(decode(ev, "2", &s, err), 2);
    /* expires_at 0 is left out, as the event format leaves it out */
    assert_string_equal(s.lines[0], "type=state user= item= qty=0 order= req=c1 at=1763800000000 state=paused");
    assert_string_equal(s.lines[1], "type=capacity user= item=sku1 qty=8 order= req=c2 at=1763800000000");
}

/* A waitlist's events carry extras (log_entry_extras) after the state
 * position: they decode to the event format's wait_no/status/reason. */
static void test_wait_extras(void **state)
{
    (void)state;
    seen s;
    char err[160];
    const char *ev = "[[\"wait\",\"u1\",\"sku1\",1,\"\",\"r1\",1763800000000,0,\"\",{\"wait_no\":3}],"
                     "[\"wait_served\",\"u1\",\"sku1\",1,\"\",\"r1\",1763800000001,0,\"\","
                     "{\"wait_no\":3,\"status\":\"rejected\",\"reason\":\"limit\"}]]";
    assert_int_equal(decode(ev, "2", &s, err), 2);
    assert_string_equal(s.lines[0], "type=wait user=u1 item=sku1 qty=1 order= req=r1 at=1763800000000 wait_no=3");
    assert_string_equal(s.lines[1], "type=wait_served user=u1 item=sku1 qty=1 order= req=r1 at=1763800000001 "
                                    "wait_no=3 status=rejected reason=limit");
    assert_int_equal(decode("[[\"wait\",\"u\",\"i\",1,\"\",\"r\",1,0,\"\",[1]]]", "1", &s, err), -1);
    assert_int_equal(decode("[[\"wait\",\"u\",\"i\",1,\"\",\"r\",1,0,\"\",{\"k\":1.5}]]", "1", &s, err), -1);
}

static void test_event_entry_passes_through(void **state)
{
    (void)state;
    seen s = { .n = 0 };
    char err[160];
    log_field e[2] = { { "type", "grant", 5 }, { "user", "u1", 2 } };
    assert_false(log_entry_is_chunk(e, 2));
    assert_int_equal(log_entry_decode(e, 2, collect, &s, err, sizeof err), 1);
    assert_string_equal(s.lines[0], "type=grant user=u1");
}

static void test_malformed_chunks_are_refused(void **state)
{
    (void)state;
    seen s;
    char err[160];
    assert_int_equal(decode("not json", "1", &s, err), -1);
    assert_non_null(strstr(err, "events"));
    assert_int_equal(decode("{}", "0", &s, err), -1);
    assert_int_equal(decode("[[\"grant\",\"u1\"]]", "1", &s, err), -1);            /* too short */
    assert_int_equal(decode("[[\"grant\",\"u1\",\"i\",\"1\",\"\",\"r\",1]]", "1", &s, err), -1); /* qty a string */
    assert_int_equal(decode("[]", "2", &s, err), -1);                             /* n disagrees */
    assert_non_null(strstr(err, "n says 2"));
    assert_int_equal(decode("[]", "0", &s, err), 0);
}

static void test_callback_stops(void **state)
{
    (void)state;
    seen s;
    char err[160];
    char ev[2048] = "[";
    for (int i = 0; i < 9; i++)
        strcat(ev, i ? ",[\"grant\",\"u\",\"i\",1,\"1\",\"r\",1]" : "[\"grant\",\"u\",\"i\",1,\"1\",\"r\",1]");
    strcat(ev, "]");
    assert_int_equal(decode(ev, "9", &s, err), 99); /* collect() stops after 8 */
    assert_int_equal(s.n, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stock_chunk),
        cmocka_unit_test(test_admin_chunk),
        cmocka_unit_test(test_wait_extras),
        cmocka_unit_test(test_event_entry_passes_through),
        cmocka_unit_test(test_malformed_chunks_are_refused),
        cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
