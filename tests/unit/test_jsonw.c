/* test_jsonw.c -- the JSON writer: structure, escaping, invalid UTF-8, and
 * that everything it writes parses back with jansson to the same values. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "core/jsonw.h"

static char *out(jsonw *w)
{
    jsonw_raw(w, "", 1); /* NUL-terminate for comparisons */
    w->len--;
    return w->buf;
}

static void test_structure(void **state)
{
    jsonw w;
    jsonw_init(&w);
    jsonw_obj_begin(&w);
    jsonw_kstr(&w, "a", "x");
    jsonw_kint(&w, "n", -42);
    jsonw_key(&w, "l");
    jsonw_arr_begin(&w);
    jsonw_str(&w, "p");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "o");
    jsonw_u64_str(&w, UINT64_MAX);
    jsonw_obj_end(&w);
    jsonw_int(&w, INT64_MIN);
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    assert_string_equal(out(&w),
        "{\"a\":\"x\",\"n\":-42,\"l\":[\"p\",{\"o\":\"18446744073709551615\"},-9223372036854775808]}");
    assert_false(w.failed);
    jsonw_free(&w);
}

static void test_escaping_roundtrip(void **state)
{
    const char s[] = "quote\" back\\ nl\n tab\t ctl\x01 del\x7f \xc3\xa9 \xf0\x9f\x98\x80 end";
    jsonw w;
    jsonw_init(&w);
    jsonw_obj_begin(&w);
    jsonw_kstr(&w, "s", s);
    jsonw_obj_end(&w);
    json_error_t e;
    json_t *doc = json_loadb(w.buf, w.len, 0, &e);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "s")), s);
    json_decref(doc);
    jsonw_free(&w);
}

static void test_invalid_utf8_replaced(void **state)
{
    const char s[] = "a\xff" "b\xc3" "c\xed\xa0\x80" "d"; /* stray, truncated, surrogate */
    jsonw w;
    jsonw_init(&w);
    jsonw_strn(&w, s, sizeof s - 1);
    json_error_t e;
    json_t *doc = json_loadb(w.buf, w.len, JSON_DECODE_ANY, &e);
    assert_non_null(doc);
    assert_non_null(strstr(json_string_value(doc), "\xef\xbf\xbd"));
    assert_false(utf8_valid(s, sizeof s - 1, 1));
    assert_true(utf8_valid("\xc3\xa9", 2, 1));
    assert_false(utf8_valid("a\0b", 3, 1));
    json_decref(doc);
    jsonw_free(&w);
}

static void test_reset_reuses_memory(void **state)
{
    jsonw w;
    jsonw_init(&w);
    for (int i = 0; i < 1000; i++) jsonw_str(&w, "0123456789");
    char *buf = w.buf;
    size_t cap = w.cap;
    jsonw_reset(&w);
    jsonw_str(&w, "x");
    assert_ptr_equal(w.buf, buf);
    assert_int_equal(w.cap, cap);
    assert_string_equal(out(&w), "\"x\"");
    jsonw_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_escaping_roundtrip),
        cmocka_unit_test(test_invalid_utf8_replaced),
        cmocka_unit_test(test_reset_reuses_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
