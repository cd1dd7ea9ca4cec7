/* ctl_eligibility.c -- the only_X / same_X audit and explanations (see
 * ctl_eligibility.h).
 *
 * The order of holders matters for same_X: an empty item takes the value
 * of its first holder, so the audit walks an item's holders by `since`
 * (ties by user id) and checks each against the ones before it. In a
 * room of F, F, M the third holder is the one who breaks the rule; the
 * first two were right when they moved in and still agree.
 */
#include "allocctl/ctl_eligibility.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "wire/profile.h"

#define ONLY "only_"
#define SAME "same_"

/* A JSON value as text, for messages. */
static void value_text(const json_t *v, char *buf, size_t len)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(buf, len, "%s", s ? s : "?");
    free(s);
}

static int only_matches(const json_t *rule, const json_t *have)
{
    if (!json_is_array(rule)) return json_equal(rule, have);
    size_t i;
    json_t *v;
    json_array_foreach(rule, i, v) if (json_equal(v, have)) return 1;
    return 0;
}

/* The first rule of attrs the user breaks: its attr key in *rule. */
static int why_not(const json_t *attrs, const json_t *prof, const char *user,
                   const void *const *others, const char *const *other_users, size_t n_others,
                   const char **rule, char *why, size_t len)
{
    const char *key;
    json_t *r;
    char want[120], got[120];
    json_object_foreach((json_t *)attrs, key, r) {
        int only = !strncmp(key, ONLY, 5), same = !strncmp(key, SAME, 5) && json_is_true(r);
        if ((!only && !same) || !key[5]) continue;
        const char *x = key + 5;
        const json_t *have = prof ? json_object_get(prof, x) : NULL;
        *rule = key;
        value_text(r, want, sizeof want);
        if (!prof || !have) {
            snprintf(why, len, "%s%s%s, %s has %s", key, only ? " is " : "", only ? want : "", user,
                     prof ? "no " : "no profile");
            if (prof) snprintf(why + strlen(why), len - strlen(why), "%s", x);
            return 1;
        }
        value_text(have, got, sizeof got);
        if (only && !only_matches(r, have)) {
            snprintf(why, len, "%s is %s, %s's %s is %s", key, want, user, x, got);
            return 1;
        }
        for (size_t i = 0; same && i < n_others; i++) {
            const json_t *theirs = others[i] ? json_object_get(others[i], x) : NULL;
            if (theirs && json_equal(theirs, have)) continue;
            char o[120] = "none";
            if (theirs) value_text(theirs, o, sizeof o);
            snprintf(why, len, "%s: %s's %s is %s, holder %s's is %s", key, user, x, got,
                     other_users[i], o);
            return 1;
        }
    }
    return 0;
}

int ctl_elig_why(const void *attrs, const void *prof, const char *user,
                 const void *const *others, const char *const *other_users, size_t n_others,
                 char *why, size_t len)
{
    const char *rule;
    if (!attrs) return 0;
    return why_not(attrs, prof, user, others, other_users, n_others, &rule, why, len);
}

/* ---- what Redis holds -------------------------------------------------- */

typedef struct holder {
    const char *user;
    const char *item;
    const char *req;       /* the request or command that placed them */
    long long since;
    int staff;             /* 1: by staff without check (11.5), 0: not, -1: ask the result */
} holder;

typedef struct elig_state {
    json_t *attrs;         /* item -> attrs object, items with a rule only */
    json_t *profiles;      /* user -> profile object; unreadable ones left out */
    json_t *holders_doc;   /* user -> holders entry (owns the strings below) */
    holder *h;
    size_t n, cap;
} elig_state;

static int has_rule(const json_t *attrs)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)attrs, key, v)
        if ((!strncmp(key, ONLY, 5) || (!strncmp(key, SAME, 5) && json_is_true(v))) && key[5]) return 1;
    return 0;
}

static json_t *hash_of(const redisReply *r, int profiles)
{
    json_t *o = json_object();
    for (size_t i = 0; o && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        const redisReply *v = r->element[i + 1];
        if (profiles) {
            profile p;
            char why[200];
            int bad = profile_parse(&p, v->str, v->len, why, sizeof why) < 0;
            profile_free(&p);
            if (bad) continue;    /* counts as no profile, as in the daemon */
        }
        json_error_t je;
        json_t *doc = json_loadb(v->str, v->len, 0, &je);
        if (json_is_object(doc)) json_object_set_new(o, r->element[i]->str, doc);
        else json_decref(doc);
    }
    return o;
}

