/* cluster.c -- allocd over M Redis masters with N instances (cluster.h).
 *
 * The bench routes like any cluster client: it reads CLUSTER SLOTS once the
 * cluster is up (nothing migrates during a run) and sends every key to the
 * master of its slot. Batch names are picked so that batch j lands on
 * master j % M and on instance j % N: the slot comes from CRC16 of the hash
 * tag (include/redis/cluster_slots.h), the instance from the same rendezvous
 * score allocd's registry uses (daemon/service/registry.c: FNV-1a of instance,
 * 0xff, batch, then a murmur finaliser). After the run each batch's lease
 * holder is read back, so a wrong guess shows as `misplaced`, not as a
 * silently skewed measurement.
 */
#include "cluster.h"
#include "service/registry.h"

#include "redis/cluster_slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct cnode {
    proc_redis r;             /* its own temp dir; answers on a unix socket too */
    int port;
    redisContext *c;
} cnode;

typedef struct cenv {
    const cluster_opts *o;
    char dir[256];
    int n_nodes;
    cnode node[CB_MAX_NODES];
    int n_inst;
    bench_daemon d[CB_MAX_INST];
    char inst[CB_MAX_INST][32];
    cluster_map map;
    int have_map;
} cenv;

/* ------------------------------------------------------------ routing -- */

static int node_of_key(const cenv *e, const char *key)
{
    if (!e->have_map) return 0;
    const cluster_node *n = cluster_map_node(&e->map, cluster_key_slot(key, strlen(key)));
    for (int i = 0; n && i < e->n_nodes; i++)
        if (e->node[i].port == n->port) return i;
    return 0;
}

/* The node of batch B's keys: every key carries the tag {B}. */
static int node_of_batch(const cenv *e, const char *batch)
{
    char key[200];
    snprintf(key, sizeof key, "x:{%s}:x", batch);
    return node_of_key(e, key);
}

static int owner_of_batch(const cenv *e, const char *batch)
{
    int best = 0;
    uint64_t best_score = registry_placement_score(e->inst[0], batch);
    for (int i = 1; i < e->n_inst; i++) {
        uint64_t sc = registry_placement_score(e->inst[i], batch);
        if (sc > best_score || (sc == best_score && strcmp(e->inst[i], e->inst[best]) < 0)) {
            best = i;
            best_score = sc;
        }
    }
    return best;
}

/* ------------------------------------------------------------ processes - */

/* A redis-server on 127.0.0.1:port in its own temp dir (proc/proc.h), in
 * cluster mode when there is more than one master. */
static int start_node(const cenv *e, cnode *n, int port)
{
    char extra[300];
    snprintf(extra, sizeof extra, "--port %d --bind 127.0.0.1 --appendonly no --cluster-enabled %s "
             "--cluster-config-file nodes.conf --cluster-node-timeout 5000",
             port, e->o->masters > 1 ? "yes" : "no");
    n->port = port;
    if (proc_redis_start(&n->r, "allocbench-node", extra) < 0) return -1;
    n->c = redisConnect("127.0.0.1", port);
    if (n->c && !n->c->err) return 0;
    if (n->c) redisFree(n->c);
    n->c = NULL;
    return -1;
}

static int cluster_ok(cenv *e)
{
    int ok = 0;
    for (int i = 0; i < e->n_nodes; i++) {
        redisReply *r = redisCommand(e->node[i].c, "CLUSTER INFO");
        if (r && r->type == REDIS_REPLY_STRING)
            if (strstr(r->str, "cluster_state:ok") && strstr(r->str, "cluster_known_nodes:")
                && atoi(strstr(r->str, "cluster_known_nodes:") + 20) == e->n_nodes) ok++;
        if (r) freeReplyObject(r);
    }
    return ok == e->n_nodes;
}

/* Slots split evenly, CLUSTER MEET from node 0, then wait for state ok. */
static int form_cluster(cenv *e)
{
    for (int i = 0; i < e->n_nodes; i++) {
        long lo = (long)i * CLUSTER_SLOTS / e->n_nodes, hi = (long)(i + 1) * CLUSTER_SLOTS / e->n_nodes - 1;
        if (bench_ok(e->node[i].c, "CLUSTER ADDSLOTSRANGE %ld %ld", lo, hi) < 0) return -1;
    }
    for (int i = 1; i < e->n_nodes; i++)
        if (bench_ok(e->node[0].c, "CLUSTER MEET 127.0.0.1 %d", e->node[i].port) < 0) return -1;
    for (int waited = 0; waited < 20000; waited += 100) {
        if (cluster_ok(e)) {
            redisReply *r = redisCommand(e->node[0].c, "CLUSTER SLOTS");
            cluster_map_init(&e->map);
            int rc = r ? cluster_map_parse(&e->map, r, "127.0.0.1") : -1;
            if (r) freeReplyObject(r);
            if (rc < 0) return -1;
            e->have_map = 1;
            return 0;
        }
        proc_sleep_us(100000);
    }
    return -1;
}

