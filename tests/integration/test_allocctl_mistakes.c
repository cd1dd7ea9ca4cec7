/* test_allocctl_mistakes.c -- operator mistakes allocctl used to accept in
 * silence: a push to a batch nobody serves, and a --filter value typed by
 * its look instead of by the rooms' attribute (building=7 sent the number 7
 * where the rooms have the string "7", a filter that matched nothing), a
 * meaningless "N ahead" before a shuffled opening, dead entries that
 * could be neither deleted nor fixed; and the rough edges of issue 36:
 * room holds refused, `wait` returning at `waiting`, puzzling usage
 * answers, a 64 KB dead entry printed whole, epoch ms for times, purge's
 * key count. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"

static void test_push_to_missing_batch(void **state)
{
    itest *t = *state;
    char *out;
    assert_int_equal(itest_ctl(t, &out, "push nosuch --user u1 --op buy --item a"), 1);
    assert_non_null(strstr(out, "batch nosuch does not exist"));
    assert_non_null(strstr(out, "--force"));
    free(out);
    assert_int_equal(proc_int(t->c, "LLEN alloc:{nosuch}:queue"), 0);
    /* defined but not live */
    itest_cmd(t->c, "HSET alloc:{s1}:meta kind stock");
    assert_int_equal(itest_ctl(t, &out, "push s1 --user u1 --op buy --item a"), 1);
    assert_non_null(strstr(out, "is not live (not in P:batches)"));
    free(out);
    /* --force pushes anyway */
    assert_int_equal(itest_ctl(t, &out, "push s1 --user u1 --op buy --item a --force"), 0);
    assert_non_null(strstr(out, "ordinal=1"));
    free(out);
    assert_int_equal(proc_int(t->c, "LLEN alloc:{s1}:queue"), 1);
    itest_cmd(t->c, "SADD alloc:batches s1");
    assert_int_equal(itest_ctl(t, NULL, "push s1 --user u2 --op buy --item a"), 0);
}

static void test_filter_typed_by_attrs(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "d1", "kind room groups listed", "R1 2 R2 2",   /* groups listed: group --members */
                "R1 {\"building\":\"7\",\"floor\":3} R2 {\"building\":\"8\",\"floor\":4}");
    char *out;
    assert_int_equal(itest_ctl(t, NULL, "push d1 --id g1 --user u1 --op group --members u1,u2 "
                                        "--filter building=7,floor=3"), 0);
    assert_int_equal(itest_ctl(t, NULL, "push d1 --id g2 --user u3 --op group --members u3,u4 "
                                        "--filter 'building=\"8\"'"), 0);
    char *q = harness_str(t->c, "LINDEX alloc:{d1}:queue 0");
    assert_non_null(strstr(q, "\"filter\":{\"building\":\"7\",\"floor\":3}"));
    free(q);
    q = harness_str(t->c, "LINDEX alloc:{d1}:queue 1");
    assert_non_null(strstr(q, "\"filter\":{\"building\":\"8\"}"));   /* not "\"8\"" */
    free(q);
    /* a number where the rooms have a number, and no such attribute */
    assert_int_equal(itest_ctl(t, &out, "push d1 --user u5 --op group --members u5 --filter floor=high"), 2);
    assert_non_null(strstr(out, "attribute 'floor' is a number"));
    free(out);
    assert_int_equal(itest_ctl(t, &out, "push d1 --user u5 --op group --members u5 --filter wing=east"), 2);
    assert_non_null(strstr(out, "no room of this batch has the attribute 'wing'"));
    free(out);
    /* and allocd serves the typed filter: both groups get their building */
    itest_start(t, NULL);
    json_t *r = itest_result(t, "d1", "g1");
    assert_string_equal(itest_jstr(r, "status"), "granted");
    assert_string_equal(itest_jstr(r, "item"), "R1");
    json_decref(r);
    r = itest_result(t, "d1", "g2");
    assert_string_equal(itest_jstr(r, "status"), "granted");
    assert_string_equal(itest_jstr(r, "item"), "R2");
    json_decref(r);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* A request queued before a shuffled opening has no place in line: status
 * used to print "N ahead of you". */
