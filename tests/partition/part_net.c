/* part_net.c -- the partition tests' network (part_net.h): netns.sh run
 * from C, processes started inside a namespace, the relays, and the
 * cleanup that must happen however the test ends. */
#include "partition/part_net.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define PART_SCRIPT "tests/partition/netns.sh"

/* What the exit and signal handlers remove: the namespaces of the one run
 * that is up (a test runs them one after another). */
static char part_net_live[32];

/* fork, exec and wait only: safe in a signal handler. */
static void part_net__down_now(void)
{
    if (!part_net_live[0]) return;
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = { "sh", PART_SCRIPT, "down", part_net_live, NULL };
        execvp("sh", argv);
        _exit(127);
    }
    if (pid > 0) while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    part_net_live[0] = '\0';
}

static void part_net__on_signal(int sig)
{
    part_net__down_now();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void part_net__at_exit(void) { part_net__down_now(); }

/* Again for every run: cmocka puts its own SIGSEGV handler back after
 * each test. */
static void part_net__handlers(void)
{
    static int registered;
    if (!registered) atexit(part_net__at_exit);
    registered = 1;
    int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGABRT, SIGSEGV };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], part_net__on_signal);
}

/* sh netns.sh args...; 0 when it exits 0 (its output is printed if not). */
static int part_net__script(const char *a1, const char *a2, const char *a3, const char *a4)
{
    char *argv[] = { "sh", PART_SCRIPT, (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL };
    char *out = NULL;
    int rc = proc_run_capture(argv, &out);
    if (rc != 0 || (out && *out && strcmp(a1, "sweep")))
        fprintf(stderr, "netns.sh %s %s: exit %d: %s", a1, a2 ? a2 : "", rc, out ? out : "\n");
    else if (out && *out)
        fputs(out, stderr);
    free(out);
    return rc == 0 ? 0 : -1;
}

void part_net_missing(char *why, size_t len)
{
    why[0] = '\0';
    if (geteuid() != 0) { snprintf(why, len, "not root (network namespaces need CAP_NET_ADMIN)"); return; }
    if (system("command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1") != 0) {
        snprintf(why, len, "no `ip` or `tc` (apt-get install iproute2)");
        return;
    }
    if (system("command -v redis-cli >/dev/null 2>&1") != 0) {
        snprintf(why, len, "no redis-cli (apt-get install redis-tools)");
        return;
    }
    if (access(PART_SCRIPT, R_OK) != 0) { snprintf(why, len, "%s not found (run from the repository root)", PART_SCRIPT); return; }
    /* ifb, clsact and mirred, tried in a namespace of our own */
    char run[32], *out = NULL;
    snprintf(run, sizeof run, "alpt%dx0", (int)getpid());
    char *argv[] = { "sh", PART_SCRIPT, "probe", run, NULL };
    if (proc_run_capture(argv, &out) != 0)
        snprintf(why, len, "%s (tests/partition/netns.sh probe)", out && *out ? strtok(out, "\n") : "netns.sh failed");
    free(out);
}

int part_net_up(part_net *n)
{
    static int counter;
    memset(n, 0, sizeof *n);
    snprintf(n->run, sizeof n->run, "alpt%dx%d", (int)getpid(), ++counter);
    part_net__handlers();
    part_net__script("sweep", NULL, NULL, NULL);
    snprintf(part_net_live, sizeof part_net_live, "%s", n->run);
    if (part_net__script("up", n->run, NULL, NULL) < 0) {
        part_net__down_now();
        return -1;
    }
    n->up = 1;
    return 0;
}

void part_net_down(part_net *n)
{
    part_net_relays_stop(n);
    if (n->up) part_net__down_now();
    n->up = 0;
}

int part_net_cut(part_net *n, int side, const char *dir)
{
    return part_net__script("cut", n->run, side ? "b" : "a", dir);
}

int part_net_heal(part_net *n, int side)
{
    return part_net__script("heal", n->run, side ? "b" : "a", NULL);
}

int part_net_link(part_net *n, int side, int up)
{
    return part_net__script("link", n->run, side ? "b" : "a", up ? "up" : "down");
}

/* Moves the calling thread into namespace RUN-ns; *home keeps the way
 * back (part_net__leave). Children forked meanwhile live in RUN-ns. */
static int part_net__enter(const part_net *n, const char *ns, int *home)
{
    char path[96];
    snprintf(path, sizeof path, "/var/run/netns/%s-%s", n->run, ns);
    int target = open(path, O_RDONLY | O_CLOEXEC);
    *home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int ok = target >= 0 && *home >= 0 && setns(target, CLONE_NEWNET) == 0;
    if (!ok) fprintf(stderr, "part_net: cannot enter %s: %s\n", path, strerror(errno));
    if (target >= 0) close(target);
    if (!ok && *home >= 0) close(*home);
    return ok ? 0 : -1;
}

static void part_net__leave(int home)
{
    if (setns(home, CLONE_NEWNET) != 0) {
        fprintf(stderr, "part_net: cannot return to our namespace: %s\n", strerror(errno));
        abort();
    }
    close(home);
}

pid_t part_net_spawn(part_net *n, const char *ns, char *const argv[], const char *log)
{
    int home;
    if (part_net__enter(n, ns, &home) < 0) return -1;
    pid_t pid = proc_spawn(argv, log);
    part_net__leave(home);
    return pid;
}

int part_net_redis_start(part_net *n, proc_redis *r, const char *password)
{
    char extra[160];
    snprintf(extra, sizeof extra, "--port %d --bind %s %s", PART_REDIS_PORT, PART_REDIS_A, PART_REDIS_B);
    int home;
    if (part_net__enter(n, "r", &home) < 0) return -1;
    int rc = proc_redis_start(r, "part-redis", extra);
    part_net__leave(home);
    if (rc < 0) return -1;
    redisContext *c = proc_redis_connect(r);
    redisReply *rep = c ? redisCommand(c, "CONFIG SET requirepass %s", password) : NULL;
    rc = rep && rep->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (rep) freeReplyObject(rep);
    if (c) redisFree(c);
    return rc;
}

int part_net_relays_start(part_net *n, const char *dir, const char *log_dir)
{
    const char *addr[2] = { PART_REDIS_A, PART_REDIS_B };
    for (int side = 0; side < 2; side++) {
        char listen[48], target[48], bin[300], log[320];
        snprintf(listen, sizeof listen, "%s:%d", addr[side], PART_RELAY_PORT);
        snprintf(target, sizeof target, "%s:%d", addr[side], PART_REDIS_PORT);
        snprintf(bin, sizeof bin, "%s/tests/partition/netrelay", harness_build_dir());
        snprintf(n->relay_ctl[side], sizeof n->relay_ctl[side], "%s/relay-%c.ctl", dir, 'a' + side);
        snprintf(log, sizeof log, "%s/relay-%c.log", log_dir, 'a' + side);
        FILE *f = fopen(n->relay_ctl[side], "w");
        if (!f) return -1;
        fputs("0 0 0 0\n", f);
        fclose(f);
        char *argv[] = { bin, listen, target, n->relay_ctl[side], NULL };
        n->relay[side] = part_net_spawn(n, "r", argv, log);
        if (n->relay[side] <= 0) { n->relay[side] = 0; return -1; }
    }
    proc_sleep_ms(100);       /* listening before anyone connects */
    return 0;
}

int part_net_relay_set(part_net *n, int side, int delay_ms, int jitter_ms, int loss_pct, int stall)
{
    for (int s = 0; s < 2; s++) {
        if ((side >= 0 && s != side) || !n->relay[s]) continue;
        FILE *f = fopen(n->relay_ctl[s], "w");
        if (!f) return -1;
        fprintf(f, "%d %d %d %d\n", delay_ms, jitter_ms, loss_pct, stall);
        fclose(f);
        kill(n->relay[s], SIGHUP);
    }
    return 0;
}

void part_net_relays_stop(part_net *n)
{
    for (int s = 0; s < 2; s++) {
        if (n->relay[s] > 0) proc_stop(&n->relay[s], 3000);
        n->relay[s] = 0;
    }
}

int part_net_ping(part_net *n, int side, int port, const char *password, int timeout_s, long *ms)
{
    char ns[48], secs[16], ports[16];
    snprintf(ns, sizeof ns, "%s-%c", n->run, side ? 'b' : 'a');
    snprintf(secs, sizeof secs, "%d", timeout_s);
    snprintf(ports, sizeof ports, "%d", port);
    char *argv[] = { "ip", "netns", "exec", ns, "timeout", secs, "redis-cli", "-h",
                     side ? PART_REDIS_B : PART_REDIS_A, "-p", ports, "-a", (char *)password,
                     "--no-auth-warning", "PING", NULL };
    char *out = NULL;
    int64_t t0 = proc_mono_us();
    int rc = proc_run_capture(argv, &out);
    if (ms) *ms = (long)((proc_mono_us() - t0) / 1000);
    int pong = rc == 0 && out && !strncmp(out, "PONG", 4);
    free(out);
    return pong;
}
