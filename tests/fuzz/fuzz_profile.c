/* fuzz_profile.c -- fuzz target over profiles and eligibility (contract
 * 11.2): the profile reader (wire/profile.h), an item's only_X / same_X
 * attrs read as the batch load reads them (wire/state_load.h), and the
 * engine's decision on who may hold what (core/engine_elig.h).
 *
 * Why: a profile is written by whoever edits P:{B}:profiles and an attr by
 * whoever loads items; both reach the engine while a round is served. A
 * hostile one must be refused or read exactly, never crash, never leave a
 * stale profile in force, and never let a rule fail open. The engine
 * interns everything into numbers (engine_elig.c); this target decides
 * every question again from the JSON alone, with jansson and string
 * comparison, and the two must agree.
 *
 * Input: byte 0 (bit 0: rooms, else stock; bits 1-2: capacity 1..4), then
 * records separated by '\n', each a letter and its bytes:
 *   A<j><json>  the attrs of item I<j%2> (only before the first grant, as
 *               attrs are only read at load)
 *   P<u><json>  user u<u%4> gets this profile text, read as the worker
 *               reads one (worker/profiles_scan.c): not a profile = none
 *   G<u><j><c>  staff assign of u to I<j%2>, with check when c is odd
 *   U<u>        staff unassign of u (everything it holds)
 *
 * After every record, for every user and item: engine_eligible agrees
 * with the reference (only_X: the user's value is one of the listed ones;
 * same_X:true: the user has X and, while the item is held, the holders'
 * value; a value the item lists that no profile can have matches nobody);
 * a refusal names a rule of the item and the user's value; every holder's
 * engine_holder_ok agrees with the reference audit; an accepted profile is
 * installed (engine_profile_set never refuses what profile_parse read)
 * and reads back value for value; an assign with check grants only the
 * eligible. Built with libFuzzer or as test_fuzz_replay_profile over
 * tests/fuzz/corpus/profile/ and tests/fuzz/regressions/profile/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "core/engine.h"
#include "core/engine_elig.h"
#include "wire/profile.h"
#include "wire/request.h"
#include "wire/state_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_profile: check failed: %s: ", #cond);      \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

#define NU 4
#define NI 2
#define T0 1763800000000LL

static const char *const users[NU] = { "u0", "u1", "u2", "u3" };
static const char *const items[NI] = { "I0", "I1" };

typedef struct fz {
    engine *e;
    int room;
    json_t *attrs[NI];        /* the item's attrs as loaded (NULL: none) */
    int attrs_failed[NI];     /* the load said no: the rules may be partial */
    json_t *prof[NU];         /* the profile in force (NULL: none) */
    int granted;              /* a grant happened: attrs are fixed now */
    int n_req;
    uint64_t next_order;
} fz;

static uint64_t order_source(void *ctx) { return ++((fz *)ctx)->next_order; }

/* The user's value of X as canonical JSON (malloc'd), NULL when none. */
static char *user_value(const fz *f, int u, const char *x)
{
    json_t *v = f->prof[u] ? json_object_get(f->prof[u], x) : NULL;
    return v ? request_canonical_json(v) : NULL;
}

static int is_rule(const char *key)
{
    return (!strncmp(key, "only_", 5) || !strncmp(key, "same_", 5)) && key[5];
}

/* only_X: v is the value or one of the array's values. */
static int listed(json_t *allowed, const char *v)
{
    size_t n = json_is_array(allowed) ? json_array_size(allowed) : 1;
    for (size_t i = 0; i < n; i++) {
        char *c = request_canonical_json(json_is_array(allowed) ? json_array_get(allowed, i) : allowed);
        int eq = c && !strcmp(c, v);
        free(c);
        if (eq) return 1;
    }
    return 0;
}

static int holds(const fz *f, int u, int it, int *staff);

/* The value same_<x> of item it holds a newcomer to, from its holders now
 * (docs/DESIGN.md, engine_elig.c): the holders by right's, or, when only
 * staff exceptions hold it, theirs if they agree; NULL: none. *unsure:
 * the holders by right disagree (a profile edited since), so which one
 * the engine takes depends on its user order. */
static char *ref_same_want(fz *f, int it, const char *x, int *unsure)
{
    char *want = NULL, *staff_want = NULL;
    int staff_disagree = 0;
    *unsure = 0;
    for (int w = 0; w < NU; w++) {
        int staff;
        if (!holds(f, w, it, &staff)) continue;
        char *v = user_value(f, w, x);
        if (!v) continue;
        char **slot = staff ? &staff_want : &want;
        if (!*slot) { *slot = v; continue; }
        if (strcmp(*slot, v)) { if (staff) staff_disagree = 1; else *unsure = 1; }
        free(v);
    }
    if (want) { free(staff_want); return want; }
    if (staff_disagree) { free(staff_want); return NULL; }
    return staff_want;
}

/* The first rule of item it that u breaks (its attr), NULL when none;
 * *unsure as ref_same_want's. */
