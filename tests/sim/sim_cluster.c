/* sim_cluster.c -- Redis Cluster in the model (see sim_cluster.h).
 *
 * The redirections are Redis 7.0's cluster.c getNodeByQuery, read line by
 * line: the keys of a command -- or of a transaction's whole queue at EXEC
 * -- must share one slot (CROSSSLOT else); a slot nobody owns is
 * CLUSTERDOWN; a node migrating the slot serves a command only when it has
 * every key, else answers TRYAGAIN when it has some of them and ASK when
 * it has none (7.0.x counts the keys it has; 7.0.0 answered TRYAGAIN for
 * any command of several keys); an importing node serves after ASKING
 * (TRYAGAIN if several keys and one is missing), and without it answers
 * MOVED to the owner it knows; any other node answers MOVED. A command
 * without keys is served anywhere. test_sim_model checks the doubtful cases
 * against a real three-node cluster.
 */
#include "sim/sim_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct skey { char *k; size_t n; } skey;

struct simc {
    simr *s;
    int n;
    char host[64];
    int port[SIMC_MAX_NODES];
    char id[SIMC_MAX_NODES][41];
    int8_t view[SIMC_MAX_NODES][SIMC_SLOTS];   /* each node's owner of each slot, -1 none */
    /* the migration under way */
    int mig_slot, mig_from, mig_to;
    int migrating[SIMC_MAX_NODES], importing[SIMC_MAX_NODES];
    int told[SIMC_MAX_NODES];                  /* SETSLOT NODE received */
    skey *src;                                 /* keys of the slot still on the source */
    size_t nsrc;
    simc_counts counts;
};

/* ----------------------------------------------------------- key slot -- */

uint16_t simc_key_slot(const char *key, size_t len)
{
    size_t s = 0, e = len;
    for (size_t i = 0; i < len; i++) {
        if (key[i] != '{') continue;
        size_t j = i + 1;
        while (j < len && key[j] != '}') j++;
        if (j < len && j > i + 1) { s = i + 1; e = j; }
        break;
    }
    uint32_t crc = 0;
    for (size_t i = s; i < e; i++) {
        crc ^= (uint32_t)(unsigned char)key[i] << 8;
        for (int b = 0; b < 8; b++) crc = (crc << 1) ^ (crc & 0x8000 ? 0x1021 : 0);
    }
    return (uint16_t)(crc & (SIMC_SLOTS - 1));
}

/* ------------------------------------------------------------- replies -- */

static redisReply *redirect(simc *c, const char *kind, int slot, int node)
{
    char b[200];
    snprintf(b, sizeof b, "%s %d %s:%d", kind, slot, c->host, c->port[node]);
    return simr_reply_str(REDIS_REPLY_ERROR, b);
}

/* ---------------------------------------------------------------- keys -- */

static int is(const char *a, size_t n, const char *name) { return strlen(name) == n && !strncasecmp(a, name, n); }

static int in_list(const char *a, size_t n, const char *const *names)
{
    for (size_t i = 0; names[i]; i++)
        if (is(a, n, names[i])) return 1;
    return 0;
}

/* The key positions of a command (Redis's key specs, for what allocd
 * sends): into pos, returns the count. */
static int cmd_keys(int argc, const char *const *argv, const size_t *lens, int *pos)
{
    static const char *const one[] = { "get", "set", "incrby", "pexpire", "pttl", "type", "hset", "hget", "hmget",
                                       "hgetall", "hscan", "hdel", "hlen", "hincrby", "sadd", "srem", "smembers",
                                       "rpush", "lpush", "llen", "lrange", "ltrim", "lindex", "xadd", "xlen",
                                       "xrange", "xtrim", "xack", "xpending", "lpop", "rpop", NULL };
    static const char *const all[] = { "del", "exists", "watch", "mget", "unlink", NULL };
    static const char *const two[] = { "rename", "blmove", "lmove", "rpoplpush", NULL };
    const char *n = argv[0];
    size_t nl = lens[0];
    int k = 0;
    if (in_list(n, nl, one)) { if (argc > 1) pos[k++] = 1; }
    else if (in_list(n, nl, all)) { for (int i = 1; i < argc; i++) pos[k++] = i; }
    else if (in_list(n, nl, two)) { for (int i = 1; i < argc && i <= 2; i++) pos[k++] = i; }
    else if ((is(n, nl, "eval") || is(n, nl, "evalsha")) && argc >= 3) {
        long nk = strtol(argv[2], NULL, 10);
        for (long i = 0; i < nk && 3 + i < argc; i++) pos[k++] = 3 + (int)i;
    } else if (is(n, nl, "xgroup") && argc >= 3) {
        pos[k++] = 2;
    } else if (is(n, nl, "xreadgroup")) {
        for (int i = 1; i < argc; i++)
            if (is(argv[i], lens[i], "streams")) {
                int nk = (argc - i - 1) / 2;
                for (int j = 0; j < nk; j++) pos[k++] = i + 1 + j;
                break;
            }
    }
    return k;
}

