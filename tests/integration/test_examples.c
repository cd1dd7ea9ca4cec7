/* test_examples.c -- the client examples of docs/INTEGRATION.md, run as a
 * user runs them: examples/python (redis-py, /usr/bin/python3),
 * examples/node (node-redis) and examples/redis-cli (sh + redis-cli), each a
 * real subprocess with ALLOCD_REDIS pointing at the harness's redis-server
 * unix socket, against the real allocd. Their output is checked line by line:
 * the ordinal of the position transaction equals the result's seq, every
 * status and reason comes back with a message of its own, "you beat X%"
 * follows the formula, a resubmitted id gives the same result, reservations
 * are confirmed, cancelled and expire, and a paused batch shows the live
 * position (ahead) while the request keeps its place.
 *
 * Each language uses its own batches, so the three scenarios run at the same
 * time in forked children (interpreter start-up dominates); each test then
 * waits for its child and reports its log. Python and Node are skipped only
 * when the interpreter or its Redis module is missing (`make examples-deps`
 * installs them).
 *
 * Redis is locked down as docs/DEPLOYMENT.md says: the default user is off,
 * the examples log in as `web` (the producer and frontend roles of
 * `allocctl acl`) through ALLOCD_REDIS_USER/ALLOCD_REDIS_PASSWORD, admin.sh
 * as the operator, allocd as the daemon; the test's own connection is an
 * admin. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

#define PY_BIN "/usr/bin/python3"
#define ADMIN_PW "examples-admin-pw"
/* admin.sh runs as the operator, every other example as `web` */
#define AS_OPERATOR "ALLOCD_REDIS_USER=alloc-operator ALLOCD_REDIS_PASSWORD=ex-alloc-operator-pw "

enum { LANG_PY, LANG_NODE, LANG_SH, N_LANGS };

typedef struct lang {
    const char *name;       /* "python" */
    const char *tag;        /* batch and id prefix */
    const char *unavailable;/* why it is skipped, or NULL */
    pid_t pid;              /* the child running its scenario */
    char log[400];
    int64_t started_ms;
} lang;

typedef struct fixture {
    harness_redis redis;
    harness_allocd allocd;
    redisContext *c;
    lang langs[N_LANGS];
} fixture;

/* ------------------------------------------------------------------ */
/* scenario steps                                                      */

/* prog: P producer, W poller (python/node); R request.sh, U push.sh,
 * Q poll.sh, A admin.sh (redis-cli); C an admin command pushed by the test
 * itself (args = "BATCH JSON"); S sleep (exit = milliseconds). */
typedef struct step {
    char prog;
    const char *args;       /* {L} = language tag, {O1}/{N1}... = saved values */
    const char *status;     /* expected status in the result line, NULL: none */
    const char *reason;     /* expected reason, NULL: the line has no reason */
    const char *expect;     /* '|'-separated substrings the output must contain */
    const char *save;       /* "O.." saves order=, "N.." saves the pushed ordinal */
    int exit;               /* expected exit status (S: ms to sleep) */
    int same_as;            /* 1-based step whose result line this one must repeat */
    int core;               /* 1: Node runs it too (Python runs every step) */
} step;

