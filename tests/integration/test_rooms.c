/* test_rooms.c -- room batches end to end, real allocd and real Redis:
 * every op and reason, attrs filters, the early=shuffle lottery, the
 * per-user throttle, and admin commands racing requests. */
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

static void ctl(fixture *f, const char *b, const char *json)
{
    itest_cmd(f->c, "RPUSH alloc:{%s}:ctl %s", b, json);
}

/* Rooms R1 (2 beds, building 7 floor 1), R2 (3, b7 f2), R3 (1, b8 f1), R4 (4, b8 f2). */
static void dorm(fixture *f, const char *b, const char *meta)
{
    itest_cmd(f->c, "DEL alloc:{%s}:meta", b);
    char line[512];
    snprintf(line, sizeof line, "HSET alloc:{%s}:meta kind room groups listed %s", b, meta);
    itest_cmd(f->c, line);
    itest_cmd(f->c, "HSET alloc:{%s}:capacity R1 2 R2 3 R3 1 R4 4", b);
    itest_cmd(f->c, "HSET alloc:{%s}:attrs R1 %s R2 %s R3 %s R4 %s", b,
        "{\"building\":\"7\",\"floor\":1}", "{\"building\":\"7\",\"floor\":2}",
        "{\"building\":\"8\",\"floor\":1}", "{\"building\":\"8\",\"floor\":2}");
    itest_cmd(f->c, "SADD alloc:batches %s", b);
}

static long long hint(fixture *f, const char *b, const char *h, const char *field)
{
    return proc_int(f->c, "HGET alloc:{%s}:%s %s", b, h, field);
}

