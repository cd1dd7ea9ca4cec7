/* cmd_profiles.c -- `allocctl profiles load B --from FILE [--replace]` and
 * `allocctl profiles show B --user U`: the users' profiles of contract
 * 11.2 (P:{B}:profiles, user -> JSON object of strings and integers).
 *
 * The file is CSV in the items file's dialect (ctl_items.h): a header
 * `user,attr,...`, then a line per user. An unquoted integer becomes a
 * JSON integer, anything else (and every quoted cell) a string; empty
 * cells are left out. Each profile is checked with the daemon's own
 * reader (wire/profile.h) before anything is written, so what allocctl
 * writes the daemon takes: a profile it would count as none is a
 * FILE:LINE error here instead of a surprise in the round.
 */
#include "allocctl/cmd_profiles.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/ctl_items.h"
#include "base/textfile.h"
#include "wire/profile.h"

typedef struct profiles_file {
    const char *name;
    json_t *users;          /* user -> profile object, in file order */
} profiles_file;

static int file_fail(char *err, size_t errlen, const char *name, int line, const char *msg,
                     const char *arg)
{
    char m[300];
    snprintf(m, sizeof m, msg, arg);
    snprintf(err, errlen, "%s:%d: %s", name, line, m);
    return -1;
}

static int header(void *data, const ctl_csv_cell *h, size_t n, char *err, size_t errlen)
{
    profiles_file *f = data;
    if (n < 2 || strcmp(h[0].s, "user"))
        return file_fail(err, errlen, f->name, 1, "the header line must be user,attr[,attr...]%s", "");
    for (size_t i = 1; i < n; i++) {
        if (h[i].n == 0 || h[i].n > PROFILE_KEY_MAX)
            return file_fail(err, errlen, f->name, 1, "column '%s' needs a name of 1 to 64 characters",
                             h[i].s);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(h[i].s, h[j].s))
                return file_fail(err, errlen, f->name, 1, "column '%s' appears twice", h[i].s);
    }
    return 0;
}

/* An unquoted integer is an integer; everything else is a string. */
static json_t *cell_value(const ctl_csv_cell *c)
{
    if (!c->quoted) {
        json_t *v = ctl_cell_json(c->s, c->n);
        if (json_is_integer(v)) return v;
        json_decref(v);
    }
    return json_stringn(c->s, c->n);
}

static int user_ok(const ctl_csv_cell *c)
{
    if (c->n < 1 || c->n > ENGINE_ID_MAX) return 0;
    for (size_t i = 0; i < c->n; i++)
        if ((unsigned char)c->s[i] < 0x20 || c->s[i] == 0x7f) return 0;
    return 1;
}

static int row(void *data, int line, const ctl_csv_cell *h, size_t nh, const ctl_csv_cell *c,
               size_t n, char *err, size_t errlen)
{
    profiles_file *f = data;
    if (n != nh) return file_fail(err, errlen, f->name, line, "expected as many fields as the header%s", "");
    if (!user_ok(&c[0]))
        return file_fail(err, errlen, f->name, line, "user '%s' is not 1 to 64 characters without "
                         "control characters", c[0].s);
    if (json_object_get(f->users, c[0].s))
        return file_fail(err, errlen, f->name, line, "user '%s' appears twice", c[0].s);
    json_t *p = json_object();
    for (size_t i = 1; p && i < n; i++) {
        if (c[i].n == 0 && !c[i].quoted) continue;
        json_t *v = cell_value(&c[i]);
        if (!strcmp(h[i].s, "points") && !json_is_integer(v)) {
            json_decref(v);
            json_decref(p);
            return file_fail(err, errlen, f->name, line, "points '%s' is not an integer (draw_by=points "
                             "reads it as one)", c[i].s);
        }
        if (!v) { json_decref(p); return file_fail(err, errlen, f->name, line, "field %s is not UTF-8", h[i].s); }
        json_object_set_new(p, h[i].s, v);
    }
    char *text = p ? json_dumps(p, JSON_COMPACT) : NULL;
    profile check;
    char why[200] = "out of memory";
    int rc = text ? profile_parse(&check, text, strlen(text), why, sizeof why) : -ENOMEM;
    profile_free(&check);
    free(text);
    if (rc < 0) { json_decref(p); return file_fail(err, errlen, f->name, line, "%s", why); }
    json_object_set_new(f->users, c[0].s, p);
    return 0;
}

/* MULTI; [DEL]; HSET in slices of 1000 users; EXEC. */
static int write_profiles(ctx *x, json_t *users, int replace)
{
    size_t queued = (size_t)replace, n = 0, total = json_object_size(users);
    redisAppendCommand(x->c, "MULTI");
    if (replace) redisAppendCommand(x->c, "DEL %s", x->k.profiles);
    ctl_args a = { 0 };
    const char *user;
    json_t *p;
    json_object_foreach(users, user, p) {
        if (n % 1000 == 0) { ctl_args_reset(&a); ctl_args_add(&a, "HSET"); ctl_args_add(&a, x->k.profiles); }
        char *text = json_dumps(p, JSON_COMPACT);
        ctl_args_add(&a, user);
        ctl_args_add(&a, text ? text : "");
        free(text);
        if (!text) a.failed = 1;
        if (++n % 1000 == 0 || n == total) {
            redisAppendCommandArgv(x->c, (int)a.n, (const char **)a.v, a.len);
            queued++;
        }
    }
    int failed = a.failed;
    ctl_args_free(&a);
    redisAppendCommand(x->c, "EXEC");
    redisReply *exec = exec_reply(x, queued, "the profiles were not written (EXEC refused)");
    if (!exec) return EX_REDIS;
    freeReplyObject(exec);
    if (failed) { errmsg(x, "out of memory"); return EX_REDIS; }
    return EX_OK;
}

