/* test_engine_scenarios.c -- engine stories written as text files.
 *
 * Each .txt file in tests/data/engine is one test: a batch set up line by line,
 * then requests at given times with the result each must get. They read
 * like the examples in the docs, so a rule can be checked (and argued
 * about) without reading C. Order ids are the engine's own fallback ids
 * (1, 2, 3, ...), so scenarios can name them.
 *
 * Format, one statement per line, `#` starts a comment:
 *   kind stock|room
 *   meta KEY=VALUE ...          opens_at closes_at per_user hold_ms max_group
 *                               rate_max rate_window_ms penalty_ms
 *   item ID CAPACITY            attr ID KEY JSON
 *   holder USER ROOM SINCE REQ  order USER ID ITEM QTY STATE EXPIRES_AT
 *   participant USER            admin none|paused|closed
 *   TIME USER OP ARGS => EXPECT     (USER `-` for admin commands)
 *       buy ITEM [QTY] | confirm ORDER | cancel ORDER | choose ROOM |
 *       switch ROOM | release | auto [prefs=A,B] [filter=K:V,...] |
 *       group members=A,B [prefs=..] [filter=..] | pause | resume | close |
 *       set_capacity ITEM N
 *       EXPECT: granted ITEM [qty=N order=N expires_at=N rank=N] |
 *               done [ITEM|-] [qty=N ...] | rejected REASON | invalid
 *   TIME expire => N
 *   check free ITEM N | check room USER ROOM|- | check units USER N |
 *   check counter NAME N | check phase TIME NAME |
 *   check events TYPE/USER/ITEM/QTY ...   (since the last check; `-` = none;
 *                                          clears the drain lists)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/engine_groups.h"
#include "core/engine_swap.h"

#define MAX_TOK 32
#define MAX_LIST 16

typedef struct scenario {
    const char *path;
    int line;
    engine_meta meta;
    engine *e;
    char *tok[MAX_TOK];
    int n_tok;
    char id[32];            /* request id of the current line */
} scenario;

#define SC_FAIL(s, ...) do { \
        print_error("%s:%d: ", (s)->path, (s)->line); \
        print_error(__VA_ARGS__); \
        print_error("\n"); \
        fail(); \
    } while (0)

static int64_t num(scenario *s, const char *t)
{
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (errno || *end || end == t) SC_FAIL(s, "not a number: '%s'", t);
    return v;
}

static int64_t count_of(const char *name, const engine_counters *c)
{
    static const char *const n[] = { "processed", "granted", "done", "rejected",
        "invalid", "dead", "duplicates", "ctl", "participants", "free_units" };
    const int64_t v[] = { c->processed, c->granted, c->done, c->rejected, c->invalid,
                          c->dead, c->duplicates, c->ctl, c->participants,
                          c->free_units };
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        if (strcmp(n[i], name) == 0) return v[i];
    return INT64_MIN;
}

/* Splits a comma list in place. */
static size_t split_list(char *t, const char **out)
{
    size_t n = 0;
    for (char *p = strtok(t, ","); p && n < MAX_LIST; p = strtok(NULL, ",")) out[n++] = p;
    return n;
}

/* ------------------------------------------------------------ setup */

static void meta_set(scenario *s, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq) SC_FAIL(s, "meta wants KEY=VALUE, got '%s'", kv);
    size_t k = (size_t)(eq - kv);
    int64_t v = k == 6 && strncmp(kv, "groups", 6) == 0 ? 0 : num(s, eq + 1);
#define META(f) if (k == strlen(#f) && strncmp(kv, #f, k) == 0) { s->meta.f = v; return; }
    META(opens_at) META(closes_at) META(per_user) META(hold_ms) META(max_group)
    META(rate_max) META(rate_window_ms) META(penalty_ms)
#undef META
    if (k == 6 && strncmp(kv, "groups", 6) == 0) {   /* formed | listed */
        s->meta.groups = strcmp(eq + 1, "listed") == 0 ? GROUPS_LISTED : GROUPS_FORMED;
        return;
    }
    SC_FAIL(s, "unknown meta field '%s'", kv);
}

static int order_state(scenario *s, const char *t)
{
    static const char *const n[] = { "held", "confirmed", "expired", "cancelled" };
    for (int i = 0; i < 4; i++)
        if (strcmp(n[i], t) == 0) return ORDER_HELD + i;
    SC_FAIL(s, "unknown order state '%s'", t);
    return 0;
}

