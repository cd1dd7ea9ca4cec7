/* proc.c -- allocd as allocbench runs it, and what /proc says about the
 * processes of a run (see bench.h).
 *
 * Starting, stopping and cleaning up after processes is proc/proc.h, the
 * module the tests use too (the private redis-server included); here is
 * only the bench's own part: allocd with a config written next to its
 * Redis, and /proc's memory peak (VmHWM) and CPU time of each process,
 * which is how the report splits the cost of a run between Redis, allocd
 * and the load generator on a shared 2-core machine.
 */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ALLOCBENCH_KEEP=1 keeps the temp dirs (redis.log, the allocd logs) for a
 * look after the run; set before main, so before anything is removed. */
__attribute__((constructor)) static void bench_keep_env(void)
{
    proc_keep_dirs_env("ALLOCBENCH_KEEP");
}

static int write_conf(const bench_daemon *d, const bench_daemon_opts *o)
{
    FILE *f = fopen(d->conf, "w");
    if (!f) return -1;
    fprintf(f, "# written by allocbench\nredis = \"%s\";\nprefix = \"%s\";\n"
               "instance = \"%s\";\nchunk = %d;\nlog_level = \"warning\";\n",
            o->redis_url, o->prefix, o->instance ? o->instance : "allocbench", o->chunk);
    if (o->cluster) fprintf(f, "cluster = \"%s\";\n", o->cluster);
    if (o->log_format) fprintf(f, "log_format = \"%s\";\n", o->log_format);
    if (o->heap_reserve_mb) fprintf(f, "heap_reserve_mb = %s;\n", o->heap_reserve_mb);
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
    d->pid = proc_spawn(argv, d->log);
    if (d->pid < 0) return -1;
    proc_sleep_ms(100);
    if (!bench_daemon_alive(d)) {
        fprintf(stderr, "allocbench: %s exited at start (see %s)\n", o->bin, d->log);
        return -1;
    }
    return 0;
}

int bench_daemon_alive(bench_daemon *d) { return proc_alive(&d->pid); }
int bench_daemon_stop(bench_daemon *d) { return proc_stop(&d->pid, 20000); }

bench_usage bench_proc_usage(pid_t pid)
{
    unsigned long long faults, ticks;
    if (pid <= 0 || proc_stat_usage(pid, &faults, &ticks) < 0) return (bench_usage){ -1, -1 };
    long hz = sysconf(_SC_CLK_TCK);
    return (bench_usage){ (int64_t)(ticks * 1000000ULL / (unsigned long long)(hz > 0 ? hz : 100)),
                          (int64_t)faults };
}

int64_t bench_proc_cpu_us(pid_t pid)
{
    return bench_proc_usage(pid).cpu_us;
}

/* What one page fault costs here: the first touch of each page of a fresh
 * anonymous mapping (FAULT_PROBE_BYTES), timed; the best of three. On
 * bare metal it is a fraction of a microsecond, on some VMs tens, and
 * then the memory a run first touches (Redis's growing hashes, a fresh
 * allocd's engine) is a visible share of its CPU. -1 if it cannot map. */
#define FAULT_PROBE_BYTES (16u << 20)

double bench_fault_cost_us(void)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    double best = -1;
    for (int round = 0; round < 3; round++) {
        char *m = mmap(NULL, FAULT_PROBE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return best;
        int64_t t0 = proc_mono_us();
        for (size_t i = 0; i < FAULT_PROBE_BYTES; i += (size_t)page) ((volatile char *)m)[i] = 1;
        double us = (double)(proc_mono_us() - t0) / (double)(FAULT_PROBE_BYTES / (size_t)page);
        munmap(m, FAULT_PROBE_BYTES);
        if (best < 0 || us < best) best = us;
    }
    return best;
}

int bench_proc_sched_ns(pid_t pid, int64_t *run_ns, int64_t *wait_ns)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long run, wait;
    int ok = fscanf(f, "%lld %lld", &run, &wait) == 2;
    fclose(f);
    if (!ok) return -1;
    *run_ns = run;
    if (wait_ns) *wait_ns = wait;
    return 0;
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

/* Calls set(tid, arg) for every thread of pid (0: this process); 0, or the
 * last -errno, or -ESRCH when pid has no threads. */
static int each_task(pid_t pid, int (*set)(pid_t tid, const void *arg), const void *arg)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)(pid ? pid : getpid()));
    DIR *d = opendir(dir);
    if (!d) return -errno;
    int rc = 0, n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        if (set((pid_t)atoi(e->d_name), arg) < 0) rc = -errno;
        n++;
    }
    closedir(d);
    return rc ? rc : n ? 0 : -ESRCH;
}

static int set_affinity(pid_t tid, const void *arg)
{
    return sched_setaffinity(tid, sizeof(cpu_set_t), arg);
}

/* SCHED_RESET_ON_FORK: what the process forks (Redis's RDB and AOF
 * rewrite children) runs SCHED_OTHER, not above allocd for seconds. */
static int set_fifo(pid_t tid, const void *arg)
{
    return sched_setscheduler(tid, SCHED_FIFO | SCHED_RESET_ON_FORK, arg);
}

int bench_pin(pid_t pid, int first, int last)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = first; c <= last; c++) CPU_SET(c, &set);
    return each_task(pid, set_affinity, &set);
}

int bench_realtime(pid_t pid, int prio)
{
    struct sched_param sp = { .sched_priority = prio };
    return each_task(pid, set_fifo, &sp);
}
