/* chaos_core.c -- the chaos run of allocd (see chaos_core.h for what and why).
 *
 * Threads: N producers (seeded request mix, paced over the push phase), one
 * follower (reads results of buys and pushes confirms and cancels for the
 * granted ones, some late enough to meet an expiry), one admin thread
 * (set_capacity, pause/resume, DEBUG SLEEP) and the main thread, which runs
 * the fault schedule (kill -9 allocd, restart Redis, outage) and then the
 * drain and the checks. Every push retries until Redis acknowledges it, so
 * at the end every pushed id is known to be in Redis at least once.
 *
 * This file holds the run itself (setup, Redis single or Cluster, the
 * allocd instances, the phases, the report); chaos_int.h lists the others:
 * the generators, the fault schedule, the checker and the router of Redis
 * commands by key slot.
 */
#include "chaos_int.h"

/* ------------------------------------------------------------ basics -- */

double chaos__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

uint32_t chaos__rnd(uint64_t *s, uint32_t n) { return n ? (uint32_t)(splitmix64_next(s) % n) : 0; }
double chaos__rndf(uint64_t *s) { return (double)(splitmix64_next(s) >> 11) / (double)(1ULL << 53); }

void *chaos__xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "chaos: out of memory\n"); abort(); }
    return p;
}

void *chaos__xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) { fprintf(stderr, "chaos: out of memory\n"); abort(); }
    return p;
}

char *chaos__xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = chaos__xmalloc(n);
    memcpy(p, s, n);
    return p;
}

char *chaos__xmemdup(const char *s, size_t n)
{
    char *p = chaos__xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* ---------------------------------------------------------- records -- */




size_t chaos__recvec_add(recvec *rv, rec r)
{
    if (rv->n == rv->cap) {
        rv->cap = rv->cap ? rv->cap * 2 : 1024;
        rec *nv = realloc(rv->v, rv->cap * sizeof *nv);
        if (!nv) { fprintf(stderr, "chaos: out of memory\n"); abort(); }
        rv->v = nv;
    }
    rv->v[rv->n] = r;
    return rv->n++;
}

static void recvec_free(recvec *rv)
{
    for (size_t i = 0; i < rv->n; i++) {
        free(rv->v[i].id);
        free(rv->v[i].json);
        free(rv->v[i].user);
    }
    free(rv->v);
    memset(rv, 0, sizeof *rv);
}

/* ------------------------------------------------------- the context -- */









void chaos__violation(chaos_ctx *cx, long *counter, const char *fmt, ...)
{
    pthread_mutex_lock(&cx->msg_mu);
    chaos_report *r = cx->rep;
    if (counter) (*counter)++;
    r->violations++;
    if (r->n_msgs < CHAOS_MAX_MSGS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msgs[r->n_msgs], sizeof r->msgs[0], fmt, ap);
        va_end(ap);
        r->n_msgs++;
    }
    pthread_mutex_unlock(&cx->msg_mu);
}


