/* test_records.c -- the documents allocd writes (wire/records.c) are JSON
 * whatever fields they carry: here a staff placement's result with and
 * without check (contract 11.5), parsed back with jansson. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <jansson.h>

#include "core/jsonw.h"
#include "wire/records.h"
#include "wire/request.h"

static json_t *result_doc(int check, int64_t seq)
{
    request q;
    memset(&q, 0, sizeof q);
    q.outcome = REQUEST_OK;
    q.r = (engine_request){ .op = OP_ASSIGN, .id = "c-7", .user = "s1001", .item = "R101", .check = check };
    q.op_name = "assign";
    engine_result res = { .status = STATUS_GRANTED, .item = "R101", .rank = 3, .by = "staff" };
    jsonw w;
    jsonw_init(&w);
    records_result(&w, &q, &res, seq, 1767200000000LL);
    json_error_t err;
    json_t *doc = json_loadb(w.buf, w.len, 0, &err);
    if (!doc) print_error("not JSON: %.*s (%s)\n", (int)w.len, w.buf, err.text);
    jsonw_free(&w);
    return doc;
}

/* "check":true came out as a bare key with no comma after it, so every
 * checked assign's result was no JSON ({"by":"staff","check":true"at":..}):
 * found by the chaos run's staff placements (make chaos). */
static void test_staff_result_is_json(void **state)
{
    for (int check = 0; check < 2; check++) {
        json_t *doc = result_doc(check, check ? 0 : 12);
        assert_non_null(doc);
        assert_string_equal(json_string_value(json_object_get(doc, "by")), "staff");
        assert_int_equal(json_is_true(json_object_get(doc, "check")), check);
        assert_int_equal(json_integer_value(json_object_get(doc, "at")), 1767200000000LL);
        assert_int_equal(json_integer_value(json_object_get(doc, "rank")), 3);
        json_decref(doc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_staff_result_is_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
