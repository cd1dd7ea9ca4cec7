/* test_config.c -- defaults, the config file, the command line, and how
 * they combine (daemon/base/config.c).
 *
 * Bad config files are data, not code: each tests/data/config/bad-*.conf
 * starts with `# expect: <text>` and must fail with an error containing that
 * text, so adding a case is adding a file. Every good-*.conf must load.
 * Run from the repository root (paths are relative to it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"

#define DATA_DIR "tests/data/config/"
#define SHIPPED  "conf/allocd.conf"
#define MISSING  "tests/data/config/no-such-file.conf"

/* ---- helpers ------------------------------------------------------------ */

static void assert_same_values(const allocd_config *a, const allocd_config *b)
{
    assert_string_equal(a->redis_url, b->redis_url);
    assert_string_equal(a->redis.host, b->redis.host);
    assert_int_equal(a->redis.port, b->redis.port);
    assert_int_equal(a->redis.kind, b->redis.kind);
    assert_string_equal(a->prefix, b->prefix);
    assert_string_equal(a->instance, b->instance);
    assert_int_equal(a->chunk, b->chunk);
    assert_int_equal(a->max_request_bytes, b->max_request_bytes);
    assert_int_equal(a->heap_reserve_mb, b->heap_reserve_mb);
    assert_int_equal(a->log_level, b->log_level);
    assert_true(a->log_maxlen == b->log_maxlen);
    assert_int_equal(a->log_chunk, b->log_chunk);
    assert_int_equal(a->redis_timeout_ms, b->redis_timeout_ms);
    assert_int_equal(a->connect_timeout_ms, b->connect_timeout_ms);
    assert_int_equal(a->backoff_min_ms, b->backoff_min_ms);
    assert_int_equal(a->backoff_max_ms, b->backoff_max_ms);
    assert_int_equal(a->registry_interval_ms, b->registry_interval_ms);
    assert_int_equal(a->idle_wait_ms, b->idle_wait_ms);
    assert_int_equal(a->drain_timeout_ms, b->drain_timeout_ms);
    assert_int_equal(a->max_attempts, b->max_attempts);
}

#define assert_contains(hay, needle) do {                                    \
        const char *h_ = (hay), *n_ = (needle);                              \
        if (!strstr(h_, n_)) fail_msg("'%s' does not contain '%s'", h_, n_); \
    } while (0)

/* Runs cli_parse on a NULL-terminated list of arguments (argv[0] added). */
static int parse_args(cli_args *a, char *err, size_t errlen, ...)
{
    char *argv[32] = { "allocd" };
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    for (char *s; (s = va_arg(ap, char *)) != NULL && argc < 31;) argv[argc++] = s;
    va_end(ap);
    argv[argc] = NULL;
    err[0] = '\0';
    return cli_parse(argc, argv, a, err, errlen);
}

/* ---- defaults ----------------------------------------------------------- */

static void test_defaults(void **state)
{
    allocd_config c;
    config_defaults(&c);
    assert_string_equal(c.redis_url, "redis://127.0.0.1:6379");
    assert_int_equal(c.redis.kind, REDIS_TARGET_TCP);
    assert_string_equal(c.redis.host, "127.0.0.1");
    assert_int_equal(c.redis.port, 6379);
    assert_string_equal(c.prefix, "alloc");
    assert_non_null(c.instance);
    assert_true(strlen(c.instance) >= 1 && strlen(c.instance) <= 64);
    assert_int_equal(c.chunk, 512);
    assert_int_equal(c.max_request_bytes, 4096);
    assert_int_equal(c.heap_reserve_mb, 64);
    assert_int_equal(c.log_level, ALOG_INFO);
    assert_true(c.log_maxlen == 0);
    assert_int_equal(c.log_chunk, 1);
    assert_string_equal(c.archive_group, "");
    assert_int_equal(c.redis_timeout_ms, 5000);
    assert_int_equal(c.connect_timeout_ms, 2000);
    assert_int_equal(c.backoff_min_ms, 100);
    assert_int_equal(c.backoff_max_ms, 5000);
    assert_int_equal(c.registry_interval_ms, 250);
    assert_int_equal(c.idle_wait_ms, 1000);
    assert_int_equal(c.drain_timeout_ms, 10000);
    assert_int_equal(c.max_attempts, 5);
    assert_null(c.source);
    config_free(&c);
}

