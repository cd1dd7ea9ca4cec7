/* test_allocctl.c -- allocctl end to end: the real binary against a real
 * redis-server and the real allocd, exactly as an operator runs it.
 *
 * Each test runs `build/allocctl -c CONF ...` as a child process, checks
 * its exit code and output, and checks Redis directly where allocctl wrote
 * or should have read something. The stock and room runs exercise every
 * kind of log entry (grants, reservations that expire, confirms, cancels,
 * switches, releases, groups, set_capacity) so that `verify` is shown to
 * accept a real daemon's batch, and then to catch hand-made corruption.
 * The `top` test drives the dashboard inside tmux (skipped without tmux).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cmocka.h>
#include <jansson.h>

#include "harness.h"
#include "itest.h"

#define DATA "tests/data/allocctl/"

typedef struct fixture {
    const char *allocd_conf; /* allocd's settings; NULL: the default below */
    harness_redis redis;
    harness_allocd allocd;
    redisContext *c;
    char conf[400];
    char tmux[400];     /* a tmux server's socket, killed at teardown */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (harness_redis_start(&f->redis, NULL) < 0) return -1;
    f->c = harness_redis_connect(&f->redis);
    snprintf(f->conf, sizeof f->conf, "%s/allocctl.conf", f->redis.dir);
    FILE *cf = fopen(f->conf, "w");
    if (!cf) return -1;
    fprintf(cf, "redis = \"%s\";\nregistry_interval_ms = 100;\n", f->redis.url);
    fclose(cf);
    *state = f;
    return f->c ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->tmux[0]) {   /* a failed top test must not leave its server */
        char cmd[500];
        snprintf(cmd, sizeof cmd, "tmux -S %s kill-server >/dev/null 2>&1", f->tmux);
        if (system(cmd) != 0) { /* already gone */ }
    }
    if (f->allocd.pid > 0) {
        int rc = harness_allocd_stop(&f->allocd);
        if (rc != 0) harness_allocd_dump_log(&f->allocd);
    }
    redisFree(f->c);
    harness_redis_stop(&f->redis);
    free(f);
    return 0;
}

static void start_allocd(fixture *f)
{
    const char *conf = f->allocd_conf ? f->allocd_conf : "registry_interval_ms = 100;";
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, conf), 0);
}

/* Runs allocctl -c CONF args... (NULL-terminated); stdout+stderr into *out
 * (malloc'd, may be NULL). Returns the exit code. */
static int ctl(fixture *f, char **out, ...)
{
    const char *argv[40] = { harness_allocctl_bin(), "-c", f->conf };
    int n = 3;
    va_list ap;
    va_start(ap, out);
    for (const char *a; n < 39 && (a = va_arg(ap, const char *)) != NULL;) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char *buf;
    int rc = proc_run_capture((char *const *)argv, &buf);
    assert_true(rc >= 0);
    if (out) *out = buf;
    else free(buf);
    return rc;
}

/* ctl() that must exit with `want`; returns the output (caller frees). */
#define CTL(f, want, ...) ctl_expect(f, want, __VA_ARGS__, NULL)
static char *ctl_expect(fixture *f, int want, ...)
{
    const char *a[32];
    int n = 0;
    va_list ap;
    va_start(ap, want);
    for (const char *s; n < 31 && (s = va_arg(ap, const char *)) != NULL;) a[n++] = s;
    va_end(ap);
    for (int i = n; i < 32; i++) a[i] = NULL;
    char *out = NULL;
    int rc = ctl(f, &out, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10],
                 a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], NULL);
    if (rc != want) {
        if (f->allocd.pid > 0) harness_allocd_dump_log(&f->allocd);
        fail_msg("allocctl %s %s %s: exit %d, expected %d; output:\n%s", a[0], a[1] ? a[1] : "",
                 a[2] ? a[2] : "", rc, want, out);
    }
    return out;
}

static void contains(const char *out, const char *needle)
{
    if (!strstr(out, needle)) fail_msg("expected '%s' in:\n%s", needle, out);
}