static int start_nodes(cenv *e, char *err, size_t errlen)
{
    int port = 20000 + (int)(getpid() % 1000) * 5;
    for (int i = 0; i < e->n_nodes; i++) {
        if ((port = proc_cluster_port(port + 1)) < 0) { snprintf(err, errlen, "no free port"); return -1; }
        cnode *n = &e->node[i];
        if (start_node(e, n, port) < 0) {
            snprintf(err, errlen, "redis-server on port %d did not start (see %s)", port,
                     n->r.dir[0] ? n->r.dir : "TMPDIR");
            return -1;
        }
    }
    if (e->n_nodes > 1 && form_cluster(e) < 0) {
        snprintf(err, errlen, "the %d-master cluster did not form", e->n_nodes);
        return -1;
    }
    return 0;
}

/* Every instance's heartbeat is in P:instances, plus three intervals so
 * that each registry has read the others' (same placement everywhere). */
static int start_daemons(cenv *e, char *err, size_t errlen)
{
    const cluster_opts *o = e->o;
    char url[64], key[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", e->node[0].port);
    for (int i = 0; i < e->n_inst; i++) {
        bench_daemon_opts d = {
            .bin = o->allocd_bin, .dir = e->dir, .redis_url = url, .prefix = o->prefix,
            .chunk = o->chunk, .registry_ms = o->registry_ms, .instance = e->inst[i],
            .cluster = o->masters > 1 ? "yes" : "no",
        };
        if (bench_daemon_start(&e->d[i], &d) < 0) { snprintf(err, errlen, "allocd %s did not start", e->inst[i]); return -1; }
    }
    snprintf(key, sizeof key, "%s:instances", o->prefix);
    redisContext *c = e->node[node_of_key(e, key)].c;
    for (int waited = 0; proc_int(c, "HLEN %s", key) < e->n_inst; waited += 20) {
        if (waited > 15000) { snprintf(err, errlen, "not every instance registered in %s", key); return -1; }
        proc_sleep_us(20000);
    }
    int interval = o->registry_ms > 0 ? o->registry_ms : 250;
    proc_sleep_us((int64_t)(3 * interval > 500 ? 3 * interval : 500) * 1000);
    return 0;
}

static long count_lines(const char *path, int show)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    long n = 0;
    while (fgets(line, sizeof line, f))
        if (n++ < show) fprintf(stderr, "allocbench:   %s: %s", path, line);
    fclose(f);
    return n;
}

static void stop_env(cenv *e, cluster_result *res)
{
    for (int i = 0; i < e->n_inst; i++) {
        if (e->d[i].pid > 0) bench_daemon_stop(&e->d[i]);
        if (res && e->d[i].log[0]) res->log_lines += count_lines(e->d[i].log, 5);
    }
    for (int i = 0; i < e->n_nodes; i++) {
        if (e->node[i].c) redisFree(e->node[i].c);
        if (e->node[i].r.dir[0]) proc_redis_stop(&e->node[i].r);
    }
    if (e->have_map) cluster_map_free(&e->map);
    proc_remove_dir(e->dir);
}

/* ------------------------------------------------------------ batches -- */

typedef struct cbatch {
    char name[64];
    char meta[160], capacity[160], queue[160], results[160], stats[160], lease[160];
    int node, inst;
} cbatch;

/* Batch j on master j % M and instance j % N: the first name that fits. */
static void pick_batches(const cenv *e, cbatch *b, int k)
{
    const cluster_opts *o = e->o;
    for (int j = 0; j < k; j++) {
        cbatch *x = &b[j];
        for (int attempt = 0; ; attempt++) {
            snprintf(x->name, sizeof x->name, "cl%d-%d-%d", o->run, j, attempt);
            x->node = node_of_batch(e, x->name);
            x->inst = owner_of_batch(e, x->name);
            if ((x->node == j % e->n_nodes && x->inst == j % e->n_inst) || attempt > 100000) break;
        }
#define K(f, what) snprintf(x->f, sizeof x->f, "%s:{%s}:" what, o->prefix, x->name)
        K(meta, "meta"); K(capacity, "capacity"); K(queue, "queue"); K(results, "results");
        K(stats, "stats"); K(lease, "lease");
#undef K
    }
}

enum { SLICE = 1000, JSON_MAX = 512 };

