/* floor.c -- see floor.h. */
#include "bench/floor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A request and a result of the sizes allocd's e2e runs see (~100 and
 * ~190 bytes of JSON). */
#define FLOOR_REQ "{\"id\":\"r-0000001\",\"user\":\"u-0000001\",\"op\":\"buy\",\"item\":\"sku-00001\",\"qty\":1,\"x\":\"pad\"}"
#define FLOOR_RES "{\"id\":\"r-0000001\",\"user\":\"u-0000001\",\"op\":\"buy\",\"status\":\"granted\",\"item\":" \
                  "\"sku-00001\",\"qty\":1,\"order\":\"250000000000000001\",\"rank\":1,\"seq\":1,\"at\":1763800000123}"

/* One redis-benchmark run of the command args; its requests/s, or -1. */
static double run_one(const bench_target *t, long n, int pipeline, const char *args, char *err, size_t errlen)
{
    char cmd[1024], line[512];
    if (t->is_unix)
        snprintf(cmd, sizeof cmd, "redis-benchmark -s '%s' -c 4 -P %d -n %ld -q %s 2>&1", t->path, pipeline, n, args);
    else
        snprintf(cmd, sizeof cmd, "redis-benchmark -h '%s' -p %d -c 4 -P %d -n %ld -q %s 2>&1", t->host, t->port,
                 pipeline, n, args);
    FILE *p = popen(cmd, "r");
    if (!p) { snprintf(err, errlen, "cannot run redis-benchmark"); return -1; }
    /* -q overwrites a progress line with \r until the last one, "<name>:
     * <rate> requests per second, p50=..."; keep only the tail of it all */
    static char out[8192];
    size_t len = 0, got;
    while ((got = fread(line, 1, sizeof line, p)) > 0) {
        if (len + got >= sizeof out) {
            size_t keep = sizeof out / 2;
            memmove(out, out + len - keep, keep);
            len = keep;
        }
        memcpy(out + len, line, got);
        len += got;
    }
    out[len] = '\0';
    double rate = -1;
    char *rps = NULL;
    for (char *at = out; (at = strstr(at, " requests per second")) != NULL; at++) rps = at;
    if (rps) {
        char *num = rps;
        while (num > out && num[-1] != ' ' && num[-1] != '\r' && num[-1] != '\n') num--;
        rate = strtod(num, NULL);
    }
    int st = pclose(p);
    if (rate <= 0) snprintf(err, errlen, "redis-benchmark gave no rate (exit %d; is it installed?)", st);
    return rate > 0 ? rate : -1;
}

int floor_measure(const bench_target *t, long n, int pipeline, floor_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->pipeline = pipeline;
    out->clients = 4;
    redisContext *c = bench_connect(t);
    if (!c) { snprintf(err, errlen, "cannot connect to Redis"); return -1; }
    int ok = bench_ok(c, "DEL allocbench:floor:q") == 0 && bench_ok(c, "HSET allocbench:floor:h r %s", FLOOR_RES) == 0;
    if (ok) out->rpush = run_one(t, n, pipeline, "RPUSH allocbench:floor:q '" FLOOR_REQ "'", err, errlen);
    if (ok && out->rpush > 0) out->hget = run_one(t, n, pipeline, "HGET allocbench:floor:h r", err, errlen);
    bench_ok(c, "DEL allocbench:floor:q allocbench:floor:h");
    redisFree(c);
    if (!ok || out->rpush <= 0 || out->hget <= 0) {
        if (!ok) snprintf(err, errlen, "cannot prepare the floor's keys");
        return -1;
    }
    out->per_request = 1.0 / (1.0 / out->rpush + 1.0 / out->hget);
    return 0;
}
