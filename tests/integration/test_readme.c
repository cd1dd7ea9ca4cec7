/* test_readme.c -- every code block of README.md runs as written (issue
 * 36: the operator's block failed after its first line, the by-hand
 * transcript failed when typed, and comments looked like output nothing
 * printed).
 *
 * The blocks run in order, in one sh, in a temp dir laid out like the
 * source tree while `make run` serves: run/redis.sock (the test's private
 * Redis, a real allocd on it) and build/ (the tree under test). In a block,
 * a line starting with "$ " is a command (continued by a trailing
 * backslash, or up to EOF for a <<'EOF' here-document); the lines under it
 * are its output: each must match, in order, a line of what the command
 * printed, "…" standing for any text. Every command must exit 0.
 *
 * A block the test cannot run is preceded by <!-- readme: not run (why);
 * checked: how -->, and each such block is checked here another way; a
 * marked block this file does not know fails the test.
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

enum { MAX_STEPS = 200, MAX_WANT = 24 };

typedef struct step {
    char *cmd;                 /* malloc'd shell text */
    const char *want[MAX_WANT];
    size_t n_want;
    int line;                  /* in README.md */
} step;

typedef struct readme {
    char *text;                /* README.md, cut into lines in place */
    step steps[MAX_STEPS];
    size_t n;
    int marked_make, marked_synopsis;
    char *synopsis;
} readme;

static char *append(char *cmd, const char *line)
{
    size_t a = strlen(cmd), b = strlen(line);
    char *s = realloc(cmd, a + b + 2);
    assert_non_null(s);
    s[a] = '\n';
    memcpy(s + a + 1, line, b + 1);
    return s;
}

/* Lines of a runnable block from *i on, up to its closing fence. */
static void parse_block(readme *r, char **lines, size_t n, size_t *i)
{
    step *cur = NULL;
    for (; *i < n && strncmp(lines[*i], "```", 3); (*i)++) {
        char *l = lines[*i];
        if (!strncmp(l, "$ ", 2)) {
            assert_true(r->n < MAX_STEPS);
            cur = &r->steps[r->n++];
            cur->cmd = strdup(l + 2);
            cur->line = (int)*i + 1;
            int heredoc = strstr(l, "<<'EOF'") != NULL;
            while (*i + 1 < n && ((strlen(cur->cmd) && cur->cmd[strlen(cur->cmd) - 1] == '\\') || heredoc)) {
                cur->cmd = append(cur->cmd, lines[++*i]);
                if (heredoc && !strcmp(lines[*i], "EOF")) heredoc = 0;
            }
            continue;
        }
        if (!cur) fail_msg("README.md:%zu: output before any command: %s", *i + 1, l);
        while (*l == ' ') l++;
        assert_true(cur->n_want < MAX_WANT);
        cur->want[cur->n_want++] = l;
    }
}

static void parse(readme *r)
{
    r->text = textfile_read("README.md", NULL);
    assert_non_null(r->text);
    char **lines = calloc(4096, sizeof *lines);
    size_t n = 0;
    for (char *p = r->text; *p && n < 4096;) {
        lines[n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    const char *marker = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(lines[i], "<!-- readme: not run", 20)) { marker = lines[i]; continue; }
        if (strncmp(lines[i], "```", 3)) { if (lines[i][0]) marker = NULL; continue; }
        i++;
        if (!marker) { parse_block(r, lines, n, &i); continue; }
        if (strstr(marker, "targets exist") && !strncmp(lines[i], "make run", 8)) r->marked_make = 1;
        else if (strstr(marker, "first line of allocd --help")) { r->marked_synopsis = 1; r->synopsis = lines[i]; }
        else fail_msg("README.md:%zu: a block marked not run that this test cannot check: %s", i, marker);
        while (i < n && strncmp(lines[i], "```", 3)) i++;
        marker = NULL;
    }
    free(lines);
}

/* Does line hold the parts of want (split at "…") in order? */
static int line_matches(const char *line, const char *want)
{
    const char *ell = "\xe2\x80\xa6";
    char part[512];
    for (const char *w = want; *w;) {
        const char *e = strstr(w, ell);
        size_t len = e ? (size_t)(e - w) : strlen(w);
        if (len >= sizeof part) return 0;
        memcpy(part, w, len);
        part[len] = '\0';
        const char *at = len ? strstr(line, part) : line;
        if (!at) return 0;
        line = at + len;
        w += len + (e ? strlen(ell) : 0);
    }
    return 1;
}

