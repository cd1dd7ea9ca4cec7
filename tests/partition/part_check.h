/* part_check.h -- the partition tests' checker: what a user could see,
 * recorded while the faults run, and the state at the end, held to the
 * contract the way Jepsen's checkers hold a history.
 *
 * While the run goes on, a poller reads the whole results hash and the
 * batch's stats a few times a second (over the test's own unix socket,
 * which no fault touches, the way a front end on another network would):
 *   - a result once seen never changes, except `waiting` -> a final
 *     status, once (contract 9.5);
 *   - stats `processed` and `dequeued` never go backwards: a late write of
 *     an owner that lost its lease would put an older count back.
 * At the end, on the drained batch:
 *   - every acknowledged id has exactly one result, final, and no result
 *     names an id nobody pushed;
 *   - nothing oversold: the granted units fit the capacity, free =
 *     capacity - granted, no user above per_user, stats.granted agrees;
 *   - nothing applied twice: each granted request has one grant event in
 *     the log (either log format, decoded by wire/log_entry.h), the ranks
 *     of the grants are 1..G each once.
 * Ids are the producer's: "r<n>" requests (n < pushed), "c<n>" admin
 * commands (n < ctl).
 */
#ifndef ALLOCD_PART_CHECK_H
#define ALLOCD_PART_CHECK_H

#include <pthread.h>
#include <hiredis/hiredis.h>

#define PART_MAX_MSGS 12
#define PART_MAX_TAKEOVERS 32

typedef struct part_report {
    /* the run */
    long pushed, ctl;
    int faults;                 /* faults applied */
    int fault_checks;           /* pings that showed a fault in effect (or a path still open) */
    int takeovers;              /* timed hand-overs after a cut of the owner */
    long takeover_ms[PART_MAX_TAKEOVERS];   /* fault -> the other holds the lease */
    long served_ms[PART_MAX_TAKEOVERS];     /* fault -> the other applied a chunk */
    long takeover_max_ms, takeover_limit_ms, served_max_ms;
    int owner_changes;          /* lease owner changes seen by the main loop */
    int allocd_exit[2];         /* exit status of a and b after SIGTERM */
    double seconds;
    /* the history */
    long polls, waits_seen, waits_served;
    long results, granted, rejected, capacity;
    /* violations */
    long lost, phantom, doubled, oversold, changed, backwards, slow_takeover, other;
    long violations;
    pthread_mutex_t lock;       /* msgs: the poller thread adds some too */
    int n_msgs;
    char msgs[PART_MAX_MSGS][300];
} part_report;

void part_report_init(part_report *r);
void part_report_free(part_report *r);
/* Adds a message (the first PART_MAX_MSGS are kept). */
void part_report_msg(part_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What the poller remembers: the last result seen of every request id. */
typedef struct part_history {
    long max;                   /* ids r0 .. r(max-1) */
    char **seen;
    long long processed, dequeued;
} part_history;

void part_history_init(part_history *h, long max);
void part_history_free(part_history *h);
/* One poll of batch b; violations go to r. */
void part_history_poll(part_history *h, part_report *r, redisContext *c, const char *b);
/* The end state of batch b; per_user: the batch's limit. */
void part_check_final(part_report *r, redisContext *c, const char *b, int per_user);

#endif
