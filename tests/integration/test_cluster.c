/* test_cluster.c -- allocd over a real 3-master Redis Cluster on loopback
 * (created with redis-cli --cluster create): batches spread over slots and
 * instances, a SIGKILLed instance taken over, and a batch's slot migrated
 * (CLUSTER SETSLOT + MIGRATE) while requests keep coming, with nothing lost
 * or applied twice. The test's own client routes by slot and follows MOVED
 * like any cluster client. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "redis/cluster_slots.h"
#include "harness.h"
#include "itest.h"

#define NODES 3
#define CONF_FMT "redis = \"redis://127.0.0.1:%d\"; registry_interval_ms = 200; lease_ttl_ms = 2000; " \
                 "backoff_max_ms = 200; cluster = \"yes\";"

typedef struct cluster {
    harness_redis node[NODES];
    int port[NODES];
    redisContext *c[NODES];
} cluster;

static int cluster_start(cluster *cl)
{
    int p = 17000 + (int)(getpid() % 1000) * 3;
    for (int i = 0; i < NODES; i++) {
        cl->port[i] = p = harness_cluster_port(p + 1);
        char extra[256];
        snprintf(extra, sizeof extra, "--port %d --bind 127.0.0.1 --cluster-enabled yes "
                 "--cluster-config-file nodes.conf --cluster-node-timeout 3000 --appendonly no", p);
        if (harness_redis_start(&cl->node[i], extra) < 0) return -1;
        cl->c[i] = redisConnect("127.0.0.1", p);
        if (!cl->c[i] || cl->c[i]->err) return -1;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d "
             "--cluster-replicas 0 --cluster-yes >/dev/null 2>&1", cl->port[0], cl->port[1], cl->port[2]);
    if (system(cmd) != 0) return -1;
    for (int waited = 0; waited < 15000; waited += 100) {
        int ok = 0;
        for (int i = 0; i < NODES; i++) {
            char *info = harness_str(cl->c[i], "CLUSTER INFO");
            if (info && strstr(info, "cluster_state:ok")) ok++;
            free(info);
        }
        if (ok == NODES) return 0;
        harness_sleep_ms(100);
    }
    return -1;
}

static void cluster_stop(cluster *cl)
{
    for (int i = 0; i < NODES; i++) {
        if (cl->c[i]) redisFree(cl->c[i]);
        harness_redis_stop(&cl->node[i]);
    }
}

/* The node index that serves `key`, by asking CLUSTER SLOTS of node 0. */
static int node_of(cluster *cl, const char *key)
{
    redisReply *r = redisCommand(cl->c[0], "CLUSTER SLOTS");
    cluster_map m;
    cluster_map_init(&m);
    cluster_map_parse(&m, r, "127.0.0.1");
    freeReplyObject(r);
    const cluster_node *n = cluster_map_node(&m, cluster_key_slot(key, strlen(key)));
    int idx = -1;
    for (int i = 0; n && i < NODES; i++) if (n->port == cl->port[i]) idx = i;
    cluster_map_free(&m);
    return idx;
}

/* Runs a command on the node owning `key`, following MOVED/ASK/TRYAGAIN. */
static redisReply *ccmd(cluster *cl, const char *key, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    int target = node_of(cl, key), asking = 0;
    for (int attempt = 0; attempt < 50; attempt++) {
        if (asking) { redisReply *a = redisCommand(cl->c[target], "ASKING"); freeReplyObject(a); }
        redisReply *r = redisCommand(cl->c[target], buf);
        if (!r || r->type != REDIS_REPLY_ERROR) return r;
        asking = 0;
        uint16_t slot;
        cluster_node n;
        if ((!strncmp(r->str, "MOVED ", 6) || !strncmp(r->str, "ASK ", 4)) &&
            cluster_parse_redirect(r->str, &slot, &n) == 0) {
            asking = r->str[0] == 'A';
            for (int i = 0; i < NODES; i++) if (cl->port[i] == n.port) target = i;
        } else if (strncmp(r->str, "TRYAGAIN", 8)) {
            return r;
        } else {
            harness_sleep_ms(20);
        }
        freeReplyObject(r);
    }
    return NULL;
}

