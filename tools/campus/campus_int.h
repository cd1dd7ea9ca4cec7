/* campus_int.h -- what the generator's files (campus_gen.c, campus_groups.c)
 * share: the one seeded stream every choice is drawn from, in a fixed
 * order, so that a seed gives the same campus byte for byte. */
#ifndef ALLOCD_TOOLS_CAMPUS_INT_H
#define ALLOCD_TOOLS_CAMPUS_INT_H

#include "campus.h"
#include "core/splitmix64.h"

/* 0..n-1 (0 when n is 0). */
static inline uint32_t campus__rnd(campus *c, uint32_t n)
{
    return n ? (uint32_t)(splitmix64_next(&c->rng) % n) : 0;
}

/* True with probability p percent. */
static inline int campus__pct(campus *c, int p)
{
    return (int)campus__rnd(c, 100) < p;
}

/* Adds to out[have..] distinct rooms of cand[0..n) until `limit`, each the
 * most popular of five drawn at random (popular rooms are in many lists,
 * so first choices collide as they do in a real round); returns the new
 * count. */
int campus__pick_prefs(campus *c, const int *cand, int n, int *out, int have, int limit);

/* The roommate groups (campus_groups.c): formed for the shared rooms that
 * are free after the staff placements. cand: scratch for n_rooms ints. */
void campus__groups_form(campus *c, const int *perm, int *cand);
/* Everyone left asks alone: their preferences, filter, waitlist, and who
 * withdraws or trades beds later. */
void campus__singles_plan(campus *c, const int *perm, int *cand);

#endif
