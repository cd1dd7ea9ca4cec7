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

/* The first slot of the probe that carries hash h (linear probing: almost
 * always the first or the second), or NULL. */
static const strmap_slot *slot_of(const strmap *m, uint32_t h)
{
    if (!m->slots) return NULL;
    for (uint32_t k = 0, i = h & m->mask; k < 2; k++, i = (i + 1) & m->mask) {
        const strmap_slot *s = &m->slots[i];
        if (!s->ref) return NULL;
        if (s->hash == h) return s;
    }
    return NULL;
}

void engine_prefetch_user(const engine *e, uint32_t h, int stage)
{
    const strmap *m = &e->user_map;
    engine__elig_prefetch(e, h, stage);
    if (!m->slots) return;
    if (stage == 0) { __builtin_prefetch(&m->slots[h & m->mask]); return; }
    const strmap_slot *s = slot_of(m, h);
    if (!s || s->ref - 1 >= e->n_users) return;
    const user *u = &e->users[s->ref - 1];
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
    const strmap_slot *s = slot_of(m, h);
    if (!s || s->ref - 1 >= e->n_items) return;
    const item *p = &e->items[s->ref - 1];
    if (stage == 1) { __builtin_prefetch(p); return; }
    __builtin_prefetch(p->id);
    if (p->rules) __builtin_prefetch(p->rules);
}
