/* harness.c -- see harness.h. */
#include "harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The processes, temp dirs and their cleanup at exit are tools/proc/proc.c's
 * (shared with allocbench); what is the harness's own is the config it
 * writes for allocd, the test-N instance names and the polling helpers. */

/* HARNESS_KEEP=1 keeps the temp dirs (redis.log, the allocd logs) for a
 * look after the run; set before main, so before anything is removed. */
__attribute__((constructor)) static void harness_keep_env(void)
{
    proc_keep_dirs_env("HARNESS_KEEP");
}

/* A test writes with hiredis to servers it kills, and a Sentinel failover
 * has the demoted master drop its clients: a write to such a socket must
 * fail with EPIPE, not end the test by SIGPIPE (test_sentinel did, rc 141,
 * once in a run). Caught, not ignored: an ignored signal stays ignored
 * across exec, and the processes a test starts (allocctl in a pipeline)
 * keep the default. */
static void on_sigpipe(int sig) { (void)sig; }

__attribute__((constructor)) static void harness_catch_sigpipe(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigpipe;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPIPE, &sa, NULL);
}

int harness_cluster_port(int start) { return proc_cluster_port(start); }
int64_t harness_now_ms(void) { return proc_now_ms(); }
void harness_sleep_ms(int ms) { proc_sleep_ms(ms); }
pid_t harness_spawn(char *const argv[], const char *log_path) { return proc_spawn(argv, log_path); }
void harness_reap(pid_t pid, int sig) { proc_reap(pid, sig); }
void harness_track_dir(const char *dir) { proc_track_dir(dir); }

int harness_redis_start(harness_redis *r, const char *extra_args)
{
    return proc_redis_start(r, "allocd-test", extra_args);
}

int harness_redis_restart(harness_redis *r) { return proc_redis_restart(r); }
void harness_redis_kill(harness_redis *r) { proc_redis_kill(r); }
void harness_redis_stop(harness_redis *r) { proc_redis_stop(r); }
redisContext *harness_redis_connect(const harness_redis *r) { return proc_redis_connect(r); }

const char *harness_build_dir(void)
{
    const char *build = getenv("BUILD");
    return build && *build ? build : "build";
}

const char *harness_allocd_bin(void)
{
    static char path[512];
    const char *bin = getenv("ALLOCD_BIN");
    if (bin && *bin) return bin;
    snprintf(path, sizeof path, "%s/allocd", harness_build_dir());
    return path;
}

const char *harness_allocctl_bin(void)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/allocctl", harness_build_dir());
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
    /* a daemon of the tests serves a few requests and is started hundreds
     * of times: touching the default 64 MB each time would cost the suite
     * about a quarter of a second a start on a slow VM. The reserve has its
     * own test (test_daemon_ops) and runs under allocbench (test_bench). */
    if (!extra_conf || !strstr(extra_conf, "heap_reserve_mb"))
        fprintf(f, "heap_reserve_mb = 0;\n");
    fprintf(f, "prefix = \"alloc\";\nlog_level = \"debug\";\n%s\n",
            extra_conf ? extra_conf : "");
    fclose(f);
    char *argv[] = { (char *)harness_allocd_bin(), "-c", d->conf, NULL };
    d->pid = proc_spawn(argv, d->log);
    return d->pid > 0 ? 0 : -1;
}

int harness_allocd_alive(harness_allocd *d) { return proc_alive(&d->pid); }
int harness_allocd_stop(harness_allocd *d) { return proc_stop(&d->pid, 20000); }

void harness_allocd_kill(harness_allocd *d)
{
    proc_reap(d->pid, SIGKILL);
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
        len = proc_int(c, "HLEN %s", key);
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
