/* chaos_rules.c -- contract 11 in the chaos run: the rules, profiles and
 * draw by points the batches are created with, and the checks of them.
 *
 * Rooms of cr1 and cr2 and one item of cs2 carry only_X / same_X rules
 * (11.2); every user has a profile in P:{B}:profiles, written before
 * allocd starts (some without one, some lacking a key, some with points
 * that are no integer). cr2 fills rooms exactly (11.4) and opens a few
 * seconds into the run with a draw by points (11.3); staff assign and
 * unassign beds in cr1 and cr2 through the admin queue (11.5).
 *
 * What is checked, from the run's own tables and never from what allocd
 * says about itself:
 *   - through the log, at every grant: the holder may hold the item (only_X
 *     with their profile; same_X: the same value as every other regular
 *     holder of the room), unless staff placed them without check; a
 *     group's grants all name one room; with exact fill a single user's
 *     grant lands beside a holder or in a single, and a group takes an
 *     empty room of exactly its size;
 *   - on the final holders: the same rules, a staff exception being whoever
 *     an assign without check placed;
 *   - the draw: each drawn result's points are its user's profile points,
 *     a user's requests share one place, the places go by points, highest
 *     first; and `allocctl lottery verify` replays the draw (single Redis).
 */
#include "chaos_int.h"

/* ----------------------------------------------------------- tables -- */

static const char *const GENDERS[] = { "\"F\"", "\"M\"", "\"X\"" };
static const char *const YEARS[] = { "1", "2", "3", "4" };
static const char *const LLCS[] = { "\"stem\"", "\"arts\"" };

/* Points that tie often, now and then no integer (a draw reads 0). */
static void gen_points(uint64_t *rng, chaos_prof *p)
{
    uint32_t k = chaos__rnd(rng, 20);
    if (k == 0) return;                       /* missing: 0 */
    if (k == 1) {
        p->points = "\"12\"";                 /* a string: 0 */
        return;
    }
    p->pts = (long long)chaos__rnd(rng, 8) * 5;
    snprintf(p->pts_text, sizeof p->pts_text, "%d", (int)p->pts);   /* 0..35 */
    p->points = p->pts_text;
}

static void gen_prof(uint64_t *rng, chaos_prof *p)
{
    memset(p, 0, sizeof *p);
    p->has = chaos__rnd(rng, 20) != 0;
    if (!p->has) return;
    uint32_t g = chaos__rnd(rng, 20);
    p->gender = chaos__rnd(rng, 25) == 0 ? NULL : GENDERS[g < 9 ? 0 : g < 18 ? 1 : 2];
    p->year = chaos__rnd(rng, 25) == 0 ? NULL : YEARS[chaos__rnd(rng, 4)];
    p->llc = chaos__rnd(rng, 3) == 0 ? LLCS[0] : chaos__rnd(rng, 2) ? LLCS[1] : NULL;
    gen_points(rng, p);
}

/* The rules of a room batch: women's and men's rooms (their gender attr),
 * gender-flexible rooms (same_gender), upper-class rooms (only_year). */
static void room_rules(batch_def *b, int mod)
{
    for (int i = 0; i < b->n_items; i++) {
        chaos_rule *r = &b->rules[i];
        if (i % mod == 0) {
            r->only_key = "gender";
            r->only_vals[r->n_only++] = i % 2 ? GENDERS[1] : GENDERS[0];
        } else if (i % mod == 1 || i % mod == 4) {
            r->same_key = "gender";
        } else if (i % 7 == 2) {
            r->only_key = "year";
            r->only_vals[r->n_only++] = YEARS[2];
            r->only_vals[r->n_only++] = YEARS[3];
        }
    }
    b->has_rules = 1;
}

/* A rule into the item's attrs JSON (which ends with '}'). */
static void attrs_add(char *attrs, size_t cap, const chaos_rule *r)
{
    size_t n = strlen(attrs);
    if (n == 0) n = (size_t)snprintf(attrs, cap, "{}");
    char *end = attrs + n - 1;   /* the closing brace */
    int empty = n == 2;
    if (r->only_key && r->n_only == 1)
        snprintf(end, cap - (n - 1), "%s\"only_%s\":%s}", empty ? "" : ",", r->only_key, r->only_vals[0]);
    else if (r->only_key)
        snprintf(end, cap - (n - 1), "%s\"only_%s\":[%s,%s]}", empty ? "" : ",", r->only_key, r->only_vals[0],
                 r->only_vals[1]);
    else if (r->same_key)
        snprintf(end, cap - (n - 1), "%s\"same_%s\":true}", empty ? "" : ",", r->same_key);
}

