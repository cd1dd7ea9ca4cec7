/* harness.c -- see harness.h. */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int harness_cluster_port(int start)
{
    for (int p = start; p < 29000; p++)
        if (port_free(p) && port_free(p + 10000)) return p;
    return -1;
}

int64_t harness_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void harness_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

/* Everything a test starts is remembered here, so that nothing outlives
 * the test binary: a failed assertion longjmps past the test's own stop
 * calls, and at exit whatever is still running is killed and every temp
 * dir removed. A child also dies with us if we crash (PR_SET_PDEATHSIG),
 * where atexit never runs; tests/run.sh checks that nothing survived. */
#define HARNESS_MAX_TRACKED 256
static pid_t tracked_pids[HARNESS_MAX_TRACKED];
static char *tracked_dirs[HARNESS_MAX_TRACKED];

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "harness: could not remove %s\n", dir);
}

static void cleanup_at_exit(void)
{
    for (int i = 0; i < HARNESS_MAX_TRACKED; i++) {
        if (tracked_pids[i] <= 0) continue;
        kill(tracked_pids[i], SIGKILL);
        waitpid(tracked_pids[i], NULL, 0);
        tracked_pids[i] = 0;
    }
    for (int i = 0; i < HARNESS_MAX_TRACKED; i++) {
        if (!tracked_dirs[i]) continue;
        if (!getenv("HARNESS_KEEP")) remove_dir(tracked_dirs[i]);
        free(tracked_dirs[i]);
        tracked_dirs[i] = NULL;
    }
}

static void track_init(void)
{
    static int registered;
    if (!registered) { atexit(cleanup_at_exit); registered = 1; }
}

static void track_pid(pid_t pid)
{
    track_init();
    for (int i = 0; i < HARNESS_MAX_TRACKED; i++)
        if (tracked_pids[i] <= 0) { tracked_pids[i] = pid; return; }
    fprintf(stderr, "harness: more than %d live children\n", HARNESS_MAX_TRACKED);
}

static void untrack_pid(pid_t pid)
{
    for (int i = 0; i < HARNESS_MAX_TRACKED; i++)
        if (tracked_pids[i] == pid) tracked_pids[i] = 0;
}

void harness_track_dir(const char *dir)
{
    track_init();
    for (int i = 0; i < HARNESS_MAX_TRACKED; i++) {
        if (tracked_dirs[i] && !strcmp(tracked_dirs[i], dir)) return;
    }
    for (int i = 0; i < HARNESS_MAX_TRACKED; i++)
        if (!tracked_dirs[i]) { tracked_dirs[i] = strdup(dir); return; }
}

static void untrack_dir(const char *dir)
{
    for (int i = 0; i < HARNESS_MAX_TRACKED; i++)
        if (tracked_dirs[i] && !strcmp(tracked_dirs[i], dir)) { free(tracked_dirs[i]); tracked_dirs[i] = NULL; }
}

pid_t harness_spawn(char *const argv[], const char *log_path)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid > 0) { track_pid(pid); return pid; }
    if (pid < 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);    /* the test died before prctl */
    int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
    execvp(argv[0], argv);
    _exit(127);
}

void harness_reap(pid_t pid, int sig)
{
    if (pid <= 0) return;
    kill(pid, sig);
    waitpid(pid, NULL, 0);
    untrack_pid(pid);
}

static int wait_socket(const char *sock, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        redisContext *c = redisConnectUnix(sock);
        if (c && !c->err) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS;
            if (r) freeReplyObject(r);
            redisFree(c);
            if (ok) return 0;
        } else if (c) redisFree(c);
        harness_sleep_ms(20);
    }
    return -1;
}

static int redis_spawn(harness_redis *r)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "exec redis-server --port 0 --unixsocket %s --unixsocketperm 700 "
             "--dir %s --save '' --daemonize no --logfile %s/redis.log %s",
             r->sock, r->dir, r->dir, r->extra);
    char *argv[] = { "sh", "-c", cmd, NULL };
    r->pid = harness_spawn(argv, NULL);
    if (r->pid < 0) return -1;
    if (wait_socket(r->sock, 10000) < 0) {
        fprintf(stderr, "harness: redis-server did not start (see %s/redis.log)\n", r->dir);
        return -1;
    }
    return 0;
}

