/* campus_groups.c -- who lives with whom, and what everyone asks for
 * (campus_int.h).
 *
 * Groups are formed per class of shared room (a building, a size and, in
 * the LLC hall, a floor's community) for the rooms left free by the staff:
 * a class of R rooms gets about R x the building's fill rate groups of
 * students who may all hold such a room -- one gender (a third of the
 * groups of the gender-inclusive hall are mixed), the hall's years, the
 * floor's LLC -- mostly of one class year. The leader is the member with
 * the most points: the group is placed at the leader's turn in the draw.
 * Each group lists three rooms of its size that all its members may hold
 * (two in its own hall), and most add a filter on the room type,
 * so that when those are gone any room of its size will do.
 *
 * Everyone not placed by staff and in no group asks alone: three singles
 * they may hold (an accessible double begun by staff first, for a student
 * with accessibility needs), by filter the rest of the singles (60%) or
 * any bed they may have (20%), half of them on the waitlist. A few first
 * try one room with `choose` (in any hall: some are refused), some later
 * withdraw, and some pairs of friends trade beds.
 */
#include "campus_int.h"

#include <string.h>

typedef struct gclass {
    const campus_room *tmpl;   /* a room of the class */
    int mixed, same_year;
    char gender;               /* the first member's */
    int year;
} gclass;

static int seed_ok(const campus_student *s, const gclass *k)
{
    return s->role == ROLE_NONE && (k->mixed || s->gender != 'X') && campus_may_hold(s, k->tmpl, 0);
}

static int member_ok(const campus_student *s, const gclass *k)
{
    return s->role == ROLE_NONE && (k->mixed || s->gender == k->gender) &&
           (!k->same_year || s->year == k->year) && campus_may_hold(s, k->tmpl, 0);
}

/* The first free student in perm for the class, or -1. */
static int pick(const campus *c, const int *perm, const gclass *k, int seed)
{
    for (int i = 0; i < c->n_students; i++) {
        const campus_student *s = &c->s[perm[i]];
        if (seed ? seed_ok(s, k) : member_ok(s, k)) return perm[i];
    }
    return -1;
}

/* Rooms of g's size that every member may hold, free of staff; own: in
 * building b only. */
static int group_rooms(const campus *c, const campus_group *g, int b, int *cand)
{
    int n = 0;
    char with = c->s[g->m[0]].gender;
    for (int i = 0; i < c->n_rooms; i++) {
        const campus_room *r = &c->r[i];
        if (r->cap != g->n || r->staff_beds || r->ra || (b >= 0 && r->building != b)) continue;
        int ok = 1;
        for (int j = 0; j < g->n && ok; j++) ok = campus_may_hold(&c->s[g->m[j]], r, with);
        if (ok) cand[n++] = i;
    }
    return n;
}

static void group_plan(campus *c, campus_group *g, int b, int *cand, const int *perm)
{
    int lead = 0;
    for (int j = 1; j < g->n; j++)
        if (c->s[g->m[j]].points > c->s[g->m[lead]].points) lead = j;
    int t = g->m[0];
    g->m[0] = g->m[lead];
    g->m[lead] = t;
    g->n_prefs = campus__pick_prefs(c, cand, group_rooms(c, g, b, cand), g->prefs, 0, 2);
    g->n_prefs = campus__pick_prefs(c, cand, group_rooms(c, g, -1, cand), g->prefs, g->n_prefs, CAMPUS_PREFS);
    g->filter = campus__pct(c, 85) ? FILTER_TYPE : FILTER_NONE;
    g->update = campus__pct(c, 10) ? (g->n >= 3 && campus__pct(c, 30) ? 2 : 1) : 0;
    g->decliner = -1;
    if (g->n >= 3 && campus__pct(c, 5)) {
        /* someone else invited too, who will rather ask alone */
        gclass any = { .tmpl = &c->r[g->prefs[0]], .mixed = 1 };
        int d = pick(c, perm, &any, 0);
        if (d >= 0) {
            g->decliner = d;
            c->s[d].role = ROLE_SINGLE;
        }
    }
}

/* One group for class k (its seed's gender and year decided here); 0, or
 * -1 when too few students are left for it. */
