/* chaos_core.h -- the chaos run of allocd, callable from a command-line
 * driver (tests/chaos/chaos.c, `make chaos`) and from cmocka tests
 * (tests/integration/test_chaos_short.c, test_outage.c).
 *
 * Why: the contract promises that every readable request gets exactly one
 * result, that nothing is applied twice and that no unit is given twice,
 * "even across daemon crashes and Redis restarts". Unit tests cannot show
 * that; this run does it with the real binaries. It starts redis-server
 * with AOF (appendfsync always) and allocd, defines two stock batches (one
 * with final buys, one with reservations that get confirmed, cancelled or
 * expire) and two room batches (attrs, groups, switches, releases, and
 * set_capacity/pause/resume admin commands; contract 11 in both: only_X /
 * same_X rules with profiles, staff assign/unassign, and in cr2 exact fill
 * and an opening drawn by points, chaos_rules.c), and pushes a seeded mix of
 * valid requests, duplicate ids and garbage from several producer threads
 * that retry on any connection error. Meanwhile allocd is SIGKILLed and
 * restarted at random moments, Redis is restarted (SIGTERM and SIGKILL
 * alternately), optionally stopped for a long outage or put to sleep with
 * DEBUG SLEEP. After a drain it checks everything it can against what was
 * pushed: results, the event log replayed from scratch, holders, free,
 * capacity, stats, dead list, queue and ctl lists (drained), and no holder
 * against a rule of their item, groups whole, exact fill, the draw.
 *
 * Cluster mode (params.cluster, `make chaos-cluster`, test_chaos_cluster):
 * the same run over a 3-master Redis Cluster on loopback (no replicas),
 * each batch on another master, several allocd instances with fixed names
 * (lease_ttl_ms 2000, registry_interval_ms 200) that are SIGKILLed and
 * restarted under their names or SIGSTOPped past their lease. Producers,
 * follower, drain and checker route every command by the batch's slot and
 * follow MOVED/ASK/TRYAGAIN; the checks are the same, each batch read from
 * the node owning its slot.
 */
#ifndef ALLOCD_CHAOS_CORE_H
#define ALLOCD_CHAOS_CORE_H

#include <stdint.h>
#include <stdio.h>

typedef struct chaos_params {
    long requests;        /* producer requests (valid + dup + garbage) */
    int kills;            /* SIGKILLs of allocd during the run */
    int redis_restarts;   /* Redis restarts (alternately SIGTERM and SIGKILL) */
    int seconds;          /* length of the push phase; 0 = derived from requests */
    uint64_t seed;
    int keep;             /* keep the temp dir (prints its path) */
    int outage_ms;        /* one Redis outage of this length mid-run; 0 = none */
    int slow;             /* DEBUG SLEEPs (0.5..2.5 s) issued during the run */
    int producers;        /* producer threads; 0 = 3 */
    int drain_seconds;    /* longest wait for allocd to finish; 0 = derived */
    int verbose;          /* progress lines on stderr */
    /* cluster mode: a 3-master Redis Cluster on loopback (no replicas), each
     * batch on another master, several allocd instances with distinct names
     * that are SIGKILLed and restarted under the same name; Redis restarts
     * and outages are not done in this mode */
    int cluster;
    int instances;        /* allocd instances; 0 = 1 (single Redis) or 3 (cluster) */
    int pauses;           /* SIGSTOPs of one instance past its lease, then SIGCONT */
    int log_chunk;        /* allocd with log_format = "chunk" (wire/log_entry.h) */
    int answer_ms;        /* allocd's answer_ms, the bound asserted (contract 9.6); 0 = 15000 */
    int archive;          /* an archiver (allocctl archive --follow) into a private
                             PostgreSQL, killed with allocd, reconciled at the end
                             (tests/chaos/chaos_archive.c); single Redis only */
} chaos_params;

#define CHAOS_MAX_MSGS 20

typedef struct chaos_report {
    /* what was done */
    long pushed;            /* entries pushed (each counted once, retries not) */
    long push_attempts;     /* RPUSHes sent including retries */
    long push_retries;      /* connection errors a producer retried through */
    long distinct_ids;      /* readable ids pushed */
    long dup_pushes;        /* pushes of an id pushed before */
    long garbage_dead;      /* unreadable pushes (acknowledged) */
    long garbage_invalid;   /* readable but invalid pushes */
    long ctl_pushed;        /* admin commands */
    int kills;
    int pauses;             /* SIGSTOP/SIGCONT of an instance past its lease */
    int instances;          /* allocd instances running side by side */
    int nodes;              /* Redis nodes (1, or the cluster's masters) */
    int redis_restarts;
    int outages;
    int slow_sleeps;
    int allocd_starts;
    int allocd_unexpected_exits;   /* allocd died without being killed */
    int allocd_final_exit;         /* exit status after the final SIGTERM */
    int archiver_kills;            /* --archive: SIGKILLs of the archiver */
    int reconcile_failed;          /* --archive: batches reconcile found different */
    /* what was found */
    long results;
    long granted, done, rejected, invalid;
    long log_entries, grants_logged, expiries;
    long waits;          /* requests that joined a waitlist (each got one final result) */
    long not_eligible;   /* contract 11: results refused not_eligible */
    long staff_grants;   /* grants by staff (assign) in the log */
    long drawn;          /* results drawn by points at an opening */
    long exact_groups;   /* group grants where rooms fill exactly */
    long dead_entries;
    long duplicates;        /* stats.duplicates, summed over batches */
    long lost;              /* pushed readable ids without a result */
    long phantom;           /* results for ids never pushed */
    long applied_twice;     /* requests whose effect is logged more than once */
    long oversold;          /* capacity, per_user or one-bed violations */
    long mismatches;        /* holders/free/capacity differ from the log replay */
    long stats_errors;      /* counters that do not add up */
    long other;             /* everything else (wrong status, leftovers, ...) */
    long unanswered_late;   /* a request older than answer_ms while its batch was open */
    long rule_breaches;     /* contract 11: a holder against only_X/same_X, a group split,
                               exact fill broken, a draw not by points (chaos_rules.c) */
    long violations;        /* sum of the above */
    /* contract 9.6: the oldest unanswered request seen by a probe every
     * 200 ms (stats.dequeued and the queue's length; core/answer_watch.h),
     * over time the batch was open and Redis up */
    double max_unanswered_s;
    char max_unanswered_batch[16];
    /* allocd's logs */
    int log_connection_lost;
    int log_timeouts;
    int log_connected;
    double push_seconds, drain_seconds, total_seconds;
    char dir[256];          /* temp dir (gone unless keep) */
    int n_msgs;
    char msgs[CHAOS_MAX_MSGS][400];  /* the first violations, precisely */
} chaos_report;

void chaos_params_default(chaos_params *p);
/* Runs everything; returns 0 when no violation was found (and fills *rep in
 * every case), -1 when the run could not be set up. */
int chaos_run(const chaos_params *p, chaos_report *rep);
/* The figures in one block, and the first violations. */
void chaos_print_report(FILE *f, const chaos_params *p, const chaos_report *rep);

#endif
