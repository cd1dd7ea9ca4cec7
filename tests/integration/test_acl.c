/* test_acl.c -- the lockdown, enforced: a real redis-server whose users are
 * the roles `allocctl acl` prints (loaded as an aclfile and as ACL SETUSER
 * lines), with the default user off, and every party doing its part under
 * its own login.
 *
 * - the table tests/data/acl/dryrun.txt (ACL DRYRUN: what each role may and
 *   may not do; a new command is a line there);
 * - every command found in daemon/ (tests/data/acl/sent-commands.sh) is
 *   allowed to the daemon role, every one in tools/allocctl/ to the
 *   operator;
 * - a producer's forbidden writes are refused for real and change nothing;
 * - two allocd under the daemon role serve a stock round (reservations,
 *   confirm, cancel, expiry) and a room round (choose, auto, group, switch,
 *   release), the owner is killed and the other takes over by the lease;
 *   the operator creates, watches, verifies, handles dead requests, closes
 *   and removes the batches with allocctl; producers push and front ends
 *   read with allocctl and examples/redis-cli (test_examples runs every
 *   example under these roles);
 * - the same on a two-node Redis Cluster; the sentinel role on a Sentinel;
 * - the password never shows in allocd's logs or --check-config output,
 *   also when it is wrong, when the URL is bad, and across a reconnect.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define ADMIN_PW "admin-Pw-7c1e"

static const char *const USERS[] = { "alloc-producer", "alloc-frontend", "alloc-operator",
                                     "alloc-daemon", "web", "alloc-sentinel" };
#define NUSERS (sizeof USERS / sizeof *USERS)

typedef struct fixture {
    harness_redis redis;
    char dir[256];              /* users.acl, pw/, configs */
    char pw[NUSERS][64];        /* each user's password */
    redisContext *admin;
    harness_allocd d[2];
} fixture;

/* ---------------------------------------------------------------- helpers */

static int write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    fclose(f);
    return chmod(path, mode);
}

/* Runs cmd through sh; returns its stdout+stderr (malloc'd) and exit status. */
static char *run(int *status, const char *fmt, ...)
{
    char inner[8192], cmd[8300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(inner, sizeof inner, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "{ %s\n} 2>&1", inner);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, len = 0, n;
    char *buf = calloc(1, cap);
    while (p && buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 1024) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) break;
            buf = nb;
        }
    }
    if (buf) buf[len] = 0;
    int st = p ? pclose(p) : -1;
    *status = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

static const char *pw_of(const fixture *f, const char *user)
{
    for (size_t i = 0; i < NUSERS; i++)
        if (!strcmp(USERS[i], user)) return f->pw[i];
    return ADMIN_PW;
}

static redisContext *connect_as(const fixture *f, const char *user)
{
    redisContext *c = harness_redis_connect(&f->redis);
    if (!c) return NULL;
    redisReply *r = redisCommand(c, "AUTH %s %s", user, pw_of(f, user));
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (!ok) { redisFree(c); return NULL; }
    return c;
}

/* An allocctl config for one user: redis, prefix, user, password file. */
static void conf_for(const fixture *f, const char *user, char *path, size_t len)
{
    snprintf(path, len, "%s/%s.conf", f->dir, user);
    char text[1024];
    snprintf(text, sizeof text, "redis = \"%s\";\nprefix = \"alloc\";\nredis_user = \"%s\";\n"
             "redis_password_file = \"%s/pw/%s\";\nregistry_interval_ms = 100;\n",
             f->redis.url, user, f->dir, user);
    write_file(path, text, 0640);
}

/* allocctl under a role; returns its output, the exit status in *st. */
static char *ctl_as(const fixture *f, const char *user, int *st, const char *args)
{
    char conf[400];
    conf_for(f, user, conf, sizeof conf);
    return run(st, "%s/allocctl -c %s %s", harness_build_dir(), conf, args);
}

/* Like ctl_as, failing the test unless the exit status is want. */
static char *ctl_ok(const fixture *f, const char *user, int want, const char *args)
{
    int st;
    char *out = ctl_as(f, user, &st, args);
    if (st != want) fprintf(stderr, "allocctl %s (as %s): exit %d, expected %d:\n%s\n",
                            args, user, st, want, out);
    assert_int_equal(st, want);
    return out;
}

/* allocctl wait for a result as the front end; the raw JSON. */
static char *result_of(const fixture *f, const char *batch, const char *id)
{
    char args[256];
    snprintf(args, sizeof args, "wait %s --id %s --timeout 15 --raw", batch, id);
    return ctl_ok(f, "alloc-frontend", 0, args);
}

static void expect_result(const fixture *f, const char *batch, const char *id, const char *want,
                          char *order, size_t olen)
{
    char *out = result_of(f, batch, id);
    if (!strstr(out, want)) fprintf(stderr, "%s %s: %s (wanted %s)\n", batch, id, out, want);
    assert_non_null(strstr(out, want));
    const char *o = order ? strstr(out, "\"order\":\"") : NULL;
    if (o) snprintf(order, olen, "%.*s", (int)strcspn(o + 9, "\""), o + 9);
    free(out);
}

/* A producer's push through allocctl (the position transaction). */
static void push(const fixture *f, const char *batch, const char *args)
{
    char line[1200];
    snprintf(line, sizeof line, "push %s %s", batch, args);
    free(ctl_ok(f, "alloc-producer", 0, line));
}

