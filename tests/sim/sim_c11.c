/* sim_c11.c -- contract 11 in the simulator (see sim_c11.h).
 *
 * The checks read the contract themselves rather than call allocctl's or
 * the engine's reading of it: a rule is admitted here by a dozen lines of
 * jansson (admits), so a mistake shared by the engine and `allocctl
 * verify` still shows.
 *
 * Profile edits are what makes eligibility depend on timing: the worker
 * reads the profiles again at most every second, and a decision made
 * before a pause or a delayed reply commits later. So the users are of
 * two kinds. Most never see their profile change: their grants are held
 * to that one profile exactly, at every commit. A few movers are edited
 * while the batch is served -- class year, community, points, never the
 * gender that same_gender rooms compare -- and a grant of theirs must be
 * admitted by one of the profiles they had until then. Whether an edit is
 * read in time is the drain's probe: with no fault left, a request pushed
 * 3.5 s after an edit (the rescan's second and its half-second grace, a
 * command deadline, and room to spare) must be decided with it.
 */
#include "sim/sim_c11.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"
#include "sim/sim.h"

#define MAX_USERS 64
#define MAX_ITEMS 16
#define PROBE_USER "p1"
#define PROBE_ID "probe1"

typedef struct c11_user {
    char id[16];
    int mover;
    const char *gender;       /* fixed for the run; NULL: none in any profile */
    json_t **ver;             /* every profile the user had, NULL = none or not a profile */
    size_t nver;
    int malformed;            /* the one profile it has is not one */
} c11_user;

/* A grant of a group request seen in the log, waiting for its commit. */
typedef struct group_grant {
    char req[40], item[16], user[16];
    int64_t held_before, cap;
} group_grant;

struct c11 {
    c11_env env;
    int on, room, nusers, nitems;
    int draw_points, exact;
    c11_user users[MAX_USERS + 2];   /* [1..nusers], then the probe */
    json_t *attrs[MAX_ITEMS + 1];
    int64_t cap[MAX_ITEMS + 1];
    int n_malformed;
    ctl_replay *replay;
    group_grant *gg;
    size_t ngg, capgg;
    char **written;                  /* result ids of the transaction committing */
    size_t nwritten, capwritten;
    /* the draw, replayed once the seed is revealed (draw_replay below) */
    struct replayed *drawn;
    int drawn_ok;
    size_t drawn_len;
    char drawn_seed[72];
    /* the drain's probe */
    int probe_item;                  /* 0: no probe this seed */
    c11_counts counts;
};

static const char *const genders[] = { "F", "M", "X" };

static void drawn_drop(c11 *c);

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) abort();
    return p;
}

static c11_user *user_of(c11 *c, const char *id)
{
    for (int i = 1; i <= c->nusers + 1; i++)
        if (!strcmp(c->users[i].id, id)) return &c->users[i];
    return NULL;
}

static int item_index(const c11 *c, const char *id)
{
    const char *pfx = c->room ? "R" : "sku";
    size_t n = strlen(pfx);
    if (strncmp(id, pfx, n)) return 0;
    int i = atoi(id + n);
    return i >= 1 && i <= c->nitems ? i : 0;
}

/* ------------------------------------------------------------ the rules -- */

static int only_key(const char *k) { return !strncmp(k, "only_", 5) && k[5]; }
static int same_key(const char *k, const json_t *v) { return !strncmp(k, "same_", 5) && k[5] && json_is_true(v); }

/* The simulator's reading of 11.2 for one profile (an object, NULL =
 * none): every only_X rule has X among its values, and the profile has X
 * for every same_X = true rule (whether it equals the holders' X is the
 * holders' check). */
static int admits(const json_t *attrs, const json_t *prof)
{
    const char *key;
    json_t *r;
    json_object_foreach((json_t *)attrs, key, r) {
        int only = only_key(key), same = same_key(key, r);
        if (!only && !same) continue;
        const json_t *have = prof ? json_object_get(prof, key + 5) : NULL;
        if (!have) return 0;
        if (!only) continue;
        int ok = 0;
        if (json_is_array(r)) {
            size_t i;
            json_t *v;
            json_array_foreach(r, i, v) ok |= json_equal(v, have);
        } else {
            ok = json_equal(r, have);
        }
        if (!ok) return 0;
    }
    return 1;
}

static int has_same(const json_t *attrs)
{
    const char *key;
    json_t *r;
    json_object_foreach((json_t *)attrs, key, r) if (same_key(key, r)) return 1;
    return 0;
}

static int has_only(const json_t *attrs)
{
    const char *key;
    json_t *r;
    json_object_foreach((json_t *)attrs, key, r) if (only_key(key)) return 1;
    return 0;
}

