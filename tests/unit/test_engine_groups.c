/* test_engine_groups.c -- a formed group's result (contract 9.2): the
 * members it names are the ones seated by that decision, whatever the
 * group does later in the same chunk -- the result is written only when
 * the chunk is applied, after every decision of the chunk. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/engine.h"

#define T0 1763800000000LL

static engine_result send(engine *e, engine_request r)
{
    engine_result out;
    r.id = r.id ? r.id : "x";
    r.seq = 1;
    engine_decide(e, &r, T0, &out);
    assert_null(engine_check_invariants(e));
    return out;
}

/* Found by the simulator (seed 30731 of --first 30000): u29 and u30 were
 * seated by r880, and r880's result said members ["u30","u30"]: u29 left
 * the group later in the chunk, and the result pointed at the group's own
 * member list. */
static void test_members_as_seated(void **state)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_ROOM;
    m.groups = GROUPS_FORMED;
    engine *e = engine_new(&m, 3);
    assert_non_null(e);
    assert_int_equal(engine_load_item(e, "R4", 2), 0);
    const char *to[] = { "u30" }, *prefs[] = { "R4" };
    assert_int_equal(send(e, (engine_request){ .op = OP_INVITE, .user = "u29", .to = to, .n_to = 1 }).status, STATUS_DONE);
    assert_int_equal(send(e, (engine_request){ .op = OP_ACCEPT, .user = "u30", .peer = "u29" }).status, STATUS_DONE);
    engine_result g = send(e, (engine_request){ .op = OP_GROUP, .id = "r880", .user = "u29", .prefs = prefs, .n_prefs = 1 });
    assert_int_equal(g.status, STATUS_GRANTED);
    /* later in the same chunk, before anything is written */
    assert_int_equal(send(e, (engine_request){ .op = OP_LEAVE, .user = "u29" }).status, STATUS_DONE);
    assert_int_equal(g.n_members, 2);
    int u29 = !strcmp(g.members[0], "u29") || !strcmp(g.members[1], "u29");
    int u30 = !strcmp(g.members[0], "u30") || !strcmp(g.members[1], "u30");
    assert_true(u29 && u30);
    engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_as_seated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
