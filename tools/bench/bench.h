/* bench.h -- the pieces of allocbench, the side-by-side benchmark.
 *
 * allocbench measures allocd against two alternatives (one Lua script per
 * request; a lock per room/item with read-modify-write) in one run, on one
 * Redis, with one request mix, so every number it reports can be given as a
 * ratio. The pieces here are tool-agnostic (processes, a pipelined
 * non-blocking driver, the request mix, Redis command accounting) and are
 * kept apart from tools/allocbench.c, which only orchestrates and reports.
 * The clock, the private redis-server, spawning and reaping, temp dirs and
 * their cleanup at exit are the module the tests use too (proc/proc.h).
 */
#ifndef ALLOCBENCH_BENCH_H
#define ALLOCBENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

#include "proc/proc.h"

uint64_t bench_mix(uint64_t x);         /* splitmix64 finaliser */

/* ------------------------------------------------------------ redis -- */

typedef struct bench_target {
    int is_unix;
    char path[256];
    char host[256];
    int port;
    char url[300];
} bench_target;

/* unix:///path or redis://host:port (no auth). Returns 0 or -1. */
int bench_target_parse(bench_target *t, const char *url);
redisContext *bench_connect(const bench_target *t);      /* blocking */
redisContext *bench_connect_nb(const bench_target *t);   /* non-blocking */
/* Runs a command and reports whether it failed (error reply or I/O). */
int bench_ok(redisContext *c, const char *fmt, ...);
int bench_ok_argv(redisContext *c, int argc, const char **argv, const size_t *lens);
/* Appends one command in RESP to out (hiredis formats with sprintf, which
 * would make the load generator the bottleneck); returns the new length,
 * or 0 when it does not fit in cap. lens may be NULL (strlen). */
size_t resp_append(char *out, size_t at, size_t cap, int argc, const char **argv, const size_t *lens);
/* SCRIPT LOAD; the 40-hex SHA goes into sha (41 bytes). */
int bench_script_load(redisContext *c, const char *src, char *sha);

/* Per-command counters from INFO commandstats (calls and usec), also used
 * to tally the commands the bench itself sends so they can be subtracted. */
#define CMDSTAT_MAX 96
typedef struct cmdstats {
    size_t n;
    struct { char name[40]; long long calls, usec; } e[CMDSTAT_MAX];
} cmdstats;

int cmdstats_read(redisContext *c, cmdstats *s);
void cmdstats_add(cmdstats *s, const char *name, long long calls);
void cmdstats_merge(cmdstats *into, const cmdstats *from);
/* out = after - before - own (calls clamped at 0; `info` dropped). */
void cmdstats_delta(const cmdstats *after, const cmdstats *before,
                    const cmdstats *own, cmdstats *out);
long long cmdstats_calls(const cmdstats *s, const char *name);
long long cmdstats_total_calls(const cmdstats *s);
long long cmdstats_total_usec(const cmdstats *s);

/* -------------------------------------------------------- processes -- */

/* The private redis-server is a proc_redis (proc/proc.h); allocd is
 * started here with a config for the bench. Temp dirs stay when
 * ALLOCBENCH_KEEP is set. */
typedef struct bench_daemon_opts {
    const char *bin;          /* path of allocd */
    const char *dir;          /* where the config and log go */
    const char *redis_url;
    const char *prefix;
    int chunk;
    int registry_ms;          /* 0 = allocd's default */
    const char *instance;     /* NULL: "allocbench" */
    const char *cluster;      /* NULL: allocd's default (auto); "yes" / "no" */
    const char *log_format;   /* NULL: allocd's default (chunk); "event" */
    const char *heap_reserve_mb; /* NULL: allocd's default; else written as given */
} bench_daemon_opts;

typedef struct bench_daemon {
    pid_t pid;
    char conf[300];
    char log[300];
} bench_daemon;

int bench_daemon_start(bench_daemon *d, const bench_daemon_opts *o);
/* SIGTERM, wait; returns the exit status or -1. */
int bench_daemon_stop(bench_daemon *d);
int bench_daemon_alive(bench_daemon *d);

/* utime + stime of PID in microseconds, or -1. */
int64_t bench_proc_cpu_us(pid_t pid);
/* What a process has used so far: CPU (utime + stime) and page faults
 * (minor + major); each -1 when pid is 0 or the process is gone. */
typedef struct bench_usage {
    int64_t cpu_us, faults;
} bench_usage;
bench_usage bench_proc_usage(pid_t pid);
/* Microseconds one page fault costs on this machine (proc.c); -1 unknown. */
double bench_fault_cost_us(void);
/* /proc/<pid>/schedstat of the process's main thread: ns it ran and (unless
 * wait_ns is NULL) ns it was runnable but waited for a CPU. 0, or -1 (both
 * left as they were). */
int bench_proc_sched_ns(pid_t pid, int64_t *run_ns, int64_t *wait_ns);
/* The 1-minute load average (how busy the shared machine was), or -1. */
double bench_loadavg(void);
/* Pins every thread of pid (0: this process) to CPUs first..last; 0 or
 * -errno. For --pin: Redis on a core of its own. */
int bench_pin(pid_t pid, int first, int last);
/* Every thread of pid under SCHED_FIFO at prio, reset on fork (Redis's
 * RDB and AOF children run SCHED_OTHER); 0 or -errno (EPERM without
 * CAP_SYS_NICE). For --rt: Redis and allocd never preempted by the load
 * generator, as a latency-minded deployment runs them (DEPLOYMENT.md). */
