/* allocbench -- allocd measured side by side with the alternatives.
 *
 * The issue "Faster than the alternatives, measured side by side" asks for
 * ratios, not absolute numbers: on a small shared machine only a ratio
 * measured in the same run, on the same Redis, with the same request mix
 * means anything. So this tool starts its own Redis (or uses --redis) and
 * allocd (or uses a running one with --no-daemon), runs each scenario
 * through allocd, through a Lua-script-per-request design and through a
 * lock-per-room design, and prints a table, one machine-readable RESULT
 * line per run, and a TARGET line (MET / NOT MET) per goal of the issue.
 * The pieces live in tools/bench/ (see bench.h and designs.h); this file
 * only parses options, sequences the runs and reports. The headline is
 * --e2e-pairs (tools/bench/e2e.h): live end to end, producers pushing
 * while the design serves and every allocd result read once by a poller
 * (tools/bench/reader.h) inside the clock, against Lua returning its
 * result inline; --open-loop paces both at shares of their saturation.
 * --cluster-masters /
 * --cluster-sweep is a separate scenario (tools/bench/cluster.h): allocd
 * over M Redis masters with N instances, aggregate throughput and CPU.
 */
#include "bench/tickets.h"
#include "bench/designs.h"
#include "bench/cluster.h"
#include "bench/e2e.h"
#include "bench/median_ci.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ROWS 64
#define MAX_SWEEP 8
#define MAX_CLUSTER 8
#define MAX_CL_RUNS 10
#define RT_PRIO_REDIS 20 /* --rt: Redis above allocd; both above the load generator */
#define RT_PRIO_ALLOCD 10

enum { D_ALLOCD = 1, D_LUA = 2, D_LOCK = 4 };

typedef struct options {
    const char *redis_url, *allocd_bin, *prefix;
    int no_daemon;
    pid_t daemon_pid;
    int chunk, registry_ms;
    int scenarios[SC_COUNT];
    int prepushed, live;
    long requests, users, items;
    int hold_ms, producers, depth, timeout_s, batches, tick_us;
    double rate;
    int designs, lua_seconds, lock_threads, lock_sleep_us, lock_seconds, lock_precheck;
    int probe, rate_test, targets, memory;
    int lua_pairs;                /* --lua-pairs: stock allocd+Lua pairs for the target */
    int tickets;                  /* --tickets: the waitlist scenario (bench/tickets.h) */
    int scenarios_given;          /* --scenario or --mode given */
    int e2e_pairs;                /* --e2e-pairs: live end-to-end rounds (e2e.c) */
    int open_loop;                /* --open-loop: offered vs accepted at 25..90% */
    int timeline;                 /* --timeline: each allocd e2e or paced row, window by window */
    int aof;                      /* --aof: private Redis with appendfsync everysec */
    int pin;                      /* --pin: Redis on CPU 0, the rest on the others */
    int rt;                       /* --rt: Redis and allocd under SCHED_FIFO */
    const char *redis_args;       /* --redis-args: more redis-server arguments */
    int targets_e2e;              /* --targets-e2e: the TARGET lines of e2e and open loop */
    int peek;                     /* --peek: e2e rounds also run the HGET/RPUSH/HGET producers */
    const char *log_format;       /* --log-format: allocd's log_format (event) */
    double saturation;            /* --saturation: open loop's 100% for both designs */
    int ol_pcts[8], n_ol_pcts;    /* --open-loop-pcts (25,50,75,90) */
    int ol_runs;                  /* --open-loop-runs: runs per open-loop row (3) */
    const char *ol_designs;       /* --open-loop-designs (allocd,lua) */
    int sweep[MAX_SWEEP], n_sweep;
    int cl_masters[MAX_CLUSTER], cl_instances[MAX_CLUSTER], n_cluster, runs;
    uint64_t seed;
} options;

typedef struct row {
    char mode[32];
    scenario_id sc;
    int chunk, sweep;
    double load;              /* 1-minute load average when the row started */
    workload w;
    run_result a;
    alt_result lua, lock;
    int has_a, a_ok, lua_ok, lock_ok, has_lua, has_lock;
} row;

typedef struct bench {
    options opt;
    proc_redis redis;
    bench_target target;
    bench_daemon daemon;
    int own_redis;
    pid_t redis_pid;
    char dir[256];
    int batch_seq;
    row *rows;
    int n_rows;
    probe_result probe;
    int probe_ok;
    double max_live;          /* rate-test: unpaced live throughput */
    char redis_ver[64];
    char durability[64];
    double load_start;
    e2e_pair pairs[MAX_E2E];
    int n_pairs;
    ol_row ol[MAX_OL];
    int n_ol;
} bench;

/* ---------------------------------------------------------- options -- */

static void usage_workload(FILE *f)
{
    fputs("usage: allocbench [options]\n"
          "  --scenario LIST       stock, stock-hot, rooms, rooms-hot, groups, reservations, groups-formed,\n"
          "                        all (commas, repeatable)\n"
          "  --mode MODE           prepushed (default), live, both\n"
          "  --requests N          requests per run (200000)\n"
          "  --users U             distinct users (scenario default: stock N/2, rooms N)\n"
          "  --items K             items / rooms (scenario default)\n"
          "  --hold-ms MS          reservations: hold_ms (50)\n"
          "  --batches K           spread the requests over K batches served at once (1)\n"
          "  --producers P         live producers, and Lua connections (4)\n"
          "  --depth D             pipeline depth per connection (128)\n"
          "  --rate R              live: pace producers at R req/s in total\n"
          "  --tick-us US          paced producers send what is due when a reply comes, or at the\n"
          "                        latest US microseconds after their last send (1000)\n"
          "  --compare             also run the Lua and the lock designs (= --designs allocd,lua,lock)\n"
          "  --designs LIST        which of allocd,lua,lock to run (allocd)\n"
          "  --lua-seconds S       cap of a Lua run (60)\n"
          "  --lock-threads T      lock design client threads (64)\n"
          "  --lock-sleep-us US    lock design retry sleep, base (1000; jitter adds up to as much)\n"
          "  --lock-seconds S      cap of a lock run (10)\n"
          "  --lock-precheck       lock design reads before locking too\n"
          "  --probe N             N lone requests on an idle batch (latency)\n"
          "  --rate-test           stock live at full speed, then paced at half of it\n"
          "  --chunk-sweep LIST    stock prepushed at each chunk size, e.g. 64,256,1024,4096\n"
          "  --cluster-masters M   scaling over Redis Cluster: M masters (1 = one plain Redis)\n"
          "  --instances N         with --cluster-masters: N allocd instances (1)\n"
          "  --cluster-sweep LIST  several MxN configurations, e.g. 1x1,3x3,3x1 (stock, prepushed,\n"
          "                        --batches K spread over masters and instances)\n"
          "  --runs R              with --cluster-*: rounds over the configurations (1)\n"
          "  --memory              print the memory target (use with --users 1000000 --requests 1000000)\n", f);
}

/* The measurements (end to end, open loop, targets) and where and how
 * the bench runs. */
static void usage_runs(FILE *f)
{
    fputs("  --e2e-pairs N         live end to end on stock, N rounds of: allocd with plain RPUSH\n"
          "                        producers, allocd with the position transaction, Lua; every\n"
          "                        allocd result read once by a poller inside the clock (the headline)\n"
          "  --open-loop           paced (open-loop) allocd and Lua at 25/50/75/90% of their\n"
          "                        e2e saturation: offered vs accepted, p50/p99/p100\n"
          "  --saturation R        open loop: 100% = R req/s for both designs (no rounds to measure it)\n"
          "  --open-loop-pcts LIST open loop: shares of saturation (25,50,75,90)\n"
          "  --open-loop-runs N    open loop: runs per row, the designs alternating; the row shows the\n"
          "                        medians and every run's p99 (3); saturation without --e2e-pairs or\n"
          "                        --saturation: the median of 3 e2e rounds\n"
          "  --timeline            each allocd e2e and open-loop row per 100 ms: latency, the load\n"
          "                        generator's own lag (sentms), how many requests wait in the\n"
          "                        queue and at the poller, and the share of the window Redis ran,\n"
          "                        Redis waited for a CPU and allocd ran; then the latency counted\n"
          "                        from the send (timeline.h; without --e2e-pairs it implies\n"
          "                        --open-loop)\n"
          "  --log-format F        allocd's log_format: event (default) or chunk\n"
          "  --redis-args \"ARGS\"   more arguments for the private redis-server (measuring a setting)\n"
          "  --peek                e2e rounds also run producers learning their position with\n"
          "                        HGET dequeued; RPUSH; HGET dequeued (no MULTI; docs/PERFORMANCE.md)\n"
          "  --targets-e2e         print the TARGET lines of the e2e rounds and the open loop\n"
          "  --aof                 the private Redis with appendonly yes, appendfsync everysec\n"
          "  --pin                 Redis on a core of its own: the private redis-server on CPU 0;\n"
          "                        allocd, the producers, the poller and the Lua callers on the others\n"
          "  --rt                  the private redis-server (priority 20) and each allocd (10) under\n"
          "                        SCHED_FIFO, reset on fork, as DEPLOYMENT.md runs them for latency;\n"
          "                        the producers, the poller and the Lua callers stay SCHED_OTHER\n"
          "                        (needs root or CAP_SYS_NICE)\n"
          "  --lua-pairs N         run stock prepushed allocd + Lua N times (fresh daemon each) and\n"
          "                        judge the Lua target on the median ratio (with --targets: 5)\n"
          "  --tickets             the tickets scenario: --users buyers (100000) for a tenth as many\n"
          "                        tickets, --hold-ms (2000), allocd wait:true vs Lua with polling losers\n"
          "  --targets             the standard comparison: all scenarios, --compare, --rate-test,\n"
          "                        --probe 300, --chunk-sweep 256,1024, and every TARGET line\n"
          "  --chunk N             allocd chunk (512)\n"
          "  --registry-ms MS      allocd registry_interval_ms (default: allocd's own)\n"
          "  --redis URL           use this Redis (unix:///path or redis://host:port)\n"
          "  --allocd PATH         allocd binary (build/allocd)\n"
          "  --no-daemon           use an allocd that is already running (same Redis, --prefix)\n"
          "  --pid PID             its pid, for memory and CPU figures\n"
          "  --prefix P            key prefix (allocbench; alloc with --no-daemon)\n"
          "  --timeout S           longest wait for one run's results (300)\n"
          "  --seed N              request mix seed (1)\n", f);
}

static void usage(FILE *f)
{
    usage_workload(f);
    usage_runs(f);
}

