/* web_round.c -- see web_round.h. Everything is read from the watcher's
 * snapshot of the batch (hash fields as JSON strings) and built anew on
 * each request: parsing 1,200 attrs and 3,000 holders takes a few
 * milliseconds, less than keeping an index in step with every tick. */
#include "service/web_round.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/lottery.h"
#include "service/watch_lottery.h"

#define SWAPS_LISTED 200
#define SLOT_TIMES   8

/* A hash field's value parsed as a JSON object (new reference), or NULL. */
static json_t *field_obj(const json_t *hash, const char *key)
{
    const char *s = json_string_value(json_object_get(hash, key));
    json_t *o = s ? json_loads(s, 0, NULL) : NULL;
    if (o && !json_is_object(o)) { json_decref(o); o = NULL; }
    return o;
}

static int64_t field_int(const json_t *hash, const char *key, int64_t dflt)
{
    const char *s = json_string_value(json_object_get(hash, key));
    return s && *s ? strtoll(s, NULL, 10) : dflt;
}

static const char *field_str(const json_t *hash, const char *key)
{
    const char *s = json_string_value(json_object_get(hash, key));
    return s ? s : "";
}

/* An attribute as text: "7" and 7 are the same building; missing is "-". */
static void scalar_text(const json_t *v, char *out, size_t len)
{
    if (json_is_string(v)) snprintf(out, len, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(out, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(out, len, "%g", json_real_value(v));
    else snprintf(out, len, "-");
}

/* Natural order: "2" before "10", else byte order. */
static int natcmp(const char *a, const char *b)
{
    char *ea, *eb;
    long long x = strtoll(a, &ea, 10), y = strtoll(b, &eb, 10);
    if (*a && *b && !*ea && !*eb && x != y) return x < y ? -1 : 1;
    return strcmp(a, b);
}

static int natcmp_p(const void *a, const void *b)
{
    return natcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of an object in natural order (malloc'd array, *n of them). */
static const char **sorted_keys(const json_t *o, size_t *n)
{
    *n = json_object_size(o);
    const char **k = malloc((*n ? *n : 1) * sizeof *k);
    if (!k) { *n = 0; return NULL; }
    size_t i = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) k[i++] = key;
    if (*n > 1) qsort(k, *n, sizeof *k, natcmp_p);
    return k;
}

/* 1 (and "loading" in out) until the parts have been read. */
static int loading(const watch_batch *b, unsigned parts, json_t *out)
{
    if (watch_round_ready(b, parts)) {
        int64_t at = 0;
        for (int p = 0; p < 3; p++)
            if ((parts & WATCH_PART(p)) && (!at || b->round_seen_ms[p] < at)) at = b->round_seen_ms[p];
        json_object_set_new(out, "round_seen_at", json_integer(at));
        return 0;
    }
    json_object_set_new(out, "loading", json_true());
    return 1;
}

/* ---- rooms ---- */

/* The eligibility rules of contract 11.2 among an item's attrs. */
static json_t *rules_of(const json_t *attrs)
{
    json_t *r = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)attrs, k, v)
        if (!strncmp(k, "only_", 5) || !strncmp(k, "same_", 5)) json_object_set(r, k, v);
    return r;
}

static void count_into(json_t *tally, int64_t beds, int64_t taken)
{
    static const char *const f[] = { "rooms", "beds", "taken", "free" };
    int64_t add[] = { 1, beds, taken, beds - taken };
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_object_get(tally, f[i]);
        if (v) json_integer_set(v, json_integer_value(v) + add[i]);
        else json_object_set_new(tally, f[i], json_integer(add[i]));
    }
}