static const step lang_steps[] = {
    /* stock, reservations of 60 s, per_user 2, sku1 x3, sku2 x1 */
    { 'P', "buy {L}-shop --user u1 --item sku1 --qty 2 --id {L}-b1", "granted", NULL,
      "item=sku1|qty=2|order=|expires_at=|rank=1|Reserved: 2 x sku1|s left)", "O1", 0, 0, 1 },
    { 'P', "buy {L}-shop --user u1 --item sku1 --qty 2 --id {L}-b1", "granted", NULL,
      "seq=1", NULL, 0, 1, 1 },                                         /* 2: resubmitted */
    { 'P', "buy {L}-shop --user u1 --item sku1", "rejected", "limit", NULL, NULL, 0, 0, 0 },
    { 'P', "buy {L}-shop --user u2 --item sku1 --qty 2", "rejected", "sold_out", NULL, NULL, 0, 0, 0 },
    { 'P', "buy {L}-shop --user u2 --item nope", "rejected", "unknown_item", NULL, NULL, 0, 0, 0 },
    { 'P', "choose {L}-shop --user u2 --room R1", "rejected", "wrong_kind", NULL, NULL, 0, 0, 0 },
    { 'P', "confirm {L}-shop --user u1 --order {O1}", "done", NULL, "order={O1}|is confirmed", NULL, 0, 0, 1 },
    { 'P', "buy {L}-shop --user u2 --item sku2", "granted", NULL, "item=sku2", "O2", 0, 0, 1 },
    /* sku2 is sold out: with --wait ("wait":true, contract 9.5) u3 joins the
     * waitlist; the producer shows the place and keeps polling until its
     * timeout (4 s: the waiting result must come before it, on a loaded
     * machine too); the cancel serves u3, whose waiting result is replaced */
    { 'P', "buy {L}-shop --user u3 --item sku2 --wait --id {L}-t1 --timeout 4", NULL, NULL,
      "pushed id={L}-t1|waiting id={L}-t1 -- You are on the waitlist (place 1). Keep this page open: "
      "your final result replaces this one.|pending id={L}-t1 -- still on the waitlist", "N4", 3, 0, 1 },
    { 'P', "cancel {L}-shop --user u2 --order {O2}", "done", NULL, "order={O2}|is cancelled", NULL, 0, 0, 1 },
    { 'W', "{L}-shop {L}-t1 --ordinal {N4}", "granted", NULL, "item=sku2|seq={N4}|Reserved: 1 x sku2", NULL, 0, 0, 1 },
    { 'P', "confirm {L}-shop --user u2 --order {O2}", "rejected", "unknown_order", NULL, NULL, 0, 0, 0 },
    { 'P', "raw {L}-shop '{\"id\":\"{L}-bad\",\"user\":\"u3\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":0}'",
      "invalid", "bad_request", "detail=\"|developer: allocd refused", NULL, 0, 0, 1 },
    /* a reservation of 300 ms, confirmed too late */
    { 'P', "buy {L}-fast --user u1 --item sku1", "granted", NULL, "expires_at=", "O3", 0, 0, 0 },
    { 'S', NULL, NULL, NULL, NULL, NULL, 600, 0, 0 },
    { 'P', "confirm {L}-fast --user u1 --order {O3}", "rejected", "expired", NULL, NULL, 0, 0, 0 },
    { 'P', "buy {L}-later --user u1 --item sku1", "rejected", "not_open", NULL, NULL, 0, 0, 0 },
    { 'C', "{L}-closed {\"id\":\"{L}-cl\",\"op\":\"close\"}", NULL, NULL, NULL, NULL, 0, 0, 0 },
    { 'P', "buy {L}-closed --user u1 --item sku1", "rejected", "closed", NULL, NULL, 0, 0, 0 },
    { 'P', "release {L}-rate --user s1", "rejected", "not_holding", NULL, NULL, 0, 0, 0 },
    { 'P', "release {L}-rate --user s1", "rejected", "throttled", NULL, NULL, 0, 0, 0 },
    /* rooms: R1 x2 (building 7, floor 1), R2 x3 (8, 2), R3 x1 (8, 3), max_group 3 */
    { 'P', "choose {L}-dorm --user s1 --room R3", "granted", NULL, "item=R3|in room R3", NULL, 0, 0, 1 },
    { 'P', "choose {L}-dorm --user s2 --room R3", "rejected", "room_full", NULL, NULL, 0, 0, 0 },
    { 'P', "choose {L}-dorm --user s1 --room R1", "rejected", "already_holding", NULL, NULL, 0, 0, 0 },
    { 'P', "auto {L}-dorm --user s2 --prefs R3 --filter building=7 --filter floor:=1", "granted", NULL,
      "item=R1", NULL, 0, 0, 1 },
    { 'P', "auto {L}-dorm --user s3 --prefs R3 --filter building=9", "rejected", "no_room", NULL, NULL, 0, 0, 0 },
    { 'P', "group {L}-dorm --user s4 --members s4,s5,s6 --prefs R3 --filter building=8", "granted", NULL,
      "item=R2|members=s4,s5,s6|Your group (s4, s5, s6)", NULL, 0, 0, 1 },
    { 'P', "group {L}-dorm --user s7 --members s7,s1 --prefs R1", "rejected", "member_busy", NULL, NULL, 0, 0, 0 },
    { 'P', "group {L}-dorm --user s7 --members s7,s8,s9,s10 --prefs R1", "rejected", "group_too_large", NULL, NULL, 0, 0, 0 },
    { 'P', "switch {L}-dorm --user s1 --room R2", "rejected", "room_full", NULL, NULL, 0, 0, 0 },
    { 'P', "switch {L}-dorm --user s2 --room R1", "rejected", "already_holding", NULL, NULL, 0, 0, 0 },
    { 'P', "switch {L}-dorm --user s1 --room R1", "granted", NULL, "item=R1|Moved", NULL, 0, 0, 1 },
    { 'P', "release {L}-dorm --user s1", "done", NULL, "item=R1|gave back", NULL, 0, 0, 1 },
    { 'P', "release {L}-dorm --user s1", "rejected", "not_holding", NULL, NULL, 0, 0, 0 },
    { 'P', "auto {L}-dorm --user s11 --filter floor=3", "rejected", "no_room", NULL, NULL, 0, 0, 0 },
    { 'P', "auto {L}-dorm --user s11 --filter floor:=3", "granted", NULL, "item=R3", NULL, 0, 0, 0 },
    /* groups formed by consent (the house batch's first request: group g1) and a swap */
    { 'P', "invite {L}-house --user h1 --to h2,h3", "done", NULL, "group=g1|Invitation sent (group g1)", NULL, 0, 0, 1 },
    { 'P', "accept {L}-house --user h2 --from h1", "done", NULL, "group=g1|You joined group g1", NULL, 0, 0, 1 },
    { 'P', "decline {L}-house --user h3 --from h1", "done", NULL, "declined the invitation", NULL, 0, 0, 1 },
    { 'P', "accept {L}-house --user h3 --from h1", "rejected", "no_invitation", NULL, NULL, 0, 0, 0 },
    { 'P', "prefs {L}-house --user h2 --prefs R2 --version 0", "done", NULL, "version=1|preferences are saved", NULL, 0, 0, 1 },
    { 'P', "prefs {L}-house --user h1 --prefs R1 --version 0", "rejected", "conflict", "version=1", NULL, 0, 0, 0 },
    { 'P', "group {L}-house --user h1", "granted", NULL, "item=R2|members=h1,h2|Your group (h1, h2)", NULL, 0, 0, 1 },
    { 'P', "group {L}-house --user h4", "rejected", "not_in_group", NULL, NULL, 0, 0, 0 },
    { 'P', "choose {L}-house --user h4 --room R1", "granted", NULL, "item=R1", NULL, 0, 0, 1 },
    { 'P', "swap {L}-house --user h4 --with h1 --id {L}-w1 --no-wait", NULL, NULL, "pushed id={L}-w1", "N3", 0, 0, 1 },
    { 'P', "swap {L}-house --user h1 --with h4", "granted", NULL, "item=R1|Swapped: your bed is now in room R1", NULL, 0, 0, 1 },
    { 'W', "{L}-house {L}-w1 --ordinal {N3}", "granted", NULL, "item=R2|Swapped: your bed is now in room R2", NULL, 0, 0, 1 },
    /* paused: requests keep their place; the live position counts down */
    { 'C', "{L}-pause {\"id\":\"{L}-pa\",\"op\":\"pause\"}", NULL, NULL, NULL, NULL, 0, 0, 1 },
    { 'P', "buy {L}-pause --user u1 --item sku1 --id {L}-p1 --timeout 0.4", NULL, NULL,
      "position id={L}-p1 ahead=0 state=paused|pending id={L}-p1 ahead=0 state=paused", "N1", 3, 0, 1 },
    { 'P', "buy {L}-pause --user u2 --item sku1 --id {L}-p2 --timeout 0.3", NULL, NULL,
      "position id={L}-p2 ahead=1 state=paused|pending id={L}-p2", "N2", 3, 0, 1 },
    { 'C', "{L}-pause {\"id\":\"{L}-re\",\"op\":\"resume\"}", NULL, NULL, NULL, NULL, 0, 0, 1 },
    { 'W', "{L}-pause {L}-p2 --ordinal {N2}", "granted", NULL, "seq={N2}|rank=2", NULL, 0, 0, 1 },
    { 'W', "{L}-pause {L}-p1 --ordinal {N1}", "granted", NULL, "seq={N1}|rank=1", NULL, 0, 0, 1 },
};