/* "1x1,3x3,3x1": masters x instances. */
static int parse_cluster_sweep(options *o, const char *list)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", list);
    o->n_cluster = 0;
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
        int m, n;
        if (o->n_cluster == MAX_CLUSTER || sscanf(s, "%dx%d", &m, &n) != 2 || m < 1 || m > CB_MAX_NODES ||
            n < 1 || n > CB_MAX_INST) return -1;
        o->cl_masters[o->n_cluster] = m;
        o->cl_instances[o->n_cluster++] = n;
    }
    return o->n_cluster ? 0 : -1;
}

static int parse_pcts(options *o, const char *list)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    o->n_ol_pcts = 0;
    for (char *s = strtok(buf, ","); s && o->n_ol_pcts < 8; s = strtok(NULL, ","))
        if ((o->ol_pcts[o->n_ol_pcts++] = atoi(s)) <= 0) return -1;
    return o->n_ol_pcts ? 0 : -1;
}

static int parse_sweep(options *o, const char *list)
{
    o->n_sweep = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *s = strtok(buf, ","); s && o->n_sweep < MAX_SWEEP; s = strtok(NULL, ","))
        if ((o->sweep[o->n_sweep++] = atoi(s)) <= 0) return -1;
    return 0;
}

/* One name, "all", or a comma-separated list. */
static int parse_scenario(options *o, const char *list)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *name = strtok(buf, ","); name; name = strtok(NULL, ",")) {
        scenario_id sc;
        if (!strcmp(name, "all")) {
            for (int i = 0; i < SC_COUNT; i++) o->scenarios[i] = 1;
        } else if (scenario_parse(name, &sc) == 0) {
            o->scenarios[sc] = 1;
        } else {
            return -1;
        }
    }
    return 0;
}

static int parse_designs(options *o, const char *list)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    o->designs = 0;
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
        if (!strcmp(s, "allocd")) o->designs |= D_ALLOCD;
        else if (!strcmp(s, "lua")) o->designs |= D_LUA;
        else if (!strcmp(s, "lock")) o->designs |= D_LOCK;
        else return -1;
    }
    return o->designs ? 0 : -1;
}

static int parse_mode(options *o, const char *m)
{
    o->prepushed = !strcmp(m, "prepushed") || !strcmp(m, "both");
    o->live = !strcmp(m, "live") || !strcmp(m, "both");
    return o->prepushed || o->live ? 0 : -1;
}

static void defaults(options *o)
{
    memset(o, 0, sizeof *o);
    o->allocd_bin = "build/allocd";
    o->chunk = 512;
    o->prepushed = 1;
    o->requests = 200000;
    o->producers = 4;
    o->depth = 128;
    o->timeout_s = 300;
    o->lua_seconds = 60;
    o->lock_threads = 64;
    o->lock_sleep_us = 1000;
    o->lock_seconds = 10;
    o->seed = 1;
    o->batches = 1;
    o->tick_us = 1000;
    o->designs = 0;
}

static void apply_targets(options *o)
{
    for (int i = 0; i < SC_COUNT; i++) o->scenarios[i] = 1;
    o->designs |= D_ALLOCD | D_LUA | D_LOCK;
    o->rate_test = 1;
    if (!o->lua_pairs) o->lua_pairs = 5;
    if (!o->e2e_pairs) o->e2e_pairs = 5;
    o->open_loop = 1;
    if (!o->probe) o->probe = 300;
    if (!o->n_sweep) parse_sweep(o, "256,1024");
}

enum {
    O_SCENARIO = 256, O_MODE, O_REQUESTS, O_USERS, O_ITEMS, O_HOLD, O_PRODUCERS, O_DEPTH,
    O_RATE, O_COMPARE, O_LUA_S, O_LOCK_T, O_LOCK_SLEEP, O_LOCK_S, O_LOCK_PRE, O_PROBE,
    O_RATE_TEST, O_SWEEP, O_MEMORY, O_TICKETS, O_TARGETS, O_CHUNK, O_REGISTRY, O_REDIS, O_ALLOCD,
    O_NO_DAEMON, O_PID, O_PREFIX, O_TIMEOUT, O_SEED, O_DESIGNS, O_BATCHES, O_TICK, O_HELP,
    O_LUA_PAIRS, O_E2E_PAIRS, O_OPEN_LOOP, O_TIMELINE, O_AOF, O_LOG_FORMAT, O_SATURATION, O_OL_PCTS, O_OL_RUNS, O_REDIS_ARGS, O_TARGETS_E2E, O_PEEK, O_PIN, O_RT,
    O_CL_MASTERS, O_CL_INSTANCES, O_CL_SWEEP, O_RUNS
};

static const struct option long_opts[] = {
    { "scenario", 1, 0, O_SCENARIO }, { "mode", 1, 0, O_MODE }, { "requests", 1, 0, O_REQUESTS },
    { "users", 1, 0, O_USERS }, { "items", 1, 0, O_ITEMS }, { "hold-ms", 1, 0, O_HOLD },
    { "producers", 1, 0, O_PRODUCERS }, { "depth", 1, 0, O_DEPTH }, { "rate", 1, 0, O_RATE },
    { "compare", 0, 0, O_COMPARE }, { "lua-seconds", 1, 0, O_LUA_S },
    { "lock-threads", 1, 0, O_LOCK_T }, { "lock-sleep-us", 1, 0, O_LOCK_SLEEP },
    { "lock-seconds", 1, 0, O_LOCK_S }, { "lock-precheck", 0, 0, O_LOCK_PRE },
    { "probe", 1, 0, O_PROBE }, { "rate-test", 0, 0, O_RATE_TEST }, { "chunk-sweep", 1, 0, O_SWEEP },
    { "tickets", 0, 0, O_TICKETS }, { "memory", 0, 0, O_MEMORY }, { "targets", 0, 0, O_TARGETS }, { "lua-pairs", 1, 0, O_LUA_PAIRS }, { "chunk", 1, 0, O_CHUNK },
    { "registry-ms", 1, 0, O_REGISTRY }, { "redis", 1, 0, O_REDIS }, { "allocd", 1, 0, O_ALLOCD },
    { "no-daemon", 0, 0, O_NO_DAEMON }, { "pid", 1, 0, O_PID }, { "prefix", 1, 0, O_PREFIX },
    { "timeout", 1, 0, O_TIMEOUT }, { "seed", 1, 0, O_SEED }, { "help", 0, 0, O_HELP },
    { "designs", 1, 0, O_DESIGNS }, { "batches", 1, 0, O_BATCHES },
    { "tick-us", 1, 0, O_TICK },
    { "e2e-pairs", 1, 0, O_E2E_PAIRS }, { "open-loop", 0, 0, O_OPEN_LOOP }, { "timeline", 0, 0, O_TIMELINE }, { "aof", 0, 0, O_AOF }, { "pin", 0, 0, O_PIN }, { "rt", 0, 0, O_RT },
    { "log-format", 1, 0, O_LOG_FORMAT }, { "saturation", 1, 0, O_SATURATION },
    { "open-loop-pcts", 1, 0, O_OL_PCTS }, { "open-loop-runs", 1, 0, O_OL_RUNS }, { "redis-args", 1, 0, O_REDIS_ARGS },
    { "targets-e2e", 0, 0, O_TARGETS_E2E }, { "peek", 0, 0, O_PEEK },
    { "cluster-masters", 1, 0, O_CL_MASTERS }, { "instances", 1, 0, O_CL_INSTANCES },
    { "cluster-sweep", 1, 0, O_CL_SWEEP }, { "runs", 1, 0, O_RUNS },
    { 0, 0, 0, 0 }
};

static int parse_int_opts(options *o, int c, const char *v)
{
    switch (c) {
    case O_REQUESTS: o->requests = atol(v); return o->requests > 0 ? 0 : -1;
    case O_USERS: o->users = atol(v); return 0;
    case O_ITEMS: o->items = atol(v); return 0;
    case O_HOLD: o->hold_ms = atoi(v); return 0;
    case O_PRODUCERS: o->producers = atoi(v); return o->producers > 0 ? 0 : -1;
    case O_DEPTH: o->depth = atoi(v); return o->depth > 0 ? 0 : -1;
    case O_RATE: o->rate = atof(v); return o->rate >= 0 ? 0 : -1;
    case O_LUA_S: o->lua_seconds = atoi(v); return 0;
    case O_LOCK_T: o->lock_threads = atoi(v); return o->lock_threads > 0 ? 0 : -1;
    case O_LOCK_SLEEP: o->lock_sleep_us = atoi(v); return 0;
    case O_LOCK_S: o->lock_seconds = atoi(v); return 0;
    case O_PROBE: o->probe = atoi(v); return 0;
    case O_CHUNK: o->chunk = atoi(v); return o->chunk > 0 ? 0 : -1;
    case O_REGISTRY: o->registry_ms = atoi(v); return 0;
    case O_PID: o->daemon_pid = (pid_t)atol(v); return 0;
    case O_TIMEOUT: o->timeout_s = atoi(v); return o->timeout_s > 0 ? 0 : -1;
    case O_SEED: o->seed = strtoull(v, NULL, 10); return 0;
    case O_TICK: o->tick_us = atoi(v); return o->tick_us >= 0 ? 0 : -1;
    case O_BATCHES: o->batches = atoi(v); return o->batches > 0 && o->batches <= 64 ? 0 : -1;
    case O_CL_MASTERS:
        o->n_cluster = 1;
        o->cl_masters[0] = atoi(v);
        return o->cl_masters[0] >= 1 && o->cl_masters[0] <= CB_MAX_NODES ? 0 : -1;
    case O_CL_INSTANCES: o->cl_instances[0] = atoi(v); return o->cl_instances[0] >= 1 && o->cl_instances[0] <= CB_MAX_INST ? 0 : -1;
    case O_RUNS: o->runs = atoi(v); return o->runs >= 1 && o->runs <= MAX_CL_RUNS ? 0 : -1;
    }
    return 1; /* not an integer option */
}

