/* test_timeline.c -- allocbench's live-run timeline: readings kept at most
 * once per interval, requests put in the window of their due time, and the
 * queue and poller backlogs read off the last reading before a window's end. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bench/timeline.h"

static void test_note_keeps_one_reading_per_interval(void **state)
{
    timeline t;
    timeline_init(&t, 10000);
    for (int64_t us = 0; us < 100000; us += 1000) assert_int_equal(timeline_note(&t, us, us / 100, 0), 0);
    assert_int_equal(t.n, 10);                 /* 0, 10 ms, ..., 90 ms */
    assert_int_equal(t.s[3].t_us, 30000);
    assert_int_equal(t.s[3].dequeued, 300);
    timeline_free(&t);
    assert_null(t.s);
}

/* The lines timeline_print wrote, as one string (caller frees). */
static char *print_sent(const timeline *t, long n, const int64_t *due, const int64_t *sent,
                        const int64_t *read)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    timeline_print(f, t, n, due, sent, read, 100);
    fclose(f);
    return buf;
}

static char *print(const timeline *t, long n, const int64_t *due, const int64_t *read)
{
    return print_sent(t, n, due, NULL, read);
}

/* Four requests, two due in each 100 ms window (given out of order, as
 * producers interleave); at 100 ms two were dequeued and one read, at 200
 * ms all four were dequeued and read. */
static void test_windows_and_backlogs(void **state)
{
    const int64_t base = 1000000;
    int64_t due[] = { base + 150000, base, base + 50000, base + 160000 };
    int64_t read[] = { base + 152000, base + 4000, base + 60000, base + 190000 };
    timeline t;
    timeline_init(&t, 0);
    assert_int_equal(timeline_note(&t, base + 99000, 2, 1), 0);
    assert_int_equal(timeline_note(&t, base + 199000, 4, 4), 0);
    char *out = print(&t, 4, due, read);
    assert_null(strstr(out, "sentms"));        /* no send times: no column */
    char *line1 = strchr(out, '\n') + 1, *line2 = strchr(line1, '\n') + 1;
    double from, p50, p99, max;
    long ndue, queue, poller;
    /* window 0: latencies 4 and 10 ms; 2 due by its end, 2 dequeued, 1 read */
    assert_int_equal(sscanf(line1, "%lf %ld %lf %lf %lf %ld %ld", &from, &ndue, &p50, &p99, &max, &queue, &poller), 7);
    assert_true(from == 0.0 && ndue == 2 && max == 10.0 && queue == 0 && poller == 1);
    /* window 1: latencies 2 and 30 ms; 4 due, 4 dequeued, 4 read */
    assert_int_equal(sscanf(line2, "%lf %ld %lf %lf %lf %ld %ld", &from, &ndue, &p50, &p99, &max, &queue, &poller), 7);
    assert_true(from == 100.0 && ndue == 2 && p50 == 30.0 && max == 30.0 && queue == 0 && poller == 0);
    assert_string_equal(strchr(line2, '\n'), "\n");   /* and no third window */
    free(out);
    timeline_free(&t);
}

/* A request never read is left out of its window's latencies; a window
 * before the first reading shows -1 for both backlogs. */
static void test_unread_and_no_reading(void **state)
{
    int64_t due[] = { 0, 10000 }, read[] = { 5000, 0 };
    timeline t;
    timeline_init(&t, 0);
    assert_int_equal(timeline_note(&t, 500000, 2, 2), 0);
    char *out = print(&t, 2, due, read);
    double from, p50, p99, max;
    long ndue, queue, poller;
    assert_int_equal(sscanf(strchr(out, '\n') + 1, "%lf %ld %lf %lf %lf %ld %ld", &from, &ndue, &p50, &p99, &max,
                            &queue, &poller), 7);
    assert_true(ndue == 2 && max == 5.0 && queue == -1 && poller == -1);
    free(out);
    timeline_free(&t);
}

/* An unpaced run: everything due (pushed) in the first window, drained
 * over the next two; the windows go on to the last reading. */