static int file_has(const char *path, const char *needle)
{
    int st;
    char *out = run(&st, "cat '%s'", path);
    int found = out && strstr(out, needle) != NULL;
    free(out);
    return found;
}

/* No password of any user in the file. */
static void assert_no_password(const fixture *f, const char *path)
{
    for (size_t i = 0; i < NUSERS; i++) {
        if (file_has(path, f->pw[i])) fprintf(stderr, "%s shows the password of %s\n", path, USERS[i]);
        assert_false(file_has(path, f->pw[i]));
    }
}

static int start_daemon(fixture *f, harness_allocd *d, const char *instance, const char *pwfile)
{
    char extra[1600];
    snprintf(extra, sizeof extra,
             "instance = \"%s\";\nredis_user = \"alloc-daemon\";\nredis_password_file = \"%s\";\n"
             "registry_interval_ms = 100;\nlease_ttl_ms = 1000;\n", instance, pwfile);
    return harness_allocd_start(d, &f->redis, extra);
}

/* ---------------------------------------------------------------- fixture */

/* The roles as an aclfile (with an admin added, default off) and, for the
 * examples' user, as ACL SETUSER lines piped into redis-cli. */
static int load_acl(fixture *f)
{
    int st;
    char *acl = run(&st, "%s/allocctl --prefix alloc acl --format aclfile --password-dir %s/pw "
                    "--instance acl-a --instance acl-b --instance acl-c 2>/dev/null",
                    harness_build_dir(), f->dir);
    if (st != 0 || !strstr(acl, "user default reset off")) {
        fprintf(stderr, "allocctl acl failed (%d): %s\n", st, acl);
        free(acl);
        return -1;
    }
    char path[400], *text = malloc(strlen(acl) + 200);
    sprintf(text, "%suser admin on >%s ~* &* +@all\n", acl, ADMIN_PW);
    free(acl);
    snprintf(path, sizeof path, "%s/users.acl", f->dir);
    write_file(path, text, 0600);
    free(text);
    redisContext *c = harness_redis_connect(&f->redis);
    redisReply *r = c ? redisCommand(c, "ACL LOAD") : NULL;
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok) fprintf(stderr, "ACL LOAD: %s\n", r ? r->str : "no reply");
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    if (!ok || !(f->admin = connect_as(f, "admin"))) return -1;
    char *out = run(&st, "%s/allocctl --prefix alloc acl --user web=producer+frontend "
                    "--password-dir %s/pw 2>/dev/null | REDISCLI_AUTH=%s redis-cli --user admin -s %s",
                    harness_build_dir(), f->dir, ADMIN_PW, f->redis.sock);
    ok = st == 0 && !strcmp(out, "OK\n");
    if (!ok) fprintf(stderr, "ACL SETUSER web: %s\n", out);
    free(out);
    return ok ? 0 : -1;
}

static int group_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    char path[400];
    if (!f || proc_temp_dir(f->dir, sizeof f->dir, "allocd-acl") < 0) return -1;
    snprintf(path, sizeof path, "%s/pw", f->dir);
    if (mkdir(path, 0700) < 0) return -1;
    for (size_t i = 0; i < NUSERS; i++) {
        snprintf(f->pw[i], sizeof f->pw[i], "Pw-%s-%08lx", USERS[i], (unsigned long)random());
        snprintf(path, sizeof path, "%s/pw/%s", f->dir, USERS[i]);
        char line[80];
        snprintf(line, sizeof line, "%s\n", f->pw[i]);
        if (write_file(path, line, 0600) < 0) return -1;
    }
    /* open until the real file is loaded: the harness waits with PING */
    snprintf(path, sizeof path, "%s/users.acl", f->dir);
    write_file(path, "user default on nopass ~* &* +@all\n", 0600);
    char extra[600];
    snprintf(extra, sizeof extra, "--aclfile %s", path);
    if (harness_redis_start(&f->redis, extra) < 0 || load_acl(f) < 0) return -1;
    snprintf(path, sizeof path, "%s/pw/alloc-daemon", f->dir);
    if (start_daemon(f, &f->d[0], "acl-a", path) < 0) return -1;
    return start_daemon(f, &f->d[1], "acl-b", path);
}

static int group_teardown(void **state)
{
    fixture *f = *state;
    if (!f) return 0;
    for (int i = 0; i < 2; i++) harness_allocd_stop(&f->d[i]);
    if (f->admin) redisFree(f->admin);
    harness_redis_stop(&f->redis);
    proc_remove_dir(f->dir);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------ tests */

static void test_default_user_is_off(void **state)
{
    fixture *f = *state;
    redisContext *c = harness_redis_connect(&f->redis);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "GET x");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(r->str, "NOAUTH"));
    freeReplyObject(r);
    r = redisCommand(c, "AUTH default anything");
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    redisFree(c);
}

