/* campus.h -- a realistic university housing round, generated from a seed
 * (issue 35, item 3): the students with their profiles, the rooms of six
 * buildings with their rules (contract 11.2), the staff placements, the
 * roommate groups and what every student asks for. campus_generate builds
 * it in memory (campus_gen.c), campus_write turns it into the files a round
 * needs (campus_write.c) and the round driver (round.h) plays them against
 * a real allocd.
 *
 * Everything is a function of (seed, number of students): the same pair
 * gives byte-identical files. The draw itself is allocd's and differs from
 * run to run, so a round's outcome does too; what a round may rely on (no
 * rule broken, groups whole, the draw replayed) does not. */
#ifndef ALLOCD_TOOLS_CAMPUS_H
#define ALLOCD_TOOLS_CAMPUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { CAMPUS_BUILDINGS = 6, CAMPUS_PREFS = 3, CAMPUS_FULL = 3000, CAMPUS_MAX_STUDENTS = 20000 };

/* What a student is in the round. */
typedef enum {
    ROLE_NONE = 0,
    ROLE_RA,          /* resident assistant: placed by staff, no check */
    ROLE_ACCESS,      /* accessibility accommodation: placed by staff, with check */
    ROLE_TRANSFER,    /* a transfer: placed by staff, with check, in a double */
    ROLE_GROUP,       /* a member of a roommate group */
    ROLE_SINGLE       /* asks alone: auto with preferences */
} campus_role;

/* The rules of contract 11.2 that a room carries (its attrs). */
typedef struct campus_rules {
    char only_gender;   /* 'F', 'M', or 0: none */
    int same_gender;    /* same_gender: true */
    int year_mask;      /* only_year: bit y for year y; 0: none */
    int llc;            /* only_llc: index into campus_llc_name, 0: none */
    int access;         /* only_access: "yes" */
} campus_rules;

typedef struct campus_room {
    char id[8];         /* "A101": building letter, floor, number */
    int building, floor, cap;
    campus_rules rules;
    int ra;             /* an RA's room (attr "ra": true) */
    int staff_beds;     /* beds the staff placements take */
    char holder;        /* the gender of the first of them (0: none) */
    int popularity;     /* 0..99: how many students want it (prefs are drawn by it) */
} campus_room;

typedef struct campus_student {
    char id[8];         /* "s0001" */
    char gender;        /* 'F', 'M', 'X' */
    int year;           /* 1..4 */
    int llc;            /* 0: none */
    int access;         /* accessibility needs */
    int points;         /* 10 per year completed: seniors 30 */
    campus_role role;
    int group;          /* index, -1: none */
    /* ROLE_SINGLE: the request */
    int prefs[CAMPUS_PREFS], n_prefs;
    int filter;         /* FILTER_* */
    int wait;           /* joins the waitlist if the draw gives no room */
    int choose;         /* a room tried with `choose` first, -1: none */
    int withdraw;       /* releases the bed later, if placed */
    int swap_with;      /* the friend to trade beds with; -1 none, -2 offered to (never answers) */
} campus_student;

enum { FILTER_NONE = 0, FILTER_TYPE, FILTER_ANY };

typedef struct campus_group {
    int m[4], n;        /* members; m[0] leads (the most points) */
    int decliner;       /* invited too, declines: -1 none */
    int prefs[CAMPUS_PREFS], n_prefs;
    int filter;         /* FILTER_NONE or FILTER_TYPE */
    int update;         /* 1: a member reorders the prefs; 2: and another sends a stale version */
} campus_group;

/* A staff placement (assign) or removal (unassign). */
typedef struct campus_staff {
    int student, room;  /* room -1: unassign */
    int check;          /* "check": true */
    int refused;        /* expected rejected/not_eligible (a clerk's mistake) */
    char id[24];
} campus_staff;

typedef struct campus {
    uint64_t rng;
    int n_students, n_rooms, n_groups, n_staff, n_unassign;
    campus_student *s;
    campus_room *r;
    campus_group *g;
    campus_staff *staff;      /* before the opening */
    campus_staff *unassign;   /* later in the round */
    int beds, staff_exceptions;
} campus;

extern const char *const campus_building_name[CAMPUS_BUILDINGS];
extern const char *const campus_llc_name[4];
const char *campus_room_type(int cap);

/* Builds the campus of n students (rooms scaled from 1,200 for 3,000) from
 * seed. 0, or -1 (bad n, out of memory). */
int campus_generate(campus *c, uint64_t seed, int n);
void campus_free(campus *c);
/* Whether s may hold r by its only_X rules and, for same_gender, beside a
 * holder of gender `with` (0: an empty room). */
int campus_may_hold(const campus_student *s, const campus_room *r, char with);

/* Writes the round's files into dir (which must exist), for batch b:
 * rooms.json, profiles.csv, staff.jsonl, early.jsonl, wait.jsonl, form.jsonl,
 * place.jsonl, later.jsonl and campus.txt (round.h says what each is).
 * 0, or -1 with a message on stderr. */
int campus_write(const campus *c, const char *dir);
/* What was generated, in a few lines for a newcomer. */
void campus_describe(const campus *c, uint64_t seed, const char *dir, FILE *f);

#endif