#define J(s) "'" s "'"
static const step sh_steps[] = {
    { 'A', "sh-shop pause", "done", NULL, "op=pause", NULL, 0, 0, 0 },
    { 'U', "sh-shop " J("{\"id\":\"sh-b1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":2}"),
      NULL, NULL, "pushed id=sh-b1 batch=sh-shop ordinal=1", "N1", 0, 0, 0 },
    { 'Q', "sh-shop sh-b1 {N1} 1", NULL, NULL, "position id=sh-b1 ahead=0 state=paused|pending id=sh-b1", NULL, 3, 0, 0 },
    { 'A', "sh-shop resume", "done", NULL, NULL, NULL, 0, 0, 0 },
    { 'Q', "sh-shop sh-b1 {N1}", "granted", NULL, "seq={N1}|item=sku1|qty=2|rank=1|Reserved: 2 x sku1", "O1", 0, 0, 0 },
    { 'R', "sh-shop " J("{\"id\":\"sh-b1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":2}"),
      "granted", NULL, "ordinal=2", NULL, 0, 5, 0 },                          /* resubmitted */
    { 'R', "sh-shop " J("{\"id\":\"sh-c1\",\"user\":\"u1\",\"op\":\"confirm\",\"order\":\"{O1}\"}"),
      "done", NULL, "order={O1}|is confirmed", NULL, 0, 0, 0 },
    { 'R', "sh-shop " J("{\"id\":\"sh-b2\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\"}"),
      "rejected", "limit", NULL, NULL, 0, 0, 0 },
    { 'R', "sh-shop " J("{\"id\":\"sh-b3\",\"user\":\"u2\",\"op\":\"buy\",\"item\":\"sku1\"}"),
      "granted", NULL, "rank=2", "O2", 0, 0, 0 },
    { 'R', "sh-shop " J("{\"id\":\"sh-x1\",\"user\":\"u2\",\"op\":\"cancel\",\"order\":\"{O2}\"}"),
      "done", NULL, "is cancelled", NULL, 0, 0, 0 },
    /* quotes, a backslash and an apostrophe survive redis-cli's inline syntax */
    { 'R', "sh-shop '{\"id\":\"sh-b4\",\"user\":\"u3\",\"op\":\"buy\",\"item\":\"sku1\",\"note\":\"it'\\''s \\\\\\\"ok\\\\\\\"\"}'",
      "granted", NULL, NULL, NULL, 0, 0, 0 },
    /* sku1 is sold out: "wait":true joins the waitlist (contract 9.5); the
     * capacity raised below serves it and its final result replaces it */
    { 'U', "sh-shop " J("{\"id\":\"sh-t1\",\"user\":\"u5\",\"op\":\"buy\",\"item\":\"sku1\",\"wait\":true}"),
      NULL, NULL, "pushed id=sh-t1 batch=sh-shop", "N2", 0, 0, 0 },
    { 'Q', "sh-shop sh-t1 {N2} 4", NULL, NULL, "waiting id=sh-t1 -- You are on the waitlist (place 1). Keep this page "
      "open: your final result replaces this one.|pending id=sh-t1 -- still on the waitlist", NULL, 3, 0, 0 },
    { 'R', "sh-shop " J("{\"id\":\"sh-bad\",\"user\":\"u3\",\"op\":\"fly\"}"),
      "invalid", "bad_request", "detail=\"unknown op|developer:", NULL, 0, 0, 0 },
    { 'A', "sh-shop set_capacity sku1 1", "rejected", "limit", NULL, NULL, 0, 0, 0 },
    { 'A', "sh-shop set_capacity sku1 10", "done", NULL, "capacity=10", NULL, 0, 0, 0 },
    { 'Q', "sh-shop sh-t1 {N2}", "granted", NULL, "seq={N2}|item=sku1|Reserved: 1 x sku1", NULL, 0, 0, 0 },
    { 'A', "sh-shop close", "done", NULL, NULL, NULL, 0, 0, 0 },
    { 'R', "sh-shop " J("{\"id\":\"sh-b5\",\"user\":\"u4\",\"op\":\"buy\",\"item\":\"sku1\"}"),
      "rejected", "closed", NULL, NULL, 0, 0, 0 },
    { 'R', "sh-dorm " J("{\"id\":\"sh-g1\",\"user\":\"s1\",\"op\":\"group\",\"members\":[\"s1\",\"s2\"],\"prefs\":[\"R3\",\"R1\"]}"),
      "granted", NULL, "item=R1|members=s1,s2|Your group (s1, s2)", NULL, 0, 0, 0 },
    { 'R', "sh-dorm " J("{\"id\":\"sh-s1\",\"user\":\"s1\",\"op\":\"switch\",\"room\":\"R3\"}"),
      "granted", NULL, "item=R3|Moved", NULL, 0, 0, 0 },
};

