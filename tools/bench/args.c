/* args.c -- allocbench's command line: usage, the options and their
 * defaults, and --targets' choice of runs (allocbench.h). */
#include "bench/allocbench.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
          "  --memory              print the memory target (use with --users 1000000 --requests 1000000)\n"
          "  --scenario housing-elig  rooms with a profile for every user and only_X/same_X rules on\n"
          "                        9 rooms in 10, eligibility off then on (same rooms, users and\n"
          "                        requests): decisions/s and the eligibility_cost TARGET (<= 10%)\n"
          "  --housing-pairs N     housing-elig: N pairs, the order alternating; the target is their\n"
          "                        median ratio (1)\n"
          "  --profile-memory U    U users (one request each) without and with a five-attribute\n"
          "                        profile: allocd's RSS difference per user, TARGET <= 100 bytes\n", f);
}

/* The measurements (end to end, open loop, targets) and where and how
 * the bench runs. */
static void usage_runs(FILE *f)
{
    fputs("  --e2e-pairs N         live end to end on stock, N rounds of: allocd with plain RPUSH\n"
          "                        producers, allocd with the position transaction, Lua; every\n"
          "                        allocd result read once by a poller inside the clock (the headline);\n"
          "                        then the floors: Redis alone for RPUSH + HGET (redis-benchmark),\n"
          "                        and for the contract's own writes, 3 runs (floor_contract.h)\n"
          "  --open-loop           paced (open-loop) allocd and Lua at 25/50/75/90% of their\n"
          "                        e2e saturation: offered vs accepted, p50/p99/p100\n"
          "  --saturation R        open loop: 100% = R req/s for both designs (no rounds to measure it)\n"
          "  --open-loop-pcts LIST open loop: shares of saturation (25,50,75,90)\n"
          "  --same-rate-pairs N   open loop: N pairs of runs of allocd and Lua both offered Lua's\n"
          "                        50%-of-saturation rate, for the p99 target (--open-loop-runs;\n"
          "                        with --targets: 9)\n"
          "  --open-loop-runs N    open loop: runs per row, the designs alternating; the row shows the\n"
          "                        medians and every run's p99 (3); saturation without --e2e-pairs or\n"
          "                        --saturation: the median of 3 e2e rounds\n"
          "  --timeline            each allocd e2e and open-loop row per 100 ms: latency, the load\n"
          "                        generator's own lag (sentms), how many requests wait in the\n"
          "                        queue and at the poller, and the share of the window Redis ran,\n"
          "                        Redis waited for a CPU and allocd ran; then the latency counted\n"
          "                        from the send (timeline.h; without --e2e-pairs or --scenario\n"
          "                        it implies --open-loop); with --scenario, each prepushed row's\n"
          "                        drain per 100 ms: requests decided, the share Redis ran, Redis\n"
          "                        waited for a CPU and allocd ran\n"
          "  --log-format F        allocd's log_format: chunk (allocd's default) or event\n"
          "  --heap-reserve-mb MB  allocd's heap_reserve_mb (allocd's default unless given; 0 under\n"
          "                        --memory and --profile-memory, which read memory from RSS)\n"
          "  --redis-args \"ARGS\"   more arguments for the private redis-server (measuring a setting)\n"
          "  --peek                e2e rounds also run producers learning their position with\n"
          "                        HGET dequeued; RPUSH; HGET dequeued (no MULTI)\n"
          "  --targets-e2e         print the TARGET lines of the e2e rounds and the open loop\n"
          "  --aof                 the private Redis with appendonly yes, appendfsync everysec\n"
          "  --pin                 Redis on a core of its own: the private redis-server on CPU 0;\n"
          "                        allocd, the producers, the poller and the Lua callers on the others\n"
          "  --rt                  the private redis-server (priority 20) and each allocd (10) under\n"
          "                        SCHED_FIFO, reset on fork, as DEPLOYMENT.md runs them for latency;\n"
          "                        the producers, the poller and the Lua callers stay SCHED_OTHER\n"
          "                        (needs root or CAP_SYS_NICE)\n"
          "  --lua-pairs N         run stock prepushed allocd + Lua N times (fresh daemon each) and\n"
          "                        judge the Lua target on the median ratio (with --targets: 9,\n"
          "                        enough for a 95% interval of the median);\n"
          "                        then the contract's floor for the drain, 3 runs\n"
          "  --tickets             the tickets scenario: --users buyers (100000) for a tenth as many\n"
          "                        tickets, --hold-ms (2000), allocd wait:true vs Lua with polling losers\n"
          "  --tickets-seconds S   tickets: how long each design runs after its first wave (12)\n"
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
          "  --seed N              request mix seed (1)\n"
          "  --dry-run             check the options and the allocd binary, run nothing\n", f);
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
            for (int i = 0; i < SC_COUNT; i++) o->scenarios[i] = i != SC_HOUSING;
        } else if (!strcmp(name, "housing-elig")) {
            if (!o->housing_pairs) o->housing_pairs = 1;
        } else if (scenario_parse(name, &sc) == 0 && sc != SC_HOUSING) {
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
    for (int i = 0; i < SC_COUNT; i++) o->scenarios[i] = i != SC_HOUSING;
    o->designs |= D_ALLOCD | D_LUA | D_LOCK;
    o->rate_test = 1;
    /* nine: the fewest pairs whose median has a 95% interval that
     * leaves out the extremes (x(2)..x(8), report.c) */
    if (!o->lua_pairs) o->lua_pairs = 9;
    if (!o->e2e_pairs) o->e2e_pairs = 9;
    if (!o->same_pairs) o->same_pairs = 9;
    o->open_loop = 1;
    if (!o->probe) o->probe = 300;
    if (!o->n_sweep) parse_sweep(o, "256,1024");
}

