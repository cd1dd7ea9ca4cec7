/* test_secret.c -- base/secret (the Redis password from a file or the
 * environment), the login settings of the config, the metrics token's file, and the URL shown
 * without its password. The SHA-256 `allocctl acl` prints passwords as is
 * core/sha256, whose vectors are in test_lottery.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/config.h"
#include "base/secret.h"

static char dir[200];

static const char *put(const char *name, const char *bytes, size_t n)
{
    static char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(bytes, 1, n, f);
    fclose(f);
    return path;
}

static void test_read_file(void **state)
{
    char pw[SECRET_MAX], err[512];
    static const struct { const char *bytes; size_t n; const char *want; } cases[] = {
        { "s3cret\n", 7, "s3cret" }, { "s3cret", 6, "s3cret" }, { "s3cret\r\n", 8, "s3cret" },
        { "a b#c\n", 6, "a b#c" },
        { "", 0, NULL }, { "\n", 1, NULL }, { "two\nlines\n", 10, NULL }, { "n\0ul", 4, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *p = put("pw", cases[i].bytes, cases[i].n);
        int rc = secret_read_file(p, pw, sizeof pw, err, sizeof err);
        if (cases[i].want) {
            assert_int_equal(rc, 0);
            assert_string_equal(pw, cases[i].want);
        } else {
            assert_int_equal(rc, -1);
            assert_non_null(strstr(err, p));
        }
    }
    char big[SECRET_MAX + 10];
    memset(big, 'x', sizeof big);
    assert_int_equal(secret_read_file(put("big", big, sizeof big), pw, sizeof pw, err, sizeof err), -1);
    assert_non_null(strstr(err, "too long"));
    assert_null(strstr(err, "xxxx"));
    assert_int_equal(secret_read_file("/nonexistent/pw", pw, sizeof pw, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file"));
}

static void test_apply_precedence(void **state)
{
    char err[512], path[300];
    snprintf(path, sizeof path, "%s", put("file-pw", "from-file\n", 10));
    redis_target t;
    assert_int_equal(redis_url_parse("redis://127.0.0.1:6379", &t, err, sizeof err), 0);
    unsetenv(SECRET_ENV);
    assert_int_equal(secret_apply(&t, "alloc-daemon", path, err, sizeof err), 0);
    assert_string_equal(t.user, "alloc-daemon");
    assert_string_equal(t.password, "from-file");
    /* the environment wins */
    assert_int_equal(redis_url_parse("redis://127.0.0.1:6379", &t, err, sizeof err), 0);
    setenv(SECRET_ENV, "from-env", 1);
    assert_int_equal(secret_apply(&t, NULL, path, err, sizeof err), 0);
    assert_string_equal(t.password, "from-env");
    unsetenv(SECRET_ENV);
    /* a URL password and a file: refused, without showing either */
    assert_int_equal(redis_url_parse("redis://u:in-url@127.0.0.1:6379", &t, err, sizeof err), 0);
    assert_int_equal(secret_apply(&t, "", path, err, sizeof err), -1);
    assert_null(strstr(err, "in-url"));
    assert_null(strstr(err, "from-file"));
    /* the URL's user unless redis_user says otherwise */
    assert_int_equal(redis_url_parse("redis://u:in-url@127.0.0.1:6379", &t, err, sizeof err), 0);
    assert_int_equal(secret_apply(&t, "", "", err, sizeof err), 0);
    assert_string_equal(t.user, "u");
    assert_string_equal(t.password, "in-url");
}