static void test_status_before_shuffled_opening(void **state)
{
    itest *t = *state;
    long long opens = (long long)harness_now_ms() + 600000;
    itest_cmd(t->c, "HSET alloc:{l1}:meta kind stock early shuffle opens_at %lld", opens);
    itest_cmd(t->c, "HSET alloc:{l1}:capacity a 5");
    itest_cmd(t->c, "SADD alloc:batches l1");
    for (int i = 0; i < 3; i++)        /* no daemon: they stay in the queue */
        assert_int_equal(itest_ctl(t, NULL, "push l1 --id q%d --user u%d --op buy --item a", i, i), 0);
    char *out;
    assert_int_equal(itest_ctl(t, &out, "status l1 --id q2"), 0);
    assert_null(strstr(out, "ahead"));
    assert_non_null(strstr(out, "joins the opening lottery"));
    free(out);
    assert_int_equal(itest_ctl(t, &out, "status l1 --id q2 --ordinal 3"), 0);
    assert_null(strstr(out, "ahead"));
    free(out);
    /* after the opening the line means something again */
    itest_cmd(t->c, "HSET alloc:{l1}:meta opens_at 1");
    assert_int_equal(itest_ctl(t, &out, "status l1 --id q2"), 0);
    assert_non_null(strstr(out, "2 ahead of you"));
    free(out);
}

/* Dead entries can be deleted, and requeued as edited. */
static void test_dead_delete_and_edit(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "e1", "kind stock", "a 5", NULL);
    itest_start(t, NULL);
    itest_cmd(t->c, "RPUSH alloc:{e1}:queue %s", "{\"id\":\"x1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"a\"");
    itest_cmd(t->c, "RPUSH alloc:{e1}:queue %s", "junk-1");
    itest_cmd(t->c, "RPUSH alloc:{e1}:queue %s", "junk-2");
    for (int i = 0; i < 100 && proc_int(t->c, "LLEN alloc:{e1}:dead") < 3; i++) harness_sleep_ms(50);
    assert_int_equal(proc_int(t->c, "LLEN alloc:{e1}:dead"), 3);
    char *out;
    /* an edit allocd would refuse is refused here */
    assert_int_equal(itest_ctl(t, &out, "dead e1 --requeue --index 0 --json '{\"id\":\"x1\"}'"), 2);
    assert_non_null(strstr(out, "would not accept"));
    free(out);
    /* the truncated request, fixed and requeued */
    assert_int_equal(itest_ctl(t, &out, "dead e1 --requeue --index 0 --json "
                                        "'{\"id\":\"x1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"a\"}'"), 0);
    assert_non_null(strstr(out, "requeued dead entry 0 as edited"));
    free(out);
    json_t *r = itest_result(t, "e1", "x1");
    assert_string_equal(itest_jstr(r, "status"), "granted");
    json_decref(r);
    assert_int_equal(itest_ctl(t, &out, "dead e1 --delete --index 0"), 0);
    assert_non_null(strstr(out, "deleted dead entry 0"));
    free(out);
    char *left = harness_str(t->c, "LINDEX alloc:{e1}:dead 0");
    assert_non_null(strstr(left, "junk-2"));
    free(left);
    assert_int_equal(itest_ctl(t, NULL, "dead e1 --delete --all"), 0);
    assert_int_equal(proc_int(t->c, "LLEN alloc:{e1}:dead"), 0);
    assert_int_equal(itest_ctl(t, &out, "dead e1 --delete --index 0"), 1);
    free(out);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* top: latency from a batch idle for a while is '-', not the last value
 * frozen (nor 0.00 for "no samples"), and an 80-column terminal still gets
 * every column. */
static void test_top_latency_and_width(void **state)
{
    itest *t = *state;
    itest_cmd(t->c, "SADD alloc:batches a-rather-long-batch-name idle1 fresh1");
    itest_cmd(t->c, "HSET alloc:{idle1}:meta kind stock");
    itest_cmd(t->c, "HSET alloc:{fresh1}:meta kind stock");
    long long now = (long long)harness_now_ms();
    itest_cmd(t->c, "HSET alloc:{idle1}:stats state open owner web-1 decision_p50_us 250 decision_p99_us 900 "
              "updated_at %lld", now - 60000);
    itest_cmd(t->c, "HSET alloc:{fresh1}:stats state open owner web-2 decision_p50_us 250 decision_p99_us 900 "
              "updated_at %lld", now);
    itest_cmd(t->c, "HSET alloc:{a-rather-long-batch-name}:stats state open owner web-3 decision_p50_us 0 "
              "decision_p99_us 0 updated_at %lld", now);
    char *out;
    assert_int_equal(itest_ctl(t, &out, "top"), 0);       /* wide: not a terminal, no $COLUMNS */
    /* P50, P99, ARCHIVE ("-": no archiver ever ran), OWNER */
    assert_non_null(strstr(out, "0.25  0.90  -                      web-2"));
    const char *idle = strstr(out, "\nidle1 ");
    assert_non_null(idle);
    assert_non_null(strstr(idle, "    -     -  -                      web-1"));
    const char *zero = strstr(out, "\na-rather-long-batch-name ");
    assert_non_null(zero);
    assert_non_null(strstr(zero, "    -     -  -                      web-3"));
    free(out);
    setenv("COLUMNS", "80", 1);
    int rc = itest_ctl(t, &out, "top");
    unsetenv("COLUMNS");
    assert_int_equal(rc, 0);
    for (char *line = out; *line;) {
        size_t n = strcspn(line, "\n");
        if (n > 80) fail_msg("line of %zu columns: %.*s", n, (int)n, line);
        line += n + (line[n] == '\n');
    }
    assert_non_null(strstr(out, "P99"));
    assert_non_null(strstr(out, "0.25  0.90  web-2"));
    assert_non_null(strstr(out, "a-rather-long~ "));
    assert_non_null(strstr(out, "web-3"));
    free(out);
}

