/* test_slots_scan.c -- the paged re-read of P:{B}:slots (worker/slots_scan.c)
 * fed hand-built HSCAN replies: when a scan is due, that a page out holds
 * the next one back, that the engine's table changes only when the cursor
 * comes back to 0 and then to exactly what the pages held, when a take may
 * be decided with the table, and that a reply that is no page is refused
 * and the scan starts over; a streamed target (the profiles) gets its
 * pairs page by page, clear() at the first page of every scan, also one
 * begun again, and end() after the last; with a watch armed, a read only
 * after the watch stands, when a change is reported, and every
 * SLOTS_SCAN_WATCHED_EVERY_MS, the table current from its read or the
 * watch's last clean answer, and the one-second reads again once the
 * watch is lost; a load counts as the read when the watch stood before it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/engine_slots.h"
#include "worker/slots_scan.h"
#include "rtest.h"

#define T0 1763800000000LL

static engine *dorm(void)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_ROOM;
    engine *e = engine_new(&m, 5);
    assert_non_null(e);
    assert_int_equal(engine_load_item(e, "R1", 2), 0);
    return e;
}

/* An HSCAN page: {cursor, [field, value, ...]} from a NULL-ended list. */
static redisReply *page(const char *cursor, const char *const *pairs)
{
    size_t n = 0;
    while (pairs[n]) n++;
    redisReply *p = rtest_array_of(n);
    for (size_t i = 0; i < n; i++) p->element[i] = rtest_str(pairs[i]);
    return rtest_arr(2, rtest_str(cursor), p);
}

static int feed(slots_scan *s, engine *e, redisReply *r)
{
    int rc = slots_scan_page(s, r, e, "d");
    freeReplyObject(r);
    return rc;
}

static void test_due_every_second_one_page_at_a_time(void **state)
{
    (void)state;
    slots_scan s;
    slots_scan_init(&s);
    slots_scan_loaded(&s, T0);                    /* the load read them */
    assert_null(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS - 1));
    const char *c = slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS);
    assert_non_null(c);
    assert_string_equal(c, "0");
    slots_scan_sent(&s);
    assert_null(slots_scan_due(&s, T0 + 5 * SLOTS_SCAN_EVERY_MS));   /* a page is out */
    slots_scan_free(&s);
}

static void test_table_replaced_when_the_cursor_returns(void **state)
{
    (void)state;
    engine *e = dorm();
    assert_int_equal(engine_slot_set(e, "gone", T0), 0);
    slots_scan s;
    slots_scan_init(&s);
    slots_scan_loaded(&s, T0);
    assert_string_equal(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS), "0");
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, page("1792", (const char *[]){ "a", "100", "b", "200", NULL })), 0);
    /* half a scan changes nothing */
    assert_int_equal(engine_slot_get(e, "gone"), T0);
    assert_int_equal(engine_slot_get(e, "a"), ENGINE_NO_SLOT);
    const char *c = slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS);   /* the next page at once */
    assert_non_null(c);
    assert_string_equal(c, "1792");
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, page("0", (const char *[]){ "c", "300", "bad", "soon", NULL })), 1);
    assert_int_equal(engine_slot_get(e, "a"), 100);
    assert_int_equal(engine_slot_get(e, "b"), 200);
    assert_int_equal(engine_slot_get(e, "c"), 300);
    assert_int_equal(engine_slot_get(e, "bad"), ENGINE_NO_SLOT);     /* warned, skipped */
    assert_int_equal(engine_slot_get(e, "gone"), ENGINE_NO_SLOT);    /* not in the hash now */
    /* the next scan waits for its second */
    assert_null(slots_scan_due(&s, T0 + 2 * SLOTS_SCAN_EVERY_MS - 1));
    assert_string_equal(slots_scan_due(&s, T0 + 2 * SLOTS_SCAN_EVERY_MS), "0");
    slots_scan_free(&s);
    engine_free(e);
}

/* A table is current for the interval and its grace from when its scan
 * began; one that is not starts a scan at once, interval or not (a worker
 * back from idle holds its take for it). */
static void test_current_and_forced_scans(void **state)
{
    (void)state;
    engine *e = dorm();
    slots_scan s;
    slots_scan_init(&s);
    slots_scan_loaded(&s, T0);
    assert_true(slots_scan_current(&s, T0 + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS));
    assert_false(slots_scan_current(&s, T0 + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS + 1));
    /* a scan begun at T0 + 1000 and abandoned (its page lost) */
    assert_non_null(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS));
    slots_scan_sent(&s);
    slots_scan_abandon(&s);
    /* inside the interval, but the table is no longer current: due now */
    int64_t t = T0 + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS + 1;
    const char *c = slots_scan_due(&s, t);
    assert_non_null(c);
    assert_string_equal(c, "0");
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, page("0", (const char *[]){ "a", "1", NULL })), 1);
    /* current from when that scan began */
    assert_true(slots_scan_current(&s, t + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS));
    assert_false(slots_scan_current(&s, t + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS + 1));
    slots_scan_free(&s);
    engine_free(e);
}

static void test_not_a_page_refused_and_started_over(void **state)
{
    (void)state;
    engine *e = dorm();
    assert_int_equal(engine_slot_set(e, "kept", T0), 0);
    slots_scan s;
    slots_scan_init(&s);
    slots_scan_loaded(&s, T0);
    assert_non_null(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS));
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, page("77", (const char *[]){ "a", "100", NULL })), 0);
    assert_non_null(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS));
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, page("0", (const char *[]){ "odd", NULL })), -EPROTO);  /* odd count */
    assert_int_equal(feed(&s, e, rtest_str("0")), -EPROTO);
    assert_int_equal(engine_slot_get(e, "kept"), T0);                 /* untouched */
    assert_int_equal(engine_slot_get(e, "a"), ENGINE_NO_SLOT);
    const char *c = slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS);     /* from the start */
    assert_non_null(c);
    assert_string_equal(c, "0");
    slots_scan_free(&s);
    engine_free(e);
}

