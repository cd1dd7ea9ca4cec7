/* engine_elig.c -- profiles and eligibility (contract 11.2,
 * core/engine_elig.h): who may hold an item, decided beside the rules that
 * grant it (engine_stock, engine_rooms, engine_swap, engine_staff call
 * engine__elig_ok before a grant and engine__elig_took as they grant).
 *
 * Everything is interned, because a round loads a profile for every
 * student and most of them share their values: a key is a number, a
 * (key, value) pair is a number, and a whole profile (its pairs, sorted by
 * key) is stored once however many users have it. A user costs an entry
 * in the user map, its id and a profile number; checking a rule is a
 * comparison of pair numbers, never of strings, so eligibility costs a
 * decision little (the issue allows 10%).
 *
 * same_X: the value of an item is that of its regular holders; when it
 * has none, that of its holders placed by staff without check (11.5) if
 * they agree; else it has none and anyone with an X may take it. So it
 * follows from the holders alone, and a reload, which reads them in any
 * order, decides as the engine before it did. Per item the pair of the
 * regular holders is kept (set by the first of them, engine__elig_took;
 * loaded holders leave it unknown until the first decision,
 * engine__elig_refresh); the staff exceptions' pair is read from them
 * when they are all the item has (item.staff_held counts their units:
 * rare, and a scan of the users then).
 */
#include "engine_elig_int.h"
#include "core/assert.h"
#include "core/engine_elig.h"
#include "engine_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NO_PAIR STRMAP_NONE

typedef struct engine_profiles engine_profiles;

typedef struct prof_user {
    uint32_t id;           /* offset of the id in ids */
    uint32_t prof;         /* profile number, STRMAP_NONE = none */
} prof_user;

typedef struct pair {
    char *text;        /* "<key>\x1f<value>": the map's key */
    const char *value; /* into text: canonical JSON */
    uint32_t key;
    uint8_t is_num;
    int64_t num;
} pair;

typedef struct profile {
    char *text;        /* the sorted pair numbers, as the map's key */
    uint32_t *pairs;   /* sorted by key number */
    uint32_t n;
} profile;

struct engine_profiles {
    strmap key_map, pair_map, prof_map, user_map;
    char **keys;
    size_t n_keys, cap_keys;
    pair *pairs;
    size_t n_pairs, cap_pairs;
    profile *profs;
    size_t n_profs, cap_profs;
    /* the users' ids end to end in one buffer (a malloc each would cost
     * more than the id), found by offset: user_map keeps only numbers */
    char *ids;
    size_t ids_len, ids_cap;
    prof_user *users;      /* by number: a decision reads one line */
    size_t n_users, cap_users, n_set;
    size_t bytes;
};

/* A decision checks the rules of every room it considers, so an item's
 * rules are one block (item_rules and its rules together) and an only_X
 * of one or two values keeps them inline: a rule check reads that block
 * and nothing else (three dependent cache misses a room before). */
#define RULE_INLINE_VALS 2

typedef struct elig_rule {
    char *attr;        /* "only_gender": for the why */
    uint32_t key;
    uint8_t same;
    uint32_t same_pair;   /* same_X: the holders' pair, NO_PAIR unknown */
    uint32_t n_vals;
    uint32_t inl[RULE_INLINE_VALS];   /* only_X: the allowed pairs, up to 2 */
    uint32_t *vals;                   /* more: all of them here */
} elig_rule;

struct item_rules {
    uint32_t n;
    elig_rule r[];
};

static const uint32_t *rule_vals(const elig_rule *r)
{
    return r->n_vals <= RULE_INLINE_VALS ? r->inl : r->vals;
}

/* ---------------------------------------------------------------- interning */

static const char *key_of(const void *c, uint32_t i) { return ((const engine_profiles *)c)->keys[i]; }
static const char *pair_of(const void *c, uint32_t i) { return ((const engine_profiles *)c)->pairs[i].text; }
static const char *prof_of(const void *c, uint32_t i) { return ((const engine_profiles *)c)->profs[i].text; }
static const char *uid_of(const void *c, uint32_t i)
{
    const engine_profiles *p = c;
    return p->ids + p->users[i].id;
}