/* ------------------------------------------------------------------ */
/* running commands                                                    */

/* Runs `cmd` through sh, returns its stdout+stderr (malloc'd) and exit status. */
static char *run(const char *cmd, int *status)
{
    size_t fl = strlen(cmd) + 8;
    char *full = malloc(fl);
    if (!full) { *status = -1; return strdup(""); }
    snprintf(full, fl, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p) { *status = -1; return strdup(""); }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 512) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) break;
            buf = nb;
        }
    }
    if (buf) buf[len] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return buf ? buf : strdup("");
}

static int quiet(const char *cmd)
{
    int st;
    free(run(cmd, &st));
    return st;
}

/* The line of `out` that starts with `prefix` (copied into line), or NULL. */
static const char *find_line(const char *out, const char *prefix, char *line, size_t size)
{
    size_t pl = strlen(prefix);
    for (const char *s = out; s && *s; ) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len >= pl && !strncmp(s, prefix, pl)) {
            snprintf(line, size, "%.*s", (int)len, s);
            return line;
        }
        s = e ? e + 1 : NULL;
    }
    return NULL;
}

/* The value of " key=" in a line, up to the next space ("" if absent). */
static void field(const char *line, const char *k, char *val, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", k);
    const char *p = line ? strstr(line, pat) : NULL;
    val[0] = 0;
    if (!p) return;
    p += strlen(pat);
    size_t len = strcspn(p, " \n");
    snprintf(val, size, "%.*s", (int)len, p);
}

typedef struct saved { char name[8]; char value[64]; } saved;

/* Replaces {L} and {NAME} (saved values) in tmpl. */
static void expand(const char *tmpl, const char *tag, const saved *sv, size_t nsv,
                   char *out, size_t size)
{
    size_t o = 0;
    for (const char *p = tmpl; *p && o + 1 < size; ) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            size_t n = e ? (size_t)(e - p - 1) : 0;
            const char *rep = NULL;
            if (e && n == 1 && p[1] == 'L') rep = tag;
            for (size_t i = 0; e && !rep && i < nsv; i++)
                if (strlen(sv[i].name) == n && !strncmp(sv[i].name, p + 1, n)) rep = sv[i].value;
            if (rep) {
                o += (size_t)snprintf(out + o, size - o, "%s", rep);
                if (o >= size) o = size - 1;
                p = e + 1;
                continue;
            }
        }
        out[o++] = *p++;
    }
    out[o] = 0;
}

/* Pushes an admin command and waits for its result (status done). */
static int ctl(redisContext *c, const char *args, FILE *log)
{
    char batch[80];
    const char *sp = strchr(args, ' ');
    if (!sp) return -1;
    snprintf(batch, sizeof batch, "%.*s", (int)(sp - args), args);
    const char *json = sp + 1;
    const char *idp = strstr(json, "\"id\":\"");
    char id[80];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(idp + 6, "\""), idp + 6);
    redisReply *r = redisCommand(c, "RPUSH alloc:{%s}:ctl %s", batch, json);
    if (!r || r->type == REDIS_REPLY_ERROR) { if (r) freeReplyObject(r); return -1; }
    freeReplyObject(r);
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:results", batch);
    char *v = harness_wait_hget(c, key, id, 10000);
    fprintf(log, "$ (test) RPUSH %s:ctl %s\n%s\n", batch, json, v ? v : "(no result)");
    int ok = v && strstr(v, "\"status\":\"done\"");
    free(v);
    return ok ? 0 : -1;
}

static const char *prog_cmd(int lang_id, char prog)
{
    switch (prog) {
    case 'P': return lang_id == LANG_PY ? PY_BIN " examples/python/producer.py" : "node examples/node/producer.mjs";
    case 'W': return lang_id == LANG_PY ? PY_BIN " examples/python/poller.py" : "node examples/node/poller.mjs";
    case 'R': return "sh examples/redis-cli/request.sh";
    case 'U': return "sh examples/redis-cli/push.sh";
    case 'Q': return "sh examples/redis-cli/poll.sh";
    case 'A': return AS_OPERATOR "sh examples/redis-cli/admin.sh";
    }
    return "false";
}

/* The batch a step talks to: first argument, or second for P (after the command). */
static void step_batch(char prog, const char *args, char *batch, size_t size)
{
    const char *p = args;
    if (prog == 'P') p = strchr(args, ' ') + 1;
    snprintf(batch, size, "%.*s", (int)strcspn(p, " "), p);
}

#define FAILF(...) do { fprintf(log, "FAIL: step %zu: ", i + 1); fprintf(log, __VA_ARGS__); \
                        fprintf(log, "\n"); free(out); return 1; } while (0)

/* Runs one language's scenario; returns 0 when every check passed. Writes
 * each command, its output and the verdict to `log`. */