static int parse_one(options *o, int c, const char *v, int *targets)
{
    int rc = parse_int_opts(o, c, v);
    if (rc <= 0) return rc;
    switch (c) {
    case O_SCENARIO: o->scenarios_given = 1; return parse_scenario(o, v);
    case O_MODE: o->scenarios_given = 1; return parse_mode(o, v);
    case O_COMPARE: o->designs |= D_ALLOCD | D_LUA | D_LOCK; return 0;
    case O_DESIGNS: return parse_designs(o, v);
    case O_LOCK_PRE: o->lock_precheck = 1; return 0;
    case O_RATE_TEST: o->rate_test = 1; return 0;
    case O_SWEEP: return parse_sweep(o, v);
    case O_CL_SWEEP: return parse_cluster_sweep(o, v);
    case O_MEMORY: o->memory = 1; return 0;
    case O_TICKETS: o->tickets = 1; return 0;
    case O_TARGETS: *targets = 1; return 0;
    case O_E2E_PAIRS: o->e2e_pairs = atoi(v); return o->e2e_pairs >= 1 && o->e2e_pairs <= MAX_E2E ? 0 : -1;
    case O_OPEN_LOOP: o->open_loop = 1; return 0;
    case O_TIMELINE: o->timeline = 1; return 0;
    case O_AOF: o->aof = 1; return 0;
    case O_PIN: o->pin = 1; return 0;
    case O_RT: o->rt = 1; return 0;
    case O_REDIS_ARGS: o->redis_args = v; return 0;
    case O_TARGETS_E2E: o->targets_e2e = 1; return 0;
    case O_PEEK: o->peek = 1; return 0;
    case O_SATURATION: o->saturation = atof(v); o->open_loop = 1; return o->saturation > 0 ? 0 : -1;
    case O_OL_PCTS: return parse_pcts(o, v);
    case O_OL_RUNS: o->ol_runs = atoi(v); o->open_loop = 1; return o->ol_runs >= 1 && o->ol_runs <= MAX_OL_RUNS ? 0 : -1;
    case O_LOG_FORMAT:
        o->log_format = v;
        return !strcmp(v, "event") || !strcmp(v, "chunk") ? 0 : -1;
    case O_LUA_PAIRS: o->lua_pairs = atoi(v); return o->lua_pairs >= 1 && o->lua_pairs <= 20 ? 0 : -1;
    case O_REDIS: o->redis_url = v; return 0;
    case O_ALLOCD: o->allocd_bin = v; return 0;
    case O_NO_DAEMON: o->no_daemon = 1; return 0;
    case O_PREFIX: o->prefix = v; return 0;
    case O_HELP: usage(stdout); exit(0);
    }
    return -1;
}

static int parse_options(options *o, int argc, char **argv)
{
    int c, targets = 0, any = 0;
    defaults(o);
    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (c == 'h') { usage(stdout); exit(0); }
        if (c == '?' || parse_one(o, c, optarg, &targets) < 0) {
            fprintf(stderr, "allocbench: bad option or value (see --help)\n");
            return -1;
        }
    }
    if (optind < argc) { fprintf(stderr, "allocbench: unexpected argument '%s'\n", argv[optind]); return -1; }
    if (targets) { o->targets = 1; apply_targets(o); }
    for (int i = 0; i < SC_COUNT; i++) any |= o->scenarios[i];
    if (!any) o->scenarios[SC_STOCK] = 1;
    if (o->timeline && !o->e2e_pairs) o->open_loop = 1;
    if (!o->designs) o->designs = o->e2e_pairs || o->open_loop ? D_ALLOCD | D_LUA : D_ALLOCD;
    if (!o->prefix) o->prefix = o->no_daemon ? "alloc" : "allocbench";
    if (o->n_cluster == 1 && !o->cl_instances[0]) o->cl_instances[0] = 1;
    if (o->cl_instances[0] && !o->n_cluster) { fprintf(stderr, "allocbench: --instances needs --cluster-masters\n"); return -1; }
    if (o->rt && o->n_cluster) { fprintf(stderr, "allocbench: --rt is for the private Redis, not a cluster run\n"); return -1; }
    if (o->rt && o->redis_url) { fprintf(stderr, "allocbench: --rt needs the private Redis\n"); return -1; }
    if (!o->runs) o->runs = 1;
    if (o->chunk > 4096) { fprintf(stderr, "allocbench: allocd accepts chunk 1..4096\n"); return -1; }
    return 0;
}

/* ------------------------------------------------------------ setup --- */

/* --rt: pid under SCHED_FIFO at prio, or why not on stderr. */
static int make_realtime(pid_t pid, int prio, const char *who)
{
    int rc = bench_realtime(pid, prio);
    if (rc < 0)
        fprintf(stderr, "allocbench: --rt: cannot make %s SCHED_FIFO: %s (root or CAP_SYS_NICE, and a "
                        "real-time budget in its cgroup)\n", who, strerror(-rc));
    return rc;
}

static int start_redis(bench *b)
{
    if (b->opt.redis_url) {
        if (bench_target_parse(&b->target, b->opt.redis_url) < 0) {
            fprintf(stderr, "allocbench: bad --redis URL '%s'\n", b->opt.redis_url);
            return -1;
        }
        /* for the daemon's config and log */
        return proc_temp_dir(b->dir, sizeof b->dir, "allocbench");
    }
    char args[600];
    snprintf(args, sizeof args, "%s %s", b->opt.aof ? "--appendonly yes --appendfsync everysec" : "--appendonly no",
             b->opt.redis_args ? b->opt.redis_args : "");
    if (proc_redis_start(&b->redis, "allocbench", args) < 0) return -1;
    b->own_redis = 1;
    if (b->opt.pin && bench_pin(b->redis.pid, 0, 0) < 0) {
        fprintf(stderr, "allocbench: --pin: cannot pin redis-server to CPU 0\n");
        return -1;
    }
    if (b->opt.rt && make_realtime(b->redis.pid, RT_PRIO_REDIS, "redis-server") < 0) return -1;
    if (bench_target_parse(&b->target, b->redis.url) < 0) return -1;
    b->redis_pid = b->redis.pid;
    snprintf(b->dir, sizeof b->dir, "%s", b->redis.dir);
    return 0;
}

static void stop_all(bench *b)
{
    if (b->daemon.pid > 0) bench_daemon_stop(&b->daemon);
    if (b->own_redis) proc_redis_stop(&b->redis);
    else proc_remove_dir(b->dir);
}

/* A fresh allocd (clean memory peak) on an empty Redis for every run. */
static int fresh_daemon(bench *b, int chunk)
{
    redisContext *c = bench_connect(&b->target);
    if (!c) { fprintf(stderr, "allocbench: cannot connect to %s\n", b->target.url); return -1; }
    if (!b->opt.no_daemon && b->daemon.pid > 0) bench_daemon_stop(&b->daemon);
    if (b->own_redis) bench_ok(c, "FLUSHALL");
    redisFree(c);
    if (b->opt.no_daemon) return 0;
    bench_daemon_opts d = {
        .bin = b->opt.allocd_bin, .dir = b->dir, .redis_url = b->target.url,
        .prefix = b->opt.prefix, .chunk = chunk, .registry_ms = b->opt.registry_ms,
        .log_format = b->opt.log_format,
    };
    if (bench_daemon_start(&b->daemon, &d) < 0) return -1;
    if (b->opt.rt && make_realtime(b->daemon.pid, RT_PRIO_ALLOCD, "allocd") < 0) {
        bench_daemon_stop(&b->daemon);
        return -1;
    }
    proc_sleep_us(200000); /* connected, first registry poll done */
    return 0;
}

static pid_t daemon_pid(const bench *b)
{
    return b->opt.no_daemon ? b->opt.daemon_pid : b->daemon.pid;
}

static void next_batch(bench *b, const char *what, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%d-%d", what, (int)getpid(), ++b->batch_seq);
}

static void cleanup(bench *b, const char *batch)
{
    redisContext *c = bench_connect(&b->target);
    if (!c) return;
    batch_cleanup(c, b->opt.prefix, batch);
    redisFree(c);
}

/* ------------------------------------------------------------- runs --- */

static row *new_row(bench *b, scenario_id sc, const char *mode, int chunk)
{
    if (b->n_rows == MAX_ROWS) return NULL;
    row *r = &b->rows[b->n_rows++];
    memset(r, 0, sizeof *r);
    r->load = bench_loadavg();
    r->sc = sc;
    r->chunk = chunk;
    snprintf(r->mode, sizeof r->mode, "%s", mode);
    const options *o = &b->opt;
    workload_init(&r->w, sc, o->requests, o->users, o->items, o->hold_ms, o->seed);
    r->w.lanes = (long)o->producers * (o->batches > 1 ? o->batches : 1);
    return r;
}

static void run_allocd(bench *b, row *r, const char *batch, int live, double rate)
{
    char err[256];
    run_opts ro = {
        .target = &b->target, .w = &r->w, .prefix = b->opt.prefix, .batch = batch,
        .batches = b->opt.batches, .live = live, .tick_us = b->opt.tick_us,
        .producers = b->opt.producers, .depth = b->opt.depth, .rate = rate, .timeout_s = b->opt.timeout_s, .chunk = r->chunk, .allocd_pid = daemon_pid(b),
        .redis_pid = b->redis_pid,
    };
    fprintf(stderr, "allocbench: %s %s (chunk %d, %ld requests): allocd...\n",
            scenario_name(r->sc), r->mode, r->chunk, r->w.n);
    r->has_a = 1;
    r->a_ok = allocd_run(&ro, &r->a, err, sizeof err) == 0;
    if (!r->a_ok) fprintf(stderr, "allocbench: allocd run failed: %s\n", err);
    if (r->a.missing) fprintf(stderr, "allocbench: %ld ids have no result\n", r->a.missing);
}

static void run_alts(bench *b, row *r, const char *batch)
{
    char err[256];
    alt_opts ao = {
        .target = &b->target, .w = &r->w, .batch = batch, .conns = b->opt.producers,
        .depth = b->opt.depth, .threads = b->opt.lock_threads, .max_seconds = b->opt.lua_seconds,
        .lock_sleep_us = b->opt.lock_sleep_us, .lock_precheck = b->opt.lock_precheck,
        .redis_pid = b->redis_pid,
    };
    if (b->opt.designs & D_LUA) {
        fprintf(stderr, "allocbench: %s: lua design...\n", scenario_name(r->sc));
        r->has_lua = 1;
        r->lua_ok = alt_lua_run(&ao, &r->lua, err, sizeof err) == 0;
        if (!r->lua_ok) fprintf(stderr, "allocbench: lua run failed: %s\n", err);
    }
    if (!(b->opt.designs & D_LOCK)) return;
    fprintf(stderr, "allocbench: %s: lock design (%d threads, cap %d s)...\n",
            scenario_name(r->sc), ao.threads, b->opt.lock_seconds);
    ao.max_seconds = b->opt.lock_seconds;
    r->has_lock = 1;
    r->lock_ok = alt_lock_run(&ao, &r->lock, err, sizeof err) == 0;
    if (!r->lock_ok) fprintf(stderr, "allocbench: lock run failed: %s\n", err);
}

