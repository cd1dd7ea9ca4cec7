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

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ batch --- */

/* Rules by room k % 10: rooms for women, for men, gender-flexible rooms
 * (the first holder's gender), upper years, an LLC floor; one in ten has
 * none. Every room keeps the building and floor the other scenarios
 * filter on. */
static const char *const rules[10] = {
    ",\"only_gender\":\"F\"", ",\"only_gender\":\"M\"", ",\"only_gender\":\"F\"",
    ",\"only_gender\":\"M\"", ",\"same_gender\":true", ",\"same_gender\":true", ",\"same_gender\":true",
    ",\"only_year\":[3,4],\"same_gender\":true", ",\"only_llc\":[\"stem\",\"arts\"],\"same_gender\":true", "",
};

int housing_attrs(const workload *w, long k, char *buf, size_t len)
{
    const char *r = (w->housing & HOUSING_RULES) ? rules[k % 10] : "";
    return snprintf(buf, len, "{\"building\":\"%ld\",\"floor\":%ld%s}", k % 10, k % 7, r);
}

/* User u's five attributes, drawn from the seed: 48% F, 48% M, 4% X;
 * years 1-4; 15% stem, 10% arts; 5% with an accessibility need; points
 * 0-100. */
static int profile_json(const workload *w, long u, char *buf, size_t len)
{
    uint64_t x = bench_mix(w->seed ^ bench_mix((uint64_t)u * 16 + 15));
    unsigned g = (unsigned)(x % 100), llc = (unsigned)(x >> 8 & 0xff) % 100;
    return snprintf(buf, len, "{\"gender\":\"%s\",\"year\":%u,\"llc\":\"%s\",\"access\":%u,\"points\":%u}",
                    g < 48 ? "F" : g < 96 ? "M" : "X", 1 + (unsigned)(x >> 16 & 3),
                    llc < 15 ? "stem" : llc < 25 ? "arts" : "none", (unsigned)(x >> 24 & 0xff) % 100 < 5,
                    (unsigned)(x >> 32 & 0xffff) % 101);
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

/* ---------------------------------------------------------- targets --- */

static int is_housing(const row *r, const char *mode)
{
    return r->sc == SC_HOUSING && !strcmp(r->mode, mode) && r->has_a && r->a_ok && !r->a.missing;
}

/* Pairs of rows elig-off, elig-on in the order run_housing made them. */
static void target_eligibility(const bench *b)
{
    double v[MAX_ROWS], cpu[MAX_ROWS];
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
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%.0f/%.0f=%.3f", n ? " " : "", on->a.tput, off->a.tput, v[n]);
        n++;
    }
    if (!runs) return;
    double x = median_of(v, n), c = median_of(cpu, n);
    char what[900];
    snprintf(what, sizeof what, "housing, %ld requests and users, profiles and rules on 9 rooms in 10: "
             "decisions/s with eligibility / without, median of %d pairs = %.3f (>= 0.90) [%s]; "
             "allocd CPU per request on/off median %.2f", requests, n, x, list, c);
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
    char what[400];
    snprintf(what, sizeof what, "%ld users with five attributes: allocd RSS %.1f MB with profiles, %.1f MB "
             "without = %.0f bytes/user (<= 100); peak RSS difference %.0f bytes/user",
             users, m ? (double)with->a.rss_end_kb / 1024 : 0, m ? (double)without->a.rss_end_kb / 1024 : 0,
             per, hwm);
    report_target(b, "profile_bytes_per_user", m, per <= 100, what);
}

void housing_targets(const bench *b)
{
    target_eligibility(b);
    target_profile_memory(b);
}