/* push ... -> the ordinal it printed; the id goes to id (if given). */
static long long push(fixture *f, char *id, size_t idlen, const char *batch, ...)
{
    const char *a[24] = { "push", batch };
    int n = 2;
    va_list ap;
    va_start(ap, batch);
    for (const char *s; n < 23 && (s = va_arg(ap, const char *)) != NULL;) a[n++] = s;
    va_end(ap);
    char *out = NULL;
    int rc = ctl(f, &out, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10],
                 a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], NULL);
    if (rc != 0) fail_msg("push exit %d: %s", rc, out);
    char got[128] = "";
    long long ordinal = -1;
    if (sscanf(out, "id=%127s ordinal=%lld", got, &ordinal) != 2) fail_msg("push printed: %s", out);
    if (id) snprintf(id, idlen, "%s", got);
    free(out);
    return ordinal;
}
#define PUSH(f, id, batch, ...) push(f, id, sizeof id, batch, __VA_ARGS__, NULL)

/* `wait --raw` -> the result document. */
static json_t *wait_result(fixture *f, const char *batch, const char *id)
{
    char *out = CTL(f, 0, "wait", batch, "--id", id, "--timeout", "10", "--raw");
    json_error_t e;
    json_t *doc = json_loads(out, 0, &e);
    if (!doc) fail_msg("wait printed: %s", out);
    free(out);
    return doc;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void expect_status(fixture *f, const char *batch, const char *id, const char *status)
{
    json_t *r = wait_result(f, batch, id);
    if (strcmp(jstr(r, "status"), status)) {
        char *s = json_dumps(r, 0);
        fail_msg("%s: expected %s, got %s", id, status, s);
    }
    json_decref(r);
}

static void wait_idle(fixture *f, const char *batch)
{
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:queue", batch);
    for (int i = 0; i < 500; i++) {
        long long q = proc_int(f->c, "LLEN %s", key);
        if (q == 0) break;
        harness_sleep_ms(10);
    }
}

/* ---- batch create ------------------------------------------------------ */

/* Redis's slow log records every command while on (slowlog-log-slower-than
 * 0): the commands an allocctl run sent, with their keys. */
static void log_commands(fixture *f, int on)
{
    itest_cmd(f->c, "CONFIG SET slowlog-max-len 100000");
    itest_cmd(f->c, "CONFIG SET slowlog-log-slower-than %d", on ? 0 : 10000);
    if (on) itest_cmd(f->c, "SLOWLOG RESET");
}

/* How many logged commands were `name` on `key`. */
static long long logged_calls(fixture *f, const char *name, const char *key)
{
    redisReply *r = redisCommand(f->c, "SLOWLOG GET -1");
    assert_true(r && r->type == REDIS_REPLY_ARRAY);
    long long n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *args = r->element[i]->element[3];
        n += args->elements >= 2 && !strcasecmp(args->element[0]->str, name) &&
             !strcmp(args->element[1]->str, key);
    }
    freeReplyObject(r);
    return n;
}

static void test_create_from_csv(void **state)
{
    fixture *f = *state;
    char *out = CTL(f, 0, "batch", "create", "dorm", "--kind", "room", "--from", DATA "rooms.csv",
                    "--max-group", "3", "--opens-at", "2026-01-01T10:00:00+01:00");
    contains(out, "created batch dorm: 4 items, 10 beds");
    free(out);
    char *v = harness_str(f->c, "HGET alloc:{dorm}:meta kind");
    assert_string_equal(v, "room");
    free(v);
    assert_int_equal(proc_int(f->c, "HGET alloc:{dorm}:meta max_group"), 3);
    assert_int_equal(proc_int(f->c, "HGET alloc:{dorm}:meta opens_at"), 1767258000000LL);
    assert_int_equal(proc_int(f->c, "HGET alloc:{dorm}:capacity R102"), 3);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{dorm}:capacity"), 4);
    v = harness_str(f->c, "HGET alloc:{dorm}:attrs R101");
    assert_string_equal(v, "{\"building\":\"7\",\"floor\":1,\"gender\":\"F\"}");
    free(v);
    v = harness_str(f->c, "HGET alloc:{dorm}:attrs R102");
    assert_string_equal(v, "{\"building\":7,\"floor\":1,\"gender\":\"M\",\"note\":\"quiet, garden side\"}");
    free(v);
    v = harness_str(f->c, "HGET alloc:{dorm}:attrs R202");   /* 007 is no JSON number */
    assert_string_equal(v, "{\"building\":8,\"floor\":2,\"gender\":\"M\",\"note\":\"007\"}");
    free(v);
    assert_int_equal(proc_int(f->c, "SISMEMBER alloc:batches dorm"), 1);

    /* an existing batch is refused, --replace rewrites it */
    out = CTL(f, 1, "batch", "create", "dorm", "--kind", "room", "--from", DATA "rooms.json");
    contains(out, "already exists");
    free(out);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{dorm}:capacity"), 4);
    itest_cmd(f->c, "RPUSH alloc:{dorm}:queue leftover");
    out = CTL(f, 0, "batch", "create", "dorm", "--kind", "room", "--from", DATA "rooms.json", "--replace");
    free(out);
    assert_int_equal(proc_int(f->c, "HLEN alloc:{dorm}:capacity"), 3);
    assert_int_equal(proc_int(f->c, "EXISTS alloc:{dorm}:queue"), 0);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{dorm}:meta max_group"), 0);
    assert_int_equal(proc_int(f->c, "SISMEMBER alloc:batches dorm"), 1);

    out = CTL(f, 0, "batch", "list");
    contains(out, "dorm\troom");
    free(out);
    out = CTL(f, 0, "batch", "rm", "dorm");
    contains(out, "keys are kept");
    free(out);
    assert_int_equal(proc_int(f->c, "SISMEMBER alloc:batches dorm"), 0);
    assert_int_equal(proc_int(f->c, "EXISTS alloc:{dorm}:meta"), 1);
    free(CTL(f, 1, "batch", "rm", "dorm"));
}