static row *run_one(bench *b, scenario_id sc, int live, double rate, int chunk, int designs)
{
    char mode[32], batch[96];
    if (rate > 0) snprintf(mode, sizeof mode, "live@%.0f", rate);
    else snprintf(mode, sizeof mode, "%s", live ? "live" : "prepushed");
    if (b->opt.batches > 1) /* "prepushed/4b": the requests spread over 4 batches */
        snprintf(mode + strlen(mode), sizeof mode - strlen(mode), "/%db", b->opt.batches);
    row *r = new_row(b, sc, mode, chunk);
    if (!r || fresh_daemon(b, chunk) < 0) return NULL;
    if (sc == SC_GROUPS_FORMED && (designs & (D_LUA | D_LOCK))) {
        /* the other designs have no invitations: allocd only, beside `groups` */
        fprintf(stderr, "allocbench: groups-formed: allocd only (the Lua and lock designs have no invitations)\n");
        designs &= ~(D_LUA | D_LOCK);
    }
    next_batch(b, scenario_name(sc), batch, sizeof batch);
    if (designs & D_ALLOCD) run_allocd(b, r, batch, live, rate);
    if (designs & (D_LUA | D_LOCK)) run_alts(b, r, batch);
    cleanup(b, batch);
    return r;
}

static void run_scenarios(bench *b)
{
    const options *o = &b->opt;
    for (int sc = 0; sc < SC_COUNT; sc++) {
        if (!o->scenarios[sc]) continue;
        if (o->prepushed) run_one(b, (scenario_id)sc, 0, 0, o->chunk, o->designs);
        if (o->live) run_one(b, (scenario_id)sc, 1, o->rate, o->chunk, o->designs);
    }
}

/* More stock prepushed allocd + Lua pairs (the first one is the stock row
 * of run_scenarios): on a shared machine one pair can be 10% off either
 * way, so the target is judged on the median ratio of the pairs. */
static void run_lua_pairs(bench *b)
{
    for (int i = b->opt.scenarios[SC_STOCK] ? 1 : 0; i < b->opt.lua_pairs; i++)
        run_one(b, SC_STOCK, 0, 0, b->opt.chunk, D_ALLOCD | D_LUA);
}

/* Max live throughput on stock, then the same at half of it (p99 target). */
static void run_rate_test(bench *b)
{
    row *full = run_one(b, SC_STOCK, 1, 0, b->opt.chunk, D_ALLOCD);
    if (!full || !full->a_ok) return;
    b->max_live = full->a.tput;
    row *half = run_one(b, SC_STOCK, 1, b->max_live / 2, b->opt.chunk, D_ALLOCD);
    if (half) snprintf(half->mode, sizeof half->mode, "live@half");
    if (half && b->opt.batches > 1) snprintf(half->mode, sizeof half->mode, "live@half/%db", b->opt.batches);
}

static void run_probe(bench *b)
{
    char batch[96], err[256];
    workload w;
    workload_init(&w, SC_STOCK, b->opt.probe, 0, 0, 0, b->opt.seed);
    if (fresh_daemon(b, b->opt.chunk) < 0) return;
    next_batch(b, "probe", batch, sizeof batch);
    run_opts ro = { .target = &b->target, .w = &w, .prefix = b->opt.prefix, .batch = batch,
                    .chunk = b->opt.chunk };
    fprintf(stderr, "allocbench: probe: %d lone requests...\n", b->opt.probe);
    b->probe_ok = allocd_probe(&ro, b->opt.probe, &b->probe, err, sizeof err) == 0;
    if (!b->probe_ok) fprintf(stderr, "allocbench: probe failed: %s\n", err);
    cleanup(b, batch);
}

static void run_sweep(bench *b)
{
    if (b->opt.no_daemon) {
        fprintf(stderr, "allocbench: --chunk-sweep needs its own daemon; skipped\n");
        return;
    }
    for (int i = 0; i < b->opt.n_sweep; i++) {
        row *r = run_one(b, SC_STOCK, 0, 0, b->opt.sweep[i], D_ALLOCD);
        if (r) r->sweep = 1;
    }
}

/* ------------------------------------------------- live end to end --- */

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }


static workload e2e_workload(const bench *b)
{
    workload w;
    const options *o = &b->opt;
    workload_init(&w, SC_STOCK, o->requests, o->users, o->items, o->hold_ms, o->seed);
    return w;
}

enum { PUSH_TXN, PUSH_PLAIN, PUSH_PEEK };

/* allocd live, every result read by the poller; fresh daemon, empty Redis. */
static int e2e_allocd(bench *b, const workload *w, int push, double rate, run_result *res)
{
    static const char *const names[] = { "position txn", "plain RPUSH", "peek (HGET/RPUSH/HGET)" };
    char batch[96], err[256];
    int plain = push == PUSH_PLAIN;
    if (fresh_daemon(b, b->opt.chunk) < 0) return 0;
    next_batch(b, plain ? "e2e-plain" : "e2e-txn", batch, sizeof batch);
    run_opts ro = {
        .target = &b->target, .w = w, .prefix = b->opt.prefix, .batch = batch, .batches = 1,
        .live = 1, .plain = plain, .peek = push == PUSH_PEEK, .e2e = 1, .rate = rate, .open_loop = rate > 0,
        .timeline = b->opt.timeline,
        .tick_us = b->opt.tick_us, .producers = b->opt.producers, .depth = b->opt.depth,
        .timeout_s = b->opt.timeout_s, .chunk = b->opt.chunk, .allocd_pid = daemon_pid(b),
        .redis_pid = b->redis_pid,
    };
    fprintf(stderr, "allocbench: e2e allocd %s%s%.0f...\n", names[push], rate > 0 ? " paced at " : "", rate);
    int ok = allocd_run(&ro, res, err, sizeof err) == 0 && !res->missing;
    if (!ok) fprintf(stderr, "allocbench: e2e allocd run failed: %s (%ld missing)\n", err, res->missing);
    cleanup(b, batch);
    return ok;
}

static int e2e_lua(bench *b, const workload *w, double rate, alt_result *res)
{
    char batch[96], err[256];
    if (fresh_daemon(b, b->opt.chunk) < 0) return 0;
    next_batch(b, "e2e-lua", batch, sizeof batch);
    alt_opts ao = {
        .target = &b->target, .w = w, .batch = batch, .conns = b->opt.producers, .depth = b->opt.depth,
        .max_seconds = b->opt.lua_seconds, .redis_pid = b->redis_pid, .rate = rate,
        .tick_us = b->opt.tick_us, .open_loop = rate > 0,
    };
    fprintf(stderr, "allocbench: e2e lua%s%.0f...\n", rate > 0 ? " paced at " : "", rate);
    int ok = alt_lua_run(&ao, res, err, sizeof err) == 0 && res->decided == w->n;
    if (!ok) fprintf(stderr, "allocbench: e2e lua run failed: %s\n", err);
    cleanup(b, batch);
    return ok;
}

/* Rounds of (plain, txn, Lua); every other round in reverse, so neither
 * design always runs first on a warm or a cold machine. */
static void run_e2e_pairs(bench *b)
{
    workload w = e2e_workload(b);
    for (int i = 0; i < b->opt.e2e_pairs && b->n_pairs < MAX_E2E; i++) {
        e2e_pair *p = &b->pairs[b->n_pairs++];
        memset(p, 0, sizeof *p);
        p->load = bench_loadavg();
        p->has_peek = b->opt.peek;
        if (i % 2 == 0) {
            p->ok_plain = e2e_allocd(b, &w, PUSH_PLAIN, 0, &p->plain);
            p->ok_txn = e2e_allocd(b, &w, PUSH_TXN, 0, &p->txn);
            if (p->has_peek) p->ok_peek = e2e_allocd(b, &w, PUSH_PEEK, 0, &p->peek);
            p->ok_lua = e2e_lua(b, &w, 0, &p->lua);
        } else {
            p->ok_lua = e2e_lua(b, &w, 0, &p->lua);
            if (p->has_peek) p->ok_peek = e2e_allocd(b, &w, PUSH_PEEK, 0, &p->peek);
            p->ok_txn = e2e_allocd(b, &w, PUSH_TXN, 0, &p->txn);
            p->ok_plain = e2e_allocd(b, &w, PUSH_PLAIN, 0, &p->plain);
        }
    }
}

/* which: 0 plain/Lua, 1 txn/Lua, 2 allocd plain req/s, 3 Lua req/s; the
 * rounds' values into v (MAX_E2E), their count returned */
static int e2e_values(const bench *b, int which, double *v)
{
    int n = 0;
    for (int i = 0; i < b->n_pairs; i++) {
        const e2e_pair *p = &b->pairs[i];
        int ok = which == 1 ? p->ok_txn && p->ok_lua : which == 3 ? p->ok_lua
               : which == 2 ? p->ok_plain : p->ok_plain && p->ok_lua;
        if (!ok) continue;
        v[n++] = which == 0 ? ratio(p->plain.tput, p->lua.tput) : which == 1 ? ratio(p->txn.tput, p->lua.tput)
               : which == 2 ? p->plain.tput : p->lua.tput;
    }
    return n;
}

static double e2e_median(const bench *b, int which)
{
    double v[MAX_E2E];
    int n = e2e_values(b, which, v);
    return median_of(v, n);
}

/* The median of n values (`what`: rounds, pairs, runs; `unit`: "x" or
 * " ms"), and in out how far it can be trusted (median_ci.h): the 95%
 * interval and where the target stands against it, or that n is too small
 * for one. Sorts v. */
static double median_with_ci(double *v, int n, const char *what, double goal, const char *unit,
                             char *out, size_t cap)
{
    median_ci ci;
    median_ci_of(v, n, 0.95, &ci);
    if (!ci.k) {
        snprintf(out, cap, "; %d %s are too few for a 95%% interval of the median", n, what);
        return ci.median;
    }
    int side = median_ci_side(&ci, goal);
    snprintf(out, cap, "; interval of the median x(%d)..x(%d) = %.2f - %.2f%s (%.1f%%): %s", ci.k, n + 1 - ci.k,
             ci.lo, ci.hi, unit, 100.0 * ci.coverage,
             side > 0 ? "below the target" : side < 0 ? "above the target" : "the target is inside it");
    return ci.median;
}

static void ol_fill_allocd(ol_row *r, const run_result *a)
{
    r->accepted = a->tput;
    r->p50 = a->p50;
    r->p99 = a->p99;
    r->pmax = a->pmax;
    r->redis_us = a->redis_usec_per_req;
    r->cmds = a->cmds;
    r->n = a->n;
}

static void ol_fill_lua(ol_row *r, const alt_result *l)
{
    r->accepted = l->tput;
    r->p50 = l->p50;
    r->p99 = l->p99;
    r->pmax = l->pmax;
    r->redis_us = l->redis_usec_per_req;
    r->cmds = l->cmds;
    r->n = l->decided;
}

