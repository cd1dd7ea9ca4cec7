/* proc.h -- the processes that the tests and allocbench start, in one place.
 *
 * The integration harness (tests/harness.c), the chaos runs and the
 * benchmark (tools/bench/) all start a private redis-server and the real
 * allocd, wait for them, stop them and clean up after them. This module is
 * the one copy of that: fork+exec with output to a log, a redis-server on a
 * unix socket in a fresh temp dir (PING-ed until it answers), stop and reap,
 * temp dirs, free loopback ports, the clock, and the reading of an integer
 * reply. It is test and tool code: the daemon never starts a process, and
 * nothing under daemon/ may use it.
 *
 * Nothing outlives the program that uses it. Every child is remembered and
 * every temp dir too: at exit (atexit) whatever is still running is killed
 * (SIGKILL) and reaped and every temp dir removed -- a failed cmocka
 * assertion longjmps past a test's own stop calls, an error path of the
 * bench returns early. A child also gets PR_SET_PDEATHSIG(SIGKILL), so it
 * dies with its parent where atexit never runs (a crash, a signal).
 *
 * Limits: the tables are not locked, so start and stop processes from one
 * thread; and the death signal follows the *thread* that forked, so that
 * should be one that lives as long as the children (the main thread).
 */
#ifndef ALLOCD_TOOLS_PROC_H
#define ALLOCD_TOOLS_PROC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

/* ------------------------------------------------------------- clock -- */

int64_t proc_wall_us(void);             /* CLOCK_REALTIME, microseconds */
int64_t proc_mono_us(void);             /* CLOCK_MONOTONIC, microseconds */
/* CLOCK_REALTIME in milliseconds: what allocd writes into Redis
 * (expires_at, ...) compares to this. */
int64_t proc_now_ms(void);
void proc_sleep_us(int64_t us);         /* resumes after EINTR */
void proc_sleep_ms(int ms);

/* ---------------------------------------------------------- children -- */

/* Starts argv (PATH searched) with stdout and stderr appended to log_path
 * (or /dev/null); remembered until reaped. Returns the pid, or -1. */
pid_t proc_spawn(char *const argv[], const char *log_path);
/* Runs argv (PATH searched) to its end with stdout and stderr captured:
 * *out gets them, malloc'd and NUL-terminated (the caller frees). Returns
 * the exit status (128 + signal when a signal ended it), or -1 when it
 * could not be run (*out is then NULL). */
int proc_run_capture(char *const argv[], char **out);
/* Sends sig (unless 0), waits for the child and forgets it. pid <= 0: no-op. */
void proc_reap(pid_t pid, int sig);
/* Whether the child has exited, without waiting: 1 (reaped and forgotten;
 * *status, if not NULL, gets the wait status), 0 (still running, or not a
 * child of ours). */
int proc_exited(pid_t pid, int *status);
/* For a pid kept in a struct (0 = none): whether *pid still runs; once it
 * has exited it is reaped and *pid becomes 0. */
int proc_alive(pid_t *pid);
/* SIGTERM to *pid, then waits up to timeout_ms: the exit status (128 +
 * signal when a signal ended it), or -1 after a SIGKILL when it did not
 * exit in time (or *pid <= 0). *pid becomes 0. */
int proc_stop(pid_t *pid, int timeout_ms);
/* The same with sig for SIGTERM, for a program whose orderly stop is
 * another signal (PostgreSQL's fast shutdown is SIGINT). */
int proc_stop_signal(pid_t *pid, int sig, int timeout_ms);

/* ----------------------------------------------------- /proc/PID -- */

/* A kB line of /proc/PID/status ("VmRSS", "VmHWM"), -1 if not there. */
long proc_status_kb(pid_t pid, const char *field);
/* /proc/PID/stat's page faults (minflt + majflt) and CPU ticks (utime +
 * stime); 0, or -1 when the process is gone. */
int proc_stat_usage(pid_t pid, unsigned long long *faults, unsigned long long *ticks);
/* Whether pid runs an AddressSanitizer build (libasan is mapped): its
 * allocator keeps freed memory in quarantine, so its RSS and faults say
 * nothing of the heap's. */
int proc_is_asan(pid_t pid);

/* --------------------------------------------------------- temp dirs -- */

/* Makes $TMPDIR/PREFIX-XXXXXX (/tmp without TMPDIR) into dir and remembers
 * it. Returns 0, or -1 (dir is then ""). */