void chaos__rules_define(chaos_ctx *cx)
{
    uint64_t rng = cx->p->seed * 7654321ULL + 99;
    for (int u = 0; u < ROOM_USERS; u++) gen_prof(&rng, &cx->room_prof[u]);
    for (int u = 0; u < STOCK_USERS; u++) gen_prof(&rng, &cx->stock_prof[u]);
    room_rules(&cx->b[B_CR1], 6);
    room_rules(&cx->b[B_CR2], 5);
    batch_def *s = &cx->b[B_CS2];   /* a meal plan for one learning community */
    s->rules[2].only_key = "llc";
    s->rules[2].only_vals[s->rules[2].n_only++] = LLCS[0];
    s->has_rules = 1;
    for (int bi = 0; bi < NB; bi++)
        for (int i = 0; i < cx->b[bi].n_items; i++)
            attrs_add(cx->b[bi].attrs[i], sizeof cx->b[bi].attrs[i], &cx->b[bi].rules[i]);
}

/* {"gender":"F","year":3,...}: the profile as the operator writes it. */
static void prof_json(const chaos_prof *p, char *out, size_t cap)
{
    const char *keys[] = { "gender", "year", "llc", "points" };
    const char *vals[] = { p->gender, p->year, p->llc, p->points };
    size_t n = (size_t)snprintf(out, cap, "{");
    for (int k = 0; k < 4; k++)
        if (vals[k]) n += (size_t)snprintf(out + n, cap - n, "%s\"%s\":%s", n > 1 ? "," : "", keys[k], vals[k]);
    snprintf(out + n, cap - n, "}");
}

/* P:{B}:profiles in one HSET: with appendfsync always, one write per
 * profile cost the run seconds before it started. */
int chaos__rules_write(chaos_ctx *cx, rconn *c, int bi)
{
    const batch_def *b = &cx->b[bi];
    if (!b->has_rules) return 0;
    int n = b->room ? ROOM_USERS : STOCK_USERS, argc = 0;
    const chaos_prof *tab = b->room ? cx->room_prof : cx->stock_prof;
    char key[64], (*ids)[16] = chaos__xcalloc((size_t)n, 16), (*json)[160] = chaos__xcalloc((size_t)n, 160);
    const char **argv = chaos__xcalloc(2 + 2 * (size_t)n, sizeof *argv);
    snprintf(key, sizeof key, "alloc:{%s}:profiles", b->name);
    argv[argc++] = "HSET";
    argv[argc++] = key;
    for (int u = 0; u < n; u++) {
        if (!tab[u].has) continue;
        snprintf(ids[u], sizeof ids[u], "%s%d", b->room ? "s" : "u", u);
        prof_json(&tab[u], json[u], sizeof json[u]);
        argv[argc++] = ids[u];
        argv[argc++] = json[u];
    }
    redisContext *rc = chaos__rc_node(cx, c, chaos__slot_node(cx, cx->bslot[bi]));
    redisReply *r = rc ? redisCommandArgv(rc, argc, argv, NULL) : NULL;
    int bad = !r || r->type == REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    else chaos__rc_close(c);
    free(argv);
    free(ids);
    free(json);
    return bad ? -1 : 0;
}

/* The user's index in its batch's table (s<n> rooms, u<n> stock), -1. */
static int user_index(const batch_def *b, const char *user)
{
    char want = b->room ? 's' : 'u';
    if (!user || user[0] != want || !user[1]) return -1;
    char *end;
    long v = strtol(user + 1, &end, 10);
    if (*end || v < 0 || v >= (b->room ? ROOM_USERS : STOCK_USERS)) return -1;
    return (int)v;
}

const chaos_prof *chaos__prof_of(const chaos_ctx *cx, const batch_def *b, const char *user)
{
    int u = user_index(b, user);
    const chaos_prof *p = u < 0 ? NULL : b->room ? &cx->room_prof[u] : &cx->stock_prof[u];
    return p && p->has ? p : NULL;
}

static const char *prof_value(const chaos_prof *p, const char *key)
{
    if (!p || !key) return NULL;
    if (!strcmp(key, "gender")) return p->gender;
    if (!strcmp(key, "year")) return p->year;
    if (!strcmp(key, "llc")) return p->llc;
    return NULL;
}

/* only_X of rule r for profile p (1 when the rule has none). */
static int only_ok(const chaos_rule *r, const chaos_prof *p)
{
    if (!r->only_key) return 1;
    const char *v = prof_value(p, r->only_key);
    for (int i = 0; v && i < r->n_only; i++)
        if (!strcmp(v, r->only_vals[i])) return 1;
    return 0;
}