/* Whether some profile the user has had admits them to item i. */
static int ever_admitted(const c11_user *u, const json_t *attrs)
{
    for (size_t v = 0; v < u->nver; v++)
        if (admits(attrs, u->ver[v])) return 1;
    return u->nver == 0 && admits(attrs, NULL);
}

/* --------------------------------------------------------------- draws -- */

static json_t *draw_profile(const char *gender)
{
    json_t *p = json_object();
    if (gender) json_object_set_new(p, "gender", json_string(gender));
    if (sim_chance(0.9)) json_object_set_new(p, "year", json_integer(1 + (int)sim_below(4)));
    if (sim_chance(0.6)) json_object_set_new(p, "llc", json_string(sim_chance(0.5) ? "stem" : "arts"));
    if (sim_chance(0.85)) {
        int pts = 10 * (int)sim_below(5);   /* few values: ties keep the shuffled order */
        /* now and then points as a string: not an integer, so 0 for the draw */
        json_object_set_new(p, "points", sim_chance(0.05) ? json_sprintf("%d", pts) : json_integer(pts));
    }
    return p;
}

/* Texts that are not profiles (contract 11.2: counted as none). */
static const char *const malformed[] = {
    "[1,2]", "\"F\"", "42", "{\"gender\":\"F\",\"year\":2.5}", "{\"gender\":{\"x\":1}}",
    "{\"gender\":true}", "{\"gender\":null}", "{\"gender\":", "{\"llc\":[\"stem\"]}",
};

static void draw_users(c11 *c)
{
    for (int i = 1; i <= c->nusers; i++) {
        c11_user *u = &c->users[i];
        snprintf(u->id, sizeof u->id, "u%d", i);
        u->mover = i > c->nusers - 6;
        int g = (int)sim_below(20);
        const char *gender = g < 9 ? genders[0] : g < 18 ? genders[1] : genders[2];
        u->ver = xcalloc(64, sizeof *u->ver);
        if (u->mover) {
            u->gender = gender;
            u->ver[u->nver++] = draw_profile(gender);
            continue;
        }
        int k = (int)sim_below(100);
        if (k < 8) {
            u->nver = 0;                       /* no profile */
        } else if (k < 15) {
            u->malformed = 1;                  /* not a profile: counts as none */
            u->nver = 1;
            u->ver[0] = NULL;
            c->n_malformed++;
        } else {
            u->gender = sim_chance(0.9) ? gender : NULL;
            u->ver[u->nver++] = draw_profile(u->gender);
        }
    }
}

/* One item's rules: only_X with a value or a list, same_gender, a same_X
 * other than true (no rule), on rooms and stock alike. */
static json_t *draw_rules(int room, int i)
{
    json_t *a = json_object();
    if (room) json_object_set_new(a, "floor", json_sprintf("%d", 1 + i % 2));
    if (room && sim_chance(0.3)) {
        static const char *const g[][2] = { { "F", NULL }, { "M", NULL }, { "F", "X" }, { "M", "X" } };
        int k = (int)sim_below(4);
        json_object_set_new(a, "only_gender", g[k][1] ? json_pack("[ss]", g[k][0], g[k][1]) : json_string(g[k][0]));
    }
    if (sim_chance(room ? 0.3 : 0.15)) json_object_set_new(a, "same_gender", json_true());
    if (sim_chance(room ? 0.2 : 0.25)) {
        int k = (int)sim_below(3);
        json_object_set_new(a, "only_year", k == 0 ? json_pack("[ii]", 3, 4) : k == 1 ? json_pack("[iii]", 2, 3, 4)
                                                                                    : json_integer(2));
    }
    if (sim_chance(0.12)) json_object_set_new(a, "only_llc", sim_chance(0.5) ? json_string("stem") : json_pack("[ss]", "stem", "arts"));
    if (sim_chance(0.05)) json_object_set_new(a, "same_year", json_string("yes"));
    return a;
}

/* The probe: an item with an only_X rule and no same_X (a same_X refusal
 * would hide a stale profile), and a profile for the probe user that it
 * admits. */
static void draw_probe(c11 *c)
{
    c11_user *p = &c->users[c->nusers + 1];
    snprintf(p->id, sizeof p->id, "%s", PROBE_USER);
    p->ver = xcalloc(64, sizeof *p->ver);
    for (int i = 1; i <= c->nitems && !c->probe_item; i++) {
        if (!has_only(c->attrs[i]) || has_same(c->attrs[i])) continue;
        for (int t = 0; t < 50; t++) {
            json_t *prof = draw_profile(genders[sim_below(3)]);
            json_object_set_new(prof, "year", json_integer(2 + (int)sim_below(3)));
            if (admits(c->attrs[i], prof)) { p->ver[p->nver++] = prof; c->probe_item = i; break; }
            json_decref(prof);
        }
    }
}