int proc_temp_dir(char *dir, size_t len, const char *prefix);
/* Remembers a dir to remove at exit (once, however often it is named). */
void proc_track_dir(const char *dir);
/* Removes dir and everything in it now (unless kept) and forgets it. */
void proc_remove_dir(const char *dir);
/* Keeps the temp dirs -- neither proc_remove_dir nor the exit removes
 * them -- whenever the environment variable `name` is set (HARNESS_KEEP,
 * ALLOCBENCH_KEEP: the user's way to read the logs afterwards). NULL: never. */
void proc_keep_dirs_env(const char *name);

/* ------------------------------------------------------- redis-server -- */

/* A private redis-server: unix socket (permissions 700) in its own temp
 * dir, no TCP port unless extra names one, no RDB snapshots, its log in
 * DIR/redis.log. */
typedef struct proc_redis {
    pid_t pid;
    char dir[256];     /* temp dir, removed by proc_redis_stop */
    char sock[320];
    char url[340];     /* unix://... */
    char extra[512];   /* extra redis-server arguments, kept for restarts */
} proc_redis;

/* prefix: of the temp dir's name; extra: more redis-server arguments, split
 * by the shell and placed last so they override ("--port 7000
 * --cluster-enabled yes", "--appendonly yes"), or NULL. Returns 0 once it
 * answers PING (10 s at the most), or -1. */
int proc_redis_start(proc_redis *r, const char *prefix, const char *extra);
/* SIGTERM and a new one on the same dir, socket and arguments (the data is
 * kept when persistence is on). */
int proc_redis_restart(proc_redis *r);
/* The same, with what it persisted removed first: a new, empty Redis (its
 * log and the other files of the dir stay). */
int proc_redis_restart_empty(proc_redis *r);
void proc_redis_kill(proc_redis *r);            /* SIGKILL, keeps the dir */
void proc_redis_stop(proc_redis *r);            /* SIGTERM, removes the dir */
redisContext *proc_redis_connect(const proc_redis *r);   /* blocking, or NULL */

/* A loopback TCP port >= start that is free together with port + 10000 (a
 * Redis Cluster node's bus port), or -1. */
int proc_cluster_port(int start);

/* -------------------------------------------------------- postgresql -- */

/* A private PostgreSQL server (Debian's postgresql package): initdb into a
 * fresh temp dir, then `postgres` on a unix socket in that dir, no TCP
 * (listen_addresses ''), trust authentication, fsync off (test data).
 * PostgreSQL refuses to run as root: when we are root, initdb and postgres
 * run as the `postgres` user (created by the package) or else `nobody`,
 * switched to in the child. That user must reach the data dir, so as root
 * the temp dir goes under /tmp when an ancestor of $TMPDIR is closed to
 * others (tests/run.sh makes 0700 dirs); it is removed all the same.
 * The binaries come from /usr/lib/postgresql/<newest>/bin unless
 * $ALLOCD_PG_BIN names their dir. */
typedef struct proc_pg {
    pid_t pid;             /* the postmaster */
    char dir[256];         /* temp dir: data in DIR/data, socket in DIR */
    char bin[256];         /* dir of initdb and postgres */
    char conninfo[400];    /* "host=DIR port=5432 dbname=postgres user=alloc" */
    uid_t uid;             /* who runs it (ours unless we are root) */
    gid_t gid;
} proc_pg;

/* Initializes and starts it; returns 0 once it accepts connections (30 s
 * at the most), or -1 with a message on stderr. */
int proc_pg_start(proc_pg *p, const char *prefix);
/* Fast shutdown (SIGINT) and a new postmaster on the same data. */
int proc_pg_restart(proc_pg *p);
/* SIGKILL of the postmaster, keeps the dir; its backends end on their own
 * once they notice (PostgreSQL checks for a dead postmaster). */
void proc_pg_kill(proc_pg *p);
/* Fast shutdown, waits for it, removes the dir. */
void proc_pg_stop(proc_pg *p);

/* ----------------------------------------------------- redis replies -- */

/* The integer a reply stands for: an integer, a numeric string (HGET), 0
 * for nil, -1 for anything else (an error, no reply). Frees r. */
long long proc_reply_int(redisReply *r);
/* Runs a command and returns proc_reply_int of its reply. */
long long proc_int(redisContext *c, const char *fmt, ...);
long long proc_vint(redisContext *c, const char *fmt, va_list ap);

#endif
