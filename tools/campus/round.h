/* round.h -- a whole housing round on a real allocd, from the files of
 * campus_write (campus.h), as the office and its students would run it:
 *
 *   1. the office creates the batch (`allocctl batch create`: early
 *      shuffle, draw by points, groups that fill a room) and loads the
 *      profiles (`allocctl profiles load`);
 *   2. before the opening every student sends their requests (early.jsonl):
 *      those asking alone an `auto`, group leaders `invite` and `prefs`;
 *      all of it is kept for the draw, which at the opening orders the
 *      students by points and at random within equal points;
 *   3. staff place RAs, accommodations and transfers (staff.jsonl, `assign`
 *      on P:{B}:ctl), once allocd has read the profiles, before the opening;
 *   4. who found no room may join the waitlist (wait.jsonl), in draw order;
 *   5. the invited accept or decline, some groups edit their preferences
 *      (form.jsonl), then each group asks for its room (place.jsonl) in the
 *      order of its leader's place in the draw -- the group's turn;
 *   6. accommodations end (`unassign`), students withdraw (`release`) and
 *      friends trade beds (`swap`) (later.jsonl), each sent only by a
 *      student who holds a bed then; freed beds go to the waitlist;
 *   7. the office closes the batch, and checks the round: `allocctl
 *      verify` (the log replayed, every holder against the rules),
 *      `allocctl lottery verify` (the draw replayed), every group whole
 *      or absent, every student with an outcome; then the figures
 *      (`allocctl report` and placement by band).
 */
#ifndef ALLOCD_TOOLS_CAMPUS_ROUND_H
#define ALLOCD_TOOLS_CAMPUS_ROUND_H

typedef struct round_opts {
    const char *dir;        /* the files of campus_write; requests.jsonl is written there */
    const char *redis_url;  /* a Redis that a running allocd serves, or NULL: start both */
    const char *allocd;     /* the allocd to start without redis_url */
    const char *allocctl;   /* the allocctl to run */
    const char *prefix;     /* key prefix, "alloc" */
    const char *batch;      /* batch id */
    int open_in_ms;         /* the opening, this long after the batch is created */
    int quiet;              /* only the checks and figures, no explanations */
} round_opts;

/* Runs the round. Exit code: 0 every check passed, 1 a check failed, 3
 * Redis, allocd or allocctl could not be run, 4 the files are bad. */
int round_run(const round_opts *o);

#endif