enum {
    O_SCENARIO = 256, O_MODE, O_REQUESTS, O_USERS, O_ITEMS, O_HOLD, O_PRODUCERS, O_DEPTH,
    O_RATE, O_COMPARE, O_LUA_S, O_LOCK_T, O_LOCK_SLEEP, O_LOCK_S, O_LOCK_PRE, O_PROBE,
    O_RATE_TEST, O_SWEEP, O_MEMORY, O_TICKETS, O_TARGETS, O_CHUNK, O_REGISTRY, O_REDIS, O_ALLOCD,
    O_NO_DAEMON, O_PID, O_PREFIX, O_TIMEOUT, O_SEED, O_DESIGNS, O_BATCHES, O_TICK, O_HELP,
    O_LUA_PAIRS, O_E2E_PAIRS, O_OPEN_LOOP, O_TIMELINE, O_AOF, O_LOG_FORMAT, O_SATURATION, O_OL_PCTS, O_OL_RUNS, O_SAME_PAIRS, O_REDIS_ARGS, O_TARGETS_E2E, O_PEEK, O_PIN, O_RT,
    O_CL_MASTERS, O_CL_INSTANCES, O_CL_SWEEP, O_RUNS, O_HOUSING_PAIRS, O_PROFILE_MEMORY,
    O_TICKETS_S, O_DRY_RUN, O_HEAP_RESERVE
};

