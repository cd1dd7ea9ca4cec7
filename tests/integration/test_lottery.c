/* test_lottery.c -- the opening lottery of users (contract 9.1) end to end:
 * the real allocd and allocctl against a real redis-server.
 *
 * - One user with 60 early requests among 60 users with one (rate_max 3):
 *   the throttle answers the spammer's requests as they are read, before
 *   the opening; the spammer's three kept requests are one ticket, drawn
 *   behind everyone who was not throttled; the seed's commitment is
 *   published before the opening and the seed after it; `allocctl
 *   lottery verify` replays the draw and finds it matches, and finds a
 *   result that was changed afterwards.
 * - kill -9 while collecting the pool, again before the opening, and again
 *   in the middle of serving the pool (a fault holds one pool chunk back so
 *   the kill lands between two applies for sure): every early request gets
 *   exactly one result, the served order is the replay of the committed
 *   seed across all four daemons, and verify matches.
 * - An id pushed again before the opening, with other bytes, once from the
 *   same daemon and once after a kill -9: both are duplicates, the first
 *   push is the one the lottery answers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "core/lottery.h"
#include "worker/lottery_pool.h"
#include "itest.h"

typedef itest fixture;

#define CONF "instance = \"lot\"; "

/* allocctl lottery verify B; its exit code, its output in *out (to free). */
static int verify(fixture *f, const char *b, char **out)
{
    return itest_ctl(f, out, "lottery verify %s", b);
}

static long long stat_int(fixture *f, const char *b, const char *field)
{
    return proc_int(f->c, "HGET alloc:{%s}:stats %s", b, field);
}

static void wait_stat(fixture *f, const char *b, const char *field, long long want, int ms)
{
    long long v = -1;
    for (int i = 0; i < ms / 10 && (v = stat_int(f, b, field)) != want; i++) harness_sleep_ms(10);
    if (v != want) harness_allocd_dump_log(&f->allocd);
    assert_int_equal(v, want);
}

static void wait_opening(long long opens)
{
    while (harness_now_ms() < opens + 50) harness_sleep_ms(20);
}

/* The ms left until `at` (0 once it passed): a wait for something that has
 * to happen before the opening waits no longer than that. */
static int ms_until(long long at)
{
    long long left = at - harness_now_ms();
    return left > 0 ? (int)left : 0;
}

/* allocctl verify of batch b exits 0 and says MATCH, never MISMATCH, and
 * (unless NULL) also says `also`. */
static void assert_verify_matches(fixture *f, const char *b, const char *also)
{
    char *out;
    int rc = verify(f, b, &out);
    if (rc) fprintf(stderr, "%s", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "MATCH"));
    assert_null(strstr(out, "MISMATCH"));
    if (also) assert_non_null(strstr(out, also));
    free(out);
}

/* The revealed seed hashes to the commitment published before the draw. */
static void assert_seed_commits(const char *seed, const char *commit)
{
    char want[LOTTERY_SEED_HEX + 1];
    lottery_commit(seed, want);
    assert_string_equal(want, commit);
}

enum { SP_USERS = 60, SP_SPAM = 60 };   /* the spammer test: users, spam requests */

/* Before the opening: 60 users and one spammer push alternately; the
 * throttle answers 57 of the spammer's, the other 63 wait in the pool, the
 * commitment is published and verify says the seed is not revealed yet.
 * Returns the commitment. */
