/* prop_elig.h -- the reference of contract 11.2 and 11.4 for
 * test_engine_prop.c: who may hold what, restated from the contract with
 * the test's own tables (profiles, rules, holders), never asking the
 * engine. Header-only (static functions) because only that test uses it.
 *
 * A profile gives a user up to three keys (gender, year, llc), each a
 * canonical JSON value or missing. An item's rules are only_X (the user's
 * X is one of the values) and same_X (every holder has the same X). The
 * value of a same_X item is decided by its holders as they are now:
 *   - the value of its regular holders, when it has any (all of them
 *     share it: that is the rule);
 *   - else the value of the holders placed by staff without check (11.5)
 *     when those agree;
 *   - else none: anyone with an X may take it.
 * A staff exception is never held against the regular holders (verify's
 * audit, 11.2), and a value that follows from the holders alone is the
 * same before and after a restart of the worker.
 *
 * group_fill = exact (11.4): a group takes an empty room of its size, a
 * single user a bed in a room with a holder or a single (pe_single_fits).
 */
#ifndef ALLOCD_PROP_ELIG_H
#define ALLOCD_PROP_ELIG_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/engine.h"

#define PE_KEYS 3
static const char *const pe_key_names[PE_KEYS] = { "gender", "year", "llc" };
static const char *const pe_pool[PE_KEYS][4] = {
    { "\"F\"", "\"M\"", "\"X\"", NULL },
    { "1", "2", "3", "4" },
    { "\"stem\"", "\"arts\"", NULL, NULL },
};

typedef struct pe_profile {
    int has;                      /* a profile at all */
    const char *val[PE_KEYS];     /* canonical JSON, NULL = the profile lacks it */
} pe_profile;

enum { PE_ONLY = 0, PE_SAME = 1, PE_INERT = 2 };   /* INERT: same_X other than true */

typedef struct pe_rule {
    int key;
    int kind;
    int n_vals;
    const char *vals[3];
} pe_rule;

#define PE_RULES 3
typedef struct pe_rules {
    int n;
    pe_rule r[PE_RULES];
} pe_rules;

/* One holder of an item: a user index, its value source and whether it is
 * a staff exception (placed without check). */
typedef struct pe_holder {
    int user;
    int staff;
} pe_holder;

static int pe_pool_size(int key)
{
    int n = 0;
    while (n < 4 && pe_pool[key][n]) n++;
    return n;
}

static uint64_t pe__next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int pe__rnd(uint64_t *s, int n) { return (int)(pe__next(s) % (uint64_t)n); }

/* A random profile: now and then none, now and then a key missing. */
static void pe_gen_profile(uint64_t *g, pe_profile *p)
{
    memset(p, 0, sizeof *p);
    p->has = pe__rnd(g, 100) >= 12;
    for (int k = 0; p->has && k < PE_KEYS; k++)
        if (pe__rnd(g, 100) < 85) p->val[k] = pe_pool[k][pe__rnd(g, pe_pool_size(k))];
}

/* Up to `max` rules: only_X of one or two values, same_X true, and
 * sometimes a same_X that restricts nothing. */
static void pe_gen_rules(uint64_t *g, pe_rules *rs, int max)
{
    memset(rs, 0, sizeof *rs);
    int n = pe__rnd(g, max + 1);
    for (int i = 0; i < n; i++) {
        pe_rule *r = &rs->r[rs->n];
        r->key = pe__rnd(g, PE_KEYS);
        int k = pe__rnd(g, 10);
        r->kind = k < 5 ? PE_ONLY : k < 9 ? PE_SAME : PE_INERT;
        for (int j = 0; j < rs->n; j++)   /* one rule per attr name */
            if (rs->r[j].key == r->key && (rs->r[j].kind == PE_ONLY) == (r->kind == PE_ONLY)) r = NULL;
        if (!r) continue;
        if (r->kind == PE_ONLY) {
            int size = pe_pool_size(r->key), first = pe__rnd(g, size);
            r->vals[r->n_vals++] = pe_pool[r->key][first];
            if (pe__rnd(g, 2)) r->vals[r->n_vals++] = pe_pool[r->key][(first + 1 + pe__rnd(g, size - 1)) % size];
        }
        rs->n++;
    }
}

/* The attr of a rule as the operator writes it in P:{B}:attrs (canonical
 * JSON: an array without spaces). */
static void pe_rule_attr(const pe_rule *r, char *key, size_t key_cap, char *val, size_t val_cap)
{
    snprintf(key, key_cap, "%s_%s", r->kind == PE_ONLY ? "only" : "same", pe_key_names[r->key]);
    if (r->kind == PE_SAME) snprintf(val, val_cap, "true");
    else if (r->kind == PE_INERT) snprintf(val, val_cap, "false");
    else if (r->n_vals == 1) snprintf(val, val_cap, "%s", r->vals[0]);
    else snprintf(val, val_cap, "[%s,%s]", r->vals[0], r->vals[1]);
}