static long long cint(cluster *cl, const char *key, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    redisReply *r = ccmd(cl, key, "%s", buf);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER) v = r->integer;
    else if (r && r->type == REDIS_REPLY_STRING) v = atoll(r->str);
    if (r) freeReplyObject(r);
    return v;
}

static void create(cluster *cl, const char *b, int units)
{
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:meta", b);
    freeReplyObject(ccmd(cl, key, "HSET alloc:{%s}:meta kind stock per_user 1000000", b));
    freeReplyObject(ccmd(cl, key, "HSET alloc:{%s}:capacity sku %d", b, units));
    freeReplyObject(ccmd(cl, "alloc:batches", "SADD alloc:batches %s", b));
}

static void push(cluster *cl, const char *b, const char *id)
{
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:queue", b);
    redisReply *r = ccmd(cl, key, "RPUSH alloc:{%s}:queue {\"id\":\"%s\",\"user\":\"u\",\"op\":\"buy\",\"item\":\"sku\"}", b, id);
    assert_non_null(r);
    freeReplyObject(r);
}

static int served(cluster *cl, const char *b, const char *id, int timeout_ms)
{
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:results", b);
    for (int w = 0; w <= timeout_ms; w += 20) {
        if (cint(cl, key, "HEXISTS %s %s", key, id) == 1) return 1;
        harness_sleep_ms(20);
    }
    return 0;
}

/* Moves `slot` from node `from` to node `to` the way an operator would:
 * IMPORTING/MIGRATING, MIGRATE every key, then SETSLOT NODE everywhere.
 * When `b` is given, 100 requests are pushed to it mid-migration. */