static int item_of(const batch_def *b, const char *item)
{
    for (int i = 0; item && i < b->n_items; i++)
        if (!strcmp(b->items[i], item)) return i;
    return -1;
}

/* ------------------------------------------------------ the history -- */

struct rules_hist {
    chaos_ctx *cx;
    int bi;
    int16_t room_of[ROOM_USERS];   /* rooms: the bed of each user, -1 none */
    uint8_t exc[ROOM_USERS];       /* ...placed by staff without check */
};

rules_hist *chaos__rules_hist_new(chaos_ctx *cx, int bi)
{
    rules_hist *h = chaos__xcalloc(1, sizeof *h);
    h->cx = cx;
    h->bi = bi;
    for (int u = 0; u < ROOM_USERS; u++) h->room_of[u] = -1;
    return h;
}

void chaos__rules_hist_free(rules_hist *h) { free(h); }

/* A regular holder u of room it breaks a rule with the others there. */
static const char *room_breach(const rules_hist *h, int u, int it)
{
    const batch_def *b = &h->cx->b[h->bi];
    const chaos_rule *r = &b->rules[it];
    const chaos_prof *p = h->cx->room_prof[u].has ? &h->cx->room_prof[u] : NULL;
    if (!only_ok(r, p)) return "only_";
    if (!r->same_key) return NULL;
    const char *v = prof_value(p, r->same_key);
    if (!v) return "same_ (no value)";
    for (int o = 0; o < ROOM_USERS; o++) {
        if (o == u || h->room_of[o] != it || h->exc[o]) continue;
        const char *w = prof_value(h->cx->room_prof[o].has ? &h->cx->room_prof[o] : NULL, r->same_key);
        if (!w || strcmp(v, w)) return "same_";
    }
    return NULL;
}

/* 11.4 at a grant of room it (exact fill), held_before held then. */
static void exact_grant(rules_hist *h, const char *sid, const replay_event *e, const rec *rc, int it,
                        long long held_before)
{
    const batch_def *b = &h->cx->b[h->bi];
    if (!b->exact || (e->by && !strcmp(e->by, "staff")) || !rc || !strcmp(rc->op, "swap")) return;
    long long cap = b->caps[it];
    if (!strcmp(rc->op, "group")) {
        h->cx->rep->exact_groups += rc->grant_item < 0;
        if (rc->grant_item < 0 && (held_before != 0 || cap != rc->want_grants))
            chaos__violation(h->cx, &h->cx->rep->rule_breaches,
                             "%s: log %s: group '%s' of %u took %s (%lld beds, %lld held): not exact fill", b->name,
                             sid, rc->id, rc->want_grants, e->item, cap, held_before);
    } else if (cap != 1 && held_before == 0) {
        chaos__violation(h->cx, &h->cx->rep->rule_breaches,
                         "%s: log %s: '%s' (%s) put %s alone in %s, an empty room of %lld: not exact fill", b->name,
                         sid, rc->id, rc->op, e->user, e->item, cap);
    }
}

/* A grant: the rules of the item, exact fill, a group in one room. */
static void on_grant(rules_hist *h, const char *sid, const replay_event *e, rec *rc, long long held_before)
{
    const batch_def *b = &h->cx->b[h->bi];
    chaos_report *rep = h->cx->rep;
    int it = item_of(b, e->item), u = user_index(b, e->user);
    if (it < 0) return;   /* the checker's item check says so */
    int staff = e->by && !strcmp(e->by, "staff"), exception = staff && rc && rc->nocheck;
    rep->staff_grants += staff;
    if (b->room) exact_grant(h, sid, e, rc, it, held_before);
    if (rc && !strcmp(rc->op, "group")) {   /* a group is whole: one room */
        if (rc->grant_item >= 0 && rc->grant_item != it)
            chaos__violation(h->cx, &rep->rule_breaches, "%s: log %s: group '%s' split over %s and %s", b->name,
                             sid, rc->id, b->items[rc->grant_item], e->item);
        rc->grant_item = (int16_t)it;
    }
    if (!b->room) {
        if (!exception && !only_ok(&b->rules[it], chaos__prof_of(h->cx, b, e->user)))
            chaos__violation(h->cx, &rep->rule_breaches, "%s: log %s: %s was given %s against only_%s", b->name,
                             sid, e->user, e->item, b->rules[it].only_key);
        return;
    }
    if (u < 0) return;
    h->room_of[u] = (int16_t)it;
    h->exc[u] = (uint8_t)exception;
    const char *why = exception ? NULL : room_breach(h, u, it);
    if (why)
        chaos__violation(h->cx, &rep->rule_breaches, "%s: log %s: %s was given %s against its %s%s rule (req %s)",
                         b->name, sid, e->user, e->item, why,
                         b->rules[it].only_key && !strcmp(why, "only_") ? b->rules[it].only_key
                                                                         : b->rules[it].same_key, e->req);
}

