/* chaos_int.h -- what the files of the chaos run share (private to
 * tests/chaos/): the batches, the pushed records, the run's context, the
 * router of Redis commands by key slot, and each file's entry points.
 *
 *   chaos_core.c    the run: setup, Redis (single or Cluster), allocd
 *                   instances, the phases, the report
 *   chaos_route.c   Redis commands routed by key slot, pushes with retry
 *   chaos_gen.c     the generators: producers, follower, admin thread
 *   chaos_faults.c  the fault schedule: kills, restarts, outages, pauses;
 *                   the answer watcher and the drain
 *   chaos_check.c   the checker: results, the log replayed, holders,
 *                   free, stats
 *   chaos_rules.c   contract 11: the rules, profiles and draw by points of
 *                   the batches, and their checks (eligibility on the final
 *                   holders and through the log, exact fill, groups whole,
 *                   the draw)
 */
#ifndef ALLOCD_CHAOS_INT_H
#define ALLOCD_CHAOS_INT_H

#include "chaos_core.h"
#include "chaos_archive.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <jansson.h>
#include "core/answer_watch.h"
#include "core/splitmix64.h"
#include "redis/cluster_slots.h"
#include "allocctl/ctl_replay.h"
#include "harness.h"

/* ----------------------------------------------------------- batches -- */

enum { B_CS1, B_CS2, B_CR1, B_CR2, NB };
#define CHAOS_WAIT_MS 1200   /* cs2 and cr1: the longest a waiting request waits */
#define MAX_ITEMS 96

/* Contract 11.2: who may hold an item (chaos_rules.c). Values are
 * canonical JSON text, as in the profiles. */
typedef struct chaos_rule {
    const char *only_key;       /* only_X, NULL for none */
    const char *only_vals[2];
    int n_only;
    const char *same_key;       /* same_X: true, NULL for none */
} chaos_rule;

typedef struct batch_def {
    const char *name;
    int room;
    int per_user;
    int hold_ms;         /* stock reservations; rooms: held beds (contract 9.4) */
    int wait_ms;         /* > 0: some requests carry "wait":true (contract 9.5) */
    int max_group;
    int listed;          /* rooms: groups name their members (9.2 listed), else formed */
    int exact;           /* rooms: group_fill = exact (11.4) */
    int early_ms;        /* > 0: opens that long after the start, early=shuffle,
                            draw_by = points (9.1, 11.3) */
    int staff;           /* assign/unassign among the admin commands (11.5) */
    int n_items;
    char items[MAX_ITEMS][16];
    long long caps[MAX_ITEMS];
    char attrs[MAX_ITEMS][160];
    chaos_rule rules[MAX_ITEMS];
    int has_rules;       /* P:{B}:profiles is written */
} batch_def;

#define STOCK_USERS 1500
#define ROOM_USERS 360

/* A user's profile (11.2), canonical JSON values, NULL = missing. */
typedef struct chaos_prof {
    int has;
    const char *gender, *year, *llc, *points;
    long long pts;       /* the points a draw reads: an integer, else 0 */
    char pts_text[8];    /* points points here when they are an integer */
} chaos_prof;

enum { EXP_VALID = 0, EXP_INVALID = 1, EXP_CTL = 2 };

/* One pushed readable id (the first push; duplicates are not new records). */
typedef struct rec {
    char *id;
    char *json;          /* the bytes of the first push */
    char *user;          /* NULL for admin commands and invalid requests */
    char op[16];
    uint32_t len;
    uint8_t batch;
    uint8_t expect;
    /* filled by the checker */
    uint8_t seen;
    uint8_t nocheck;     /* an assign without check: its holder is a staff exception */
    int16_t grant_item;  /* the item of its first grant in the log, -1 before */
    uint8_t status;      /* 1 granted 2 done 3 rejected 4 invalid */
    uint16_t want_grants;
    uint16_t ev_grant, ev_release, ev_confirm, ev_cancel, ev_capacity, ev_state;
    uint16_t ev_wait, ev_wait_served;
    char result_op[16];
} rec;

typedef struct recvec {
    rec *v;
    size_t n, cap;
} recvec;

typedef struct chaos_ctx chaos_ctx;

/* A granted buy the follower may confirm or cancel. */
typedef struct candidate {
    char id[72];
    char user[72];
    uint8_t batch;
    uint8_t tries;
} candidate;

typedef struct counters {
    long pushed, attempts, retries, dups, dead_acked[NB], dead_attempts[NB], invalid;
} counters;

#define MAX_NODES 3

#define MAX_INST 8

/* Connections to Redis, routed by key slot: one context per node (a single
 * Redis is node 0 and every slot maps to it). */
typedef struct rconn {
    redisContext *c[MAX_NODES];
} rconn;

typedef struct producer {
    chaos_ctx *cx;
    int idx;
    uint64_t rng;
    rconn rc;
    recvec recs;
    long n;               /* entries to push */
    counters k;
    pthread_t th;
} producer;

