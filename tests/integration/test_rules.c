/* test_rules.c -- eligibility (contract 11.2) and groups that fill a room
 * (11.4) decided by the real allocd against a real redis-server: only_X
 * and same_X at choose, auto (skipping rooms, in prefs and in the filter
 * fallback), switch, swap and group; profiles read with the batch and
 * again while it is served, so an edit holds within about a second and
 * never moves a holder; a profile that is no profile counts as none,
 * logged once and counted in stats.bad_profiles; group_fill=exact; the
 * profiles' WATCH (worker/profiles_watch.h): armed before the load, so
 * that no whole read follows it, an edit read within a second through it,
 * and again after its link is killed. */
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

/* longer than a profiles scan's interval and grace (slots_scan.h) */
#define RESCAN_MS 2000

static void choose(fixture *f, const char *b, const char *id, const char *user, const char *room)
{
    itest_push(f, b, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"%s\"}", id, user, room);
}

static void test_only_and_same(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "d", "kind room", "F1 2 G1 3 Y1 1 N1 4",
                "F1 {\"only_gender\":\"F\"} G1 {\"same_gender\":true} Y1 {\"only_year\":[3,4]} N1 {\"b\":\"8\"}");
    itest_cmd(f->c, "HSET alloc:{d}:profiles f1 {\"gender\":\"F\",\"year\":4} f2 {\"gender\":\"F\",\"year\":2} "
                    "m1 {\"gender\":\"M\",\"year\":3} m2 {\"gender\":\"M\",\"year\":4} m3 {\"gender\":\"M\",\"year\":1} "
                    "bad {\"gender\":\"F\",\"year\":4.5}");
    itest_start(f, NULL);
    choose(f, "d", "a1", "m1", "F1");
    itest_expect(f, "d", "a1", "rejected", "not_eligible");
    choose(f, "d", "a2", "f1", "F1");
    itest_expect(f, "d", "a2", "granted", "F1");
    choose(f, "d", "a3", "nobody", "F1");                 /* no profile */
    itest_expect(f, "d", "a3", "rejected", "not_eligible");
    choose(f, "d", "a4", "bad", "F1");                    /* no readable profile */
    itest_expect(f, "d", "a4", "rejected", "not_eligible");
    /* same_gender: the first holder sets it */
    choose(f, "d", "b1", "m1", "G1");
    itest_expect(f, "d", "b1", "granted", "G1");
    choose(f, "d", "b2", "f2", "G1");
    itest_expect(f, "d", "b2", "rejected", "not_eligible");
    choose(f, "d", "b3", "m2", "G1");
    itest_expect(f, "d", "b3", "granted", "G1");
    /* auto skips what the user may not hold, in prefs and in the filter */
    itest_push(f, "d", "{\"id\":\"c1\",\"user\":\"m3\",\"op\":\"auto\",\"prefs\":[\"F1\",\"Y1\",\"N1\"]}");
    itest_expect(f, "d", "c1", "granted", "N1");
    itest_push(f, "d", "{\"id\":\"c2\",\"user\":\"f2\",\"op\":\"auto\",\"prefs\":[\"Y1\"],\"filter\":{}}");
    itest_expect(f, "d", "c2", "granted", "F1");          /* fewest free beds she may take */
    /* switch: f1 may not move into the men's room */
    itest_push(f, "d", "{\"id\":\"s1\",\"user\":\"f1\",\"op\":\"switch\",\"room\":\"G1\"}");
    itest_expect(f, "d", "s1", "rejected", "not_eligible");
    /* the bad profile was logged once, and is counted */
    harness_sleep_ms(RESCAN_MS + 500);
    assert_int_equal(proc_int(f->c, "HGET alloc:{d}:stats bad_profiles"), 1);
    assert_int_equal(itest_count_in_log(&f->allocd, "the profile of bad is not a profile"), 1);
    /* an edit holds within about a second, and moves nobody */
    itest_cmd(f->c, "HSET alloc:{d}:profiles f2 {\"gender\":\"M\",\"year\":2} bad {\"gender\":\"F\",\"year\":4}");
    harness_sleep_ms(RESCAN_MS);
    choose(f, "d", "e1", "bad", "Y1");
    itest_expect(f, "d", "e1", "granted", "Y1");
    char *h = harness_str(f->c, "HGET alloc:{d}:holders f2");
    assert_non_null(strstr(h, "\"item\":\"F1\""));        /* still there */
    free(h);
    char *out;
    int rc = itest_ctl(f, &out, "verify d");
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "BREAK F1 f2: only_gender is \"F\", f2's gender is \"M\""));
    free(out);
    harness_sleep_ms(500);
    assert_int_equal(proc_int(f->c, "HGET alloc:{d}:stats bad_profiles"), 0);
}

