/* profiles_scan.c -- a read of P:{B}:profiles installed into the engine,
 * the changes only, and the unreadable ones reported once (see
 * profiles_scan.h). */
#include "worker/profiles_scan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/engine_elig.h"
#include "core/vec.h"
#include "wire/profile.h"

static void read_free(profiles_read *d)
{
    free(d->v);
    free(d->names);
    memset(d, 0, sizeof *d);
}

void profiles_report_init(profiles_report *r)
{
    memset(r, 0, sizeof *r);
}

void profiles_report_free(profiles_report *r)
{
    read_free(&r->last);
    read_free(&r->next);
    memset(r, 0, sizeof *r);
}

/* FNV-1a 64: the identity of a user, and of a value. */
static uint64_t fnv(const char *s)
{
    uint64_t h = 14695981039346656037ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 1099511628211ULL;
    return h;
}

static int by_user(const void *a, const void *b)
{
    uint64_t x = ((const profiles_seen *)a)->user_hash, y = ((const profiles_seen *)b)->user_hash;
    return x < y ? -1 : x > y;
}

static const profiles_seen *find(const profiles_read *d, uint64_t user_hash)
{
    profiles_seen key = { .user_hash = user_hash };
    return d->n ? bsearch(&key, d->v, d->n, sizeof key, by_user) : NULL;
}

/* Remembers a field of the read under way; without memory it is only not
 * remembered, and is read again whole next time. */
static void remember(profiles_read *d, const char *user, uint64_t uh, uint64_t vh, int bad)
{
    size_t len = strlen(user) + 1;
    void *v = d->v, *names = d->names;
    if (vec_reserve(&v, &d->cap, d->n + 1, sizeof *d->v) < 0) return;
    d->v = v;
    if (vec_reserve(&names, &d->names_cap, d->names_len + len, 1) < 0) return;
    d->names = names;
    memcpy(d->names + d->names_len, user, len);
    d->v[d->n++] = (profiles_seen){ uh, vh, (uint32_t)d->names_len, (uint8_t)bad };
    d->names_len += len;
}

void profiles_begin(profiles_report *r, int fresh)
{
    if (fresh) read_free(&r->last);
    r->next.n = r->next.names_len = 0;
}

/* A changed or new field: through the reader into the engine. 1 when it
 * is no profile (the user then has none). */
static int install(profiles_report *r, engine *e, const char *batch, const char *user, const char *value,
                   int had_profile)
{
    profile p;
    char why[200];
    int rc = profile_parse(&p, value, strlen(value), why, sizeof why);
    int erc = rc == 0 ? engine_profile_set(e, user, p.kv, p.n) : 0;
    profile_free(&p);
    if (erc == -EINVAL) log_warn("batch %s: profiles: '%s' is not a user id or holds a bad key: ignored", batch, user);
    if (rc == 0) return 0;
    if (had_profile) engine_profile_set(e, user, NULL, 0);
    if (rc == -EINVAL) {
        log_warn("batch %s: the profile of %s is not a profile (%s): counts as none", batch, user, why);
        r->logged++;
    }
    return 1;
}

void profiles_pair(profiles_report *r, engine *e, const char *batch, const char *user, const char *value)
{
    uint64_t uh = fnv(user), vh = fnv(value);
    const profiles_seen *was = find(&r->last, uh);
    int bad;
    if (was && was->value_hash == vh) bad = was->bad;   /* unchanged: nothing to do, nor to report */
    else bad = install(r, e, batch, user, value, was && !was->bad);
    remember(&r->next, user, uh, vh, bad);
}

void profiles_end(profiles_report *r, engine *e)
{
    profiles_read *d = &r->next;
    if (d->n > 1) qsort(d->v, d->n, sizeof *d->v, by_user);
    r->bad = 0;
    for (size_t i = 0; i < d->n; i++) r->bad += d->v[i].bad;
    /* users gone from the hash lose their profile */
    for (size_t i = 0; i < r->last.n; i++) {
        const profiles_seen *s = &r->last.v[i];
        if (!s->bad && !find(d, s->user_hash)) engine_profile_set(e, r->last.names + s->name, NULL, 0);
    }
    profiles_read t = r->last;
    r->last = *d;
    *d = t;
}

static void target_begin(engine *e, void *data)
{
    (void)e;
    profiles_begin(data, 0);
}

static void target_pair(engine *e, const char *batch, const char *user, const char *value, void *data)
{
    profiles_pair(data, e, batch, user, value);
}

static void target_end(engine *e, void *data)
{
    profiles_end(data, e);
}

slots_scan_target profiles_target(profiles_report *r)
{
    return (slots_scan_target){ target_begin, target_pair, target_end, r };
}