static void test_windows_run_to_last_reading(void **state)
{
    int64_t due[] = { 0, 1000, 2000 }, read[] = { 150000, 250000, 260000 };
    timeline t;
    timeline_init(&t, 0);
    assert_int_equal(timeline_note(&t, 99000, 0, 0), 0);
    assert_int_equal(timeline_note(&t, 199000, 2, 1), 0);
    assert_int_equal(timeline_note(&t, 280000, 3, 3), 0);
    char *out = print(&t, 3, due, read);
    const char *line = out;
    double from, p50, p99, max;
    long ndue, queue, poller, want_queue[] = { 3, 1, 0 }, want_poller[] = { 0, 1, 0 };
    for (int w = 0; w < 3; w++) {
        line = strchr(line, '\n') + 1;
        assert_int_equal(sscanf(line, "%lf %ld %lf %lf %lf %ld %ld", &from, &ndue, &p50, &p99, &max, &queue,
                                &poller), 7);
        assert_true(from == 100.0 * w && ndue == (w == 0 ? 3 : 0));
        assert_int_equal(queue, want_queue[w]);
        assert_int_equal(poller, want_poller[w]);
    }
    assert_string_equal(strchr(line, '\n'), "\n");   /* and no fourth window */
    free(out);
    timeline_free(&t);
}

/* Samples carrying schedstat readings add three columns: the share of
 * the window Redis ran, waited for a CPU, and allocd ran, each from the
 * readings at the window's start and end; a window with no reading at
 * its start shows -1. Without readings the columns are left out (the
 * tests above). */
static void test_sched_columns(void **state)
{
    int64_t due[] = { 10000, 150000 }, read[] = { 12000, 152000 };
    timeline t;
    timeline_init(&t, 0);
    assert_int_equal(timeline_note(&t, 50000, 1, 1), 0);
    assert_int_equal(timeline_note(&t, 100000, 1, 1), 0);
    assert_int_equal(timeline_note(&t, 200000, 2, 2), 0);
    /* ns: at 100 ms Redis had run 10 ms and waited 1; at 200 ms it had run
     * 90 ms (80 of the 100) and waited 21 (20); allocd 5 -> 35 (30) */
    t.s[1].redis_run_ns = 10000000; t.s[1].redis_wait_ns = 1000000; t.s[1].allocd_run_ns = 5000000;
    t.s[2].redis_run_ns = 90000000; t.s[2].redis_wait_ns = 21000000; t.s[2].allocd_run_ns = 35000000;
    char *out = print(&t, 2, due, read);
    assert_non_null(strstr(out, "redis%"));
    char *line1 = strchr(out, '\n') + 1, *line2 = strchr(line1, '\n') + 1;
    double from, p50, p99, max, run, wait, a;
    long ndue, queue, poller;
    /* window 0 starts before any reading */
    assert_int_equal(sscanf(line1, "%lf %ld %lf %lf %lf %ld %ld %lf %lf %lf", &from, &ndue, &p50, &p99, &max, &queue,
                            &poller, &run, &wait, &a), 10);
    assert_true(run == -1 && wait == -1 && a == -1);
    assert_int_equal(sscanf(line2, "%lf %ld %lf %lf %lf %ld %ld %lf %lf %lf", &from, &ndue, &p50, &p99, &max, &queue,
                            &poller, &run, &wait, &a), 10);
    assert_true(from == 100.0 && run == 80 && wait == 20 && a == 30);
    free(out);
    timeline_free(&t);
}

/* With the generator's send times, a column after maxms: the longest a
 * request due in the window waited before it was sent (ms); requests
 * never read still count, since the wait was the generator's. */
static void test_sent_column(void **state)
{
    int64_t due[] = { 10000, 20000, 150000 }, sent[] = { 10500, 23000, 150250 };
    int64_t read[] = { 12000, 0, 152000 };
    timeline t;
    timeline_init(&t, 0);
    assert_int_equal(timeline_note(&t, 99000, 2, 1), 0);
    assert_int_equal(timeline_note(&t, 199000, 3, 2), 0);
    char *out = print_sent(&t, 3, due, sent, read);
    assert_non_null(strstr(out, "sentms"));
    char *line1 = strchr(out, '\n') + 1, *line2 = strchr(line1, '\n') + 1;
    double from, p50, p99, max, lag;
    long ndue, queue, poller;
    assert_int_equal(sscanf(line1, "%lf %ld %lf %lf %lf %lf %ld %ld", &from, &ndue, &p50, &p99, &max, &lag, &queue,
                            &poller), 8);
    assert_true(ndue == 2 && max == 2.0 && lag == 3.0 && queue == 0 && poller == 1);
    assert_int_equal(sscanf(line2, "%lf %ld %lf %lf %lf %lf %ld %ld", &from, &ndue, &p50, &p99, &max, &lag, &queue,
                            &poller), 8);
    assert_true(ndue == 1 && lag == 0.25);
    free(out);
    timeline_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_note_keeps_one_reading_per_interval),
        cmocka_unit_test(test_windows_and_backlogs),
        cmocka_unit_test(test_unread_and_no_reading),
        cmocka_unit_test(test_windows_run_to_last_reading),
        cmocka_unit_test(test_sched_columns),
        cmocka_unit_test(test_sent_column),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