/* One run of design d (0 allocd, 1 Lua) at r->offered into run. */
static void ol_run_once(bench *b, const workload *w, int d, const ol_row *r, ol_row *run)
{
    memset(run, 0, sizeof *run);
    if (d) {
        alt_result l;
        run->ok = e2e_lua(b, w, r->offered, &l);
        ol_fill_lua(run, &l);
        return;
    }
    run_result *a = calloc(1, sizeof *a);
    if (!a) return;
    run->ok = e2e_allocd(b, w, PUSH_PLAIN, r->offered, a);
    ol_fill_allocd(run, a);
    free(a);
}

static int cmp_run_p99(const void *x, const void *y)
{
    double a = (*(const ol_row *const *)x)->p99, c = (*(const ol_row *const *)y)->p99;
    return a < c ? -1 : a > c;
}

/* "a,b,c": every run's p99 (ms), "-" for a failed run. */
static void p99_list(const ol_row *r, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < r->runs && at < len; i++) {
        int n = r->p99_run[i] < 0 ? snprintf(out + at, len - at, "%s-", i ? "," : "")
                                  : snprintf(out + at, len - at, "%s%.2f", i ? "," : "", r->p99_run[i]);
        if (n < 0) break;
        at += (size_t)n;
    }
}

/* The row from its n runs: each figure the median of the runs that
 * succeeded, the commands of the run with the median p99. */
static void ol_combine(ol_row *r, const ol_row *runs, int n)
{
    const ol_row *good[MAX_OL_RUNS];
    double v[5][MAX_OL_RUNS];
    int k = 0;
    r->ok = 1;
    r->runs = n;
    for (int i = 0; i < n; i++) {
        r->p99_run[i] = runs[i].ok ? runs[i].p99 : -1;
        if (!runs[i].ok) { r->ok = 0; continue; }
        good[k] = &runs[i];
        v[0][k] = runs[i].accepted; v[1][k] = runs[i].p50; v[2][k] = runs[i].p99;
        v[3][k] = runs[i].pmax; v[4][k] = runs[i].redis_us;
        k++;
    }
    if (!k) return;
    r->accepted = median_of(v[0], k); r->p50 = median_of(v[1], k); r->p99 = median_of(v[2], k);
    r->pmax = median_of(v[3], k); r->redis_us = median_of(v[4], k);
    qsort(good, (size_t)k, sizeof *good, cmp_run_p99);
    r->cmds = good[k / 2]->cmds;
    r->n = good[k / 2]->n;
}

/* Open loop without --open-loop-runs: runs per row; without --e2e-pairs or
 * --saturation: the e2e rounds that measure the saturation. */
enum { OL_RUNS_DEFAULT = 3, OL_SATURATION_ROUNDS = 3 };

/* Paced at 25/50/75/90% of each design's own e2e saturation (the median
 * of the rounds; OL_SATURATION_ROUNDS first when none ran). Each row runs
 * --open-loop-runs times, the two designs taking turns to go first. */
static void run_open_loop(bench *b)
{
    static const int dflt[] = { 25, 50, 75, 90 };
    const int *pcts = b->opt.n_ol_pcts ? b->opt.ol_pcts : dflt;
    int n_pcts = b->opt.n_ol_pcts ? b->opt.n_ol_pcts : 4;
    int n_runs = b->opt.ol_runs ? b->opt.ol_runs : OL_RUNS_DEFAULT;
    double sat_a = b->opt.saturation, sat_l = b->opt.saturation;
    if (!sat_a) {
        if (b->n_pairs == 0) { int keep = b->opt.e2e_pairs; b->opt.e2e_pairs = OL_SATURATION_ROUNDS; run_e2e_pairs(b); b->opt.e2e_pairs = keep; }
        sat_a = e2e_median(b, 2);
        sat_l = e2e_median(b, 3);
    }
    workload w = e2e_workload(b);
    ol_row *runs = calloc(2 * (size_t)n_runs, sizeof *runs);
    if (!runs) return;
    for (int k = 0; k < n_pcts && b->n_ol + 2 <= MAX_OL; k++) {
        ol_row *rows[2] = { NULL, NULL };
        for (int d = 0; d < 2; d++) {
            if (!(b->opt.designs & (d ? D_LUA : D_ALLOCD))) continue;
            ol_row *r = rows[d] = &b->ol[b->n_ol++];
            memset(r, 0, sizeof *r);
            r->design = d ? "lua" : "allocd";
            r->pct = pcts[k];
            r->saturation = d ? sat_l : sat_a;
            r->offered = r->saturation * pcts[k] / 100.0;
            r->load = bench_loadavg();
        }
        for (int i = 0; i < n_runs; i++)
            for (int j = 0; j < 2; j++) {
                int d = i % 2 ? 1 - j : j;
                if (rows[d] && rows[d]->offered > 0) ol_run_once(b, &w, d, rows[d], &runs[d * n_runs + i]);
            }
        for (int d = 0; d < 2; d++)
            if (rows[d] && rows[d]->offered > 0) ol_combine(rows[d], &runs[d * n_runs], n_runs);
    }
    free(runs);
}

/* What a row's Redis keeps across a crash. */
static void read_durability(bench *b)
{
    snprintf(b->durability, sizeof b->durability, "unknown");
    redisContext *c = bench_connect(&b->target);
    if (!c) return;
    redisReply *ao = redisCommand(c, "CONFIG GET appendonly"), *fs = redisCommand(c, "CONFIG GET appendfsync"),
               *sv = redisCommand(c, "CONFIG GET save");
    int aof = ao && ao->type == REDIS_REPLY_ARRAY && ao->elements == 2 && !strcmp(ao->element[1]->str, "yes");
    int rdb = sv && sv->type == REDIS_REPLY_ARRAY && sv->elements == 2 && sv->element[1]->len > 0;
    if (aof && fs && fs->type == REDIS_REPLY_ARRAY && fs->elements == 2)
        snprintf(b->durability, sizeof b->durability, "AOF appendfsync %s", fs->element[1]->str);
    else
        snprintf(b->durability, sizeof b->durability, rdb ? "RDB snapshots only" : "none (no AOF, no RDB)");
    if (ao) freeReplyObject(ao);
    if (fs) freeReplyObject(fs);
    if (sv) freeReplyObject(sv);
    redisFree(c);
}

/* ----------------------------------------------------------- report --- */

static void cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        snprintf(buf, len, "%s", colon + 2);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

static void redis_version(const bench *b, char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    redisContext *c = bench_connect(&b->target);
    if (!c) return;
    redisReply *r = redisCommand(c, "INFO server");
    const char *v = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "redis_version:") : NULL;
    if (v) { snprintf(buf, len, "%s", v + 14); buf[strcspn(buf, "\r\n")] = '\0'; }
    if (r) freeReplyObject(r);
    redisFree(c);
}

/* How Redis and allocd were scheduled (--rt), for the RESULT lines. */
static const char *sched_name(const bench *b) { return b->opt.rt ? "fifo" : "other"; }

static void print_machine(const bench *b)
{
    char cpu[128];
    cpu_model(cpu, sizeof cpu);
    printf("machine: %ld cores, %s; load average %.2f at the start, %.2f at the end (others share it)\n"
           "redis: durability %s; extra arguments: %s%s%s\n"
           "setup: redis %s (%s); allocd %s, chunk %d, log_format %s; producers / Lua connections %d x depth %d; "
           "lock threads %d, retry sleep %d-%d us\n",
           sysconf(_SC_NPROCESSORS_ONLN), cpu, b->load_start, bench_loadavg(), b->durability,
           b->opt.redis_args ? b->opt.redis_args : "none",
           b->opt.pin ? "; pinned (--pin): redis-server on CPU 0, allocd and the bench on the others" : "",
           b->opt.rt ? "; real-time (--rt): redis-server SCHED_FIFO 20, allocd SCHED_FIFO 10, both reset on fork, "
                       "the bench SCHED_OTHER" : "",
           b->redis_ver,
           b->own_redis ? "private, unix socket" : b->target.url,
           b->opt.no_daemon ? "already running" : b->opt.allocd_bin, b->opt.chunk,
           b->opt.log_format ? b->opt.log_format : "event", b->opt.producers,
           b->opt.depth, b->opt.lock_threads, b->opt.lock_sleep_us, 2 * b->opt.lock_sleep_us);
}

static double pct(long part, long whole) { return whole > 0 ? 100.0 * (double)part / (double)whole : 0; }

static void print_allocd_table(const bench *b)
{
    printf("\nallocd (req/s from SADD or first push to last result; drain: from taking the batch's lease)\n");
    printf("%-13s %-10s %5s %8s %9s %9s %7s %7s %7s %7s %6s %8s %8s %8s %8s %7s %6s %6s %5s\n",
           "scenario", "mode", "chunk", "n", "req/s", "drain/s", "p50ms", "p99ms", "p999ms",
           "cmd/req", "rt/req", "rt/chunk", "redisus", "cpuR_us", "cpuA_us", "peakMB", "B/part", "grant%",
           "load");
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        const run_result *a = &r->a;
        if (!r->has_a) continue;
        printf("%-13s %-10s %5d %8ld %9.0f %9.0f %7.2f %7.2f %7.2f %7.2f %6.3f %8.2f %8.2f %8.2f %8.2f %7.1f %6.0f %6.1f %5.1f%s\n",
               scenario_name(r->sc), r->mode, r->chunk, a->n, a->tput, a->tput_drain, a->p50, a->p99,
               a->p999, a->cmds_per_req, a->rt_per_req, a->rt_per_chunk, a->redis_usec_per_req,
               a->cpu_redis_us, a->cpu_allocd_us, (double)a->hwm_kb / 1024.0, a->bytes_per_participant,
               pct(a->out.granted, a->results), r->load, r->a_ok && !a->missing ? "" : "  FAILED");
    }
}


static void print_compare_table(const bench *b)
{
    printf("\nside by side (same Redis, same request mix, same N; lock runs are capped, decided/s shown)\n");
    printf("%-13s %-10s %9s %9s %9s %7s %7s %9s %7s %7s %8s %8s %8s %9s\n",
           "scenario", "mode", "allocd/s", "drain/s", "lua/s", "xlua", "xlua_d", "lock/s", "xlock",
           "grant%L", "cmdL/req", "cmdK/req", "redisusL", "retry/req");
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (!r->has_lua && !r->has_lock) continue;
        const alt_result *l = &r->lua, *k = &r->lock;
        printf("%-13s %-10s %9.0f %9.0f %9.0f %7.2f %7.2f %9.0f %7.1f %7.1f %8.2f %8.2f %8.2f %9.2f\n",
               scenario_name(r->sc), r->mode, r->a.tput, r->a.tput_drain, l->tput, ratio(r->a.tput, l->tput),
               ratio(r->a.tput_drain, l->tput), k->tput, ratio(r->a.tput, k->tput),
               pct(l->out.granted, l->decided), l->cmds_per_req, k->cmds_per_req, l->redis_usec_per_req,
               ratio((double)k->lock_retries, (double)k->decided));
    }
}

