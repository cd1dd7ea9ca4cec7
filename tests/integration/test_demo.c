/* test_demo.c -- `make run`'s demo (tools/run-demo.sh): once the queue is
 * drained it says what happened (sold out, why the rejected were rejected,
 * where to look next), and Ctrl-C (SIGINT to the script; Redis and allocd
 * run in sessions of their own, so the terminal's SIGINT reaches only the
 * script) stops allocd with one calm drain, then Redis, and says that the
 * private Redis's data is gone with it. `make run` itself is quiet: the
 * compiler's lines go to a log, and a built tree is not built again (the
 * sysconfdir stamp used to relink every binary on each make). */
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 20);
    if (f) { size_t n = fread(buf, 1, (1 << 20) - 1, f); buf[n] = '\0'; fclose(f); }
    return buf;
}

static void test_demo_explains_and_stops_calmly(void **state)
{
    char dir[400], log[500], run[500];
    assert_int_equal(proc_temp_dir(dir, sizeof dir, "allocd-demo"), 0);
    snprintf(log, sizeof log, "%s/demo.out", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    setenv("RUN", run, 1);
    char *argv[] = { "sh", "tools/run-demo.sh", NULL };
    pid_t pid = harness_spawn(argv, log);
    unsetenv("RUN");
    assert_true(pid > 0);
    char *out = NULL;
    for (int i = 0; i < 300; i++) {
        free(out);
        out = slurp(log);
        if (strstr(out, "Ctrl-C stops it")) break;
        harness_sleep_ms(100);
    }
    if (!strstr(out, "Ctrl-C stops it")) fail_msg("the demo never explained itself:\n%s", out);
    assert_non_null(strstr(out, "all 5000 requests are answered"));
    assert_non_null(strstr(out, "1000 of the 1000 units are given: sold out"));
    assert_non_null(strstr(out, "4250 sold_out (the item had no units left)"));
    assert_non_null(strstr(out, "allocctl top"));
    free(out);
    kill(pid, SIGINT);
    int st = -1;
    for (int i = 0; i < 150 && !proc_exited(pid, &st); i++) harness_sleep_ms(100);
    out = slurp(log);
    assert_non_null(strstr(out, "demo: stopping allocd"));
    assert_non_null(strstr(out, "draining"));
    assert_non_null(strstr(out, "all batches drained; exiting"));
    assert_non_null(strstr(out, "demo: stopped"));
    assert_non_null(strstr(out, "kept its data in memory only, so the demo batch"));
    assert_null(strstr(out, "stopping now"));           /* no second signal */
    assert_null(strstr(out, "drain deadline"));
    free(out);
    itest_sh("rm -rf %s", dir);
}

static void test_make_run_is_quiet(void **state)
{
    char dir[400], log[500], cmd[1500];
    assert_int_equal(proc_temp_dir(dir, sizeof dir, "allocd-makerun"), 0);
    snprintf(log, sizeof log, "%s/make.out", dir);
    /* a built tree is up to date: nothing compiled, nothing linked */
    snprintf(cmd, sizeof cmd, "make -n --no-print-directory all BUILD=%s > %s 2>&1", harness_build_dir(), log);
    assert_int_equal(itest_sh("%s", cmd), 0);
    char *out = slurp(log);
    if (strstr(out, "cc ") || strstr(out, " -o ")) fail_msg("make all would build again:\n%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "DEMO_SECONDS=2 RUN=%s/run make --no-print-directory run BUILD=%s > %s 2>&1",
             dir, harness_build_dir(), log);
    int rc = itest_sh("%s", cmd);
    out = slurp(log);
    if (rc != 0) fail_msg("make run: exit %d:\n%s", rc, out);
    if (strncmp(out, "make run: build up to date", 26)) fail_msg("make run's first line:\n%s", out);
    const char *second = strchr(out, '\n');
    assert_non_null(second);
    assert_true(!strncmp(second + 1, "demo: private Redis on ", 23));
    assert_null(strstr(out, "\ncc "));
    assert_non_null(strstr(out, "demo: stopped"));
    free(out);
    itest_sh("rm -rf %s", dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_explains_and_stops_calmly),
        cmocka_unit_test(test_make_run_is_quiet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
