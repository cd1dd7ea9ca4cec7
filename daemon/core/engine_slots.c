/* engine_slots.c -- selection slots (core/engine_slots.h): a table of user
 * -> slot apart from the user records, because a slot belongs to a user
 * the engine may never have seen (it is written by the operator before the
 * round), and a user record makes a participant. The table is a strmap
 * over its own array, as the engine's users and items are. */
#include "core/engine_slots.h"
#include "core/assert.h"
#include "core/vec.h"
#include "engine_groups_int.h"
#include "engine_slots_int.h"
#include "engine_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct slot_entry {
    char *user;
    int64_t at;
};

static const char *slot_key(const void *ctx, uint32_t i)
{
    return ((const engine *)ctx)->slots[i].user;
}

static void slots_init(engine *e)
{
    if (e->slots_ready) return;
    /* the users' key, varied: knowing one map's layout tells nothing of the other */
    strmap_init(&e->slot_map, e->user_map.k0 ^ 0x9e3779b97f4a7c15ULL, slot_key, e);
    e->slots_ready = 1;
}

int engine_slot_set(engine *e, const char *uid, int64_t at)
{
    size_t n = uid ? strlen(uid) : 0;
    if (n < 1 || n > ENGINE_ID_MAX || at < 0) return -EINVAL;
    slots_init(e);
    uint32_t i = strmap_find(&e->slot_map, uid);
    if (i != STRMAP_NONE) {
        e->slots[i].at = at;
        return 0;
    }
    if (vec_reserve((void **)&e->slots, &e->cap_slots, e->n_slots + 1, sizeof *e->slots) < 0) return -ENOMEM;
    char *s = malloc(n + 1);
    if (!s) return -ENOMEM;
    memcpy(s, uid, n + 1);
    e->slots[e->n_slots] = (struct slot_entry){ s, at };
    if (strmap_insert(&e->slot_map, s, (uint32_t)e->n_slots) < 0) {
        free(s);
        return -ENOMEM;
    }
    e->n_slots++;
    return 0;
}

void engine_slots_clear(engine *e)
{
    for (size_t i = 0; i < e->n_slots; i++) free(e->slots[i].user);
    e->n_slots = 0;
    if (e->slots_ready) strmap_free(&e->slot_map);
    e->slots_ready = 0;
}

void engine__slots_free(engine *e)
{
    engine_slots_clear(e);
    free(e->slots);
}

int64_t engine_slot_get(const engine *e, const char *uid)
{
    if (!e->slots_ready || !uid) return ENGINE_NO_SLOT;
    uint32_t i = strmap_find(&e->slot_map, uid);
    return i == STRMAP_NONE ? ENGINE_NO_SLOT : e->slots[i].at;
}

static int64_t user_opens(const engine *e, const char *uid)
{
    int64_t at = engine_slot_get(e, uid);
    return at != ENGINE_NO_SLOT ? at : e->meta.opens_at;
}

/* A `group` request's members: the ones it names (groups listed), or the
 * sender's formed group as it stands (9.2), whose leader is members[0]. */
int64_t engine_opens_for(const engine *e, const engine_request *r)
{
    if (r->op != OP_GROUP) return user_opens(e, r->user);
    const char *const *members = r->members;
    size_t n = r->n_members;
    const char *leader = r->user;
    if (n == 0) {
        uint32_t ui = find_user(e, r->user);
        n = ui == STRMAP_NONE ? 0 : engine__groups_members(e, ui, &members);
        if (n) leader = members[0];
    }
    if (e->meta.group_slot == GROUP_SLOT_LEADER || n == 0) return user_opens(e, leader);
    int64_t best = user_opens(e, members[0]);
    for (size_t i = 1; i < n; i++) {
        int64_t at = user_opens(e, members[i]);
        if (e->meta.group_slot == GROUP_SLOT_LATEST ? at > best : at < best) best = at;
    }
    return best;
}
