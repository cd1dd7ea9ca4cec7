/* alt_common.h -- helpers shared by alt_lua.c and alt_lock.c only. */
#ifndef ALLOCBENCH_ALT_COMMON_H
#define ALLOCBENCH_ALT_COMMON_H

#include "designs.h"

typedef struct alt_window {
    cmdstats before;
    bench_usage redis;
    int64_t cpu_bench, t0;
} alt_window;

void alt_window_open(alt_window *win, redisContext *c, const alt_opts *o);
/* Fills secs, tput, cmds and the per-request figures from res->decided. */
void alt_window_close(alt_window *win, redisContext *c, const alt_opts *o, alt_result *res);

#endif