static engine_profiles *profiles(engine *e)
{
    if (e->prof) return e->prof;
    engine_profiles *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    uint64_t seed = e->user_map.k0 ^ 0x9e3779b97f4a7c15ULL;
    strmap_init(&p->key_map, seed, key_of, p);
    strmap_init(&p->pair_map, seed + 1, pair_of, p);
    strmap_init(&p->prof_map, seed + 2, prof_of, p);
    /* the users' map has the keys of the engine's own: one hash of an id
     * finds it in both, and the decisions' prefetch warms both
     * (engine__elig_prefetch) */
    strmap_init(&p->user_map, seed + 3, uid_of, p);
    p->user_map.k0 = e->user_map.k0;
    p->user_map.k1 = e->user_map.k1;
    e->prof = p;
    return p;
}

static uint32_t key_find(const engine_profiles *p, const char *k)
{
    return p ? strmap_find(&p->key_map, k) : STRMAP_NONE;
}

static uint32_t key_intern(engine_profiles *p, const char *k)
{
    uint32_t i = strmap_find(&p->key_map, k);
    if (i != STRMAP_NONE) return i;
    if (vec_reserve((void **)&p->keys, &p->cap_keys, p->n_keys + 1, sizeof *p->keys) < 0) return STRMAP_NONE;
    char *s = engine__intern(k);
    if (!s) return STRMAP_NONE;
    i = (uint32_t)p->n_keys;
    p->keys[i] = s;
    if (strmap_insert(&p->key_map, s, i) < 0) { free(s); return STRMAP_NONE; }
    p->n_keys++;
    p->bytes += strlen(s) + 1 + sizeof(char *);
    return i;
}

/* "<key>\x1f<value>" in buf; 0, or -EINVAL when it does not fit. */
static int pair_text(char *buf, size_t cap, const char *key, const char *value)
{
    size_t a = strlen(key), b = strlen(value);
    if (a + b + 2 > cap) return -EINVAL;
    memcpy(buf, key, a);
    buf[a] = '\x1f';
    memcpy(buf + a + 1, value, b + 1);
    return 0;
}

/* A canonical JSON integer: -?digits, no leading zero, fits int64
 * (INT64_MIN too: jansson reads and writes it, so a profile may hold it). */