/* name=calls(usec) per request; usec of a script includes its calls. */
static void print_mix(const char *who, const cmdstats *s, long n)
{
    printf("    %-9s", who);
    for (size_t i = 0; i < s->n; i++) {
        double per = (double)s->e[i].calls / (double)(n ? n : 1);
        double us = (double)s->e[i].usec / (double)(n ? n : 1);
        if (per >= 0.001 || us >= 0.01) printf(" %s=%.3f(%.2fus)", s->e[i].name, per, us);
    }
    printf("\n");
}

static void print_cmd_mix(const row *r)
{
    printf("  %s %s chunk %d: Redis commands per request (Redis usec per request)\n",
           scenario_name(r->sc), r->mode, r->chunk);
    if (r->has_a) print_mix("allocd", &r->a.cmds, r->a.n);
    if (r->has_lua) print_mix("lua", &r->lua.cmds, r->lua.decided);
    if (r->has_lock) print_mix("lock", &r->lock.cmds, r->lock.decided);
}

static void print_allocd_fields(const row *r, const run_result *a)
{
    printf(" ok=%d missing=%ld throughput=%.0f throughput_drain=%.0f seconds=%.3f p50_ms=%.3f "
           "p99_ms=%.3f p999_ms=%.3f max_ms=%.3f cmds_per_req=%.3f rt_per_req=%.4f rt_per_chunk=%.2f "
           "redis_usec_per_req=%.2f cpu_redis_us_per_req=%.2f cpu_allocd_us_per_req=%.2f "
           "cpu_bench_us_per_req=%.2f peak_rss_kb=%ld rss_base_kb=%ld participants=%ld "
           "bytes_per_participant=%.1f granted=%ld rejected=%ld other=%ld pos_checked=%ld pos_mismatch=%ld",
           r->a_ok && !a->missing, a->missing, a->tput, a->tput_drain, a->secs, a->p50, a->p99,
           a->p999, a->pmax, a->cmds_per_req, a->rt_per_req, a->rt_per_chunk, a->redis_usec_per_req,
           a->cpu_redis_us, a->cpu_allocd_us, a->cpu_bench_us, a->hwm_kb, a->rss_base_kb,
           a->participants, a->bytes_per_participant, a->out.granted, a->out.rejected, a->out.other,
           a->pos_checked, a->pos_mismatch);
}

static void print_alt_fields(const char *who, const alt_result *x, const run_result *a, int has_a)
{
    printf(" %s_ok=%d %s_throughput=%.0f %s_decided=%ld %s_granted=%ld %s_cmds_per_req=%.3f "
           "%s_redis_usec_per_req=%.2f %s_cpu_redis_us_per_req=%.2f",
           who, x->out.errors == 0, who, x->tput, who, x->decided, who, x->out.granted, who,
           x->cmds_per_req, who, x->redis_usec_per_req, who, x->cpu_redis_us);
    if (!strcmp(who, "lock")) printf(" lock_retries=%ld", x->lock_retries);
    if (has_a) printf(" ratio_%s=%.3f ratio_%s_drain=%.3f", who, ratio(a->tput, x->tput), who,
                      ratio(a->tput_drain, x->tput));
}

static void print_result_line(const bench *b, const row *r)
{
    printf("RESULT scenario=%s mode=%s sched=%s chunk=%d n=%ld load=%.2f", scenario_name(r->sc), r->mode,
           sched_name(b), r->chunk, r->w.n, r->load);
    if (r->has_a) print_allocd_fields(r, &r->a);
    if (r->has_lua) print_alt_fields("lua", &r->lua, &r->a, r->has_a);
    if (r->has_lock) print_alt_fields("lock", &r->lock, &r->a, r->has_a);
    printf("\n");
}

/* ---------------------------------------------------------- targets --- */

static const row *find_row(const bench *b, scenario_id sc, const char *mode, int need_alt)
{
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (r->sc == sc && !r->sweep && !strcmp(r->mode, mode) && (!need_alt || r->has_lua)) return r;
    }
    return NULL;
}

static void target(const bench *b, const char *name, int measured, int met, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* One TARGET line; under --rt every one says so, so that no figure of a
 * real-time run passes for the default setup. */
static void target(const bench *b, const char *name, int measured, int met, const char *fmt, ...)
{
    char what[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    printf("TARGET %-24s %-14s %s%s\n", name, !measured ? "NOT MEASURED" : met ? "MET" : "NOT MET", what,
           b->opt.rt ? " (--rt: Redis and allocd SCHED_FIFO)" : "");
}

/* Pre-pushed queues drained by allocd against as many pipelined Lua calls:
 * the drain clock starts when a worker takes the batch's lease (load
 * included), as the Lua clock starts at its first call. The time from SADD
 * adds the registry's pickup (up to registry_interval_ms), shown too. */

static void target_lua(const bench *b)
{
    double drain[MAX_ROWS], sadd[MAX_ROWS];
    char list[400] = "";
    int n = 0;
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (r->sc != SC_STOCK || r->sweep || strcmp(r->mode, "prepushed") || !r->has_lua) continue;
        if (!r->a_ok || !r->lua_ok || r->a.missing) continue;
        drain[n] = ratio(r->a.tput_drain, r->lua.tput);
        sadd[n] = ratio(r->a.tput, r->lua.tput);
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%.0f/%.0f=%.2f", n ? " " : "",
                 r->a.tput_drain, r->lua.tput, drain[n]);
        n++;
    }
    char ci[160];
    double x = median_with_ci(drain, n, "pairs", 1.7, "x", ci, sizeof ci);
    target(b, "drain_vs_lua", n > 0, x >= 1.7,
           "stock prepushed, allocd drain / Lua, median of %d pairs = %.2fx (>= 1.7x)%s [%s]; from SADD median %.2fx",
           n, x, ci, list, median_of(sadd, n));
}

static void target_lock(const bench *b)
{
    const row *r = find_row(b, SC_ROOMS_HOT, "prepushed", 0);
    int m = r && r->a_ok && r->has_lock && r->lock_ok && !r->a.missing;
    double x = m ? ratio(r->a.tput, r->lock.tput) : 0;
    target(b, "throughput_vs_lock", m, x >= 50,
           "rooms-hot prepushed: allocd %.0f/s vs lock %.0f/s = %.1fx (>= 50x)",
           m ? r->a.tput : 0, m ? r->lock.tput : 0, x);
}

static void target_p99(const bench *b)
{
    const row *r = find_row(b, SC_STOCK, "live@half", 0);
    int m = r && r->a_ok && !r->a.missing && r->a.p99 >= 0;
    target(b, "p99_at_half_max", m, m && r->a.p99 < 5.0,
           "stock live paced at %.0f req/s (half of the unpaced %.0f/s): p50 %.2f p99 %.2f p999 %.2f ms (p99 < 5 ms)",
           m ? r->a.rate : 0, b->max_live, m ? r->a.p50 : 0, m ? r->a.p99 : 0, m ? r->a.p999 : 0);
}

static void target_probe(const bench *b)
{
    const probe_result *p = &b->probe;
    target(b, "lone_request", b->probe_ok, p->p99 < 1.0,
           "%ld lone requests, push -> result visible: p50 %.3f p99 %.3f max %.3f ms (p99 < 1 ms)",
           p->samples, p->p50, p->p99, p->max);
}

static void target_memory(const bench *b)
{
    const row *best = NULL;
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (r->a.bytes_per_participant > 0 && (!best || r->a.participants > best->a.participants)) best = r;
    }
    int at_scale = best && best->a.participants >= 1000000;
    if (!best) { target(b, "memory_per_participant", 0, 0, "no allocd memory figure (--no-daemon without --pid?)"); return; }
    target(b, "memory_per_participant", at_scale, best->a.bytes_per_participant <= 256,
           "%s: %.0f bytes/participant at %ld participants (peak RSS %.1f MB, base %.1f MB) "
           "(<= 256 at 1,000,000%s)", scenario_name(best->sc), best->a.bytes_per_participant,
           best->a.participants, (double)best->a.hwm_kb / 1024, (double)best->a.rss_base_kb / 1024,
           at_scale ? "" : "; run make bench-memory");
}

static void target_rt(const bench *b)
{
    char what[300] = "";
    size_t at = 0;
    double lo = 1e18, hi = 0;
    int n = 0;
    for (int i = 0; i < b->n_rows; i++) {
        const row *r = &b->rows[i];
        if (!r->sweep || !r->a_ok) continue;
        at += (size_t)snprintf(what + at, at < sizeof what ? sizeof what - at : 0, "%schunk %d: %.2f",
                               n ? ", " : "", r->chunk, r->a.rt_per_chunk);
        if (r->a.rt_per_chunk < lo) lo = r->a.rt_per_chunk;
        if (r->a.rt_per_chunk > hi) hi = r->a.rt_per_chunk;
        n++;
    }
    target(b, "round_trips_per_chunk", n >= 2, n >= 2 && hi <= lo * 1.15,
           "stock prepushed round trips per chunk: %s (constant within 15%%)", n ? what : "no sweep run");
}

static void target_e2e(const bench *b)
{
    char list[2][400] = { "", "" };
    for (int i = 0; i < b->n_pairs; i++) {
        const e2e_pair *p = &b->pairs[i];
        for (int t = 0; t < 2; t++) {
            const run_result *a = t ? &p->txn : &p->plain;
            int ok = (t ? p->ok_txn : p->ok_plain) && p->ok_lua;
            size_t len = strlen(list[t]);
            if (ok) snprintf(list[t] + len, sizeof list[t] - len, "%s%.0f/%.0f=%.2f", len ? " " : "",
                             a->tput, p->lua.tput, ratio(a->tput, p->lua.tput));
        }
    }
    double v[2][MAX_E2E];
    char ci[2][160];
    int n0 = e2e_values(b, 0, v[0]), n1 = e2e_values(b, 1, v[1]);
    double r0 = median_with_ci(v[0], n0, "rounds", 1.5, "x", ci[0], sizeof ci[0]);
    double r1 = median_with_ci(v[1], n1, "rounds", 1.2, "x", ci[1], sizeof ci[1]);
    target(b, "live_e2e_vs_lua_rpush", n0 > 0, r0 >= 1.5,
           "stock live, plain RPUSH producers, every result read once: allocd / Lua, median of %d rounds "
           "= %.2fx (>= 1.5x)%s [%s]", n0, r0, ci[0], list[0]);
    target(b, "live_e2e_vs_lua_txn", n1 > 0, r1 >= 1.2,
           "stock live, position transaction producers, every result read once: allocd / Lua, median of "
           "%d rounds = %.2fx (>= 1.2x)%s [%s]", n1, r1, ci[1], list[1]);
}

