/* test_archive_formats.c -- the readers of the log on both of its formats
 * and on a log that mixes them (contract section 11.1), end to end: the
 * real allocd writes part of a batch's log with log_format = "event", is
 * restarted with the default (chunk), and writes the rest; then the real
 * allocctl archives it into a private PostgreSQL, exports it, verifies and
 * reconciles it. Also the archive's own paths that the other tests reach
 * only by chance: chunks sent again after their rows are in (the COPY
 * meets the primary key and falls back to INSERT ... ON CONFLICT DO
 * NOTHING), and the heartbeat of an idle `archive --follow`.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "archive_fixture.h"

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void contains(const char *out, const char *needle)
{
    if (!strstr(out, needle)) fail_msg("expected '%s' in:\n%s", needle, out);
}

/* Stream entries of alloc:{b}:log in the chunk format and in the event format. */
static void entry_kinds(afix *f, const char *b, long long *chunk, long long *event)
{
    redisReply *x = redisCommand(f->c, "XRANGE alloc:{%s}:log - +", b);
    assert_non_null(x);
    *chunk = *event = 0;
    for (size_t i = 0; i < x->elements; i++) {
        const redisReply *kv = x->element[i]->element[1];
        int is_chunk = kv->elements >= 2 && !strcmp(kv->element[0]->str, "format") &&
                       !strcmp(kv->element[1]->str, "chunk");
        *chunk += is_chunk;
        *event += !is_chunk;
    }
    freeReplyObject(x);
}

/* Batch b served first with the event format, then (after a restart) with
 * the default chunk format; allocd is stopped at the end, the batch at rest. */
static long long mixed_log(afix *f, const char *b)
{
    afix_stock_batch(f, b, 300, 3);
    afix_start_allocd(f, "log_format = \"event\";");
    afix_stock_traffic_from(f, b, 200, 0);
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    afix_start_allocd(f, NULL);
    afix_stock_traffic_from(f, b, 300, 200);
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    long long chunk, event;
    entry_kinds(f, b, &chunk, &event);
    print_message("%s: %lld event-format entries, then %lld chunk-format entries\n", b, event, chunk);
    assert_true(event > 0 && chunk > 0);
    long long events = itest_log_len(f->c, b);
    assert_true(events > event + chunk);      /* some chunk entries hold several events */
    return events;
}

/* mixed_log, archived: every event one row. Returns the events. */
static long long mixed_and_archived(afix *f, const char *b)
{
    long long events = mixed_log(f, b);
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, b));
    assert_int_equal(afix_assert_log_archived(f, b), events);
    return events;
}

/* The archive, export, verify and reconcile read a mixed log whole. */
static void test_mixed_log_everywhere(void **state)
{
    afix *f = *state;
    long long events = mixed_and_archived(f, "mx");
    afix_assert_results_archived(f, "mx");
    /* at is at_ms as a time, as to_timestamp makes it */
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_events WHERE at IS DISTINCT FROM "
                                    "to_timestamp(at_ms / 1000.0)"), 0);
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_events WHERE at IS NULL"), 0);
    char *out = AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "mx");
    contains(out, "OK: the database matches Redis");
    free(out);
    out = AFIX_CTL(f, 0, "verify", "mx");
    contains(out, "OK: holders and free match the log");
    free(out);
    out = AFIX_CTL(f, 0, "export", "mx", "--what", "log");
    assert_int_equal(count_lines(out), events);
    free(out);
    out = AFIX_CTL(f, 0, "export", "mx", "--what", "log", "--format", "csv");
    assert_int_equal(count_lines(out), events + 1);
    contains(out, ",grant,u-0,sku-1,1,");
    free(out);
    /* a hand-made change to an event of a chunk entry is found */
    afix_pg_exec(f, "UPDATE alloc_events SET fields = jsonb_set(fields, '{item}', '\"sku-9\"') "
                    "WHERE (batch, id_ms, id_seq, ev_idx) = (SELECT batch, id_ms, id_seq, ev_idx FROM "
                    "alloc_events WHERE batch = 'mx' AND ev_idx = 1 ORDER BY id_ms, id_seq LIMIT 1)");
    out = AFIX_CTL(f, 1, "reconcile", "--pg", f->pg.conninfo, "mx");
    contains(out, "sku-9");
    free(out);
}

/* Entries delivered again after their rows were committed (the group set
 * back, as after a crash between the commit and the XACK), some rows gone
 * meanwhile: the rows that are missing come back, the others stay once. */
static void test_chunks_sent_again(void **state)
{
    afix *f = *state;
    long long events = mixed_and_archived(f, "rs");
    afix_pg_exec(f, "DELETE FROM alloc_events WHERE batch = 'rs' AND (id_seq + ev_idx) % 3 = 0");
    long long gone = events - afix_pg_int(f, "SELECT count(*) FROM alloc_events WHERE batch = 'rs'");
    assert_true(gone > 0);
    itest_cmd(f->c, "XGROUP SETID alloc:{rs}:log archive 0");
    char *out = AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "rs");
    char want[64];
    snprintf(want, sizeof want, "archive rs: events %lld ", gone);
    contains(out, want);
    free(out);
    assert_int_equal(afix_assert_log_archived(f, "rs"), events);
    /* every entry delivered again, nothing new: nothing inserted */
    itest_cmd(f->c, "XGROUP SETID alloc:{rs}:log archive 0");
    out = AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "rs");
    contains(out, "archive rs: events 0 ");
    free(out);
    assert_int_equal(afix_assert_log_archived(f, "rs"), events);
    free(AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "rs"));
}

/* What the archiver started by afix_ctl_spawn printed so far, or NULL. */
static char *bg_log(afix *f)
{
    char path[400];
    snprintf(path, sizeof path, "%s/allocctl-bg.log", f->redis.dir);
    FILE *in = fopen(path, "r");
    if (!in) return NULL;
    char *text = calloc(1, 65536);
    size_t n = text ? fread(text, 1, 65535, in) : 0;
    fclose(in);
    if (text) text[n] = '\0';
    return text;
}

/* `archive --follow` says it is alive while there is nothing to do, and
 * what it has done; --quiet keeps it silent. */
static void test_follow_heartbeat(void **state)
{
    afix *f = *state;
    afix_stock_batch(f, "hb", 10, 1);
    afix_start_allocd(f, NULL);
    afix_stock_traffic(f, "hb", 20);
    pid_t ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, "--follow", "hb",
                              "--heartbeat-ms", "500", "--results-interval-ms", "0", NULL);
    char *log = NULL;
    for (int64_t end = harness_now_ms() + 15000; harness_now_ms() < end; harness_sleep_ms(100)) {
        free(log);
        log = bg_log(f);
        if (log && strstr(log, "archive: idle") && strstr(strstr(log, "archive: idle") + 1, "archive: idle"))
            break;
    }
    assert_int_equal(proc_stop(&ar, 10000), 0);
    assert_non_null(log);
    contains(log, "archive hb: events ");                      /* what it did first */
    const char *beat = strstr(log, "archive: idle");
    if (!beat) fail_msg("no heartbeat in:\n%s", log);
    contains(beat, "following 1 batch; this run: events ");
    contains(beat, ", lag 0 entries\n");
    assert_non_null(strstr(beat + 1, "archive: idle"));        /* again, while idle */
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mixed_log_everywhere, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_chunks_sent_again, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_follow_heartbeat, afix_setup, afix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