static void test_create_from_json(void **state)
{
    fixture *f = *state;
    free(CTL(f, 0, "batch", "create", "sale", "--kind", "stock", "--from", DATA "stock.json",
             "--per-user", "2", "--hold-ms", "500", "--early", "shuffle", "--rate-max", "5",
             "--rate-window-ms", "1000", "--penalty-ms", "2000"));
    assert_int_equal(proc_int(f->c, "HGET alloc:{sale}:capacity sku1"), 10);
    assert_int_equal(proc_int(f->c, "HGET alloc:{sale}:capacity sku3"), 0);
    assert_int_equal(proc_int(f->c, "HGET alloc:{sale}:meta per_user"), 2);
    assert_int_equal(proc_int(f->c, "HGET alloc:{sale}:meta hold_ms"), 500);
    assert_int_equal(proc_int(f->c, "HGET alloc:{sale}:meta penalty_ms"), 2000);
    char *v = harness_str(f->c, "HGET alloc:{sale}:meta early");
    assert_string_equal(v, "shuffle");
    free(v);
    assert_int_equal(proc_int(f->c, "EXISTS alloc:{sale}:attrs"), 0);

    free(CTL(f, 0, "batch", "create", "dorm2", "--kind", "room", "--from", DATA "rooms.json"));
    v = harness_str(f->c, "HGET alloc:{dorm2}:attrs A2");
    assert_string_equal(v, "{\"building\":\"A\",\"floor\":2}");
    free(v);
    assert_int_equal(proc_int(f->c, "HEXISTS alloc:{dorm2}:attrs B1"), 0);
    assert_int_equal(proc_int(f->c, "HGET alloc:{dorm2}:capacity B1"), 3);
    assert_int_equal(proc_int(f->c, "SCARD alloc:batches"), 2);

    /* usage errors */
    free(CTL(f, 2, "batch", "create", "x", "--kind", "shop", "--from", DATA "stock.json"));
    free(CTL(f, 2, "batch", "create", "x", "--kind", "room", "--from", DATA "stock.json", "--per-user", "2"));
    free(CTL(f, 2, "batch", "create", "bad{id}", "--kind", "stock", "--from", DATA "stock.json"));
    free(CTL(f, 2, "batch", "create", "x", "--kind", "stock", "--from", DATA "stock.json",
             "--opens-at", "2026-01-01T10:00:00"));
    free(CTL(f, 2, "batch", "create", "x", "--kind", "stock"));
}