c11 *c11_new(const c11_env *env, int room, int nusers, int nitems)
{
    if (nusers > MAX_USERS || nitems > MAX_ITEMS) abort();
    c11 *c = xcalloc(1, sizeof *c);
    c->env = *env;
    c->room = room;
    c->nusers = nusers;
    c->nitems = nitems;
    c->on = sim_chance(0.6);
    c->draw_points = sim_chance(0.5);
    c->exact = room && sim_chance(0.35);
    for (int i = 1; i <= nitems; i++) {
        c->attrs[i] = c->on ? draw_rules(room, i) : json_object();
        if (!c->on && room) json_object_set_new(c->attrs[i], "floor", json_sprintf("%d", 1 + i % 2));
    }
    if (c->on) {
        draw_users(c);
        draw_probe(c);
    } else {
        for (int i = 1; i <= nusers; i++) snprintf(c->users[i].id, sizeof c->users[i].id, "u%d", i);
    }
    return c;
}

void c11_free(c11 *c)
{
    if (!c) return;
    for (int i = 1; i <= c->nusers + 1; i++) {
        for (size_t v = 0; v < c->users[i].nver; v++) json_decref(c->users[i].ver[v]);
        free(c->users[i].ver);
    }
    for (int i = 1; i <= c->nitems; i++) json_decref(c->attrs[i]);
    for (size_t i = 0; i < c->nwritten; i++) free(c->written[i]);
    free(c->written);
    free(c->gg);
    drawn_drop(c);
    free(c);
}

int c11_on(const c11 *c) { return c->on; }
const c11_counts *c11_counts_get(const c11 *c) { return &c->counts; }

void c11_item_attrs(const c11 *c, int i, char *buf, size_t n)
{
    buf[0] = '\0';
    if (!json_object_size(c->attrs[i])) return;
    char *s = json_dumps(c->attrs[i], JSON_COMPACT);
    snprintf(buf, n, "%s", s ? s : "");
    free(s);
}

void c11_item_capacity(c11 *c, int i, int64_t cap) { c->cap[i] = cap; }

/* ----------------------------------------------------------- the writes -- */

static int hset(c11 *c, const char *key, const char *field, const char *value)
{
    const char *argv[] = { "HSET", key, field, value };
    return c->env.cmd(c->env.ud, 4, argv);
}

static int write_profile(c11 *c, const c11_user *u, const json_t *prof)
{
    char *s = json_dumps(prof, JSON_COMPACT);
    int rc = hset(c, c->env.keys->profiles, u->id, s);
    free(s);
    return rc;
}

void c11_setup(c11 *c)
{
    if (c->draw_points) hset(c, c->env.keys->meta, "draw_by", "points");
    if (c->exact) hset(c, c->env.keys->meta, "group_fill", "exact");
    if (!c->on) return;
    for (int i = 1; i <= c->nusers + 1; i++) {
        c11_user *u = &c->users[i];
        if (u->malformed) hset(c, c->env.keys->profiles, u->id, malformed[sim_below(sizeof malformed / sizeof *malformed)]);
        else if (u->nver) write_profile(c, u, u->ver[0]);
    }
}

void c11_edit(c11 *c)
{
    if (!c->on) return;
    c11_user *u = &c->users[c->nusers - 5 + (int)sim_below(6)];
    if (!u->mover || u->nver == 64) return;
    json_t *p = draw_profile(u->gender);
    if (write_profile(c, u, p) < 0) { json_decref(p); return; }   /* refused: out of memory */
    u->ver[u->nver++] = p;
    c->counts.edits++;
}

/* ---------------------------------------------------- the log's events -- */

static int request_is(c11 *c, const char *req, const char *op, int *check)
{
    const char *raw = req && *req ? c->env.request(c->env.ud, req) : NULL;
    json_t *j = raw ? json_loads(raw, 0, NULL) : NULL;
    const char *o = json_string_value(json_object_get(j, "op"));
    int is = o && !strcmp(o, op);
    if (check) *check = json_is_true(json_object_get(j, "check"));
    json_decref(j);
    return is;
}

static void note_group_grant(c11 *c, const replay_event *ev, int64_t held, int64_t cap)
{
    if (c->ngg == c->capgg) {
        c->capgg = c->capgg ? c->capgg * 2 : 16;
        c->gg = realloc(c->gg, c->capgg * sizeof *c->gg);
        if (!c->gg) abort();
    }
    group_grant *g = &c->gg[c->ngg++];
    snprintf(g->req, sizeof g->req, "%s", ev->req);
    snprintf(g->item, sizeof g->item, "%s", ev->item);
    snprintf(g->user, sizeof g->user, "%s", ev->user);
    g->held_before = held;
    g->cap = cap;
}