void chaos__rules_event(rules_hist *h, const char *sid, const replay_event *e, const rec *rc,
                        long long held_before)
{
    const batch_def *b = &h->cx->b[h->bi];
    if (!b->has_rules && !b->exact && !b->staff) return;
    if (e->type == EVENT_GRANT) {
        on_grant(h, sid, e, (rec *)rc, held_before);
    } else if ((e->type == EVENT_RELEASE || e->type == EVENT_EXPIRE || e->type == EVENT_CANCEL) && b->room) {
        int u = user_index(b, e->user);   /* a bed given back (a held one ends by expiry or cancel) */
        if (u >= 0) h->room_of[u] = -1;
        if (u >= 0) h->exc[u] = 0;
    }
}

/* --------------------------------------------------- final holders -- */

void chaos__rules_final(chaos_ctx *cx, int bi, const redisReply *holders)
{
    const batch_def *b = &cx->b[bi];
    if (!b->has_rules || !holders) return;
    rules_hist *h = chaos__rules_hist_new(cx, bi);
    for (size_t i = 0; i + 1 < holders->elements; i += 2) {
        const char *user = holders->element[i]->str;
        json_t *doc = json_loadb(holders->element[i + 1]->str, holders->element[i + 1]->len, 0, NULL);
        const char *by = json_string_value(json_object_get(doc, "by"));
        int u = user_index(b, user);
        if (b->room && u >= 0) {
            h->room_of[u] = (int16_t)item_of(b, json_string_value(json_object_get(doc, "item")));
            h->exc[u] = by && !strcmp(by, "staff");
        }
        size_t j;
        json_t *o;
        json_array_foreach(json_object_get(doc, "orders"), j, o) {
            int it = item_of(b, json_string_value(json_object_get(o, "item")));
            const char *oby = json_string_value(json_object_get(o, "by"));
            if (it >= 0 && !(oby && !strcmp(oby, "staff")) && !only_ok(&b->rules[it], chaos__prof_of(cx, b, user)))
                chaos__violation(cx, &cx->rep->rule_breaches, "%s: %s holds %s against only_%s", b->name, user,
                                 b->items[it], b->rules[it].only_key);
        }
        json_decref(doc);
    }
    for (int u = 0; b->room && u < ROOM_USERS; u++) {
        const char *why = h->room_of[u] >= 0 && !h->exc[u] ? room_breach(h, u, h->room_of[u]) : NULL;
        if (why)
            chaos__violation(cx, &cx->rep->rule_breaches, "%s: s%d holds %s against its %s rule", b->name, u,
                             b->items[h->room_of[u]], why);
    }
    chaos__rules_hist_free(h);
}

/* --------------------------------------------------------- the draw -- */

typedef struct drawn {
    long long draw, points;
    int user;
} drawn;

struct draw_tally {
    chaos_ctx *cx;
    int bi;
    drawn *v;
    size_t n, cap;
};

draw_tally *chaos__draw_new(chaos_ctx *cx, int bi)
{
    draw_tally *d = chaos__xcalloc(1, sizeof *d);
    d->cx = cx;
    d->bi = bi;
    return d;
}

void chaos__draw_note(draw_tally *d, const rec *rc, json_t *doc)
{
    json_t *draw = json_object_get(doc, "draw");
    if (!draw || rc->expect != EXP_VALID) return;
    const batch_def *b = &d->cx->b[d->bi];
    const chaos_prof *p = chaos__prof_of(d->cx, b, rc->user);
    long long pts = json_integer_value(json_object_get(doc, "points"));
    if (!b->early_ms || !json_is_integer(json_object_get(doc, "points")) || pts != (p ? p->pts : 0))
        chaos__violation(d->cx, &d->cx->rep->rule_breaches, "%s: '%s' of %s was drawn with points %lld, "
                         "its profile says %lld", b->name, rc->id, rc->user, pts, p ? p->pts : 0);
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 256;
        d->v = realloc(d->v, d->cap * sizeof *d->v);
        if (!d->v) abort();
    }
    d->v[d->n++] = (drawn){ json_integer_value(draw), pts, user_index(b, rc->user) };
}

static int by_draw(const void *a, const void *b)
{
    const drawn *x = a, *y = b;
    return x->draw < y->draw ? -1 : x->draw > y->draw;
}

