/* workload.c -- the request mix of each scenario (see bench.h).
 *
 * Request i is a pure function of (scenario, seed, i): producers on several
 * threads, the Lua design and the lock design all draw the very same
 * requests without sharing a generated list, and allocd's results can be
 * checked against what was asked. Sizes default so that roughly half of the
 * requests are granted (stock, rooms), or almost none (the hot variants once
 * the few wanted rooms are full).
 */
#include "bench.h"

#include <stdio.h>
#include <string.h>

static const char *const names[SC_COUNT] = {
    [SC_STOCK] = "stock", [SC_STOCK_HOT] = "stock-hot", [SC_ROOMS] = "rooms",
    [SC_ROOMS_HOT] = "rooms-hot", [SC_GROUPS] = "groups",
    [SC_RESERVATIONS] = "reservations", [SC_GROUPS_FORMED] = "groups-formed",
    [SC_HOUSING] = "housing",
};

const char *scenario_name(scenario_id sc) { return names[sc]; }

int scenario_parse(const char *name, scenario_id *out)
{
    for (int i = 0; i < SC_COUNT; i++)
        if (!strcmp(name, names[i])) { *out = (scenario_id)i; return 0; }
    return -1;
}

int scenario_is_room(scenario_id sc)
{
    return sc == SC_ROOMS || sc == SC_ROOMS_HOT || sc == SC_GROUPS || sc == SC_GROUPS_FORMED ||
           sc == SC_HOUSING;
}

static long at_least_1(long v) { return v > 0 ? v : 1; }

static void stock_defaults(workload *w, long users, long items)
{
    w->items = items > 0 ? items : w->sc == SC_STOCK_HOT ? 1 : 1000;
    w->users = users > 0 ? users : at_least_1(w->n / 2);
    w->units = at_least_1((w->n / 2 + w->items - 1) / w->items);
    w->per_user = 2;
}

/* Rooms: beds for about half the requests (groups average 3 members).
 * groups-formed: issue 13's housing round, 20,000 students for 5,000
 * four-bed rooms, is 26,000 requests (FORMED_CYCLE below: 13 requests
 * place 10 students); other sizes keep that ratio. */
static void room_defaults(workload *w, long users, long items)
{
    w->users = users > 0 ? users : w->n;
    if (w->sc == SC_GROUPS_FORMED) {
        w->units = 4;
        w->users = w->n * 10 / 13;
        w->items = items > 0 ? items : at_least_1(w->n * 5 / 26);
    } else if (w->sc == SC_GROUPS) {
        w->units = 6;
        w->items = items > 0 ? items : at_least_1(w->n / 4);
    } else {
        w->units = 4;
        w->items = items > 0 ? items : at_least_1(w->n / 8);
    }
    w->hot = w->sc == SC_ROOMS_HOT ? (w->items < 8 ? w->items : 8) : 0;
    w->per_user = 1;
}

void workload_init(workload *w, scenario_id sc, long n, long users, long items,
                   int hold_ms, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->sc = sc;
    w->n = at_least_1(n);
    w->seed = seed;
    if (scenario_is_room(sc)) room_defaults(w, users, items);
    else stock_defaults(w, users, items);
    if (sc == SC_RESERVATIONS) w->hold_ms = hold_ms > 0 ? hold_ms : 50;
}

static uint64_t rnd(const workload *w, long i, int k)
{
    return bench_mix(w->seed ^ bench_mix((uint64_t)i * 16 + (uint64_t)k));
}

/* A user index: every request its own user when there are enough users
 * (the memory measurement needs a million distinct participants), else
 * drawn uniformly, so some users ask more than once (per_user applies). */
static long pick_user(const workload *w, long i)
{
    return w->users >= w->n ? i : (long)(rnd(w, i, 0) % (uint64_t)w->users);
}

static void pick_prefs(const workload *w, long i, wl_req *r)
{
    long span = w->hot ? w->hot : w->items;
    r->n_prefs = span < WL_PREFS ? (int)span : WL_PREFS;
    for (int p = 0; p < r->n_prefs; p++) {
        long room;
        int again, k = 0;
        do { /* distinct preferences */
            room = (long)(rnd(w, i, 2 + p * 4 + k++) % (uint64_t)span);
            again = 0;
            for (int q = 0; q < p; q++) again |= r->prefs[q] == room;
        } while (again && k < 16);
        r->prefs[p] = room;
    }
}

/* groups-formed: each lane (workload.lanes) is a run of cycles of 13
 * requests forming four groups, of 1, 2, 3 and 4 students: a student alone
 * sends `auto`; a group's leader invites the others, each of them accepts,
 * then the leader sends `group`. One producer pushes a lane in order, so
 * each invitation is in the queue before its answers. */
enum { FORMED_CYCLE = 13 };

static void formed_request(const workload *w, long i, wl_req *r)
{
    static const int first[] = { 0, 1, 4, 8 };   /* each group's first slot */
    long lanes = w->lanes > 0 ? w->lanes : 1, lane = i % lanes, k = i / lanes;
    int slot = (int)(k % FORMED_CYCLE), g = 3;
    while (slot < first[g]) g--;
    int size = g + 1, step = slot - first[g];
    r->formed = 1;
    r->n_members = size;
    r->user = ((k / FORMED_CYCLE) * 4 + g) * lanes + lane;
    r->actor = step == 0 || step == size ? 0 : step;
    r->op = size == 1 ? OPK_AUTO : step == 0 ? OPK_INVITE : step < size ? OPK_ACCEPT : OPK_GROUP;
    if (r->op == OPK_AUTO || r->op == OPK_GROUP) pick_prefs(w, i, r);
}