static const char *ref_broken(fz *f, int u, int it, int *unsure)
{
    const char *key;
    json_t *val;
    if (!f->attrs[it]) return NULL;
    json_object_foreach(f->attrs[it], key, val) {
        if (!is_rule(key)) continue;
        int same = key[0] == 's';
        if (same && !json_is_true(val)) continue;
        char *v = user_value(f, u, key + 5);
        int ok = v != NULL;
        if (ok && same) {
            int maybe;
            char *want = ref_same_want(f, it, key + 5, &maybe);
            ok = !want || !strcmp(want, v);
            *unsure |= maybe;
            free(want);
        } else if (ok) {
            ok = listed(val, v);
        }
        free(v);
        if (!ok) return key;
    }
    return NULL;
}

static void check_eligible(fz *f, int u, int it)
{
    engine_elig_why why = { 0 };
    int got = engine_eligible(f->e, users[u], items[it], &why);
    int unsure = 0;
    const char *want = ref_broken(f, u, it, &unsure);
    CHECK(got == 0 || got == 1, "engine_eligible %d", got);
    if (unsure) return;   /* holders by right disagree: either answer is the engine's to give */
    if (f->attrs_failed[it]) {
        /* a load the engine refused may leave a rule partial, never open */
        CHECK(!got || !want, "%s eligible for %s against %s (after a failed attrs load)", users[u], items[it], want);
        return;
    }
    CHECK(got == !want, "%s for %s: engine %s, reference %s", users[u], items[it],
          got ? "eligible" : why.rule, want ? want : "eligible");
    if (got) return;
    CHECK(why.rule && f->attrs[it] && json_object_get(f->attrs[it], why.rule) && is_rule(why.rule),
          "refusal names '%s', not a rule of %s", why.rule ? why.rule : "(null)", items[it]);
    char *v = user_value(f, u, why.rule + 5);
    CHECK(v ? why.value && !strcmp(v, why.value) : !why.value, "why value '%s', profile '%s'",
          why.value ? why.value : "(none)", v ? v : "(none)");
    free(v);
}

/* ------------------------------------------------------------ holders -- */

/* Whether u holds it; *staff: placed by staff without check. */
static int holds(const fz *f, int u, int it, int *staff)
{
    engine_user_view v;
    *staff = 0;
    if (engine_user_view_get(f->e, users[u], &v) < 0) return 0;
    if (f->room) {
        *staff = v.staff;
        return v.room && !strcmp(v.room, items[it]);
    }
    int any = 0, all_staff = 1;
    for (size_t i = 0; i < v.n_orders; i++) {
        engine_item_view iv;
        engine_item_view_at(f->e, v.orders[i].item, &iv);
        if (strcmp(iv.id, items[it])) continue;
        any = 1;
        all_staff &= v.orders[i].staff;
    }
    *staff = any && all_staff;
    return any;
}

/* The audit of verify from the JSON: only_X as above; same_X: every other
 * holder but staff exceptions has u's value. */
static int ref_holder_ok(fz *f, int u, int it)
{
    const char *key;
    json_t *val;
    if (!f->attrs[it]) return 1;
    json_object_foreach(f->attrs[it], key, val) {
        if (!is_rule(key) || (key[0] == 's' && !json_is_true(val))) continue;
        char *v = user_value(f, u, key + 5);
        int ok = v != NULL;
        if (ok && key[0] == 'o') ok = listed(val, v);
        for (int w = 0; ok && key[0] == 's' && w < NU; w++) {
            int staff;
            if (w == u || !holds(f, w, it, &staff) || staff) continue;
            char *o = user_value(f, w, key + 5);
            ok = o && !strcmp(o, v);
            free(o);
        }
        free(v);
        if (!ok) return 0;
    }
    return 1;
}

static void check_holders(fz *f)
{
    for (int u = 0; u < NU; u++)
        for (int it = 0; it < NI; it++) {
            int staff;
            int h = holds(f, u, it, &staff);
            int got = engine_holder_ok(f->e, users[u], items[it], NULL);
            if (!h) {
                CHECK(got == -ENOENT, "holder_ok %d for %s who does not hold %s", got, users[u], items[it]);
                continue;
            }
            if (f->attrs_failed[it]) continue;
            CHECK(got == ref_holder_ok(f, u, it), "holder_ok of %s in %s: engine %d", users[u], items[it], got);
        }
}

static void check_all(fz *f)
{
    CHECK(engine_check_invariants(f->e) == NULL, "%s", engine_check_invariants(f->e));
    for (int u = 0; u < NU; u++)
        for (int it = 0; it < NI; it++) check_eligible(f, u, it);
    check_holders(f);
}

/* ----------------------------------------------------------- records -- */

static void on_attrs(fz *f, const uint8_t *p, size_t n)
{
    if (n < 1 || f->granted) return;
    int it = p[0] % NI;
    char err[256] = "";
    int rc = state_load_attrs(f->e, items[it], (const char *)p + 1, n - 1, err, sizeof err);
    if (rc < 0) CHECK(err[0], "attrs refused without a message");
    json_t *doc = json_loadb((const char *)p + 1, n - 1, 0, NULL);
    if (!json_is_object(doc)) {
        CHECK(rc < 0, "attrs that are not an object were loaded");
        json_decref(doc);
        return;
    }
    if (rc < 0) f->attrs_failed[it] = 1;
    /* a second load of an item's attrs adds to the first, a key keeps its
     * last value (engine_load_attr) */
    if (!f->attrs[it]) f->attrs[it] = json_object();
    json_object_update(f->attrs[it], doc);
    json_decref(doc);
}