struct chaos_ctx {
    const chaos_params *p;
    chaos_archive *arch;         /* --archive, else NULL */
    chaos_report *rep;
    batch_def b[NB];
    char names[NB][16];
    chaos_prof room_prof[ROOM_USERS];   /* s0.. */
    chaos_prof stock_prof[STOCK_USERS]; /* u0.. */
    long long opens_at;          /* ms: the early batch's opening */
    harness_redis redis;         /* the single Redis, or cluster node 0 (allocd's dir) */
    harness_redis node[MAX_NODES];   /* cluster nodes 1.. (node[0] unused) */
    int cluster, n_nodes;
    int port[MAX_NODES];
    _Atomic int16_t slot_node[CLUSTER_SLOTS];  /* slot -> node, updated on MOVED */
    uint16_t bslot[NB];
    int n_inst;
    harness_allocd allocd[MAX_INST];
    char inst_conf[MAX_INST][768];
    pid_t paused_pid;
    char allocd_conf[512];
    double t0;
    double seconds;
    atomic_int producers_running;
    atomic_int stop_helpers;
    atomic_int redis_down;       /* an outage is in progress */
    atomic_int answer_stop;      /* the answer watcher stops */
    pthread_t answer_th;
    atomic_long follow_pushed;
    /* follower input */
    pthread_mutex_t mu;
    candidate *cand;
    size_t n_cand, cap_cand;
    /* follower and admin records */
    producer follower, admin;
    int n_producers;
    producer *prod;
    pthread_mutex_t msg_mu;
};

#define GROUP 32

#define GROUP_MAX 32

typedef struct pending {
    uint8_t batch;
    uint8_t ctl;          /* push to P:{B}:ctl instead of the queue */
    uint8_t dead;         /* garbage without a readable id */
    const char *json;
    size_t len;
} pending;

/* chaos_core.c */
double chaos__now_s(void);
uint32_t chaos__rnd(uint64_t *s, uint32_t n);
double chaos__rndf(uint64_t *s);
void *chaos__xmalloc(size_t n);
void *chaos__xcalloc(size_t n, size_t size);
char *chaos__xstrdup(const char *s);
char *chaos__xmemdup(const char *s, size_t n);
size_t chaos__recvec_add(recvec *rv, rec r);
void chaos__violation(chaos_ctx *cx, long *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void chaos__progress(chaos_ctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void chaos__sleep_until(chaos_ctx *cx, double t);

/* chaos_route.c */
redisContext *chaos__node_connect(chaos_ctx *cx, int node);
int chaos__slot_node(chaos_ctx *cx, uint16_t slot);
uint16_t chaos__key_slot(const char *key);
void chaos__rc_close(rconn *rc);
redisContext *chaos__rc_node(chaos_ctx *cx, rconn *rc, int node);
redisContext *chaos__rc_node_retry(chaos_ctx *cx, rconn *rc, int node, int who);
int chaos__rc_redirect(chaos_ctx *cx, const redisReply *r, int *ask_node);
redisReply *chaos__rcmdv(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, va_list ap);
redisReply *chaos__rcmd(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
long long chaos__rint_(chaos_ctx *cx, rconn *rc, uint16_t slot, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int chaos__push_group(producer *pr, const pending *g, size_t n);

/* chaos_gen.c */
void *chaos__producer_main(void *arg);
void *chaos__follower_main(void *arg);
void *chaos__admin_main(void *arg);

/* chaos_faults.c */
void chaos__allocd_start(chaos_ctx *cx, int i);
void chaos__allocd_watch(chaos_ctx *cx);
void *chaos__answer_main(void *arg);
void chaos__run_faults(chaos_ctx *cx, uint64_t *rng);
long long chaos__hget_ll(chaos_ctx *cx, rconn *rc, int bi, const char *key, const char *field);
int chaos__wait_drain(chaos_ctx *cx);

/* chaos_check.c */
void chaos__tamper(chaos_ctx *cx);
void chaos__run_checks(chaos_ctx *cx);

/* chaos_rules.c */
void chaos__rules_define(chaos_ctx *cx);
int chaos__rules_write(chaos_ctx *cx, rconn *c, int bi);
const chaos_prof *chaos__prof_of(const chaos_ctx *cx, const batch_def *b, const char *user);
typedef struct rules_hist rules_hist;
rules_hist *chaos__rules_hist_new(chaos_ctx *cx, int bi);
/* One log event before the replay applies it: held_before = units of its
 * item held just before it; rc its request (NULL when none). */
void chaos__rules_event(rules_hist *h, const char *sid, const replay_event *e, const rec *rc, long long held_before);
void chaos__rules_hist_free(rules_hist *h);
/* The final holders (HGETALL alloc:{B}:holders) against the rules. */
void chaos__rules_final(chaos_ctx *cx, int bi, const redisReply *holders);
typedef struct draw_tally draw_tally;
draw_tally *chaos__draw_new(chaos_ctx *cx, int bi);
void chaos__draw_note(draw_tally *d, const rec *rc, json_t *doc);
void chaos__draw_check(draw_tally *d);
void chaos__rules_tamper(chaos_ctx *cx, rconn *c, int what);

#endif
