/* test_bench.c -- allocbench as docs/PERFORMANCE.md runs it.
 *
 * The bench reads allocd's log to drive its tickets scenario (confirms for
 * paying buyers, returned tickets, the waitlist's order). When the chunk
 * log became the default that reader still expected one event per entry:
 * it saw no grant, confirmed nothing, counted nothing, and said ok. So the
 * scenario runs here, small, against the real allocd on a private Redis,
 * in both log formats, and its figures must tell the sale's story.
 *
 * Every command docs/PERFORMANCE.md gives is checked as written: a run of
 * `make bench` takes minutes, so a `make` target must exist (make -n) and
 * an allocbench command must pass allocbench's own checks (--dry-run).
 */
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
#include "base/textfile.h"

/* The value of `key=` in the RESULT line of `design` in out, or -1. */
static long result_field(const char *out, const char *design, const char *key)
{
    char tag[80], k[40];
    snprintf(tag, sizeof tag, "RESULT scenario=tickets design=%s ", design);
    const char *line = strstr(out, tag);
    if (!line) return -1;
    const char *end = strchr(line, '\n');
    snprintf(k, sizeof k, " %s=", key);
    const char *p = strstr(line, k);
    if (!p || (end && p > end)) return -1;
    return strtol(p + strlen(k), NULL, 10);
}

/* cmd's stdout and stderr (malloc'd); *rc its exit status. */
static char *run_capture(const char *cmd, int *rc)
{
    char *const argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
    char *out;
    *rc = proc_run_capture(argv, &out);
    if (*rc < 0) fail_msg("could not run `%s`", cmd);
    return out;
}

static void tickets_in(const char *format)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "%s/allocbench --allocd %s --tickets --users 3000 --hold-ms 1000 --tickets-seconds 3 --log-format %s",
             harness_build_dir(), harness_allocd_bin(), format);
    int rc;
    char *out = run_capture(cmd, &rc);
    if (rc != 0) fail_msg("`%s` exited %d:\n%s", cmd, rc, out);
    /* 300 tickets, half the grants never paid and back after 1 s, for
     * 3 s (the confirms have a second to arrive, even on a busy
     * machine): every figure of allocd's row moves, and every ticket
     * that came back went to the buyer who had waited longest */
    long paid = result_field(out, "allocd", "paid"), returned = result_field(out, "allocd", "returned");
    long regranted = result_field(out, "allocd", "regranted");
    long longest = result_field(out, "allocd", "to_longest_waiting");
    if (result_field(out, "allocd", "ok") != 1 || paid < 100 || returned < 100 || regranted < 100 ||
        longest != regranted || result_field(out, "lua", "ok") != 1)
        fail_msg("log_format %s: the tickets figures tell no sale (paid %ld, returned %ld, regranted %ld, "
                 "to the longest waiting %ld):\n%s", format, paid, returned, regranted, longest, out);
    free(out);
}

static void test_tickets_chunk_log(void **state)
{
    (void)state;
    tickets_in("chunk");
}

static void test_tickets_event_log(void **state)
{
    (void)state;
    tickets_in("event");
}

/* One command of the doc, its code span's text with whitespace runs
 * (a span wrapped over lines) made single spaces. */
static void check_command(const char *doc, int line, const char *span)
{
    char cmd[1200];
    int rc;
    if (!strncmp(span, "make ", 5)) {
        snprintf(cmd, sizeof cmd, "make -n %s BUILD=%s", span + 5, harness_build_dir());
    } else {
        /* build/ in the doc is the tree under test (build/asan under make asan) */
        size_t n = 0;
        for (const char *p = span; *p; p++) {
            if (n + 300 >= sizeof cmd) fail_msg("%s:%d: `%s` is longer than this test reads", doc, line, span);
            if (!strncmp(p, "build/", 6) && (p == span || p[-1] == ' ')) {
                n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s/", harness_build_dir());
                p += 5;
            } else {
                cmd[n++] = *p;
            }
        }
        snprintf(cmd + n, sizeof cmd - n, " --dry-run");
    }
    char *out = run_capture(cmd, &rc);
    if (rc != 0) fail_msg("%s:%d: `%s` does not run as written (`%s` exited %d):\n%s", doc, line, span, cmd, rc, out);
    free(out);
}

static void test_performance_doc_commands(void **state)
{
    (void)state;
    const char *doc = "docs/PERFORMANCE.md";
    char *text = textfile_read(doc, NULL);
    assert_non_null(text);
    int line = 1, allocbench = 0, make = 0;
    for (char *p = text; *p; p++) {
        if (*p == '\n') line++;
        if (*p != '`' || p[1] == '`') continue;
        char *end = strchr(p + 1, '`');
        if (!end) break;
        char span[800];
        size_t n = 0;
        int start = line;
        for (char *q = p + 1; q < end && n + 1 < sizeof span; q++) {
            if (*q == '\n') line++;
            char c = *q == '\n' ? ' ' : *q;
            if (c == ' ' && n && span[n - 1] == ' ') continue;
            span[n++] = c;
        }
        span[n] = '\0';
        p = end;
        int is_make = !strncmp(span, "make ", 5), is_bench = !strncmp(span, "build/allocbench ", 17);
        if (!is_make && !is_bench) continue;
        check_command(doc, start, span);
        make += is_make;
        allocbench += is_bench;
    }
    free(text);
    /* the page reproduces each figure with one command: some of each kind */
    if (make < 5 || allocbench < 1)
        fail_msg("%s: %d make targets and %d allocbench commands found; the page gives more", doc, make, allocbench);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tickets_chunk_log),
        cmocka_unit_test(test_tickets_event_log),
        cmocka_unit_test(test_performance_doc_commands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
