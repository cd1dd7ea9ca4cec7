/* housing.c -- the housing round of issue 35 in allocbench: what the
 * batch is written with (rooms' attrs, with only_X / same_X rules on nine
 * rooms in ten; a profile of five attributes for every user), and the two
 * TARGET lines that read its rows.
 *
 * Why here: eligibility costs the engine a lookup of the user's profile
 * and a comparison per rule at every grant, and allocd a read of
 * P:{B}:profiles at load and every second while serving. Its price is
 * only meaningful against the same round without it, on the same Redis,
 * in the same run (docs/PERFORMANCE.md), so --scenario housing-elig runs
 * pairs of rows, eligibility off and on, the order alternating, and
 * judges the median ratio; --profile-memory runs the same users with and
 * without profiles (no rules either way, so that both rounds decide
 * alike) and divides the difference in allocd's resident memory by the
 * users.
 */
#include "bench/allocbench.h"
#include "core/engine.h"
#include "core/engine_elig.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ batch --- */

/* Rules by room k % 10, as canonical JSON: rooms for women, for men,
 * gender-flexible rooms (the first holder's gender), upper years, an LLC
 * floor; one in ten has none. Every room keeps the building and floor
 * the other scenarios filter on. */
static const engine_kv rules[10][2] = {
    { { "only_gender", "\"F\"" } }, { { "only_gender", "\"M\"" } },
    { { "only_gender", "\"F\"" } }, { { "only_gender", "\"M\"" } },
    { { "same_gender", "true" } }, { { "same_gender", "true" } }, { { "same_gender", "true" } },
    { { "only_year", "[3,4]" }, { "same_gender", "true" } },
    { { "only_llc", "[\"stem\",\"arts\"]" }, { "same_gender", "true" } },
    { { NULL, NULL } },
};

static int n_rules(long k)
{
    return rules[k % 10][0].key ? rules[k % 10][1].key ? 2 : 1 : 0;
}

int housing_attrs(const workload *w, long k, char *buf, size_t len)
{
    int at = snprintf(buf, len, "{\"building\":\"%ld\",\"floor\":%ld", k % 10, k % 7);
    for (int i = 0; (w->housing & HOUSING_RULES) && i < n_rules(k) && at > 0 && (size_t)at < len; i++)
        at += snprintf(buf + at, len - (size_t)at, ",\"%s\":%s", rules[k % 10][i].key, rules[k % 10][i].value);
    return at > 0 && (size_t)at < len ? at + snprintf(buf + at, len - (size_t)at, "}") : -1;
}

/* User u's five attributes, drawn from the seed: 48% F, 48% M, 4% X;
 * years 1-4; 15% stem, 10% arts; 5% with an accessibility need; points
 * 0-100. Values as canonical JSON, into vals (5 x 16 bytes). */
enum { PROFILE_ATTRS = 5 };

static void profile_kv(const workload *w, long u, engine_kv *kv, char (*vals)[16])
{
    static const char *const keys[PROFILE_ATTRS] = { "gender", "year", "llc", "access", "points" };
    uint64_t x = bench_mix(w->seed ^ bench_mix((uint64_t)u * 16 + 15));
    unsigned g = (unsigned)(x % 100), llc = (unsigned)(x >> 8 & 0xff) % 100;
    snprintf(vals[0], 16, "\"%s\"", g < 48 ? "F" : g < 96 ? "M" : "X");
    snprintf(vals[1], 16, "%u", 1 + (unsigned)(x >> 16 & 3));
    snprintf(vals[2], 16, "\"%s\"", llc < 15 ? "stem" : llc < 25 ? "arts" : "none");
    snprintf(vals[3], 16, "%u", (unsigned)(x >> 24 & 0xff) % 100 < 5);
    snprintf(vals[4], 16, "%u", (unsigned)(x >> 32 & 0xffff) % 101);
    for (int i = 0; i < PROFILE_ATTRS; i++) kv[i] = (engine_kv){ keys[i], vals[i] };
}

static int profile_json(const workload *w, long u, char *buf, size_t len)
{
    engine_kv kv[PROFILE_ATTRS];
    char vals[PROFILE_ATTRS][16];
    profile_kv(w, u, kv, vals);
    int at = 0;
    for (int i = 0; i < PROFILE_ATTRS && at >= 0 && (size_t)at < len; i++)
        at += snprintf(buf + at, len - (size_t)at, "%s\"%s\":%s", i ? "," : "{", kv[i].key, kv[i].value);
    return at >= 0 && (size_t)at < len ? at + snprintf(buf + at, len - (size_t)at, "}") : -1;
}

