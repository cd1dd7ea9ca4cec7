/* campus_gen.c -- the campus of campus.h from a seed: rooms, students,
 * staff placements, roommate groups and the students who ask alone.
 *
 * The full campus (3,000 students) is modelled on what the issue cites:
 * six buildings of 1,200 rooms and 2,580 beds, fewer than students, so a
 * round has losers; singles are scarce and go by points (seniors first).
 * A first-year hall (only_year 1), a women's and a men's hall
 * (only_gender), a hall of living-learning communities (a floor per LLC,
 * only_llc), upperclass apartments (only_year [3,4]) and a
 * gender-inclusive hall whose first floor is accessible (only_access).
 * Every shared room is gender-flexible (same_gender) unless its hall is
 * gender-inclusive. Other sizes scale every count by students/3,000.
 *
 * Groups are formed for the rooms that exist (a pair for a double, a
 * quad's four for a quad) from students who may all hold such a room:
 * that is how students pick roommates when they can see the rules. The
 * upperclass apartments are oversubscribed, so some groups find no room.
 */
#include "campus.h"
#include "campus_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


const char *const campus_building_name[CAMPUS_BUILDINGS] = { "Ash", "Birch", "Cedar", "Dogwood", "Elm", "Fir" };
const char *const campus_llc_name[4] = { "", "stem", "arts", "global" };

/* One building of the full campus. General rooms are spread over its
 * floors (Fir's over floors 2 and up: floor 1 holds the accessible ones). */
typedef struct bspec {
    int floors, singles, doubles, triples, quads, ra;
    campus_rules rules;
    int llc_floors;                 /* floors 2.. are LLC floors 1.. */
    int acc_singles, acc_doubles;   /* floor 1, only_access */
} bspec;

static const bspec SPEC[CAMPUS_BUILDINGS] = {
    { 4, 0, 120, 0, 60, 4, { 0, 1, 1 << 1, 0, 0 }, 0, 0, 0 },
    { 4, 66, 80, 40, 0, 4, { 'F', 0, 0, 0, 0 }, 0, 0, 0 },
    { 4, 66, 80, 40, 0, 4, { 'M', 0, 0, 0, 0 }, 0, 0, 0 },
    { 4, 0, 160, 60, 40, 4, { 0, 1, 0, 0, 0 }, 1, 0, 0 },
    { 3, 77, 0, 30, 70, 3, { 0, 1, (1 << 3) | (1 << 4), 0, 0 }, 0, 0, 0 },
    { 3, 59, 70, 0, 0, 3, { 0, 0, 0, 0, 0 }, 0, 40, 20 },
};

enum { TRANSFERS_FULL = 20 };

static int scaled(int full, int n)
{
    if (full == 0) return 0;
    long v = lround((double)full * n / CAMPUS_FULL);
    return v < 1 ? 1 : (int)v;
}

const char *campus_room_type(int cap)
{
    static const char *const t[] = { "none", "single", "double", "triple", "quad" };
    return cap >= 1 && cap <= 4 ? t[cap] : "room";
}

int campus_may_hold(const campus_student *s, const campus_room *r, char with)
{
    const campus_rules *k = &r->rules;
    if (k->only_gender && s->gender != k->only_gender) return 0;
    if (k->year_mask && !(k->year_mask & (1 << s->year))) return 0;
    if (k->llc && s->llc != k->llc) return 0;
    if (k->access && !s->access) return 0;
    return !(k->same_gender && with && s->gender != with);
}

/* ------------------------------------------------------------------ rooms */

static void add_room(campus *c, int b, int floor, int cap, const campus_rules *rules, int *numbers)
{
    campus_room *r = &c->r[c->n_rooms++];
    memset(r, 0, sizeof *r);
    int no = ++numbers[floor];
    snprintf(r->id, sizeof r->id, no < 100 ? "%c%d%02d" : "%c%d%03d", campus_building_name[b][0], floor, no);
    r->building = b;
    r->floor = floor;
    r->cap = cap;
    r->rules = *rules;
    /* a hall has its favourite floors and rooms: prefs are drawn by this */
    r->popularity = (int)campus__rnd(c, 60) + (floor == 1 ? 0 : 20) + (no <= 10 ? 20 : 0);
    if (r->popularity > 99) r->popularity = 99;
    c->beds += cap;
}

