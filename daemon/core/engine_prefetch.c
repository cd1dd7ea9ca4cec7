/* engine_prefetch.c -- warming the cache for the decisions of a chunk.
 *
 * A stock buy by one of a few hundred thousand users spends most of its
 * engine time waiting for memory: the user's hash slot, then the user's
 * record, then the id string to compare (perf on the live e2e run: 18% of
 * allocd's CPU in those three loads). The worker knows the whole chunk in
 * advance, so it asks for those lines a few requests ahead, one level per
 * step (decide.c): the slot first, the record once the slot is in cache,
 * the string once the record is. A prefetch never changes what is decided;
 * a wrong guess (a collision, a new user) only costs the load it saved.
 */
#include "engine_elig_int.h"
#include "engine_state.h"

uint32_t engine_user_hash(const engine *e, const char *id)
{
    return id ? strmap_hash32(&e->user_map, id) : 0;
}

void engine_prefetch_user(const engine *e, uint32_t h, int stage)
{
    const strmap *m = &e->user_map;
    engine__elig_prefetch(e, h, stage);
    if (!m->slots) return;
    if (stage == 0) { __builtin_prefetch(&m->slots[h & m->mask]); return; }
    uint32_t i = strmap_guess(m, h);
    if (i >= e->n_users) return;   /* STRMAP_NONE too */
    const user *u = &e->users[i];
    if (stage == 1) __builtin_prefetch(u);
    else __builtin_prefetch(u->id);
}

uint32_t engine_item_hash(const engine *e, const char *id)
{
    return id ? strmap_hash32(&e->item_map, id) : 0;
}

void engine_prefetch_item(const engine *e, uint32_t h, int stage)
{
    const strmap *m = &e->item_map;
    if (!m->slots) return;
    if (stage == 0) { __builtin_prefetch(&m->slots[h & m->mask]); return; }
    uint32_t i = strmap_guess(m, h);
    if (i >= e->n_items) return;   /* STRMAP_NONE too */
    const item *p = &e->items[i];
    if (stage == 1) { __builtin_prefetch(p); return; }
    __builtin_prefetch(p->id);
    if (p->rules) __builtin_prefetch(p->rules);
}