/* tests/data/acl/dryrun.txt, line by line, through ACL DRYRUN. */
static void test_dryrun_table(void **state)
{
    fixture *f = *state;
    FILE *t = fopen("tests/data/acl/dryrun.txt", "r");
    assert_non_null(t);
    char line[1024];
    int lineno = 0, checked = 0, failed = 0;
    while (fgets(line, sizeof line, t)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        const char *argv[40];
        char user[64];
        int n = 0;
        char *save = NULL, *role = strtok_r(line, " ", &save), *verdict = strtok_r(NULL, " ", &save);
        snprintf(user, sizeof user, "alloc-%s", role);
        argv[n++] = "ACL";
        argv[n++] = "DRYRUN";
        argv[n++] = user;
        for (char *w; n < 40 && (w = strtok_r(NULL, " ", &save));) argv[n++] = w;
        redisReply *r = redisCommandArgv(f->admin, n, argv, NULL);
        assert_non_null(r);
        int allowed = r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK");
        int denied = r->type == REDIS_REPLY_STRING && strstr(r->str, "no permissions");
        int want_allow = !strcmp(verdict, "allow");
        if (want_allow ? !allowed : !denied) {
            fprintf(stderr, "dryrun.txt:%d: %s %s: %s\n", lineno, user, verdict,
                    r->str ? r->str : "(no text)");
            failed++;
        }
        freeReplyObject(r);
        checked++;
    }
    fclose(t);
    assert_true(checked > 80);
    assert_int_equal(failed, 0);
}

/* Every command allocd's sources send (and its scripts run) is in the
 * daemon role, and every command allocctl sends in the operator role:
 * tests/data/acl/sent-commands.sh finds them. Returns how many are missing;
 * *commands counts the real commands found. */
static int role_misses(fixture *f, const char *dir, const char *role, int *commands)
{
    int st, missing = 0;
    char *rules = run(&st, "%s/allocctl --prefix alloc acl --user x=%s 2>/dev/null", harness_build_dir(), role);
    assert_int_equal(st, 0);
    char *words = run(&st, "sh tests/data/acl/sent-commands.sh %s", dir);
    assert_int_equal(st, 0);
    char *save = NULL;
    *commands = 0;
    for (char *w = strtok_r(words, "\n", &save); w; w = strtok_r(NULL, "\n", &save)) {
        redisReply *r = redisCommand(f->admin, "COMMAND INFO %s", w);
        int is_cmd = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
                     r->element[0]->type == REDIS_REPLY_ARRAY;
        if (r) freeReplyObject(r);
        if (!is_cmd || !strcmp(w, "auth")) continue;   /* AUTH is never subject to ACL */
        (*commands)++;
        /* "+name" as a whole rule: after a space or "(", before a space,
         * ")" or the closing quote; a container word ("client") when
         * any of its subcommands is granted */
        char plus[80];
        int n = snprintf(plus, sizeof plus, "+%s", w), found = 0;
        for (const char *p = rules; !found && (p = strstr(p, plus)); p++)
            found = strchr(" (", p[-1]) && (p[n] == '|' ? !strchr(w, '|') : strchr(" )\"", p[n]) != NULL);
        if (!found) { fprintf(stderr, "the %s role lacks %s (sent by %s/)\n", role, w, dir); missing++; }
    }
    free(words);
    free(rules);
    return missing;
}

static void test_roles_cover_the_sources(void **state)
{
    fixture *f = *state;
    int n;
    assert_int_equal(role_misses(f, "daemon", "daemon", &n), 0);
    assert_true(n >= 25);
    assert_int_equal(role_misses(f, "tools/allocctl", "operator", &n), 0);
    assert_true(n >= 20);
}

/* Refused for real, and nothing changed. */
static void test_producer_refused(void **state)
{
    fixture *f = *state;
    redisContext *p = connect_as(f, "alloc-producer");
    assert_non_null(p);
    redisReply *r = redisCommand(f->admin, "HSET alloc2:{x}:stats dequeued 5");
    freeReplyObject(r);
    static const char *const refused[] = {
        "HSET alloc:{x}:results r1 {\"status\":\"granted\"}", "HSET alloc:{x}:free sku1 100",
        "RPUSH alloc2:{x}:queue {}", "HGET alloc2:{x}:stats dequeued", "EVAL return 1 0",
        "FLUSHALL", "CONFIG GET requirepass", "DEL alloc:{x}:queue", "HSET alloc:{x}:meta kind stock",
        "SADD alloc:batches x", "KEYS *",
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        r = redisCommand(p, refused[i]);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "NOPERM", 6))
            fprintf(stderr, "producer was not refused: %s\n", refused[i]);
        assert_int_equal(r->type, REDIS_REPLY_ERROR);
        assert_memory_equal(r->str, "NOPERM", 6);
        freeReplyObject(r);
    }
    /* the position transaction works */
    redisAppendCommand(p, "MULTI");
    redisAppendCommand(p, "RPUSH alloc:{x}:queue {}");
    redisAppendCommand(p, "HGET alloc:{x}:stats dequeued");
    redisAppendCommand(p, "EXEC");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(redisGetReply(p, (void **)&r), REDIS_OK);
        if (i == 3) {
            assert_int_equal(r->type, REDIS_REPLY_ARRAY);
            assert_int_equal(r->elements, 2);
            assert_int_equal(r->element[0]->integer, 1);
        }
        freeReplyObject(r);
    }
    redisFree(p);
    assert_int_equal(proc_int(f->admin, "EXISTS alloc:{x}:results"), 0);
    assert_int_equal(proc_int(f->admin, "EXISTS alloc:{x}:free"), 0);
    assert_int_equal(proc_int(f->admin, "EXISTS alloc2:{x}:queue"), 0);
    assert_int_equal(proc_int(f->admin, "EXISTS alloc:{x}:meta"), 0);
    assert_int_equal(proc_int(f->admin, "SISMEMBER alloc:batches x"), 0);
    assert_int_equal(proc_int(f->admin, "LLEN alloc:{x}:queue"), 1);
    r = redisCommand(f->admin, "DEL alloc:{x}:queue alloc2:{x}:stats");
    freeReplyObject(r);
}

