/* engine_elig.h -- profiles and eligibility (contract 11.2), part of the
 * engine.
 *
 * A profile is a user's attributes: key -> a string or an integer, given
 * as canonical JSON text ("\"F\"", "4"), the form engine_load_attr takes
 * an item's attrs in. Profiles live apart from the users (setting one
 * does not make a participant) and are interned: each distinct key, each
 * distinct (key, value) pair and each distinct whole profile is stored
 * once, a user costs one map entry and its id.
 *
 * An item's attrs may restrict who may hold it (parsed when the attr is
 * loaded, engine_load_attr):
 *   only_X: a value or an array of values: the user's X must be one of them;
 *   same_X: true: every holder has the same X (an empty item takes its first
 *           holder's); a user without X may take neither.
 * The engine checks them at every grant (buy, choose, auto, group, switch,
 * swap, waitlist service, and assign with check); a refusal is
 * REASON_NOT_ELIGIBLE (auto and group: no room they may hold, REASON_NO_ROOM).
 * A profile edit applies to the decisions after it and never takes away
 * what is held.
 */
#ifndef ALLOCD_ENGINE_ELIG_H
#define ALLOCD_ENGINE_ELIG_H

#include "core/engine.h"

/* Sets (replaces) the user's profile: n attributes, keys distinct, each
 * value a canonical JSON string or integer. n == 0 clears it. 0, -EINVAL
 * (a bad id, key or value: the profile is left as it was), -ENOMEM. */
int engine_profile_set(engine *e, const char *user, const engine_kv *attrs, size_t n);
/* The users who have or had a profile are numbered from 0 in the order
 * they first appear, and keep their number for the engine's life (a user
 * whose profile goes keeps it, with none), so that the reader of
 * P:{B}:profiles keeps what it knows of each user in arrays by that
 * number (worker/profiles_scan.h). engine_profile_user finds or adds the
 * user: 0, -EINVAL (not a user id), -ENOMEM. */
int engine_profile_user(engine *e, const char *user, uint32_t *u);
/* After a read of the profiles: room in the engine's user records for
 * every user who has had a profile, made now (a profiled user is expected
 * to take part), so that their first requests do not grow the records in
 * the middle of a chunk. A hint: 0, or -ENOMEM with nothing lost. */
int engine_profiles_expect_users(engine *e);
/* engine_profile_set for user number u (from engine_profile_user). */
int engine_profile_set_at(engine *e, uint32_t u, const engine_kv *attrs, size_t n);
/* The user's value of key as canonical JSON, NULL when none. */
const char *engine_profile_get(const engine *e, const char *user, const char *key);
/* An integer attribute (11.3's points): dflt when missing or not an integer. */
int64_t engine_profile_int(const engine *e, const char *user, const char *key, int64_t dflt);
/* Users with a profile, and the bytes the profiles take (bench-memory). */
size_t engine_profile_count(const engine *e);
size_t engine_profile_bytes(const engine *e);

/* Why a user may not hold an item: the attr of the rule ("only_gender",
 * "same_gender") and the user's value (canonical JSON, NULL when the
 * profile lacks it). */
typedef struct engine_elig_why {
    const char *rule;
    const char *value;
} engine_elig_why;

/* 1 when the user (holding nothing there) may be given the item now, 0 when
 * not (*why, when given, says which rule), -ENOENT for an unknown item. */
int engine_eligible(const engine *e, const char *user, const char *item, engine_elig_why *why);
/* The audit of verify (11.2): 1 when the holder's item lets them hold it
 * with the profiles as they are now (only_X; same_X against the item's
 * other holders), 0 with *why when not, -ENOENT when the user holds
 * nothing (rooms) or not that item (stock). */
int engine_holder_ok(const engine *e, const char *user, const char *item, engine_elig_why *why);

#endif