/* Every grant in the log, before it is replayed (the replay's state is
 * the one it was decided on): eligibility, and group_fill = exact for a
 * single user's grant. */
static void on_event(void *ud, const char *entry, const replay_event *ev)
{
    c11 *c = ud;
    if (sim_w->verbose) {
        const char *raw = ev->req && *ev->req ? c->env.request(c->env.ud, ev->req) : NULL;
        fprintf(stderr, "sim: log %s: %s %s %s %s%s: %s\n", entry, ev->type_name, ev->user, ev->item,
                ev->by && *ev->by ? "by " : "", ev->by ? ev->by : "", raw ? raw : ev->req);
    }
    if (ev->type != EVENT_GRANT || sim_w->failed) return;
    int i = item_index(c, ev->item);
    if (!i) return;
    int check = 0;
    int staff = ev->by && !strcmp(ev->by, "staff");
    if (staff) {
        c->counts.staff++;
        request_is(c, ev->req, "assign", &check);
        if (!check) return;   /* a staff exception: placed whatever the rules */
    }
    const replay_item *ri = replay_item_get(ctl_replay_state(c->replay), ev->item);
    int64_t held = ri ? ri->held : 0, cap = ri && ri->cap_known ? ri->cap : c->cap[i];
    c11_user *u = user_of(c, ev->user);
    if (c->on && u && !ever_admitted(u, c->attrs[i])) {
        char *a = json_dumps(c->attrs[i], JSON_COMPACT);
        sim_fail("eligibility: %s was given %s (entry %s, request %s) though no profile %s had admits it: %s",
                 ev->user, ev->item, entry, ev->req, u->mover ? "they ever" : "they", a ? a : "");
        free(a);
        return;
    }
    c->counts.grants_checked++;
    if (!c->room || staff || request_is(c, ev->req, "swap", NULL)) return;
    if (request_is(c, ev->req, "group", NULL)) { note_group_grant(c, ev, held, cap); return; }
    if (c->exact && cap > 1 && held == 0)
        sim_fail("group_fill exact: %s alone was given %s, an empty room of %" PRId64 " beds (entry %s, request %s)",
                 ev->user, ev->item, cap, entry, ev->req);
}

void c11_attach(c11 *c, ctl_replay *r)
{
    c->replay = r;
    ctl_replay_observe(r, on_event, c);
    for (int i = 1; i <= c->nitems; i++) {
        char item[16];
        snprintf(item, sizeof item, "%s%d", c->room ? "R" : "sku", i);
        if (c->cap[i]) ctl_replay_capacity(r, item, c->cap[i]);
    }
    c->ngg = 0;   /* a new replay sees the log again from its start */
}

void c11_pre(c11 *c, int argc, char **argv, size_t *lens)
{
    for (int i = 2; i + 1 < argc; i += 2) {
        if (c->nwritten == c->capwritten) {
            c->capwritten = c->capwritten ? c->capwritten * 2 : 32;
            c->written = realloc(c->written, c->capwritten * sizeof *c->written);
            if (!c->written) abort();
        }
        c->written[c->nwritten++] = strndup(argv[i], lens[i]);
    }
}

/* ---------------------------------------------------------- the commits -- */

static json_t *result_of(c11 *c, const char *id)
{
    size_t len;
    const char *v = simr_hget(sim_w->redis, c->env.keys->results, id, &len);
    return v ? json_loadb(v, len, 0, NULL) : NULL;
}

static int in_members(const json_t *members, const char *user)
{
    size_t i;
    json_t *m;
    json_array_foreach(members, i, m) if (json_string_value(m) && !strcmp(json_string_value(m), user)) return 1;
    return 0;
}

/* The group grants of one request: one per member of its result, all in
 * its room; with group_fill exact, an empty room of exactly that many. */
