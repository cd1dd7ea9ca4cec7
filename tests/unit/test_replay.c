/* test_replay.c -- the log's one replayer (core/replay.h), fed stream
 * entries of both formats through allocctl's shell (ctl_replay.h).
 *
 * Each tests/data/replay/NAME.case is one test, read line by line:
 *
 *   batch stock|room PER_USER       first line: the replay's batch
 *   capacity ITEM N                 a capacity known before the log
 *   entry ID K=V K=V ...            one stream entry, fields as written:
 *                                   version 2 (one event) or 11.1's chunk
 *                                   (format=chunk n=N events=[[...],...])
 *   finding TEXT                    the next finding contains TEXT
 *   holder USER JSON|none           the user's holding as holders writes it
 *                                   (compact, keys sorted)
 *   held ITEM N                     units (beds) of ITEM held now
 *   waiting REQ NO                  REQ's ticket (0: not waiting)
 *   by USER ORDER|bed VALUE         the `by` kept for a stock order or a bed
 *   counts EVENTS FINDINGS          events replayed and findings so far
 *
 * Values hold no blanks. Checks run where they stand, so a case can look
 * at the state between entries; at the end every finding must have been
 * named by a `finding` line. Every case file is read, or the test fails.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocctl/ctl_replay.h"
#include "unit/casedir.h"

#define DATA_DIR "tests/data/replay"
#define MAX_FINDINGS 64

typedef struct rcase {
    const char *path;
    int line;
    ctl_replay *rp;
    char *findings[MAX_FINDINGS];
    size_t n_findings, named;
} rcase;

#define CASE_FAIL(c, ...) do { \
        print_error("%s:%d: ", (c)->path, (c)->line); \
        print_error(__VA_ARGS__); \
        print_error("\n"); \
        fail(); \
    } while (0)

static void on_finding(void *ud, replay_kind kind, const char *msg)
{
    rcase *c = ud;
    if (c->n_findings == MAX_FINDINGS) CASE_FAIL(c, "more than %d findings", MAX_FINDINGS);
    c->findings[c->n_findings++] = strdup(msg);
}

/* entry ID K=V ...: the fields point into the line. */
static void do_entry(rcase *c, char *rest)
{
    char *save = NULL, *id = strtok_r(rest, " ", &save);
    ctl_kv f[32];
    size_t n = 0;
    for (char *kv; (kv = strtok_r(NULL, " ", &save));) {
        char *eq = strchr(kv, '=');
        if (!eq || n == 32) CASE_FAIL(c, "entry: '%s' is not K=V", kv);
        *eq = '\0';
        f[n++] = (ctl_kv){ kv, eq + 1, strlen(eq + 1) };
    }
    if (!id) CASE_FAIL(c, "entry: no id");
    ctl_replay_entry(c->rp, id, f, n);
}

static void do_finding(rcase *c, const char *text)
{
    if (c->named >= c->n_findings) CASE_FAIL(c, "no finding containing '%s' (%zu so far)", text, c->n_findings);
    const char *got = c->findings[c->named++];
    if (!strstr(got, text)) CASE_FAIL(c, "finding '%s' does not contain '%s'", got, text);
}

static void do_holder(rcase *c, const char *rest)
{
    char user[64], want[512];
    if (sscanf(rest, "%63s %511s", user, want) != 2) CASE_FAIL(c, "holder USER JSON|none");
    json_t *h = ctl_replay_holder_json(c->rp, user);
    char *got = h ? json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS) : strdup("none");
    json_decref(h);
    int same = got && !strcmp(got, want);
    if (!same) CASE_FAIL(c, "holder %s is %s, want %s", user, got ? got : "?", want);
    free(got);
}

static void do_by(rcase *c, const char *rest)
{
    char user[64], order[64], want[64];
    if (sscanf(rest, "%63s %63s %63s", user, order, want) != 3) CASE_FAIL(c, "by USER ORDER|bed VALUE");
    const replay_user *u = replay_user_get(ctl_replay_state(c->rp), user);
    const char *by = NULL;
    for (size_t i = 0; u && i < u->n_orders; i++)
        if (!strcmp(u->orders[i].order, order)) by = u->orders[i].by;
    if (u && !strcmp(order, "bed")) by = u->by;
    if (!by || strcmp(by, want)) CASE_FAIL(c, "by of %s %s is %s, want %s", user, order, by ? by : "(none)", want);
}

