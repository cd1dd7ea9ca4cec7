/* engine_elig_int.h -- eligibility (engine_elig.c, contract 11.2) for the
 * rules that grant: engine_stock, engine_rooms, engine_swap, engine_staff
 * ask engine__elig_ok before a grant and tell engine__elig_took as they
 * grant; engine_load hands it an item's only_X / same_X attrs. Stands on
 * engine_state.h only.
 */
#ifndef ALLOCD_ENGINE_ELIG_INT_H
#define ALLOCD_ENGINE_ELIG_INT_H

#include "core/engine.h"

/* An attr of item it: only_X / same_X become rules, others are ignored.
 * 0 or -ENOMEM. */
int engine__elig_attr(engine *e, uint32_t it, const char *key, const char *value);
/* 1 when the user may be given item it now; leaving: a holder of it who
 * leaves in the same step (a swap), STRMAP_NONE otherwise. */
int engine__elig_ok(const engine *e, const char *uid, uint32_t it, uint32_t leaving);
/* A user's profile looked up once for a scan of many items (auto's filter
 * fallback): NULL is a user without one, a valid answer. */
typedef struct profile engine_who;
const engine_who *engine__elig_who(const engine *e, const char *uid);
/* The same with uid's engine_user_hash known (h): profiles are keyed
 * alike (engine__elig_prefetch). */
const engine_who *engine__elig_who_hashed(const engine *e, const char *uid, uint32_t h);
int engine__elig_ok_who(const engine *e, const engine_who *who, uint32_t it, uint32_t leaving);
/* Every member may, and they share every same_X value of the item. */
int engine__elig_group_ok(const engine *e, const char *const *members, size_t n, uint32_t it);
/* The user is being given item it, which had held_before units held: an
 * empty item takes the user's same_X values. */
void engine__elig_took(engine *e, const char *uid, uint32_t it, int64_t held_before);
/* After loading: the same_X values of loaded holders (once). */
void engine__elig_refresh(engine *e);
void engine__elig_free(engine *e);
/* The decisions' prefetch (engine_prefetch_user) of the user's profile:
 * h is the user's hash in the engine's user map, which the profiles'
 * map shares; the same stages. */
void engine__elig_prefetch(const engine *e, uint32_t h, int stage);

#endif