static engine *get_engine(scenario *s)
{
    if (!s->e) {
        s->e = engine_new(&s->meta, 1);
        if (!s->e) SC_FAIL(s, "engine_new failed (kind set?)");
    }
    return s->e;
}

/* Set-up statements; returns 0 when the line is not one. */
static int setup_line(scenario *s)
{
    char **t = s->tok;
    int n = s->n_tok, rc = 0;
    if (strcmp(t[0], "kind") == 0 && n == 2) {
        s->meta.kind = strcmp(t[1], "room") == 0 ? BATCH_ROOM : BATCH_STOCK;
    } else if (strcmp(t[0], "meta") == 0) {
        for (int i = 1; i < n; i++) meta_set(s, t[i]);
    } else if (strcmp(t[0], "item") == 0 && n == 3) {
        rc = engine_load_item(get_engine(s), t[1], num(s, t[2]));
    } else if (strcmp(t[0], "attr") == 0 && n == 4) {
        rc = engine_load_attr(get_engine(s), t[1], t[2], t[3]);
    } else if (strcmp(t[0], "holder") == 0 && n == 5) {
        rc = engine_load_room_holder(get_engine(s), t[1], t[2], num(s, t[3]), t[4]);
    } else if (strcmp(t[0], "order") == 0 && n == 7) {
        rc = engine_load_order(get_engine(s), t[1], (uint64_t)num(s, t[2]), t[3],
                               num(s, t[4]), order_state(s, t[5]), num(s, t[6]));
    } else if (strcmp(t[0], "participant") == 0 && n == 2) {
        rc = engine_load_participant(get_engine(s), t[1]);
    } else if (strcmp(t[0], "admin") == 0 && n == 2) {
        engine_load_admin_state(get_engine(s), strcmp(t[1], "paused") == 0 ? ADMIN_PAUSED
                                : strcmp(t[1], "closed") == 0 ? ADMIN_CLOSED : ADMIN_NONE);
    } else {
        return 0;
    }
    if (rc != 0) SC_FAIL(s, "loading failed: %s", strerror(-rc));
    return 1;
}

/* ------------------------------------------------------------ requests */

typedef struct req_lists {
    const char *prefs[MAX_LIST], *members[MAX_LIST], *to[MAX_LIST];
    engine_kv filter[MAX_LIST];
} req_lists;

/* key=value arguments of auto and group. */
static void list_arg(scenario *s, engine_request *r, req_lists *l, char *t)
{
    if (strncmp(t, "prefs=", 6) == 0) {
        r->n_prefs = split_list(t + 6, l->prefs);
        r->prefs = l->prefs;
    } else if (strncmp(t, "members=", 8) == 0) {
        r->n_members = split_list(t + 8, l->members);
        r->members = l->members;
    } else if (strncmp(t, "to=", 3) == 0) {
        r->n_to = split_list(t + 3, l->to);
        r->to = l->to;
    } else if (strncmp(t, "from=", 5) == 0) {
        r->peer = t + 5;
    } else if (strncmp(t, "with=", 5) == 0) {
        r->peer = t + 5;
    } else if (strncmp(t, "version=", 8) == 0) {
        r->version = num(s, t + 8);
    } else if (strncmp(t, "filter=", 7) == 0) {
        const char *pairs[MAX_LIST];
        r->has_filter = 1;
        r->n_filter = split_list(t + 7, pairs);
        for (size_t i = 0; i < r->n_filter; i++) {
            char *colon = strchr(pairs[i], ':');
            if (!colon) SC_FAIL(s, "filter pair wants KEY:JSON, got '%s'", pairs[i]);
            *colon = '\0';
            l->filter[i] = (engine_kv){ pairs[i], colon + 1 };
        }
        r->filter = l->filter;
    } else {
        SC_FAIL(s, "unknown argument '%s'", t);
    }
}

static void build_request(scenario *s, engine_request *r, req_lists *l, int arrow)
{
    char **t = s->tok;
    int nargs = arrow - 3;
    memset(r, 0, sizeof *r);
    snprintf(s->id, sizeof s->id, "L%d", s->line);   /* the line is the request id */
    r->id = s->id;
    r->seq = s->line;   /* a formed group is named g<seq>: g<line> here */
    r->user = strcmp(t[1], "-") == 0 ? NULL : t[1];
    r->op = engine_op_parse(t[2]);
    if (r->op == OP_NONE) SC_FAIL(s, "unknown op '%s'", t[2]);
    switch (r->op) {
    case OP_BUY:
        if (nargs < 1) SC_FAIL(s, "buy ITEM [QTY]");
        r->item = t[3];
        r->qty = nargs > 1 ? num(s, t[4]) : 1;
        break;
    case OP_CONFIRM: case OP_CANCEL:
        if (nargs != 1) SC_FAIL(s, "%s ORDER", t[2]);
        r->order = (uint64_t)num(s, t[3]);
        break;
    case OP_CHOOSE: case OP_SWITCH:
        if (nargs != 1) SC_FAIL(s, "%s ROOM", t[2]);
        r->item = t[3];
        break;
    case OP_SET_CAPACITY:
        if (nargs != 2) SC_FAIL(s, "set_capacity ITEM N");
        r->item = t[3];
        r->qty = num(s, t[4]);
        break;
    default:
        for (int i = 3; i < arrow; i++) list_arg(s, r, l, t[i]);
    }
}

