/* profile.h -- one P:{B}:profiles value (contract 11.2) read into the
 * (attribute, canonical value) pairs the engine decides eligibility with.
 *
 * A profile is a JSON object whose values are strings or integers, e.g.
 * {"gender":"F","year":4,"llc":"stem","points":37}. Anything else -- not
 * JSON, not an object, a value that is a float, bool, null, array or
 * object, a key longer than PROFILE_KEY_MAX or with control characters, a
 * string longer than PROFILE_VALUE_MAX (or than PROFILE_TEXT_MAX once
 * escaped as JSON: 200 control characters are), more than PROFILE_MAX_ATTRS keys
 * -- is not a profile: the user then counts as having none (the contract:
 * "counts as no profile"), and the caller reports it once. Values are the
 * canonical JSON text attrs use (wire/request.h: request_canonical_json),
 * so `"F"` in a profile equals `"F"` in an item's only_gender, and 4 equals
 * 4 but not "4". `points` (11.3) is also returned as an integer.
 */
#ifndef ALLOCD_PROFILE_H
#define ALLOCD_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"

#define PROFILE_MAX_ATTRS 32
#define PROFILE_KEY_MAX 64
#define PROFILE_VALUE_MAX 256
#define PROFILE_TEXT_MAX 1024   /* a value as canonical JSON: what engine_profile_set takes */

typedef struct profile {
    engine_kv kv[PROFILE_MAX_ATTRS];   /* key and canonical value, in the object's order */
    size_t n;
    int64_t points;                    /* `points` when an integer, else 0 */
    char *buf;                         /* the pairs' text, one allocation */
} profile;

/* 0 with *p filled, -EINVAL when the text is not a profile (err says what
 * is wrong, for the one log line), -ENOMEM. Call profile_free in every
 * case. */
int profile_parse(profile *p, const char *json, size_t len, char *err, size_t errlen);
void profile_free(profile *p);

#endif