/* ------------------------------------------------ where keys are, now -- */

static long src_find(const simc *c, const char *k, size_t n)
{
    for (size_t i = 0; i < c->nsrc; i++)
        if (c->src[i].n == n && !memcmp(c->src[i].k, k, n)) return (long)i;
    return -1;
}

static void src_drop(simc *c, size_t i)
{
    free(c->src[i].k);
    c->src[i] = c->src[--c->nsrc];
}

void simc_forget_missing(simc *c, int64_t now_ms)
{
    for (size_t i = 0; i < c->nsrc;)
        if (!simr_exists(c->s, c->src[i].k, c->src[i].n, now_ms)) src_drop(c, i);
        else i++;
}

/* lookupKeyRead on node me, for a key of the migrating slot. */
static int has_key(simc *c, int me, const char *k, size_t n, int64_t now)
{
    long i = src_find(c, k, n);
    int exists = simr_exists(c->s, k, n, now);
    if (i >= 0 && !exists) { src_drop(c, (size_t)i); i = -1; }
    if (me == c->mig_from) return i >= 0;
    if (me == c->mig_to) return exists && i < 0;
    return 0;
}

/* -------------------------------------------------------- CLUSTER ... -- */

static redisReply *node_entry(simc *c, int node)
{
    redisReply *e = simr_reply_arr(4);
    e->element[0] = simr_reply_str(REDIS_REPLY_STRING, c->host);
    e->element[1] = simr_reply_int(c->port[node]);
    e->element[2] = simr_reply_str(REDIS_REPLY_STRING, c->id[node]);
    e->element[3] = simr_reply_arr(0);   /* the metadata map (hostname): empty, RESP2 */
    return e;
}

/* CLUSTER SLOTS as Redis 7.0 answers it (no replicas here): one entry per
 * run of slots of one master, in node me's view, in slot order. */
static redisReply *cluster_slots(simc *c, int me)
{
    size_t runs = 0;
    for (int s = 0; s < SIMC_SLOTS; s++)
        if (c->view[me][s] >= 0 && (s == 0 || c->view[me][s - 1] != c->view[me][s])) runs++;
    redisReply *r = simr_reply_arr(runs);
    size_t k = 0;
    for (int s = 0; s < SIMC_SLOTS;) {
        int owner = c->view[me][s], e = s;
        while (e + 1 < SIMC_SLOTS && c->view[me][e + 1] == owner) e++;
        if (owner >= 0) {
            redisReply *x = simr_reply_arr(3);
            x->element[0] = simr_reply_int(s);
            x->element[1] = simr_reply_int(e);
            x->element[2] = node_entry(c, owner);
            r->element[k++] = x;
        }
        s = e + 1;
    }
    return r;
}

static redisReply *cluster_cmd(simc *c, int me, int argc, const char *const *argv, const size_t *lens)
{
    if (argc == 2 && is(argv[1], lens[1], "slots")) return cluster_slots(c, me);
    if (argc == 3 && is(argv[1], lens[1], "keyslot")) return simr_reply_int(simc_key_slot(argv[2], lens[2]));
    return simr_reply_str(REDIS_REPLY_ERROR, "ERR sim: this CLUSTER subcommand is not modelled");
}

/* --------------------------------------------------------- the route -- */

typedef struct query {
    int have, slot, owner, multiple, migrating, importing, missing, existing;
    const char *first;
    size_t firstn;
} query;