static void add_building(campus *c, int b, int n)
{
    const bspec *sp = &SPEC[b];
    int numbers[8] = { 0 };
    int counts[5] = { 0, scaled(sp->singles, n), scaled(sp->doubles, n), scaled(sp->triples, n),
                      scaled(sp->quads, n) };
    int first = sp->acc_singles ? 2 : 1, floors = sp->floors - first + 1;
    for (int cap = 1; cap <= 4; cap++)
        for (int j = 0; j < counts[cap]; j++) {
            int floor = first + j % floors;
            campus_rules rules = sp->rules;
            if (sp->llc_floors && floor >= 2) rules.llc = floor - 1;
            add_room(c, b, floor, cap, &rules, numbers);
        }
    campus_rules acc = sp->rules;
    acc.access = 1;
    for (int j = 0; j < scaled(sp->acc_singles, n); j++) add_room(c, b, 1, 1, &acc, numbers);
    acc.same_gender = 1;   /* an accessible double takes the gender of its first holder */
    for (int j = 0; j < scaled(sp->acc_doubles, n); j++) add_room(c, b, 1, 2, &acc, numbers);
    for (int k = 0; k < scaled(sp->ra, n); k++) {   /* from the top floor down: LLC floors first */
        int floor = sp->floors - k % sp->floors;
        campus_rules rules = sp->rules;
        if (sp->llc_floors && floor >= 2) rules.llc = floor - 1;
        add_room(c, b, floor, 1, &rules, numbers);
        c->r[c->n_rooms - 1].ra = 1;
    }
}

/* --------------------------------------------------------------- students */

static void add_students(campus *c)
{
    int wide = c->n_students > 9999;
    for (int i = 0; i < c->n_students; i++) {
        campus_student *s = &c->s[i];
        memset(s, 0, sizeof *s);
        snprintf(s->id, sizeof s->id, wide ? "s%05d" : "s%04d", i + 1);
        int g = (int)campus__rnd(c, 100), y = (int)campus__rnd(c, 100), l = (int)campus__rnd(c, 100);
        s->gender = g < 50 ? 'F' : g < 98 ? 'M' : 'X';
        s->year = y < 28 ? 1 : y < 54 ? 2 : y < 78 ? 3 : 4;
        s->llc = l < 7 ? 1 : l < 13 ? 2 : l < 18 ? 3 : 0;
        s->access = campus__pct(c, 5);
        s->points = 10 * (s->year - 1);   /* Columbia's bands: seniors 30, first-years 0 */
        s->group = -1;
        s->choose = -1;
        s->swap_with = -1;
    }
}

