/* harness.h -- real processes for integration tests.
 *
 * Starts a private redis-server on a unix socket in a fresh temp directory
 * (no TCP port, so parallel runs never collide) and the real allocd binary
 * against it, and gives the tests small polling helpers. Nothing is mocked:
 * these tests see exactly what a user sees.
 */
#ifndef ALLOCD_TEST_HARNESS_H
#define ALLOCD_TEST_HARNESS_H

#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

#include "proc/proc.h"

/* The processes themselves are started by the module the benchmark uses too
 * (tools/proc/proc.h); the harness names them for the tests. A harness_redis
 * is a proc_redis: pid, dir (its temp dir, removed by harness_redis_stop),
 * sock, url ("unix://...") and extra (the redis-server arguments, kept for
 * restarts). Temp dirs are kept when HARNESS_KEEP is set. */
typedef proc_redis harness_redis;

/* extra_args: extra redis-server arguments ("--appendonly yes ..."), or NULL. */
int harness_redis_start(harness_redis *r, const char *extra_args);
/* Restart on the same dir and socket (data kept if persistence is on). */
int harness_redis_restart(harness_redis *r);
void harness_redis_kill(harness_redis *r);          /* SIGKILL, keeps dir */
void harness_redis_stop(harness_redis *r);          /* stop and remove dir */
redisContext *harness_redis_connect(const harness_redis *r);

typedef struct harness_allocd {
    pid_t pid;
    char conf[400];
    char log[400];
    char instance[64]; /* its instance name ("test-N" unless the config names one) */
} harness_allocd;

/* Writes a config into the redis dir (redis URL, prefix "alloc", instance
 * "test-N" with N counting starts, plus the extra libconfig lines, which may
 * set redis or instance themselves) and starts allocd with it; stderr goes
 * to a log file in that dir. The binary is $ALLOCD_BIN or $BUILD/allocd.
 * A test that restarts "the same daemon" passes instance = "..." so the
 * restarted process takes over its own leases at once. The config sets
 * heap_reserve_mb = 0 unless the extra lines name heap_reserve_mb: a
 * benchmark that measures allocd's default passes HARNESS_HEAP_DEFAULT. */
#define HARNESS_HEAP_DEFAULT "# heap_reserve_mb: allocd's default\n"
int harness_allocd_start(harness_allocd *d, const harness_redis *r,
                         const char *extra_conf);
/* The build tree the tests run from: $BUILD, or "build" when it is unset or
 * empty. allocd, allocctl and the other tools are found there. */
const char *harness_build_dir(void);
/* The allocd harness_allocd_start runs: $ALLOCD_BIN, else <build dir>/allocd. */
const char *harness_allocd_bin(void);
/* <build dir>/allocctl. */
const char *harness_allocctl_bin(void);
/* SIGTERM and wait (up to 20 s); returns the exit status, -1 on timeout. */
int harness_allocd_stop(harness_allocd *d);
void harness_allocd_kill(harness_allocd *d);        /* SIGKILL and reap */
int harness_allocd_alive(harness_allocd *d);
/* Prints the daemon's log to stderr (for failing tests). */
void harness_allocd_dump_log(const harness_allocd *d);

/* A loopback TCP port >= start that is free together with port + 10000
 * (a Redis Cluster node's bus port), or -1. */
int harness_cluster_port(int start);

/* Starts argv (PATH searched) with stdout and stderr appended to log_path
 * (or /dev/null). Every child is remembered: whatever is still running when
 * the test binary exits -- a failed assertion skips the test's own stop
 * calls -- is killed then, and a child dies with the test if it crashes. */
pid_t harness_spawn(char *const argv[], const char *log_path);
/* Sends sig, waits for the child and forgets it. */
void harness_reap(pid_t pid, int sig);
/* A temp dir removed at exit unless a stop removed it first. */
void harness_track_dir(const char *dir);

int64_t harness_now_ms(void);
void harness_sleep_ms(int ms);

/* A command's integer reply is proc_int (tools/proc/proc.h). */
/* Runs a command and returns a malloc'd string reply (or NULL). */
char *harness_str(redisContext *c, const char *fmt, ...);
/* Polls until HLEN key >= n or timeout; returns the last HLEN. */
long long harness_wait_hlen(redisContext *c, const char *key, long long n,
                            int timeout_ms);
/* Polls until HGET key field exists; returns malloc'd value or NULL. */
char *harness_wait_hget(redisContext *c, const char *key, const char *field,
                        int timeout_ms);

#endif