static void migrate_slot(cluster *cl, uint16_t slot, int from, int to, const char *b, int *pushed)
{
    char *from_id = harness_str(cl->c[from], "CLUSTER MYID"), *to_id = harness_str(cl->c[to], "CLUSTER MYID");
    freeReplyObject(redisCommand(cl->c[to], "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id));
    freeReplyObject(redisCommand(cl->c[from], "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id));
    char id[32];
    for (int i = 300; b && i < 400; i++) { snprintf(id, sizeof id, "m%d", i); push(cl, b, id); (*pushed)++; }
    for (;;) {
        redisReply *keys = redisCommand(cl->c[from], "CLUSTER GETKEYSINSLOT %u 100", slot);
        size_t n = keys ? keys->elements : 0;
        for (size_t k = 0; k < n; k++) {
            redisReply *m = redisCommand(cl->c[from], "MIGRATE 127.0.0.1 %d %s 0 5000 REPLACE",
                                         cl->port[to], keys->element[k]->str);
            if (m) freeReplyObject(m);
        }
        if (keys) freeReplyObject(keys);
        if (n == 0) break;
    }
    for (int i = 0; i < NODES; i++)
        freeReplyObject(redisCommand(cl->c[i], "CLUSTER SETSLOT %u NODE %s", slot, to_id));
    free(from_id);
    free(to_id);
}

static const char *batches[] = { "c0", "c1", "c2", "c3", "c4", "c5" };
#define NB (sizeof batches / sizeof batches[0])

/* The six batches, spread over the three masters by their hash tags. */
static void create_spread(cluster *cl)
{
    int nodes_used[NODES] = { 0 };
    for (size_t i = 0; i < NB; i++) {
        char key[64];
        snprintf(key, sizeof key, "alloc:{%s}:meta", batches[i]);
        nodes_used[node_of(cl, key)]++;
        create(cl, batches[i], 1000000);
    }
    print_message("batches per node: %d %d %d\n", nodes_used[0], nodes_used[1], nodes_used[2]);
}

/* Every batch answers its first request, whichever instance took it. */
static void first_served(cluster *cl, harness_allocd *a)
{
    for (size_t i = 0; i < NB; i++) push(cl, batches[i], "first");
    for (size_t i = 0; i < NB; i++)
        if (!served(cl, batches[i], "first", 15000)) {
            harness_allocd_dump_log(a);
            fail_msg("batch %s not served", batches[i]);
        }
}

/* Takeover: kill whoever serves c0; the other serves it within the lease
 * TTL. Returns the one alive. */
static harness_allocd *takeover_c0(cluster *cl, harness_allocd *a, harness_allocd *b)
{
    char *lease = harness_str(cl->c[node_of(cl, "alloc:{c0}:lease")], "GET alloc:{c0}:lease");
    assert_non_null(lease);
    harness_allocd *victim = !strncmp(lease, "test-1/", 7) ? a : b;
    harness_allocd *alive = victim == a ? b : a;
    free(lease);
    int64_t t0 = harness_now_ms();
    harness_allocd_kill(victim);
    push(cl, "c0", "after-kill");
    assert_true(served(cl, "c0", "after-kill", 15000));
    print_message("cluster takeover after SIGKILL: %lld ms (lease TTL 2000 ms)\n",
                  (long long)(harness_now_ms() - t0));
    return alive;
}

/* Migrate c1's slot to another node while requests keep coming: every
 * request answered once, granted, logged and counted against free. */
static void migrate_busy_c1(cluster *cl)
{
    uint16_t slot = cluster_key_slot("{c1}", 4);
    int from = node_of(cl, "alloc:{c1}:meta"), to = (from + 1) % NODES;
    char id[32];
    int pushed = 1;
    for (int i = 0; i < 300; i++) { snprintf(id, sizeof id, "m%d", i); push(cl, "c1", id); pushed++; }
    migrate_slot(cl, slot, from, to, "c1", &pushed);
    for (int i = 400; i < 500; i++) { snprintf(id, sizeof id, "m%d", i); push(cl, "c1", id); pushed++; }
    assert_true(served(cl, "c1", "m499", 30000));
    harness_sleep_ms(500);
    assert_int_equal(node_of(cl, "alloc:{c1}:meta"), to);
    long long results = cint(cl, "alloc:{c1}:results", "HLEN alloc:{c1}:results");
    long long grants = cint(cl, "alloc:{c1}:stats", "HGET alloc:{c1}:stats granted");
    long long log_len = itest_log_len(cl->c[to], "c1");   /* events, whichever format */
    long long free_units = cint(cl, "alloc:{c1}:free", "HGET alloc:{c1}:free sku");
    print_message("after migration: pushed %d, results %lld, grants %lld, log %lld\n",
                  pushed, results, grants, log_len);
    assert_int_equal(results, pushed);
    assert_int_equal(grants, pushed);
    assert_int_equal(log_len, pushed);
    assert_int_equal(free_units, 1000000 - pushed);
}

/* An idle batch whose slot moves must wake up on the new node. */
static void migrate_idle_c2(cluster *cl)
{
    uint16_t slot = cluster_key_slot("{c2}", 4);
    int from = node_of(cl, "alloc:{c2}:meta");
    migrate_slot(cl, slot, from, (from + 1) % NODES, NULL, NULL);
    push(cl, "c2", "after-idle-move");
    assert_true(served(cl, "c2", "after-idle-move", 15000));
}

static void test_cluster_spread_takeover_migrate(void **state)
{
    cluster cl;
    memset(&cl, 0, sizeof cl);
    if (cluster_start(&cl) < 0) { cluster_stop(&cl); fail_msg("could not start a 3-master cluster"); }
    create_spread(&cl);
    char conf[256];
    snprintf(conf, sizeof conf, CONF_FMT, cl.port[0]);
    harness_allocd a, b;
    assert_int_equal(harness_allocd_start(&a, &cl.node[0], conf), 0);
    assert_int_equal(harness_allocd_start(&b, &cl.node[0], conf), 0);
    first_served(&cl, &a);
    harness_allocd *alive = takeover_c0(&cl, &a, &b);
    migrate_busy_c1(&cl);
    migrate_idle_c2(&cl);
    for (size_t i = 0; i < NB; i++) push(&cl, batches[i], "last");
    for (size_t i = 0; i < NB; i++) assert_true(served(&cl, batches[i], "last", 15000));
    assert_int_equal(harness_allocd_stop(alive), 0);
    cluster_stop(&cl);
}

int main(void)
{
    /* a missing tool fails the test: CI installs it (make deps: redis-tools) */
    if (system("command -v redis-cli >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_cluster: redis-cli not found (make deps installs redis-tools): the cluster is not tested\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_spread_takeover_migrate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