void chaos__progress(chaos_ctx *cx, const char *fmt, ...)
{
    if (!cx->p->verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "chaos %7.2fs: ", chaos__now_s() - cx->t0);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ------------------------------------------------------ pushing, retry -- */

/* Sleeps (in small steps) until t seconds after the start. */
void chaos__sleep_until(chaos_ctx *cx, double t)
{
    for (;;) {
        double left = t - (chaos__now_s() - cx->t0);
        if (left <= 0) return;
        harness_sleep_ms(left > 0.05 ? 50 : (int)(left * 1000) + 1);
    }
}

/* ------------------------------------------------------------ setup -- */

static void define_batches(chaos_ctx *cx)
{
    long R = cx->p->requests;
    batch_def *b = &cx->b[B_CS1];
    b->name = "cs1";
    b->per_user = 3;
    b->n_items = 5;
    long long caps1[] = { R / 25 + 20, R / 60 + 10, 150, 3, 0 };
    for (int i = 0; i < b->n_items; i++) {
        snprintf(b->items[i], sizeof b->items[i], "sku%d", i + 1);
        b->caps[i] = caps1[i];
    }
    b = &cx->b[B_CS2];
    b->name = "cs2";
    b->per_user = 2;
    b->hold_ms = 700;
    b->wait_ms = CHAOS_WAIT_MS;
    b->n_items = 4;
    long long caps2[] = { R / 60 + 20, R / 150 + 10, 40, 2 };
    for (int i = 0; i < b->n_items; i++) {
        snprintf(b->items[i], sizeof b->items[i], "hold%d", i + 1);
        b->caps[i] = caps2[i];
    }
    b = &cx->b[B_CR1];
    b->name = "cr1";
    b->room = 1;
    b->per_user = 1;
    b->hold_ms = 900;            /* held beds; nobody confirms them here (the follower
                                  * is for stock), so every bed turns over for the waitlist */
    b->wait_ms = CHAOS_WAIT_MS;
    b->max_group = 4;
    b->staff = 1;
    b->n_items = 80;
    static const char *const building[] = { "A", "B", "C" };
    for (int i = 0; i < b->n_items; i++) {
        snprintf(b->items[i], sizeof b->items[i], "R%03d", i + 1);
        b->caps[i] = 1 + i % 4;
        snprintf(b->attrs[i], sizeof b->attrs[i], "{\"building\":\"%s\",\"floor\":%d,\"gender\":\"%s\"}",
                 building[i % 3], 1 + (i / 3) % 4, i % 2 ? "M" : "F");
    }
    /* contract 11: listed groups that fill rooms exactly, an opening a few
     * seconds in with a draw by points, staff placements */
    b = &cx->b[B_CR2];
    b->name = "cr2";
    b->room = 1;
    b->per_user = 1;
    b->max_group = 4;
    b->listed = 1;
    b->exact = 1;
    b->staff = 1;
    b->early_ms = cx->p->seconds * 200;   /* a fifth of the push phase, 2 to 8 s */
    if (b->early_ms < 2000) b->early_ms = 2000;
    if (b->early_ms > 8000) b->early_ms = 8000;
    b->n_items = 60;
    for (int i = 0; i < b->n_items; i++) {
        snprintf(b->items[i], sizeof b->items[i], "H%03d", i + 1);
        b->caps[i] = 1 + i % 4;
        snprintf(b->attrs[i], sizeof b->attrs[i], "{\"building\":\"%s\",\"floor\":%d,\"gender\":\"%s\"}",
                 building[(i / 2) % 3], 1 + i % 3, i % 2 ? "M" : "F");
    }
    chaos__rules_define(cx);
}

/* P:{B}:meta of batch b: its kind and the options it uses. */
static int write_meta(chaos_ctx *cx, rconn *c, const batch_def *b, uint16_t sl)
{
    redisReply *r = chaos__rcmd(cx, c, sl, "HSET alloc:{%s}:meta kind %s per_user %d hold_ms %d max_group %d groups %s wait_ms %d",
                                b->name, b->room ? "room" : "stock", b->per_user, b->hold_ms,
                                b->max_group ? b->max_group : 8, b->listed ? "listed" : "formed", b->wait_ms);
    int bad = !r || r->type == REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    if (!bad && b->exact) {
        r = chaos__rcmd(cx, c, sl, "HSET alloc:{%s}:meta group_fill exact", b->name);
        bad = !r || r->type == REDIS_REPLY_ERROR;
        if (r) freeReplyObject(r);
    }
    if (!bad && b->early_ms) {
        cx->opens_at = harness_now_ms() + b->early_ms;
        r = chaos__rcmd(cx, c, sl, "HSET alloc:{%s}:meta early shuffle draw_by points opens_at %lld", b->name,
                        cx->opens_at);
        bad = !r || r->type == REDIS_REPLY_ERROR;
        if (r) freeReplyObject(r);
    }
    return bad ? -1 : 0;
}

static int create_batches(chaos_ctx *cx)
{
    rconn c = { { NULL } };
    int bad = 0;
    for (int bi = 0; bi < NB; bi++) {
        const batch_def *b = &cx->b[bi];
        uint16_t sl = cx->bslot[bi];
        bad |= write_meta(cx, &c, b, sl) < 0 || chaos__rules_write(cx, &c, bi) < 0;
        redisReply *r;
        for (int i = 0; i < b->n_items; i++) {
            r = chaos__rcmd(cx, &c, sl, "HSET alloc:{%s}:capacity %s %lld", b->name, b->items[i], b->caps[i]);
            bad |= !r || r->type == REDIS_REPLY_ERROR;
            if (r) freeReplyObject(r);
            if (b->attrs[i][0]) {
                r = chaos__rcmd(cx, &c, sl, "HSET alloc:{%s}:attrs %s %s", b->name, b->items[i], b->attrs[i]);
                bad |= !r || r->type == REDIS_REPLY_ERROR;
                if (r) freeReplyObject(r);
            }
        }
        r = chaos__rcmd(cx, &c, chaos__key_slot("alloc:batches"), "SADD alloc:batches %s", b->name);
        bad |= !r || r->type == REDIS_REPLY_ERROR;
        if (r) freeReplyObject(r);
    }
    chaos__rc_close(&c);
    return bad ? -1 : 0;
}

/* ---------------------------------------------------------- cluster -- */

static harness_redis *node_redis(chaos_ctx *cx, int i) { return i == 0 ? &cx->redis : &cx->node[i]; }

/* Reads CLUSTER SLOTS from node 0 into cx->slot_node. */
static int load_slot_map(chaos_ctx *cx)
{
    redisContext *c = chaos__node_connect(cx, 0);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    cluster_map m;
    cluster_map_init(&m);
    int rc = r && cluster_map_parse(&m, r, "127.0.0.1") == 0 ? 0 : -1;
    for (int s = 0; rc == 0 && s < CLUSTER_SLOTS; s++) {
        const cluster_node *n = cluster_map_node(&m, (uint16_t)s);
        int idx = -1;
        for (int i = 0; n && i < cx->n_nodes; i++)
            if (n->port == cx->port[i]) idx = i;
        if (idx < 0) rc = -1;
        else atomic_store(&cx->slot_node[s], (int16_t)idx);
    }
    cluster_map_free(&m);
    if (r) freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* Three masters on loopback, no replicas, made a cluster by redis-cli. */
static int cluster_start(chaos_ctx *cx)
{
    cx->n_nodes = MAX_NODES;
    int p = 17000 + (int)(getpid() % 1000) * 3;
    for (int i = 0; i < cx->n_nodes; i++) {
        cx->port[i] = p = harness_cluster_port(p + 1);
        if (p < 0) return -1;
        char extra[320];
        snprintf(extra, sizeof extra, "--port %d --bind 127.0.0.1 --cluster-enabled yes "
                 "--cluster-config-file nodes.conf --cluster-node-timeout 5000 --appendonly no "
                 "--enable-debug-command yes", p);
        if (harness_redis_start(node_redis(cx, i), extra) < 0) return -1;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d "
             "--cluster-replicas 0 --cluster-yes >/dev/null 2>&1", cx->port[0], cx->port[1], cx->port[2]);
    if (system(cmd) != 0) return -1;
    for (int waited = 0; waited < 20000; waited += 100) {
        int ok = 0;
        for (int i = 0; i < cx->n_nodes; i++) {
            redisContext *c = chaos__node_connect(cx, i);
            char *info = c ? harness_str(c, "CLUSTER INFO") : NULL;
            if (info && strstr(info, "cluster_state:ok")) ok++;
            free(info);
            if (c) redisFree(c);
        }
        if (ok == cx->n_nodes) return load_slot_map(cx);
        harness_sleep_ms(100);
    }
    return -1;
}

static void nodes_stop(chaos_ctx *cx)
{
    for (int i = cx->n_nodes - 1; i >= 0; i--)
        if (node_redis(cx, i)->dir[0]) harness_redis_stop(node_redis(cx, i));
}

/* Names the batches so that each lives on another master: cs1, cs2, cr1 or,
 * when their slots share a node, the first of cs1-a, cs1-b, ... that does
 * not. */
static void place_batches(chaos_ctx *cx)
{
    static const char *const base[NB] = { "cs1", "cs2", "cr1", "cr2" };
    int used[MAX_NODES] = { 0 };
    for (int bi = 0; bi < NB; bi++) {
        for (int v = 0; v < 27; v++) {
            if (v == 0) snprintf(cx->names[bi], sizeof cx->names[bi], "%s", base[bi]);
            else snprintf(cx->names[bi], sizeof cx->names[bi], "%s-%c", base[bi], 'a' + v - 1);
            int node = chaos__slot_node(cx, chaos__key_slot(cx->names[bi]));
            if (!cx->cluster || !used[node] || bi >= cx->n_nodes) break;
        }
        cx->b[bi].name = cx->names[bi];
        cx->bslot[bi] = chaos__key_slot(cx->names[bi]);
        used[chaos__slot_node(cx, cx->bslot[bi])] = 1;
    }
}

static void scan_logs(chaos_ctx *cx)
{
    DIR *d = opendir(cx->redis.dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "allocd-", 7) || !strstr(de->d_name, ".log")) continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", cx->redis.dir, de->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char line[2048];
        while (fgets(line, sizeof line, f)) {
            if (strstr(line, "connection lost") || strstr(line, "cannot connect")) cx->rep->log_connection_lost++;
            if (strstr(line, "timeout") || strstr(line, "timed out")) cx->rep->log_timeouts++;
            if (strstr(line, ": connected to ")) cx->rep->log_connected++;
        }
        fclose(f);
    }
    closedir(d);
}