static void make_items(const fixture *f)
{
    char path[400];
    snprintf(path, sizeof path, "%s/items.csv", f->dir);
    write_file(path, "id,capacity\nsku1,3\nsku2,1\n", 0644);
    snprintf(path, sizeof path, "%s/rooms.csv", f->dir);
    write_file(path, "id,capacity,building,floor\nR1,2,7,1\nR2,3,8,2\nR3,1,8,3\n", 0644);
}

/* Which daemon serves the batch (stats.owner), as an index of f->d. */
static int owner_of(fixture *f, const char *batch)
{
    char *o = NULL;
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:stats", batch);
    o = harness_wait_hget(f->admin, key, "owner", 10000);
    int i = o && !strcmp(o, "acl-b") ? 1 : 0;
    free(o);
    return i;
}

/* The operator defines three batches. */
static void create_batches(fixture *f)
{
    char args[1024];
    make_items(f);
    snprintf(args, sizeof args, "batch create acl-shop --kind stock --from %s/items.csv "
             "--per-user 2 --hold-ms 60000", f->dir);
    free(ctl_ok(f, "alloc-operator", 0, args));
    snprintf(args, sizeof args, "batch create acl-fast --kind stock --from %s/items.csv "
             "--per-user 5 --hold-ms 300", f->dir);
    free(ctl_ok(f, "alloc-operator", 0, args));
    snprintf(args, sizeof args, "batch create acl-dorm --kind room --from %s/rooms.csv "
             "--max-group 3 --groups listed", f->dir);   /* `group --members` (9.2) */
    free(ctl_ok(f, "alloc-operator", 0, args));
}

/* Reservations: grant, sold out, confirm, cancel, expiry; one dead request. */
static void stock_round(fixture *f)
{
    char args[1024], order[64], order2[64];
    push(f, "acl-shop", "--user u1 --op buy --item sku1 --qty 2 --id s1");
    expect_result(f, "acl-shop", "s1", "\"status\":\"granted\"", order, sizeof order);
    push(f, "acl-shop", "--user u2 --op buy --item sku1 --qty 2 --id s2");
    expect_result(f, "acl-shop", "s2", "\"reason\":\"sold_out\"", NULL, 0);
    snprintf(args, sizeof args, "--user u1 --op confirm --order %s --id s3", order);
    push(f, "acl-shop", args);
    expect_result(f, "acl-shop", "s3", "\"status\":\"done\"", NULL, 0);
    push(f, "acl-shop", "--user u2 --op buy --item sku2 --id s4");
    expect_result(f, "acl-shop", "s4", "\"status\":\"granted\"", order2, sizeof order2);
    snprintf(args, sizeof args, "--user u2 --op cancel --order %s --id s5", order2);
    push(f, "acl-shop", args);
    expect_result(f, "acl-shop", "s5", "\"status\":\"done\"", NULL, 0);
    push(f, "acl-fast", "--user u1 --op buy --item sku1 --id f1");
    expect_result(f, "acl-fast", "f1", "\"status\":\"granted\"", order, sizeof order);
    harness_sleep_ms(600);
    snprintf(args, sizeof args, "--user u1 --op confirm --order %s --id f2", order);
    push(f, "acl-fast", args);
    expect_result(f, "acl-fast", "f2", "\"reason\":\"expired\"", NULL, 0);
    push(f, "acl-shop", "--json 'not json at all'");
}

/* Rooms; the owner of the batch dies half way and the other instance takes
 * it over once the lease runs out. Returns the index of the dead one. */
static int room_round_with_takeover(fixture *f)
{
    push(f, "acl-dorm", "--user s1 --op choose --room R3 --id d1");
    expect_result(f, "acl-dorm", "d1", "\"status\":\"granted\"", NULL, 0);
    push(f, "acl-dorm", "--user s2 --op auto --prefs R3 --filter building=7 --id d2");
    expect_result(f, "acl-dorm", "d2", "\"item\":\"R1\"", NULL, 0);
    int owner = owner_of(f, "acl-dorm");
    harness_allocd_kill(&f->d[owner]);
    push(f, "acl-dorm", "--user s4 --op group --members s4,s5,s6 --prefs R2 --id d3");
    expect_result(f, "acl-dorm", "d3", "\"item\":\"R2\"", NULL, 0);
    push(f, "acl-dorm", "--user s1 --op switch --room R1 --id d4");
    expect_result(f, "acl-dorm", "d4", "\"status\":\"granted\"", NULL, 0);
    push(f, "acl-dorm", "--user s1 --op release --id d5");
    expect_result(f, "acl-dorm", "d5", "\"status\":\"done\"", NULL, 0);
    assert_int_equal(owner_of(f, "acl-dorm"), 1 - owner);
    return owner;
}