/* An admin command reusing an id: allocctl refuses it up front, and a daemon
 * that gets one anyway says so in its log (it used to be dropped silently). */
static void test_ctl_id_reuse(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "c1", "kind stock", "a 5", NULL);
    itest_start(t, NULL);
    char *out;
    assert_int_equal(itest_ctl(t, NULL, "push c1 --ctl --op pause --id op1"), 0);
    json_decref(itest_result(t, "c1", "op1"));
    assert_int_equal(itest_ctl(t, &out, "push c1 --ctl --op resume --id op1"), 1);
    assert_non_null(strstr(out, "id op1 already has a result"));
    free(out);
    assert_int_equal(proc_int(t->c, "LLEN alloc:{c1}:ctl"), 0);
    assert_int_equal(itest_ctl(t, NULL, "push c1 --ctl --op resume --id op1 --force"), 0);
    int logged = 0;
    for (int i = 0; i < 100 && !logged; i++) {
        logged = itest_count_in_log(&t->allocd, "admin command id 'op1' already has a result") > 0;
        if (!logged) harness_sleep_ms(50);
    }
    assert_true(logged);
    char *st = harness_str(t->c, "HGET alloc:{c1}:stats state");
    assert_string_equal(st, "paused");
    free(st);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* Rooms have holds too (contract 9.4): batch create used to refuse
 * --hold-ms for a room batch, and status --user did not say until when a
 * held bed is held. */