void chaos_params_default(chaos_params *p)
{
    memset(p, 0, sizeof *p);
    p->requests = 20000;
    p->kills = 8;
    p->redis_restarts = 2;
    p->seed = 1;
    p->producers = 3;
}

/* Fills in what the caller left zero, within the limits. */
static void params_settle(chaos_params *p)
{
    if (p->producers <= 0) p->producers = 3;
    if (p->producers > 64) p->producers = 64;
    if (p->seconds <= 0) p->seconds = (int)(p->requests / 2500) + 10;
    if (p->drain_seconds <= 0) p->drain_seconds = 90 + (int)(p->requests / 1000);
    if (p->instances <= 0) p->instances = p->cluster ? 3 : 1;
    if (p->answer_ms <= 0) p->answer_ms = 15000;
    if (p->instances > MAX_INST) p->instances = MAX_INST;
    if (p->cluster) {   /* the cluster's nodes are not restarted in this mode */
        p->redis_restarts = 0;
        p->outage_ms = 0;
    }
}

/* Redis (one node, or a 3-master cluster) with the batches on it. Returns
 * -1, the reason recorded as a violation and every node stopped, if not. */
static int start_redis(chaos_ctx *cx)
{
    chaos_report *rep = cx->rep;
    cx->cluster = cx->p->cluster;
    cx->n_nodes = 1;
    if (cx->cluster) {
        if (cluster_start(cx) < 0) {
            chaos__violation(cx, &rep->other, "could not start a 3-master Redis Cluster (redis-server, redis-cli --cluster create)");
            nodes_stop(cx);
            return -1;
        }
    } else if (harness_redis_start(&cx->redis, "--appendonly yes --appendfsync always --enable-debug-command yes") < 0) {
        chaos__violation(cx, &rep->other, "redis-server did not start");
        return -1;
    }
    rep->nodes = cx->n_nodes;
    place_batches(cx);
    snprintf(rep->dir, sizeof rep->dir, "%s", cx->redis.dir);
    if (create_batches(cx) < 0) {
        chaos__violation(cx, &rep->other, "could not create the batches");
        nodes_stop(cx);
        return -1;
    }
    for (int bi = 0; bi < NB && cx->cluster; bi++)
        chaos__progress(cx, "batch %s: slot %u on node %d (port %d)", cx->b[bi].name, cx->bslot[bi],
                 chaos__slot_node(cx, cx->bslot[bi]), cx->port[chaos__slot_node(cx, cx->bslot[bi])]);
    return 0;
}

