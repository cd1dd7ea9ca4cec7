/* test_groups.c -- groups formed by consent (contract 9.2) end to end: the
 * real allocd against a real redis-server.
 *
 * - A housing round: invitations, an accept that declines the other
 *   invitation, a decline, a full group, a member of another group, shared
 *   prefs edited by two members with the same version (in one chunk and
 *   across chunks: one done, one conflict), the group placed whole, the
 *   leader leaving; P:{B}:groups and the holders' `group` as the contract
 *   shows them.
 * - kill -9 after the group is formed and again after it is placed: the
 *   next daemon loads the groups back and goes on (an accept, prefs with
 *   the stored version, a leave that dissolves).
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

#include "itest.h"

typedef itest fixture;

#define CONF "instance = \"grp\"; "

static void dorm(fixture *f, const char *b)
{
    itest_batch(f->c, b, "kind room max_group 3", "R1 3 R2 2 R3 1",
                "R1 {\"floor\":1} R2 {\"floor\":2} R3 {\"floor\":3}");
}

static json_t *group_of(fixture *f, const char *b, const char *id)
{
    char *s = harness_str(f->c, "HGET alloc:{%s}:groups %s", b, id);
    if (!s) return NULL;
    json_t *j = json_loads(s, 0, NULL);
    free(s);
    return j;
}

/* "a,b,c" of a JSON array of strings */
static void names(json_t *arr, char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(arr); i++)
        snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "," : "", json_string_value(json_array_get(arr, i)));
}

static void expect_group(fixture *f, const char *b, const char *id, const char *leader, const char *members,
                         const char *invited, long long version)
{
    json_t *g = group_of(f, b, id);
    assert_non_null(g);
    char m[256], inv[256];
    names(json_object_get(g, "members"), m, sizeof m);
    names(json_object_get(g, "invited"), inv, sizeof inv);
    assert_string_equal(json_string_value(json_object_get(g, "leader")), leader);
    assert_string_equal(m, members);
    assert_string_equal(inv, invited);
    assert_int_equal(json_integer_value(json_object_get(g, "version")), version);
    json_decref(g);
}

static void expect_field(fixture *f, const char *b, const char *id, const char *k, const char *v)
{
    json_t *r = itest_result(f, b, id);
    assert_string_equal(itest_jstr(r, k), v);
    json_decref(r);
}

/* Pushed before allocd runs, so one chunk decides them in this order:
 * two invitations, bob accepts ann's (declining dan's), eve was never
 * invited, and of two prefs at the same version the later conflicts. */
static void round_first_chunk(fixture *f)
{
    itest_push(f, "h1", "{\"id\":\"i1\",\"user\":\"ann\",\"op\":\"invite\",\"to\":[\"bob\",\"cat\"]}");
    itest_push(f, "h1", "{\"id\":\"i2\",\"user\":\"dan\",\"op\":\"invite\",\"to\":[\"bob\"]}");
    itest_push(f, "h1", "{\"id\":\"a1\",\"user\":\"bob\",\"op\":\"accept\",\"from\":\"ann\"}");
    itest_push(f, "h1", "{\"id\":\"a2\",\"user\":\"bob\",\"op\":\"accept\",\"from\":\"dan\"}");
    itest_push(f, "h1", "{\"id\":\"a3\",\"user\":\"eve\",\"op\":\"accept\",\"from\":\"ann\"}");
    itest_push(f, "h1", "{\"id\":\"p1\",\"user\":\"bob\",\"op\":\"prefs\",\"prefs\":[\"R2\",\"R1\"],\"version\":0}");
    itest_push(f, "h1", "{\"id\":\"p2\",\"user\":\"ann\",\"op\":\"prefs\",\"prefs\":[\"R3\"],\"version\":0}");
    itest_start(f, CONF);
    itest_expect(f, "h1", "i1", "done", NULL);
    expect_field(f, "h1", "i1", "group", "g1");
    expect_field(f, "h1", "i2", "group", "g2");
    itest_expect(f, "h1", "a1", "done", NULL);
    itest_expect(f, "h1", "a2", "rejected", "no_invitation");  /* declined by a1 */
    itest_expect(f, "h1", "a3", "rejected", "no_invitation");
    itest_expect(f, "h1", "p1", "done", NULL);
    json_t *r = itest_result(f, "h1", "p2");                    /* the same version, later */
    assert_string_equal(itest_jstr(r, "reason"), "conflict");
    assert_int_equal(itest_jint(r, "version"), 1);
    json_decref(r);
    expect_group(f, "h1", "g1", "ann", "ann,bob", "cat", 1);
    expect_group(f, "h1", "g2", "dan", "dan", "", 0);
}