static void test_bad_files_name_the_line(void **state)
{
    fixture *f = *state;
    static const struct { const char *file, *where, *what; } cases[] = {
        { "bad-header.csv", ":1: ", "id,capacity" },
        { "bad-capacity.csv", ":3: ", "capacity '-3'" },
        { "dup-id.csv", ":5: ", "already defined on line 2" },
        { "short-row.csv", ":3: ", "expected 3 fields" },
        { "bad-quote.csv", ":3: ", "unterminated" },
        { "long-id.csv", ":2: ", "1 to 64 characters" },
        { "bad-syntax.json", ":4: ", "expected" },
        { "bad-capacity.json", ":5: ", "'A3'" },
        { "dup-key.json", ":3: ", "duplicate" },
        { "empty.csv", ": ", "no items" },
        { "no-such-file.csv", ": ", "cannot read" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128], where[160];
        snprintf(path, sizeof path, DATA "%s", cases[i].file);
        snprintf(where, sizeof where, "%s%s", path, cases[i].where);
        char *out = CTL(f, 4, "batch", "create", "b1", "--kind", "room", "--from", path);
        contains(out, where);
        contains(out, cases[i].what);
        free(out);
    }
    assert_int_equal(proc_int(f->c, "EXISTS alloc:{b1}:meta alloc:{b1}:capacity"), 0);
    assert_int_equal(proc_int(f->c, "EXISTS alloc:batches"), 0);
}

/* ---- push, status, wait ------------------------------------------------ */

/* Paused: five requests stay queued with ordinals 2..6, and status tells
 * the position from the id or from the ordinal. */
static void push_while_paused(fixture *f, char ids[5][80])
{
    char cid[80];
    char *out = CTL(f, 0, "push", "p1", "--ctl", "--op", "pause");
    assert_int_equal(sscanf(out, "id=%79s", cid), 1);
    free(out);
    expect_status(f, "p1", cid, "done");
    for (int i = 0; i < 5; i++) {
        char user[16];
        snprintf(user, sizeof user, "u%d", i + 1);
        long long ord = push(f, ids[i], sizeof ids[i], "p1", "--user", user, "--op", "buy",
                             "--item", i == 4 ? "sku3" : "sku2", "--qty", "1", NULL);
        assert_int_equal(ord, 2 + i);
    }
    out = CTL(f, 0, "status", "p1", "--id", ids[3]);
    contains(out, "ordinal 5, 3 ahead of you");
    free(out);
    out = CTL(f, 0, "status", "p1", "--id", ids[3], "--ordinal", "5");
    contains(out, "3 ahead of you");
    free(out);
    out = CTL(f, 0, "status", "p1");
    contains(out, "queue          5");
    contains(out, "state          paused");
    free(out);
}

/* Resumed: each answered with its ordinal (2 + i) as seq; status of a
 * request and of a user, the latter with one HGET and no scan of holders. */
static void answers_after_resume(fixture *f, char ids[5][80])
{
    free(CTL(f, 0, "push", "p1", "--ctl", "--op", "resume"));
    for (int i = 0; i < 5; i++) {
        json_t *r = wait_result(f, "p1", ids[i]);
        assert_int_equal(json_integer_value(json_object_get(r, "seq")), 2 + i);
        assert_string_equal(jstr(r, "status"), i == 4 ? "rejected" : "granted");
        json_decref(r);
    }
    char *out = CTL(f, 0, "status", "p1", "--id", ids[0]);
    contains(out, "status       granted");
    contains(out, "you beat 66% (rank 2 of 6 participants)");
    free(out);
    log_commands(f, 1);
    out = CTL(f, 0, "status", "p1", "--user", "u1");
    log_commands(f, 0);
    contains(out, "u1 holds 1 units");
    contains(out, "x sku2, confirmed");
    free(out);
    /* one HGET of U's entry; no scan of holders: a stock batch has no swaps */
    assert_int_equal(logged_calls(f, "HGET", "alloc:{p1}:holders"), 1);
    assert_int_equal(logged_calls(f, "HSCAN", "alloc:{p1}:holders"), 0);
}

/* An unknown user, request or batch: exit 1 and a line that says so. */
static void status_of_unknowns(fixture *f)
{
    char *out = CTL(f, 1, "status", "p1", "--user", "nobody");
    contains(out, "holds nothing");
    free(out);
    out = CTL(f, 1, "status", "p1", "--id", "no-such-request");
    contains(out, "no result, and not queued");
    free(out);
    free(CTL(f, 1, "wait", "p1", "--id", "no-such-request", "--timeout", "0.2"));
    free(CTL(f, 1, "status", "no-such-batch"));
}