/* The front end's other reads and the operator's work: list, status, top,
 * an admin command, verify, dead list and requeue, close, rm. */
static void frontend_and_operator(fixture *f)
{
    char args[256];
    free(ctl_ok(f, "alloc-frontend", 0, "status acl-dorm --user s2"));
    free(ctl_ok(f, "alloc-frontend", 0, "status acl-shop --id s1 --ordinal 1"));
    /* the operator's */
    char *out = ctl_ok(f, "alloc-operator", 0, "batch list");
    assert_non_null(strstr(out, "acl-dorm"));
    free(out);
    free(ctl_ok(f, "alloc-operator", 0, "status acl-shop"));
    free(ctl_ok(f, "alloc-operator", 0, "top"));
    free(ctl_ok(f, "alloc-operator", 0, "push acl-shop --ctl --op set_capacity --item sku2 --capacity 4 --id c1"));
    expect_result(f, "acl-shop", "c1", "\"status\":\"done\"", NULL, 0);
    for (const char *const *b = (const char *const[]){ "acl-shop", "acl-fast", "acl-dorm", NULL }; *b; b++) {
        snprintf(args, sizeof args, "verify %s", *b);
        free(ctl_ok(f, "alloc-operator", 0, args));
    }
    char key[] = "alloc:{acl-shop}:stats";
    for (int i = 0; i < 200 && proc_int(f->admin, "HGET %s dead", key) < 1; i++) harness_sleep_ms(50);
    out = ctl_ok(f, "alloc-operator", 0, "dead acl-shop");
    assert_non_null(strstr(out, "1 dead entry"));
    free(out);
    out = ctl_ok(f, "alloc-operator", 0, "dead acl-shop --requeue --index 0");
    assert_non_null(strstr(out, "requeued dead entry 0"));
    free(out);
    free(ctl_ok(f, "alloc-operator", 0, "push acl-fast --ctl --op close --id c2"));
    expect_result(f, "acl-fast", "c2", "\"status\":\"done\"", NULL, 0);
    free(ctl_ok(f, "alloc-operator", 0, "batch rm acl-fast"));
}

/* Stock and room rounds, operator and producers and front ends through
 * allocctl, two daemons, the owner killed half way. */
static void test_rounds_under_roles(void **state)
{
    fixture *f = *state;
    char args[512];
    create_batches(f);
    stock_round(f);
    int owner = room_round_with_takeover(f);
    frontend_and_operator(f);
    /* a producer cannot do the operator's part */
    int st;
    free(ctl_as(f, "alloc-producer", &st, "push acl-shop --ctl --op close --id x1"));
    assert_int_equal(st, 3);
    free(ctl_as(f, "alloc-producer", &st, "batch rm acl-shop"));
    assert_int_equal(st, 3);

    /* nothing the daemons sent was refused */
    for (int i = 0; i < 2; i++) {
        assert_false(file_has(f->d[i].log, "NOPERM"));
        assert_false(file_has(f->d[i].log, "no permissions"));
    }
    /* the survivor again, for the later tests */
    snprintf(args, sizeof args, "%s/pw/alloc-daemon", f->dir);
    assert_int_equal(start_daemon(f, &f->d[owner], owner ? "acl-b" : "acl-a", args), 0);
}

/* examples/redis-cli under the web user (producer + frontend) and
 * admin.sh under the operator; a producer cannot run admin.sh. */
static void test_examples_under_roles(void **state)
{
    fixture *f = *state;
    char args[600];
    snprintf(args, sizeof args, "batch create ex-shop --kind stock --from %s/items.csv --per-user 2", f->dir);
    free(ctl_ok(f, "alloc-operator", 0, args));
    char env[600];
    snprintf(env, sizeof env, "ALLOCD_REDIS=%s ALLOCD_PREFIX=alloc ALLOCD_REDIS_USER=web "
             "ALLOCD_REDIS_PASSWORD=%s", f->redis.url, f->pw[4]);
    int st;
    char *out = run(&st, "%s sh examples/redis-cli/request.sh ex-shop "
                    "'{\"id\":\"e1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\"}' 15", env);
    if (st || !strstr(out, "status=granted")) fprintf(stderr, "request.sh: %s\n", out);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "status=granted"));
    free(out);
    out = run(&st, "ALLOCD_REDIS=%s ALLOCD_REDIS_USER=alloc-operator ALLOCD_REDIS_PASSWORD=%s "
              "sh examples/redis-cli/admin.sh ex-shop pause", f->redis.url, f->pw[2]);
    if (st || !strstr(out, "status=done")) fprintf(stderr, "admin.sh: %s\n", out);
    assert_int_equal(st, 0);
    free(out);
    out = run(&st, "ALLOCD_REDIS=%s ALLOCD_REDIS_USER=alloc-operator ALLOCD_REDIS_PASSWORD=%s "
              "sh examples/redis-cli/admin.sh ex-shop resume", f->redis.url, f->pw[2]);
    assert_int_equal(st, 0);
    free(out);
    /* the producer's role alone cannot run admin.sh */
    out = run(&st, "ALLOCD_REDIS=%s ALLOCD_REDIS_USER=alloc-producer ALLOCD_REDIS_PASSWORD=%s "
              "sh examples/redis-cli/admin.sh ex-shop close", f->redis.url, f->pw[0]);
    assert_int_not_equal(st, 0);
    free(out);
    /* every example, in every language, runs under these roles in
     * test_examples */
}