static char *spam_before_opening(fixture *f, long long opens)
{
    itest_cmd(f->c, "HSET alloc:{sp}:meta kind room opens_at %lld early shuffle rate_max 3 "
                    "rate_window_ms 60000 penalty_ms 60000", opens);
    itest_cmd(f->c, "HSET alloc:{sp}:capacity R1 3");
    itest_cmd(f->c, "SADD alloc:batches sp");
    itest_start(f, CONF);
    for (int i = 0; i < SP_USERS + SP_SPAM; i++) {
        if (i % 2) itest_push(f, "sp", "{\"id\":\"s%d\",\"user\":\"u%d\",\"op\":\"choose\",\"room\":\"R1\"}", i / 2, i / 2);
        else itest_push(f, "sp", "{\"id\":\"x%d\",\"user\":\"spam\",\"op\":\"choose\",\"room\":\"R1\"}", i / 2);
    }
    wait_stat(f, "sp", "early_kept", SP_USERS + 3, ms_until(opens));
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{sp}:results", SP_SPAM - 3, ms_until(opens)), SP_SPAM - 3);
    itest_expect(f, "sp", "x3", "rejected", "throttled");
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{sp}:results x0"), 0);
    assert_int_equal(stat_int(f, "sp", "lottery_users"), SP_USERS + 1);
    assert_int_equal(stat_int(f, "sp", "processed"), SP_SPAM - 3);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{sp}:early"), SP_USERS + 3 + 1);  /* and "! spam" */
    char *commit = harness_str(f->c, "HGET alloc:{sp}:stats lottery_commit");
    assert_non_null(commit);
    assert_int_equal(strlen(commit), 64);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{sp}:stats lottery_seed"), 0);
    char *out;
    assert_int_equal(verify(f, "sp", &out), 1);   /* not revealed yet */
    assert_non_null(strstr(out, "not revealed yet"));
    free(out);
    assert_true(harness_now_ms() < opens);   /* all of the above was seen before the opening */
    return commit;
}

/* After it: everyone answered, the revealed seed matches the commitment,
 * the spammer's one ticket is drawn last, verify matches. */
static void spam_after_opening(fixture *f, long long opens, const char *commit)
{
    wait_opening(opens);
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{sp}:results", SP_USERS + SP_SPAM, 10000), SP_USERS + SP_SPAM);
    char *seed = harness_wait_hget(f->c, "alloc:{sp}:stats", "lottery_seed", 2000);
    assert_non_null(seed);
    assert_seed_commits(seed, commit);
    free(seed);
    /* the spammer's ticket is the last: three beds went to others */
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "x%d", i);
        json_t *r = itest_result(f, "sp", id);
        assert_string_equal(itest_jstr(r, "status"), "rejected");
        assert_int_equal(itest_jint(r, "draw"), SP_USERS + 1);
        json_decref(r);
    }
    assert_int_equal(stat_int(f, "sp", "granted"), 3);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{sp}:holders spam"), 0);
    assert_verify_matches(f, "sp", "draw 1 ");
}

/* A result rewritten afterwards is found. */
static void spam_rewrite_found(fixture *f)
{
    char *out;
    char *r0 = harness_str(f->c, "HGET alloc:{sp}:results s0");
    json_t *j = json_loads(r0, 0, NULL);
    json_object_set_new(j, "draw", json_integer(json_integer_value(json_object_get(j, "draw")) % SP_USERS + 1));
    char *changed = json_dumps(j, JSON_COMPACT);
    redisReply *w = redisCommand(f->c, "HSET alloc:{sp}:results s0 %s", changed);
    freeReplyObject(w);
    assert_int_equal(verify(f, "sp", &out), 1);
    assert_non_null(strstr(out, "MISMATCH"));
    free(out);
    free(changed);
    json_decref(j);
    free(r0);
}

static void test_spammer_is_one_ticket_drawn_last(void **state)
{
    fixture *f = *state;
    /* the start, the 120 pushes and every check up to the verify in
     * spam_before_opening happen before the opening, also on a loaded
     * machine */
    long long opens = harness_now_ms() + 6000;
    char *commit = spam_before_opening(f, opens);
    spam_after_opening(f, opens, commit);
    spam_rewrite_found(f);
    free(commit);
}

/* The pool as Redis holds it, drawn with the committed seed: the id served
 * at position k. */