/* by: building -> {"floors": {floor -> tally}, and the building's tally} */
static void tally_at(json_t *by, const char *building, const char *floor, int64_t beds, int64_t taken)
{
    json_t *bo = json_object_get(by, building);
    if (!bo) {
        bo = json_object();
        json_object_set_new(bo, "floors", json_object());
        json_object_set_new(by, building, bo);
    }
    count_into(bo, beds, taken);
    json_t *floors = json_object_get(bo, "floors");
    json_t *fo = json_object_get(floors, floor);
    if (!fo) { fo = json_object(); json_object_set_new(floors, floor, fo); }
    count_into(fo, beds, taken);
}

static json_t *room_json(const watch_batch *b, const char *room, const char *floor, const json_t *attrs)
{
    int64_t beds = field_int(b->capacity, room, 0);
    int64_t free_beds = field_int(b->free, room, beds);
    json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I}", "room", room, "floor", floor, "beds", (json_int_t)beds,
                          "taken", (json_int_t)(beds - free_beds), "free", (json_int_t)free_beds);
    json_object_set_new(o, "rules", rules_of(attrs));
    json_t *rest = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)attrs, k, v)
        if (strcmp(k, "building") && strcmp(k, "floor") && strncmp(k, "only_", 5) && strncmp(k, "same_", 5))
            json_object_set(rest, k, v);
    json_object_set_new(o, "attrs", rest);
    return o;
}

static int room_cmp(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = natcmp(json_string_value(json_object_get(x, "floor")), json_string_value(json_object_get(y, "floor")));
    return c ? c : natcmp(json_string_value(json_object_get(x, "room")), json_string_value(json_object_get(y, "room")));
}

/* The tallies as arrays in natural order: [{building, floors: [...]}]. */
static json_t *buildings_array(const json_t *by)
{
    json_t *a = json_array();
    size_t nb, nf;
    const char **bk = sorted_keys(by, &nb);
    for (size_t i = 0; i < nb; i++) {
        json_t *bo = json_object_get(by, bk[i]), *floors = json_object_get(bo, "floors");
        json_t *out = json_pack("{s:s}", "building", bk[i]), *fa = json_array();
        json_object_update(out, bo);
        const char **fk = sorted_keys(floors, &nf);
        for (size_t k = 0; k < nf; k++) {
            json_t *fo = json_pack("{s:s}", "floor", fk[k]);
            json_object_update(fo, json_object_get(floors, fk[k]));
            json_array_append_new(fa, fo);
        }
        free(fk);
        json_object_set_new(out, "floors", fa);
        json_array_append_new(a, out);
    }
    free(bk);
    return a;
}

void web_round_rooms(const watch_batch *b, const char *building, json_t *out)
{
    if (loading(b, WEB_ROUND_ROOMS, out)) return;
    json_t *by = json_object(), *total = json_pack("{s:i,s:i,s:i,s:i}", "rooms", 0, "beds", 0, "taken", 0, "free", 0);
    json_t *rooms = json_array();
    const char *room;
    json_t *v;
    json_object_foreach(b->capacity, room, v) {
        json_t *attrs = field_obj(b->attrs, room);
        if (!attrs) attrs = json_object();
        char bld[80], fl[80];
        scalar_text(json_object_get(attrs, "building"), bld, sizeof bld);
        scalar_text(json_object_get(attrs, "floor"), fl, sizeof fl);
        int64_t beds = field_int(b->capacity, room, 0), taken = beds - field_int(b->free, room, beds);
        tally_at(by, bld, fl, beds, taken);
        count_into(total, beds, taken);
        if (building && !strcmp(building, bld)) json_array_append_new(rooms, room_json(b, room, fl, attrs));
        json_decref(attrs);
    }
    size_t n = json_array_size(rooms);
    json_t **sorted = malloc((n ? n : 1) * sizeof *sorted);
    for (size_t i = 0; sorted && i < n; i++) sorted[i] = json_incref(json_array_get(rooms, i));
    if (sorted) {
        qsort(sorted, n, sizeof *sorted, room_cmp);
        json_array_clear(rooms);
        for (size_t i = 0; i < n; i++) json_array_append_new(rooms, sorted[i]);
        free(sorted);
    }
    json_object_set_new(out, "total", total);
    json_object_set_new(out, "buildings", buildings_array(by));
    json_decref(by);
    if (building) {
        json_object_set_new(out, "building", json_string(building));
        json_object_set_new(out, "rooms", rooms);
    } else {
        json_decref(rooms);
    }
}