/* --check-config: the file, the environment, a bad URL, both sources, a
 * systemd credential, a missing file. */
static void check_config_outputs(fixture *f)
{
    const char *pw = f->pw[3];
    char conf[400], text[1200];
    int st;
    snprintf(conf, sizeof conf, "%s/check.conf", f->dir);
    snprintf(text, sizeof text, "redis = \"%s\";\nredis_user = \"alloc-daemon\";\n"
             "redis_password_file = \"%s/pw/alloc-daemon\";\n", f->redis.url, f->dir);
    write_file(conf, text, 0640);
    char *out = run(&st, "%s/allocd -c %s --check-config", harness_build_dir(), conf);
    assert_int_equal(st, 0);
    assert_null(strstr(out, pw));
    free(out);
    /* environment: wins over the file, and is not shown either */
    out = run(&st, "ALLOCD_REDIS_PASSWORD=%s %s/allocd -c %s --check-config", pw, harness_build_dir(), conf);
    assert_int_equal(st, 0);
    assert_null(strstr(out, pw));
    free(out);
    /* a bad URL with a password in it */
    out = run(&st, "%s/allocd --redis 'redis://alloc-daemon:%s@localhost:99999' --check-config",
              harness_build_dir(), pw);
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "***@localhost:99999"));
    assert_null(strstr(out, pw));
    free(out);
    /* a URL password and a file: which one? refused */
    snprintf(text, sizeof text, "redis = \"redis://u:%s@127.0.0.1:1\";\n"
             "redis_password_file = \"%s/pw/alloc-daemon\";\n", pw, f->dir);
    write_file(conf, text, 0640);
    out = run(&st, "%s/allocd -c %s --check-config", harness_build_dir(), conf);
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "keep only the file"));
    assert_null(strstr(out, pw));
    free(out);
    /* a relative file is a systemd credential */
    snprintf(text, sizeof text, "redis = \"%s\";\nredis_password_file = \"alloc-daemon\";\n", f->redis.url);
    write_file(conf, text, 0640);
    out = run(&st, "env -u CREDENTIALS_DIRECTORY %s/allocd -c %s --check-config", harness_build_dir(), conf);
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "CREDENTIALS_DIRECTORY"));
    free(out);
    out = run(&st, "CREDENTIALS_DIRECTORY=%s/pw %s/allocd -c %s --check-config", f->dir, harness_build_dir(), conf);
    assert_int_equal(st, 0);
    free(out);
    /* a missing file is reported at its line */
    snprintf(text, sizeof text, "redis = \"%s\";\n\nredis_password_file = \"%s/nope\";\n", f->redis.url, f->dir);
    write_file(conf, text, 0640);
    out = run(&st, "%s/allocd -c %s --check-config", harness_build_dir(), conf);
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "check.conf:3: "));
    free(out);
}

/* A wrong password (refused, said so, not shown); a reconnect (every
 * daemon connection killed). */
static void daemon_error_paths(fixture *f)
{
    const char *pw = f->pw[3];
    char path[400], cred[400];
    /* a wrong password */
    snprintf(path, sizeof path, "%s/pw/wrong", f->dir);
    snprintf(cred, sizeof cred, "Wrong-%s\n", pw);
    write_file(path, cred, 0600);
    harness_allocd bad;
    assert_int_equal(start_daemon(f, &bad, "acl-c", path), 0);
    for (int i = 0; i < 100 && !file_has(bad.log, "WRONGPASS"); i++) harness_sleep_ms(50);
    assert_true(file_has(bad.log, "WRONGPASS"));
    harness_allocd_stop(&bad);
    cred[strlen(cred) - 1] = 0;
    assert_false(file_has(bad.log, cred));
    assert_no_password(f, bad.log);

    /* a reconnect: every daemon connection killed */
    redisReply *r = redisCommand(f->admin, "CLIENT KILL USER alloc-daemon");
    assert_non_null(r);
    assert_true(r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    freeReplyObject(r);
    int reconnected = 0;
    for (int i = 0; i < 100 && !reconnected; i++) {
        r = redisCommand(f->admin, "CLIENT LIST TYPE normal");
        reconnected = r && r->str && strstr(r->str, "user=alloc-daemon") != NULL;
        if (r) freeReplyObject(r);
        if (!reconnected) harness_sleep_ms(50);
    }
    assert_true(reconnected);
    push(f, "acl-shop", "--user u9 --op buy --item sku2 --id after-kill");
    expect_result(f, "acl-shop", "after-kill", "\"status\":\"granted\"", NULL, 0);
    for (int i = 0; i < 2; i++) assert_no_password(f, f->d[i].log);
}

/* --check-config, a bad URL, a wrong password, a reconnect: never the
 * password. */
static void test_password_never_shown(void **state)
{
    fixture *f = *state;
    int st;
    check_config_outputs(f);
    daemon_error_paths(f);
    /* allocctl takes the password from the environment too */
    char *out = run(&st, "ALLOCD_REDIS_PASSWORD=%s %s/allocctl --redis %s --redis-user alloc-frontend "
              "status acl-shop --id s1", f->pw[1], harness_build_dir(), f->redis.url);
    assert_int_equal(st, 0);
    free(out);
}

/* ------------------------------------------------------------ cluster */

/* Two nodes, half of the slots each, every node with the roles applied
 * (--cluster, as ACL SETUSER lines) and the default user off; allocd under
 * the daemon role with cluster = "yes" serves batches on both nodes, and a
 * producer and a front end talk to the node of each batch's slot. */
typedef struct mini_cluster {
    harness_redis node[2];
    int port[2];
    redisContext *admin[2];
} mini_cluster;

static redisContext *tcp_as(const fixture *f, int port, const char *user)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) { if (c) redisFree(c); return NULL; }
    redisReply *r = redisCommand(c, "AUTH %s %s", user, pw_of(f, user));
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (!ok) { redisFree(c); return NULL; }
    return c;
}