/* Each instance's config: the common part and, with several instances or
 * a cluster, a fixed name (one instance keeps the harness's naming, a new
 * name per start; several come back under theirs), the lease and the
 * registry's pace, and in a cluster the node it starts from. */
static void write_instance_confs(chaos_ctx *cx)
{
    const chaos_params *p = cx->p;
    snprintf(cx->allocd_conf, sizeof cx->allocd_conf,
             "chunk = 64;\nredis_timeout_ms = 1000;\nconnect_timeout_ms = 1000;\n"
             "backoff_min_ms = 20;\nbackoff_max_ms = 400;\nidle_wait_ms = 200;\nanswer_ms = %d;\n%s",
             p->answer_ms, p->log_chunk ? "log_format = \"chunk\";\n" : "");
    for (int i = 0; i < cx->n_inst; i++) {
        if (p->cluster)
            snprintf(cx->inst_conf[i], sizeof cx->inst_conf[i],
                     "%sredis = \"redis://127.0.0.1:%d\";\ncluster = \"yes\";\ninstance = \"chaos-%d\";\n"
                     "lease_ttl_ms = 2000;\nregistry_interval_ms = 200;\n",
                     cx->allocd_conf, cx->port[i % cx->n_nodes], i);
        else if (cx->n_inst > 1)
            snprintf(cx->inst_conf[i], sizeof cx->inst_conf[i],
                     "%sinstance = \"chaos-%d\";\nlease_ttl_ms = 2000;\nregistry_interval_ms = 200;\n",
                     cx->allocd_conf, i);
        else
            snprintf(cx->inst_conf[i], sizeof cx->inst_conf[i], "%s", cx->allocd_conf);
    }
}