static void check_group(c11 *c, size_t from, size_t to)
{
    const group_grant *g = &c->gg[from];
    json_t *res = result_of(c, g->req);
    const char *status = json_string_value(json_object_get(res, "status"));
    const char *item = json_string_value(json_object_get(res, "item"));
    json_t *members = json_object_get(res, "members");
    size_t n = to - from;
    c->counts.groups_checked++;
    if (!status || strcmp(status, "granted") || !item || json_array_size(members) != n)
        sim_fail("group %s: %zu grants in the log (the first to %s in %s), its result has %zu members: %s", g->req, n,
                 g->user, g->item, json_array_size(members), status ? status : "(no result)");
    for (size_t k = from; k < to && !sim_w->failed; k++)
        if (strcmp(c->gg[k].item, item) || !in_members(members, c->gg[k].user))
            sim_fail("group %s: %s was given %s, but the group's result is %s for its members", g->req, c->gg[k].user,
                     c->gg[k].item, item);
    if (!sim_w->failed && c->exact && (g->held_before != 0 || g->cap != (int64_t)n))
        sim_fail("group_fill exact: the group of %s (%zu members) took %s, %" PRId64 " beds, %" PRId64 " held before",
                 g->req, n, g->item, g->cap, g->held_before);
    json_decref(res);
}

static void check_groups(c11 *c)
{
    size_t from = 0;
    for (size_t k = 1; k <= c->ngg && !sim_w->failed; k++)
        if (k == c->ngg || strcmp(c->gg[k].req, c->gg[from].req)) {
            check_group(c, from, k);
            from = k;
        }
    c->ngg = 0;
}

typedef struct holders_walk {
    c11 *c;
    const char *gender[MAX_ITEMS + 1];   /* same_gender: the first non-exception holder's */
    const char *first[MAX_ITEMS + 1];
} holders_walk;

static void holding(holders_walk *w, const char *user, const char *item, int staff)
{
    c11 *c = w->c;
    int i = item_index(c, item);
    c11_user *u = user_of(c, user);
    if (!i || !u || staff || sim_w->failed) return;
    if (!u->mover && !admits(c->attrs[i], u->nver ? u->ver[0] : NULL))
        sim_fail("eligibility: %s holds %s, which their profile does not admit", user, item);
    if (!has_same(c->attrs[i])) return;
    /* same_gender is the only same_X drawn; a user's gender never changes */
    if (!u->gender) sim_fail("eligibility: %s holds %s (same_gender) without a gender", user, item);
    else if (!w->gender[i]) { w->gender[i] = u->gender; w->first[i] = u->id; }
    else if (strcmp(w->gender[i], u->gender))
        sim_fail("eligibility: %s holds %s with gender %s beside %s, gender %s (same_gender)", user, item, u->gender,
                 w->first[i], w->gender[i]);
}

static void holder_entry(void *ud, const char *k, size_t kn, const char *v, size_t vn)
{
    holders_walk *w = ud;
    char user[64];
    snprintf(user, sizeof user, "%.*s", (int)kn, k);
    json_t *h = json_loadb(v, vn, 0, NULL);
    const char *by = json_string_value(json_object_get(h, "by"));
    if (w->c->room) {
        holding(w, user, json_string_value(json_object_get(h, "item")), by && !strcmp(by, "staff"));
    } else {
        size_t i;
        json_t *o;
        json_array_foreach(json_object_get(h, "orders"), i, o) {
            const char *ob = json_string_value(json_object_get(o, "by"));
            holding(w, user, json_string_value(json_object_get(o, "item")), ob && !strcmp(ob, "staff"));
        }
    }
    json_decref(h);
}

static void check_holders(c11 *c)
{
    holders_walk w = { c, { 0 }, { 0 } };
    simr_hash_each(sim_w->redis, c->env.keys->holders, holder_entry, &w);
}

static void check_bad_profiles(c11 *c)
{
    const char *b = simr_hget(sim_w->redis, c->env.keys->stats, "bad_profiles", NULL);
    if (b && strtoll(b, NULL, 10) != c->n_malformed)
        sim_fail("profiles: stats.bad_profiles is %s, %d profiles are not profiles", b, c->n_malformed);
}

/* ------------------------------------------------------------- the draw -- */

/* The draw of PROTOCOL.md 9.1 / 11.3, replayed here from its text: tickets
 * in the order of each user's first kept request, Fisher-Yates driven by
 * SHA-256 in counter mode, then (with recorded points) a stable sort by
 * points, highest first, then the throttled behind the others. */
typedef struct draw_rng { uint8_t seed[32], block[32]; uint64_t counter; int used; } draw_rng;

static uint64_t rng_next(draw_rng *g)
{
    if (g->used == 4) {
        uint8_t in[40];
        memcpy(in, g->seed, 32);
        for (int i = 0; i < 8; i++) in[32 + i] = (uint8_t)(g->counter >> (56 - 8 * i));
        sha256(in, sizeof in, g->block);
        g->counter++;
        g->used = 0;
    }
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x = x << 8 | g->block[8 * g->used + i];
    g->used++;
    return x;
}

static uint64_t rng_below(draw_rng *g, uint64_t bound)
{
    uint64_t t = (0 - bound) % bound;
    for (;;) {
        uint64_t x = rng_next(g);
        if (x >= t) return x % bound;
    }
}