/* One whole scan of a one-page hash begun at t. */
static void read_at(slots_scan *s, engine *e, int64_t t)
{
    assert_non_null(slots_scan_due(s, t));
    slots_scan_sent(s);
    assert_int_equal(feed(s, e, page("0", (const char *[]){ "a", "1", NULL })), 1);
}

static void test_watched_reads_when_changed(void **state)
{
    (void)state;
    engine *e = dorm();
    slots_scan s;
    slots_scan_init(&s);
    slots_scan_loaded(&s, T0);
    slots_scan_watch_armed(&s, T0 + 10);            /* after the load: one read */
    assert_non_null(slots_scan_due(&s, T0 + 20));
    slots_scan_abandon(&s);
    read_at(&s, e, T0 + 30);
    /* quiet: no read for SLOTS_SCAN_WATCHED_EVERY_MS; current from the
     * watch's last clean answer, not only from the read */
    int64_t quiet = T0 + 30 + SLOTS_SCAN_WATCHED_EVERY_MS - 1;
    assert_null(slots_scan_due(&s, T0 + 30 + 5 * SLOTS_SCAN_EVERY_MS));
    assert_false(slots_scan_current(&s, T0 + 30 + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS + 1));
    slots_scan_clean(&s, quiet - 100);
    assert_true(slots_scan_current(&s, quiet));
    assert_null(slots_scan_due(&s, quiet));
    assert_non_null(slots_scan_due(&s, quiet + 1));       /* read anyway, however quiet */
    slots_scan_abandon(&s);
    /* a change reported: due at once, and a clean answer does not count
     * until it is read */
    int64_t tc = quiet + 1000;
    slots_scan_changed(&s, tc);
    slots_scan_clean(&s, tc + 10);
    int64_t last_clean = quiet - 100;
    assert_true(slots_scan_current(&s, last_clean + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS));
    assert_false(slots_scan_current(&s, last_clean + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS + 1));
    read_at(&s, e, tc + 20);
    assert_true(slots_scan_current(&s, tc + 20 + SLOTS_SCAN_EVERY_MS));
    assert_null(slots_scan_due(&s, tc + 5000));
    /* the watch lost: the one-second rule again, from that read */
    slots_scan_watch_lost(&s);
    assert_false(slots_scan_current(&s, tc + 20 + SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS + 1));
    assert_non_null(slots_scan_due(&s, tc + 20 + SLOTS_SCAN_EVERY_MS));
    slots_scan_abandon(&s);
    /* armed again, then a load: it is the read after the watch, no other
     * follows; a load begun before the watch is not */
    slots_scan_watch_armed(&s, tc + 3000);
    slots_scan_loaded(&s, tc + 4000);
    assert_null(slots_scan_due(&s, tc + 4001));
    slots_scan_clean(&s, tc + 4500);
    assert_true(slots_scan_current(&s, tc + 4500 + SLOTS_SCAN_EVERY_MS));
    slots_scan_loaded(&s, tc + 6000);
    slots_scan_watch_armed(&s, tc + 6100);
    assert_non_null(slots_scan_due(&s, tc + 6200));
    slots_scan_free(&s);
    engine_free(e);
}

/* A streamed target that records what it is called with. */
typedef struct calls {
    char log[256];
} calls;

static void rec_clear(engine *e, void *data)
{
    (void)e;
    strcat(((calls *)data)->log, "C ");
}

static void rec_pair(engine *e, const char *batch, const char *user, const char *value, void *data)
{
    (void)e;
    (void)batch;
    char *log = ((calls *)data)->log;
    strcat(log, user);
    strcat(log, "=");
    strcat(log, value);
    strcat(log, " ");
}

static void rec_end(engine *e, void *data)
{
    (void)e;
    strcat(((calls *)data)->log, "E ");
}

static void test_streamed_pages_go_in_as_they_come(void **state)
{
    (void)state;
    engine *e = dorm();
    calls c = { "" };
    const slots_scan_target t = { rec_clear, rec_pair, rec_end, &c, 1 };
    slots_scan s;
    slots_scan_init_target(&s, &t);
    slots_scan_loaded(&s, T0);
    assert_non_null(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS));
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, page("9", (const char *[]){ "a", "1", NULL })), 0);
    assert_string_equal(c.log, "C a=1 ");                          /* in before the last page */
    assert_non_null(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS));
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, rtest_str("0")), -EPROTO);        /* begun again: cleared again */
    assert_non_null(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS));
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, page("4", (const char *[]){ "a", "2", NULL })), 0);
    assert_non_null(slots_scan_due(&s, T0 + SLOTS_SCAN_EVERY_MS));
    slots_scan_sent(&s);
    assert_int_equal(feed(&s, e, page("0", (const char *[]){ "b", "3", "a", "2", NULL })), 1);
    assert_string_equal(c.log, "C a=1 C a=2 b=3 a=2 E ");
    assert_true(slots_scan_current(&s, T0 + SLOTS_SCAN_EVERY_MS + 1));
    slots_scan_free(&s);
    engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_due_every_second_one_page_at_a_time),
        cmocka_unit_test(test_table_replaced_when_the_cursor_returns),
        cmocka_unit_test(test_current_and_forced_scans),
        cmocka_unit_test(test_not_a_page_refused_and_started_over),
        cmocka_unit_test(test_streamed_pages_go_in_as_they_come),
        cmocka_unit_test(test_watched_reads_when_changed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