static void do_check(rcase *c, const char *word, const char *rest)
{
    const replay *r = ctl_replay_state(c->rp);
    char name[64];
    long long a, b;
    if (!strcmp(word, "held") && sscanf(rest, "%63s %lld", name, &a) == 2) {
        const replay_item *it = replay_item_get(r, name);
        if (!it || it->held != a) CASE_FAIL(c, "held %s is %lld, want %lld", name, it ? (long long)it->held : -1, a);
    } else if (!strcmp(word, "waiting") && sscanf(rest, "%63s %lld", name, &a) == 2) {
        if (replay_wait_get(r, name) != a) CASE_FAIL(c, "ticket of %s is %lld, want %lld", name,
                                                     (long long)replay_wait_get(r, name), a);
    } else if (!strcmp(word, "counts") && sscanf(rest, "%lld %lld", &a, &b) == 2) {
        const replay_counts *n = replay_counts_get(r);
        if ((long long)n->events != a || (long long)n->findings != b)
            CASE_FAIL(c, "%zu events and %zu findings, want %lld and %lld", n->events, n->findings, a, b);
    } else {
        CASE_FAIL(c, "unknown or malformed line '%s %s'", word, rest);
    }
}

static void do_line(rcase *c, char *line)
{
    char *rest = strchr(line, ' ');
    if (rest) *rest++ = '\0'; else rest = line + strlen(line);
    if (!strcmp(line, "batch")) {
        char kind[16];
        long long per_user;
        if (c->rp || sscanf(rest, "%15s %lld", kind, &per_user) != 2) CASE_FAIL(c, "batch stock|room PER_USER, once");
        c->rp = ctl_replay_new(!strcmp(kind, "room"), per_user, on_finding, c);
        assert_non_null(c->rp);
        return;
    }
    if (!c->rp) CASE_FAIL(c, "the first line is batch");
    long long n;
    char item[64];
    if (!strcmp(line, "capacity") && sscanf(rest, "%63s %lld", item, &n) == 2) ctl_replay_capacity(c->rp, item, n);
    else if (!strcmp(line, "entry")) do_entry(c, rest);
    else if (!strcmp(line, "finding")) do_finding(c, rest);
    else if (!strcmp(line, "holder")) do_holder(c, rest);
    else if (!strcmp(line, "by")) do_by(c, rest);
    else do_check(c, line, rest);
}

static void run_case(void **state)
{
    rcase *c = *state;
    FILE *f = fopen(c->path, "r");
    if (!f) CASE_FAIL(c, "cannot open");
    char buf[4096];
    while (fgets(buf, sizeof buf, f)) {
        c->line++;
        buf[strcspn(buf, "\r\n")] = '\0';
        if (buf[0] == '\0' || buf[0] == '#') continue;
        do_line(c, buf);
    }
    fclose(f);
    c->line++;
    if (!c->rp) CASE_FAIL(c, "empty case");
    if (c->named != c->n_findings)
        CASE_FAIL(c, "finding not named by the case: %s", c->findings[c->named]);
}

static int case_teardown(void **state)
{
    rcase *c = *state;
    ctl_replay_free(c->rp);
    for (size_t i = 0; i < c->n_findings; i++) free(c->findings[i]);
    return 0;
}

int main(void)
{
    size_t n;
    char **paths = casedir_list(DATA_DIR, ".case", &n);
    if (!paths) return 1;
    struct CMUnitTest *tests = calloc(n, sizeof *tests);
    rcase *cases = calloc(n, sizeof *cases);
    if (!tests || !cases) return 1;
    for (size_t i = 0; i < n; i++) {
        cases[i].path = paths[i];
        tests[i] = (struct CMUnitTest){ .name = strrchr(paths[i], '/') + 1, .test_func = run_case,
                                        .teardown_func = case_teardown, .initial_state = &cases[i] };
    }
    int rc = _cmocka_run_group_tests("replay", tests, n, NULL, NULL);
    casedir_free(paths, n);
    free(tests);
    free(cases);
    return rc;
}