/* allocctl lottery verify of the batch: exit 0 (MATCH), its DIFF lines
 * (or the start of its output) else. */
static void lottery_verify(chaos_ctx *cx, const char *batch)
{
    char conf[400], cmd[1200], out[16384] = "", diffs[360] = "";
    snprintf(conf, sizeof conf, "%s/ctl-rules.conf", cx->redis.dir);
    FILE *f = fopen(conf, "w");
    if (!f) return;
    fprintf(f, "redis = \"%s\";\nprefix = \"alloc\";\n", cx->redis.url);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' -c '%s' lottery verify '%s' 2>&1", harness_allocctl_bin(), conf, batch);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {}
    int st = pclose(p);
    for (char *d = strstr(out, "DIFF"); d && strlen(diffs) + 2 < sizeof diffs; d = strstr(d + 4, "DIFF")) {
        size_t n = strcspn(d, "\n"), have = strlen(diffs);
        snprintf(diffs + have, sizeof diffs - have, "%s%.*s", have ? "; " : "", (int)n, d);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        chaos__violation(cx, &cx->rep->rule_breaches, "%s: allocctl lottery verify exited %d: %.300s", batch,
                         WIFEXITED(st) ? WEXITSTATUS(st) : -1, diffs[0] ? diffs : out);
}

void chaos__draw_check(draw_tally *d)
{
    chaos_ctx *cx = d->cx;
    const batch_def *b = &cx->b[d->bi];
    if (d->n > 1) qsort(d->v, d->n, sizeof *d->v, by_draw);   /* v is NULL when nothing was drawn */
    cx->rep->drawn += (long)d->n;
    for (size_t i = 1; i < d->n; i++) {
        const drawn *x = &d->v[i - 1], *y = &d->v[i];
        if (x->draw == y->draw && x->user != y->user)
            chaos__violation(cx, &cx->rep->rule_breaches, "%s: draw %lld given to s%d and s%d", b->name, x->draw,
                             x->user, y->user);
        if (x->draw != y->draw && x->user == y->user)
            chaos__violation(cx, &cx->rep->rule_breaches, "%s: s%d drawn at %lld and %lld", b->name, x->user,
                             x->draw, y->draw);
        if (x->points < y->points)   /* no throttle here: no one is moved behind */
            chaos__violation(cx, &cx->rep->rule_breaches, "%s: draw %lld has %lld points, draw %lld more (%lld)",
                             b->name, x->draw, x->points, y->draw, y->points);
    }
    if (b->early_ms && !cx->cluster) lottery_verify(cx, b->name);
    free(d->v);
    free(d);
}

/* CHAOS_TAMPER 9 and 10 (chaos_check.c): the damage only these checks see
 * as what it is. 9: a grant of H001 (women only) to a man in cr2's log;
 * 10: a drawn result of cr2 rewritten with one point more. */
void chaos__rules_tamper(chaos_ctx *cx, rconn *c, int what)
{
    const batch_def *b = &cx->b[B_CR2];
    uint16_t sl = cx->bslot[B_CR2];
    redisReply *r = NULL;
    if (what == 9) {
        int u = 0;
        while (u < ROOM_USERS - 1 && !(cx->room_prof[u].has && cx->room_prof[u].gender == GENDERS[1])) u++;
        r = chaos__rcmd(cx, c, sl, "XADD alloc:{%s}:log * type grant user s%d item %s qty 1 req p0-0 at 1", b->name,
                        u, b->items[0]);
        if (r) freeReplyObject(r);
        return;
    }
    for (int p = 0; p < cx->n_producers; p++)
        for (size_t i = 0; i < cx->prod[p].recs.n; i++) {
            const rec *rc = &cx->prod[p].recs.v[i];
            if (rc->batch != B_CR2 || rc->expect != EXP_VALID) continue;
            r = chaos__rcmd(cx, c, sl, "HGET alloc:{%s}:results %s", b->name, rc->id);
            json_t *doc = r && r->type == REDIS_REPLY_STRING ? json_loadb(r->str, r->len, 0, NULL) : NULL;
            if (r) freeReplyObject(r);
            json_t *pts = json_object_get(doc, "points");
            if (json_is_integer(pts)) {
                json_object_set_new(doc, "points", json_integer(json_integer_value(pts) + 1));
                char *s = json_dumps(doc, JSON_COMPACT);
                r = chaos__rcmd(cx, c, sl, "HSET alloc:{%s}:results %s %s", b->name, rc->id, s);
                if (r) freeReplyObject(r);
                free(s);
                json_decref(doc);
                return;
            }
            json_decref(doc);
        }
}