/* HSET key in slices of 500 users: u<k> -> its profile. */
int housing_write_profiles(redisContext *c, const workload *w, const char *key)
{
    enum { SLICE = 500 };
    char names[SLICE][24], vals[SLICE][128];
    const char *argv[2 + 2 * SLICE];
    for (long u0 = 0; u0 < w->users; u0 += SLICE) {
        int argc = 0;
        argv[argc++] = "HSET";
        argv[argc++] = key;
        for (long u = u0; u < w->users && u < u0 + SLICE; u++) {
            snprintf(names[u - u0], sizeof names[0], "u%ld", u);
            profile_json(w, u, vals[u - u0], sizeof vals[0]);
            argv[argc++] = names[u - u0];
            argv[argc++] = vals[u - u0];
        }
        if (bench_ok_argv(c, argc, argv, NULL) < 0) return -1;
    }
    return 0;
}

/* ----------------------------------------------------------- engine --- */

/* The round's rooms (and with elig, its rules and every user's profile)
 * in an engine of its own. */
static engine *housing_engine(const workload *w, int elig)
{
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_ROOM;
    m.per_user = 1;
    m.max_group = WL_MEMBERS;
    engine *e = engine_new(&m, w->seed);
    char name[24], vals[PROFILE_ATTRS][16];
    engine_kv kv[PROFILE_ATTRS];
    int ok = e != NULL;
    for (long k = 0; ok && k < w->items; k++) {
        wl_item_name(w, k, name, sizeof name);
        ok = engine_load_item(e, name, w->units) == 0;
        for (int i = 0; ok && elig && i < n_rules(k); i++)
            ok = engine_load_attr(e, name, rules[k % 10][i].key, rules[k % 10][i].value) == 0;
    }
    for (long u = 0; ok && elig && u < w->users; u++) {
        profile_kv(w, u, kv, vals);
        snprintf(name, sizeof name, "u%ld", u);
        ok = engine_profile_set(e, name, kv, PROFILE_ATTRS) == 0;
    }
    if (ok && elig) engine_profiles_expect_users(e);   /* as the worker does after a read */
    if (!ok) engine_free(e);
    return ok ? e : NULL;
}

/* Decisions per second of the engine alone over the round's requests: no
 * Redis, no parsing; rooms, rules and profiles loaded before the clock. */
static double engine_rate(const workload *w, int elig)
{
    engine *e = housing_engine(w, elig);
    if (!e) return 0;
    char id[24], user[48], prefs[WL_PREFS][24];
    const char *pp[WL_PREFS];
    int64_t t0 = proc_mono_us();
    for (long i = 0; i < w->n; i++) {
        wl_req q;
        workload_request(w, i, &q);
        snprintf(id, sizeof id, "%ld", i);
        wl_user_name(i, &q, 0, user, sizeof user);
        for (int p = 0; p < q.n_prefs; p++) {
            wl_item_name(w, q.prefs[p], prefs[p], sizeof prefs[p]);
            pp[p] = prefs[p];
        }
        engine_request r = { .op = OP_AUTO, .id = id, .user = user, .seq = i + 1, .prefs = pp,
                             .n_prefs = (size_t)q.n_prefs };
        engine_result res;
        engine_decide(e, &r, 1763800000000LL, &res);
        if (i % 512 == 511) engine_drain_clear(e);   /* as the worker drains each chunk */
    }
    double secs = (double)(proc_mono_us() - t0) / 1e6;
    engine_free(e);
    return secs > 0 ? (double)w->n / secs : 0;
}

void housing_engine_pair(bench *b, const workload *w)
{
    if (b->n_housing_engine == MAX_HOUSING_PAIRS) return;
    double *v = b->housing_engine[b->n_housing_engine];
    int first = b->n_housing_engine++ % 2;   /* every other pair with eligibility first */
    fprintf(stderr, "allocbench: housing, the engine alone...\n");
    v[first] = engine_rate(w, first);
    v[!first] = engine_rate(w, !first);
}

/* ---------------------------------------------------------- targets --- */

