/* test_bench.c -- allocbench against the real allocd.
 *
 * The bench reads allocd's log to drive its tickets scenario (confirms for
 * paying buyers, returned tickets, the waitlist's order). When the chunk
 * log became the default that reader still expected one event per entry:
 * it saw no grant, confirmed nothing, counted nothing, and said ok. So the
 * scenario runs here, small, against the real allocd on a private Redis,
 * in both log formats, and its figures must tell the sale's story.
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

static char *run_capture(const char *cmd, int *rc)
{
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char out[600];
    snprintf(out, sizeof out, "%s/bench-out", tmp);
    *rc = itest_sh("%s > '%s' 2>&1", cmd, out);
    char *text = textfile_read(out, NULL);
    assert_non_null(text);
    remove(out);
    return text;
}

static void tickets_in(const char *format)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "%s/allocbench --allocd %s --tickets --users 3000 --hold-ms 300 --tickets-seconds 2 --log-format %s",
             harness_build_dir(), harness_allocd_bin(), format);
    int rc;
    char *out = run_capture(cmd, &rc);
    if (rc != 0) fail_msg("`%s` exited %d:\n%s", cmd, rc, out);
    /* 300 tickets, half the grants never paid and returned every 300 ms
     * for 2 s: every figure of allocd's row moves, and every ticket that
     * came back went to the buyer who had waited longest */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tickets_chunk_log),
        cmocka_unit_test(test_tickets_event_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