static void expect_field(scenario *s, const engine_result *res, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq) SC_FAIL(s, "expected KEY=VALUE, got '%s'", kv);
    if (strncmp(kv, "group=", 6) == 0) {
        if (!res->group || strcmp(res->group, eq + 1) != 0)
            SC_FAIL(s, "group: expected %s, got %s", eq + 1, res->group ? res->group : "-");
        return;
    }
    int64_t want = num(s, eq + 1), got = 0;
    if (strncmp(kv, "qty=", 4) == 0) got = res->qty;
    else if (strncmp(kv, "version=", 8) == 0) got = res->has_version ? res->version : -1;
    else if (strncmp(kv, "members=", 8) == 0) got = (int64_t)res->n_members;
    else if (strncmp(kv, "order=", 6) == 0) got = (int64_t)res->order;
    else if (strncmp(kv, "expires_at=", 11) == 0) got = res->expires_at;
    else if (strncmp(kv, "rank=", 5) == 0) got = res->rank;
    else SC_FAIL(s, "unknown result field '%s'", kv);
    if (got != want) SC_FAIL(s, "%.*s: expected %lld, got %lld", (int)(eq - kv), kv,
                             (long long)want, (long long)got);
}

static void expect_result(scenario *s, const engine_result *res, int from)
{
    char **t = s->tok;
    const char *st = engine_status_name(res->status);
    if (from >= s->n_tok) SC_FAIL(s, "nothing expected after =>");
    if (!st || strcmp(st, t[from]) != 0)
        SC_FAIL(s, "expected %s, got %s%s%s", t[from], st ? st : "(none)",
                res->reason ? " " : "", res->reason ? engine_reason_name(res->reason) : "");
    int i = from + 1;
    if (res->status == STATUS_REJECTED) {
        if (i >= s->n_tok || strcmp(engine_reason_name(res->reason), t[i]) != 0)
            SC_FAIL(s, "expected reason %s, got %s", i < s->n_tok ? t[i] : "(none)",
                    engine_reason_name(res->reason));
        for (i++; i < s->n_tok; i++) expect_field(s, res, t[i]);
        return;
    }
    if (i < s->n_tok && !strchr(t[i], '=')) {
        const char *want = strcmp(t[i], "-") == 0 ? NULL : t[i];
        if (!(want ? res->item && strcmp(res->item, want) == 0 : res->item == NULL))
            SC_FAIL(s, "expected item %s, got %s", t[i], res->item ? res->item : "-");
        i++;
    }
    for (; i < s->n_tok; i++) expect_field(s, res, t[i]);
}

static void request_line(scenario *s, int arrow)
{
    engine *e = get_engine(s);
    int64_t now = num(s, s->tok[0]);
    if (strcmp(s->tok[1], "expire") == 0) {
        size_t n = engine_expire(e, now);
        if ((int64_t)n != num(s, s->tok[arrow + 1]))
            SC_FAIL(s, "expected %s expiries, got %zu", s->tok[arrow + 1], n);
        return;
    }
    engine_request r;
    req_lists l;
    engine_result res;
    build_request(s, &r, &l, arrow);
    engine_decide(e, &r, now, &res);
    expect_result(s, &res, arrow + 1);
}

/* ------------------------------------------------------------ checks */

static void check_events(scenario *s)
{
    engine *e = get_engine(s);
    size_t n = engine_event_count(e), want = (size_t)(s->n_tok - 2);
    for (size_t i = 0; i < n && i < want; i++) {
        const engine_event *ev = engine_event_at(e, i);
        char got[160];
        snprintf(got, sizeof got, "%s/%s/%s/%lld", engine_event_name(ev->type),
                 ev->user ? ev->user : "-", ev->item ? ev->item : "-",
                 (long long)ev->qty);
        if (strcmp(got, s->tok[2 + i]) != 0)
            SC_FAIL(s, "event %zu: expected %s, got %s", i + 1, s->tok[2 + i], got);
    }
    if (n != want) SC_FAIL(s, "expected %zu events, got %zu", want, n);
    engine_drain_clear(e);
}

