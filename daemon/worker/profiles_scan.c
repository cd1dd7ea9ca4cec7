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
    free(r->seen);
    free(r->bad_ids);
    memset(r, 0, sizeof *r);
}

/* FNV-1a 64: the identity of a value. */
static uint64_t fnv(const char *s, uint64_t h)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 1099511628211ULL;
    return h;
}

#define FNV_BASIS 14695981039346656037ULL

void profiles_begin(profiles_report *r, int fresh)
{
    if (fresh) r->n = 0;   /* a new engine: its numbers start again, every profile is installed again */
    if (++r->gen == 0) r->gen = 1;
}

/* A changed or new value of user u: through the reader into the engine.
 * 1 when it is no profile (the user then has none). */
static int install(profiles_report *r, engine *e, const char *batch, const char *user, uint32_t u,
                   const char *value, int had_profile)
{
    profile p;
    char why[200];
    int rc = profile_parse(&p, value, strlen(value), why, sizeof why);
    int erc = rc == 0 ? engine_profile_set_at(e, u, p.kv, p.n) : 0;
    profile_free(&p);
    if (rc == 0 && erc == 0) return 0;
    if (had_profile) engine_profile_set_at(e, u, NULL, 0);
    if (rc == -EINVAL || erc == -EINVAL) {
        log_warn("batch %s: the profile of %s is not a profile (%s): counts as none", batch, user,
                 rc == -EINVAL ? why : "an attribute the engine refuses");
        r->logged++;
    }
    return 1;
}

/* A field whose name is no user id: logged the first time that name and
 * value are seen (up to PROFILES_BAD_IDS_MAX of them), else ignored. */
static void bad_id(profiles_report *r, const char *batch, const char *user, const char *value)
{
    uint64_t h = fnv(value, fnv(user, FNV_BASIS) ^ 0xff);
    for (size_t i = 0; i < r->n_bad_ids; i++)
        if (r->bad_ids[i] == h) return;
    if (r->n_bad_ids < PROFILES_BAD_IDS_MAX &&
        vec_reserve((void **)&r->bad_ids, &r->cap_bad_ids, r->n_bad_ids + 1, sizeof *r->bad_ids) == 0)
        r->bad_ids[r->n_bad_ids++] = h;
    log_warn("batch %s: profiles: '%.80s' is not a user id (1 to %d bytes): ignored", batch, user, ENGINE_ID_MAX);
    r->logged++;
}

void profiles_pair(profiles_report *r, engine *e, const char *batch, const char *user, const char *value)
{
    uint32_t u;
    int rc = engine_profile_user(e, user, &u);
    if (rc == -EINVAL) { bad_id(r, batch, user, value); return; }
    if (rc < 0) return;   /* without memory: not installed, and read again whole next time */
    if (u >= r->n) {
        void *seen = r->seen;
        if (vec_reserve(&seen, &r->cap, (size_t)u + 1, sizeof *r->seen) < 0) return;
        r->seen = seen;
        memset(r->seen + r->n, 0, ((size_t)u + 1 - r->n) * sizeof *r->seen);
        r->n = (size_t)u + 1;
    }
    profiles_seen *was = &r->seen[u];
    uint64_t vh = fnv(value, FNV_BASIS);
    /* unchanged: nothing to do, nor to report */
    if (!was->used || was->value_hash != vh) {
        was->bad = (uint8_t)install(r, e, batch, user, u, value, was->used && !was->bad);
        was->value_hash = vh;
        was->used = 1;
    }
    was->gen = r->gen;
}

/* Users the read did not see left the hash and lose their profile. */
void profiles_end(profiles_report *r, engine *e)
{
    r->bad = 0;
    for (size_t u = 0; u < r->n; u++) {
        profiles_seen *s = &r->seen[u];
        if (!s->used) continue;
        if (s->gen == r->gen) { r->bad += s->bad; continue; }
        if (!s->bad) engine_profile_set_at(e, (uint32_t)u, NULL, 0);
        s->used = 0;
    }
    engine_profiles_expect_users(e);   /* no memory: the records grow with the requests instead */
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
    return (slots_scan_target){ target_begin, target_pair, target_end, r, 1 };
}