static void test_credentials_directory(void **state)
{
    char out[512], err[512];
    unsetenv("CREDENTIALS_DIRECTORY");
    assert_int_equal(secret_path("redis_password_file", "redis-password", out, sizeof out, err, sizeof err), -1);
    assert_non_null(strstr(err, "CREDENTIALS_DIRECTORY"));
    setenv("CREDENTIALS_DIRECTORY", "/run/credentials/allocd.service", 1);
    assert_int_equal(secret_path("redis_password_file", "redis-password", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "/run/credentials/allocd.service/redis-password");
    assert_int_equal(secret_path("redis_password_file", "/etc/pw", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "/etc/pw");
    unsetenv("CREDENTIALS_DIRECTORY");
}

static void test_config_settings(void **state)
{
    char text[900], err[600];
    const char *pw = put("daemon-pw", "Pw-config\n", 10);
    snprintf(text, sizeof text, "redis = \"unix:///run/redis.sock\";\nredis_user = \"alloc-daemon\";\n"
             "redis_password_file = \"%s\";\n", pw);
    char conf[400], good[400];
    snprintf(conf, sizeof conf, "%s", put("a.conf", text, strlen(text)));
    snprintf(good, sizeof good, "%s", conf);
    cli_args a = { .config_path = conf };
    allocd_config c;
    unsetenv(SECRET_ENV);
    assert_int_equal(config_load(&c, &a, err, sizeof err), 0);
    assert_string_equal(c.redis.user, "alloc-daemon");
    assert_string_equal(c.redis.password, "Pw-config");
    config_free(&c);
    /* a missing file at its line; the command line overrides */
    snprintf(text, sizeof text, "prefix = \"alloc\";\nredis_password_file = \"%s/none\";\n", dir);
    snprintf(conf, sizeof conf, "%s", put("b.conf", text, strlen(text)));
    a.config_path = conf;
    assert_int_equal(config_load(&c, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "b.conf:2: "));
    a.config_path = good;
    a.redis_password_file = put("operator-pw", "Pw-operator\n", 12);
    a.redis_user = "alloc-operator";
    assert_int_equal(config_load(&c, &a, err, sizeof err), 0);
    assert_string_equal(c.redis.user, "alloc-operator");
    assert_string_equal(c.redis.password, "Pw-operator");
    config_free(&c);
}

/* metrics_token_file is read like the password file: a relative path is
 * a systemd credential, the file holds the token alone, and no message
 * shows the token. */
static void test_metrics_token_file(void **state)
{
    char text[900], err[600], conf[400];
    put("metrics.token", "Tok-0123456789abcdef\n", 21);
    snprintf(text, sizeof text, "metrics_token_file = \"metrics.token\";\n");
    snprintf(conf, sizeof conf, "%s", put("m.conf", text, strlen(text)));
    cli_args a = { .config_path = conf };
    allocd_config c;
    unsetenv("CREDENTIALS_DIRECTORY");
    assert_int_equal(config_load(&c, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "m.conf:1: metrics_token_file 'metrics.token' is relative"));
    setenv("CREDENTIALS_DIRECTORY", dir, 1);
    assert_int_equal(config_load(&c, &a, err, sizeof err), 0);
    assert_string_equal(c.metrics_token, "Tok-0123456789abcdef");
    config_free(&c);
    unsetenv("CREDENTIALS_DIRECTORY");
    snprintf(text, sizeof text, "metrics_token_file = \"%s\";\n",
             put("two.token", "Tok-0123456789abcdef\nmore\n", 26));
    snprintf(conf, sizeof conf, "%s", put("n.conf", text, strlen(text)));
    a.config_path = conf;
    assert_int_equal(config_load(&c, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "n.conf:1: metrics_token_file: "));
    assert_non_null(strstr(err, "holds more than one line"));
    assert_null(strstr(err, "Tok-"));
    /* allocctl (the archive unit) loads the same file without the daemon's
     * credential: the token file is not read, and a public metrics_listen
     * with it is not refused */
    snprintf(text, sizeof text, "metrics_listen = \"0.0.0.0:9464\";\nmetrics_token_file = \"metrics.token\";\n");
    snprintf(conf, sizeof conf, "%s", put("t.conf", text, strlen(text)));
    a.config_path = conf;
    assert_int_equal(config_load(&c, &a, err, sizeof err), -1);      /* the daemon: no credential */
    a.tool = 1;
    assert_int_equal(config_load(&c, &a, err, sizeof err), 0);
    assert_true(!c.metrics_token || !*c.metrics_token);
    config_free(&c);
}

static void test_bad_url_hides_the_password(void **state)
{
    redis_target t;
    char err[512];
    assert_int_equal(redis_url_parse("redis://alloc:Hidden-Pw@host:99999", &t, err, sizeof err), -1);
    assert_null(strstr(err, "Hidden-Pw"));
    assert_non_null(strstr(err, "redis://***@host:99999"));
    assert_int_equal(redis_url_parse("redis://Hidden-Pw@host/3", &t, err, sizeof err), -1);
    assert_null(strstr(err, "Hidden-Pw"));
}

static int setup(void **state)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/test_secret-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_file),
        cmocka_unit_test(test_apply_precedence),
        cmocka_unit_test(test_credentials_directory),
        cmocka_unit_test(test_config_settings),
        cmocka_unit_test(test_metrics_token_file),
        cmocka_unit_test(test_bad_url_hides_the_password),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