static int run_scenario(int lang_id, const char *tag, const step *steps, size_t n,
                        redisContext *c, FILE *log)
{
    int core_only = lang_id == LANG_NODE;   /* node's start-up is the slow part */
    saved sv[16];
    size_t nsv = 0;
    char result_lines[64][1024];
    if (n > 64) { fprintf(log, "FAIL: too many steps\n"); return 1; }
    for (size_t i = 0; i < n; i++) {
        const step *s = &steps[i];
        char *out = NULL;
        result_lines[i][0] = 0;
        if (core_only && !s->core) continue;
        if (s->prog == 'S') { harness_sleep_ms(s->exit); continue; }
        char args[2048], cmdline[3072];
        expand(s->args, tag, sv, nsv, args, sizeof args);
        if (s->prog == 'C') {
            if (ctl(c, args, log) < 0) FAILF("admin command %s was not done", args);
            continue;
        }
        snprintf(cmdline, sizeof cmdline, "%s %s", prog_cmd(lang_id, s->prog), args);
        int64_t t0 = harness_now_ms();
        int st;
        out = run(cmdline, &st);
        fprintf(log, "$ %s    # %lld ms, exit %d\n%s", cmdline, (long long)(harness_now_ms() - t0), st, out);
        fflush(log);
        if (st != s->exit) FAILF("exit status %d, expected %d", st, s->exit);

        char line[1024], val[128], ordinal[64] = "";
        if (find_line(out, "pushed id=", line, sizeof line)) field(line, "ordinal", ordinal, sizeof ordinal);
        if (strchr("PRU", s->prog) && !ordinal[0]) FAILF("no 'pushed id=... ordinal=N' line");
        if (s->expect) {
            char exp[1024];
            expand(s->expect, tag, sv, nsv, exp, sizeof exp);
            for (char *tok = strtok(exp, "|"); tok; tok = strtok(NULL, "|"))
                if (!strstr(out, tok)) FAILF("output lacks \"%s\"", tok);
        }
        const char *res = find_line(out, "result id=", line, sizeof line);
        if (s->status) {
            if (!res) FAILF("no 'result id=' line");
            snprintf(result_lines[i], sizeof result_lines[i], "%s", res);
            field(res, "status", val, sizeof val);
            if (strcmp(val, s->status)) FAILF("status=%s, expected %s", val, s->status);
            field(res, "reason", val, sizeof val);
            if (strcmp(val, s->reason ? s->reason : "")) FAILF("reason=%s, expected %s", val, s->reason ? s->reason : "none");
            field(res, "seq", val, sizeof val);
            if (s->prog != 'A' && !val[0]) FAILF("result without seq");
            /* the position transaction's ordinal is the seq allocd reports */
            if (ordinal[0] && !s->same_as && strcmp(val, ordinal)) FAILF("seq=%s but ordinal=%s", val, ordinal);
            if (s->same_as && strcmp(res, result_lines[s->same_as - 1]))
                FAILF("resubmission gave \"%s\", first result was \"%s\"", res, result_lines[s->same_as - 1]);
            if (s->prog != 'A') {
                char msg[1024];
                if (!find_line(out, "message: ", msg, sizeof msg) || strlen(msg) < 15)
                    FAILF("no user message");
                if (strstr(msg, "Your request was refused ("))
                    FAILF("reason %s has no message of its own", s->reason);
            }
            char rank[32];
            field(res, "rank", rank, sizeof rank);
            if (!strcmp(s->status, "granted") && s->prog != 'A') {
                char beat[256], batch[80], pct[32];
                if (!find_line(out, "beat id=", beat, sizeof beat)) FAILF("granted without a 'beat' line");
                step_batch(s->prog, args, batch, sizeof batch);
                long long part = proc_int(c, "HGET alloc:{%s}:stats participants", batch);
                long long want = part > 0 ? 100 * (part - atoll(rank)) / part : 0;
                if (want < 0) want = 0;
                field(beat, "percent", pct, sizeof pct);
                if (atoll(pct) != want) FAILF("percent=%s, expected 100*(%lld-%s)/%lld = %lld", pct, part, rank, part, want);
            }
        }
        if (s->save && nsv < 16) {
            snprintf(sv[nsv].name, sizeof sv[nsv].name, "%s", s->save);
            if (s->save[0] == 'O') field(res, "order", sv[nsv].value, sizeof sv[nsv].value);
            else snprintf(sv[nsv].value, sizeof sv[nsv].value, "%s", ordinal);
            if (!sv[nsv].value[0]) FAILF("nothing to save as %s", s->save);
            nsv++;
        }
        fprintf(log, "ok: step %zu\n", i + 1);
        free(out);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* fixture                                                             */

static void cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r) freeReplyObject(r);
}

static void stock(redisContext *c, const char *tag, const char *name, const char *meta,
                  const char *caps)
{
    char line[512];
    snprintf(line, sizeof line, "HSET alloc:{%s-%s}:meta %s", tag, name, meta);
    cmd(c, line);
    snprintf(line, sizeof line, "HSET alloc:{%s-%s}:capacity %s", tag, name, caps);
    cmd(c, line);
    cmd(c, "SADD alloc:batches %s-%s", tag, name);
}

static void dorm(redisContext *c, const char *tag, const char *name, const char *meta)
{
    char line[512];
    snprintf(line, sizeof line, "HSET alloc:{%s-%s}:meta kind room groups listed %s", tag, name, meta);
    cmd(c, line);
    cmd(c, "HSET alloc:{%s-%s}:capacity R1 2 R2 3 R3 1", tag, name);
    cmd(c, "HSET alloc:{%s-%s}:attrs R1 %s R2 %s R3 %s", tag, name,
        "{\"building\":\"7\",\"floor\":1}", "{\"building\":\"8\",\"floor\":2}",
        "{\"building\":\"8\",\"floor\":3}");
    cmd(c, "SADD alloc:batches %s-%s", tag, name);
}

static void create_batches(redisContext *c, const char *tag)
{
    char later[128];
    snprintf(later, sizeof later, "kind stock opens_at %lld", (long long)harness_now_ms() + 3600 * 1000);
    stock(c, tag, "shop", "kind stock per_user 2 hold_ms 60000", "sku1 3 sku2 1");
    stock(c, tag, "fast", "kind stock per_user 5 hold_ms 300", "sku1 5");
    stock(c, tag, "later", later, "sku1 1");
    stock(c, tag, "closed", "kind stock", "sku1 1");
    stock(c, tag, "pause", "kind stock per_user 1", "sku1 10");
    dorm(c, tag, "dorm", "max_group 3");
    dorm(c, tag, "rate", "rate_max 1 rate_window_ms 60000 penalty_ms 60000");
    dorm(c, tag, "house", "max_group 3 groups formed");   /* the later `groups` wins */
}