static void test_push_ordinal_status_wait(void **state)
{
    fixture *f = *state;
    free(CTL(f, 0, "batch", "create", "p1", "--kind", "stock", "--from", DATA "stock.json",
             "--per-user", "3"));
    start_allocd(f);
    char id[80];
    long long ord = PUSH(f, id, "p1", "--user", "u0", "--op", "buy", "--item", "sku1", "--id", "first");
    assert_int_equal(ord, 1);
    assert_string_equal(id, "first");
    expect_status(f, "p1", "first", "granted");
    char ids[5][80];
    push_while_paused(f, ids);
    answers_after_resume(f, ids);
    status_of_unknowns(f);
    /* a request allocd would not take is a usage error, --json pushes anything */
    free(CTL(f, 2, "push", "p1", "--user", "u1", "--op", "fly"));
    free(CTL(f, 2, "push", "p1", "--user", "u1", "--op", "buy", "--qty", "x"));
    char *out = CTL(f, 0, "push", "p1", "--json", "{\"id\":\"j1\",\"user\":\"u9\",\"op\":\"buy\",\"item\":\"sku1\"}");
    contains(out, "id=j1 ordinal=7");
    free(out);
    expect_status(f, "p1", "j1", "granted");
}

static void test_exit_codes(void **state)
{
    fixture *f = *state;
    char *out = CTL(f, 0, "--help");
    contains(out, "Exit codes:");
    contains(out, "verify B");
    free(out);
    const char *cmds[] = { "push", "status", "wait", "dead", "verify", "top" };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        out = CTL(f, 0, cmds[i], "--help");
        contains(out, "Usage: allocctl");
        free(out);
    }
    free(CTL(f, 0, "batch", "create", "--help"));
    free(CTL(f, 2, "frobnicate"));
    free(CTL(f, 2, "status"));
    free(CTL(f, 2, "status", "b", "--bogus"));
    free(CTL(f, 2, "wait", "b"));
    free(CTL(f, 2, "dead", "b", "--requeue"));
    out = CTL(f, 3, "--redis", "unix:///nonexistent/redis.sock", "status", "b");
    contains(out, "cannot connect");
    free(out);
    free(CTL(f, 2, "--redis", "http://x", "status", "b"));
}

/* ---- verify against real runs ------------------------------------------ */

static char *order_of(fixture *f, const char *batch, const char *id)
{
    json_t *r = wait_result(f, batch, id);
    assert_string_equal(jstr(r, "status"), "granted");
    char *o = strdup(jstr(r, "order"));
    json_decref(r);
    return o;
}

/* Sleeps until the reservation of a granted result has expired. */
static void sleep_past_expiry(fixture *f, const char *batch, const char *id)
{
    json_t *r = wait_result(f, batch, id);
    long long until = json_integer_value(json_object_get(r, "expires_at"));
    json_decref(r);
    assert_true(until > 0);
    while (harness_now_ms() < until + 100) harness_sleep_ms(20);
}

static void verify_stock(fixture *f);

static void test_verify_stock(void **state)
{
    verify_stock(*state);
}

/* The same run with one log entry per chunk (wire/log_entry.h): verify
 * decodes them and finds the same events and the same differences. */
