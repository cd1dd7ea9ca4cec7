/* profile.c -- a user's profile from its JSON text (see profile.h).
 *
 * Profiles are read at load and again every second while a batch is
 * served (worker/profiles_scan.c), so an operator's typo must never stop
 * a round: every problem is an -EINVAL with a message, and the caller
 * treats the user as having no profile. The checks are strict on shape
 * (only strings and integers) because the contract compares values
 * exactly: a profile `"year":4.0` that silently matched `only_year: 4`
 * today and not tomorrow would be worse than one refused outright.
 */
#include "wire/profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "wire/request.h"

void profile_free(profile *p)
{
    free(p->buf);
    memset(p, 0, sizeof *p);
}

static int bad(char *err, size_t errlen, const char *fmt, const char *what)
{
    snprintf(err, errlen, fmt, what);
    return -EINVAL;
}

static int key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n < 1 || n > PROFILE_KEY_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x20 || k[i] == 0x7f) return 0;
    return 1;
}

/* The object's keys and canonical values, checked, into texts[]. */
static int collect(json_t *doc, char **texts, size_t *n, char *err, size_t errlen)
{
    const char *key;
    json_t *val;
    *n = 0;
    json_object_foreach(doc, key, val) {
        if (!key_ok(key)) return bad(err, errlen, "attribute '%.64s' is not 1 to 64 characters "
                                     "without control characters", key);
        if (json_is_string(val) && json_string_length(val) > PROFILE_VALUE_MAX)
            return bad(err, errlen, "'%s' is longer than 256 bytes", key);
        if (!json_is_string(val) && !json_is_integer(val))
            return bad(err, errlen, "'%s' is neither a string nor an integer", key);
        texts[*n] = request_canonical_json(val);
        if (!texts[*n]) return -ENOMEM;
        /* escaping can make a short string six times longer as JSON */
        if (strlen(texts[(*n)++]) > PROFILE_TEXT_MAX)
            return bad(err, errlen, "'%s' is longer than 1024 bytes as JSON", key);
    }
    return 0;
}

/* Keys and values packed into one buffer the pairs point into. */
static int pack(profile *p, json_t *doc, char **texts, size_t n)
{
    size_t total = 0, i = 0;
    const char *key;
    json_t *val;
    json_object_foreach(doc, key, val) total += strlen(key) + 1 + strlen(texts[i++]) + 1;
    p->buf = malloc(total ? total : 1);
    if (!p->buf) return -ENOMEM;
    char *at = p->buf;
    i = 0;
    json_object_foreach(doc, key, val) {
        size_t kl = strlen(key) + 1, vl = strlen(texts[i]) + 1;
        memcpy(at, key, kl);
        p->kv[i].key = at;
        memcpy(at + kl, texts[i], vl);
        p->kv[i].value = at + kl;
        at += kl + vl;
        if (!strcmp(key, "points") && json_is_integer(val)) p->points = json_integer_value(val);
        i++;
    }
    p->n = n;
    return 0;
}

int profile_parse(profile *p, const char *json, size_t len, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    json_error_t je;
    json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc) return bad(err, errlen, "not JSON: %s", je.text);
    int rc = -EINVAL;
    char *texts[PROFILE_MAX_ATTRS] = { 0 };
    size_t n = 0;
    if (!json_is_object(doc)) snprintf(err, errlen, "not a JSON object");
    else if (json_object_size(doc) > PROFILE_MAX_ATTRS)
        snprintf(err, errlen, "more than %d attributes", PROFILE_MAX_ATTRS);
    else if ((rc = collect(doc, texts, &n, err, errlen)) == 0)
        rc = pack(p, doc, texts, n);
    for (size_t i = 0; i < PROFILE_MAX_ATTRS; i++) free(texts[i]);
    json_decref(doc);
    if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
    if (rc < 0) profile_free(p);
    return rc;
}