static void test_every_op_and_reason(void **state)
{
    fixture *f = *state;
    dorm(f, "d1", "max_group 3");
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    itest_push(f, "d1", "{\"id\":\"c1\",\"user\":\"s1\",\"op\":\"choose\",\"room\":\"R3\"}");
    itest_push(f, "d1", "{\"id\":\"c2\",\"user\":\"s2\",\"op\":\"choose\",\"room\":\"R3\"}");
    itest_push(f, "d1", "{\"id\":\"c3\",\"user\":\"s1\",\"op\":\"choose\",\"room\":\"R1\"}");
    itest_push(f, "d1", "{\"id\":\"c4\",\"user\":\"s2\",\"op\":\"choose\",\"room\":\"R9\"}");
    itest_push(f, "d1", "{\"id\":\"a1\",\"user\":\"s2\",\"op\":\"auto\",\"prefs\":[\"R9\",\"R3\",\"R1\"]}");
    itest_push(f, "d1", "{\"id\":\"a2\",\"user\":\"s3\",\"op\":\"auto\",\"prefs\":[\"R3\"],\"filter\":{\"building\":\"8\"}}");
    itest_push(f, "d1", "{\"id\":\"a3\",\"user\":\"s4\",\"op\":\"auto\",\"prefs\":[\"R3\"],\"filter\":{\"building\":\"9\"}}");
    itest_push(f, "d1", "{\"id\":\"g1\",\"user\":\"s5\",\"op\":\"group\",\"members\":[\"s5\",\"s6\",\"s7\"],\"prefs\":[\"R1\",\"R2\"]}");
    itest_push(f, "d1", "{\"id\":\"g2\",\"user\":\"s8\",\"op\":\"group\",\"members\":[\"s8\",\"s1\"],\"prefs\":[\"R4\"]}");
    itest_push(f, "d1", "{\"id\":\"g3\",\"user\":\"s8\",\"op\":\"group\",\"members\":[\"s8\",\"s9\",\"s10\",\"s11\"],\"prefs\":[\"R4\"]}");
    itest_push(f, "d1", "{\"id\":\"g4\",\"user\":\"s8\",\"op\":\"group\",\"members\":[\"s8\",\"s9\",\"s10\"],\"prefs\":[\"R1\"]}");
    itest_push(f, "d1", "{\"id\":\"w1\",\"user\":\"s1\",\"op\":\"switch\",\"room\":\"R2\"}");
    itest_push(f, "d1", "{\"id\":\"w2\",\"user\":\"s20\",\"op\":\"switch\",\"room\":\"R2\"}");
    itest_push(f, "d1", "{\"id\":\"w3\",\"user\":\"s2\",\"op\":\"switch\",\"room\":\"R2\"}");
    itest_push(f, "d1", "{\"id\":\"w4\",\"user\":\"s2\",\"op\":\"switch\",\"room\":\"R1\"}");
    itest_push(f, "d1", "{\"id\":\"r1\",\"user\":\"s20\",\"op\":\"release\"}");
    itest_push(f, "d1", "{\"id\":\"r2\",\"user\":\"s1\",\"op\":\"release\"}");
    itest_push(f, "d1", "{\"id\":\"k1\",\"user\":\"s1\",\"op\":\"buy\",\"item\":\"R1\"}");
    itest_expect(f, "d1", "c1", "granted", "R3");
    itest_expect(f, "d1", "c2", "rejected", "room_full");
    itest_expect(f, "d1", "c3", "rejected", "already_holding");
    itest_expect(f, "d1", "c4", "rejected", "unknown_item");
    itest_expect(f, "d1", "a1", "granted", "R1");          /* R9 unknown, R3 full */
    itest_expect(f, "d1", "a2", "granted", "R4");          /* filter: only R4 left in b8 */
    itest_expect(f, "d1", "a3", "rejected", "no_room");
    itest_expect(f, "d1", "g1", "granted", "R2");          /* R1 has one bed left */
    json_t *g = itest_result(f, "d1", "g1");
    assert_int_equal(json_array_size(json_object_get(g, "members")), 3);
    json_decref(g);
    itest_expect(f, "d1", "g2", "rejected", "member_busy");
    itest_expect(f, "d1", "g3", "rejected", "group_too_large");
    itest_expect(f, "d1", "g4", "rejected", "no_room");
    itest_expect(f, "d1", "w1", "rejected", "room_full");  /* R2 is full: s1 keeps R3 */
    itest_expect(f, "d1", "w2", "rejected", "not_holding");
    itest_expect(f, "d1", "w3", "rejected", "room_full");
    itest_expect(f, "d1", "w4", "rejected", "already_holding");
    itest_expect(f, "d1", "r1", "rejected", "not_holding");
    itest_expect(f, "d1", "r2", "done", "R3");
    itest_expect(f, "d1", "k1", "rejected", "wrong_kind");
    /* final state: R1 s2 (1 of 2), R2 s5 s6 s7 (full), R3 empty, R4 s3 */
    assert_int_equal(hint(f, "d1", "free", "R1"), 1);
    assert_int_equal(hint(f, "d1", "free", "R2"), 0);
    assert_int_equal(hint(f, "d1", "free", "R3"), 1);
    assert_int_equal(hint(f, "d1", "free", "R4"), 3);
    char *h = harness_str(f->c, "HGET alloc:{d1}:holders s6");
    json_error_t e;
    json_t *hold = json_loads(h, 0, &e);
    assert_string_equal(itest_jstr(hold, "item"), "R2");
    assert_string_equal(itest_jstr(hold, "req"), "g1");
    json_decref(hold);
    free(h);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{d1}:holders s1"), 0);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{d1}:holders"), 5);
    assert_int_equal(hint(f, "d1", "stats", "free_units"), 5);
}