/* Across chunks: cat declines, then two stale prefs. */
static void round_across_chunks(fixture *f)
{
    itest_push(f, "h1", "{\"id\":\"d1\",\"user\":\"cat\",\"op\":\"decline\",\"from\":\"bob\"}");
    itest_expect(f, "h1", "d1", "done", NULL);
    itest_push(f, "h1", "{\"id\":\"p3\",\"user\":\"ann\",\"op\":\"prefs\",\"prefs\":[\"R1\"],\"version\":1}");
    itest_expect(f, "h1", "p3", "done", NULL);
    itest_push(f, "h1", "{\"id\":\"p4\",\"user\":\"bob\",\"op\":\"prefs\",\"prefs\":[\"R3\"],\"version\":1}");
    itest_expect(f, "h1", "p4", "rejected", "conflict");
    expect_group(f, "h1", "g1", "ann", "ann,bob", "", 2);
}

/* A member of another group; a full group. */
static void round_busy_and_full(fixture *f)
{
    itest_push(f, "h1", "{\"id\":\"i3\",\"user\":\"ann\",\"op\":\"invite\",\"to\":[\"dan\",\"fay\",\"gus\"]}");
    itest_push(f, "h1", "{\"id\":\"a4\",\"user\":\"dan\",\"op\":\"accept\",\"from\":\"ann\"}");
    itest_push(f, "h1", "{\"id\":\"a5\",\"user\":\"fay\",\"op\":\"accept\",\"from\":\"bob\"}");
    itest_push(f, "h1", "{\"id\":\"a6\",\"user\":\"gus\",\"op\":\"accept\",\"from\":\"ann\"}");
    itest_expect(f, "h1", "a4", "rejected", "member_busy");
    itest_expect(f, "h1", "a5", "done", NULL);
    itest_expect(f, "h1", "a6", "rejected", "group_too_large");
    expect_group(f, "h1", "g1", "ann", "ann,bob,fay", "dan,gus", 2);
}

/* Placed whole with the stored prefs (R1: 3 beds); gus, only invited, is
 * not. */
static void round_placed_whole(fixture *f)
{
    itest_push(f, "h1", "{\"id\":\"g1\",\"user\":\"fay\",\"op\":\"group\"}");
    json_t *r = itest_result(f, "h1", "g1");
    assert_string_equal(itest_jstr(r, "status"), "granted");
    assert_string_equal(itest_jstr(r, "item"), "R1");
    assert_string_equal(itest_jstr(r, "group"), "g1");
    char m[128];
    names(json_object_get(r, "members"), m, sizeof m);
    assert_string_equal(m, "ann,bob,fay");
    json_decref(r);
    for (int i = 0; i < 3; i++) {
        const char *u = (const char *[]){ "ann", "bob", "fay" }[i];
        char *h = harness_str(f->c, "HGET alloc:{h1}:holders %s", u);
        assert_non_null(h);
        assert_non_null(strstr(h, "\"item\":\"R1\""));
        assert_non_null(strstr(h, "\"group\":\"g1\""));
        free(h);
    }
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{h1}:holders gus"), 0);
}

/* The leader leaves: bob leads, ann keeps her bed, without a group. */
static void round_leader_leaves(fixture *f)
{
    itest_push(f, "h1", "{\"id\":\"l1\",\"user\":\"ann\",\"op\":\"leave\"}");
    itest_expect(f, "h1", "l1", "done", NULL);
    expect_group(f, "h1", "g1", "bob", "bob,fay", "dan,gus", 2);
    char *h = harness_str(f->c, "HGET alloc:{h1}:holders ann");
    assert_non_null(strstr(h, "\"item\":\"R1\""));
    assert_null(strstr(h, "group"));
    free(h);
    itest_push(f, "h1", "{\"id\":\"l2\",\"user\":\"ann\",\"op\":\"leave\"}");
    itest_expect(f, "h1", "l2", "rejected", "not_in_group");
}

static void test_housing_round(void **state)
{
    fixture *f = *state;
    dorm(f, "h1");
    round_first_chunk(f);
    round_across_chunks(f);
    round_busy_and_full(f);
    round_placed_whole(f);
    round_leader_leaves(f);
}