static int json_int(const char *s, int64_t *out)
{
    int neg = *s == '-';
    const char *d = s + neg;
    if (!*d || (d[0] == '0' && d[1]) ) return 0;
    uint64_t v = 0, max = (uint64_t)INT64_MAX + (uint64_t)neg;
    for (const char *c = d; *c; c++) {
        if (*c < '0' || *c > '9' || v > (max - (uint64_t)(*c - '0')) / 10) return 0;
        v = v * 10 + (uint64_t)(*c - '0');
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

#define PAIR_MAX (2 * ENGINE_ID_MAX + 1024)

static uint32_t pair_intern(engine_profiles *p, uint32_t key, const char *value)
{
    char buf[PAIR_MAX];
    if (pair_text(buf, sizeof buf, p->keys[key], value) < 0) return NO_PAIR;
    uint32_t i = strmap_find(&p->pair_map, buf);
    if (i != STRMAP_NONE) return i;
    if (vec_reserve((void **)&p->pairs, &p->cap_pairs, p->n_pairs + 1, sizeof *p->pairs) < 0) return NO_PAIR;
    char *s = engine__intern(buf);
    if (!s) return NO_PAIR;
    i = (uint32_t)p->n_pairs;
    pair *q = &p->pairs[i];
    *q = (pair){ .text = s, .value = s + strlen(p->keys[key]) + 1, .key = key };
    q->is_num = (uint8_t)json_int(q->value, &q->num);
    if (strmap_insert(&p->pair_map, s, i) < 0) { free(s); return NO_PAIR; }
    p->n_pairs++;
    p->bytes += strlen(s) + 1 + sizeof *q;
    return i;
}

/* The pair of key in a profile, NO_PAIR when it has none. */
static uint32_t profile_pair(const engine_profiles *p, const profile *f, uint32_t key)
{
    for (uint32_t i = 0; f && i < f->n; i++)
        if (p->pairs[f->pairs[i]].key == key) return f->pairs[i];
    return NO_PAIR;
}

/* h: uid's hash in the profiles' map (keyed as the engine's user map). */
static const profile *profile_find_hashed(const engine *e, const char *uid, uint32_t h)
{
    const engine_profiles *p = e->prof;
    ALLOC_DEBUG_ASSERT(h == strmap_hash32(&p->user_map, uid));
    uint32_t u = strmap_find_hashed(&p->user_map, uid, h);
    if (u == STRMAP_NONE || p->users[u].prof == STRMAP_NONE) return NULL;
    return &p->profs[p->users[u].prof];
}

static const profile *profile_find(const engine *e, const char *uid)
{
    const engine_profiles *p = e->prof;
    if (!p || !uid) return NULL;
    return profile_find_hashed(e, uid, strmap_hash32(&p->user_map, uid));
}

static int cmp_pair_key(const void *a, const void *b, void *ctx)
{
    const engine_profiles *p = ctx;
    uint32_t x = p->pairs[*(const uint32_t *)a].key, y = p->pairs[*(const uint32_t *)b].key;
    return x < y ? -1 : x > y;
}

/* Sorts n pair numbers by key (n is a profile's size: a few). */
static void sort_pairs(const engine_profiles *p, uint32_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && cmp_pair_key(&v[j - 1], &v[j], (void *)p) > 0; j--) {
            uint32_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

static uint32_t profile_intern(engine_profiles *p, const uint32_t *v, size_t n)
{
    char *text = malloc(n * 11 + 1), *w = text;
    if (!text) return STRMAP_NONE;
    for (size_t i = 0; i < n; i++) {
        uint32_t x = v[i];
        char d[11];
        int k = 0;
        do { d[k++] = (char)('0' + x % 10); x /= 10; } while (x);
        while (k) *w++ = d[--k];
        *w++ = ',';
    }
    *w = '\0';
    uint32_t i = strmap_find(&p->prof_map, text);
    if (i != STRMAP_NONE) { free(text); return i; }
    uint32_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy || vec_reserve((void **)&p->profs, &p->cap_profs, p->n_profs + 1, sizeof *p->profs) < 0) {
        free(copy);
        free(text);
        return STRMAP_NONE;
    }
    if (n) memcpy(copy, v, n * sizeof *copy);
    i = (uint32_t)p->n_profs;
    p->profs[i] = (profile){ .text = text, .pairs = copy, .n = (uint32_t)n };
    if (strmap_insert(&p->prof_map, text, i) < 0) { free(copy); free(text); return STRMAP_NONE; }
    p->n_profs++;
    p->bytes += strlen(text) + 1 + n * sizeof *copy + sizeof(profile);
    return i;
}

/* ---------------------------------------------------------------- profiles */

static int value_ok(const char *v)
{
    int64_t n;
    size_t len = v ? strlen(v) : 0;
    if (len > 1024) return 0;
    if (len >= 2 && v[0] == '"' && v[len - 1] == '"') return 1;
    return len && json_int(v, &n);
}

static int attrs_ok(const engine_kv *a, size_t n)
{
    if (n && !a) return 0;
    for (size_t i = 0; i < n; i++) {
        if (!engine__id_ok(a[i].key) || strchr(a[i].key, '\x1f') || !value_ok(a[i].value)) return 0;
        for (size_t j = 0; j < i; j++)
            if (strcmp(a[i].key, a[j].key) == 0) return 0;
    }
    return 1;
}

/* The user's slot in the profile map, added when new. */
static uint32_t user_slot(engine_profiles *p, const char *uid)
{
    uint32_t u = strmap_find(&p->user_map, uid);
    if (u != STRMAP_NONE) return u;
    size_t len = strlen(uid) + 1;
    if (p->ids_len + len > UINT32_MAX || p->n_users + 1 >= STRMAP_NONE) return STRMAP_NONE;
    if (vec_reserve((void **)&p->ids, &p->ids_cap, p->ids_len + len, 1) < 0 ||
        vec_reserve((void **)&p->users, &p->cap_users, p->n_users + 1, sizeof *p->users) < 0)
        return STRMAP_NONE;
    u = (uint32_t)p->n_users;
    memcpy(p->ids + p->ids_len, uid, len);
    p->users[u] = (prof_user){ (uint32_t)p->ids_len, STRMAP_NONE };
    if (strmap_insert(&p->user_map, uid, u) < 0) return STRMAP_NONE;
    p->ids_len += len;
    p->n_users++;
    return u;
}

int engine_profile_user(engine *e, const char *uid, uint32_t *u)
{
    if (!e || !engine__id_ok(uid)) return -EINVAL;
    engine_profiles *p = profiles(e);
    if (!p) return -ENOMEM;
    *u = user_slot(p, uid);
    return *u == STRMAP_NONE ? -ENOMEM : 0;
}

int engine_profiles_expect_users(engine *e)
{
    return e && e->prof ? engine__users_expect(e, e->prof->n_users) : 0;
}

int engine_profile_set_at(engine *e, uint32_t u, const engine_kv *attrs, size_t n)
{
    engine_profiles *p = e ? e->prof : NULL;
    if (!p || u >= p->n_users || n > 64 || !attrs_ok(attrs, n)) return -EINVAL;
    uint32_t v[64];
    for (size_t i = 0; i < n; i++) {
        uint32_t k = key_intern(p, attrs[i].key);
        v[i] = k == STRMAP_NONE ? NO_PAIR : pair_intern(p, k, attrs[i].value);
        if (v[i] == NO_PAIR) return -ENOMEM;
    }
    sort_pairs(p, v, n);
    uint32_t f = n ? profile_intern(p, v, n) : STRMAP_NONE;
    if (n && f == STRMAP_NONE) return -ENOMEM;
    p->n_set += (p->users[u].prof == STRMAP_NONE) - (f == STRMAP_NONE);
    p->users[u].prof = f;
    return 0;
}

int engine_profile_set(engine *e, const char *uid, const engine_kv *attrs, size_t n)
{
    uint32_t u;
    if (!e || !engine__id_ok(uid) || n > 64 || !attrs_ok(attrs, n)) return -EINVAL;
    int rc = engine_profile_user(e, uid, &u);
    return rc < 0 ? rc : engine_profile_set_at(e, u, attrs, n);
}

const char *engine_profile_get(const engine *e, const char *uid, const char *key)
{
    const profile *f = profile_find(e, uid);
    uint32_t x = f ? profile_pair(e->prof, f, key_find(e->prof, key)) : NO_PAIR;
    return x == NO_PAIR ? NULL : e->prof->pairs[x].value;
}

int64_t engine_profile_int(const engine *e, const char *uid, const char *key, int64_t dflt)
{
    const profile *f = profile_find(e, uid);
    uint32_t x = f ? profile_pair(e->prof, f, key_find(e->prof, key)) : NO_PAIR;
    return x != NO_PAIR && e->prof->pairs[x].is_num ? e->prof->pairs[x].num : dflt;
}

size_t engine_profile_count(const engine *e) { return e->prof ? e->prof->n_set : 0; }

size_t engine_profile_bytes(const engine *e)
{
    const engine_profiles *p = e->prof;
    if (!p) return 0;
    size_t maps = ((size_t)p->key_map.mask + (size_t)p->pair_map.mask + (size_t)p->prof_map.mask +
                   (size_t)p->user_map.mask + 4) * sizeof(strmap_slot);
    return p->bytes + maps + p->ids_cap + p->cap_users * sizeof *p->users +
           p->cap_pairs * sizeof(pair) + p->cap_profs * sizeof(profile) +
           p->cap_keys * sizeof(char *) + sizeof *p;
}

/* ---------------------------------------------------------------- item rules */

/* Calls fn for each element of a canonical JSON array (or the one value),
 * NUL-terminated in buf (an element longer than buf is skipped). 0, or
 * -ENOMEM from fn. */
static int each_value(const char *v, char *buf, size_t cap,
                      int (*fn)(void *ctx, const char *value), void *ctx)
{
    if (*v != '[') return fn(ctx, v);
    const char *s = v + 1;
    while (*s && *s != ']') {
        size_t n = 0;
        int depth = 0, str = 0;
        for (; s[n] && (str || depth || (s[n] != ',' && s[n] != ']')); n++) {
            char c = s[n];
            if (str) { if (c == '\\' && s[n + 1]) n++; else if (c == '"') str = 0; }
            else if (c == '"') str = 1;
            else if (c == '[' || c == '{') depth++;
            else if (c == ']' || c == '}') depth--;
        }
        if (n + 1 <= cap) {   /* longer: no profile value is, skipped */
            memcpy(buf, s, n);
            buf[n] = '\0';
            int rc = fn(ctx, buf);
            if (rc < 0) return rc;
        }
        s += n + (s[n] == ',');
    }
    return 0;
}

typedef struct rule_ctx { engine_profiles *p; elig_rule *r; } rule_ctx;

static int add_val(void *c, const char *value)
{
    rule_ctx *x = c;
    /* a value no profile can have (a float, an object, longer than
     * value_ok takes) matches nobody: it adds no pair, and must not stop
     * the rule's other values, nor the item's other rules, from loading */
    if (!value_ok(value) || strlen(x->p->keys[x->r->key]) > ENGINE_ID_MAX) return 0;
    elig_rule *r = x->r;
    uint32_t q = pair_intern(x->p, r->key, value);
    if (q == NO_PAIR) return -ENOMEM;
    if (r->n_vals < RULE_INLINE_VALS) {
        r->inl[r->n_vals++] = q;
        return 0;
    }
    uint32_t *v = realloc(r->vals, (r->n_vals + 1) * sizeof *v);
    if (!v) return -ENOMEM;
    if (!r->vals) memcpy(v, r->inl, sizeof r->inl);   /* out of line from the third on */
    r->vals = v;
    v[r->n_vals++] = q;
    return 0;
}

static void rule_free(elig_rule *r)
{
    free(r->attr);
    free(r->vals);
}

/* The item's rule for attr, made when new (a key given twice replaces). */
static elig_rule *rule_slot(item *it, const char *name)
{
    struct item_rules *rs = it->rules;
    for (uint32_t i = 0; rs && i < rs->n; i++)
        if (strcmp(rs->r[i].attr, name) == 0) {
            free(rs->r[i].vals);
            rs->r[i].vals = NULL;
            rs->r[i].n_vals = 0;
            return &rs->r[i];
        }
    uint32_t n = rs ? rs->n : 0;
    char *a = engine__intern(name);
    struct item_rules *grown = a ? realloc(rs, sizeof *rs + (n + 1) * sizeof rs->r[0]) : NULL;
    if (!grown) { free(a); return NULL; }
    it->rules = rs = grown;
    rs->n = n;
    rs->r[n] = (elig_rule){ .attr = a, .same_pair = NO_PAIR };
    return &rs->r[rs->n++];
}

int engine__elig_attr(engine *e, uint32_t it, const char *key, const char *value)
{
    int only = strncmp(key, "only_", 5) == 0, same = strncmp(key, "same_", 5) == 0;
    if ((!only && !same) || !key[5]) return 0;
    engine_profiles *p = profiles(e);
    uint32_t k = p ? key_intern(p, key + 5) : STRMAP_NONE;
    elig_rule *r = k == STRMAP_NONE ? NULL : rule_slot(&e->items[it], key);
    if (!r) return -ENOMEM;
    r->key = k;
    r->same = (uint8_t)same;
    r->same_pair = NO_PAIR;
    e->elig_stale = 1;
    if (same) {
        /* same_X: only `true` is a rule; anything else restricts nothing */
        if (strcmp(value, "true") != 0) r->key = STRMAP_NONE;
        return 0;
    }
    char buf[1024 + 1];
    return each_value(value, buf, sizeof buf, add_val, &(rule_ctx){ p, r });
}

/* ---------------------------------------------------------------- deciding */

/* Whether user ui holds item it now (rooms: the bed; stock: a live order);
 * with no_staff, only by a holding not placed by staff without check. */
static int holds_item(const engine *e, uint32_t ui, uint32_t it, int no_staff)
{
    const user *u = &e->users[ui];
    if (is_rooms(e)) return u->u.r.room == it && !(no_staff && (u->flags & USER_STAFF));
    for (uint32_t o = 0; o < u->u.s.n_live; o++)
        if (u->u.s.orders[o].item == it && !(no_staff && u->u.s.orders[o].staff)) return 1;
    return 0;
}

/* The pair X of item it's regular holders: the first (in user order)
 * whose profile has one. O(users): once per item after a load. */
static uint32_t holders_pair(const engine *e, uint32_t it, uint32_t key)
{
    for (size_t u = 0; u < e->n_users; u++) {
        uint32_t x = holds_item(e, (uint32_t)u, it, 1)
                     ? profile_pair(e->prof, profile_find(e, e->users[u].id), key) : NO_PAIR;
        if (x != NO_PAIR) return x;
    }
    return NO_PAIR;
}

/* The pair X of item it when only staff exceptions hold it (but leaving):
 * theirs when they agree, else none. O(users), rare. */
static uint32_t staff_pair(const engine *e, uint32_t it, uint32_t key, uint32_t leaving)
{
    uint32_t want = NO_PAIR;
    for (size_t u = 0; u < e->n_users; u++) {
        if (u == leaving || !holds_item(e, (uint32_t)u, it, 0)) continue;
        uint32_t x = profile_pair(e->prof, profile_find(e, e->users[u].id), key);
        if (x != NO_PAIR && want != NO_PAIR && x != want) return NO_PAIR;
        if (x != NO_PAIR) want = x;
    }
    return want;
}

/* The same_X value rule r of item it holds its next holder to, NO_PAIR
 * for none; leaving: a holder who leaves in the same step (a swap). */
static uint32_t same_value(const engine *e, uint32_t it, const elig_rule *r, uint32_t leaving)
{
    const item *p = &e->items[it];
    int64_t held = p->capacity - p->free, staff = p->staff_held;
    if (leaving != STRMAP_NONE) {
        held--;
        staff -= is_rooms(e) && (e->users[leaving].flags & USER_STAFF);
    }
    if (held - staff > 0) return e->elig_stale ? holders_pair(e, it, r->key) : r->same_pair;
    return staff > 0 ? staff_pair(e, it, r->key, leaving) : NO_PAIR;
}

/* The first rule of item it that user profile f breaks, or NULL. */
static const elig_rule *broken(const engine *e, const profile *f, uint32_t it, uint32_t leaving)
{
    const struct item_rules *rs = e->items[it].rules;
    for (uint32_t i = 0; rs && i < rs->n; i++) {
        const elig_rule *r = &rs->r[i];
        if (r->key == STRMAP_NONE) continue;   /* same_X other than true */
        uint32_t x = profile_pair(e->prof, f, r->key);
        if (x == NO_PAIR) return r;
        if (r->same) {
            uint32_t want = same_value(e, it, r, leaving);
            if (want != NO_PAIR && want != x) return r;
            continue;
        }
        uint32_t j = 0;
        const uint32_t *vals = rule_vals(r);
        while (j < r->n_vals && vals[j] != x) j++;
        if (j == r->n_vals) return r;
    }
    return NULL;
}

void engine__elig_prefetch(const engine *e, uint32_t h, int stage)
{
    const engine_profiles *p = e->prof;
    if (!p || !p->user_map.slots) return;
    const strmap *m = &p->user_map;
    if (stage == 0) { __builtin_prefetch(&m->slots[h & m->mask]); return; }
    uint32_t u = strmap_guess(m, h);
    if (u >= p->n_users) return;   /* STRMAP_NONE too */
    if (stage == 1) {
        __builtin_prefetch(&p->users[u]);
    } else {
        __builtin_prefetch(p->ids + p->users[u].id);
        if (p->users[u].prof != STRMAP_NONE) __builtin_prefetch(&p->profs[p->users[u].prof]);
    }
}

const engine_who *engine__elig_who(const engine *e, const char *uid)
{
    return profile_find(e, uid);
}

const engine_who *engine__elig_who_hashed(const engine *e, const char *uid, uint32_t h)
{
    return e->prof && uid ? profile_find_hashed(e, uid, h) : NULL;
}

int engine__elig_ok_who(const engine *e, const engine_who *who, uint32_t it, uint32_t leaving)
{
    if (!e->items[it].rules) return 1;
    return broken(e, who, it, leaving) == NULL;
}

int engine__elig_ok(const engine *e, const char *uid, uint32_t it, uint32_t leaving)
{
    if (!e->items[it].rules) return 1;
    return engine__elig_ok_who(e, profile_find(e, uid), it, leaving);
}

int engine__elig_group_ok(const engine *e, const char *const *members, size_t n, uint32_t it)
{
    const struct item_rules *rs = e->items[it].rules;
    if (!rs) return 1;
    for (size_t m = 0; m < n; m++)
        if (!engine__elig_ok(e, members[m], it, STRMAP_NONE)) return 0;
    /* same_X across the members too: all have the first member's value */
    const profile *f0 = profile_find(e, members[0]);
    for (uint32_t i = 0; i < rs->n; i++) {
        if (!rs->r[i].same || rs->r[i].key == STRMAP_NONE) continue;
        uint32_t x0 = profile_pair(e->prof, f0, rs->r[i].key);
        for (size_t m = 1; m < n; m++)
            if (profile_pair(e->prof, profile_find(e, members[m]), rs->r[i].key) != x0) return 0;
    }
    return 1;
}

void engine__elig_took(engine *e, const char *uid, uint32_t it, int64_t held_before)
{
    struct item_rules *rs = e->items[it].rules;
    if (!rs) return;
    const profile *f = profile_find(e, uid);
    int first = held_before - e->items[it].staff_held <= 0;   /* the first regular holder */
    for (uint32_t i = 0; i < rs->n; i++) {
        elig_rule *r = &rs->r[i];
        if (!r->same || r->key == STRMAP_NONE) continue;
        uint32_t x = profile_pair(e->prof, f, r->key);
        if (first || r->same_pair == NO_PAIR) r->same_pair = x;
    }
}

void engine__elig_refresh(engine *e)
{
    if (!e->elig_stale) return;
    e->elig_stale = 0;
    for (uint32_t it = 0; it < e->n_items; it++) {
        struct item_rules *rs = e->items[it].rules;
        const item *p = &e->items[it];
        for (uint32_t i = 0; rs && i < rs->n; i++)
            if (rs->r[i].same && rs->r[i].key != STRMAP_NONE && p->capacity - p->free - p->staff_held > 0)
                rs->r[i].same_pair = holders_pair(e, it, rs->r[i].key);
    }
}

static void why_of(const engine *e, const profile *f, const elig_rule *r, engine_elig_why *why)
{
    if (!why) return;
    uint32_t x = r ? profile_pair(e->prof, f, r->key) : NO_PAIR;
    why->rule = r ? r->attr : NULL;
    why->value = x == NO_PAIR ? NULL : e->prof->pairs[x].value;
}

int engine_eligible(const engine *e, const char *uid, const char *item_id, engine_elig_why *why)
{
    uint32_t it = item_id ? find_item(e, item_id) : STRMAP_NONE;
    if (it == STRMAP_NONE) return -ENOENT;
    const profile *f = profile_find(e, uid);
    const elig_rule *r = e->items[it].rules ? broken(e, f, it, STRMAP_NONE) : NULL;
    why_of(e, f, r, why);
    return r == NULL;
}

int engine_holder_ok(const engine *e, const char *uid, const char *item_id, engine_elig_why *why)
{
    uint32_t ui = uid ? find_user(e, uid) : STRMAP_NONE, it = item_id ? find_item(e, item_id) : STRMAP_NONE;
    if (ui == STRMAP_NONE || it == STRMAP_NONE || !holds_item(e, ui, it, 0)) return -ENOENT;
    const profile *f = profile_find(e, uid);
    const struct item_rules *rs = e->items[it].rules;
    for (uint32_t i = 0; rs && i < rs->n; i++) {
        const elig_rule *r = &rs->r[i];
        if (r->key == STRMAP_NONE) continue;
        uint32_t x = profile_pair(e->prof, f, r->key);
        int ok = x != NO_PAIR;
        for (uint32_t j = 0; ok && !r->same && j < r->n_vals + 1; j++)
            if (j == r->n_vals) ok = 0;
            else if (rule_vals(r)[j] == x) break;
        /* same_X: every other holder has the same value now; a staff
         * exception (placed without check) is not held against the others */
        for (size_t v = 0; ok && r->same && v < e->n_users; v++)
            if (v != ui && holds_item(e, (uint32_t)v, it, 1))
                ok = profile_pair(e->prof, profile_find(e, e->users[v].id), r->key) == x;
        if (!ok) { why_of(e, f, r, why); return 0; }
    }
    return 1;
}

/* ---------------------------------------------------------------- memory */

void engine__elig_free(engine *e)
{
    for (size_t it = 0; it < e->n_items; it++) {
        struct item_rules *rs = e->items[it].rules;
        for (uint32_t i = 0; rs && i < rs->n; i++) rule_free(&rs->r[i]);
        free(rs);
        e->items[it].rules = NULL;
    }
    engine_profiles *p = e->prof;
    if (!p) return;
    for (size_t i = 0; i < p->n_keys; i++) free(p->keys[i]);
    for (size_t i = 0; i < p->n_pairs; i++) free(p->pairs[i].text);
    for (size_t i = 0; i < p->n_profs; i++) { free(p->profs[i].text); free(p->profs[i].pairs); }
    free(p->keys);
    free(p->pairs);
    free(p->profs);
    free(p->ids);
    free(p->users);
    strmap_free(&p->key_map);
    strmap_free(&p->pair_map);
    strmap_free(&p->prof_map);
    strmap_free(&p->user_map);
    free(p);
    e->prof = NULL;
}