static char *served_at(fixture *f, const char *b, size_t k)
{
    lottery_pool p;
    lottery_pool_init(&p, 1);
    redisReply *r = redisCommand(f->c, "LRANGE alloc:{%s}:early 0 -1", b);
    for (size_t i = 0; i < r->elements; i++)
        assert_int_equal(lottery_pool_load_entry(&p, r->element[i]->str, r->element[i]->len), 0);
    freeReplyObject(r);
    char *seed = harness_str(f->c, "HGET alloc:{%s}:internal lottery_seed", b);
    snprintf(p.seed, sizeof p.seed, "%s", seed);
    free(seed);
    assert_int_equal(lottery_pool_draw(&p, NULL), 0);
    assert_true(k < p.n);
    const char *raw = p.reqs[p.serve[k]].raw;
    const char *at = strstr(raw, "\"id\":\"") + 6;
    char *id = strndup(at, (size_t)(strchr(at, '"') - at));
    lottery_pool_free(&p);
    return id;
}

enum { KL_USERS = 80, KL_N = 100, KL_CHUNK = 8 };

/* Users from..to-1 choose HALL; every fourth sends an auto too. Returns
 * the requests pushed. */
static int push_users(fixture *f, int from, int to)
{
    int pushed = 0;
    for (int u = from; u < to; u++) {
        itest_push(f, "k9", "{\"id\":\"a%d\",\"user\":\"u%d\",\"op\":\"choose\",\"room\":\"HALL\"}", u, u);
        pushed++;
        if (u % 4 == 0) { itest_push(f, "k9", "{\"id\":\"b%d\",\"user\":\"u%d\",\"op\":\"auto\",\"prefs\":[\"HALL\"]}", u, u); pushed++; }
    }
    return pushed;
}

/* The pool collected across a kill -9, half of it pushed while no daemon
 * ran, under one seed: its commitment is published once and kept. The
 * daemon is killed again before the opening. Returns the commitment. */
static char *collect_across_kills(fixture *f, const char *conf)
{
    int pushed = push_users(f, 0, 40);
    wait_stat(f, "k9", "early_kept", pushed, 5000);
    char *commit = harness_str(f->c, "HGET alloc:{k9}:stats lottery_commit");
    assert_non_null(commit);
    harness_allocd_kill(&f->allocd);                       /* kill -9 while collecting */
    push_users(f, 40, KL_USERS);                           /* while no daemon runs */
    itest_start(f, conf);
    wait_stat(f, "k9", "early_kept", KL_N, 5000);
    char *commit2 = harness_str(f->c, "HGET alloc:{k9}:stats lottery_commit");
    assert_string_equal(commit, commit2);                  /* one seed for the whole pool */
    free(commit2);
    assert_int_equal(stat_int(f, "k9", "lottery_users"), KL_USERS);
    harness_allocd_kill(&f->allocd);                       /* and once more before the opening */
    return commit;
}

/* The third daemon cannot apply the pool chunk holding the request served
 * 5th chunk in: it stalls mid-pool after the opening, and is killed there;
 * what it served already matches the log. */
static void stall_mid_pool(fixture *f, const char *conf)
{
    char *stall = served_at(f, "k9", 5 * KL_CHUNK + 3);
    /* nothing here has to happen before the opening: a daemon that starts
     * after it draws at its start, the same draw */
    long long opens = harness_now_ms() + 800;
    itest_cmd(f->c, "HSET alloc:{k9}:meta opens_at %lld", opens);
    setenv("ALLOCD_FAULT_APPLY_ID", stall, 1);
    free(stall);
    itest_start(f, conf);
    unsetenv("ALLOCD_FAULT_APPLY_ID");
    wait_opening(opens);
    /* the daemon's start, draw and five applies: 15 s for a loaded machine */
    long long served = -1;
    for (int64_t end = harness_now_ms() + 15000; harness_now_ms() < end; harness_sleep_ms(10)) {
        served = proc_int(f->c, "HGET alloc:{k9}:internal early_served");
        if (served == 5 * KL_CHUNK) break;
    }
    assert_int_equal(served, 5 * KL_CHUNK);
    harness_sleep_ms(300);
    assert_int_equal(proc_int(f->c, "HGET alloc:{k9}:internal early_served"), 5 * KL_CHUNK);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{k9}:results"), 5 * KL_CHUNK);
    harness_allocd_kill(&f->allocd);                       /* kill -9 mid-pool */
    assert_verify_matches(f, "k9", NULL);
}