static const char *python_unavailable(void)
{
    if (access(PY_BIN, X_OK) != 0) return PY_BIN " is missing";
    if (quiet(PY_BIN " -c 'import redis'") != 0)
        return "redis-py is missing for " PY_BIN " (apt-get install python3-redis, or make examples-deps)";
    return NULL;
}

static const char *node_unavailable(void)
{
    if (quiet("node --version") != 0) return "node is not installed";
    if (quiet("node -e 'const [a,b]=process.versions.node.split(\".\").map(Number);"
              "process.exit(a>18||(a==18&&b>=19)?0:1)'") != 0)
        return "node is older than 18.19 (node-redis v5 needs it)";
    if (quiet("cd examples/node && node --input-type=module -e \"import 'redis'\"") != 0)
        return "examples/node/node_modules lacks redis (npm ci --prefix examples/node, or make examples-deps)";
    return NULL;
}

/* The test's own connection: an admin (the default user is off). */
static redisContext *connect_admin(const fixture *f)
{
    redisContext *c = harness_redis_connect(&f->redis);
    redisReply *r = c ? redisCommand(c, "AUTH admin " ADMIN_PW) : NULL;
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (!ok && c) { redisFree(c); c = NULL; }
    return c;
}

/* The users of `allocctl acl` (passwords in DIR/pw), an admin, the default
 * user off; f->c becomes the admin's. Returns 0 or -1. */
static int lock_down(fixture *f)
{
    static const char *const users[] = { "web", "alloc-operator", "alloc-daemon" };
    char path[600], cmd[2048];
    snprintf(path, sizeof path, "%s/pw", f->redis.dir);
    if (mkdir(path, 0700) < 0) return -1;
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/pw/%s", f->redis.dir, users[i]);
        FILE *pw = fopen(path, "w");
        if (!pw) return -1;
        fprintf(pw, "ex-%s-pw\n", users[i]);
        fclose(pw);
    }
    snprintf(cmd, sizeof cmd, "%s/allocctl --prefix alloc acl --user web=producer+frontend "
             "--user alloc-operator=operator --user alloc-daemon=daemon --password-dir %s/pw "
             "2>/dev/null | redis-cli -s %s | grep -qv '^OK$' && exit 1; "
             "redis-cli -s %s ACL SETUSER admin on '>" ADMIN_PW "' '~*' '&*' +@all | grep -qx OK",
             harness_build_dir(), f->redis.dir, f->redis.sock, f->redis.sock);
    if (quiet(cmd) != 0) return -1;
    redisFree(f->c);
    if (!(f->c = connect_admin(f))) return -1;
    redisReply *r = redisCommand(f->c, "ACL SETUSER default reset off");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static pid_t start_scenario(fixture *f, int lang_id, const step *steps, size_t n)
{
    lang *l = &f->langs[lang_id];
    snprintf(l->log, sizeof l->log, "%s/examples-%s.log", f->redis.dir, l->name);
    l->started_ms = harness_now_ms();
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, 0);                        /* so a stuck scenario can be killed whole */
    FILE *log = fopen(l->log, "w");
    redisContext *c = connect_admin(f);   /* never the parent's socket */
    int rc = log && c ? run_scenario(lang_id, l->tag, steps, n, c, log) : 2;
    if (log) fclose(log);
    _exit(rc);
}

static int group_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    if (!f) return -1;
    if (access("examples/redis-cli/push.sh", R_OK) != 0) {
        fprintf(stderr, "test_examples: run from the repository root (examples/ not found)\n");
        return -1;
    }
    if (harness_redis_start(&f->redis, NULL) < 0) return -1;
    f->c = harness_redis_connect(&f->redis);
    if (!f->c || lock_down(f) < 0) return -1;
    setenv("ALLOCD_REDIS", f->redis.url, 1);
    unsetenv("ALLOCD_PREFIX");
    f->langs[LANG_PY] = (lang){ .name = "python", .tag = "py", .unavailable = python_unavailable() };
    f->langs[LANG_NODE] = (lang){ .name = "node", .tag = "node", .unavailable = node_unavailable() };
    f->langs[LANG_SH] = (lang){ .name = "redis-cli", .tag = "sh",
                                .unavailable = quiet("redis-cli --version") ? "redis-cli is missing" : NULL };
    for (int i = 0; i < N_LANGS; i++) create_batches(f->c, f->langs[i].tag);
    char conf[600];
    snprintf(conf, sizeof conf, "registry_interval_ms = 200;\nredis_user = \"alloc-daemon\";\n"
             "redis_password_file = \"%s/pw/alloc-daemon\";", f->redis.dir);
    if (harness_allocd_start(&f->allocd, &f->redis, conf) < 0) return -1;
    /* the examples' login; set after allocd started, as the environment's
     * password would win over allocd's redis_password_file */
    setenv("ALLOCD_REDIS_USER", "web", 1);
    setenv("ALLOCD_REDIS_PASSWORD", "ex-web-pw", 1);
    size_t nl = sizeof lang_steps / sizeof lang_steps[0];
    for (int i = 0; i < N_LANGS; i++) {
        if (f->langs[i].unavailable) continue;
        f->langs[i].pid = i == LANG_SH ? start_scenario(f, i, sh_steps, sizeof sh_steps / sizeof sh_steps[0])
                                       : start_scenario(f, i, lang_steps, nl);
        if (f->langs[i].pid < 0) return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    fixture *f = *state;
    if (!f) return 0;
    for (int i = 0; i < N_LANGS; i++)
        if (f->langs[i].pid > 0) {
            kill(-f->langs[i].pid, SIGKILL);
            waitpid(f->langs[i].pid, NULL, 0);
        }
    if (f->allocd.pid > 0 && harness_allocd_stop(&f->allocd) != 0) harness_allocd_dump_log(&f->allocd);
    if (f->c) redisFree(f->c);
    harness_redis_stop(&f->redis);
    free(f);
    return 0;
}