typedef struct ticket { char user[72]; int throttled, has_points; int64_t points; size_t pos; } ticket;
typedef struct pool_req { int64_t seq; char id[72]; size_t ticket; } pool_req;

typedef struct replayed {
    ticket *t;
    size_t nt;
    pool_req *r;
    size_t nr;
    int points_recorded;
} replayed;

static size_t ticket_of(replayed *d, const char *user, int add)
{
    for (size_t i = 0; i < d->nt; i++)
        if (!strcmp(d->t[i].user, user)) return i;
    if (!add) return (size_t)-1;
    d->t = realloc(d->t, (d->nt + 1) * sizeof *d->t);
    if (!d->t) abort();
    memset(&d->t[d->nt], 0, sizeof *d->t);
    snprintf(d->t[d->nt].user, sizeof d->t[d->nt].user, "%s", user);
    return d->nt++;
}

/* One entry of P:{B}:early: "<seq> <request>", "! <user>", "= <points> <user>". */
static int read_entry(replayed *d, const char *e, size_t len)
{
    char buf[4200];
    if (len >= sizeof buf) return -1;
    memcpy(buf, e, len);
    buf[len] = '\0';
    if (buf[0] == '!' && buf[1] == ' ') { d->t[ticket_of(d, buf + 2, 1)].throttled = 1; return 0; }
    if (buf[0] == '=' && buf[1] == ' ') {
        char *sp = strchr(buf + 2, ' ');
        if (!sp) return -1;
        size_t k = ticket_of(d, sp + 1, 0);
        if (k == (size_t)-1) return -1;
        d->t[k].points = strtoll(buf + 2, NULL, 10);
        d->t[k].has_points = d->points_recorded = 1;
        return 0;
    }
    char *sp = strchr(buf, ' ');
    json_t *j = sp ? json_loads(sp + 1, 0, NULL) : NULL;
    const char *id = json_string_value(json_object_get(j, "id")), *user = json_string_value(json_object_get(j, "user"));
    int rc = id && user ? 0 : -1;
    if (!rc) {
        size_t k = ticket_of(d, user, 1);   /* before: realloc may move d->r's neighbour */
        d->r = realloc(d->r, (d->nr + 1) * sizeof *d->r);
        if (!d->r) abort();
        d->r[d->nr] = (pool_req){ strtoll(buf, NULL, 10), "", k };
        snprintf(d->r[d->nr].id, sizeof d->r[d->nr].id, "%s", id);
        d->nr++;
    }
    json_decref(j);
    return rc;
}

static int hexval(char ch) { return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1; }