static void add_holder(elig_state *s, const char *user, const char *item, const json_t *entry,
                       const json_t *order)
{
    if (!item || !json_object_get(s->attrs, item)) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        holder *h = realloc(s->h, cap * sizeof *h);
        if (!h) return;
        s->h = h;
        s->cap = cap;
    }
    const json_t *src = order ? order : entry;
    const char *by = json_string_value(json_object_get(src, "by"));
    int staff = by ? !strcmp(by, "staff") && !json_is_true(json_object_get(src, "check")) : -1;
    s->h[s->n++] = (holder){ user, item, json_string_value(json_object_get(src, "req")),
                             json_integer_value(json_object_get(entry, "since")), staff };
}

/* Rooms: the entry's item; stock: each order's item. */
static void collect_holders(elig_state *s)
{
    const char *user;
    json_t *e;
    json_object_foreach(s->holders_doc, user, e) {
        add_holder(s, user, json_string_value(json_object_get(e, "item")), e, NULL);
        size_t i;
        json_t *o;
        json_array_foreach(json_object_get(e, "orders"), i, o)
            add_holder(s, user, json_string_value(json_object_get(o, "item")), e, o);
    }
}

static int by_item_since(const void *a, const void *b)
{
    const holder *x = a, *y = b;
    int c = strcmp(x->item, y->item);
    if (c) return c;
    if (x->since != y->since) return x->since < y->since ? -1 : 1;
    return strcmp(x->user, y->user);
}

static void elig_free(elig_state *s)
{
    json_decref(s->attrs);
    json_decref(s->profiles);
    json_decref(s->holders_doc);
    free(s->h);
    memset(s, 0, sizeof *s);
}

/* attrs, holders and profiles in one MULTI: one moment of a live batch. */
static int elig_read(ctx *x, elig_state *s)
{
    memset(s, 0, sizeof *s);
    redisAppendCommand(x->c, "MULTI");
    redisAppendCommand(x->c, "HGETALL %s", x->k.attrs);
    redisAppendCommand(x->c, "HGETALL %s", x->k.holders);
    redisAppendCommand(x->c, "HGETALL %s", x->k.profiles);
    redisAppendCommand(x->c, "EXEC");
    redisReply *r = exec_reply(x, 3, "attrs, holders and profiles could not be read (EXEC refused)");
    if (!r) return EX_REDIS;
    json_t *all = hash_of(r->element[0], 0);
    s->attrs = json_object();
    const char *item;
    json_t *a;
    json_object_foreach(all, item, a) if (has_rule(a)) json_object_set(s->attrs, item, a);
    json_decref(all);
    s->holders_doc = hash_of(r->element[1], 0);
    s->profiles = hash_of(r->element[2], 1);
    freeReplyObject(r);
    if (!s->attrs || !s->holders_doc || !s->profiles) { elig_free(s); errmsg(x, "out of memory"); return EX_REDIS; }
    collect_holders(s);
    if (s->n > 1) qsort(s->h, s->n, sizeof *s->h, by_item_since);
    return EX_OK;
}

/* ---- verify ------------------------------------------------------------ */

/* Whether a holder who breaks a rule was placed by staff without check:
 * their holders entry says so, or else the result of the command that
 * placed them (`req`) is an assign's, `by` staff, without `check`. A
 * holder who moved since (switch, swap) holds by that request instead,
 * and is treated like any holder (11.5). */
static int staff_unchecked(ctx *x, holder *h)
{
    if (h->staff >= 0 || !h->req) return h->staff > 0;
    redisReply *r = rcmd(x, "HGET %s %s", x->k.results, h->req);
    json_error_t je;
    json_t *res = r && r->type == REDIS_REPLY_STRING ? json_loadb(r->str, r->len, 0, &je) : NULL;
    const char *by = json_string_value(json_object_get(res, "by"));
    h->staff = by && !strcmp(by, "staff") && !json_is_true(json_object_get(res, "check"));
    json_decref(res);
    if (r) freeReplyObject(r);
    return h->staff;
}

#define AUDIT_SHOWN 200

typedef struct audit_counts { size_t checked, items, breaks, staff, shown; } audit_counts;

/* One item's holders h[0..n), by since: each against its rules and, for
 * same_X, against the first holder who keeps every rule (all who keep
 * them share its values, so one comparison is enough). */
