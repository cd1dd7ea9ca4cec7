/* part_net.h -- the partition tests' network: namespaces, links, silent
 * drops and the delaying relay, driven from C.
 *
 * The commands themselves are in tests/partition/netns.sh (ip and tc);
 * this module runs them, starts processes inside a namespace (setns(2) of
 * the calling thread around the fork, so the child and everything it execs
 * live there), and removes the namespaces at exit and on SIGINT, SIGTERM,
 * SIGHUP and SIGABRT (a failed check, a timeout's TERM), after a sweep of
 * what a killed earlier run left. Test code: nothing of the daemon uses it.
 */
#ifndef ALLOCD_PART_NET_H
#define ALLOCD_PART_NET_H

#include <sys/types.h>

#include "proc/proc.h"

/* Redis's address seen from instance a and from instance b. */
#define PART_REDIS_A "169.254.10.1"
#define PART_REDIS_B "169.254.10.5"
#define PART_REDIS_PORT 6379
#define PART_RELAY_PORT 6380

typedef struct part_net {
    char run[32];          /* alpt<pid>x<n>: the namespaces are RUN-r, RUN-a, RUN-b */
    int up;
    pid_t relay[2];        /* relays for a and b (0: none) */
    char relay_ctl[2][320];
} part_net;

/* Empty when the network can be built here; else why not (not root, no
 * `ip`, no `tc`, no ifb, no clsact): the caller skips, loudly. */
void part_net_missing(char *why, size_t len);
/* Sweeps stale namespaces of this test, then makes the three namespaces.
 * Returns 0, or -1 with a message on stderr. */
int part_net_up(part_net *n);
/* Removes the namespaces (processes inside should be stopped first). */
void part_net_down(part_net *n);
/* side 0 = a, 1 = b. dir: "both", "to-redis", "from-redis". */
int part_net_cut(part_net *n, int side, const char *dir);
int part_net_heal(part_net *n, int side);
/* The allocd side's link down (up = 0) or up. */
int part_net_link(part_net *n, int side, int up);

/* Starts a redis-server in the Redis namespace, listening on the unix
 * socket of proc_redis (the test's own clients) and on TCP port
 * PART_REDIS_PORT of both veth addresses only; then sets the password
 * (before anything in the namespaces can connect). */
int part_net_redis_start(part_net *n, proc_redis *r, const char *password);
/* argv in namespace ns ("r", "a" or "b"), output to log; the pid or -1. */
pid_t part_net_spawn(part_net *n, const char *ns, char *const argv[], const char *log);
/* A relay in the Redis namespace for each side, on PART_RELAY_PORT of
 * that side's Redis address, to Redis; controls in dir. */
int part_net_relays_start(part_net *n, const char *dir, const char *log_dir);
/* Sets the faults of side's relay (side -1: both). */
int part_net_relay_set(part_net *n, int side, int delay_ms, int jitter_ms, int loss_pct, int stall);
void part_net_relays_stop(part_net *n);

/* redis-cli PING from side's namespace to Redis (port PART_REDIS_PORT, or
 * PART_RELAY_PORT through the relay), giving up after timeout_s: 1 when
 * PONG came back, 0 when not; *ms, unless NULL, is how long it took. The
 * way a run checks that a fault is in effect, not only requested. */
int part_net_ping(part_net *n, int side, int port, const char *password, int timeout_s, long *ms);

#endif