static const struct option long_opts[] = {
    { "scenario", 1, 0, O_SCENARIO }, { "mode", 1, 0, O_MODE }, { "requests", 1, 0, O_REQUESTS },
    { "users", 1, 0, O_USERS }, { "items", 1, 0, O_ITEMS }, { "hold-ms", 1, 0, O_HOLD },
    { "producers", 1, 0, O_PRODUCERS }, { "depth", 1, 0, O_DEPTH }, { "rate", 1, 0, O_RATE },
    { "compare", 0, 0, O_COMPARE }, { "lua-seconds", 1, 0, O_LUA_S },
    { "lock-threads", 1, 0, O_LOCK_T }, { "lock-sleep-us", 1, 0, O_LOCK_SLEEP },
    { "lock-seconds", 1, 0, O_LOCK_S }, { "lock-precheck", 0, 0, O_LOCK_PRE },
    { "probe", 1, 0, O_PROBE }, { "rate-test", 0, 0, O_RATE_TEST }, { "chunk-sweep", 1, 0, O_SWEEP },
    { "tickets", 0, 0, O_TICKETS }, { "tickets-seconds", 1, 0, O_TICKETS_S }, { "dry-run", 0, 0, O_DRY_RUN }, { "memory", 0, 0, O_MEMORY }, { "targets", 0, 0, O_TARGETS }, { "lua-pairs", 1, 0, O_LUA_PAIRS }, { "chunk", 1, 0, O_CHUNK },
    { "registry-ms", 1, 0, O_REGISTRY }, { "redis", 1, 0, O_REDIS }, { "allocd", 1, 0, O_ALLOCD },
    { "no-daemon", 0, 0, O_NO_DAEMON }, { "pid", 1, 0, O_PID }, { "prefix", 1, 0, O_PREFIX },
    { "timeout", 1, 0, O_TIMEOUT }, { "seed", 1, 0, O_SEED }, { "help", 0, 0, O_HELP },
    { "designs", 1, 0, O_DESIGNS }, { "batches", 1, 0, O_BATCHES },
    { "tick-us", 1, 0, O_TICK },
    { "e2e-pairs", 1, 0, O_E2E_PAIRS }, { "open-loop", 0, 0, O_OPEN_LOOP }, { "timeline", 0, 0, O_TIMELINE }, { "aof", 0, 0, O_AOF }, { "pin", 0, 0, O_PIN }, { "rt", 0, 0, O_RT },
    { "log-format", 1, 0, O_LOG_FORMAT }, { "heap-reserve-mb", 1, 0, O_HEAP_RESERVE }, { "saturation", 1, 0, O_SATURATION },
    { "open-loop-pcts", 1, 0, O_OL_PCTS }, { "open-loop-runs", 1, 0, O_OL_RUNS }, { "same-rate-pairs", 1, 0, O_SAME_PAIRS }, { "redis-args", 1, 0, O_REDIS_ARGS },
    { "targets-e2e", 0, 0, O_TARGETS_E2E }, { "peek", 0, 0, O_PEEK },
    { "cluster-masters", 1, 0, O_CL_MASTERS }, { "instances", 1, 0, O_CL_INSTANCES },
    { "cluster-sweep", 1, 0, O_CL_SWEEP }, { "runs", 1, 0, O_RUNS },
    { "housing-pairs", 1, 0, O_HOUSING_PAIRS }, { "profile-memory", 1, 0, O_PROFILE_MEMORY },
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
    case O_HOUSING_PAIRS: o->housing_pairs = atoi(v); return o->housing_pairs >= 1 && o->housing_pairs <= MAX_HOUSING_PAIRS ? 0 : -1;
    case O_PROFILE_MEMORY: o->profile_memory = atol(v); return o->profile_memory >= 1000 ? 0 : -1;
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
    case O_TICKETS_S: o->tickets_seconds = atoi(v); return o->tickets_seconds >= 1 && o->tickets_seconds <= 3600 ? 0 : -1;
    case O_DRY_RUN: o->dry_run = 1; return 0;
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
    case O_SAME_PAIRS: o->same_pairs = atoi(v); o->open_loop = 1; return o->same_pairs >= 0 && o->same_pairs <= MAX_OL_RUNS ? 0 : -1;
    case O_LOG_FORMAT:
        o->log_format = v;
        return !strcmp(v, "event") || !strcmp(v, "chunk") ? 0 : -1;
    case O_HEAP_RESERVE:
        o->heap_reserve_mb = v;
        return *v && strspn(v, "0123456789") == strlen(v) && strlen(v) <= 5 ? 0 : -1;
    case O_LUA_PAIRS: o->lua_pairs = atoi(v); return o->lua_pairs >= 1 && o->lua_pairs <= 20 ? 0 : -1;
    case O_REDIS: o->redis_url = v; return 0;
    case O_ALLOCD: o->allocd_bin = v; return 0;
    case O_NO_DAEMON: o->no_daemon = 1; return 0;
    case O_PREFIX: o->prefix = v; return 0;
    case O_HELP: usage(stdout); exit(0);
    }
    return -1;
}

int args_heap_reserved(const options *o)
{
    return !o->no_daemon && !(o->heap_reserve_mb && atoi(o->heap_reserve_mb) == 0);
}

int args_parse(options *o, int argc, char **argv)
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
    if (!any && !o->housing_pairs && !o->profile_memory) o->scenarios[SC_STOCK] = 1;
    /* the reserve is resident from the start: memory per participant or
     * per profile, read from RSS, would not see what fits in it */
    if ((o->memory || o->profile_memory) && !o->heap_reserve_mb) o->heap_reserve_mb = "0";
    if (o->timeline && !o->e2e_pairs && !o->scenarios_given) o->open_loop = 1;
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