static int mini_cluster_start(const fixture *f, mini_cluster *m)
{
    int p = 21000 + (int)(getpid() % 1000) * 2;
    for (int i = 0; i < 2; i++) {
        m->port[i] = p = harness_cluster_port(p + 1);
        char extra[256];
        snprintf(extra, sizeof extra, "--port %d --bind 127.0.0.1 --cluster-enabled yes "
                 "--cluster-config-file nodes.conf --appendonly no", p);
        if (harness_redis_start(&m->node[i], extra) < 0) return -1;
        redisContext *c = redisConnect("127.0.0.1", p);
        if (!c || c->err) return -1;
        redisReply *r = redisCommand(c, "CLUSTER ADDSLOTSRANGE %d %d", i ? 8192 : 0, i ? 16383 : 8191);
        if (r) freeReplyObject(r);
        r = redisCommand(c, "ACL SETUSER admin on >%s ~* &* +@all", ADMIN_PW);
        if (r) freeReplyObject(r);
        redisFree(c);
        int st;
        char *out = run(&st, "%s/allocctl --prefix alloc acl --cluster --password-dir %s/pw "
                        "--instance acl-a --instance acl-b --instance acl-c 2>/dev/null | "
                        "redis-cli -p %d; REDISCLI_AUTH=%s redis-cli --user admin -p %d "
                        "ACL SETUSER default reset off", harness_build_dir(), f->dir, p, ADMIN_PW, p);
        free(out);
        if (st != 0 || !(m->admin[i] = tcp_as(f, p, "admin"))) return -1;
    }
    redisReply *r = redisCommand(m->admin[0], "CLUSTER MEET 127.0.0.1 %d", m->port[1]);
    if (r) freeReplyObject(r);
    for (int waited = 0; waited < 10000; waited += 50) {
        int ok = 0;
        for (int i = 0; i < 2; i++) {
            r = redisCommand(m->admin[i], "CLUSTER INFO");
            ok += r && r->str && strstr(r->str, "cluster_state:ok") && strstr(r->str, "cluster_known_nodes:2");
            if (r) freeReplyObject(r);
        }
        if (ok == 2) return 0;
        harness_sleep_ms(50);
    }
    return -1;
}

static void mini_cluster_stop(mini_cluster *m)
{
    for (int i = 0; i < 2; i++) {
        if (m->admin[i]) redisFree(m->admin[i]);
        harness_redis_stop(&m->node[i]);
    }
}

/* Two stock batches, one on each node (and P:batches on one of them):
 * their names into batch[]. */
static void create_batch_per_node(mini_cluster *m, const char *batch[2])
{
    static const char *const names[] = { "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8" };
    for (size_t i = 0; i < 8; i++) {
        long long slot = proc_int(m->admin[0], "CLUSTER KEYSLOT alloc:{%s}:queue", names[i]);
        int node = slot >= 8192;
        if (!batch[node]) batch[node] = names[i];
    }
    assert_non_null(batch[0]);
    assert_non_null(batch[1]);
    long long bslot = proc_int(m->admin[0], "CLUSTER KEYSLOT alloc:batches");
    redisContext *bnode = m->admin[bslot >= 8192];
    for (int i = 0; i < 2; i++) {
        redisReply *r = redisCommand(m->admin[i], "HSET alloc:{%s}:meta kind stock", batch[i]);
        freeReplyObject(r);
        r = redisCommand(m->admin[i], "HSET alloc:{%s}:capacity sku1 2", batch[i]);
        freeReplyObject(r);
        r = redisCommand(bnode, "SADD alloc:batches %s", batch[i]);
        freeReplyObject(r);
    }
}

/* On node i, as the producer: the topology and the position transaction
 * are allowed, writing a result is not (NOPERM); as the front end, the
 * result allocd wrote can be read. */