static void test_default_path(void **state)
{
    unsetenv("ALLOCD_CONFIG");
    const char *p = config_default_path();
    assert_contains(p, "/allocd/allocd.conf");
    assert_true(p[0] == '/');
    setenv("ALLOCD_CONFIG", "/tmp/other.conf", 1);
    assert_string_equal(config_default_path(), "/tmp/other.conf");
    setenv("ALLOCD_CONFIG", "", 1);          /* empty = not set */
    assert_string_equal(config_default_path(), p);
    unsetenv("ALLOCD_CONFIG");
}

static void test_free_twice(void **state)
{
    allocd_config c;
    config_defaults(&c);
    config_free(&c);
    assert_null(c.redis_url);
    assert_null(c.prefix);
    assert_null(c.instance);
    assert_null(c.source);
    config_free(&c);
}

/* ---- files -------------------------------------------------------------- */

static void test_shipped_conf_is_defaults(void **state)
{
    allocd_config c, d;
    char err[1024] = "";
    config_defaults(&c);
    config_defaults(&d);
    int rc = config_load_file(&c, SHIPPED, 1, err, sizeof err);
    if (rc != 0) fail_msg("%s: %s", SHIPPED, err);
    assert_same_values(&c, &d);
    assert_string_equal(c.source, SHIPPED);
    config_free(&c);
    config_free(&d);
}

/* The text after "# expect: " on the first line, or "" if none. */
static void read_expectation(const char *path, char *out, size_t len)
{
    static const char tag[] = "# expect: ";
    char line[512] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    out[0] = '\0';
    if (strncmp(line, tag, sizeof tag - 1) == 0)
        snprintf(out, len, "%s", line + sizeof tag - 1);
}

/* Calls fn(name) for every file in DATA_DIR named prefix*.conf; returns
 * how many failed (fn returns nonzero on failure). */
static int for_each_data_file(const char *prefix, int (*fn)(const char *path),
                              int *count)
{
    DIR *d = opendir(DATA_DIR);
    assert_non_null(d);
    int failures = 0;
    *count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || n < 5 ||
            strcmp(e->d_name + n - 5, ".conf") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, DATA_DIR "%s", e->d_name);
        (*count)++;
        failures += fn(path) != 0;
    }
    closedir(d);
    return failures;
}

/* A bad file must fail, keep the values it was loaded over, and say what
 * its first line expects. Failures are printed, not asserted, so one run
 * lists every broken case. */
static int check_bad_file(const char *path)
{
    char expect[512], err[1024] = "";
    read_expectation(path, expect, sizeof expect);
    if (!expect[0]) {
        print_error("%s: first line must be '# expect: <error text>'\n", path);
        return 1;
    }
    allocd_config c, d;
    config_defaults(&c);
    config_defaults(&d);
    int rc = config_load_file(&c, path, 1, err, sizeof err);
    int bad = 0;
    if (rc != -1) {
        print_error("%s: loaded (rc %d) but should fail with '%s'\n", path, rc, expect);
        bad = 1;
    } else if (!strstr(err, expect)) {
        print_error("%s: error '%s' lacks '%s'\n", path, err, expect);
        bad = 1;
    } else if (c.chunk != d.chunk || strcmp(c.prefix, d.prefix) != 0 || c.source) {
        print_error("%s: a failed load changed the values\n", path);
        bad = 1;
    }
    config_free(&c);
    config_free(&d);
    return bad;
}

static void test_bad_files(void **state)
{
    int count;
    int failures = for_each_data_file("bad-", check_bad_file, &count);
    assert_true(count >= 12);
    assert_int_equal(failures, 0);
}