static void dump(const char *path)
{
    FILE *in = fopen(path, "r");
    if (!in) return;
    char buf[1024];
    fprintf(stderr, "---- %s\n", path);
    while (fgets(buf, sizeof buf, in)) fputs(buf, stderr);
    fclose(in);
}

static void last_fail(const char *path, char *out, size_t size)
{
    FILE *in = fopen(path, "r");
    snprintf(out, size, "(no log)");
    if (!in) return;
    char buf[1024];
    while (fgets(buf, sizeof buf, in))
        if (!strncmp(buf, "FAIL:", 5)) { buf[strcspn(buf, "\n")] = 0; snprintf(out, size, "%s", buf); }
    fclose(in);
}

/* Waits for a language's scenario (150 s at most: a loaded machine) and reports it. */
static void check_lang(fixture *f, int lang_id)
{
    lang *l = &f->langs[lang_id];
    if (l->unavailable) {
        print_message("SKIP %s examples: %s\n", l->name, l->unavailable);
        skip();
    }
    int st = -1;
    pid_t p = 0;
    for (int waited = 0; waited < 150000 && p == 0; waited += 20) {
        p = waitpid(l->pid, &st, WNOHANG);
        if (p == 0) harness_sleep_ms(20);
    }
    if (p != l->pid) {
        kill(-l->pid, SIGKILL);
        waitpid(l->pid, NULL, 0);
        l->pid = 0;
        dump(l->log);
        fail_msg("%s examples: still running after 150 s", l->name);
    }
    l->pid = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char why[1024];
        last_fail(l->log, why, sizeof why);
        dump(l->log);
        harness_allocd_dump_log(&f->allocd);
        fail_msg("%s examples: %s", l->name, why);
    }
    print_message("%s examples: every step passed (%lld ms, log %s)\n", l->name,
                  (long long)(harness_now_ms() - l->started_ms), l->log);
}

static void test_python_examples(void **state) { check_lang(*state, LANG_PY); }
static void test_node_examples(void **state) { check_lang(*state, LANG_NODE); }
static void test_redis_cli_examples(void **state) { check_lang(*state, LANG_SH); }

/* Every status, op and reason through each language's --explain (no Redis):
 * each reason has a message of its own, and the three languages print the
 * very same lines. */
#define R(reason) " '{\"id\":\"r\",\"op\":\"buy\",\"status\":\"rejected\",\"reason\":\"" reason "\",\"seq\":3}'"
static const char explain_args[] =
    " '{\"id\":\"g1\",\"user\":\"u\",\"op\":\"buy\",\"status\":\"granted\",\"item\":\"sku1\",\"qty\":2,\"order\":\"256139716789530382\",\"rank\":7,\"seq\":9,\"at\":1}'"
    " '{\"id\":\"g2\",\"op\":\"buy\",\"status\":\"granted\",\"item\":\"sku1\",\"qty\":1,\"order\":\"5\",\"expires_at\":1795326835279,\"rank\":1,\"seq\":1}'"
    " '{\"id\":\"g3\",\"op\":\"choose\",\"status\":\"granted\",\"item\":\"R101\",\"rank\":1,\"seq\":1}'"
    " '{\"id\":\"g4\",\"op\":\"auto\",\"status\":\"granted\",\"item\":\"R102\",\"rank\":2,\"seq\":2}'"
    " '{\"id\":\"g5\",\"op\":\"group\",\"status\":\"granted\",\"item\":\"R2\",\"members\":[\"s3\",\"s4\"],\"rank\":3,\"seq\":3}'"
    " '{\"id\":\"g6\",\"op\":\"switch\",\"status\":\"granted\",\"item\":\"R3\",\"rank\":4,\"seq\":4}'"
    " '{\"id\":\"d1\",\"op\":\"confirm\",\"status\":\"done\",\"item\":\"sku1\",\"order\":\"5\",\"seq\":5}'"
    " '{\"id\":\"d2\",\"op\":\"cancel\",\"status\":\"done\",\"item\":\"sku1\",\"order\":\"5\",\"qty\":1,\"seq\":6}'"
    " '{\"id\":\"d3\",\"op\":\"release\",\"status\":\"done\",\"item\":\"R3\",\"seq\":7}'"
    " '{\"id\":\"c1\",\"op\":\"set_capacity\",\"status\":\"done\",\"item\":\"R3\",\"capacity\":6}'"
    " '{\"id\":\"i1\",\"op\":\"fly\",\"status\":\"invalid\",\"reason\":\"bad_request\",\"detail\":\"unknown op \\\"fly\\\"\",\"seq\":8}'"
    R("sold_out") R("room_full") R("no_room") R("limit") R("already_holding") R("member_busy")
    R("not_holding") R("unknown_item") R("unknown_order") R("expired") R("not_open") R("closed")
    R("paused") R("throttled") R("wrong_kind") R("group_too_large") R("no_invitation")
    R("not_in_group") R("conflict")
    " '{\"id\":\"w1\",\"op\":\"swap\",\"status\":\"waiting\",\"seq\":9}'"
    /* waitlist places (contract 9.5): not swap offers */
    " '{\"id\":\"t-9\",\"user\":\"u9\",\"op\":\"buy\",\"status\":\"waiting\",\"qty\":1,\"wait_pos\":3,\"wait_no\":4127,\"seq\":90211,\"at\":1}'"
    " '{\"id\":\"t-10\",\"op\":\"choose\",\"status\":\"waiting\",\"wait_pos\":1,\"wait_no\":2,\"seq\":12}'";