static void audit_item(ctx *x, const elig_state *s, holder *h, size_t n, audit_counts *c)
{
    const json_t *attrs = json_object_get(s->attrs, h[0].item);
    const void *ref = NULL;
    const char *ref_user = NULL;
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_object_get(s->profiles, h[i].user);
        char why[400];
        c->checked++;
        if (!ctl_elig_why(attrs, p, h[i].user, &ref, &ref_user, ref ? 1 : 0, why, sizeof why)) {
            if (!ref) { ref = p; ref_user = h[i].user; }
            continue;
        }
        int staff = staff_unchecked(x, &h[i]);
        if (staff) c->staff++;
        else c->breaks++;
        if (c->shown++ < AUDIT_SHOWN)
            printf("%s %s %s: %s%s\n", staff ? "STAFF" : "BREAK", h[i].item, h[i].user, why,
                   staff ? " (placed by staff without check)" : "");
    }
}

int ctl_eligibility_audit(ctx *x)
{
    elig_state s;
    int rc = elig_read(x, &s);
    if (rc != EX_OK) return rc;
    audit_counts c = { 0 };
    for (size_t i = 0, j; i < s.n; i = j) {
        for (j = i + 1; j < s.n && !strcmp(s.h[j].item, s.h[i].item); j++) {}
        audit_item(x, &s, s.h + i, j - i, &c);
        c.items++;
    }
    size_t rules = json_object_size(s.attrs);
    if (c.shown > AUDIT_SHOWN) printf("(%zu more not shown)\n", c.shown - AUDIT_SHOWN);
    if (!rules) printf("eligibility: no item has only_X or same_X rules\n");
    else if (c.breaks)
        printf("FAIL: eligibility: %zu of %zu holders of %zu items with rules break one (%zu staff "
               "exceptions), with the profiles as they are now\n", c.breaks, c.checked, c.items, c.staff);
    else
        printf("OK: eligibility: the %zu holders of the %zu items with rules keep them, with the profiles "
               "as they are now (%zu staff exceptions)\n", c.checked, c.items, c.staff);
    elig_free(&s);
    return c.breaks ? EX_NOT : EX_OK;
}

/* ---- status --user ------------------------------------------------------ */

/* The holders of item other than user, as profiles (by since). */
static size_t others_of(const elig_state *s, const char *item, const char *user, const void **p,
                        const char **u, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n && k < max; i++)
        if (!strcmp(s->h[i].item, item) && strcmp(s->h[i].user, user)) {
            p[k] = json_object_get(s->profiles, s->h[i].user);
            u[k++] = s->h[i].user;
        }
    return k;
}

/* Whether user may be given item now; why not in why. 1 refused. */
static int refused(const elig_state *s, const char *user, const char *item, const char **rule,
                   char *why, size_t len)
{
    const json_t *attrs = json_object_get(s->attrs, item);
    if (!attrs) return 0;
    enum { MAX_OTHERS = 64 };
    const void *p[MAX_OTHERS];
    const char *u[MAX_OTHERS];
    size_t k = others_of(s, item, user, p, u, MAX_OTHERS);
    return why_not(attrs, json_object_get(s->profiles, user), user, p, u, k, rule, why, len);
}

static void user_summary(const elig_state *s, const char *user)
{
    json_t *by_rule = json_object();     /* rule -> [count, example] */
    size_t total = json_object_size(s->attrs), no = 0;
    const char *item;
    json_t *a;
    json_object_foreach(s->attrs, item, a) {
        const char *rule;
        char why[400];
        if (!refused(s, user, item, &rule, why, sizeof why)) continue;
        no++;
        json_t *e = json_object_get(by_rule, rule);
        if (!e) json_object_set_new(by_rule, rule, json_pack("[i,s]", 1, why));
        else json_array_set_new(e, 0, json_integer(json_integer_value(json_array_get(e, 0)) + 1));
    }
    printf("eligibility: %s may be given %zu of the %zu items with rules\n", user, total - no, total);
    const char *rule;
    json_t *e;
    json_object_foreach(by_rule, rule, e)
        printf("  %s refuses %lld, e.g. %s\n", rule, json_integer_value(json_array_get(e, 0)),
               json_string_value(json_array_get(e, 1)));
    json_decref(by_rule);
}

int ctl_eligibility_user(ctx *x, const char *user, const char *item)
{
    elig_state s;
    int rc = elig_read(x, &s);
    if (rc != EX_OK) return rc;
    if (!item) {
        if (json_object_size(s.attrs)) user_summary(&s, user);
    } else {
        const char *rule;
        char why[400];
        if (refused(&s, user, item, &rule, why, sizeof why)) {
            printf("%s may not be given %s: %s\n", user, item, why);
            rc = EX_NOT;
        } else {
            printf("%s may be given %s (%s)\n", user, item,
                   json_object_get(s.attrs, item) ? "its rules allow it" : "it has no only_X or same_X rule");
        }
    }
    elig_free(&s);
    return rc;
}