static int check_good_file(const char *path)
{
    char err[1024] = "";
    allocd_config c;
    config_defaults(&c);
    int rc = config_load_file(&c, path, 1, err, sizeof err);
    if (rc != 0) print_error("%s: %s\n", path, err);
    config_free(&c);
    return rc != 0;
}

static void test_good_files(void **state)
{
    int count;
    int failures = for_each_data_file("good-", check_good_file, &count);
    assert_true(count >= 3);
    assert_int_equal(failures, 0);
}

static void test_good_all_values(void **state)
{
    allocd_config c;
    char err[1024] = "";
    config_defaults(&c);
    int rc = config_load_file(&c, DATA_DIR "good-all.conf", 1, err, sizeof err);
    if (rc != 0) fail_msg("%s", err);
    assert_string_equal(c.redis_url, "redis://user:secret@redis.example.com:6380");
    assert_string_equal(c.redis.host, "redis.example.com");
    assert_int_equal(c.redis.port, 6380);
    assert_string_equal(c.redis.user, "user");
    assert_string_equal(c.redis.password, "secret");
    assert_string_equal(c.prefix, "shop.eu:v2-a_b");
    assert_string_equal(c.instance, "web-01.example");
    assert_int_equal(c.chunk, 4096);
    assert_int_equal(c.max_request_bytes, 65536);      /* given as 65536L */
    assert_int_equal(c.heap_reserve_mb, 0);
    assert_int_equal(c.log_level, ALOG_DEBUG);
    assert_true(c.log_maxlen == 10000000000LL);
    assert_int_equal(c.log_chunk, 0);
    assert_string_equal(c.archive_group, "archive.eu:1");
    assert_int_equal(c.redis_timeout_ms, 10000);       /* given as 0x2710 */
    assert_int_equal(c.connect_timeout_ms, 1000);
    assert_int_equal(c.backoff_min_ms, 250);
    assert_int_equal(c.backoff_max_ms, 250);
    assert_int_equal(c.registry_interval_ms, 500);
    assert_int_equal(c.idle_wait_ms, 2000);
    assert_int_equal(c.drain_timeout_ms, 0);
    assert_int_equal(c.max_attempts, 100);
    assert_string_equal(c.source, DATA_DIR "good-all.conf");
    config_free(&c);
}

static void test_good_unix_and_include(void **state)
{
    allocd_config c;
    char err[1024] = "";
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, DATA_DIR "good-unix.conf", 1, err, sizeof err), 0);
    assert_int_equal(c.redis.kind, REDIS_TARGET_UNIX);
    assert_string_equal(c.redis.path, "/run/redis/redis.sock");
    assert_string_equal(c.instance, "node-99999999999");
    assert_int_equal(c.log_level, ALOG_WARNING);
    assert_int_equal(config_load_file(&c, DATA_DIR "good-include.conf", 1, err, sizeof err), 0);
    assert_string_equal(c.prefix, "included");
    assert_int_equal(c.chunk, 64);
    assert_string_equal(c.instance, "node-99999999999");   /* kept from before */
    config_free(&c);
}

static void test_load_file_missing(void **state)
{
    allocd_config c;
    char err[1024] = "";
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, MISSING, 0, err, sizeof err), 1);
    assert_null(c.source);
    assert_int_equal(config_load_file(&c, MISSING, 1, err, sizeof err), -1);
    assert_string_equal(err, MISSING ": cannot read: No such file or directory");
    assert_int_equal(config_load_file(&c, "tests/data/config", 0, err, sizeof err), -1);
    assert_string_equal(err, "tests/data/config: cannot read: Is a directory");
    config_free(&c);
}

/* A reload that fails must leave the running values exactly as they were. */
static void test_failed_load_keeps_values(void **state)
{
    allocd_config c;
    char err[1024] = "";
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, DATA_DIR "good-all.conf", 1, err, sizeof err), 0);
    /* bad-backoff.conf sets backoff_min_ms and chunk before failing. */
    assert_int_equal(config_load_file(&c, DATA_DIR "bad-backoff.conf", 1, err, sizeof err), -1);
    assert_int_equal(c.backoff_min_ms, 250);
    assert_int_equal(c.chunk, 4096);
    assert_string_equal(c.source, DATA_DIR "good-all.conf");
    config_free(&c);
}