/* One key of the query: 0, or the refusal's kind (CROSSSLOT, CLUSTERDOWN). */
static redisReply *query_key(simc *c, int me, query *q, const char *k, size_t n, int64_t now)
{
    int slot = simc_key_slot(k, n);
    if (!q->have) {
        q->have = 1;
        q->first = k;
        q->firstn = n;
        q->slot = slot;
        q->owner = c->view[me][slot];
        if (q->owner < 0) { c->counts.down++; return simr_reply_str(REDIS_REPLY_ERROR, "CLUSTERDOWN Hash slot not served"); }
        if (q->owner == me && slot == c->mig_slot && c->migrating[me]) q->migrating = 1;
        else if (slot == c->mig_slot && c->importing[me]) q->importing = 1;
    } else if (!(n == q->firstn && !memcmp(k, q->first, n))) {
        if (slot != q->slot) {
            c->counts.crossslot++;
            return simr_reply_str(REDIS_REPLY_ERROR, "CROSSSLOT Keys in request don't hash to the same slot");
        }
        q->multiple = 1;
    }
    if (q->migrating || q->importing) {
        if (has_key(c, me, k, n, now)) q->existing++;
        else q->missing++;
    }
    return NULL;
}

static redisReply *route(void *ud, int me, int asking, int ncmds, const int *argc, const char *const *const *argv,
                         const size_t *const *lens, int64_t now)
{
    simc *c = ud;
    if (ncmds == 1 && argc[0] >= 1 && is(argv[0][0], lens[0][0], "cluster"))
        return cluster_cmd(c, me, argc[0], argv[0], lens[0]);
    query q = { 0 };
    for (int i = 0; i < ncmds; i++) {
        int pos[argc[i] + 1];
        int nk = cmd_keys(argc[i], argv[i], lens[i], pos);
        for (int j = 0; j < nk; j++) {
            redisReply *r = query_key(c, me, &q, argv[i][pos[j]], lens[i][pos[j]], now);
            if (r) return r;
        }
    }
    if (!q.have) return NULL;
    if (q.migrating && q.missing) {
        if (q.existing) {
            c->counts.tryagain++;
            return simr_reply_str(REDIS_REPLY_ERROR, "TRYAGAIN Multiple keys request during rehashing of slot");
        }
        c->counts.ask++;
        return redirect(c, "ASK", q.slot, c->mig_to);
    }
    if (q.importing && asking) {
        if (q.multiple && q.missing) {
            c->counts.tryagain++;
            return simr_reply_str(REDIS_REPLY_ERROR, "TRYAGAIN Multiple keys request during rehashing of slot");
        }
        /* a key the source still has reads as missing on the target: one
         * keyspace cannot show both, so the model refuses loudly (a client
         * sends ASKING only after ASK, when the source no longer had it) */
        if (q.missing && src_find(c, q.first, q.firstn) >= 0)
            return simr_reply_str(REDIS_REPLY_ERROR, "ERR sim: ASKING for a key the source still has is not modelled");
        c->counts.asking_served++;
        return NULL;
    }
    if (q.owner != me) { c->counts.moved++; return redirect(c, "MOVED", q.slot, q.owner); }
    return NULL;
}

/* ------------------------------------------------------------ the API -- */

simc *simc_new(simr *s, int n, const char *host, const int *ports)
{
    simc *c = calloc(1, sizeof *c);
    if (!c) abort();
    if (n > SIMC_MAX_NODES) n = SIMC_MAX_NODES;
    c->s = s;
    c->n = n;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->mig_slot = c->mig_from = c->mig_to = -1;
    for (int i = 0; i < n; i++) {
        c->port[i] = ports[i];
        for (int j = 0; j < 40; j++) c->id[i][j] = "0123456789abcdef"[(i * 7 + j * 13 + 5) % 16];
        c->id[i][40] = '\0';
    }
    /* redis-cli --cluster create: slots split evenly, the remainder spread */
    for (int i = 0; i < n; i++) {
        int lo = (int)((double)i * SIMC_SLOTS / n + 0.5), hi = (int)((double)(i + 1) * SIMC_SLOTS / n + 0.5) - 1;
        for (int slot = lo; slot <= hi && slot < SIMC_SLOTS; slot++)
            for (int v = 0; v < n; v++) c->view[v][slot] = (int8_t)i;
    }
    simr_set_route(s, route, c);
    return c;
}

