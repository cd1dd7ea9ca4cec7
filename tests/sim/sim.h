/* sim.h -- the deterministic simulator's world: one event queue, one
 * simulated clock, one seeded random stream, the Redis model and the
 * simulated network between it and the allocd instances.
 *
 * The real worker code (daemon/worker, daemon/core, daemon/wire) is linked
 * unchanged; the simulator replaces, at link time, what it would take from
 * the machine: libuv's timers (sim_loop.c), the clocks of base/clock.h and
 * base/random.h (sim_loop.c), and the Redis connections of
 * redis/redis_conn.h (sim_net.c) and redis/redis_router.h (sim_router.c:
 * the real one against a cluster). Nothing here is
 * threaded and nothing reads a real clock, so one seed is one run.
 */
#ifndef ALLOCD_SIM_H
#define ALLOCD_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "sim/sim_cluster.h"
#include "sim/sim_redis.h"

#define SIM_MAX_INST 4
#define SIM_MAX_SRV 6   /* redis-servers: the first master, then one per switch */

typedef void (*sim_fn)(void *a, void *b, uint64_t x);

/* Faults, each selectable (--faults=...) and drawn from the seed. */
enum {
    SF_RESET = 1 << 0,        /* connection resets at any step */
    SF_LOST_REPLY = 1 << 1,   /* a reply lost after the server ran it (EXEC: result unknown) */
    SF_DELAY = 1 << 2,        /* a reply delayed past the lease */
    SF_RESTART = 1 << 3,      /* Redis restarts keeping every write (appendfsync always) */
    SF_AOF_LOSS = 1 << 4,     /* Redis restarts losing up to a second (AOF everysec) */
    SF_FAILOVER = 1 << 5,     /* a replica lacking the tail is promoted */
    SF_CLOCK = 1 << 6,        /* an instance's wall clock jumps */
    SF_PAUSE = 1 << 7,        /* an instance stops (SIGSTOP, a GC pause) and wakes up */
    SF_CRASH = 1 << 8,        /* an instance is killed (kill -9) and started again */
    SF_OOM = 1 << 9,          /* Redis out of memory a while: -OOM refusals */
    SF_SWITCH = 1 << 10,      /* Sentinel switch-master: a replica on another address is promoted,
                                 the old master partitioned, still taking writes */
    SF_ALL = (1 << 11) - 1,
    /* Redis Cluster: three masters sharing the model's keyspace (sim_cluster.h),
     * the real redis_router.c, and slots migrating mid-batch. Not in `all`:
     * it replaces the one master the restart, aof, failover and switch
     * faults act on, which it leaves out. */
    SF_CLUSTER = 1 << 11,
};

typedef struct sim_inst {
    int id;
    int64_t wall_offset_ms;   /* its wall clock minus the true time */
    uint64_t paused_until;    /* ns: its events wait until then */
    int boots;                /* restarts after a crash: a new pid each */
} sim_inst;

/* One redis-server. Its connections die when gen changes (a restart, a
 * demotion); while down, connects fail. */
typedef struct sim_server {
    simr *r;
    uint64_t gen;
    int down;
} sim_server;

typedef struct sim_world {
    uint64_t seed;
    uint64_t rng;
    uint64_t now;             /* ns since the start */
    int64_t epoch_ms;         /* wall time at the start */
    int cur;                  /* the instance whose code runs, -1 = none */
    sim_inst inst[SIM_MAX_INST];
    int ninst;
    unsigned faults;
    int faults_on;            /* 0 while draining at the end */
    double intensity;         /* 0.1..3: scales every fault's rate, drawn per seed */
    /* the servers; redis is the master (srv[master].r), where producers,
     * the archiver and the checks look */
    simr *redis;
    sim_server srv[SIM_MAX_SRV];
    int nsrv, master;
    int inst_master[SIM_MAX_INST];   /* the master each instance's router names (Sentinel) */
    int replica_forget_ms;           /* the instances' config (sim_net.c's WAIT check) */
    simc *cluster;                   /* Redis Cluster: srv[i] is node i (sim_cluster.h), else NULL */
    /* counters for the report */
    uint64_t events, resets, lost_replies, delays, restarts, clock_jumps, pauses;
    uint64_t late_runs;
    uint64_t crashes;       /* commands the server ran after their client gave up */
    uint64_t ooms;            /* spells of Redis out of memory */
    uint64_t taken_back;      /* results a restart lost that a poller could have seen */
    int verbose;
    int failed;
    char failure[1024];
} sim_world;

extern sim_world *sim_w;   /* the one world (the replaced libuv has no other way in) */

/* Events: fn(a, b, x) at time t (ns), for instance inst (-1: the server
 * or the world). A paused instance's events wait. */
void sim_at(uint64_t t, int inst, sim_fn fn, void *a, void *b, uint64_t x);
int sim_step(void);   /* one event; 0 when none is left */
/* Ends an instance's pause now; what it held runs in order. */
void sim_resume(int inst);
uint64_t sim_next_time(void);
void sim_queue_clear(void);

uint64_t sim_rand(void);
uint64_t sim_below(uint64_t n);          /* [0, n) */
int sim_chance(double p);
int64_t sim_server_ms(void);

/* sim_net.c: the simulated network. */
void sim_net_reset_server(int srv, const char *why);   /* every connection to srv drops */
/* Sentinel told instance inst's router that the master is now
 * inst_master[inst]: its connection moves, its workers hear of it. */
void sim_net_master_moved(int inst);
void sim_net_reset_random(void);            /* one connection drops */
void sim_net_retry_blocked(void);           /* after any write on the server */
int sim_net_live_conns(void);
void sim_net_free_all(void);
void sim_router_free_all(void);             /* sim_router.c, from sim_net_free_all */

void sim_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