/* Each ticket's 1-based place (pos). */
static int draw_order(replayed *d, const char *seed_hex)
{
    draw_rng g = { .used = 4 };
    if (strlen(seed_hex) != 64) return -1;
    for (int i = 0; i < 32; i++) {
        int hi = hexval(seed_hex[2 * i]), lo = hexval(seed_hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        g.seed[i] = (uint8_t)(hi << 4 | lo);
    }
    size_t n = d->nt, *perm = xcalloc(n, sizeof *perm), *out = xcalloc(n, sizeof *out), k = 0;
    for (size_t i = 0; i < n; i++) perm[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(&g, i), t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    /* throttled last; each part by points (highest first) when recorded,
     * keeping the shuffled order among equals: a stable selection */
    for (int pass = 0; pass < 2; pass++) {
        size_t from = k;
        for (size_t i = 0; i < n; i++)
            if (d->t[perm[i]].throttled == pass) out[k++] = perm[i];
        for (size_t a = from + 1; d->points_recorded && a < k; a++)
            for (size_t b = a; b > from && d->t[out[b]].points > d->t[out[b - 1]].points; b--) {
                size_t t = out[b];
                out[b] = out[b - 1];
                out[b - 1] = t;
            }
    }
    for (size_t i = 0; i < n; i++) d->t[out[i]].pos = i + 1;
    free(perm);
    free(out);
    return 0;
}

static void replayed_free(replayed *d)
{
    free(d->t);
    free(d->r);
    memset(d, 0, sizeof *d);
}

static void drawn_drop(c11 *c)
{
    if (c->drawn) replayed_free(c->drawn);
    free(c->drawn);
    c->drawn = NULL;
    c->drawn_ok = 0;
}

/* Points a user's ticket may have been drawn with: those of a profile the
 * user had (exactly the one, for a user never edited); 0 without one or
 * when `points` is not an integer. */
static int points_possible(c11 *c, const char *user, int64_t p)
{
    c11_user *u = c->on ? user_of(c, user) : NULL;
    if (!u || !u->nver) return p == 0;
    for (size_t v = 0; v < u->nver; v++) {
        json_t *pt = u->ver[v] ? json_object_get(u->ver[v], "points") : NULL;
        if ((json_is_integer(pt) ? json_integer_value(pt) : 0) == p) return 1;
    }
    return 0;
}

/* The draw replayed from the pool and the revealed seed, once per change
 * of either: its commitment, and the points recorded with it. 0 while
 * the seed is not revealed. */
static int drawn_refresh(c11 *c)
{
    simr *s = sim_w->redis;
    const batch_keys *k = c->env.keys;
    const char *seed = simr_hget(s, k->stats, "lottery_seed", NULL);
    if (!seed) return 0;
    size_t n = simr_llen(s, k->early);
    if (c->drawn_ok && n == c->drawn_len && !strcmp(seed, c->drawn_seed)) return 1;
    drawn_drop(c);
    c->drawn = xcalloc(1, sizeof *c->drawn);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *e = simr_lindex(s, k->early, i, &len);
        if (read_entry(c->drawn, e, len) < 0) { sim_fail("lottery: pool entry %zu cannot be read: %.*s", i, (int)len, e); return 0; }
    }
    if (draw_order(c->drawn, seed) < 0) { sim_fail("lottery: stats.lottery_seed %s is not 64 hex digits", seed); return 0; }
    char want[2 * SHA256_LEN + 1];
    const char *commit = simr_hget(s, k->stats, "lottery_commit", NULL);
    sha256_hex(seed, strlen(seed), want);
    if (!commit || strcmp(commit, want)) { sim_fail("lottery: the seed's SHA-256 is %s, the commitment %s", want, commit ? commit : "(none)"); return 0; }
    if (c->drawn->nr && c->drawn->points_recorded != c->draw_points) {
        sim_fail("lottery: draw_by %s, yet the pool %s points", c->draw_points ? "points" : "none",
                 c->drawn->points_recorded ? "records" : "records no");
        return 0;
    }
    for (size_t t = 0; t < c->drawn->nt; t++)
        if (c->drawn->t[t].has_points && !points_possible(c, c->drawn->t[t].user, c->drawn->t[t].points)) {
            sim_fail("lottery: %s's ticket was drawn with %" PRId64 " points, which no profile of theirs had",
                     c->drawn->t[t].user, c->drawn->t[t].points);
            return 0;
        }
    c->drawn_ok = 1;
    c->drawn_len = n;
    snprintf(c->drawn_seed, sizeof c->drawn_seed, "%s", seed);
    return 1;
}

/* A drawn result: the pool request of its seq, its user's place, the
 * points recorded for the ticket (absent without). */
static void check_drawn(c11 *c, const char *id, json_t *res)
{
    json_int_t seq = json_integer_value(json_object_get(res, "seq")), draw = json_integer_value(json_object_get(res, "draw"));
    json_t *pts = json_object_get(res, "points");
    if (!drawn_refresh(c)) {
        if (!sim_w->failed) sim_fail("lottery: %s has draw %lld before the seed is revealed", id, (long long)draw);
        return;
    }
    const replayed *d = c->drawn;
    size_t i = 0;
    while (i < d->nr && d->r[i].seq != seq) i++;
    if (i == d->nr || strcmp(d->r[i].id, id)) { sim_fail("lottery: %s (seq %lld) has draw %lld, but is not in the pool", id, (long long)seq, (long long)draw); return; }
    const ticket *t = &d->t[d->r[i].ticket];
    if ((size_t)draw != t->pos) sim_fail("lottery: %s says draw %lld, the replay puts %s at %zu", id, (long long)draw, t->user, t->pos);
    else if (d->points_recorded && (!json_is_integer(pts) || json_integer_value(pts) != t->points))
        sim_fail("lottery: %s says points %s, the draw recorded %" PRId64, id, json_is_integer(pts) ? "other" : "none", t->points);
    else if (!d->points_recorded && pts) sim_fail("lottery: %s has points, but the draw recorded none", id);
    c->counts.draws_checked++;
}

/* The pool is served in the replayed order: none of the requests past
 * internal.early_served has its own result yet (a copy of an id served
 * before has that one's, with the other seq). */
static void check_turns(c11 *c)
{
    const replayed *d = c->drawn;
    const char *sv = simr_hget(sim_w->redis, c->env.keys->internal, "early_served", NULL);
    size_t served = sv ? strtoull(sv, NULL, 10) : 0, k = 0;
    for (size_t pos = 1; pos <= d->nt && !sim_w->failed; pos++)
        for (size_t i = 0; i < d->nr && !sim_w->failed; i++) {
            if (d->t[d->r[i].ticket].pos != pos || k++ < served) continue;
            json_t *res = result_of(c, d->r[i].id);
            if (res && json_integer_value(json_object_get(res, "seq")) == d->r[i].seq)
                sim_fail("lottery: %s is answered, but %zu of the pool are served and it comes %zuth", d->r[i].id,
                         served, k);
            json_decref(res);
        }
}

static void check_written(c11 *c)
{
    int drawn = 0;
    for (size_t i = 0; i < c->nwritten && !sim_w->failed; i++) {
        json_t *res = result_of(c, c->written[i]);
        const char *reason = json_string_value(json_object_get(res, "reason"));
        if (reason && !strcmp(reason, "not_eligible")) c->counts.not_eligible++;
        if (json_object_get(res, "draw")) { check_drawn(c, c->written[i], res); drawn = 1; }
        json_decref(res);
    }
    if (drawn && !sim_w->failed && c->drawn_ok) check_turns(c);
}

void c11_commit(c11 *c, int holders_written)
{
    if (!sim_w->failed) check_groups(c);
    if (!sim_w->failed && holders_written) check_holders(c);
    if (!sim_w->failed && c->on) check_bad_profiles(c);
    if (!sim_w->failed) check_written(c);
    c->ngg = 0;
    for (size_t i = 0; i < c->nwritten; i++) free(c->written[i]);
    c->nwritten = 0;
}

void c11_restored(c11 *c)
{
    drawn_drop(c);
    c->ngg = 0;
}

/* ------------------------------------------------------------ the probe -- */

int c11_probe_edit(c11 *c)
{
    if (!c->probe_item) return 0;
    c11_user *p = &c->users[c->nusers + 1];
    const json_t *attrs = c->attrs[c->probe_item];
    json_t *prof = json_deep_copy(p->ver[0]);
    const char *key;
    json_t *r;
    json_object_foreach((json_t *)attrs, key, r)
        if (only_key(key)) { json_object_set_new(prof, key + 5, json_string("none of these")); break; }
    if (admits(attrs, prof)) abort();
    p->ver[p->nver++] = prof;
    write_profile(c, p, prof);
    return 1;
}

int c11_probe_request(c11 *c, char *buf, size_t n)
{
    if (c->room)
        return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"R%d\"}", PROBE_ID,
                        PROBE_USER, c->probe_item);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"sku%d\",\"qty\":1}", PROBE_ID,
                    PROBE_USER, c->probe_item);
}