void web_round_room(const watch_batch *b, const char *room, json_t *out)
{
    if (loading(b, WEB_ROUND_ROOM, out)) return;
    if (!json_object_get(b->capacity, room)) {
        json_object_set_new(out, "error", json_string("no such room in the batch's capacity"));
        return;
    }
    json_t *attrs = field_obj(b->attrs, room);
    if (!attrs) attrs = json_object();
    char bld[80], fl[80];
    scalar_text(json_object_get(attrs, "building"), bld, sizeof bld);
    scalar_text(json_object_get(attrs, "floor"), fl, sizeof fl);
    json_t *r = room_json(b, room, fl, attrs);
    json_object_set_new(r, "building", json_string(bld));
    json_decref(attrs);
    json_t *holders = json_array();
    const char *user;
    json_t *v;
    json_object_foreach(b->holders, user, v) {
        if (!strstr(json_string_value(v), room)) continue;   /* most holders: not parsed */
        json_t *h = field_obj(b->holders, user);
        if (h && !strcmp(json_string_value(json_object_get(h, "item")) ?: "", room)) {
            json_object_set_new(h, "user", json_string(user));
            json_array_append(holders, h);
        }
        json_decref(h);
    }
    json_object_set_new(r, "holders", holders);
    json_object_set_new(out, "room", r);
}

/* ---- groups, lottery, slots, swaps ---- */

static void groups_json(const watch_batch *b, long offset, json_t *out)
{
    size_t n;
    const char **k = sorted_keys(b->groups, &n);
    long members = 0, invited = 0;
    json_t *page = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *g = field_obj(b->groups, k[i]);
        if (!g) continue;
        members += (long)json_array_size(json_object_get(g, "members"));
        invited += (long)json_array_size(json_object_get(g, "invited"));
        if ((long)i >= offset && (long)i < offset + WEB_ROUND_PAGE) {
            json_object_set_new(g, "id", json_string(k[i]));
            json_array_append(page, g);
        }
        json_decref(g);
    }
    free(k);
    json_object_set_new(out, "groups", json_pack("{s:I,s:I,s:I,s:I,s:i,s:o}", "total", (json_int_t)n,
                        "members", (json_int_t)members, "invited", (json_int_t)invited,
                        "offset", (json_int_t)offset, "page", WEB_ROUND_PAGE, "list", page));
}

static void lottery_json(const watch_batch *b, json_t *out)
{
    const char *commit = field_str(b->stats, "lottery_commit"), *seed = field_str(b->stats, "lottery_seed");
    json_t *l = json_pack("{s:s,s:I}", "early", *field_str(b->meta, "early") ? field_str(b->meta, "early") : "reject",
                          "opens_at", (json_int_t)field_int(b->meta, "opens_at", 0));
    json_object_set_new(l, "draw_by", json_string(*field_str(b->meta, "draw_by") ? field_str(b->meta, "draw_by") : "none"));
    json_object_set_new(l, "commit", *commit ? json_string(commit) : json_null());
    json_object_set_new(l, "seed", *seed ? json_string(seed) : json_null());
    json_object_set_new(l, "early_kept", json_integer(field_int(b->stats, "early_kept", 0)));
    json_object_set_new(l, "tickets", json_integer(field_int(b->stats, "lottery_users", 0)));
    /* the commitment's check (contract 9.1) */
    json_t *ok = json_null();
    if (*seed && *commit) {
        char hex[LOTTERY_SEED_HEX + 1];
        lottery_commit(seed, hex);
        ok = json_boolean(!strcmp(hex, commit));
    }
    json_object_set_new(l, "commit_matches_seed", ok);
    /* the draw's replay, `allocctl lottery verify`'s check, made by the
     * watcher (service/watch_lottery.h) once the seed is out */
    const json_t *v = watch_lottery_verdict(b);
    json_t *verify;
    if (!*seed) verify = json_pack("{s:s}", "state", "not revealed");
    else if (v) verify = json_deep_copy(v);
    else verify = json_pack("{s:s}", "state", "pending");
    json_object_set_new(l, "verify", verify);
    char cmd[120];
    snprintf(cmd, sizeof cmd, "allocctl lottery verify %s", b->id);
    json_object_set_new(l, "verify_command", json_string(cmd));
    json_object_set_new(out, "lottery", l);
}