static void check_output(const step *s, const char *out)
{
    const char *cursor = out;
    for (size_t k = 0; k < s->n_want; k++) {
        if (!strcmp(s->want[k], "\xe2\x80\xa6")) continue;
        const char *p = cursor;
        int found = 0;
        while (*p && !found) {
            size_t len = strcspn(p, "\n");
            char line[4096];
            snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
            found = line_matches(line, s->want[k]);
            p += len + (p[len] == '\n');
        }
        if (!found) fail_msg("README.md:%d: `%s` printed no line like '%s' (after what matched before); it printed:\n%s",
                             s->line, s->cmd, s->want[k], out);
        cursor = p;
    }
}

static void test_readme_blocks_run(void **state)
{
    itest *t = *state;
    readme r;
    memset(&r, 0, sizeof r);
    parse(&r);
    assert_true(r.n >= 30);
    assert_true(r.marked_make && r.marked_synopsis);
    char dir[600], script[700], build[600];
    snprintf(dir, sizeof dir, "%s/tree", t->redis.dir);
    snprintf(script, sizeof script, "%s/readme.sh", t->redis.dir);
    char *abs = realpath(harness_build_dir(), NULL);
    assert_non_null(abs);
    snprintf(build, sizeof build, "%s", abs);
    free(abs);
    assert_int_equal(itest_sh("mkdir -p '%s/run' && ln -s '%s' '%s/run/redis.sock' && ln -s '%s' '%s/build'",
                              dir, t->redis.sock, dir, build, dir), 0);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "cd '%s' || exit 99\n", dir);
    for (size_t i = 0; i < r.n; i++)
        fprintf(f, "{ %s\n} > out.%zu 2>&1; echo $? > rc.%zu\n", r.steps[i].cmd, i, i);
    fclose(f);
    itest_start(t, NULL);
    assert_int_equal(itest_sh("sh '%s'", script), 0);
    for (size_t i = 0; i < r.n; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/out.%zu", dir, i);
        char *out = textfile_read(path, NULL);
        snprintf(path, sizeof path, "%s/rc.%zu", dir, i);
        char *rc = textfile_read(path, NULL);
        assert_non_null(out);
        assert_non_null(rc);
        if (atoi(rc) != 0) fail_msg("README.md:%d: `%s` exited %d:\n%s", r.steps[i].line, r.steps[i].cmd, atoi(rc), out);
        check_output(&r.steps[i], out);
        free(out);
        free(rc);
        free(r.steps[i].cmd);
    }
    free(r.text);
    assert_int_equal(harness_allocd_stop(&t->allocd), 0);
}

/* The blocks marked not run: `make run`, `make run-housing` and `make
 * test` are targets, and the synopsis is allocd's own. */
static void test_readme_marked_blocks(void **state)
{
    readme r;
    memset(&r, 0, sizeof r);
    parse(&r);
    assert_true(r.marked_make && r.marked_synopsis);
    assert_int_equal(itest_sh("make -n run BUILD=%s >/dev/null 2>&1", harness_build_dir()), 0);
    assert_int_equal(itest_sh("make -n run-housing BUILD=%s >/dev/null 2>&1", harness_build_dir()), 0);
    assert_int_equal(itest_sh("make -n test BUILD=%s >/dev/null 2>&1", harness_build_dir()), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/allocd-usage", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_int_equal(itest_sh("%s --help | head -n 1 | sed 's/^Usage: [^ ]*allocd /allocd /' > '%s'",
                              harness_allocd_bin(), path), 0);
    char *usage = textfile_read(path, NULL);
    assert_non_null(usage);
    usage[strcspn(usage, "\n")] = '\0';
    assert_string_equal(r.synopsis, usage);
    free(usage);
    remove(path);
    for (size_t i = 0; i < r.n; i++) free(r.steps[i].cmd);
    free(r.text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        ITEST_CASE(test_readme_blocks_run),
        ITEST_CASE(test_readme_marked_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