void workload_request(const workload *w, long i, wl_req *r)
{
    memset(r, 0, sizeof *r);
    switch (w->sc) {
    case SC_STOCK: case SC_STOCK_HOT: case SC_RESERVATIONS:
        r->op = OPK_BUY;
        r->user = pick_user(w, i);
        r->item = (long)(rnd(w, i, 1) % (uint64_t)w->items);
        break;
    case SC_ROOMS: case SC_ROOMS_HOT: case SC_HOUSING:
        r->op = OPK_AUTO;
        r->user = pick_user(w, i);
        pick_prefs(w, i, r);
        break;
    case SC_GROUPS:
        r->op = OPK_GROUP;
        r->n_members = 2 + (int)(rnd(w, i, 1) % (WL_MEMBERS - 1));
        pick_prefs(w, i, r);
        break;
    case SC_GROUPS_FORMED:
        formed_request(w, i, r);
        break;
    default:
        break;
    }
}

int wl_item_name(const workload *w, long k, char *buf, size_t len)
{
    return snprintf(buf, len, scenario_is_room(w->sc) ? "R%ld" : "i%ld", k);
}

int wl_user_name(long i, const wl_req *r, int member, char *buf, size_t len)
{
    if (r->formed) return snprintf(buf, len, "s%ld-%d", r->user, member ? member : r->actor);
    if (r->op == OPK_GROUP) return snprintf(buf, len, "g%ld-%d", i, member);
    return snprintf(buf, len, "u%ld", r->user);
}

/* Appends s to buf at *at, never past len (the result is then truncated,
 * which the caller detects from the returned length). */
static void put(char *buf, size_t len, size_t *at, const char *s)
{
    size_t n = strlen(s);
    if (*at + n < len) memcpy(buf + *at, s, n + 1);
    *at += n;
}

static void put_name_list(const workload *w, long i, const wl_req *r, int members,
                          char *buf, size_t len, size_t *at)
{
    char name[48];
    int n = members ? r->n_members : r->n_prefs;
    put(buf, len, at, "[");
    for (int k = 0; k < n; k++) {
        if (members) wl_user_name(i, r, k, name, sizeof name);
        else wl_item_name(w, r->prefs[k], name, sizeof name);
        put(buf, len, at, k ? ",\"" : "\"");
        put(buf, len, at, name);
        put(buf, len, at, "\"");
    }
    put(buf, len, at, "]");
}

/* groups-formed: an invitation's "to" (every member but the leader) or an
 * answer's "from" (the leader). */
static void put_formed_names(const wl_req *r, int to, char *buf, size_t len, size_t *at)
{
    char name[48];
    if (!to) {
        snprintf(name, sizeof name, "s%ld-0", r->user);
        put(buf, len, at, ",\"from\":\"");
        put(buf, len, at, name);
        put(buf, len, at, "\"");
        return;
    }
    put(buf, len, at, ",\"to\":[");
    for (int m = 1; m < r->n_members; m++) {
        snprintf(name, sizeof name, "%ss%ld-%d\"", m > 1 ? ",\"" : "\"", r->user, m);
        put(buf, len, at, name);
    }
    put(buf, len, at, "]");
}

int workload_json(const workload *w, long i, char *buf, size_t len)
{
    wl_req r;
    char user[48], item[48], head[160];
    workload_request(w, i, &r);
    wl_user_name(i, &r, 0, user, sizeof user);
    size_t at = 0;
    static const char *const ops[] = { [OPK_BUY] = "buy", [OPK_AUTO] = "auto", [OPK_GROUP] = "group",
                                       [OPK_INVITE] = "invite", [OPK_ACCEPT] = "accept" };
    snprintf(head, sizeof head, "{\"id\":\"%ld\",\"user\":\"%s\",\"op\":\"%s\"", i, user, ops[r.op]);
    put(buf, len, &at, head);
    if (r.op == OPK_BUY) {
        wl_item_name(w, r.item, item, sizeof item);
        put(buf, len, &at, ",\"item\":\"");
        put(buf, len, &at, item);
        put(buf, len, &at, "\",\"qty\":1");
    }
    if (r.op == OPK_GROUP && !r.formed) {
        put(buf, len, &at, ",\"members\":");
        put_name_list(w, i, &r, 1, buf, len, &at);
    }
    if (r.op == OPK_INVITE || r.op == OPK_ACCEPT) {
        put_formed_names(&r, r.op == OPK_INVITE, buf, len, &at);
        put(buf, len, &at, "}");
        return at < len ? (int)at : -1;
    }
    if (r.op != OPK_BUY) {
        put(buf, len, &at, ",\"prefs\":");
        put_name_list(w, i, &r, 0, buf, len, &at);
    }
    put(buf, len, &at, "}");
    return at < len ? (int)at : -1;
}

/* HSET key in slices of 500 items; value = units, or attrs JSON. */
int workload_write_items(redisContext *c, const workload *w, const char *key, int attrs)
{
    enum { SLICE = 500 };
    char names_buf[SLICE][24], vals_buf[SLICE][128];
    const char *argv[2 + 2 * SLICE];
    for (long k0 = 0; k0 < w->items; k0 += SLICE) {
        int argc = 0;
        argv[argc++] = "HSET";
        argv[argc++] = key;
        for (long k = k0; k < w->items && k < k0 + SLICE; k++) {
            long s = k - k0;
            wl_item_name(w, k, names_buf[s], sizeof names_buf[s]);
            if (attrs) housing_attrs(w, k, vals_buf[s], sizeof vals_buf[s]);
            else snprintf(vals_buf[s], sizeof vals_buf[s], "%ld", w->units);
            argv[argc++] = names_buf[s];
            argv[argc++] = vals_buf[s];
        }
        if (bench_ok_argv(c, argc, argv, NULL) < 0) return -1;
    }
    return 0;
}