/* Waits up to 10 s for the n-th log line holding needle. */
static void wait_log(fixture *f, const char *needle, int n)
{
    assert_true(itest_wait_log(&f->allocd, needle, n, 10000) >= n);
}

/* The id of the client named ".../role" (CLIENT LIST), -1 if none. */
static long long client_named(fixture *f, const char *role)
{
    char *list = harness_str(f->c, "CLIENT LIST");
    long long id = -1;
    for (char *line = strtok(list, "\n"); line && id < 0; line = strtok(NULL, "\n")) {
        char *name = strstr(line, " name=");
        size_t n = name ? strcspn(name + 6, " ") : 0, rl = strlen(role);
        if (name && n >= rl && !strncmp(name + 6 + n - rl, role, rl)) id = atoll(strstr(line, "id=") + 3);
    }
    free(list);
    return id;
}

static void test_watched_edits(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "w", "kind room", "Y1 4", "Y1 {\"only_year\":4}");
    itest_cmd(f->c, "HSET alloc:{w}:profiles u1 {\"year\":3} u2 {\"year\":3}");
    itest_start(f, NULL);
    choose(f, "w", "a1", "u1", "Y1");
    itest_expect(f, "w", "a1", "rejected", "not_eligible");
    wait_log(f, "WATCH alloc:{w}:profiles stands", 1);
    /* the load waited for the WATCH, so it was the read the WATCH needs:
     * none follows it (armed behind the load, it asked for one more).
     * The wait is bounded (250 ms): on a machine slow enough that the
     * WATCH stood after the load, one read follows, and must. */
    harness_sleep_ms(500);
    int stood = itest_count_in_log(&f->allocd, "batch w: the load begins, the profiles' WATCH standing");
    if (!stood) {   /* the read comes with the next take */
        choose(f, "w", "a0", "nobody", "Y1");
        itest_expect(f, "w", "a0", "rejected", "not_eligible");
        wait_log(f, "batch w: profiles read whole", 1);
    }
    int reads = itest_count_in_log(&f->allocd, "batch w: profiles read whole");
    assert_int_equal(reads, stood ? 0 : 1);
    /* watched and unwritten, the hash is not read again while requests
     * come (read every second, 4 s of takes would show three or more) */
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        choose(f, "w", id, "nobody", "Y1");
        itest_expect(f, "w", id, "rejected", "not_eligible");
        harness_sleep_ms(200);
    }
    assert_int_equal(itest_count_in_log(&f->allocd, "batch w: profiles read whole"), reads);
    itest_cmd(f->c, "HSET alloc:{w}:profiles u1 {\"year\":4}");
    harness_sleep_ms(ITEST_EDIT_HOLDS_MS);                 /* the edit holds */
    choose(f, "w", "a2", "u1", "Y1");
    itest_expect(f, "w", "a2", "granted", "Y1");
    /* the watch's link killed: read every second until it stands again */
    long long id = client_named(f, "/profiles-watch");
    assert_true(id > 0);
    itest_cmd(f->c, "CLIENT KILL ID %lld", id);
    itest_cmd(f->c, "HSET alloc:{w}:profiles u2 {\"year\":4}");
    harness_sleep_ms(ITEST_EDIT_HOLDS_MS);
    choose(f, "w", "a3", "u2", "Y1");
    itest_expect(f, "w", "a3", "granted", "Y1");
    wait_log(f, "WATCH alloc:{w}:profiles stands", 2);
    assert_true(itest_count_in_log(&f->allocd, "profiles: the WATCH is lost") >= 1);
}