static void target_open_loop(const bench *b)
{
    const ol_row *r = NULL;
    for (int i = 0; i < b->n_ol; i++)
        if (!strcmp(b->ol[i].design, "allocd") && b->ol[i].pct == 50) r = &b->ol[i];
    int m = r && r->ok;
    char list[128] = "", ci[160] = "";
    double v[MAX_OL_RUNS];
    int n = 0;
    for (int i = 0; r && i < r->runs; i++)
        if (r->p99_run[i] >= 0) v[n++] = r->p99_run[i];
    if (r) p99_list(r, list, sizeof list);
    double p99 = m ? median_with_ci(v, n, "runs", 5.0, " ms", ci, sizeof ci) : 0;
    target(b, "open_loop_p99_at_50pct", m, m && p99 < 5.0,
           "allocd open loop (plain RPUSH, poller) at 50%% of its e2e saturation: offered %.0f, accepted "
           "%.0f req/s, p50 %.2f p99 %.2f p100 %.2f ms, due -> result read, median of %d runs (p99 < 5 ms; "
           "Redis: %s)%s [p99 of each run: %s]",
           m ? r->offered : 0, m ? r->accepted : 0, m ? r->p50 : 0, p99, m ? r->pmax : 0,
           r ? r->runs : 0, b->durability, ci, list);
}

static void print_targets(const bench *b)
{
    printf("\n");
    if (b->n_pairs) target_e2e(b);
    if (b->n_ol) target_open_loop(b);
    target_lua(b);
    target_lock(b);
    target_p99(b);
    target_probe(b);
    target_memory(b);
    target_rt(b);
}

static void print_e2e_row(const char *what, const run_result *a, int ok)
{
    printf("  %-14s %9.0f %7.2f %7.2f %7.2f %8.2f %8.2f %8.2f %8.2f %7.3f %6.1f%%%s\n", what, a->tput, a->p50,
           a->p99, a->pmax, a->cpu_redis_us, a->redis_usec_per_req, a->cpu_allocd_us, a->cpu_bench_us, a->n ? (double)a->fields_asked / (double)a->n : 0,
           a->fields_asked ? 100.0 * (double)a->nil_fields / (double)a->fields_asked : 0, ok ? "" : "  FAILED");
}

/* The headline: every round, then the medians. */
static void print_e2e(const bench *b)
{
    if (!b->n_pairs) return;
    printf("\nlive end to end, stock, %ld requests: producers push while the design serves; allocd's results are "
           "all read once by a poller (HMGET) inside the clock; Lua returns its result inline. Redis: %s\n",
           b->opt.requests, b->durability);
    printf("  cpuR_us: Redis process CPU per request (what bounds throughput: one Redis core); redisus:\n"
           "  INFO commandstats usec per request (EXEC and EVALSHA include the commands inside them, which\n"
           "  are also counted on their own lines: the sum counts them twice); cpuA_us: allocd CPU per request;\n"
           "  cpuB_us: the bench's own CPU per request (producers, poller; it shares the 2 cores);\n"
           "  asked/r: result fields the poller asked for per result, nil%%: of those, not yet answered\n");
    printf("  %-14s %9s %7s %7s %7s %8s %8s %8s %8s %7s %7s\n", "design", "req/s", "p50ms", "p99ms", "p100ms",
           "cpuR_us", "redisus", "cpuA_us", "cpuB_us", "asked/r", "nil%");
    for (int i = 0; i < b->n_pairs; i++) {
        const e2e_pair *p = &b->pairs[i];
        printf(" round %d (load %.2f): plain/Lua %.2fx, txn/Lua %.2fx\n", i + 1, p->load,
               ratio(p->plain.tput, p->lua.tput), ratio(p->txn.tput, p->lua.tput));
        print_e2e_row("allocd rpush", &p->plain, p->ok_plain);
        print_e2e_row("allocd txn", &p->txn, p->ok_txn);
        if (p->has_peek) {
            print_e2e_row("allocd peek", &p->peek, p->ok_peek);
            printf("  %-14s peek/Lua %.2fx; %ld of %ld positions a range (the two reads differed), "
                   "%ld exact ones checked, %ld wrong\n", "", ratio(p->peek.tput, p->lua.tput),
                   p->peek.pos_inexact, p->peek.n, p->peek.pos_checked, p->peek.pos_mismatch);
        }
        printf("  %-14s %9.0f %7.2f %7.2f %7.2f %8.2f %8.2f %8s %8.2f%s\n", "lua", p->lua.tput, p->lua.p50,
               p->lua.p99, p->lua.pmax, p->lua.cpu_redis_us, p->lua.redis_usec_per_req, "-", p->lua.cpu_bench_us,
               p->ok_lua ? "" : "  FAILED");
    }
    printf(" median of rounds: plain/Lua %.2fx, txn/Lua %.2fx\n", e2e_median(b, 0), e2e_median(b, 1));
    const e2e_pair *p = &b->pairs[0];
    printf("\n  round 1: Redis commands per request (Redis usec per request), everything in the window;\n"
           "  exec/evalsha usec include the commands run inside them\n");
    print_mix("rpush", &p->plain.cmds, p->plain.n);
    print_mix("txn", &p->txn.cmds, p->txn.n);
    if (p->has_peek) print_mix("peek", &p->peek.cmds, p->peek.n);
    print_mix("lua", &p->lua.cmds, p->lua.decided);
}

static void print_open_loop(const bench *b)
{
    if (!b->n_ol) return;
    printf("\nopen loop, stock, %ld requests per row, paced with no cap in flight; latency from when each "
           "request was due to its result read (allocd: plain RPUSH + poller; Lua: reply). Durability: %s\n",
           b->opt.requests, b->durability);
    printf("  each row: the median of its runs (the designs alternating which goes first); p99 of each run\n"
           "  in run order at the end\n");
    printf("  %-7s %4s %10s %10s %10s %7s %7s %8s %8s %5s  %s\n", "design", "pct", "saturation", "offered",
           "accepted", "p50ms", "p99ms", "p100ms", "redisus", "load", "p99ms of each run");
    for (int i = 0; i < b->n_ol; i++) {
        const ol_row *r = &b->ol[i];
        char list[128];
        p99_list(r, list, sizeof list);
        printf("  %-7s %3d%% %10.0f %10.0f %10.0f %7.2f %7.2f %8.2f %8.2f %5.2f  %s%s\n", r->design, r->pct,
               r->saturation, r->offered, r->accepted, r->p50, r->p99, r->pmax, r->redis_us, r->load, list,
               r->ok ? "" : "  FAILED");
    }
    printf("\n  open loop: Redis commands per request (Redis usec per request), each row's window\n");
    for (int i = 0; i < b->n_ol; i++) {
        char who[24];
        snprintf(who, sizeof who, "%s%d", b->ol[i].design, b->ol[i].pct);
        print_mix(who, &b->ol[i].cmds, b->ol[i].n);
    }
    for (int i = 0; i < b->n_ol; i++) {
        const ol_row *r = &b->ol[i];
        char list[128];
        p99_list(r, list, sizeof list);
        printf("RESULT scenario=openloop design=%s pct=%d durability=\"%s\" sched=%s ok=%d saturation=%.0f offered=%.0f "
               "accepted=%.0f p50_ms=%.3f p99_ms=%.3f p100_ms=%.3f redis_usec_per_req=%.2f load=%.2f runs=%d "
               "p99_ms_runs=%s\n",
               r->design, r->pct, b->durability, sched_name(b), r->ok, r->saturation, r->offered, r->accepted, r->p50, r->p99,
               r->pmax, r->redis_us, r->load, r->runs, list);
    }
}

static void print_e2e_results(const bench *b)
{
    for (int i = 0; i < b->n_pairs; i++) {
        const e2e_pair *p = &b->pairs[i];
        const run_result *a[3] = { &p->plain, &p->txn, &p->peek };
        static const char *const push[3] = { "rpush", "txn", "peek" };
        int ok[3] = { p->ok_plain, p->ok_txn, p->ok_peek };
        for (int t = 0; t < (p->has_peek ? 3 : 2); t++)
            printf("RESULT scenario=e2e round=%d push=%s durability=\"%s\" sched=%s ok=%d load=%.2f throughput=%.0f "
                   "p50_ms=%.3f p99_ms=%.3f p100_ms=%.3f redis_usec_per_req=%.2f cpu_redis_us_per_req=%.2f "
                   "cpu_allocd_us_per_req=%.2f hmgets=%ld fields_asked=%ld nil_fields=%ld dequeued_polls=%ld "
                   "pos_checked=%ld pos_mismatch=%ld pos_inexact=%ld lua_ok=%d lua_throughput=%.0f lua_redis_usec_per_req=%.2f "
                   "lua_cpu_redis_us_per_req=%.2f ratio_lua=%.3f\n",
                   i + 1, push[t], b->durability, sched_name(b), ok[t], p->load, a[t]->tput,
                   a[t]->p50, a[t]->p99, a[t]->pmax, a[t]->redis_usec_per_req, a[t]->cpu_redis_us,
                   a[t]->cpu_allocd_us, a[t]->hmgets, a[t]->fields_asked, a[t]->nil_fields, a[t]->dequeued_polls,
                   a[t]->pos_checked, a[t]->pos_mismatch, a[t]->pos_inexact, p->ok_lua, p->lua.tput, p->lua.redis_usec_per_req,
                   p->lua.cpu_redis_us, ratio(a[t]->tput, p->lua.tput));
    }
}

static void report(const bench *b)
{
    print_machine(b);
    print_e2e(b);
    print_open_loop(b);
    print_e2e_results(b);
    print_allocd_table(b);
    print_compare_table(b);
    printf("\n");
    for (int i = 0; i < b->n_rows; i++) print_cmd_mix(&b->rows[i]);
    printf("\n");
    for (int i = 0; i < b->n_rows; i++) print_result_line(b, &b->rows[i]);
    if (b->probe_ok)
        printf("RESULT scenario=probe sched=%s samples=%ld p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n",
               sched_name(b), b->probe.samples, b->probe.p50, b->probe.p99, b->probe.max);
    if (b->opt.targets) print_targets(b);
    else if (b->opt.targets_e2e) {
        printf("\n");
        if (b->n_pairs) target_e2e(b);
        if (b->n_ol) target_open_loop(b);
        if (find_row(b, SC_STOCK, "prepushed", 1)) target_lua(b);
    }
    else if (b->opt.memory) { printf("\n"); target_memory(b); }
}

/* ---------------------------------------------------------- cluster --- */