static void produce_and_read_on(fixture *f, mini_cluster *m, harness_allocd *d, const char *batch, int i)
{
    redisContext *p = tcp_as(f, m->port[i], "alloc-producer");
    redisContext *fe = tcp_as(f, m->port[i], "alloc-frontend");
    assert_non_null(p);
    assert_non_null(fe);
    redisReply *r = redisCommand(p, "CLUSTER SLOTS");       /* --cluster: topology */
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    redisAppendCommand(p, "MULTI");
    redisAppendCommand(p, "RPUSH alloc:{%s}:queue {\"id\":\"k%d\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\"}",
                       batch, i);
    redisAppendCommand(p, "HGET alloc:{%s}:stats dequeued", batch);
    redisAppendCommand(p, "EXEC");
    for (int k = 0; k < 4; k++) {
        assert_int_equal(redisGetReply(p, (void **)&r), REDIS_OK);
        if (k == 3) assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        freeReplyObject(r);
    }
    r = redisCommand(p, "HSET alloc:{%s}:results k%d x", batch, i);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_memory_equal(r->str, "NOPERM", 6);
    freeReplyObject(r);
    char key[64], id[16];
    snprintf(key, sizeof key, "alloc:{%s}:results", batch);
    snprintf(id, sizeof id, "k%d", i);
    char *res = harness_wait_hget(fe, key, id, 10000);
    if (!res) harness_allocd_dump_log(d);
    assert_non_null(res);
    assert_non_null(strstr(res, "\"status\":\"granted\""));
    free(res);
    redisFree(p);
    redisFree(fe);
}

static void test_cluster_under_roles(void **state)
{
    fixture *f = *state;
    mini_cluster m;
    memset(&m, 0, sizeof m);
    assert_int_equal(mini_cluster_start(f, &m), 0);
    const char *batch[2] = { NULL, NULL };
    create_batch_per_node(&m, batch);
    harness_allocd d;
    char extra[1600];
    snprintf(extra, sizeof extra, "redis = \"redis://127.0.0.1:%d\";\ncluster = \"yes\";\n"
             "instance = \"acl-c\";\nredis_user = \"alloc-daemon\";\n"
             "redis_password_file = \"%s/pw/alloc-daemon\";\nregistry_interval_ms = 100;\n",
             m.port[0], f->dir);
    assert_int_equal(harness_allocd_start(&d, &f->redis, extra), 0);
    for (int i = 0; i < 2; i++) produce_and_read_on(f, &m, &d, batch[i], i);
    harness_allocd_stop(&d);
    assert_false(file_has(d.log, "NOPERM"));
    assert_false(file_has(d.log, "no permissions"));
    assert_no_password(f, d.log);
    mini_cluster_stop(&m);
}

/* ----------------------------------------------------------- sentinel */

/* The sentinel role on a real Sentinel (whose ACL is its own): allocd's
 * questions are answered, changing or failing over the master is not. */
static void test_sentinel_role(void **state)
{
    fixture *f = *state;
    char dir[300], conf[400], text[600];
    assert_int_equal(proc_temp_dir(dir, sizeof dir, "allocd-acl-sentinel"), 0);
    int port = harness_cluster_port(26000 + (int)(getpid() % 1000));
    assert_true(port > 0);
    snprintf(conf, sizeof conf, "%s/sentinel.conf", dir);
    snprintf(text, sizeof text, "port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mm 127.0.0.1 6399 1\n",
             port, dir);
    assert_int_equal(write_file(conf, text, 0600), 0);
    char *argv[] = { "redis-server", conf, "--sentinel", NULL };
    pid_t pid = harness_spawn(argv, NULL);
    assert_true(pid > 0);
    redisContext *c = NULL;
    for (int i = 0; i < 200 && !c; i++) {
        c = redisConnect("127.0.0.1", port);
        if (c && c->err) { redisFree(c); c = NULL; harness_sleep_ms(20); }
    }
    assert_non_null(c);
    int st;
    char *out = run(&st, "%s/allocctl --prefix alloc acl --user alloc-sentinel=sentinel "
                    "--password-dir %s/pw 2>/dev/null | redis-cli -p %d", harness_build_dir(), f->dir, port);
    assert_string_equal(out, "OK\n");
    free(out);
    redisFree(c);
    c = tcp_as(f, port, "alloc-sentinel");
    assert_non_null(c);
    static const struct { const char *cmd; int ok; } checks[] = {
        { "SENTINEL GET-MASTER-ADDR-BY-NAME mm", 1 }, { "SENTINEL SENTINELS mm", 1 },
        { "PING", 1 }, { "SENTINEL FAILOVER mm", 0 }, { "SENTINEL SET mm quorum 2", 0 },
        { "SENTINEL REMOVE mm", 0 }, { "SENTINEL RESET *", 0 }, { "SUBSCRIBE +sdown", 0 },
        { "SUBSCRIBE +switch-master", 1 },      /* last: the connection is subscribed then */
    };
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
        redisReply *r = redisCommand(c, checks[i].cmd);
        assert_non_null(r);
        int refused = r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOPERM", 6);
        if (refused == checks[i].ok) fprintf(stderr, "sentinel role: %s: %s\n", checks[i].cmd,
                                             r->str ? r->str : "(reply)");
        assert_int_equal(refused, !checks[i].ok);
        freeReplyObject(r);
    }
    redisFree(c);
    harness_reap(pid, SIGTERM);
    proc_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_user_is_off),
        cmocka_unit_test(test_dryrun_table),
        cmocka_unit_test(test_roles_cover_the_sources),
        cmocka_unit_test(test_producer_refused),
        cmocka_unit_test(test_rounds_under_roles),
        cmocka_unit_test(test_examples_under_roles),
        cmocka_unit_test(test_password_never_shown),
        cmocka_unit_test(test_cluster_under_roles),
        cmocka_unit_test(test_sentinel_role),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
