/* alt_common.c -- what the two alternative designs share (designs.h):
 * their key names, their initial stock, and the accounting of a run
 * (commands Redis executed, Redis and bench CPU), done exactly as for
 * allocd so the ratios compare like with like.
 */
#include "alt_common.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int alt_key(char *buf, size_t len, const char *batch, const char *design, const char *name)
{
    return snprintf(buf, len, "bench:{%s}:%s:%s", batch, design, name);
}

int alt_seed_free(redisContext *c, const workload *w, const char *batch, const char *design)
{
    char key[256];
    alt_key(key, sizeof key, batch, design, "free");
    return workload_write_items(c, w, key, 0);
}

void alt_window_open(alt_window *win, redisContext *c, const alt_opts *o)
{
    memset(win, 0, sizeof *win);
    cmdstats_read(c, &win->before);
    win->redis = bench_proc_usage(o->redis_pid);
    win->cpu_bench = bench_proc_cpu_us(getpid());
    win->t0 = proc_mono_us();
}

static double per_req(int64_t a, int64_t b, long n)
{
    return a < 0 || b < 0 || n <= 0 ? -1 : (double)(b - a) / (double)n;
}

void alt_window_close(alt_window *win, redisContext *c, const alt_opts *o, alt_result *res)
{
    int64_t t1 = proc_mono_us();
    long n = res->decided;
    res->n = o->w->n;
    res->secs = (double)(t1 - win->t0) / 1e6;
    res->tput = res->secs > 0 ? (double)n / res->secs : 0;
    bench_usage redis = bench_proc_usage(o->redis_pid);
    res->cpu_redis_us = per_req(win->redis.cpu_us, redis.cpu_us, n);
    res->cpu_bench_us = per_req(win->cpu_bench, bench_proc_cpu_us(getpid()), n);
    res->faults_redis = per_req(win->redis.faults, redis.faults, n);
    cmdstats after;
    cmdstats_read(c, &after);
    cmdstats_delta(&after, &win->before, NULL, &res->cmds);
    res->cmds_per_req = n ? (double)cmdstats_total_calls(&res->cmds) / (double)n : 0;
    res->redis_usec_per_req = n ? (double)cmdstats_total_usec(&res->cmds) / (double)n : 0;
}