/* --archive: PostgreSQL and the archiver beside the run (one Redis only). */
static void start_archive(chaos_ctx *cx, chaos_archive *arch)
{
    if (!cx->p->archive || cx->p->cluster) return;
    if (chaos_archive_start(arch, cx->redis.url, cx->redis.dir) < 0) {
        chaos__violation(cx, &cx->rep->other, "--archive: PostgreSQL or the archiver did not start");
        chaos_archive_stop(arch);
        return;
    }
    cx->arch = arch;
}

/* The producers, the follower, the admin and the answer watcher. */
static void start_clients(chaos_ctx *cx)
{
    const chaos_params *p = cx->p;
    cx->n_producers = p->producers;
    cx->prod = chaos__xcalloc((size_t)p->producers, sizeof *cx->prod);
    atomic_store(&cx->producers_running, p->producers);
    for (int i = 0; i < p->producers; i++) {
        producer *pr = &cx->prod[i];
        pr->cx = cx;
        pr->idx = i;
        pr->rng = p->seed * 1000003ULL + (uint64_t)i * 7919ULL + 1;
        pr->n = p->requests / p->producers + (i < p->requests % p->producers ? 1 : 0);
        pthread_create(&pr->th, NULL, chaos__producer_main, pr);
    }
    cx->follower = (producer){ .cx = cx, .idx = 100, .rng = p->seed * 31ULL + 17 };
    cx->admin = (producer){ .cx = cx, .idx = 101, .rng = p->seed * 131ULL + 29 };
    pthread_create(&cx->follower.th, NULL, chaos__follower_main, &cx->follower);
    pthread_create(&cx->admin.th, NULL, chaos__admin_main, &cx->admin);
    pthread_create(&cx->answer_th, NULL, chaos__answer_main, cx);
    chaos__progress(cx, "pushing %ld requests over %d s with %d producers", p->requests, p->seconds, p->producers);
}

/* allocd drains what was pushed; reservations still held must run out and
 * be expired, and waits end by wait_ms (a request served at the last
 * moment holds for hold_ms more); then every instance stops on SIGTERM. */
static void drain_and_stop(chaos_ctx *cx)
{
    chaos_report *rep = cx->rep;
    double dstart = chaos__now_s();
    chaos__allocd_watch(cx);
    if (chaos__wait_drain(cx) < 0)
        chaos__violation(cx, &rep->lost, "allocd did not drain within %d s (queue or ctl not empty, or stats do not add up)",
                  cx->p->drain_seconds);
    harness_sleep_ms(CHAOS_WAIT_MS + cx->b[B_CR1].hold_ms + 1500);
    if (chaos__wait_drain(cx) < 0) chaos__violation(cx, &rep->lost, "allocd busy again after the expiry wait");
    rep->drain_seconds = chaos__now_s() - dstart;
    atomic_store(&cx->answer_stop, 1);
    pthread_join(cx->answer_th, NULL);
    if (rep->max_unanswered_s * 1000 > cx->p->answer_ms)
        chaos__violation(cx, &rep->unanswered_late, "%s: a request stayed unanswered %.1f s while the batch was open "
                  "(answer_ms %d, contract 9.6)", rep->max_unanswered_batch, rep->max_unanswered_s, cx->p->answer_ms);
    chaos__allocd_watch(cx);
    for (int i = 0; i < cx->n_inst; i++) {
        int st = harness_allocd_stop(&cx->allocd[i]);
        if (st != 0) {
            rep->allocd_final_exit = st;
            chaos__violation(cx, &rep->other, "allocd instance %d exited %d after SIGTERM (expected 0: drain and exit); log %s",
                      i, st, cx->allocd[i].log);
        }
    }
}

