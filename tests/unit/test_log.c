/* test_log.c -- the stderr logger (daemon/base/log.c).
 *
 * Each test points file descriptor 2 at a temporary file (dup2), logs, puts
 * stderr back and compares what was written: the `<N>` journald prefixes,
 * the terminal timestamp form, level filtering, repeat suppression with its
 * "previous message repeated N times" line, and truncation at 2000 bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#define CAPTURE_MAX 16384

typedef struct capture {
    FILE *file;
    int saved_fd;
    char text[CAPTURE_MAX];
} capture;

static void capture_start(capture *c)
{
    fflush(stderr);
    c->file = tmpfile();
    assert_non_null(c->file);
    c->saved_fd = dup(STDERR_FILENO);
    assert_true(c->saved_fd >= 0);
    assert_true(dup2(fileno(c->file), STDERR_FILENO) >= 0);
}

/* Restores stderr and returns everything written meanwhile. */
static const char *capture_end(capture *c)
{
    fflush(stderr);
    dup2(c->saved_fd, STDERR_FILENO);
    close(c->saved_fd);
    rewind(c->file);
    size_t n = fread(c->text, 1, sizeof c->text - 1, c->file);
    c->text[n] = '\0';
    fclose(c->file);
    return c->text;
}

/* Every test starts from journald style at debug with the default window. */
static int setup(void **state)
{
    log_set_repeat_window(5000);
    log_init(ALOG_DEBUG, 0);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {}
}

/* ---- names -------------------------------------------------------------- */

static void test_level_names(void **state)
{
    const char *names[] = { "error", "warning", "notice", "info", "debug" };
    for (int l = ALOG_ERR; l <= ALOG_DEBUG; l++) {
        assert_string_equal(log_level_name(l), names[l - ALOG_ERR]);
        assert_int_equal(log_level_parse(names[l - ALOG_ERR]), l);
    }
    assert_int_equal(log_level_parse("DEBUG"), ALOG_DEBUG);
    assert_int_equal(log_level_parse("Warning"), ALOG_WARNING);
    assert_int_equal(log_level_parse("warn"), -1);
    assert_int_equal(log_level_parse(""), -1);
    assert_int_equal(log_level_parse(NULL), -1);
    assert_string_equal(log_level_name(0), "unknown");
    assert_string_equal(log_level_name(99), "unknown");
}

/* ---- styles ------------------------------------------------------------- */

static void test_journald_prefixes(void **state)
{
    capture c;
    capture_start(&c);
    log_err("e %d", 1);
    log_warn("w");
    log_notice("n");
    log_info("i");
    log_debug("d");
    assert_string_equal(capture_end(&c), "<3>e 1\n<4>w\n<5>n\n<6>i\n<7>d\n");
}

/* Style -1 asks $JOURNAL_STREAM: <N> prefixes only when stderr is the
 * stream it names; a file elsewhere gets timestamps (isatty decided before,
 * so a log file under a plain supervisor had no times). */
static void test_style_auto_journal_stream(void **state)
{
    capture c;
    capture_start(&c);
    struct stat st;
    assert_int_equal(fstat(STDERR_FILENO, &st), 0);
    char js[64];
    snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    log_init(ALOG_INFO, -1);
    log_info("auto");
    assert_string_equal(capture_end(&c), "<6>auto\n");
    /* another stream (inherited variable, redirected stderr): timestamps */
    setenv("JOURNAL_STREAM", "1:2", 1);
    capture_start(&c);
    log_init(ALOG_INFO, -1);
    log_info("auto");
    const char *text = capture_end(&c);
    assert_null(strstr(text, "<6>"));
    assert_non_null(strstr(text, "auto\n"));
    unsetenv("JOURNAL_STREAM");
}

static void test_tty_style(void **state)
{
    capture c;
    regex_t re;
    assert_int_equal(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:"
                             "[0-9]{2}\\.[0-9]{3} WARNING careful\n"
                             "[0-9-]{10} [0-9:.]{12} INFO +hello\n$",
                             REG_EXTENDED), 0);
    capture_start(&c);
    log_init(ALOG_INFO, 1);
    log_warn("careful");
    log_info("hello");
    const char *out = capture_end(&c);
    int rc = regexec(&re, out, 0, NULL, 0);
    regfree(&re);
    if (rc != 0) fail_msg("unexpected terminal output: '%s'", out);
}

/* ---- levels ------------------------------------------------------------- */

static void test_level_filter(void **state)
{
    capture c;
    capture_start(&c);
    log_init(ALOG_WARNING, 0);
    assert_int_equal(log_get_level(), ALOG_WARNING);
    log_err("shown 1");
    log_warn("shown 2");
    log_notice("hidden");
    log_info("hidden");
    log_debug("hidden");
    log_set_level(ALOG_DEBUG);
    log_debug("shown 3");
    assert_string_equal(capture_end(&c), "<3>shown 1\n<4>shown 2\n<7>shown 3\n");
}