/* RPUSH batch j's requests (i = j + k * m) in slices, pipelined, on its node. */
static int push_batch(const cenv *e, const cbatch *b, int j, int k)
{
    const workload *w = e->o->w;
    redisContext *c = e->node[b[j].node].c;
    char *json = malloc((size_t)SLICE * JSON_MAX);
    const char **argv = malloc((SLICE + 2) * sizeof *argv);
    size_t *lens = malloc((SLICE + 2) * sizeof *lens);
    if (!json || !argv || !lens) { free(json); free(argv); free(lens); return -1; }
    long sent = 0;
    int rc = 0;
    for (long i0 = j; i0 < w->n; i0 += (long)k * SLICE) {
        int argc = 2;
        argv[0] = "RPUSH"; lens[0] = 5;
        argv[1] = b[j].queue; lens[1] = strlen(b[j].queue);
        for (long i = i0; i < w->n && i < i0 + (long)k * SLICE; i += k) {
            char *buf = json + (size_t)(argc - 2) * JSON_MAX;
            int len = workload_json(w, i, buf, JSON_MAX);
            if (len < 0) rc = -1;
            argv[argc] = buf;
            lens[argc++] = (size_t)(len > 0 ? len : 0);
        }
        redisAppendCommandArgv(c, argc, argv, lens);
        sent++;
        /* one slice at a time: the JSON buffer is reused */
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type == REDIS_REPLY_ERROR) rc = -1;
        if (r) freeReplyObject(r);
    }
    free(json); free(argv); free(lens);
    return sent > 0 ? rc : -1;
}

static int setup_batches(const cenv *e, const cbatch *b, int k)
{
    const workload *w = e->o->w;
    for (int j = 0; j < k; j++) {
        redisContext *c = e->node[b[j].node].c;
        if (bench_ok(c, "HSET %s kind stock per_user %d hold_ms %d", b[j].meta, w->per_user, w->hold_ms) < 0 ||
            workload_write_items(c, w, b[j].capacity, 0) < 0 || push_batch(e, b, j, k) < 0)
            return -1;
    }
    return 0;
}

/* SADD every batch to P:batches, on the node of P:batches. */
static int add_batches(const cenv *e, const cbatch *b, int k)
{
    char key[128];
    snprintf(key, sizeof key, "%s:batches", e->o->prefix);
    const char *argv[2 + 64];
    argv[0] = "SADD";
    argv[1] = key;
    for (int j = 0; j < k; j++) argv[2 + j] = b[j].name;
    return bench_ok_argv(e->node[node_of_key(e, key)].c, 2 + k, argv, NULL);
}

/* Sum of HLEN results over the batches (pipelined per node). */
static long results_now(const cenv *e, const cbatch *b, int k)
{
    for (int j = 0; j < k; j++) redisAppendCommand(e->node[b[j].node].c, "HLEN %s", b[j].results);
    long have = 0;
    for (int j = 0; j < k; j++) {
        redisReply *r = NULL;
        if (redisGetReply(e->node[b[j].node].c, (void **)&r) != REDIS_OK) return -1;
        if (r->type == REDIS_REPLY_INTEGER) have += (long)r->integer;
        freeReplyObject(r);
    }
    return have;
}

/* ------------------------------------------------------------ window --- */

typedef struct cpu_snap {
    int64_t node[CB_MAX_NODES], inst[CB_MAX_INST], self;
} cpu_snap;

static void cpu_read(const cenv *e, cpu_snap *s)
{
    for (int i = 0; i < e->n_nodes; i++) s->node[i] = bench_proc_cpu_us(e->node[i].r.pid);
    for (int i = 0; i < e->n_inst; i++) s->inst[i] = bench_proc_cpu_us(e->d[i].pid);
    s->self = bench_proc_cpu_us(getpid());
}

static void cpu_account(const cenv *e, const cpu_snap *a, const cpu_snap *z, cluster_result *res)
{
    for (int i = 0; i < e->n_nodes; i++) {
        res->node_cpu_s[i] = (double)(z->node[i] - a->node[i]) / 1e6;
        res->cpu_redis_s += res->node_cpu_s[i];
    }
    for (int i = 0; i < e->n_inst; i++) {
        res->inst_cpu_s[i] = (double)(z->inst[i] - a->inst[i]) / 1e6;
        res->cpu_allocd_s += res->inst_cpu_s[i];
    }
    res->cpu_bench_s = (double)(z->self - a->self) / 1e6;
    double n = (double)(res->n > 0 ? res->n : 1);
    res->redis_us_per_req = res->cpu_redis_s * 1e6 / n;
    res->allocd_us_per_req = res->cpu_allocd_s * 1e6 / n;
    res->redis_cores = res->secs > 0 ? res->cpu_redis_s / res->secs : 0;
    res->allocd_cores = res->secs > 0 ? res->cpu_allocd_s / res->secs : 0;
}

