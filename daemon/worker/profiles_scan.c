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

void profiles_report_init(profiles_report *r)
{
    memset(r, 0, sizeof *r);
}

void profiles_report_free(profiles_report *r)
{
    free(r->t);
    free(r->names);
    memset(r, 0, sizeof *r);
}

/* FNV-1a 64: the identity of a user, and of a value. */
static uint64_t fnv(const char *s)
{
    uint64_t h = 14695981039346656037ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 1099511628211ULL;
    return h;
}

/* The slot of user_hash: its own, or the empty one where it would go. */
static profiles_seen *slot(const profiles_report *r, uint64_t uh)
{
    size_t mask = r->cap - 1;
    for (size_t i = (size_t)(uh ^ (uh >> 32)) & mask;; i = (i + 1) & mask)
        if (!r->t[i].used || r->t[i].user_hash == uh) return &r->t[i];
}

/* A table of cap slots holding r's entries stamped `keep` (all when keep
 * is 0); 0 or -ENOMEM (r unchanged). */
static int rebuild(profiles_report *r, size_t cap, uint16_t keep)
{
    profiles_seen *old = r->t;
    size_t old_cap = r->cap;
    profiles_seen *t = calloc(cap, sizeof *t);
    if (!t) return -ENOMEM;
    r->t = t;
    r->cap = cap;
    r->n = 0;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].used || (keep && old[i].gen != keep)) continue;
        *slot(r, old[i].user_hash) = old[i];
        r->n++;
    }
    free(old);
    return 0;
}

/* Remembers a new user; without memory it is only not remembered, and is
 * read again whole next time. */
static void remember(profiles_report *r, const char *user, uint64_t uh, uint64_t vh, int bad)
{
    if ((r->n + 1) * 20 > r->cap * 17 && rebuild(r, r->cap ? 2 * r->cap : 1024, 0) < 0) return;
    size_t len = strlen(user) + 1;
    void *names = r->names;
    if (vec_reserve(&names, &r->names_cap, r->names_len + len, 1) < 0) return;
    r->names = names;
    memcpy(r->names + r->names_len, user, len);
    *slot(r, uh) = (profiles_seen){ uh, vh, (uint32_t)r->names_len, r->gen, (uint8_t)bad, 1 };
    r->names_len += len;
    r->n++;
}

void profiles_begin(profiles_report *r, int fresh)
{
    if (fresh) {   /* a new engine: every profile is installed again */
        free(r->t);
        free(r->names);
        r->t = NULL;
        r->names = NULL;
        r->n = r->cap = r->names_len = r->names_cap = 0;
    }
    if (++r->gen == 0) r->gen = 1;   /* 0 means "all" to rebuild */
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
    profiles_seen *was = r->cap ? slot(r, uh) : NULL;
    if (was && was->used) {
        if (was->value_hash != vh) {   /* changed; unchanged: nothing to do, nor to report */
            was->bad = (uint8_t)install(r, e, batch, user, value, !was->bad);
            was->value_hash = vh;
        }
        was->gen = r->gen;
        return;
    }
    remember(r, user, uh, vh, install(r, e, batch, user, value, 0));
}

/* Users the read did not see left the hash and lose their profile; their
 * entries go (with a rebuild, which is rare: an operator's HDEL). */
void profiles_end(profiles_report *r, engine *e)
{
    size_t gone = 0;
    r->bad = 0;
    for (size_t i = 0; i < r->cap; i++) {
        const profiles_seen *s = &r->t[i];
        if (!s->used) continue;
        if (s->gen == r->gen) { r->bad += s->bad; continue; }
        if (!s->bad) engine_profile_set(e, r->names + s->name, NULL, 0);
        gone++;
    }
    /* without memory the gone ones stay, and are cleared again next time */
    if (gone) (void)rebuild(r, r->cap, r->gen);
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