void simc_free(simc *c)
{
    if (!c) return;
    while (c->nsrc) src_drop(c, 0);
    free(c->src);
    free(c);
}

int simc_port(const simc *c, int node) { return c->port[node]; }
int simc_owner(const simc *c, int node, uint16_t slot) { return c->view[node][slot]; }
int simc_migrating(const simc *c) { return c->mig_slot >= 0; }
const simc_counts *simc_counts_get(const simc *c) { return &c->counts; }

void simc_counts_add(simc_counts *sum, const simc_counts *k)
{
    sum->moved += k->moved;
    sum->ask += k->ask;
    sum->tryagain += k->tryagain;
    sum->crossslot += k->crossslot;
    sum->down += k->down;
    sum->asking_served += k->asking_served;
    sum->migrated += k->migrated;
    sum->slots_moved += k->slots_moved;
}

typedef struct collect { simc *c; int64_t now; } collect;

static void collect_key(void *ud, const char *k, size_t kn)
{
    collect *x = ud;
    simc *c = x->c;
    if (simc_key_slot(k, kn) != c->mig_slot) return;
    skey *n = realloc(c->src, (c->nsrc + 1) * sizeof *n);
    if (!n) abort();
    c->src = n;
    c->src[c->nsrc].k = malloc(kn + 1);
    if (!c->src[c->nsrc].k) abort();
    memcpy(c->src[c->nsrc].k, k, kn);
    c->src[c->nsrc].k[kn] = '\0';
    c->src[c->nsrc++].n = kn;
}

int simc_begin(simc *c, uint16_t slot, int from, int to, int64_t now_ms)
{
    if (c->mig_slot >= 0 || from == to || c->view[from][slot] != from || c->view[to][slot] != from) return -1;
    c->mig_slot = slot;
    c->mig_from = from;
    c->mig_to = to;
    memset(c->told, 0, sizeof c->told);
    c->importing[to] = 1;     /* CLUSTER SETSLOT slot IMPORTING from: the target first */
    c->migrating[from] = 1;   /* then MIGRATING on the source */
    collect x = { c, now_ms };
    simr_keys_each(c->s, collect_key, &x);
    simc_forget_missing(c, now_ms);   /* expired ones are gone */
    return 0;
}

/* MIGRATE host port "" 0 timeout KEYS k1 .. kmax: the source sends each
 * key (DUMP/RESTORE, its TTL kept) and deletes it, blocking meanwhile, so
 * no client sees it half moved; a watcher of a key sees it changed. */
size_t simc_migrate(simc *c, size_t max, int64_t now_ms)
{
    simc_forget_missing(c, now_ms);
    for (size_t i = 0; i < max && c->nsrc; i++) {
        simr_touch(c->s, c->src[c->nsrc - 1].k, c->src[c->nsrc - 1].n);
        src_drop(c, c->nsrc - 1);
        c->counts.migrated++;
    }
    return c->nsrc;
}

int simc_migrate_key(simc *c, const char *key, size_t len, int64_t now_ms)
{
    simc_forget_missing(c, now_ms);
    long i = src_find(c, key, len);
    if (i < 0) return -1;
    simr_touch(c->s, key, len);
    src_drop(c, (size_t)i);
    c->counts.migrated++;
    return 0;
}

/* CLUSTER SETSLOT slot NODE target on one node: it now sees the target as
 * the owner; the target stops importing, the source (keys all gone)
 * stops migrating. The target bumps its config epoch and broadcasts it
 * (clusterBroadcastPong): every node sees the new owner at once -- a real
 * one within a round trip on the cluster bus, which test_sim_model finds
 * done before its next command. */
int simc_setslot_node(simc *c, int node)
{
    if (c->mig_slot < 0) return 1;
    if (node == c->mig_from && c->nsrc) return -1;   /* "Can't assign hashslot ... while I still hold keys" */
    c->view[node][c->mig_slot] = (int8_t)c->mig_to;
    c->importing[node] = c->migrating[node] = 0;
    for (int i = 0; node == c->mig_to && i < c->n; i++) c->view[i][c->mig_slot] = (int8_t)c->mig_to;
    c->told[node] = 1;
    for (int i = 0; i < c->n; i++)
        if (!c->told[i]) return 0;
    c->mig_slot = c->mig_from = c->mig_to = -1;
    c->counts.slots_moved++;
    return 1;
}