static int measure(cenv *e, const cbatch *b, int k, cluster_result *res, char *err, size_t errlen)
{
    cpu_snap a, z;
    long n = e->o->w->n, have = 0;
    cpu_read(e, &a);
    int64_t t0 = proc_wall_us();
    if (add_batches(e, b, k) < 0) { snprintf(err, errlen, "SADD to P:batches failed"); return -1; }
    int64_t deadline = proc_mono_us() + (int64_t)e->o->timeout_s * 1000000;
    int64_t t_first = 0;
    while ((have = results_now(e, b, k)) >= 0 && have < n && proc_mono_us() < deadline) {
        if (have > 0 && !t_first) t_first = proc_wall_us();
        proc_sleep_us(1000);
    }
    int64_t t1 = proc_wall_us();
    if (!t_first) t_first = t1;
    res->secs_drain = (double)(t1 - t_first) / 1e6;
    res->tput_drain = res->secs_drain > 0 ? (double)(have > 0 ? have : 0) / res->secs_drain : 0;
    cpu_read(e, &z);
    res->secs = (double)(t1 - t0) / 1e6;
    res->tput = res->secs > 0 ? (double)(have > 0 ? have : 0) / res->secs : 0;
    cpu_account(e, &a, &z, res);
    if (have < n) { snprintf(err, errlen, "%ld of %ld results after %d s", have, n, e->o->timeout_s); return -1; }
    return 0;
}

/* Results, grants, and who held each batch's lease. */
static void check(cenv *e, const cbatch *b, int k, cluster_result *res)
{
    for (int j = 0; j < k; j++) {
        redisContext *c = e->node[b[j].node].c;
        long share = (e->o->w->n - j + k - 1) / k;
        long have = (long)proc_int(c, "HLEN %s", b[j].results);
        res->results += have;
        res->missing += share - have;
        res->granted += (long)proc_int(c, "HGET %s granted", b[j].stats);
        res->rejected += (long)proc_int(c, "HGET %s rejected", b[j].stats);
        res->per_master[b[j].node]++;
        redisReply *r = redisCommand(c, "GET %s", b[j].lease);
        int holder = -1;
        for (int i = 0; r && r->type == REDIS_REPLY_STRING && i < e->n_inst; i++) {
            size_t l = strlen(e->inst[i]);
            if (!strncmp(r->str, e->inst[i], l) && r->str[l] == '/') holder = i;
        }
        if (r) freeReplyObject(r);
        if (holder >= 0) res->per_instance[holder]++;
        if (holder != b[j].inst) {
            res->misplaced++;
            fprintf(stderr, "allocbench: batch %s: expected instance %s, lease held by %s\n", b[j].name,
                    e->inst[b[j].inst], holder >= 0 ? e->inst[holder] : "nobody");
        }
    }
}

int cluster_bench_run(const cluster_opts *o, cluster_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    err[0] = '\0';
    res->masters = o->masters;
    res->instances = o->instances;
    res->batches = o->batches;
    res->run = o->run;
    res->n = o->w->n;
    res->load = bench_loadavg();
    if (o->masters < 1 || o->masters > CB_MAX_NODES || o->instances < 1 || o->instances > CB_MAX_INST ||
        o->batches < 1 || o->batches > 64) {
        snprintf(err, errlen, "masters 1..%d, instances 1..%d, batches 1..64", CB_MAX_NODES, CB_MAX_INST);
        return -1;
    }
    cenv *e = calloc(1, sizeof *e);
    cbatch *b = calloc((size_t)o->batches, sizeof *b);
    int rc = -1;
    if (!e || !b) { snprintf(err, errlen, "out of memory"); goto out; }
    e->o = o;
    e->n_nodes = o->masters;
    e->n_inst = o->instances;
    for (int i = 0; i < e->n_inst; i++) snprintf(e->inst[i], sizeof e->inst[i], "allocbench-%d", i + 1);
    /* the daemons' configs and logs; each node has a temp dir of its own */
    if (proc_temp_dir(e->dir, sizeof e->dir, "allocbench-cl") < 0) { snprintf(err, errlen, "mkdtemp failed"); goto out; }
    if (start_nodes(e, err, errlen) < 0) goto out;
    pick_batches(e, b, o->batches);
    /* the queues are full before any instance sees a batch */
    if (setup_batches(e, b, o->batches) < 0) { snprintf(err, errlen, "cannot write the batches"); goto out; }
    if (start_daemons(e, err, errlen) < 0) goto out;
    fprintf(stderr, "allocbench: cluster: %d master(s), %d instance(s), %d batches, %ld requests (run %d)...\n",
            o->masters, o->instances, o->batches, o->w->n, o->run);
    rc = measure(e, b, o->batches, res, err, errlen);
    check(e, b, o->batches, res);
out:
    if (e) stop_env(e, res);
    res->ok = rc == 0 && res->missing == 0 && res->misplaced == 0;
    free(e);
    free(b);
    return rc;
}