/* check members|invited GROUP a,b,c (in order; `-` for none, `gone` for a
 * dissolved group) */
static void check_group_list(scenario *s, engine *e, const char *id, const char *which, const char *want)
{
    engine_group_view g;
    size_t i = 0, n = engine_group_count(e);
    for (; i < n; i++) {
        engine_group_view_at(e, i, &g);
        if (strcmp(g.id, id) == 0) break;
    }
    if (i == n) SC_FAIL(s, "no group %s", id);
    if (!g.alive) {
        if (strcmp(want, "gone") != 0) SC_FAIL(s, "group %s is dissolved", id);
        return;
    }
    const char *const *v = strcmp(which, "members") == 0 ? g.members : g.invited;
    size_t nv = strcmp(which, "members") == 0 ? g.n_members : g.n_invited;
    char got[512] = "";
    for (size_t k = 0; k < nv; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", k ? "," : "", v[k]);
    if (!nv) snprintf(got, sizeof got, "-");
    if (strcmp(got, want) != 0) SC_FAIL(s, "%s of %s: expected %s, got %s", which, id, want, got);
}

/* check resolved REQ STATUS [REASON|ITEM]: a waiting swap result replaced
 * since the last drain (the request id of line N is LN) */
static void check_resolved(scenario *s, engine *e)
{
    char **t = s->tok;
    for (size_t i = 0; i < engine_swap_resolved_count(e); i++) {
        engine_swap_resolved r;
        engine_swap_resolved_at(e, i, &r);
        if (strcmp(r.req, t[2])) continue;
        const char *st = engine_status_name(r.res.status);
        if (strcmp(st, t[3])) SC_FAIL(s, "resolved %s: expected %s, got %s", t[2], t[3], st);
        const char *d = r.res.status == STATUS_REJECTED ? engine_reason_name(r.res.reason) : r.res.item;
        if (s->n_tok > 4 && (!d || strcmp(d, t[4])))
            SC_FAIL(s, "resolved %s: expected %s, got %s", t[2], t[4], d ? d : "-");
        return;
    }
    SC_FAIL(s, "no resolved result for %s", t[2]);
}

static void check_line(scenario *s)
{
    engine *e = get_engine(s);
    char **t = s->tok;
    if (s->n_tok >= 2 && strcmp(t[1], "events") == 0) {
        check_events(s);
        return;
    }
    if (s->n_tok >= 4 && strcmp(t[1], "resolved") == 0) {
        check_resolved(s, e);
        return;
    }
    if (s->n_tok != 4) SC_FAIL(s, "check WHAT ARG VALUE");
    engine_item_view iv;
    engine_user_view uv;
    if (strcmp(t[1], "free") == 0) {
        if (engine_item_view_get(e, t[2], &iv) < 0) SC_FAIL(s, "no item %s", t[2]);
        if (iv.free != num(s, t[3]))
            SC_FAIL(s, "free %s: expected %s, got %lld", t[2], t[3], (long long)iv.free);
    } else if (strcmp(t[1], "room") == 0) {
        const char *room = engine_user_view_get(e, t[2], &uv) == 0 ? uv.room : NULL;
        const char *want = strcmp(t[3], "-") == 0 ? NULL : t[3];
        if (!(want ? room && strcmp(room, want) == 0 : room == NULL))
            SC_FAIL(s, "room of %s: expected %s, got %s", t[2], t[3], room ? room : "-");
    } else if (strcmp(t[1], "units") == 0) {
        int64_t units = engine_user_view_get(e, t[2], &uv) == 0 ? uv.units : 0;
        if (units != num(s, t[3]))
            SC_FAIL(s, "units of %s: expected %s, got %lld", t[2], t[3], (long long)units);
    } else if (strcmp(t[1], "counter") == 0) {
        int64_t v = count_of(t[2], engine_get_counters(e));
        if (v == INT64_MIN) SC_FAIL(s, "unknown counter %s", t[2]);
        if (v != num(s, t[3]))
            SC_FAIL(s, "counter %s: expected %s, got %lld", t[2], t[3], (long long)v);
    } else if (strcmp(t[1], "group") == 0) {
        const char *g = engine_user_view_get(e, t[2], &uv) == 0 ? uv.group : NULL;
        const char *want = strcmp(t[3], "-") == 0 ? NULL : t[3];
        if (!(want ? g && strcmp(g, want) == 0 : g == NULL))
            SC_FAIL(s, "group of %s: expected %s, got %s", t[2], t[3], g ? g : "-");
    } else if (strcmp(t[1], "members") == 0 || strcmp(t[1], "invited") == 0) {
        check_group_list(s, e, t[2], t[1], t[3]);
    } else if (strcmp(t[1], "phase") == 0) {
        const char *p = engine_phase_name(engine_phase_at(e, num(s, t[2])));
        if (strcmp(p, t[3]) != 0) SC_FAIL(s, "phase at %s: expected %s, got %s", t[2], t[3], p);
    } else {
        SC_FAIL(s, "unknown check '%s'", t[1]);
    }
}

/* ------------------------------------------------------------ driver */

static void tokenize(scenario *s, char *line)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    s->n_tok = 0;
    for (char *p = strtok(line, " \t\r\n"); p; p = strtok(NULL, " \t\r\n")) {
        if (s->n_tok == MAX_TOK) SC_FAIL(s, "line too long");
        s->tok[s->n_tok++] = p;
    }
}