/* ---- command line ------------------------------------------------------- */

static void test_cli_empty(void **state)
{
    cli_args a;
    char err[256];
    assert_int_equal(parse_args(&a, err, sizeof err, NULL), 0);
    assert_int_equal(a.action, CLI_RUN);
    assert_null(a.config_path);
    assert_null(a.redis_url);
    assert_null(a.prefix);
    assert_null(a.instance);
}

static void test_cli_separate_values(void **state)
{
    cli_args a;
    char err[256];
    assert_int_equal(parse_args(&a, err, sizeof err, "-c", "a.conf", "--redis",
                                "unix:///r.sock", "--prefix", "p", "--instance",
                                "i1", NULL), 0);
    assert_int_equal(a.action, CLI_RUN);
    assert_string_equal(a.config_path, "a.conf");
    assert_string_equal(a.redis_url, "unix:///r.sock");
    assert_string_equal(a.prefix, "p");
    assert_string_equal(a.instance, "i1");
    assert_int_equal(parse_args(&a, err, sizeof err, "--config", "b.conf", NULL), 0);
    assert_string_equal(a.config_path, "b.conf");
    assert_null(a.redis_url);                /* nothing left from the last call */
}

static void test_cli_equals_values(void **state)
{
    cli_args a;
    char err[256];
    assert_int_equal(parse_args(&a, err, sizeof err, "--config=x.conf",
                                "--redis=redis://h:1", "--prefix=q", "--instance=n=2",
                                NULL), 0);
    assert_string_equal(a.config_path, "x.conf");
    assert_string_equal(a.redis_url, "redis://h:1");
    assert_string_equal(a.prefix, "q");
    assert_string_equal(a.instance, "n=2");   /* only the first '=' splits */
    assert_int_equal(parse_args(&a, err, sizeof err, "-cy.conf", NULL), 0);
    assert_string_equal(a.config_path, "y.conf");
    assert_int_equal(parse_args(&a, err, sizeof err, "--config=-odd.conf", NULL), 0);
    assert_string_equal(a.config_path, "-odd.conf");
    /* Repeated options: the last one wins. */
    assert_int_equal(parse_args(&a, err, sizeof err, "--prefix", "a", "--prefix=b", NULL), 0);
    assert_string_equal(a.prefix, "b");
}

static void test_cli_actions(void **state)
{
    cli_args a;
    char err[256];
    assert_int_equal(parse_args(&a, err, sizeof err, "--check-config", NULL), 0);
    assert_int_equal(a.action, CLI_CHECK_CONFIG);
    assert_int_equal(parse_args(&a, err, sizeof err, "--version", NULL), 0);
    assert_int_equal(a.action, CLI_VERSION);
    assert_int_equal(parse_args(&a, err, sizeof err, "-V", NULL), 0);
    assert_int_equal(a.action, CLI_VERSION);
    assert_int_equal(parse_args(&a, err, sizeof err, "--help", NULL), 0);
    assert_int_equal(a.action, CLI_HELP);
    assert_int_equal(parse_args(&a, err, sizeof err, "-h", NULL), 0);
    assert_int_equal(a.action, CLI_HELP);
    /* help > version > check-config, in any order */
    assert_int_equal(parse_args(&a, err, sizeof err, "-h", "--check-config", "-V", NULL), 0);
    assert_int_equal(a.action, CLI_HELP);
    assert_int_equal(parse_args(&a, err, sizeof err, "--check-config", "-V", NULL), 0);
    assert_int_equal(a.action, CLI_VERSION);
    assert_int_equal(parse_args(&a, err, sizeof err, "-c", "f", "--check-config", NULL), 0);
    assert_int_equal(a.action, CLI_CHECK_CONFIG);
    assert_string_equal(a.config_path, "f");
    assert_int_equal(parse_args(&a, err, sizeof err, "--", NULL), 0);
    assert_int_equal(a.action, CLI_RUN);
}