/* Every client's push counters, summed into the report. */
static void sum_pushes(chaos_ctx *cx)
{
    chaos_report *rep = cx->rep;
    for (int i = 0; i < cx->n_producers; i++) {
        producer *pr = &cx->prod[i];
        rep->pushed += pr->k.pushed;
        rep->push_attempts += pr->k.attempts;
        rep->push_retries += pr->k.retries;
        rep->dup_pushes += pr->k.dups;
        rep->garbage_invalid += pr->k.invalid;
        for (int b = 0; b < NB; b++) rep->garbage_dead += pr->k.dead_acked[b];
    }
    rep->pushed += cx->follower.k.pushed + cx->admin.k.pushed;
    rep->push_attempts += cx->follower.k.attempts + cx->admin.k.attempts;
    rep->push_retries += cx->follower.k.retries + cx->admin.k.retries;
    rep->ctl_pushed = cx->admin.k.pushed;
}

/* --archive: the archiver catches up and the archive reconciles with Redis. */
static void check_archive(chaos_ctx *cx)
{
    if (!cx->arch) return;
    chaos_report *rep = cx->rep;
    const char *names[NB];
    char msg[400];
    for (int bi = 0; bi < NB; bi++) names[bi] = cx->b[bi].name;
    chaos__progress(cx, "archiving and reconciling");
    rep->reconcile_failed = chaos_archive_check(cx->arch, names, NB, msg, sizeof msg);
    rep->archiver_kills = cx->arch->kills;
    if (rep->reconcile_failed) chaos__violation(cx, &rep->mismatches, "archive: %s", msg);
    chaos_archive_stop(cx->arch);
    cx->arch = NULL;
}

static void ctx_free(chaos_ctx *cx)
{
    for (int i = 0; i < cx->n_producers; i++) recvec_free(&cx->prod[i].recs);
    recvec_free(&cx->follower.recs);
    recvec_free(&cx->admin.recs);
    free(cx->prod);
    free(cx->cand);
    pthread_mutex_destroy(&cx->mu);
    pthread_mutex_destroy(&cx->msg_mu);
    free(cx);
}

int chaos_run(const chaos_params *params, chaos_report *rep)
{
    chaos_params p = *params;
    params_settle(&p);
    memset(rep, 0, sizeof *rep);
    signal(SIGPIPE, SIG_IGN);   /* a write to a Redis that just died must not kill us */

    chaos_ctx *cx = calloc(1, sizeof *cx);
    if (!cx) return -1;
    cx->p = &p;
    cx->rep = rep;
    cx->seconds = p.seconds;
    pthread_mutex_init(&cx->mu, NULL);
    pthread_mutex_init(&cx->msg_mu, NULL);
    define_batches(cx);
    uint64_t rng = p.seed * 0x9e3779b97f4a7c15ULL + 12345;
    cx->t0 = chaos__now_s();
    cx->n_inst = p.instances;
    rep->instances = p.instances;
    if (start_redis(cx) < 0) {
        ctx_free(cx);
        return -1;
    }
    write_instance_confs(cx);
    cx->t0 = chaos__now_s();
    for (int i = 0; i < cx->n_inst; i++) chaos__allocd_start(cx, i);
    chaos_archive arch;
    start_archive(cx, &arch);
    start_clients(cx);

    chaos__run_faults(cx, &rng);
    for (int i = 0; i < p.producers; i++) pthread_join(cx->prod[i].th, NULL);
    pthread_join(cx->admin.th, NULL);
    pthread_join(cx->follower.th, NULL);
    rep->push_seconds = chaos__now_s() - cx->t0;
    chaos__progress(cx, "all pushed; draining");
    drain_and_stop(cx);
    chaos__progress(cx, "checking");
    sum_pushes(cx);
    check_archive(cx);
    chaos__tamper(cx);
    chaos__run_checks(cx);
    scan_logs(cx);
    rep->total_seconds = chaos__now_s() - cx->t0;

    if (p.keep) setenv("HARNESS_KEEP", "1", 1);
    nodes_stop(cx);
    ctx_free(cx);
    return rep->violations ? 1 : 0;
}