int bench_realtime(pid_t pid, int prio);

/* ------------------------------------------------------------- pipe -- */

/* Drives one non-blocking connection: keeps up to `depth` units of work in
 * flight, each unit being `replies` commands appended by append(); done()
 * gets the unit's last reply (error = any reply of the unit was an error).
 * due() (optional) paces the units: unit k is not sent before it returns a
 * proc_mono_us() value. Whenever the connection wakes -- a reply came, or
 * tick_us passed with nothing else to wake it -- every unit due by then is
 * sent in one write: a due unit waits at most one tick, and less when
 * replies come faster (the design's answers set how often). Stops early when *stop becomes non-zero or at
 * deadline_us (mono). Returns the units completed, or -1 on I/O error. */
typedef struct pipe_job {
    const bench_target *target;
    long n;
    int depth;
    int replies;
    void *ctx;
    void (*append)(void *ctx, redisContext *c, long k);
    void (*done)(void *ctx, long k, redisReply *last, int error);
    void (*each)(void *ctx, long k, int i, redisReply *r); /* optional: reply i of unit k, before done */
    int64_t (*due)(void *ctx, long k);
    int64_t tick_us;          /* paced: longest wait for the next due unit when no reply wakes us */
    volatile int *stop;
    int64_t deadline_us;
} pipe_job;

long pipe_run(const pipe_job *j, char *err, size_t errlen);

/* --------------------------------------------------------- workload -- */

/* SC_HOUSING is `rooms` with profiles and only_X / same_X rules
 * (tools/bench/housing.c); only --scenario housing-elig and
 * --profile-memory run it, never `all`. */
typedef enum {
    SC_STOCK, SC_STOCK_HOT, SC_ROOMS, SC_ROOMS_HOT, SC_GROUPS,
    SC_RESERVATIONS, SC_GROUPS_FORMED, SC_HOUSING, SC_COUNT
} scenario_id;

/* workload.housing: what a housing batch is written with. */
enum { HOUSING_PROFILES = 1, HOUSING_RULES = 2 };

enum { OPK_BUY, OPK_AUTO, OPK_GROUP, OPK_INVITE, OPK_ACCEPT };

#define WL_PREFS 3
#define WL_MEMBERS 4

typedef struct workload {
    scenario_id sc;
    long n;                   /* requests */
    long users;               /* distinct user ids drawn from */
    long items;               /* items or rooms */
    long units;               /* units per item / beds per room */
    long hot;                 /* rooms-hot: rooms everybody wants */
    int per_user;
    int hold_ms;
    uint64_t seed;
    long lanes;               /* groups-formed: requests i, i + lanes, i + 2 lanes, ...
                               * are one lane, pushed in order by one producer to
                               * one batch (producers x batches); 0 = 1 */
    int housing;              /* SC_HOUSING: HOUSING_PROFILES | HOUSING_RULES */
} workload;

typedef struct wl_req {
    int op;                   /* OPK_* */
    long user;                /* buy, auto: user index */
    long item;                /* buy */
    int n_prefs;
    long prefs[WL_PREFS];
    int n_members;            /* group: members are g<i>-<j>, user is g<i>-0;
                               * groups-formed: the group's size */
    int formed;               /* groups-formed: students s<user>-<j>, user = the group */
    int actor;                /* groups-formed: the student who sends it (0 = leader) */
} wl_req;

const char *scenario_name(scenario_id sc);
int scenario_parse(const char *name, scenario_id *out);
int scenario_is_room(scenario_id sc);
/* users, items, hold_ms <= 0: scenario defaults. */
void workload_init(workload *w, scenario_id sc, long n, long users, long items,
                   int hold_ms, uint64_t seed);
/* Request i of the mix; the same i always gives the same request. */
void workload_request(const workload *w, long i, wl_req *r);
/* Names: items i<k>, rooms R<k>, users u<k>, group members g<i>-<j>,
 * groups-formed students s<group>-<j> (member 0 names the sender). */
int wl_item_name(const workload *w, long k, char *buf, size_t len);
int wl_user_name(long i, const wl_req *r, int member, char *buf, size_t len);
/* The allocd request JSON of request i; returns its length. */
int workload_json(const workload *w, long i, char *buf, size_t len);
/* HSET every item's capacity (and attrs for rooms) into key, HSET-style. */
int workload_write_items(redisContext *c, const workload *w, const char *key,
                         int attrs);
/* housing.c: room k's attrs (with HOUSING_RULES: only_X / same_X on nine
 * rooms in ten), and every user's profile into key (P:{B}:profiles). */
int housing_attrs(const workload *w, long k, char *buf, size_t len);
int housing_write_profiles(redisContext *c, const workload *w, const char *key);

/* ------------------------------------------------------------ stats -- */

typedef struct latency {
    double *v;                /* milliseconds */
    size_t n, cap;
    int sorted;
} latency;

int latency_add(latency *l, double ms);
void latency_free(latency *l);
/* q in [0,1]; sorts on first use. */
double latency_quantile(latency *l, double q);

/* Outcome tallies shared by every design (atomically updated). */
typedef struct outcome {
    long granted, rejected, other, errors;
} outcome;

void outcome_note(outcome *o, const char *status, size_t len);

#endif