static void test_groups_survive_kill9(void **state)
{
    fixture *f = *state;
    dorm(f, "h2");
    itest_start(f, CONF);
    itest_push(f, "h2", "{\"id\":\"i1\",\"user\":\"ann\",\"op\":\"invite\",\"to\":[\"bob\",\"cat\"]}");
    itest_push(f, "h2", "{\"id\":\"a1\",\"user\":\"bob\",\"op\":\"accept\",\"from\":\"ann\"}");
    itest_push(f, "h2", "{\"id\":\"p1\",\"user\":\"ann\",\"op\":\"prefs\",\"prefs\":[\"R2\"],\"version\":0}");
    itest_expect(f, "h2", "p1", "done", NULL);
    harness_allocd_kill(&f->allocd);
    /* the next daemon knows the group: cat's invitation, the version */
    itest_start(f, CONF);
    itest_push(f, "h2", "{\"id\":\"a2\",\"user\":\"cat\",\"op\":\"accept\",\"from\":\"bob\"}");
    itest_push(f, "h2", "{\"id\":\"p2\",\"user\":\"cat\",\"op\":\"prefs\",\"prefs\":[\"R1\"],\"version\":0}");
    itest_push(f, "h2", "{\"id\":\"p3\",\"user\":\"cat\",\"op\":\"prefs\",\"prefs\":[\"R1\"],\"version\":1}");
    itest_push(f, "h2", "{\"id\":\"g1\",\"user\":\"bob\",\"op\":\"group\"}");
    itest_expect(f, "h2", "a2", "done", NULL);
    itest_expect(f, "h2", "p2", "rejected", "conflict");
    itest_expect(f, "h2", "p3", "done", NULL);
    itest_expect(f, "h2", "g1", "granted", "R1");
    harness_allocd_kill(&f->allocd);
    itest_start(f, CONF);
    /* the holders' group and the members survive; the last one out dissolves it */
    itest_push(f, "h2", "{\"id\":\"g2\",\"user\":\"cat\",\"op\":\"group\"}");
    itest_expect(f, "h2", "g2", "rejected", "member_busy");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "l%d", i);
        itest_push(f, "h2", "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"leave\"}", id,
                   (const char *[]){ "ann", "bob", "cat" }[i]);
        itest_expect(f, "h2", id, "done", NULL);
    }
    assert_int_equal(proc_int(f->c, "HLEN alloc:{h2}:groups"), 0);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{h2}:holders"), 3);   /* beds are kept */
}

/* allocctl: push gains the new ops; status --user shows the group, the
 * invitations and the swap offers; batch show lists the groups. */
static void test_allocctl_shows_groups_and_offers(void **state)
{
    fixture *f = *state;
    dorm(f, "h3");
    itest_start(f, CONF);
    assert_int_equal(itest_ctl(f, NULL, "push h3 --user ann --op invite --to bob,cat --id i1"), 0);
    assert_int_equal(itest_ctl(f, NULL, "push h3 --user bob --op accept --from ann --id a1"), 0);
    assert_int_equal(itest_ctl(f, NULL, "push h3 --user bob --op prefs --prefs R2 --version 0 --id p1"), 0);
    assert_int_equal(itest_ctl(f, NULL, "push h3 --user ann --op group --id g1"), 0);
    itest_expect(f, "h3", "g1", "granted", "R2");
    assert_int_equal(itest_ctl(f, NULL, "push h3 --user dan --op choose --room R1 --id c1"), 0);
    itest_expect(f, "h3", "c1", "granted", "R1");
    assert_int_equal(itest_ctl(f, NULL, "push h3 --user ann --op swap --with dan --id w1"), 0);
    itest_expect(f, "h3", "w1", "waiting", NULL);
    char *out;
    assert_int_equal(itest_ctl(f, &out, "status h3 --user cat"), 0);
    assert_non_null(strstr(out, "invitation to group g1 (leader ann)"));
    free(out);
    assert_int_equal(itest_ctl(f, &out, "status h3 --user ann"), 0);
    assert_non_null(strstr(out, "group g1: leader ann, version 1"));
    assert_non_null(strstr(out, "swap offer to dan (request w1)"));
    free(out);
    assert_int_equal(itest_ctl(f, &out, "status h3 --user dan"), 0);
    assert_non_null(strstr(out, "swap offer from ann (request w1)"));
    free(out);
    assert_int_equal(itest_ctl(f, &out, "batch show h3"), 0);
    assert_non_null(strstr(out, "groups (formed): 1"));
    assert_non_null(strstr(out, "members   ann, bob"));
    assert_non_null(strstr(out, "invited   cat"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_housing_round),
        ITEST_CASE(test_groups_survive_kill9),
        ITEST_CASE(test_allocctl_shows_groups_and_offers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