void chaos_print_report(FILE *f, const chaos_params *p, const chaos_report *r)
{
    fprintf(f,
            "---- chaos report (seed %" PRIu64 ") ----\n"
            "requests pushed   %ld   (RPUSHes incl. retries %ld, connection retries %ld)\n"
            "  of which        %ld duplicate ids, %ld dead garbage, %ld invalid garbage, %ld admin commands\n"
            "distinct ids      %ld\n"
            "topology          %d Redis node%s, %d allocd instance%s\n"
            "kills             %d   (allocd starts %d, unexpected exits %d, final exit %d)\n"
            "pauses            %d   (SIGSTOP past the lease, then SIGCONT)\n"
            "redis restarts    %d   (outages %d, DEBUG SLEEPs %d)\n"
            "results           %ld   (granted %ld, done %ld, rejected %ld, invalid %ld)\n"
            "dead entries      %ld   duplicates %ld\n"
            "log entries       %ld   (grants %ld, expiries %ld, waits %ld)\n"
            "contract 11       %ld not_eligible, %ld staff grants, %ld drawn by points, %ld exact-fill groups,"
            " %ld rule breaches\n"
            "allocd log        %d connection-lost, %d timeout, %d connected lines\n"
            "time              push %.1f s, drain %.1f s, total %.1f s\n"
            "oldest unanswered %.1f s   (batch %s; bound answer_ms %d ms, late %ld)\n"
            "lost              %ld\n"
            "applied twice     %ld\n"
            "oversold          %ld\n"
            "phantom results   %ld\n"
            "replay mismatches %ld\n"
            "stats errors      %ld\n"
            "other             %ld\n"
            "dir               %s%s\n",
            p->seed, r->pushed, r->push_attempts, r->push_retries, r->dup_pushes, r->garbage_dead,
            r->garbage_invalid, r->ctl_pushed, r->distinct_ids, r->nodes, r->nodes == 1 ? "" : "s",
            r->instances, r->instances == 1 ? "" : "s", r->kills, r->allocd_starts,
            r->allocd_unexpected_exits, r->allocd_final_exit, r->pauses, r->redis_restarts, r->outages,
            r->slow_sleeps, r->results, r->granted, r->done, r->rejected, r->invalid,
            r->dead_entries, r->duplicates, r->log_entries, r->grants_logged, r->expiries, r->waits,
            r->not_eligible, r->staff_grants, r->drawn, r->exact_groups, r->rule_breaches,
            r->log_connection_lost, r->log_timeouts, r->log_connected, r->push_seconds,
            r->drain_seconds, r->total_seconds, r->max_unanswered_s,
            r->max_unanswered_batch[0] ? r->max_unanswered_batch : "-", p->answer_ms ? p->answer_ms : 15000,
            r->unanswered_late, r->lost, r->applied_twice, r->oversold,
            r->phantom, r->mismatches, r->stats_errors, r->other, r->dir,
            p->keep ? " (kept)" : " (removed)");
    if (p->archive)
        fprintf(f, "archive           %d archiver kills, %d batches reconcile found different\n",
                r->archiver_kills, r->reconcile_failed);
    for (int i = 0; i < r->n_msgs; i++) fprintf(f, "VIOLATION: %s\n", r->msgs[i]);
    if (r->violations > r->n_msgs)
        fprintf(f, "... and %ld more violations\n", r->violations - r->n_msgs);
    fprintf(f, "chaos: %s (%ld violations)\n", r->violations ? "FAILED" : "PASSED", r->violations);
}