static int is_housing(const row *r, const char *mode)
{
    return r->sc == SC_HOUSING && !strcmp(r->mode, mode) && r->has_a && r->a_ok && !r->a.missing;
}

/* Pairs of rows elig-off, elig-on in the order run_housing made them. */
static void target_eligibility(const bench *b)
{
    double v[MAX_ROWS], cpu[MAX_ROWS], load_on[MAX_ROWS], load_off[MAX_ROWS];
    char list[600] = "";
    int n = 0, runs = 0;
    long requests = 0;
    for (int i = 0; i + 1 < b->n_rows; i++) {
        const row *off = &b->rows[i], *on = &b->rows[i + 1];
        if (off->sc != SC_HOUSING || strcmp(off->mode, "elig-off")) continue;
        runs++;
        requests = off->w.n;
        if (!is_housing(off, "elig-off") || !is_housing(on, "elig-on")) continue;
        v[n] = on->a.tput / off->a.tput;
        cpu[n] = off->a.cpu_allocd_us > 0 ? on->a.cpu_allocd_us / off->a.cpu_allocd_us : 0;
        load_on[n] = on->a.load_ms;
        load_off[n] = off->a.load_ms;
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%.0f/%.0f=%.3f", n ? " " : "", on->a.tput, off->a.tput, v[n]);
        n++;
    }
    if (!runs) return;
    double x = median_of(v, n), c = median_of(cpu, n), eng[MAX_HOUSING_PAIRS];
    for (int i = 0; i < b->n_housing_engine; i++) eng[i] = b->housing_engine[i][1] / b->housing_engine[i][0];
    char what[1200];
    snprintf(what, sizeof what, "housing, %ld requests and users, profiles and rules on 9 rooms in 10, "
             "the batch loaded and paused before the window, which resume opens: "
             "decisions/s with eligibility / without, median of %d pairs = %.3f (>= 0.90) [%s]; "
             "allocd CPU per request on/off median %.2f; the load before the window (the profiles "
             "with the batch) median %.0f ms on, %.0f ms off; the engine alone (no Redis, profiles loaded "
             "before the clock) on/off median %.3f (%.0f / %.0f decisions/s in the first pair)",
             requests, n, x, list, c, median_of(load_on, n), median_of(load_off, n), median_of(eng, b->n_housing_engine),
             b->n_housing_engine ? b->housing_engine[0][1] : 0, b->n_housing_engine ? b->housing_engine[0][0] : 0);
    report_target(b, "eligibility_cost", n > 0 && n == runs, x >= 0.90, what);
}

/* The row of the memory pair with (1) or without (0) profiles. */
static const row *memory_row(const bench *b, int with)
{
    for (int i = 0; i < b->n_rows; i++)
        if (is_housing(&b->rows[i], with ? "profiles" : "no-profiles")) return &b->rows[i];
    return NULL;
}

static void target_profile_memory(const bench *b)
{
    const row *with = memory_row(b, 1), *without = memory_row(b, 0);
    if (!b->opt.profile_memory) return;
    int m = with && without && with->a.rss_end_kb > 0 && without->a.rss_end_kb > 0;
    long users = m ? with->w.users : 0;
    double per = m ? (double)(with->a.rss_end_kb - without->a.rss_end_kb) * 1024.0 / (double)users : 0;
    double hwm = m ? (double)(with->a.hwm_kb - without->a.hwm_kb) * 1024.0 / (double)users : 0;
    /* the engine's own count of the same profiles (engine_profile_bytes:
     * no malloc overhead, no reader), to say where the rest is */
    engine *e = m ? housing_engine(&with->w, 1) : NULL;
    double own = e ? (double)engine_profile_bytes(e) / (double)users : 0;
    engine_free(e);
    char what[500];
    snprintf(what, sizeof what, "%ld users with five attributes: allocd RSS %.1f MB with profiles, %.1f MB "
             "without = %.0f bytes/user (<= 100); peak RSS difference %.0f bytes/user; the engine's own "
             "count (engine_profile_bytes) %.0f bytes/user",
             users, m ? (double)with->a.rss_end_kb / 1024 : 0, m ? (double)without->a.rss_end_kb / 1024 : 0,
             per, hwm, own);
    report_target(b, "profile_bytes_per_user", m, per <= 100, what);
}

void housing_targets(const bench *b)
{
    target_eligibility(b);
    target_profile_memory(b);
}