static void test_room_hold_created_and_shown(void **state)
{
    itest *t = *state;
    char rooms[600], *out;
    snprintf(rooms, sizeof rooms, "%s/rooms.csv", t->redis.dir);
    FILE *f = fopen(rooms, "w");
    assert_non_null(f);
    fputs("id,capacity,building\nR1,2,\"A\"\n", f);
    fclose(f);
    assert_int_equal(itest_ctl(t, &out, "batch create h1 --kind room --from %s --hold-ms 60000", rooms), 0);
    free(out);
    char *hold = harness_str(t->c, "HGET alloc:{h1}:meta hold_ms");
    assert_string_equal(hold, "60000");
    free(hold);
    itest_start(t, NULL);
    assert_int_equal(itest_ctl(t, &out, "push h1 --id c1 --user s1 --op choose --room R1 --wait"), 0);
    assert_non_null(strstr(out, "granted"));
    free(out);
    assert_int_equal(itest_ctl(t, &out, "status h1 --user s1"), 0);
    assert_non_null(strstr(out, "s1 holds a bed in R1"));
    assert_non_null(strstr(out, ": held, held until 20"));
    assert_non_null(strstr(out, "(in "));
    free(out);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* `waiting` is not an answer: wait (and push --wait) used to return at it. */
static void test_wait_for_the_final_result(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "w1", "kind stock", "a 1", NULL);
    itest_start(t, NULL);
    char *out;
    assert_int_equal(itest_ctl(t, &out, "push w1 --id b1 --user u1 --op buy --item a --wait"), 0);
    assert_non_null(strstr(out, "id=b1 ordinal=1"));
    assert_non_null(strstr(out, "status       granted"));
    free(out);
    assert_int_equal(itest_ctl(t, NULL, "push w1 --id b2 --user u2 --op buy --item a --waitlist"), 0);
    json_t *r = itest_result(t, "w1", "b2");
    assert_string_equal(itest_jstr(r, "status"), "waiting");
    json_decref(r);
    assert_int_equal(itest_ctl(t, &out, "wait w1 --id b2 --timeout 0.5"), 1);
    assert_non_null(strstr(out, "b2: waiting"));
    assert_non_null(strstr(out, "no final result for b2"));
    assert_null(strstr(out, "status       waiting"));
    free(out);
    assert_int_equal(itest_ctl(t, NULL, "push w1 --ctl --op set_capacity --item a --capacity 2"), 0);
    assert_int_equal(itest_ctl(t, &out, "wait w1 --id b2 --timeout 10"), 0);
    assert_non_null(strstr(out, "status       granted"));
    free(out);
    assert_int_equal(itest_ctl(t, &out, "push w1 --ctl --op pause --wait"), 2);
    free(out);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* Command lines that used to get a puzzling answer. */
static void test_usage_answers(void **state)
{
    itest *t = *state;
    char *out;
    assert_int_equal(itest_ctl(t, &out, "batch"), 2);
    assert_null(strstr(out, "''"));
    assert_non_null(strstr(out, "which subcommand? create, list, rm, show or slots"));
    free(out);
    assert_int_equal(itest_ctl(t, &out, "wait w1 --id --raw"), 2);
    assert_non_null(strstr(out, "option '--id' needs a value before '--raw'"));
    free(out);
    assert_int_equal(itest_ctl(t, &out, "export --help"), 0);
    assert_non_null(strstr(out, "[--format jsonl|csv] (default jsonl)"));
    free(out);
}

/* A 64 KB dead request is shortened unless --full. */
static void test_dead_huge_request_shortened(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "d2", "kind stock", "a 5", NULL);
    itest_start(t, NULL);
    char *big = malloc(60001);
    assert_non_null(big);
    memset(big, 'x', 60000);
    big[0] = '{';
    big[60000] = '\0';
    itest_cmd(t->c, "RPUSH alloc:{d2}:queue %s", big);
    free(big);
    for (int i = 0; i < 100 && proc_int(t->c, "LLEN alloc:{d2}:dead") < 1; i++) harness_sleep_ms(50);
    char *out;
    assert_int_equal(itest_ctl(t, &out, "dead d2"), 0);
    assert_true(strlen(out) < 1000);
    assert_non_null(strstr(out, "bytes in all; --full shows all)"));
    free(out);
    assert_int_equal(itest_ctl(t, &out, "dead d2 --full"), 0);
    assert_true(strlen(out) > 60000);
    assert_null(strstr(out, "--full shows all"));
    free(out);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* batch show and status: opens_at readable, and the lottery's commitment. */
static void test_times_and_commitment_shown(void **state)
{
    itest *t = *state;
    long long opens = (long long)harness_now_ms() + 3600000;
    itest_cmd(t->c, "HSET alloc:{l1}:meta kind room early shuffle opens_at %lld", opens);
    itest_cmd(t->c, "HSET alloc:{l1}:capacity R1 2");
    itest_cmd(t->c, "SADD alloc:batches l1");
    itest_start(t, NULL);
    assert_int_equal(itest_ctl(t, NULL, "push l1 --id e1 --user s1 --op choose --room R1"), 0);
    itest_expect_hget(t->c, "alloc:{l1}:stats", "lottery_commit");
    char *commit = harness_str(t->c, "HGET alloc:{l1}:stats lottery_commit"), *out;
    const char *cmds[] = { "batch show l1", "status l1" };
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(itest_ctl(t, &out, "%s", cmds[i]), 0);
        assert_non_null(strstr(out, "(in 59 min)"));
        assert_non_null(strstr(out, "Z (in"));
        assert_non_null(strstr(out, "commitment sha256"));
        assert_non_null(strstr(out, commit));
        assert_non_null(strstr(out, "seed not revealed yet"));
        free(out);
    }
    free(commit);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* purge counts every key it removed (it said "1 keys"). */
static void test_purge_counts_keys(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "p2", "kind stock", "a 5 b 5", NULL);
    itest_cmd(t->c, "HSET alloc:{p2}:results r1 x r2 y");
    itest_cmd(t->c, "RPUSH alloc:{p2}:dead z");
    char *out;
    assert_int_equal(itest_ctl(t, &out, "purge p2 --force"), 0);
    assert_non_null(strstr(out, "removed 4 keys"));
    free(out);
    assert_int_equal(proc_int(t->c, "EXISTS alloc:{p2}:meta alloc:{p2}:results"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_push_to_missing_batch),
        ITEST_CASE(test_filter_typed_by_attrs),
        ITEST_CASE(test_status_before_shuffled_opening),
        ITEST_CASE(test_dead_delete_and_edit),
        ITEST_CASE(test_top_latency_and_width),
        ITEST_CASE(test_ctl_id_reuse),
        ITEST_CASE(test_room_hold_created_and_shown),
        ITEST_CASE(test_wait_for_the_final_result),
        ITEST_CASE(test_usage_answers),
        ITEST_CASE(test_dead_huge_request_shortened),
        ITEST_CASE(test_times_and_commitment_shown),
        ITEST_CASE(test_purge_counts_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