static int arrow_at(const scenario *s)
{
    for (int i = 0; i < s->n_tok; i++)
        if (strcmp(s->tok[i], "=>") == 0) return i;
    return -1;
}

/* After every line, loading included, the engine must be sound. */
static void one_line(scenario *s, char *line)
{
    tokenize(s, line);
    if (s->n_tok == 0) return;
    int arrow = arrow_at(s);
    if (arrow >= 0) {
        if (arrow < 2) SC_FAIL(s, "TIME USER OP ... => EXPECT");
        request_line(s, arrow);
    } else if (strcmp(s->tok[0], "check") == 0) {
        check_line(s);
    } else if (!setup_line(s)) {
        SC_FAIL(s, "cannot read this line");
    }
    const char *why = s->e ? engine_check_invariants(s->e) : NULL;
    if (why) SC_FAIL(s, "invariant broken: %s", why);
}

static void run_file(void **state)
{
    scenario *s = *state;
    engine_meta_defaults(&s->meta);
    FILE *f = fopen(s->path, "r");
    if (!f) fail_msg("%s: %s", s->path, strerror(errno));
    char buf[1024];
    while (fgets(buf, sizeof buf, f)) {
        s->line++;
        one_line(s, buf);
    }
    fclose(f);
    if (!s->e) fail_msg("%s: no statements", s->path);
}

/* Frees the engine also when a check failed halfway through a file. */
static int free_engine(void **state)
{
    scenario *s = *state;
    engine_free(s->e);
    s->e = NULL;
    return 0;
}

/* The data lives in the source tree; tests normally run from its root, but
 * also work from a build directory below it. */
static const char *find_dir(void)
{
    static const char *const dirs[] = { "tests/data/engine", "../tests/data/engine",
        "../../tests/data/engine", "../../../tests/data/engine",
        "../../../../tests/data/engine" };
    const char *env = getenv("ENGINE_SCENARIO_DIR");
    if (env && *env) return env;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        DIR *d = opendir(dirs[i]);
        if (d) {
            closedir(d);
            return dirs[i];
        }
    }
    return NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    const char *dir = find_dir();
    if (!dir) {
        fprintf(stderr, "tests/data/engine not found (set ENGINE_SCENARIO_DIR)\n");
        return 1;
    }
    DIR *d = opendir(dir);
    char *paths[256];
    size_t n = 0;
    for (struct dirent *de; d && (de = readdir(d)) && n < 256;) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".txt") != 0) continue;
        paths[n] = malloc(strlen(dir) + len + 2);
        assert_non_null(paths[n]);
        sprintf(paths[n++], "%s/%s", dir, de->d_name);
    }
    if (d) closedir(d);
    qsort(paths, n, sizeof *paths, by_name);
    struct CMUnitTest *tests = calloc(n ? n : 1, sizeof *tests);
    scenario *cases = calloc(n ? n : 1, sizeof *cases);
    assert_true(tests && cases);
    for (size_t i = 0; i < n; i++) {
        cases[i].path = paths[i];
        tests[i] = (struct CMUnitTest){ .name = strrchr(paths[i], '/') + 1,
                                        .test_func = run_file,
                                        .teardown_func = free_engine,
                                        .initial_state = &cases[i] };
    }
    int rc = n ? _cmocka_run_group_tests("engine scenarios", tests, n, NULL, NULL) : 1;
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(tests);
    free(cases);
    return rc;
}