/* The probe's answer: refused for its edited profile, or for the batch's
 * state (paused, closed, not open); any other answer was decided with
 * the profile from before the edit. */
void c11_probe_check(c11 *c)
{
    json_t *res = result_of(c, PROBE_ID);
    const char *status = json_string_value(json_object_get(res, "status"));
    const char *reason = json_string_value(json_object_get(res, "reason"));
    static const char *const ok[] = { "not_eligible", "not_open", "closed", "paused", "throttled" };
    int fine = 0;
    for (size_t i = 0; status && !strcmp(status, "rejected") && reason && i < sizeof ok / sizeof *ok; i++)
        fine |= !strcmp(reason, ok[i]);
    c->counts.probes_refused += fine && !strcmp(reason, "not_eligible");
    if (!fine) {
        char *s = res ? json_dumps(res, JSON_COMPACT) : NULL;
        sim_fail("profiles: %s's profile was edited 3.5 s before %s was pushed, with no fault since, and it was "
                 "decided with the old one: %s", PROBE_USER, PROBE_ID, s ? s : "(no result)");
        free(s);
    }
    json_decref(res);
}

void c11_dump(const c11 *c)
{
    fprintf(stderr, "sim: contract 11: profiles %s, draw_by %s, group_fill %s, probe item %d\n", c->on ? "on" : "off",
            c->draw_points ? "points" : "none", c->exact ? "exact" : "any", c->probe_item);
    for (int i = 1; i <= c->nitems; i++) {
        char a[256];
        c11_item_attrs(c, i, a, sizeof a);
        fprintf(stderr, "  item %d (cap %" PRId64 "): %s\n", i, c->cap[i], a);
    }
    for (int i = 1; c->on && i <= c->nusers + 1; i++) {
        const c11_user *u = &c->users[i];
        fprintf(stderr, "  %s%s%s:", u->id, u->mover ? " (mover)" : "", u->malformed ? " (not a profile)" : "");
        for (size_t v = 0; v < u->nver; v++) {
            char *s = u->ver[v] ? json_dumps(u->ver[v], JSON_COMPACT) : NULL;
            fprintf(stderr, " %s", s ? s : "-");
            free(s);
        }
        fprintf(stderr, "\n");
    }
}
