/* proc.c -- the processes allocbench starts and watches (see bench.h).
 *
 * A private redis-server (unix socket in a fresh temp dir, no RDB, no AOF)
 * so the measurement is not disturbed by anyone else's keys, and allocd
 * with a config written next to it. /proc gives each process's memory peak
 * (VmHWM) and CPU time, which is how the report splits the cost of a run
 * between Redis, allocd and the load generator on a shared 2-core machine.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t spawn(char *const argv[], const char *log_path)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
    execvp(argv[0], argv);
    _exit(127);
}

static int wait_ping(const bench_target *t, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        redisContext *c = bench_connect(t);
        if (c) {
            int ok = bench_ok(c, "PING") == 0;
            redisFree(c);
            if (ok) return 0;
        }
        bench_sleep_us(20000);
    }
    return -1;
}

static void reap(pid_t pid, int sig)
{
    if (pid <= 0) return;
    kill(pid, sig);
    waitpid(pid, NULL, 0);
}

int bench_redis_start(bench_redis *r)
{
    memset(r, 0, sizeof *r);
    const char *tmp = getenv("TMPDIR");
    snprintf(r->dir, sizeof r->dir, "%s/allocbench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(r->dir)) return -1;
    char sock[300], log[300], url[320];
    snprintf(sock, sizeof sock, "%s/redis.sock", r->dir);
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    snprintf(url, sizeof url, "unix://%s", sock);
    bench_target_parse(&r->target, url);
    char *argv[] = { "redis-server", "--port", "0", "--unixsocket", sock,
                     "--unixsocketperm", "700", "--dir", r->dir, "--save", "",
                     "--appendonly", "no", "--daemonize", "no", "--logfile", log, NULL };
    r->pid = spawn(argv, NULL);
    if (r->pid < 0 || wait_ping(&r->target, 10000) < 0) {
        fprintf(stderr, "allocbench: redis-server did not start (see %s)\n", log);
        return -1;
    }
    return 0;
}

void bench_redis_stop(bench_redis *r)
{
    reap(r->pid, SIGTERM);
    r->pid = 0;
    if (!r->dir[0] || getenv("ALLOCBENCH_KEEP")) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
    if (system(cmd) != 0) fprintf(stderr, "allocbench: could not remove %s\n", r->dir);
}

static int write_conf(const bench_daemon *d, const bench_daemon_opts *o)
{
    FILE *f = fopen(d->conf, "w");
    if (!f) return -1;
    fprintf(f, "# written by allocbench\nredis = \"%s\";\nprefix = \"%s\";\n"
               "instance = \"%s\";\nchunk = %d;\nlog_level = \"warning\";\n",
            o->redis_url, o->prefix, o->instance ? o->instance : "allocbench", o->chunk);
    if (o->cluster) fprintf(f, "cluster = \"%s\";\n", o->cluster);
    if (o->registry_ms > 0) fprintf(f, "registry_interval_ms = %d;\n", o->registry_ms);
    return fclose(f);
}

int bench_daemon_start(bench_daemon *d, const bench_daemon_opts *o)
{
    static int counter;
    memset(d, 0, sizeof *d);
    counter++;
    snprintf(d->conf, sizeof d->conf, "%s/allocd-%d.conf", o->dir, counter);
    snprintf(d->log, sizeof d->log, "%s/allocd-%d.log", o->dir, counter);
    if (write_conf(d, o) < 0) return -1;
    char *argv[] = { (char *)o->bin, "-c", d->conf, NULL };
    d->pid = spawn(argv, d->log);
    if (d->pid < 0) return -1;
    bench_sleep_us(100000);
    if (!bench_daemon_alive(d)) {
        fprintf(stderr, "allocbench: %s exited at start (see %s)\n", o->bin, d->log);
        return -1;
    }
    return 0;
}

int bench_daemon_alive(bench_daemon *d)
{
    if (d->pid <= 0) return 0;
    int st;
    if (waitpid(d->pid, &st, WNOHANG) == d->pid) { d->pid = 0; return 0; }
    return 1;
}

int bench_daemon_stop(bench_daemon *d)
{
    if (d->pid <= 0) return -1;
    kill(d->pid, SIGTERM);
    for (int waited = 0; waited < 20000; waited += 10) {
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        bench_sleep_us(10000);
    }
    reap(d->pid, SIGKILL);
    d->pid = 0;
    return -1;
}

long bench_proc_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t fl = strlen(field);
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':') { kb = strtol(line + fl + 1, NULL, 10); break; }
    fclose(f);
    return kb;
}

int64_t bench_proc_cpu_us(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may contain spaces */
    if (!p) return -1;
    unsigned long long ut, st;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return (int64_t)((ut + st) * 1000000ULL / (unsigned long long)(hz > 0 ? hz : 100));
}

double bench_loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return -1;
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
    return l;
}