static void test_verify_stock_chunk_log(void **state)
{
    fixture *f = *state;
    f->allocd_conf = "registry_interval_ms = 100;\nlog_format = \"chunk\";";
    verify_stock(f);
    redisReply *r = redisCommand(f->c, "XREVRANGE alloc:{st}:log + - COUNT 1");
    assert_true(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    redisReply *fields = r->element[0]->element[1];
    assert_string_equal(fields->element[0]->str, "format");
    assert_string_equal(fields->element[1]->str, "chunk");
    freeReplyObject(r);
    /* an entry the decoder cannot read is a difference, never skipped */
    itest_cmd(f->c, "XADD alloc:{st}:log * format chunk n 1 events %s", "[[\"grant\"]]");
    char *out = CTL(f, 1, "verify", "st");
    contains(out, "is not [type,user,item,qty,order,req,at,...]");
    free(out);
}

static void verify_stock(fixture *f)
{
    free(CTL(f, 0, "batch", "create", "st", "--kind", "stock", "--from", DATA "stock.json",
             "--per-user", "3", "--hold-ms", "4000"));   /* the confirms below are 3 allocctl
                                                            runs after the buys: room for a loaded machine */
    start_allocd(f);
    char id[80];
    PUSH(f, id, "st", "--user", "a", "--op", "buy", "--item", "sku1", "--qty", "2", "--id", "a1");
    PUSH(f, id, "st", "--user", "c", "--op", "buy", "--item", "sku2", "--qty", "3", "--id", "c1");
    char *oa = order_of(f, "st", "a1"), *oc = order_of(f, "st", "c1");
    PUSH(f, id, "st", "--user", "a", "--op", "confirm", "--order", oa, "--id", "a2");
    PUSH(f, id, "st", "--user", "c", "--op", "confirm", "--order", oc, "--id", "c2");
    PUSH(f, id, "st", "--user", "c", "--op", "cancel", "--order", oc, "--id", "c3");
    PUSH(f, id, "st", "--user", "b", "--op", "buy", "--item", "sku1", "--id", "b1");
    PUSH(f, id, "st", "--user", "d", "--op", "buy", "--item", "sku2", "--id", "d1");
    expect_status(f, "st", "a2", "done");
    expect_status(f, "st", "c3", "done");
    char *ob = order_of(f, "st", "b1");
    sleep_past_expiry(f, "st", "d1");       /* b1 and d1 expire */
    PUSH(f, id, "st", "--user", "b", "--op", "confirm", "--order", ob, "--id", "b2");
    json_t *r = wait_result(f, "st", "b2");
    assert_string_equal(jstr(r, "reason"), "expired");
    json_decref(r);
    PUSH(f, id, "st", "--user", "e", "--op", "buy", "--item", "sku1", "--qty", "3", "--id", "e1");
    free(CTL(f, 0, "push", "st", "--ctl", "--op", "set_capacity", "--item", "sku2",
             "--capacity", "8", "--id", "cap1"));
    expect_status(f, "st", "cap1", "done");
    char *oe = order_of(f, "st", "e1");
    PUSH(f, id, "st", "--user", "e", "--op", "confirm", "--order", oe, "--id", "e2");
    expect_status(f, "st", "e2", "done");
    wait_idle(f, "st");

    char *out = CTL(f, 0, "verify", "st");
    contains(out, "grant 5, release 0, confirm 3, cancel 1, expire 2, capacity 1");
    contains(out, "OK: holders and free match");
    free(out);

    /* hand-made corruption is named */
    itest_cmd(f->c, "HSET alloc:{st}:free sku1 7");
    out = CTL(f, 1, "verify", "st");
    contains(out, "DIFF free[sku1] is 7 but the log gives capacity 10 - held 5 = 5");
    contains(out, "stats.free_units");
    free(out);
    itest_cmd(f->c, "HSET alloc:{st}:free sku1 5");
    free(CTL(f, 0, "verify", "st"));
    char *h = harness_str(f->c, "HGET alloc:{st}:holders a");
    char *bad = strdup(h);
    char *p = strstr(bad, "\"units\":2");
    assert_non_null(p);
    p[8] = '1';
    itest_cmd(f->c, "HSET alloc:{st}:holders a %s", bad);
    out = CTL(f, 1, "verify", "st");
    contains(out, "DIFF holders[a]: the log gives");
    contains(out, "holders[a]: units is 1 but the orders add up to 2");
    free(out);
    itest_cmd(f->c, "HSET alloc:{st}:holders a %s", h);
    itest_cmd(f->c, "HDEL alloc:{st}:holders e");
    out = CTL(f, 1, "verify", "st");
    contains(out, "DIFF holders[e]: the log gives {\"orders\"");
    contains(out, "holders has nothing");
    free(out);
    free(h);
    free(bad);
    free(oa);
    free(ob);
    free(oc);
    free(oe);
}

static void test_verify_rooms(void **state)
{
    fixture *f = *state;
    free(CTL(f, 0, "batch", "create", "rm", "--kind", "room", "--from", DATA "rooms.csv",
             "--max-group", "3", "--groups", "listed"));   /* `group --members` */
    start_allocd(f);
    char id[80];
    PUSH(f, id, "rm", "--user", "s1", "--op", "choose", "--room", "R101", "--id", "q1");
    PUSH(f, id, "rm", "--user", "s2", "--op", "group", "--members", "s2,s3,s4", "--prefs", "R102",
         "--id", "q2");
    PUSH(f, id, "rm", "--user", "s5", "--op", "auto", "--filter", "building=8,gender=F", "--id", "q3");
    PUSH(f, id, "rm", "--user", "s1", "--op", "switch", "--room", "R202", "--id", "q4");
    PUSH(f, id, "rm", "--user", "s3", "--op", "release", "--id", "q5");
    PUSH(f, id, "rm", "--user", "s6", "--op", "choose", "--room", "R202", "--id", "q6");
    PUSH(f, id, "rm", "--user", "s7", "--op", "auto", "--prefs", "R102", "--id", "q7");
    expect_status(f, "rm", "q3", "granted");
    expect_status(f, "rm", "q5", "done");
    expect_status(f, "rm", "q6", "rejected");
    expect_status(f, "rm", "q7", "granted");
    wait_idle(f, "rm");
    log_commands(f, 1);
    char *out = CTL(f, 0, "status", "rm", "--user", "s5");
    log_commands(f, 0);
    contains(out, "s5 holds a bed in R201");
    free(out);
    /* offers to s5 are in the offerers' entries: a room batch's holders are scanned */
    assert_int_equal(logged_calls(f, "HGET", "alloc:{rm}:holders"), 1);
    assert_true(logged_calls(f, "HSCAN", "alloc:{rm}:holders") >= 1);

    out = CTL(f, 0, "verify", "rm");
    contains(out, "grant 7, release 2");
    contains(out, "users holding: 5");
    contains(out, "OK: holders and free match");
    free(out);

    itest_cmd(f->c, "HSET alloc:{rm}:holders s5 {\"item\":\"R101\",\"since\":1,\"req\":\"q3\"}");
    out = CTL(f, 1, "verify", "rm");
    contains(out, "DIFF holders[s5]");
    contains(out, "free[R101] + units held in holders");
    free(out);

    /* a trimmed log cannot prove anything */
    itest_cmd(f->c, "XTRIM alloc:{rm}:log MAXLEN 3");
    out = CTL(f, 1, "verify", "rm");
    contains(out, "the log was trimmed: 3 of ");   /* entries: chunks by default */
    contains(out, " entries are left");
    free(out);
}

/* ---- dead ----------------------------------------------------------------- */

static void test_dead_list_and_requeue(void **state)
{
    fixture *f = *state;
    free(CTL(f, 0, "batch", "create", "dd", "--kind", "stock", "--from", DATA "stock.json"));
    start_allocd(f);
    free(CTL(f, 0, "push", "dd", "--json", "garbage"));
    itest_cmd(f->c, "RPUSH alloc:{dd}:queue %b", "\xff\x00zz", (size_t)4);
    char id[80];
    PUSH(f, id, "dd", "--user", "u1", "--op", "buy", "--item", "sku1", "--id", "m1");
    expect_status(f, "dd", "m1", "granted");
    char *out = CTL(f, 0, "dead", "dd");
    contains(out, "[0] at=");
    contains(out, "raw=\"garbage\"");
    contains(out, "[1] at=");
    contains(out, "raw_base64");
    contains(out, "2 dead entries");
    free(out);

    /* requeued garbage is dead again: the list keeps its length, the
     * daemon's dead counter grows, the binary bytes survive exactly */
    out = CTL(f, 0, "dead", "dd", "--requeue", "--all");
    contains(out, "requeued dead entry 0: ordinal=4");
    contains(out, "ordinal=5");
    free(out);
    for (int i = 0; i < 500 && proc_int(f->c, "HGET alloc:{dd}:stats dead") < 4; i++) harness_sleep_ms(10);
    assert_int_equal(proc_int(f->c, "HGET alloc:{dd}:stats dead"), 4);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{dd}:dead"), 2);
    char *d = harness_str(f->c, "LINDEX alloc:{dd}:dead 1");
    contains(d, "\"raw_base64\":\"/wB6eg==\"");
    free(d);

    /* an entry whose request is fine (as after raising max_request_bytes)
     * gets served when requeued, and leaves the dead list */
    itest_cmd(f->c, "RPUSH alloc:{dd}:dead %s",
        "{\"raw\":\"{\\\"id\\\":\\\"fixed\\\",\\\"user\\\":\\\"u2\\\",\\\"op\\\":\\\"buy\\\",\\\"item\\\":\\\"sku2\\\"}\",\"error\":\"too large\",\"at\":1}");
    out = CTL(f, 0, "dead", "dd", "--requeue", "--index", "2");
    contains(out, "requeued dead entry 2: ordinal=6");
    free(out);
    expect_status(f, "dd", "fixed", "granted");
    assert_int_equal(proc_int(f->c, "LLEN alloc:{dd}:dead"), 2);
    free(CTL(f, 1, "dead", "dd", "--requeue", "--index", "7"));
    out = CTL(f, 0, "dead", "dd", "--limit", "1");
    contains(out, "(1 shown; --limit 0 shows all)");
    free(out);
}

/* ---- top --------------------------------------------------------------------- */

static void test_top_snapshot_without_tty(void **state)
{
    fixture *f = *state;
    free(CTL(f, 0, "batch", "create", "t1", "--kind", "stock", "--from", DATA "stock.json"));
    start_allocd(f);
    char id[80];
    PUSH(f, id, "t1", "--user", "u1", "--op", "buy", "--item", "sku1", "--qty", "1", "--id", "x1");
    expect_status(f, "t1", "x1", "granted");
    for (int i = 0; i < 300 && proc_int(f->c, "HGET alloc:{t1}:stats free_units") != 14; i++)
        harness_sleep_ms(10);
    char *out = CTL(f, 0, "top");
    contains(out, "BATCH");
    contains(out, "t1                   stock open");
    contains(out, "   6% 1/15");
    assert_null(strstr(out, "\x1b["));
    free(out);
}

static char *sh_out(const char *cmdline)
{
    FILE *p = popen(cmdline, "r");
    if (!p) return strdup("");
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, p);
    buf[n] = '\0';
    pclose(p);
    return buf;
}