static int i64cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Slots: how many users may be served already, and the next slot times
 * with how many users each opens for. */
static void slots_json(const watch_batch *b, int64_t now, json_t *out)
{
    size_t n = json_object_size(b->slots), i = 0;
    int64_t *at = malloc((n ? n : 1) * sizeof *at);
    const char *u;
    json_t *v;
    json_object_foreach(b->slots, u, v) if (at) at[i++] = strtoll(json_string_value(v), NULL, 10);
    n = at ? i : 0;
    if (n > 1) qsort(at, n, sizeof *at, i64cmp);
    size_t open = 0;
    while (open < n && at[open] <= now) open++;
    json_t *next = json_array();
    for (size_t k = open; k < n && json_array_size(next) < SLOT_TIMES;) {
        size_t e = k;
        while (e < n && at[e] == at[k]) e++;
        json_array_append_new(next, json_pack("[I,I]", (json_int_t)at[k], (json_int_t)(e - k)));
        k = e;
    }
    json_t *s = json_pack("{s:I,s:I,s:o}", "users", (json_int_t)n, "open", (json_int_t)open, "next", next);
    json_object_set_new(s, "first", n ? json_integer(at[0]) : json_null());
    json_object_set_new(s, "last", n ? json_integer(at[n - 1]) : json_null());
    free(at);
    json_object_set_new(out, "slots", s);
}

static void swaps_json(const watch_batch *b, json_t *out)
{
    json_t *list = json_array();
    size_t total = 0;
    const char *user;
    json_t *v;
    json_object_foreach(b->holders, user, v) {
        if (!strstr(json_string_value(v), "swap_offers")) continue;
        json_t *h = field_obj(b->holders, user);
        json_t *offers = json_object_get(h, "swap_offers");
        for (size_t i = 0; i < json_array_size(offers); i++, total++) {
            if (json_array_size(list) >= SWAPS_LISTED) continue;
            json_t *o = json_array_get(offers, i);
            const char *with = json_string_value(json_object_get(o, "with")) ?: "";
            json_t *wh = field_obj(b->holders, with);
            json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:s,s:O,s:O}", "user", user,
                                  "room", json_string_value(json_object_get(h, "item")) ?: "",
                                  "with", with, "with_room", json_string_value(json_object_get(wh, "item")) ?: "",
                                  "req", json_object_get(o, "req") ?: json_null(),
                                  "seq", json_object_get(o, "seq") ?: json_null()));
            json_decref(wh);
        }
        json_decref(h);
    }
    json_object_set_new(out, "swaps", json_pack("{s:I,s:o}", "total", (json_int_t)total, "list", list));
}

void web_round_people(const watch_batch *b, long offset, int64_t now_ms, json_t *out)
{
    lottery_json(b, out);   /* stats and meta: there without the round */
    if (loading(b, WEB_ROUND_PEOPLE, out)) return;
    groups_json(b, offset < 0 ? 0 : offset, out);
    slots_json(b, now_ms, out);
    swaps_json(b, out);
    json_object_set_new(out, "holders", json_integer((json_int_t)json_object_size(b->holders)));
}
