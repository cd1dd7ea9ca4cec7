/* test_monitoring.c -- the monitoring pack in conf/: the alert rules pass
 * `promtool check rules` and fire in `promtool test rules`
 * (tests/data/monitoring/alerts_test.yml) on the series allocd exports,
 * and every allocd_* and process_* series that the rules and the Grafana
 * dashboard name is in a live daemon's scrape (a renamed metric would
 * otherwise leave a silent panel or an alert that can never fire). */
#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "harness.h"
#include "base/textfile.h"
#include "itest.h"

#define RULES   "conf/prometheus/allocd-alerts.yml"
#define GRAFANA "conf/grafana/allocd-dashboard.json"

static void test_promtool(void **state)
{
    assert_int_equal(itest_sh("command -v promtool >/dev/null"), 0);   /* make deps: prometheus */
    assert_int_equal(itest_sh("promtool check rules " RULES " >/dev/null"), 0);
    assert_int_equal(itest_sh("cd tests/data/monitoring && promtool test rules alerts_test.yml"), 0);
}

/* Every allocd_... / process_... identifier in text must be a family in the
 * scrape (a histogram's _bucket/_sum/_count count as its family). */
static int check_names(const char *text, const char *scrape, const char *where)
{
    int missing = 0;
    for (const char *p = text; *p; p++) {
        if (strncmp(p, "allocd_", 7) && strncmp(p, "process_", 8)) continue;
        if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) continue;
        char name[128];
        size_t n = 0;
        while ((isalnum((unsigned char)p[n]) || p[n] == '_') && n < sizeof name - 1) { name[n] = p[n]; n++; }
        name[n] = '\0';
        p += n - 1;
        if (name[n - 1] == '_') continue;     /* a prefix in a comment: allocd_batch_* */
        char family[128];
        snprintf(family, sizeof family, "%s", name);
        char *suffix = strstr(family, "_bucket");
        if (suffix && !suffix[7]) *suffix = '\0';
        char needle[160];
        snprintf(needle, sizeof needle, "# TYPE %s ", family);
        if (!strstr(scrape, needle)) {
            fprintf(stderr, "%s names %s, which allocd does not export\n", where, name);
            missing++;
        }
    }
    return missing;
}

static void test_names_exist(void **state)
{
    itest *t = *state;
    itest_batch(t->c, "m1", "kind stock", "sku 3", NULL);
    int port = itest_start_metrics(t, "m1");
    char *scrape = NULL;
    for (int i = 0; i < 50 && !(scrape && strstr(scrape, "allocd_batch_served{")); i++) {
        free(scrape);
        scrape = itest_http_get(port, "/metrics");
        harness_sleep_ms(100);
    }
    assert_non_null(scrape);
    assert_non_null(strstr(scrape, "allocd_batch_served{"));

    char *rules = textfile_read(RULES, NULL);
    assert_non_null(rules);
    int missing = check_names(rules, scrape, RULES);
    free(rules);

    json_error_t e;
    json_t *dash = json_load_file(GRAFANA, 0, &e);
    if (!dash) fail_msg("%s:%d: %s", GRAFANA, e.line, e.text);
    json_t *panels = json_object_get(dash, "panels");
    assert_true(json_array_size(panels) >= 10);
    size_t i;
    json_t *p;
    json_array_foreach(panels, i, p) {
        assert_non_null(json_object_get(p, "gridPos"));
        json_t *targets = json_object_get(p, "targets");
        assert_true(json_array_size(targets) >= 1);
        size_t k;
        json_t *tg;
        json_array_foreach(targets, k, tg) {
            const char *expr = json_string_value(json_object_get(tg, "expr"));
            assert_non_null(expr);
            missing += check_names(expr, scrape, GRAFANA);
        }
    }
    json_decref(dash);
    free(scrape);
    assert_int_equal(missing, 0);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promtool),
        ITEST_CASE(test_names_exist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