#undef R

static void explain_fail(const char *name, const char *out, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "---- %s --explain\n%s", name, out);
    fail_msg("%s --explain: %s", name, why);
}

/* Every poller exits 1 when Redis cannot be reached at all, as the docs
 * promise (node-redis used to retry the first connection for ever). */
static void test_pollers_exit_1_without_redis(void **state)
{
    fixture *f = *state;
    const char *cmds[N_LANGS] = {
        PY_BIN " examples/python/poller.py", "node examples/node/poller.mjs", "sh examples/redis-cli/poll.sh",
    };
    int checked = 0;
    for (int i = 0; i < N_LANGS; i++) {
        if (f->langs[i].unavailable) continue;
        char cmdline[600];
        snprintf(cmdline, sizeof cmdline, "ALLOCD_REDIS=unix:///nonexistent/allocd-test.sock timeout 20 %s b1 x1",
                 cmds[i]);
        int st;
        char *out = run(cmdline, &st);
        if (st != 1) fail_msg("%s with Redis unreachable: exit %d, want 1\n%s", f->langs[i].name, st, out);
        free(out);
        checked++;
    }
    if (!checked) skip();
}

static void test_messages_agree_across_languages(void **state)
{
    fixture *f = *state;
    static const char *const reasons[] = {
        "sold_out", "room_full", "no_room", "limit", "already_holding", "member_busy",
        "not_holding", "unknown_item", "unknown_order", "expired", "not_open", "closed",
        "paused", "throttled", "wrong_kind", "group_too_large", "no_invitation", "not_in_group",
        "conflict",
    };
    const char *cmds[N_LANGS] = {
        PY_BIN " examples/python/poller.py --explain", "node examples/node/poller.mjs --explain",
        "sh examples/redis-cli/poll.sh --explain",
    };
    char *outs[N_LANGS] = { 0 };
    int first = -1;
    for (int i = 0; i < N_LANGS; i++) {
        if (f->langs[i].unavailable) continue;
        char cmdline[8192];
        int st;
        snprintf(cmdline, sizeof cmdline, "%s%s", cmds[i], explain_args);
        outs[i] = run(cmdline, &st);
        if (st != 0) explain_fail(f->langs[i].name, outs[i], "exit status %d", st);
        if (strstr(outs[i], "refused (") || strstr(outs[i], "Unknown status"))
            explain_fail(f->langs[i].name, outs[i], "a status or reason without a message of its own");
        for (size_t k = 0; k < sizeof reasons / sizeof reasons[0]; k++) {
            char want[80];
            snprintf(want, sizeof want, "status=rejected reason=%s op=buy seq=3\nmessage: ", reasons[k]);
            if (!strstr(outs[i], want)) explain_fail(f->langs[i].name, outs[i], "no message for %s", reasons[k]);
        }
        if (!strstr(outs[i], "result id=w1 status=waiting op=swap seq=9\n"
                             "message: Your swap offer waits for the other student's answer.\n"))
            explain_fail(f->langs[i].name, outs[i], "a waiting swap offer is not shown as one");
        if (!strstr(outs[i], "result id=t-9 status=waiting op=buy qty=1 wait_pos=3 wait_no=4127 seq=90211\n"
                             "message: You are on the waitlist (place 3). Keep this page open: "
                             "your final result replaces this one.\n") ||
            !strstr(outs[i], "result id=t-10 status=waiting op=choose wait_pos=1 wait_no=2 seq=12\n"
                             "message: You are on the waitlist (place 1)."))
            explain_fail(f->langs[i].name, outs[i], "a waitlist place is not shown as one");
        if (!strstr(outs[i], "detail=\"unknown op \\\"fly\\\"\"") ||
            !strstr(outs[i], "developer: allocd refused the request as bad_request: unknown op \"fly\""))
            explain_fail(f->langs[i].name, outs[i], "invalid's detail is not shown right");
        if (first < 0) first = i;
        else if (strcmp(outs[first], outs[i])) {
            fprintf(stderr, "---- %s --explain\n%s", f->langs[first].name, outs[first]);
            explain_fail(f->langs[i].name, outs[i], "prints other lines than %s", f->langs[first].name);
        }
    }
    if (first < 0) skip();
    for (int i = 0; i < N_LANGS; i++) free(outs[i]);
}

/* After all scenarios: what the examples did left allocd's books exact. */
static void test_books_balance_after_examples(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < N_LANGS; i++) {
        if (f->langs[i].unavailable) continue;
        char key[80];
        snprintf(key, sizeof key, "%s-shop", f->langs[i].tag);
        long long dq = proc_int(f->c, "HGET alloc:{%s}:stats dequeued", key);
        long long pr = proc_int(f->c, "HGET alloc:{%s}:stats processed", key);
        long long du = proc_int(f->c, "HGET alloc:{%s}:stats duplicates", key);
        long long de = proc_int(f->c, "HGET alloc:{%s}:stats dead", key);
        assert_true(dq > 0);
        assert_int_equal(dq, pr + du + de);
        assert_int_equal(du, 1);               /* the one resubmission */
        assert_int_equal(proc_int(f->c, "LLEN alloc:{%s}:queue", key), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_agree_across_languages),
        cmocka_unit_test(test_python_examples),
        cmocka_unit_test(test_node_examples),
        cmocka_unit_test(test_pollers_exit_1_without_redis),
        cmocka_unit_test(test_redis_cli_examples),
        cmocka_unit_test(test_books_balance_after_examples),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