/* The engine_kv form of a profile (for engine_profile_set). */
static size_t pe_profile_kv(const pe_profile *p, engine_kv *kv)
{
    size_t n = 0;
    for (int k = 0; p->has && k < PE_KEYS; k++)
        if (p->val[k]) kv[n++] = (engine_kv){ pe_key_names[k], p->val[k] };
    return n;
}

static const char *pe_value(const pe_profile *profiles, int user, int key)
{
    return profiles[user].has ? profiles[user].val[key] : NULL;
}

/* The value of a same_X item (key) from its holders, leaving one out (a
 * swap's partner, -1 for none); NULL when it has none. */
static const char *pe_item_value(const pe_profile *profiles, int key, const pe_holder *h, int n,
                                 int leaving)
{
    const char *staff = NULL;
    int staff_agree = 1;
    for (int i = 0; i < n; i++) {
        if (h[i].user == leaving) continue;
        const char *v = pe_value(profiles, h[i].user, key);
        if (!v) continue;
        if (!h[i].staff) return v;
        if (staff && strcmp(staff, v) != 0) staff_agree = 0;
        if (!staff) staff = v;
    }
    return staff_agree ? staff : NULL;
}

/* Whether user u may be given the item now (its rules, its holders). */
static int pe_may(const pe_profile *profiles, int u, const pe_rules *rs, const pe_holder *h, int n,
                  int leaving)
{
    for (int i = 0; i < rs->n; i++) {
        const pe_rule *r = &rs->r[i];
        if (r->kind == PE_INERT) continue;
        const char *v = pe_value(profiles, u, r->key);
        if (!v) return 0;
        if (r->kind == PE_SAME) {
            const char *have = pe_item_value(profiles, r->key, h, n, leaving);
            if (have && strcmp(have, v) != 0) return 0;
            continue;
        }
        int ok = 0;
        for (int j = 0; j < r->n_vals; j++) ok |= strcmp(r->vals[j], v) == 0;
        if (!ok) return 0;
    }
    return 1;
}

/* A group: every member may, and the members share every same_X value. */
static int pe_may_group(const pe_profile *profiles, const int *members, int n_members,
                        const pe_rules *rs, const pe_holder *h, int n)
{
    for (int m = 0; m < n_members; m++)
        if (!pe_may(profiles, members[m], rs, h, n, -1)) return 0;
    for (int i = 0; i < rs->n; i++) {
        if (rs->r[i].kind != PE_SAME) continue;
        for (int m = 1; m < n_members; m++)
            if (strcmp(pe_value(profiles, members[m], rs->r[i].key),
                       pe_value(profiles, members[0], rs->r[i].key)) != 0)
                return 0;
    }
    return 1;
}

/* verify's audit of one holder (engine_holder_ok): every only_X, and
 * same_X against the other holders that are not staff exceptions. */
static int pe_holder_ok(const pe_profile *profiles, const pe_rules *rs, const pe_holder *h, int n, int i)
{
    for (int k = 0; k < rs->n; k++) {
        const pe_rule *r = &rs->r[k];
        if (r->kind == PE_INERT) continue;
        const char *v = pe_value(profiles, h[i].user, r->key);
        if (!v) return 0;
        int ok = r->kind == PE_SAME;
        for (int j = 0; r->kind == PE_ONLY && j < r->n_vals; j++) ok |= strcmp(r->vals[j], v) == 0;
        for (int j = 0; r->kind == PE_SAME && j < n; j++) {
            const char *w = pe_value(profiles, h[j].user, r->key);
            if (j != i && !h[j].staff && (!w || strcmp(w, v) != 0)) ok = 0;
        }
        if (!ok) return 0;
    }
    return 1;
}

/* The invariant: no regular holder breaks a rule of the item. -1, or the
 * index of the first that does. */
static int pe_audit(const pe_profile *profiles, const pe_rules *rs, const pe_holder *h, int n)
{
    for (int i = 0; i < n; i++)
        if (!h[i].staff && !pe_holder_ok(profiles, rs, h, n, i)) return i;
    return -1;
}

/* 11.4: may a single user take a bed of a room with `held` of `cap` beds
 * held (and at least one free)? */
static int pe_single_fits(int exact, int64_t cap, int64_t held)
{
    return !exact || cap == 1 || held > 0;
}

/* 11.4: may a group of n take a room with `held` of `cap` beds held? */
static int pe_group_fits(int exact, int64_t cap, int64_t held, int64_t n)
{
    return cap - held >= n && (!exact || (held == 0 && cap == n));
}

#endif