int harness_redis_start(harness_redis *r, const char *extra_args)
{
    memset(r, 0, sizeof *r);
    const char *tmp = getenv("TMPDIR");
    snprintf(r->dir, sizeof r->dir, "%s/allocd-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(r->dir)) return -1;
    harness_track_dir(r->dir);
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    snprintf(r->url, sizeof r->url, "unix://%s", r->sock);
    snprintf(r->extra, sizeof r->extra, "%s", extra_args ? extra_args : "");
    return redis_spawn(r);
}

int harness_redis_restart(harness_redis *r)
{
    harness_reap(r->pid, SIGTERM);
    r->pid = 0;
    return redis_spawn(r);
}

void harness_redis_kill(harness_redis *r)
{
    harness_reap(r->pid, SIGKILL);
    r->pid = 0;
    unlink(r->sock);
}

void harness_redis_stop(harness_redis *r)
{
    harness_reap(r->pid, SIGTERM);
    r->pid = 0;
    if (r->dir[0] && !getenv("HARNESS_KEEP")) {
        remove_dir(r->dir);
        untrack_dir(r->dir);
    }
}

redisContext *harness_redis_connect(const harness_redis *r)
{
    redisContext *c = redisConnectUnix(r->sock);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    return c;
}

static const char *allocd_bin(void)
{
    static char path[512];
    const char *bin = getenv("ALLOCD_BIN");
    if (bin && *bin) return bin;
    const char *build = getenv("BUILD");
    snprintf(path, sizeof path, "%s/allocd", build && *build ? build : "build");
    return path;
}

int harness_allocd_start(harness_allocd *d, const harness_redis *r,
                         const char *extra_conf)
{
    static int counter;
    memset(d, 0, sizeof *d);
    counter++;
    snprintf(d->conf, sizeof d->conf, "%s/allocd-%d.conf", r->dir, counter);
    snprintf(d->log, sizeof d->log, "%s/allocd-%d.log", r->dir, counter);
    FILE *f = fopen(d->conf, "w");
    if (!f) return -1;
    /* an explicit redis setting in extra_conf (a cluster seed) wins */
    if (!extra_conf || !strstr(extra_conf, "redis ="))
        fprintf(f, "redis = \"%s\";\n", r->url);
    /* so is an explicit instance name (a daemon restarted under its name) */
    const char *named = extra_conf ? strstr(extra_conf, "instance = \"") : NULL;
    if (named) {
        named += strlen("instance = \"");
        snprintf(d->instance, sizeof d->instance, "%.*s", (int)strcspn(named, "\""), named);
    } else {
        snprintf(d->instance, sizeof d->instance, "test-%d", counter);
        fprintf(f, "instance = \"%s\";\n", d->instance);
    }
    fprintf(f, "prefix = \"alloc\";\nlog_level = \"debug\";\n%s\n",
            extra_conf ? extra_conf : "");
    fclose(f);
    char *argv[] = { (char *)allocd_bin(), "-c", d->conf, NULL };
    d->pid = harness_spawn(argv, d->log);
    return d->pid > 0 ? 0 : -1;
}

int harness_allocd_alive(harness_allocd *d)
{
    if (d->pid <= 0) return 0;
    int st;
    pid_t p = waitpid(d->pid, &st, WNOHANG);
    if (p == d->pid) { untrack_pid(d->pid); d->pid = 0; return 0; }
    return 1;
}

int harness_allocd_stop(harness_allocd *d)
{
    if (d->pid <= 0) return -1;
    kill(d->pid, SIGTERM);
    for (int waited = 0; waited < 20000; waited += 10) {
        int st;
        pid_t p = waitpid(d->pid, &st, WNOHANG);
        if (p == d->pid) {
            untrack_pid(d->pid);
            d->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        harness_sleep_ms(10);
    }
    harness_reap(d->pid, SIGKILL);
    d->pid = 0;
    return -1;
}

void harness_allocd_kill(harness_allocd *d)
{
    harness_reap(d->pid, SIGKILL);
    d->pid = 0;
}

void harness_allocd_dump_log(const harness_allocd *d)
{
    FILE *f = fopen(d->log, "r");
    if (!f) return;
    char line[1024];
    fprintf(stderr, "---- %s\n", d->log);
    while (fgets(line, sizeof line, f)) fputs(line, stderr);
    fclose(f);
}

long long harness_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER) v = r->integer;
    else if (r && r->type == REDIS_REPLY_STRING) v = strtoll(r->str, NULL, 10);
    else if (r && r->type == REDIS_REPLY_NIL) v = 0;
    if (r) freeReplyObject(r);
    return v;
}

char *harness_str(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    char *s = NULL;
    if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
        s = strndup(r->str, r->len);
    if (r) freeReplyObject(r);
    return s;
}

long long harness_wait_hlen(redisContext *c, const char *key, long long n,
                            int timeout_ms)
{
    long long len = -1;
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        len = harness_int(c, "HLEN %s", key);
        if (len >= n) break;
        harness_sleep_ms(10);
    }
    return len;
}

char *harness_wait_hget(redisContext *c, const char *key, const char *field,
                        int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        char *v = harness_str(c, "HGET %s %s", key, field);
        if (v) return v;
        harness_sleep_ms(10);
    }
    return NULL;
}