/* Rounds over the configurations (1x1, 3x3, 3x1, 1x1, ...) so that each
 * configuration sees the same spread of load on a shared machine. */
static int run_cluster(const options *o)
{
    int total = o->n_cluster * o->runs, failed = 0;
    cluster_result *res = calloc((size_t)total, sizeof *res);
    if (!res) return 1;
    workload w;
    workload_init(&w, SC_STOCK, o->requests, o->users, o->items, o->hold_ms, o->seed);
    double load0 = bench_loadavg();
    for (int r = 0; r < o->runs; r++)
        for (int c = 0; c < o->n_cluster; c++) {
            char err[256];
            cluster_opts co = {
                .allocd_bin = o->allocd_bin, .prefix = o->prefix, .w = &w, .masters = o->cl_masters[c],
                .instances = o->cl_instances[c], .batches = o->batches, .chunk = o->chunk,
                .registry_ms = o->registry_ms, .timeout_s = o->timeout_s, .run = r + 1,
            };
            cluster_result *x = &res[r * o->n_cluster + c];
            if (cluster_bench_run(&co, x, err, sizeof err) < 0) {
                fprintf(stderr, "allocbench: cluster %dx%d run %d failed: %s\n", co.masters, co.instances, r + 1, err);
                failed = 1;
            }
            if (x->log_lines) fprintf(stderr, "allocbench: %ld lines in the allocd logs (warning or worse)\n", x->log_lines);
        }
    char cpu[128];
    cpu_model(cpu, sizeof cpu);
    printf("machine: %ld cores, %s; load average %.2f at the start, %.2f at the end (others share it)\n"
           "setup: redis on loopback TCP (M = 1: plain Redis; M > 1: cluster), allocd %s, chunk %d, "
           "stock, %ld requests pre-pushed over %d batches, timed from SADD to the last result\n",
           sysconf(_SC_NPROCESSORS_ONLN), cpu, load0, bench_loadavg(), o->allocd_bin, o->chunk, w.n, o->batches);
    printf("\n%-3s %-3s %-3s %-3s %8s %7s %9s %9s %7s %7s %8s %8s %9s %5s %-11s %-11s %3s %5s\n", "M", "N", "K", "run",
           "n", "secs", "req/s", "drain/s", "coresR", "coresA", "cpuR_us", "cpuA_us", "cpuBench", "load", "per_master",
           "per_inst", "log", "ok");
    for (int i = 0; i < total; i++) {
        const cluster_result *x = &res[i];
        char pm[64] = "", pi[64] = "";
        for (int m = 0, at = 0; m < x->masters && at < (int)sizeof pm - 4; m++)
            at += snprintf(pm + at, sizeof pm - (size_t)at, "%s%d", m ? "/" : "", x->per_master[m]);
        for (int m = 0, at = 0; m < x->instances && at < (int)sizeof pi - 4; m++)
            at += snprintf(pi + at, sizeof pi - (size_t)at, "%s%d", m ? "/" : "", x->per_instance[m]);
        printf("%-3d %-3d %-3d %-3d %8ld %7.2f %9.0f %9.0f %7.2f %7.2f %8.2f %8.2f %9.2f %5.2f %-11s %-11s %3ld %5s\n",
               x->masters, x->instances, x->batches, x->run, x->n, x->secs, x->tput, x->tput_drain, x->redis_cores,
               x->allocd_cores, x->redis_us_per_req, x->allocd_us_per_req, x->cpu_bench_s, x->load, pm, pi,
               x->log_lines, x->ok ? "yes" : "NO");
    }
    printf("\n");
    for (int i = 0; i < total; i++) {
        const cluster_result *x = &res[i];
        printf("RESULT scenario=cluster masters=%d instances=%d batches=%d run=%d n=%ld load=%.2f ok=%d "
               "throughput=%.0f throughput_drain=%.0f seconds=%.3f results=%ld missing=%ld granted=%ld rejected=%ld misplaced=%d "
               "log_lines=%ld cpu_redis_s=%.3f cpu_allocd_s=%.3f cpu_bench_s=%.3f redis_cores=%.2f "
               "allocd_cores=%.2f cpu_redis_us_per_req=%.2f cpu_allocd_us_per_req=%.2f",
               x->masters, x->instances, x->batches, x->run, x->n, x->load, x->ok, x->tput, x->tput_drain, x->secs, x->results,
               x->missing, x->granted, x->rejected, x->misplaced, x->log_lines, x->cpu_redis_s, x->cpu_allocd_s,
               x->cpu_bench_s, x->redis_cores, x->allocd_cores, x->redis_us_per_req, x->allocd_us_per_req);
        for (int m = 0; m < x->masters; m++) printf(" cpu_redis%d_s=%.3f", m + 1, x->node_cpu_s[m]);
        for (int m = 0; m < x->instances; m++) printf(" cpu_allocd%d_s=%.3f", m + 1, x->inst_cpu_s[m]);
        printf("\n");
    }
    free(res);
    return failed;
}

/* ---------------------------------------------------------- tickets --- */

/* The tickets scenario (bench/tickets.h): allocd with wait:true, then the
 * Lua design with polling losers, on the same Redis. --users buyers
 * (default 100,000), a tenth as many tickets, --hold-ms (default 2000). */
static int run_tickets(bench *b)
{
    options *o = &b->opt;
    if (start_redis(b) < 0 || fresh_daemon(b, o->chunk) < 0) { stop_all(b); return 1; }
    tickets_opts t = {
        .target = &b->target, .prefix = o->prefix, .buyers = o->users ? o->users : 100000,
        .hold_ms = o->hold_ms ? o->hold_ms : 2000, .seconds = 12, .retry_ms = 200, .seed = o->seed | 1,
    };
    t.tickets = t.buyers / 10;
    tickets_result a, l;
    char err[256] = "";
    double load0 = bench_loadavg();
    int fa = tickets_allocd(&t, &a, err, sizeof err);
    if (fa < 0) fprintf(stderr, "allocbench: tickets, allocd: %s\n", err);
    if (fa == 0 && b->daemon.pid > 0 && !bench_daemon_alive(&b->daemon)) {
        fprintf(stderr, "allocbench: tickets: allocd died during the run (its log: %s)\n", b->dir);
        fa = -1;
    }
    if (b->daemon.pid > 0) bench_daemon_stop(&b->daemon);
    int fl = tickets_lua(&t, &l, err, sizeof err);
    if (fl < 0) fprintf(stderr, "allocbench: tickets, lua: %s\n", err);
    stop_all(b);
    printf("tickets: %ld buyers, %ld tickets, reservations held %d ms, half never paid; %d s after the first wave;\n"
           "load average %.2f at the start, %.2f at the end\n\n", t.buyers, t.tickets, t.hold_ms, t.seconds,
           load0, bench_loadavg());
    printf("%-22s %10s %12s %10s %10s %8s %10s %10s %10s\n", "design", "wave_s", "wave_req/s", "calls",
           "calls/s", "paid", "returned", "regranted", "to_longest");
    const struct { const char *name; tickets_result *r; int failed; } rows[] = {
        { "allocd (wait:true)", &a, fa < 0 }, { "lua (losers retry)", &l, fl < 0 },
    };
    for (int i = 0; i < 2; i++) {
        const tickets_result *r = rows[i].r;
        printf("%-22s %10.2f %12.0f %10ld %10.0f %8ld %10ld %10ld %10ld%s\n", rows[i].name, r->first_wave_s,
               r->first_wave_rps, r->calls, r->calls_per_s, r->paid, r->returned, r->regranted,
               r->to_longest_waiting, rows[i].failed ? "  FAILED" : "");
    }
    for (int i = 0; i < 2; i++) {
        const tickets_result *r = rows[i].r;
        printf("RESULT scenario=tickets design=%s sched=%s buyers=%ld tickets=%ld hold_ms=%d first_wave_s=%.3f "
               "first_wave_rps=%.0f calls=%ld calls_per_s=%.0f paid=%ld returned=%ld regranted=%ld "
               "to_longest_waiting=%ld ok=%d\n", i ? "lua" : "allocd", sched_name(b), t.buyers, t.tickets, t.hold_ms,
               r->first_wave_s, r->first_wave_rps, r->calls, r->calls_per_s, r->paid, r->returned, r->regranted,
               r->to_longest_waiting, r->ok && !rows[i].failed);
    }
    return fa < 0 || fl < 0;
}

/* ------------------------------------------------------------- main --- */

int main(int argc, char **argv)
{
    bench b;
    memset(&b, 0, sizeof b);
    if (parse_options(&b.opt, argc, argv) < 0) return 2;
    if (b.opt.n_cluster) {
        if (access(b.opt.allocd_bin, X_OK) < 0) {
            fprintf(stderr, "allocbench: %s is not executable (build it, or --allocd PATH)\n", b.opt.allocd_bin);
            return 2;
        }
        return run_cluster(&b.opt);
    }
    if (b.opt.no_daemon && !b.opt.redis_url) {
        fprintf(stderr, "allocbench: --no-daemon needs --redis (the daemon's Redis)\n");
        return 2;
    }
    if (!b.opt.no_daemon && access(b.opt.allocd_bin, X_OK) < 0) {
        fprintf(stderr, "allocbench: %s is not executable (build it, or --allocd PATH)\n", b.opt.allocd_bin);
        return 2;
    }
    if (b.opt.pin) {
        /* this process and what it starts (allocd; its threads) on CPUs
         * 1..n-1; the private Redis is moved to CPU 0 once started */
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        if (ncpu < 2 || b.opt.redis_url || bench_pin(0, 1, (int)ncpu - 1) < 0) {
            fprintf(stderr, "allocbench: --pin needs 2 or more CPUs and the private Redis\n");
            return 2;
        }
    }
    if (b.opt.tickets) return run_tickets(&b);
    b.rows = calloc(MAX_ROWS, sizeof *b.rows);
    if (!b.rows || start_redis(&b) < 0) { free(b.rows); stop_all(&b); return 1; }
    redis_version(&b, b.redis_ver, sizeof b.redis_ver);
    b.load_start = bench_loadavg();
    read_durability(&b);
    if (b.opt.e2e_pairs) run_e2e_pairs(&b);
    if (b.opt.open_loop) run_open_loop(&b);
    if (b.opt.scenarios_given || b.opt.targets || !(b.opt.e2e_pairs || b.opt.open_loop)) run_scenarios(&b);
    if (b.opt.lua_pairs > 1) run_lua_pairs(&b);
    if (b.opt.rate_test) run_rate_test(&b);
    if (b.opt.probe > 0) run_probe(&b);
    if (b.opt.n_sweep) run_sweep(&b);
    stop_all(&b);
    report(&b);
    free(b.rows);
    return 0;
}