static void test_level_clamped(void **state)
{
    log_set_level(42);
    assert_int_equal(log_get_level(), ALOG_DEBUG);
    log_set_level(-1);
    assert_int_equal(log_get_level(), ALOG_ERR);
    capture c;
    capture_start(&c);
    log_msg(0, "emergency");                 /* pulled up to error */
    assert_string_equal(capture_end(&c), "<3>emergency\n");
}

/* ---- repeat suppression ------------------------------------------------ */

static void test_repeat_then_different(void **state)
{
    capture c;
    capture_start(&c);
    for (int i = 0; i < 5; i++) log_warn("redis down: %s", "connection refused");
    log_info("redis up");
    assert_string_equal(capture_end(&c),
                        "<4>redis down: connection refused\n"
                        "<4>previous message repeated 4 times\n"
                        "<6>redis up\n");
}

static void test_repeat_flush(void **state)
{
    capture c;
    capture_start(&c);
    log_info("same");
    log_info("same");
    log_info("same");
    log_flush();
    log_flush();                             /* nothing pending any more */
    assert_string_equal(capture_end(&c),
                        "<6>same\n<6>previous message repeated 2 times\n");
}

static void test_single_message_no_repeat_line(void **state)
{
    capture c;
    capture_start(&c);
    log_info("once");
    log_info("other");
    log_flush();
    assert_string_equal(capture_end(&c), "<6>once\n<6>other\n");
}

/* Same text at another level is another message. */
static void test_repeat_needs_same_level(void **state)
{
    capture c;
    capture_start(&c);
    log_info("x");
    log_warn("x");
    assert_string_equal(capture_end(&c), "<6>x\n<4>x\n");
}

/* A filtered message is never seen, so it does not end a run of repeats. */
static void test_filtered_does_not_break_repeats(void **state)
{
    capture c;
    capture_start(&c);
    log_init(ALOG_INFO, 0);
    log_info("a");
    log_debug("b");
    log_info("a");
    log_flush();
    assert_string_equal(capture_end(&c), "<6>a\n<6>previous message repeated 1 times\n");
}

/* After the window the count comes out and the message prints again,
 * starting a new window. */
static void test_repeat_window_ends(void **state)
{
    capture c;
    log_set_repeat_window(100);
    capture_start(&c);
    log_info("flap");
    log_info("flap");
    log_info("flap");
    sleep_ms(150);
    log_info("flap");
    log_info("flap");
    log_flush();
    assert_string_equal(capture_end(&c),
                        "<6>flap\n<6>previous message repeated 2 times\n"
                        "<6>flap\n<6>previous message repeated 1 times\n");
}

static void test_repeat_window_zero_disables(void **state)
{
    capture c;
    log_set_repeat_window(0);
    capture_start(&c);
    log_info("z");
    log_info("z");
    log_flush();
    assert_string_equal(capture_end(&c), "<6>z\n<6>z\n");
}

/* ---- message text ------------------------------------------------------- */

static void test_truncation(void **state)
{
    static char big[5001];
    memset(big, 'x', sizeof big - 1);
    capture c;
    capture_start(&c);
    log_info("%s", big);
    log_info("%s", "after");
    const char *out = capture_end(&c);
    assert_memory_equal(out, "<6>", 3);
    assert_int_equal(strspn(out + 3, "x"), 2000);
    assert_string_equal(out + 3 + 2000, "\n<6>after\n");
}

/* A cut in the middle of a UTF-8 character drops the partial character. */
static void test_truncation_utf8(void **state)
{
    static char big[2010];
    memset(big, 'a', 1999);
    strcpy(big + 1999, "\xc3\xa9tail");     /* "é" at bytes 1999-2000 */
    capture c;
    capture_start(&c);
    log_info("%s", big);
    const char *out = capture_end(&c);
    assert_int_equal(strlen(out), 3 + 1999 + 1);
    assert_int_equal(strspn(out + 3, "a"), 1999);
}

static void test_control_chars_become_spaces(void **state)
{
    capture c;
    capture_start(&c);
    log_info("line one\nline two\r\tend");
    assert_string_equal(capture_end(&c), "<6>line one line two \tend\n");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, setup)
    const struct CMUnitTest tests[] = {
        T(test_level_names),
        T(test_journald_prefixes),
        T(test_style_auto_journal_stream),
        T(test_tty_style),
        T(test_level_filter),
        T(test_level_clamped),
        T(test_repeat_then_different),
        T(test_repeat_flush),
        T(test_single_message_no_repeat_line),
        T(test_repeat_needs_same_level),
        T(test_filtered_does_not_break_repeats),
        T(test_repeat_window_ends),
        T(test_repeat_window_zero_disables),
        T(test_truncation),
        T(test_truncation_utf8),
        T(test_control_chars_become_spaces),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
