/* engine_groups.h -- groups formed by consent (contract 9.2), the part of
 * the engine's interface the shell needs: views of groups for the writer
 * of P:{B}:groups (dirty ones after each chunk), and loading them back.
 *
 * The decisions themselves (invite, accept, decline, leave, prefs, and a
 * `group` of a formed group) are engine_decide()'s, like every other op:
 * decided in queue order, one at a time, so two members racing are
 * ordered by the queue and never need a lock.
 */
#ifndef ALLOCD_ENGINE_GROUPS_H
#define ALLOCD_ENGINE_GROUPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"

typedef struct engine_group_view {
    const char *id;
    int alive;                     /* 0: dissolved (its hash field goes) */
    const char *const *members;    /* joining order; members[0] leads */
    size_t n_members;
    const char *const *invited;    /* pending invitations, oldest first */
    size_t n_invited;
    const char *const *prefs;
    size_t n_prefs;
    const engine_kv *filter;
    size_t n_filter;
    int has_filter;
    int64_t version;
} engine_group_view;

/* Groups changed since the last drain (engine_drain_clear forgets them). */
size_t engine_dirty_group_count(const engine *e);
void engine_dirty_group_at(const engine *e, size_t i, engine_group_view *v);
/* Every group ever made in this engine's life, dissolved ones included. */
size_t engine_group_count(const engine *e);
void engine_group_view_at(const engine *e, size_t i, engine_group_view *v);
/* Loading (before the first decision): a live group as P:{B}:groups has
 * it. 0, -EINVAL (bad shape: no member, a user twice or in two groups),
 * -EEXIST (id twice), -ENOMEM. */
int engine_load_group(engine *e, const engine_group_view *g);

#endif