static void expect_cli_error(const char *want, const char *a1, const char *a2)
{
    cli_args a;
    char err[256];
    int rc = parse_args(&a, err, sizeof err, (char *)a1, (char *)a2, NULL);
    assert_int_equal(rc, -1);
    assert_contains(err, "command line: ");
    assert_contains(err, want);
}

static void test_cli_errors(void **state)
{
    expect_cli_error("unknown option '--bogus'", "--bogus", NULL);
    expect_cli_error("unknown option '-x'", "-x", NULL);
    expect_cli_error("unknown option '--red'", "--red", "redis://h:1");   /* no abbreviations */
    expect_cli_error("option '--redis' needs a value", "--redis", NULL);
    expect_cli_error("option '-c' needs a value", "-c", NULL);
    expect_cli_error("option '-c' needs a value", "-c", "--check-config");
    expect_cli_error("option '--prefix' needs a value", "--prefix", "-c");
    expect_cli_error("option '--instance' needs a value", "--instance", NULL);
    expect_cli_error("option '--help' takes no value", "--help=yes", NULL);
    expect_cli_error("option '--check-config' takes no value", "--check-config=1", NULL);
    expect_cli_error("unexpected argument 'extra'", "extra", NULL);
    expect_cli_error("unexpected argument 'x'", "--", "x");
    expect_cli_error("unexpected argument '-'", "-", NULL);
}

static void test_cli_usage(void **state)
{
    char buf[4096] = "";
    FILE *f = tmpfile();
    assert_non_null(f);
    unsetenv("ALLOCD_CONFIG");
    cli_usage(f, "allocd");
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    const char *needles[] = { "Usage: allocd", "-c, --config FILE", "--redis URL",
                              "--prefix P", "--instance NAME", "--check-config",
                              "-V, --version", "-h, --help", config_default_path(),
                              "ALLOCD_CONFIG" };
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        assert_contains(buf, needles[i]);
}

/* ---- config_load: everything together ------------------------------------ */

static int load_with(allocd_config *c, char *err, size_t errlen, ...)
{
    char *argv[32] = { "allocd" };
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    for (char *s; (s = va_arg(ap, char *)) != NULL && argc < 31;) argv[argc++] = s;
    va_end(ap);
    cli_args a;
    err[0] = '\0';
    if (cli_parse(argc, argv, &a, err, errlen) < 0) return -2;
    return config_load(c, &a, err, errlen);
}

static void test_load_missing_default_uses_defaults(void **state)
{
    allocd_config c, d;
    char err[1024];
    setenv("ALLOCD_CONFIG", MISSING, 1);
    assert_int_equal(load_with(&c, err, sizeof err, NULL), 0);
    config_defaults(&d);
    assert_same_values(&c, &d);
    assert_null(c.source);
    config_free(&c);
    config_free(&d);
    unsetenv("ALLOCD_CONFIG");
}

static void test_load_default_path_present(void **state)
{
    allocd_config c;
    char err[1024];
    setenv("ALLOCD_CONFIG", DATA_DIR "good-all.conf", 1);
    assert_int_equal(load_with(&c, err, sizeof err, NULL), 0);
    assert_string_equal(c.source, DATA_DIR "good-all.conf");
    assert_int_equal(c.chunk, 4096);
    config_free(&c);
    /* A broken default file is an error, not a silent fallback. */
    setenv("ALLOCD_CONFIG", DATA_DIR "bad-unknown.conf", 1);
    assert_int_equal(load_with(&c, err, sizeof err, NULL), -1);
    assert_contains(err, "bad-unknown.conf:4: unknown setting 'chunck'");
    config_free(&c);
    unsetenv("ALLOCD_CONFIG");
}