/* The students in a random order, for picking. */
static int *shuffled(campus *c)
{
    int *p = malloc((size_t)c->n_students * sizeof *p);
    if (!p) return NULL;
    for (int i = 0; i < c->n_students; i++) p[i] = i;
    for (int i = c->n_students - 1; i > 0; i--) {
        int j = (int)campus__rnd(c, (uint32_t)i + 1), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

/* ------------------------------------------------------------------ staff */

static campus_staff *staff_add(campus *c, int student, int room, int check, const char *tag)
{
    campus_staff *a = &c->staff[c->n_staff++];
    *a = (campus_staff){ .student = student, .room = room, .check = check };
    snprintf(a->id, sizeof a->id, "c-%s-%s", tag, c->s[student].id);
    return a;
}

static void place(campus *c, int student, int room, campus_role role, int check, const char *tag)
{
    campus_room *r = &c->r[room];
    staff_add(c, student, room, check, tag);
    c->s[student].role = role;
    if (!check && !campus_may_hold(&c->s[student], r, 0)) c->staff_exceptions++;
    if (!r->staff_beds++) r->holder = c->s[student].gender;
}

/* The first free student in perm that ok() accepts, or -1. */
static int find(campus *c, const int *perm, int (*ok)(const campus_student *, const void *), const void *arg)
{
    for (int k = 0; k < c->n_students; k++)
        if (c->s[perm[k]].role == ROLE_NONE && ok(&c->s[perm[k]], arg)) return perm[k];
    return -1;
}

/* An RA: an upperclass student of no LLC and no accommodation, of the
 * hall's gender where it has one. On the first-year hall and an LLC floor
 * the RA breaks the room's rule: a staff exception, as offices place them. */
static int ra_ok(const campus_student *s, const void *arg)
{
    const campus_room *r = arg;
    return s->year >= 3 && !s->llc && !s->access && s->gender != 'X' &&
           (!r->rules.only_gender || s->gender == r->rules.only_gender);
}

static int access_ok(const campus_student *s, const void *arg)
{
    return s->access;
}

static int transfer_ok(const campus_student *s, const void *arg)
{
    const char *gender = arg;
    return (s->year == 2 || s->year == 3) && !s->access && (!*gender || s->gender == *gender);
}

static void add_staff(campus *c, const int *perm)
{
    int n_access = 0;
    for (int i = 0; i < c->n_students; i++) n_access += c->s[i].access;
    int access_left = n_access - (2 * n_access) / 5;   /* staff place 3 in 5; the rest take part */
    for (int i = 0; i < c->n_rooms; i++) {
        campus_room *r = &c->r[i];
        int who = -1;
        if (r->ra && (who = find(c, perm, ra_ok, r)) >= 0) place(c, who, i, ROLE_RA, 0, "ra");
        else if (r->rules.access && access_left > 0 && (who = find(c, perm, access_ok, NULL)) >= 0) {
            place(c, who, i, ROLE_ACCESS, 1, "acc");
            access_left--;
        }
    }
    /* transfers into general doubles of the gender-inclusive hall; the
     * first one is a man whom a clerk first tries in the women's hall */
    int transfers = scaled(TRANSFERS_FULL, c->n_students), refused = 0;
    for (int i = 0; i < c->n_rooms && transfers > 0; i++) {
        campus_room *r = &c->r[i];
        if (r->building != 5 || r->cap != 2 || r->rules.access || r->staff_beds) continue;
        int who = find(c, perm, transfer_ok, refused ? "" : "M");
        if (who < 0) break;
        if (!refused) {
            for (int j = 0; j < c->n_rooms; j++)
                if (c->r[j].rules.only_gender == 'F' && c->r[j].cap == 2) {
                    staff_add(c, who, j, 1, "try")->refused = 1;
                    break;
                }
            refused = 1;
        }
        place(c, who, i, ROLE_TRANSFER, 1, "tr");
        transfers--;
    }
}

/* Later in the round: accommodations that end (the student leaves), one
 * per 1,500 students, from the accessible singles. */
static void add_unassigns(campus *c)
{
    int want = c->n_students / 1500 > 0 ? c->n_students / 1500 : 1;
    for (int k = 0; k < c->n_staff && c->n_unassign < want; k++) {
        const campus_staff *a = &c->staff[k];
        if (a->refused || !c->r[a->room].rules.access || c->r[a->room].cap != 1) continue;
        campus_staff *u = &c->unassign[c->n_unassign++];
        *u = (campus_staff){ .student = a->student, .room = -1 };
        snprintf(u->id, sizeof u->id, "c-un-%s", c->s[a->student].id);
    }
}

/* ----------------------------------------------------------------- prefs */

int campus__pick_prefs(campus *c, const int *cand, int n, int *out, int have, int limit)
{
    for (int tries = 0; have < limit && tries < 4 * CAMPUS_PREFS && n > 0; tries++) {
        int best = -1;
        for (int k = 0; k < 5; k++) {
            int r = cand[campus__rnd(c, (uint32_t)n)];
            if (best < 0 || c->r[r].popularity > c->r[best].popularity) best = r;
        }
        int dup = 0;
        for (int k = 0; k < have; k++) dup |= out[k] == best;
        if (!dup) out[have++] = best;
    }
    return have;
}

int campus_generate(campus *c, uint64_t seed, int n)
{
    memset(c, 0, sizeof *c);
    if (n < 30 || n > CAMPUS_MAX_STUDENTS) return -1;
    c->rng = seed;
    c->n_students = n;
    size_t rooms = (size_t)n + 64, staff = (size_t)n / 10 + 16;
    c->s = calloc((size_t)n, sizeof *c->s);
    c->r = calloc(rooms, sizeof *c->r);
    c->g = calloc((size_t)n / 2 + 1, sizeof *c->g);
    c->staff = calloc(staff, sizeof *c->staff);
    c->unassign = calloc(staff, sizeof *c->unassign);
    int *cand = calloc(rooms, sizeof *cand);
    if (!c->s || !c->r || !c->g || !c->staff || !c->unassign || !cand) {
        free(cand);
        campus_free(c);
        return -1;
    }
    for (int b = 0; b < CAMPUS_BUILDINGS; b++) add_building(c, b, n);
    add_students(c);
    int *perm = shuffled(c);
    if (!perm) {
        free(cand);
        campus_free(c);
        return -1;
    }
    add_staff(c, perm);
    add_unassigns(c);
    campus__groups_form(c, perm, cand);
    campus__singles_plan(c, perm, cand);
    free(perm);
    free(cand);
    return 0;
}

void campus_free(campus *c)
{
    free(c->s);
    free(c->r);
    free(c->g);
    free(c->staff);
    free(c->unassign);
    memset(c, 0, sizeof *c);
}
