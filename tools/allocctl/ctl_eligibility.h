/* ctl_eligibility.h -- contract 11.2's only_X / same_X rules as allocctl
 * applies them to what Redis holds: `verify`'s audit of every holder, and
 * `status --user`'s answer to "why may this student not have that room".
 *
 * allocctl does not link the engine's decision: it reads attrs, holders
 * and profiles as JSON and applies the rules of docs/PROTOCOL.md (11.2)
 * itself, so the audit is a second, independent reading of the contract
 * rather than the daemon checking its own work.
 */
#ifndef ALLOCD_CTL_ELIGIBILITY_H
#define ALLOCD_CTL_ELIGIBILITY_H

#include <stddef.h>

#include "allocctl/context.h"

/* Why a user with `profile` (a JSON object, NULL = none) may not be given
 * an item with `attrs` (JSON object, NULL = none) whose other holders
 * have the profiles `others` (NULL entries = none): 0 when every rule
 * lets them, else 1 with one sentence naming the rule and the value
 * ("only_gender is \"F\", s1002's gender is \"M\""). Takes jansson
 * values as void * so that callers need not include jansson. */
int ctl_elig_why(const void *attrs, const void *profile, const char *user,
                 const void *const *others, const char *const *other_users, size_t n_others,
                 char *why, size_t len);

/* verify: every holder against the rules of the item(s) they hold, with
 * the profiles as they are now (one MULTI of attrs, holders, profiles).
 * Prints a BREAK line per holder who breaks one, a STAFF line per such
 * holder placed by staff without check, and a summary. EX_OK, EX_NOT
 * (a BREAK) or EX_REDIS. */
int ctl_eligibility_audit(ctx *x);

/* status --user: for one room (item non-NULL) whether the user may be
 * given it and, if not, why; for all items (item NULL) how many have
 * rules and, rule by rule, how many the user is refused by. EX_OK,
 * EX_NOT (the item named is refused, or unknown) or EX_REDIS. */
int ctl_eligibility_user(ctx *x, const char *user, const char *item);

#endif