static void test_switch_moves_the_bed(void **state)
{
    fixture *f = *state;
    dorm(f, "d2", "");
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    itest_push(f, "d2", "{\"id\":\"c1\",\"user\":\"s1\",\"op\":\"choose\",\"room\":\"R3\"}");
    itest_push(f, "d2", "{\"id\":\"w1\",\"user\":\"s1\",\"op\":\"switch\",\"room\":\"R4\"}");
    itest_push(f, "d2", "{\"id\":\"c2\",\"user\":\"s2\",\"op\":\"choose\",\"room\":\"R3\"}");
    itest_expect(f, "d2", "w1", "granted", "R4");
    itest_expect(f, "d2", "c2", "granted", "R3");
    assert_int_equal(hint(f, "d2", "free", "R4"), 3);
    assert_int_equal(hint(f, "d2", "free", "R3"), 0);
    /* the log: grant, release + grant (switch), grant */
    json_t *log = itest_log(f->c, "d2");
    assert_int_equal(json_array_size(log), 4);
    const char *types[] = { "grant", "release", "grant", "grant" };
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(itest_jstr(json_array_get(log, i), "type"), types[i]);
    json_decref(log);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Requests pushed before opens_at are served in a random order (a lottery),
 * every one of them gets a result, and requests pushed after the opening
 * come after all of them. */
static void test_shuffle_lottery(void **state)
{
    fixture *f = *state;
    enum { EARLY = 300, LATE = 20 };
    long long opens = harness_now_ms() + 6000;   /* the start and 300 pushes fit under ASan */
    char meta[128];
    snprintf(meta, sizeof meta, "opens_at %lld early shuffle", opens);
    itest_cmd(f->c, "HSET alloc:{lot}:meta kind room opens_at %lld early shuffle", opens);
    itest_cmd(f->c, "HSET alloc:{lot}:capacity HALL 1000");
    itest_cmd(f->c, "SADD alloc:batches lot");
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    for (int i = 0; i < EARLY; i++)
        itest_push(f, "lot", "{\"id\":\"e%d\",\"user\":\"s%d\",\"op\":\"choose\",\"room\":\"HALL\"}", i, i);
    /* the first apply writes the state: polled, not a fixed wait */
    char *st = harness_wait_hget(f->c, "alloc:{lot}:stats", "state", (int)(opens - 200 - harness_now_ms()));
    assert_non_null(st);
    assert_string_equal(st, "waiting");
    free(st);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{lot}:results"), 0);
    while (harness_now_ms() < opens + 50) harness_sleep_ms(20);
    for (int i = 0; i < LATE; i++)
        itest_push(f, "lot", "{\"id\":\"l%d\",\"user\":\"t%d\",\"op\":\"choose\",\"room\":\"HALL\"}", i, i);
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{lot}:results", EARLY + LATE, 10000), EARLY + LATE);
    long long rank_of_seq[EARLY], inversions = 0, max_early = 0;
    char id[16];
    for (int i = 0; i < EARLY; i++) {
        snprintf(id, sizeof id, "e%d", i);
        json_t *r = itest_result(f, "lot", id);
        assert_string_equal(itest_jstr(r, "status"), "granted");
        assert_int_equal(json_integer_value(json_object_get(r, "seq")), i + 1);
        rank_of_seq[i] = json_integer_value(json_object_get(r, "rank"));
        if (rank_of_seq[i] > max_early) max_early = rank_of_seq[i];
        json_decref(r);
    }
    for (int i = 1; i < EARLY; i++) if (rank_of_seq[i] < rank_of_seq[i - 1]) inversions++;
    assert_true(inversions > EARLY / 4);   /* in push order there would be none */
    assert_int_equal(max_early, EARLY);
    qsort(rank_of_seq, EARLY, sizeof rank_of_seq[0], cmp_ll);
    for (int i = 0; i < EARLY; i++) assert_int_equal(rank_of_seq[i], i + 1);
    for (int i = 0; i < LATE; i++) {
        snprintf(id, sizeof id, "l%d", i);
        json_t *r = itest_result(f, "lot", id);
        assert_int_equal(json_integer_value(json_object_get(r, "rank")), EARLY + i + 1);
        json_decref(r);
    }
    /* the pool stays for `allocctl lottery verify` */
    assert_int_equal(proc_int(f->c, "LLEN alloc:{lot}:early"), EARLY);
    assert_int_equal(proc_int(f->c, "HGET alloc:{lot}:stats dequeued"), EARLY + LATE);
}

static void test_throttle(void **state)
{
    fixture *f = *state;
    dorm(f, "th", "rate_max 3 rate_window_ms 60000 penalty_ms 60000");
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    for (int i = 0; i < 6; i++)
        itest_push(f, "th", "{\"id\":\"f%d\",\"user\":\"flood\",\"op\":\"release\"}", i);
    itest_push(f, "th", "{\"id\":\"ok1\",\"user\":\"calm\",\"op\":\"choose\",\"room\":\"R4\"}");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "f%d", i);
        itest_expect(f, "th", id, "rejected", "not_holding");
    }
    itest_expect(f, "th", "f3", "rejected", "throttled");
    itest_expect(f, "th", "f4", "rejected", "throttled");
    itest_expect(f, "th", "f5", "rejected", "throttled");
    itest_expect(f, "th", "ok1", "granted", "R4");
    /* Contract 9.6: a throttled result says when to come back: at + penalty. */
    json_t *r = itest_result(f, "th", "f3");
    assert_int_equal(itest_jint(r, "retry_at"), itest_jint(r, "at") + 60000);
    json_decref(r);
}