static void test_load_explicit_missing(void **state)
{
    allocd_config c;
    char err[1024];
    assert_int_equal(load_with(&c, err, sizeof err, "-c", MISSING, NULL), -1);
    assert_string_equal(err, MISSING ": cannot read: No such file or directory");
    assert_null(c.redis_url);                  /* nothing to free on failure */
    config_free(&c);
}

static void test_load_shipped(void **state)
{
    allocd_config c, d;
    char err[1024];
    assert_int_equal(load_with(&c, err, sizeof err, "-c", SHIPPED, "--check-config", NULL), 0);
    config_defaults(&d);
    assert_same_values(&c, &d);
    assert_string_equal(c.source, SHIPPED);
    config_free(&c);
    config_free(&d);
}

/* File < command line, and the file's other values survive. */
static void test_load_override_precedence(void **state)
{
    allocd_config c;
    char err[1024];
    int rc = load_with(&c, err, sizeof err, "-c", DATA_DIR "good-all.conf",
                       "--redis", "unix:///tmp/r.sock", "--prefix=cli",
                       "--instance", "cli-host", NULL);
    if (rc != 0) fail_msg("%s", err);
    assert_string_equal(c.redis_url, "unix:///tmp/r.sock");
    assert_int_equal(c.redis.kind, REDIS_TARGET_UNIX);
    assert_string_equal(c.redis.path, "/tmp/r.sock");
    assert_string_equal(c.redis.password, "");  /* nothing left of the file's URL */
    assert_string_equal(c.prefix, "cli");
    assert_string_equal(c.instance, "cli-host");
    assert_int_equal(c.chunk, 4096);
    assert_int_equal(c.log_level, ALOG_DEBUG);
    config_free(&c);
}

static void test_load_bad_overrides(void **state)
{
    allocd_config c;
    char err[1024];
    unsetenv("ALLOCD_CONFIG");
    assert_int_equal(load_with(&c, err, sizeof err, "-c", SHIPPED, "--redis", "tcp://x", NULL), -1);
    assert_string_equal(err, "command line: --redis: redis URL 'tcp://x': "
                        "must start with redis://, unix:// or sentinel://");
    config_free(&c);
    assert_int_equal(load_with(&c, err, sizeof err, "-c", SHIPPED, "--prefix", "a b", NULL), -1);
    assert_contains(err, "command line: --prefix: prefix must be 1 to 64 characters "
                    "from [A-Za-z0-9_.:-]");
    config_free(&c);
    assert_int_equal(load_with(&c, err, sizeof err, "-c", SHIPPED, "--instance=", NULL), -1);
    assert_contains(err, "command line: --instance: instance must be 1 to 64");
    config_free(&c);
}

/* The data paths are relative to the repository root; say so plainly
 * instead of failing every test with "cannot read". */
static int group_setup(void **state)
{
    if (access(SHIPPED, R_OK) == 0 && access(DATA_DIR, R_OK) == 0) return 0;
    print_error("test_config: run from the repository root (no %s here)\n", SHIPPED);
    return -1;
}

int main(void)
{
    log_init(ALOG_ERR, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_default_path),
        cmocka_unit_test(test_free_twice),
        cmocka_unit_test(test_shipped_conf_is_defaults),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_good_files),
        cmocka_unit_test(test_good_all_values),
        cmocka_unit_test(test_good_unix_and_include),
        cmocka_unit_test(test_load_file_missing),
        cmocka_unit_test(test_failed_load_keeps_values),
        cmocka_unit_test(test_cli_empty),
        cmocka_unit_test(test_cli_separate_values),
        cmocka_unit_test(test_cli_equals_values),
        cmocka_unit_test(test_cli_actions),
        cmocka_unit_test(test_cli_errors),
        cmocka_unit_test(test_cli_usage),
        cmocka_unit_test(test_load_missing_default_uses_defaults),
        cmocka_unit_test(test_load_default_path_present),
        cmocka_unit_test(test_load_explicit_missing),
        cmocka_unit_test(test_load_shipped),
        cmocka_unit_test(test_load_override_precedence),
        cmocka_unit_test(test_load_bad_overrides),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