/* What profiles_scan does with a profile text: install it or clear. */
static void on_profile(fz *f, const uint8_t *p, size_t n)
{
    if (n < 1) return;
    int u = p[0] % NU;
    profile pr;
    char err[200] = "";
    int rc = profile_parse(&pr, (const char *)p + 1, n - 1, err, sizeof err);
    json_decref(f->prof[u]);
    f->prof[u] = NULL;
    if (rc < 0) {
        CHECK(err[0], "profile refused without a message");
        CHECK(pr.n == 0 && pr.buf == NULL, "a refused profile kept pairs");
        CHECK(engine_profile_set(f->e, users[u], NULL, 0) == 0, "clearing a profile");
        profile_free(&pr);
        return;
    }
    json_t *doc = json_loadb((const char *)p + 1, n - 1, 0, NULL);
    CHECK(json_is_object(doc) && json_object_size(doc) == pr.n, "profile of %zu pairs from %zu keys",
          pr.n, json_object_size(doc));
    int erc = engine_profile_set(f->e, users[u], pr.kv, pr.n);
    CHECK(erc == 0, "engine_profile_set refused (%d) a profile profile_parse read: %.*s", erc,
          (int)(n - 1 > 300 ? 300 : n - 1), (const char *)p + 1);
    for (size_t i = 0; i < pr.n; i++) {
        char *want = request_canonical_json(json_object_get(doc, pr.kv[i].key));
        const char *got = engine_profile_get(f->e, users[u], pr.kv[i].key);
        CHECK(want && got && !strcmp(want, got), "'%s' reads back '%s', not '%s'", pr.kv[i].key,
              got ? got : "(none)", want ? want : "(none)");
        free(want);
    }
    json_t *pts = json_object_get(doc, "points");
    CHECK(pr.points == (json_is_integer(pts) ? json_integer_value(pts) : 0), "points %lld", (long long)pr.points);
    CHECK(engine_profile_int(f->e, users[u], "points", -7) == (json_is_integer(pts) ? json_integer_value(pts) : -7),
          "engine points");
    f->prof[u] = doc;
    profile_free(&pr);
}

static void staff_op(fz *f, int assign, int u, int it, int check)
{
    char id[24];
    snprintf(id, sizeof id, "c%d", ++f->n_req);
    engine_request r = { .op = assign ? OP_ASSIGN : OP_UNASSIGN, .id = id, .user = users[u],
                         .item = assign ? items[it] : NULL, .qty = 1, .check = check };
    int eligible = engine_eligible(f->e, users[u], items[it], NULL);
    engine_result res;
    engine_decide(f->e, &r, T0, &res);
    CHECK(res.status != STATUS_NONE, "no decision (engine error %d)", engine_error(f->e));
    if (!assign) return;
    if (res.status == STATUS_GRANTED) {
        CHECK(!check || eligible == 1, "assign with check granted %s to %s, who is not eligible", items[it], users[u]);
        CHECK(res.by && !strcmp(res.by, "staff"), "an assign's grant without by=staff");
        f->granted = 1;
    } else if (res.reason == REASON_NOT_ELIGIBLE) {
        CHECK(check && eligible == 0, "not_eligible for an eligible user or without check");
    }
    engine_drain_clear(f->e);
}

static void on_record(fz *f, const uint8_t *p, size_t n)
{
    if (n < 1) return;
    switch (p[0]) {
    case 'A': on_attrs(f, p + 1, n - 1); break;
    case 'P': on_profile(f, p + 1, n - 1); break;
    case 'G': if (n >= 4) staff_op(f, 1, p[1] % NU, p[2] % NI, p[3] & 1); break;
    case 'U': if (n >= 2) staff_op(f, 0, p[1] % NU, 0, 0); break;
    default: return;
    }
    check_all(f);
}

static void fz_free(fz *f)
{
    engine_free(f->e);
    for (int i = 0; i < NI; i++) json_decref(f->attrs[i]);
    for (int u = 0; u < NU; u++) json_decref(f->prof[u]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 16384) return 0;
    fz f = { .room = data[0] & 1 };
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = f.room ? BATCH_ROOM : BATCH_STOCK;
    m.per_user = 4;
    f.e = engine_new(&m, 99);
    CHECK(f.e, "engine_new");
    engine_set_order_source(f.e, order_source, &f);
    for (int i = 0; i < NI; i++) CHECK(engine_load_item(f.e, items[i], 1 + ((data[0] >> 1) & 3)) == 0, "item");
    const uint8_t *p = data + 1, *end = data + size;
    while (p < end) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        on_record(&f, p, n);
        p += n + (nl ? 1 : 0);
    }
    check_all(&f);
    fz_free(&f);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
#include "fuzz_replay.h"
FUZZ_REPLAY_MAIN("profile")
#endif