static void test_admin_commands_race_requests(void **state)
{
    fixture *f = *state;
    dorm(f, "ad", "");
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    itest_push(f, "ad", "{\"id\":\"x1\",\"user\":\"s1\",\"op\":\"choose\",\"room\":\"R1\"}");
    itest_expect(f, "ad", "x1", "granted", "R1");
    ctl(f, "ad", "{\"id\":\"p1\",\"op\":\"pause\"}");
    itest_expect(f, "ad", "p1", "done", NULL);
    char *st = harness_str(f->c, "HGET alloc:{ad}:stats state");
    assert_string_equal(st, "paused");
    free(st);
    for (int i = 0; i < 50; i++)
        itest_push(f, "ad", "{\"id\":\"y%d\",\"user\":\"u%d\",\"op\":\"auto\",\"prefs\":[\"R1\",\"R2\",\"R3\",\"R4\"]}", i, i);
    harness_sleep_ms(500);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{ad}:queue"), 50);   /* requests stay queued */
    ctl(f, "ad", "{\"id\":\"sc1\",\"op\":\"set_capacity\",\"item\":\"R1\",\"capacity\":0}");
    itest_expect(f, "ad", "sc1", "rejected", "limit");                           /* s1 holds a bed */
    ctl(f, "ad", "{\"id\":\"sc2\",\"op\":\"set_capacity\",\"item\":\"R4\",\"capacity\":10}");
    ctl(f, "ad", "{\"id\":\"sc3\",\"op\":\"set_capacity\",\"item\":\"R5\",\"capacity\":2}");
    ctl(f, "ad", "{\"id\":\"r1\",\"op\":\"resume\"}");
    itest_expect(f, "ad", "sc2", "done", "R4");
    itest_expect(f, "ad", "r1", "done", NULL);
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{ad}:results", 56, 10000), 56);
    /* 2+3+1+10 = 16 beds, s1 has one, so 15 of the 50 get one */
    long long granted = 0;
    for (int i = 0; i < 50; i++) {
        char id[16];
        snprintf(id, sizeof id, "y%d", i);
        json_t *r = itest_result(f, "ad", id);
        if (!strcmp(itest_jstr(r, "status"), "granted")) granted++;
        else assert_string_equal(itest_jstr(r, "reason"), "no_room");
        json_decref(r);
    }
    assert_int_equal(granted, 15);
    assert_int_equal(proc_int(f->c, "HGET alloc:{ad}:capacity R4"), 10);
    assert_int_equal(proc_int(f->c, "HGET alloc:{ad}:capacity R5"), 2);
    ctl(f, "ad", "{\"id\":\"cl\",\"op\":\"close\"}");
    itest_expect(f, "ad", "cl", "done", NULL);
    itest_push(f, "ad", "{\"id\":\"z1\",\"user\":\"s1\",\"op\":\"release\"}");
    itest_expect(f, "ad", "z1", "rejected", "closed");
    ctl(f, "ad", "{\"id\":\"r2\",\"op\":\"resume\"}");
    itest_expect(f, "ad", "r2", "rejected", "closed");
    st = harness_str(f->c, "HGET alloc:{ad}:stats state");
    assert_string_equal(st, "closed");
    free(st);
    assert_int_equal(proc_int(f->c, "HGET alloc:{ad}:stats ctl"), 7);
    assert_int_equal(proc_int(f->c, "HGET alloc:{ad}:stats processed"), 52);
    /* the state survives a restart: still closed */
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, NULL), 0);
    itest_push(f, "ad", "{\"id\":\"z2\",\"user\":\"s1\",\"op\":\"release\"}");
    itest_expect(f, "ad", "z2", "rejected", "closed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_every_op_and_reason),
        ITEST_CASE(test_switch_moves_the_bed),
        ITEST_CASE(test_shuffle_lottery),
        ITEST_CASE(test_throttle),
        ITEST_CASE(test_admin_commands_race_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