/* After the pool is served to the end: one bed per user, each user's
 * second request served right after the first (one ticket per user), the
 * log replaying, and the revealed seed matching the commitment. */
static void assert_pool_served(fixture *f, const char *commit)
{
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{k9}:results", KL_N, 10000), KL_N);
    wait_stat(f, "k9", "granted", KL_USERS, 5000);
    assert_int_equal(stat_int(f, "k9", "processed"), KL_N);
    assert_int_equal(stat_int(f, "k9", "duplicates"), 0);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{k9}:holders"), KL_USERS);
    assert_int_equal(proc_int(f->c, "HGET alloc:{k9}:internal lottery_done"), 1);
    for (int u = 0; u < KL_USERS; u += 4) {
        char a[16], b[16];
        snprintf(a, sizeof a, "a%d", u);
        snprintf(b, sizeof b, "b%d", u);
        json_t *ra = itest_result(f, "k9", a), *rb = itest_result(f, "k9", b);
        assert_string_equal(itest_jstr(ra, "status"), "granted");
        assert_string_equal(itest_jstr(rb, "status"), "rejected");   /* already_holding */
        assert_int_equal(itest_jint(ra, "draw"), itest_jint(rb, "draw"));
        json_decref(ra);
        json_decref(rb);
    }
    assert_verify_matches(f, "k9", NULL);
    char *seed = harness_str(f->c, "HGET alloc:{k9}:stats lottery_seed");
    assert_seed_commits(seed, commit);
    free(seed);
}

static void test_kill9_while_collecting_and_serving(void **state)
{
    fixture *f = *state;
    /* the opening is moved closer once the pool is complete */
    itest_cmd(f->c, "HSET alloc:{k9}:meta kind room opens_at %lld early shuffle", harness_now_ms() + 600000);
    itest_cmd(f->c, "HSET alloc:{k9}:capacity HALL 1000");
    itest_cmd(f->c, "SADD alloc:batches k9");
    char conf[256];
    snprintf(conf, sizeof conf, CONF "chunk = %d;", KL_CHUNK);
    itest_start(f, conf);
    char *commit = collect_across_kills(f, conf);
    snprintf(conf, sizeof conf, CONF "chunk = %d; max_attempts = 100; backoff_min_ms = 50; backoff_max_ms = 200;",
             KL_CHUNK);
    stall_mid_pool(f, conf);
    itest_start(f, conf);
    assert_pool_served(f, commit);
    free(commit);
}

/* A pool request with "wait":true that finds no bed waits (9.5); served
 * from the waitlist after a release, its final result keeps the draw
 * (9.1) and says it came from the waitlist (wait_no), and lottery verify
 * still matches: the waitlist's later grant is no break of the order.
 * Also across a restart while it waits (the draw rides in P:{B}:waitlist). */