static void test_group_and_swap(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "g", "kind room groups listed", "G1 2 G2 2 F1 2",
                "G1 {\"same_gender\":true} G2 {\"same_gender\":true} F1 {\"only_gender\":\"F\"}");
    itest_cmd(f->c, "HSET alloc:{g}:profiles a {\"gender\":\"F\"} b {\"gender\":\"M\"} c {\"gender\":\"F\"} "
                    "d {\"gender\":\"F\"}");
    itest_start(f, NULL);
    /* a mixed pair agrees on no same_gender room, and may not share F1 */
    itest_push(f, "g", "{\"id\":\"g1\",\"user\":\"a\",\"op\":\"group\",\"members\":[\"a\",\"b\"],\"prefs\":[\"G1\",\"F1\"]}");
    itest_expect(f, "g", "g1", "rejected", "no_room");
    itest_push(f, "g", "{\"id\":\"g2\",\"user\":\"a\",\"op\":\"group\",\"members\":[\"a\",\"c\"],\"prefs\":[\"G1\"]}");
    itest_expect(f, "g", "g2", "granted", "G1");
    choose(f, "g", "x1", "b", "G2");
    itest_expect(f, "g", "x1", "granted", "G2");
    /* a swap between G1 (women) and G2 (a man): neither may hold the other's bed */
    itest_push(f, "g", "{\"id\":\"w1\",\"user\":\"a\",\"op\":\"swap\",\"with\":\"b\"}");
    itest_push(f, "g", "{\"id\":\"w2\",\"user\":\"b\",\"op\":\"swap\",\"with\":\"a\"}");
    itest_expect(f, "g", "w2", "rejected", "not_eligible");
}

static void test_group_fill_exact(void **state)
{
    fixture *f = *state;
    itest_batch(f->c, "x", "kind room groups listed group_fill exact", "S1 1 D1 2 Q1 4 T1 3", NULL);
    itest_start(f, NULL);
    itest_push(f, "x", "{\"id\":\"g1\",\"user\":\"a\",\"op\":\"group\",\"members\":[\"a\",\"b\"],\"prefs\":[\"Q1\",\"D1\"]}");
    itest_expect(f, "x", "g1", "granted", "D1");          /* never two beds of the quad */
    itest_push(f, "x", "{\"id\":\"g2\",\"user\":\"c\",\"op\":\"group\",\"members\":[\"c\",\"d\"],\"prefs\":[\"Q1\",\"T1\"]}");
    itest_expect(f, "x", "g2", "rejected", "no_room");
    choose(f, "x", "c1", "e", "Q1");                       /* an empty quad is for a group of 4 */
    itest_expect(f, "x", "c1", "rejected", "room_full");
    choose(f, "x", "c2", "e", "S1");
    itest_expect(f, "x", "c2", "granted", "S1");
    itest_push(f, "x", "{\"id\":\"a1\",\"user\":\"h\",\"op\":\"auto\",\"prefs\":[\"Q1\",\"T1\"],\"filter\":{}}");
    itest_expect(f, "x", "a1", "rejected", "no_room");
    itest_push(f, "x", "{\"id\":\"g3\",\"user\":\"m\",\"op\":\"group\",\"members\":[\"m\",\"n\",\"o\",\"p\"],\"prefs\":[\"Q1\"]}");
    itest_expect(f, "x", "g3", "granted", "Q1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_only_and_same),
        ITEST_CASE(test_watched_edits),
        ITEST_CASE(test_group_and_swap),
        ITEST_CASE(test_group_fill_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