static int group_form(campus *c, const int *perm, gclass *k, int *cand)
{
    int seed = pick(c, perm, k, 1);
    if (seed < 0) return -1;
    k->gender = c->s[seed].gender;
    k->year = c->s[seed].year;
    campus_group *g = &c->g[c->n_groups];
    memset(g, 0, sizeof *g);
    g->m[g->n++] = seed;
    c->s[seed].role = ROLE_GROUP;
    while (g->n < k->tmpl->cap) {
        int m = pick(c, perm, k, 0);
        if (m < 0 && k->same_year) {
            k->same_year = 0;
            m = pick(c, perm, k, 0);
        }
        if (m < 0) break;
        g->m[g->n++] = m;
        c->s[m].role = ROLE_GROUP;
    }
    if (g->n < k->tmpl->cap) {   /* not enough: they ask alone */
        for (int j = 0; j < g->n; j++) c->s[g->m[j]].role = ROLE_NONE;
        return -1;
    }
    for (int j = 0; j < g->n; j++) c->s[g->m[j]].group = c->n_groups;
    c->n_groups++;
    group_plan(c, g, k->tmpl->building, cand, perm);
    return 0;
}

void campus__groups_form(campus *c, const int *perm, int *cand)
{
    /* the halls that take fewest students first: the LLC floors, the
     * apartments, the first-year hall; groups per 100 rooms (the
     * apartments are oversubscribed) */
    static const int order[CAMPUS_BUILDINGS] = { 3, 4, 0, 1, 2, 5 };
    static const int fill_pct[CAMPUS_BUILDINGS] = { 100, 100, 100, 100, 115, 100 };
    for (int bi = 0; bi < CAMPUS_BUILDINGS; bi++)
        for (int llc = 3, b = order[bi]; llc >= 0; llc--)
            for (int cap = 4; cap >= 2; cap--) {
                const campus_room *tmpl = NULL;
                int rooms = 0;
                for (int i = 0; i < c->n_rooms; i++) {
                    const campus_room *r = &c->r[i];
                    if (r->building != b || r->cap != cap || r->rules.llc != llc || r->rules.access ||
                        r->staff_beds || r->ra) continue;
                    tmpl = tmpl ? tmpl : r;
                    rooms++;
                }
                int want = (rooms * fill_pct[b] + 50) / 100;
                for (int k = 0; k < want; k++) {
                    gclass cls = { .tmpl = tmpl, .same_year = campus__pct(c, 80),
                                   .mixed = !tmpl->rules.only_gender && !tmpl->rules.same_gender && campus__pct(c, 33) };
                    if (group_form(c, perm, &cls, cand) < 0) break;
                }
            }
}

/* --------------------------------------------------------------- singles */

/* Singles s may hold, free of staff; with partial, also rooms begun by
 * staff that s may share (only accessible ones when access_only). */
static int single_rooms(const campus *c, const campus_student *s, int partial, int access_only, int *cand)
{
    int n = 0;
    for (int i = 0; i < c->n_rooms; i++) {
        const campus_room *r = &c->r[i];
        if (r->ra || !campus_may_hold(s, r, r->holder)) continue;
        int begun = r->staff_beds > 0 && r->staff_beds < r->cap;
        if (access_only ? begun && r->rules.access : (r->cap == 1 && !r->staff_beds) || (partial && begun))
            cand[n++] = i;
    }
    return n;
}

static void single_plan(campus *c, campus_student *s, int *cand)
{
    int f = (int)campus__rnd(c, 100);
    s->filter = f < 60 ? FILTER_TYPE : f < 80 ? FILTER_ANY : FILTER_NONE;
    if (s->access) s->n_prefs = campus__pick_prefs(c, cand, single_rooms(c, s, 1, 1, cand), s->prefs, 0, 1);
    s->n_prefs = campus__pick_prefs(c, cand, single_rooms(c, s, s->filter == FILTER_ANY, 0, cand), s->prefs,
                                    s->n_prefs, CAMPUS_PREFS);
    s->wait = campus__pct(c, 50);
    s->withdraw = campus__pct(c, 5);
    if (campus__pct(c, 4)) {   /* a room in any hall, tried by hand: some are refused */
        int n = 0;
        for (int i = 0; i < c->n_rooms; i++)
            if (c->r[i].cap == 1 && !c->r[i].ra && !c->r[i].rules.access) cand[n++] = i;
        s->choose = n ? cand[campus__rnd(c, (uint32_t)n)] : -1;
    }
}

void campus__singles_plan(campus *c, const int *perm, int *cand)
{
    for (int k = 0; k < c->n_students; k++) {
        campus_student *s = &c->s[perm[k]];
        if (s->role != ROLE_NONE && s->role != ROLE_SINGLE) continue;
        s->role = ROLE_SINGLE;
        single_plan(c, s, cand);
    }
    /* friends who trade beds once placed; one offer in four is never answered */
    int last = -1;
    for (int k = 0; k < c->n_students; k++) {
        int i = perm[k];
        if (c->s[i].role != ROLE_SINGLE || !campus__pct(c, 4)) continue;
        if (last < 0) { last = i; continue; }
        c->s[last].swap_with = i;
        c->s[i].swap_with = campus__pct(c, 75) ? last : -2;
        last = -1;
    }
}