static char *pane(const char *tm, const char *what)
{
    char q[800];
    snprintf(q, sizeof q, "%s %s 2>/dev/null", tm, what);
    return sh_out(q);
}

/* Polls the pane until it shows needle; returns the screen (caller frees). */
static char *pane_wait(const char *tm, const char *needle)
{
    char *screen = NULL;
    for (int i = 0; i < 100; i++) {
        free(screen);
        screen = pane(tm, "capture-pane -p -t top");
        if (strstr(screen, needle)) break;
        harness_sleep_ms(50);
    }
    return screen;
}

/* Runs top in a tmux pane (inside a shell that reports afterwards), waits
 * for the batch line, sends keys, and checks that top exited 0 with the
 * terminal restored: main screen, cursor shown, canonical mode back. */
static void top_in_tmux(fixture *f, const char *keys)
{
    char tm[600];
    snprintf(f->tmux, sizeof f->tmux, "%s/tmux.sock", f->redis.dir);
    snprintf(tm, sizeof tm, "tmux -S %s", f->tmux);
    /* Starting a tmux server is the environment, not the code under test:
     * on a loaded machine it occasionally dies at birth ("server exited
     * unexpectedly"), so give it three tries. */
    int rc = -1;
    for (int attempt = 0; attempt < 3 && rc != 0; attempt++) {
        if (attempt) { itest_sh("%s kill-server >/dev/null 2>&1", tm); harness_sleep_ms(200); }
        rc = itest_sh("%s -f /dev/null new-session -d -s top -x 200 -y 40 "
                "'trap \"\" INT; %s -c %s top --interval 200; echo top-exit=$?; "
                "stty -a | grep -o -- \"-icanon\\|icanon\"; sleep 30'",
                tm, harness_allocctl_bin(), f->conf);
    }
    assert_int_equal(rc, 0);
    char *screen = pane_wait(tm, "t2                   room  open");
    contains(screen, "allocctl top");
    contains(screen, "t2                   room  open");
    free(screen);
    char *st = pane(tm, "display -p -t top '#{alternate_on} #{cursor_flag}'");
    assert_string_equal(st, "1 0\n");
    free(st);
    assert_int_equal(itest_sh("%s send-keys -t top %s", tm, keys), 0);
    screen = pane_wait(tm, "icanon");
    st = pane(tm, "display -p -t top '#{alternate_on} #{cursor_flag}'");
    itest_sh("%s kill-server >/dev/null 2>&1", tm);
    contains(screen, "top-exit=0");
    if (strstr(screen, "-icanon")) fail_msg("terminal left in raw mode after %s:\n%s", keys, screen);
    assert_string_equal(st, "0 1\n");
    free(screen);
    free(st);
}

static void test_top_in_tmux(void **state)
{
    fixture *f = *state;
    if (itest_sh("command -v tmux >/dev/null 2>&1") != 0) {
        print_message("SKIPPED: tmux is not installed (apt-get install tmux); top's live mode is untested\n");
        skip();
    }
    free(CTL(f, 0, "batch", "create", "t2", "--kind", "room", "--from", DATA "rooms.json"));
    start_allocd(f);
    top_in_tmux(f, "q");
    top_in_tmux(f, "C-c");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_from_csv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_from_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_files_name_the_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_ordinal_status_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exit_codes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_stock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_stock_chunk_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_rooms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_list_and_requeue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_top_snapshot_without_tty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_top_in_tmux, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