static void test_pool_request_served_from_waitlist(void **state)
{
    fixture *f = *state;
    long long opens = harness_now_ms() + 5000;   /* the start and two pushes fit under ASan */
    itest_cmd(f->c, "HSET alloc:{wl}:meta kind room opens_at %lld early shuffle", opens);
    itest_cmd(f->c, "HSET alloc:{wl}:capacity R1 1");
    itest_cmd(f->c, "SADD alloc:batches wl");
    itest_start(f, CONF);
    itest_push(f, "wl", "{\"id\":\"a\",\"user\":\"ua\",\"op\":\"choose\",\"room\":\"R1\",\"wait\":true}");
    itest_push(f, "wl", "{\"id\":\"b\",\"user\":\"ub\",\"op\":\"choose\",\"room\":\"R1\",\"wait\":true}");
    wait_stat(f, "wl", "early_kept", 2, ms_until(opens));
    wait_opening(opens);
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{wl}:results", 2, 10000), 2);
    wait_stat(f, "wl", "waiting", 1, 5000);
    const char *won = proc_int(f->c, "HEXISTS alloc:{wl}:holders ua") ? "ua" : "ub";
    const char *lost = strcmp(won, "ua") ? "a" : "b";
    json_t *w = itest_result(f, "wl", lost);
    assert_string_equal(itest_jstr(w, "status"), "waiting");
    assert_int_equal(itest_jint(w, "draw"), 2);
    json_decref(w);
    /* a restart while it waits: the draw is read back from the waitlist */
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);
    itest_start(f, CONF);
    itest_push(f, "wl", "{\"id\":\"rel\",\"user\":\"%s\",\"op\":\"release\"}", won);
    wait_stat(f, "wl", "wait_served", 1, 5000);
    json_t *r = itest_result(f, "wl", lost);
    assert_string_equal(itest_jstr(r, "status"), "granted");
    assert_int_equal(itest_jint(r, "draw"), 2);
    assert_int_equal(itest_jint(r, "wait_no"), 1);
    json_decref(r);
    assert_verify_matches(f, "wl", NULL);
}

/* A kept request has no result until the opening, so the dedup asked
 * Redis in vain and kept a later push of the same id too; the draw then
 * decided which one was answered (found by the chaos run, whose duplicate
 * ids with other bytes met its early batch). The pool's ids count now. */
static void test_duplicate_id_before_opening(void **state)
{
    fixture *f = *state;
    long long opens = harness_now_ms() + 6000;   /* two starts and a kill -9 fit under ASan */
    itest_cmd(f->c, "HSET alloc:{dd}:meta kind room opens_at %lld early shuffle", opens);
    itest_cmd(f->c, "HSET alloc:{dd}:capacity R1 2");
    itest_cmd(f->c, "SADD alloc:batches dd");
    itest_start(f, CONF);
    itest_push(f, "dd", "{\"id\":\"q1\",\"user\":\"a\",\"op\":\"choose\",\"room\":\"R1\"}");
    wait_stat(f, "dd", "early_kept", 1, ms_until(opens));
    itest_push(f, "dd", "{\"id\":\"q1\",\"user\":\"b\",\"op\":\"choose\",\"room\":\"R1\"}");
    wait_stat(f, "dd", "duplicates", 1, ms_until(opens));
    harness_allocd_kill(&f->allocd);          /* the pool comes back from Redis */
    itest_start(f, CONF);
    itest_push(f, "dd", "{\"id\":\"q1\",\"user\":\"c\",\"op\":\"release\"}");
    wait_stat(f, "dd", "duplicates", 2, ms_until(opens));
    assert_int_equal(stat_int(f, "dd", "early_kept"), 1);
    assert_true(harness_now_ms() < opens);
    wait_opening(opens);
    assert_int_equal(harness_wait_hlen(f->c, "alloc:{dd}:results", 1, 10000), 1);
    itest_expect(f, "dd", "q1", "granted", NULL);
    json_t *r = itest_result(f, "dd", "q1");
    assert_string_equal(itest_jstr(r, "user"), "a");
    json_decref(r);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{dd}:holders b"), 0);
    assert_verify_matches(f, "dd", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_spammer_is_one_ticket_drawn_last),
        ITEST_CASE(test_kill9_while_collecting_and_serving),
        ITEST_CASE(test_pool_request_served_from_waitlist),
        ITEST_CASE(test_duplicate_id_before_opening),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