static int profiles_load(ctx *x, const char *batch, const char *from, int replace)
{
    if (!from) { errmsg(x, "--from FILE is required (try --help)"); return EX_USAGE; }
    int rc = ctx_batch(x, batch);
    if (rc != EX_OK) return rc;
    size_t len;
    char *text = textfile_read(from, &len);
    if (!text) { errmsg(x, "%s: %s", from, strerror(errno)); return EX_INPUT; }
    profiles_file f = { from, json_object() };
    static const ctl_csv_reader rd = { header, row };
    char err[400];
    rc = f.users ? ctl_csv_read(from, text, len, &rd, &f, err, sizeof err) : -1;
    free(text);
    if (rc == 0 && json_object_size(f.users) == 0) rc = file_fail(err, sizeof err, from, 0, "no users%s", "");
    if (rc < 0) { errmsg(x, "%s", err); json_decref(f.users); return EX_INPUT; }
    rc = ctx_connect(x);
    if (rc == EX_OK) rc = write_profiles(x, f.users, replace);
    if (rc == EX_OK)
        printf("batch %s: %zu profiles written to %s%s\n", x->batch, json_object_size(f.users),
               x->k.profiles, replace ? " (the old ones deleted)" : "");
    json_decref(f.users);
    return rc;
}

static int profiles_show(ctx *x, const char *batch, const char *user)
{
    if (!user) { errmsg(x, "--user U is required (try --help)"); return EX_USAGE; }
    int rc = ctx_batch(x, batch);
    if (rc == EX_OK) rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    redisReply *r = rcmd(x, "HGET %s %s", x->k.profiles, user);
    if (!r) return EX_REDIS;
    rc = EX_OK;
    if (r->type != REDIS_REPLY_STRING) {
        printf("%s: no profile (only_X and same_X items refuse this user)\n", user);
        rc = EX_NOT;
    } else {
        profile p;
        char why[200];
        if (profile_parse(&p, r->str, r->len, why, sizeof why) < 0) {
            printf("%s: %s\n%s: not a profile (%s): counts as no profile\n", user, r->str, user, why);
            rc = EX_NOT;
        } else {
            printf("%s: %s\n", user, r->str);
            for (size_t i = 0; i < p.n; i++) printf("  %s = %s\n", p.kv[i].key, p.kv[i].value);
        }
        profile_free(&p);
    }
    freeReplyObject(r);
    return rc;
}

static const char HELP_PROFILES[] =
"Usage: allocctl profiles load B --from FILE [--replace]\n"
"       allocctl profiles show B --user U\n"
"\n"
"Profiles (P:{B}:profiles, user -> JSON object) are what the items' only_X and same_X\n"
"attrs are checked against, and draw_by=points reads `points` from them. allocd reads\n"
"them at load and again every second: an edit holds for requests decided after it.\n"
"\n"
"load: FILE is CSV with a header `user,attr[,attr...]`, then one line per user. An\n"
"      unquoted integer becomes an integer, anything else a string (\"4\" quoted stays a\n"
"      string); empty cells are left out. Users of FILE replace their old profile; the\n"
"      others are kept unless --replace, which deletes every old profile first. Written\n"
"      in one MULTI/EXEC.\n"
"show: the user's profile and each attribute as the daemon compares it; exit 1 when the\n"
"      user has none, or has one the daemon cannot read (which counts as none).\n"
"\n"
"Exit: 0 done, 1 no profile (show), 2 usage, 3 Redis, 4 bad FILE (FILE:LINE: message).\n";

int cmd_profiles(ctx *x, int argc, char **argv, int at)
{
    const char *sub = at < argc ? argv[at] : "", *from = NULL, *user = NULL, *pos[MAX_POS], *b;
    size_t npos;
    int replace = 0;
    const opt spec[] = { GLOBAL_OPTS(x), { "from", 0, &from, NULL }, { "replace", 0, NULL, &replace },
                         { "user", 0, &user, NULL } };
    int load = !strcmp(sub, "load");
    x->cmd = load ? "profiles load" : "profiles show";
    if (!load && strcmp(sub, "show")) {
        x->cmd = "profiles";
        if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) return show_help(HELP_PROFILES);
        errmsg(x, "unknown subcommand '%s' (load, show)", sub);
        return EX_USAGE;
    }
    int rc = parse_opts(x, argc, argv, at + 1, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_PROFILES) : rc;
    if (npos != 1) { errmsg(x, "one batch (try --help)"); return EX_USAGE; }
    b = pos[0];
    return load ? profiles_load(x, b, from, replace) : profiles_show(x, b, user);
}
