/* sim_net.c -- redis/redis_conn.h, simulated (the router is sim_router.c):
 * connections between the allocd instances and the Redis model, with the
 * network's latency and its faults, under the same callback rules as the
 * real module (exactly one callback per accepted command, replies in
 * order, a missed deadline tears the connection down, reconnects with
 * exponential backoff, on_ready / on_down, EVALSHA retried as EVAL after
 * NOSCRIPT, a pipeline's one callback with the first error).
 *
 * Every callback into allocd runs as an event of the connection's
 * instance, so a paused instance sees nothing until it wakes. Commands
 * reach the server one event each, so the server never runs a command of
 * one connection in the middle of another's; replies travel back in order.
 * A connection object lives until the end of the run (events may still
 * name it after it closed; they find it closed and do nothing).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redis/redis_conn.h"
#include "core/sha1.h"
#include "sim/sim.h"

typedef struct pcmd {
    uint64_t serial;
    redis_reply_fn fn;
    void *priv;
    size_t ncmds, nreplied;
    char err[200];
    redisReply *last;
    const redis_script *script;   /* EVALSHA: resent as EVAL after NOSCRIPT */
    int argc;                      /* EVALSHA: its arguments, for the resend */
    char **argv;
    size_t *lens;
    int timeout_ms;
    int retried;
    int wait_srv;                  /* a WAIT sent to this server + 1, else 0 */
} pcmd;

struct redis_conn {
    int inst;
    int srv;                    /* the server it connects to (its target) */
    int sc_srv;                 /* the server sc was made for */
    char name[128];
    redis_conn_callbacks cb;
    void *data;
    int ready, dead, closed, connecting;
    uint64_t link;              /* bumped when the link dies: what is on the wire is lost */
    uint64_t server_gen;
    simr_client *sc;
    simr_client **orphans;      /* server sides of dead links that may still run commands */
    size_t norphans;
    uint64_t late_link;         /* that link's commands still reach the server (0: none) */
    pcmd **q;
    size_t nq, qcap;
    uint64_t serial;
    uint64_t last_deliver, last_reply;
    int backoff_ms, backoff_min, backoff_max;
    redis_conn_stats stats;
    uint64_t blocked_serial;
    uint64_t blocked_for;       /* the pcmd of the blocked command */
    /* the most replicas a WAIT on each server answered this connection,
     * counted once the worker acted on the answer (it sent an apply after
     * it), and when it last did (check_wait) */
    int wait_max[SIM_MAX_SRV];
    uint64_t wait_max_at[SIM_MAX_SRV];
    int wait_last, wait_last_srv;   /* the last WAIT's answer, + 1 (0: none) */
};

/* A reply on its way, with the command record it answers: the client
 * checks it is the one at the head of its FIFO (a simulator bug else). */
typedef struct reply_ev {
    redisReply *r;
    uint64_t serial;
} reply_ev;

typedef struct packet {
    simr_client *sc;            /* the server side of the link it was sent on */
    int srv;
    uint64_t link, server_gen;
    uint64_t serial;            /* the command record (pcmd) it belongs to */
    int argc;
    char **argv;
    size_t *lens;
} packet;

static redis_conn **conns;
static size_t nconns;

static uint64_t latency_ns(void)
{
    /* 50..500 us, now and then a few ms */
    uint64_t ns = 50000 + sim_below(450000);
    if (sim_chance(0.02)) ns += sim_below(5000000);
    return ns;
}

static packet *packet_new(int argc, const char **argv, const size_t *lens)
{
    packet *p = calloc(1, sizeof *p);
    if (!p) abort();
    p->argc = argc;
    p->argv = malloc((size_t)argc * sizeof *p->argv);
    p->lens = malloc((size_t)argc * sizeof *p->lens);
    if (!p->argv || !p->lens) abort();
    for (int i = 0; i < argc; i++) {
        size_t n = lens ? lens[i] : strlen(argv[i]);
        p->argv[i] = malloc(n + 1);
        if (!p->argv[i]) abort();
        memcpy(p->argv[i], argv[i], n);
        p->argv[i][n] = '\0';
        p->lens[i] = n;
    }
    return p;
}

static void packet_free(packet *p)
{
    for (int i = 0; i < p->argc; i++) free(p->argv[i]);
    free(p->argv);
    free(p->lens);
    free(p);
}

static void pcmd_free(pcmd *p)
{
    if (p->last) freeReplyObject(p->last);
    for (int i = 0; i < p->argc; i++) free(p->argv[i]);
    free(p->argv);
    free(p->lens);
    free(p);
}

/* -------------------------------------------------------- failing, down -- */

static void schedule_connect(redis_conn *c, uint64_t delay_ns);

/* Every pending command gets its error callback, in order. */
static void fail_pending(redis_conn *c, const char *why)
{
    while (c->nq) {
        pcmd *p = c->q[0];
        memmove(c->q, c->q + 1, (c->nq - 1) * sizeof *c->q);
        c->nq--;
        if (p->fn) p->fn(c, NULL, why, p->priv);
        pcmd_free(p);
    }
}

/* The link is gone on the server's side at once: what was on the wire in
 * either direction is lost, MULTI/WATCH and a blocked command with it. */
static void cut(redis_conn *c)
{
    if (c->sc && sim_w->faults_on && (sim_w->faults & SF_DELAY) && sim_chance(0.5)) {
        /* The server has not noticed yet: what the client wrote before it
         * gave up is still in the server's socket buffer and runs, on the
         * old link's MULTI/WATCH state, with no one to read the replies. */
        simr_client **o = realloc(c->orphans, (c->norphans + 1) * sizeof *o);
        if (!o) abort();
        c->orphans = o;
        redisReply *nil = simr_block_timeout(c->sc);   /* its blocked wait is gone */
        if (nil) freeReplyObject(nil);
        c->orphans[c->norphans++] = c->sc;
        c->sc = NULL;
        c->late_link = c->link;
    } else if (c->sc) {
        simr_client_reset(c->sc);
        c->late_link = 0;
    }
    c->link++;
    c->blocked_serial = 0;
}

/* The client notices (in its instance's time): callbacks, on_down, and a
 * reconnect after the backoff. */
static void notice_down(redis_conn *c, const char *why)
{
    if (c->closed) return;
    int was_ready = c->ready;
    c->ready = 0;
    c->dead = 0;
    c->stats.failures++;
    fail_pending(c, why);
    if (c->closed) return;
    if (was_ready && c->cb.on_down) c->cb.on_down(c, why, c->data);
    if (c->closed) return;
    uint64_t ms = (uint64_t)c->backoff_ms + sim_below((uint64_t)c->backoff_ms / 2 + 1);
    c->backoff_ms = c->backoff_ms * 2 > c->backoff_max ? c->backoff_max : c->backoff_ms * 2;
    schedule_connect(c, ms * 1000000ULL);
}

static void ev_notice(void *a, void *b, uint64_t link)
{
    redis_conn *c = a;
    if (c->closed || !c->dead || c->link != link) return;
    notice_down(c, b);
}

/* The connection drops now (a reset, a restart): the client notices a
 * moment later. */
static void drop(redis_conn *c, const char *why)
{
    if (c->closed || c->dead || (!c->ready && !c->nq)) return;
    cut(c);
    c->dead = 1;
    sim_at(sim_w->now + latency_ns(), c->inst, ev_notice, c, (void *)why, c->link);
}

/* ------------------------------------------------------------- connect -- */

static void ev_connect(void *a, void *b, uint64_t link)
{
    redis_conn *c = a;
    if (c->closed || c->link != link || c->ready) return;
    c->connecting = 0;
    sim_server *s = &sim_w->srv[c->srv];
    if (s->down) {
        c->stats.failures++;
        uint64_t ms = (uint64_t)c->backoff_ms;
        c->backoff_ms = c->backoff_ms * 2 > c->backoff_max ? c->backoff_max : c->backoff_ms * 2;
        schedule_connect(c, ms * 1000000ULL);
        return;
    }
    if (c->sc && c->sc_srv != c->srv) { simr_client_free(c->sc); c->sc = NULL; }
    if (!c->sc) c->sc = simr_client_new(s->r);
    if (sim_w->cluster) simr_client_set_node(c->sc, c->srv);
    c->sc_srv = c->srv;
    simr_client_reset(c->sc);
    c->link++;
    c->server_gen = s->gen;
    c->ready = 1;
    c->stats.connects++;
    c->backoff_ms = c->backoff_min;
    c->last_deliver = c->last_reply = sim_w->now;
    if (c->cb.on_ready) c->cb.on_ready(c, c->data);
}

static void schedule_connect(redis_conn *c, uint64_t delay_ns)
{
    c->connecting = 1;
    sim_at(sim_w->now + delay_ns + 2 * latency_ns(), c->inst, ev_connect, c, NULL, c->link);
}

/* -------------------------------------------------------------- replies -- */

static void on_reply(redis_conn *c, redisReply *r, uint64_t serial);

static void ev_reply(void *a, void *b, uint64_t link)
{
    redis_conn *c = a;
    reply_ev *e = b;
    redisReply *r = e->r;
    uint64_t serial = e->serial;
    free(e);
    if (c->closed || c->link != link || c->dead) { freeReplyObject(r); return; }
    on_reply(c, r, serial);
}

static void send_packet(redis_conn *c, packet *p, uint64_t serial);

static void eval_resend(redis_conn *c, pcmd *p)
{
    const char *argv[p->argc];
    size_t lens[p->argc];
    for (int i = 0; i < p->argc; i++) { argv[i] = p->argv[i]; lens[i] = p->lens[i]; }
    argv[0] = "EVAL"; lens[0] = 4;
    argv[1] = p->script->source; lens[1] = strlen(p->script->source);
    p->retried = 1;
    c->q[c->nq++] = p;   /* to the tail: its reply now comes after the others */
    send_packet(c, packet_new(p->argc, argv, lens), p->serial);
}

static void on_reply(redis_conn *c, redisReply *r, uint64_t serial)
{
    if (!c->nq || c->q[0]->serial != serial) {
        freeReplyObject(r);
        sim_fail("sim: %s: the reply of command #%llu arrived while #%llu waits first", c->name,
                 (unsigned long long)serial, c->nq ? (unsigned long long)c->q[0]->serial : 0ULL);
        return;
    }
    pcmd *p = c->q[0];
    if (p->script && !p->retried && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8)) {
        freeReplyObject(r);
        memmove(c->q, c->q + 1, (c->nq - 1) * sizeof *c->q);
        c->nq--;
        eval_resend(c, p);
        return;
    }
    if (p->wait_srv && r->type == REDIS_REPLY_INTEGER) {
        c->wait_last = (int)r->integer;
        c->wait_last_srv = p->wait_srv;
    }
    p->nreplied++;
    if (!p->err[0] && r->type == REDIS_REPLY_ERROR && p->ncmds > 1)
        snprintf(p->err, sizeof p->err, "%s", r->str);
    if (p->last) freeReplyObject(p->last);
    p->last = r;
    if (p->nreplied < p->ncmds) return;
    memmove(c->q, c->q + 1, (c->nq - 1) * sizeof *c->q);
    c->nq--;
    if (!p->fn) {}   /* fire and forget (the registry's HSET) */
    else if (p->err[0]) p->fn(c, NULL, p->err, p->priv);
    else p->fn(c, p->last, NULL, p->priv);
    pcmd_free(p);
}

/* The server answers: the reply travels back, unless a fault takes it. */
static void send_reply(redis_conn *c, redisReply *r, uint64_t serial)
{
    /* the model met what it does not model: the run says so */
    if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "ERR sim: ", 9)) sim_fail("%s: %s", c->name, r->str);
    if (sim_w->faults_on && (sim_w->faults & SF_LOST_REPLY) && sim_chance(0.01 * sim_w->intensity)) {
        /* the command ran, its reply never arrives: "commit result unknown" */
        sim_w->lost_replies++;
        freeReplyObject(r);
        drop(c, "connection lost");
        return;
    }
    uint64_t t = sim_w->now + latency_ns();
    if (sim_w->faults_on && (sim_w->faults & SF_DELAY) && sim_chance(0.003 * sim_w->intensity)) {
        /* past the lease (5 s here) and past the command deadline */
        sim_w->delays++;
        t += (3000 + sim_below(6000)) * 1000000ULL;
    }
    if (t < c->last_reply) t = c->last_reply;
    c->last_reply = t;
    reply_ev *e = malloc(sizeof *e);
    if (!e) abort();
    *e = (reply_ev){ r, serial };
    sim_at(t, c->inst, ev_reply, c, e, c->link);
}

/* ------------------------------------------------------------ delivery -- */

static void ev_block_timeout(void *a, void *b, uint64_t serial)
{
    redis_conn *c = a;
    if (c->closed || !c->sc || c->blocked_serial != serial || !simr_client_blocked(c->sc)) return;
    c->blocked_serial = 0;
    send_reply(c, simr_block_timeout(c->sc), c->blocked_for);
}

static uint64_t block_serial;

static void ev_deliver(void *a, void *b, uint64_t link)
{
    redis_conn *c = a;
    packet *p = b;
    sim_server *s = &sim_w->srv[p->srv];
    if (s->down || p->server_gen != s->gen) { packet_free(p); return; }
    if (p->link == c->late_link && p->sc != c->sc) {
        sim_w->late_runs++;
        redisReply *r = simr_exec(s->r, p->sc, p->argc, (const char **)p->argv, p->lens, sim_server_ms());
        if (!r) r = simr_block_timeout(p->sc);
        if (r) freeReplyObject(r);
        packet_free(p);
        sim_net_retry_blocked();
        return;
    }
    if (c->closed || c->link != link || c->dead || c->srv != p->srv || c->server_gen != s->gen) {
        packet_free(p);
        return;
    }
    redisReply *r = simr_exec(s->r, c->sc, p->argc, (const char **)p->argv, p->lens, sim_server_ms());
    if (r) send_reply(c, r, p->serial);
    else {
        c->blocked_for = p->serial;
        /* blocked: BLMOVE's server-side timeout */
        double secs = strtod(p->argv[p->argc - 1], NULL);
        c->blocked_serial = ++block_serial;
        sim_at(sim_w->now + (uint64_t)(secs * 1e9), -1, ev_block_timeout, c, NULL, c->blocked_serial);
    }
    packet_free(p);
    sim_net_retry_blocked();
}

void sim_net_retry_blocked(void)
{
    for (size_t i = 0; i < nconns; i++) {
        redis_conn *c = conns[i];
        if (c->closed || c->dead || !c->sc || !simr_client_blocked(c->sc)) continue;
        redisReply *r = simr_retry_blocked(sim_w->srv[c->sc_srv].r, c->sc, sim_server_ms());
        if (r) { c->blocked_serial = 0; send_reply(c, r, c->blocked_for); }
    }
}

static void send_packet(redis_conn *c, packet *p, uint64_t serial)
{
    if (c->dead) { packet_free(p); return; }   /* into a dead socket */
    p->serial = serial;
    p->sc = c->sc;
    p->srv = c->sc_srv;
    p->link = c->link;
    p->server_gen = c->server_gen;
    uint64_t t = sim_w->now + latency_ns();
    if (sim_w->faults_on && (sim_w->faults & SF_DELAY) && sim_chance(0.001 * sim_w->intensity)) {
        /* a request held up past the lease and the command deadline */
        sim_w->delays++;
        t += (2500 + sim_below(5000)) * 1000000ULL;
    }
    if (t < c->last_deliver) t = c->last_deliver;
    c->last_deliver = t;
    sim_at(t, -1, ev_deliver, c, p, c->link);
}

/* ------------------------------------------------------------ deadlines -- */

static void ev_deadline(void *a, void *b, uint64_t serial)
{
    redis_conn *c = a;
    if (c->closed || !c->ready || c->dead) return;
    for (size_t i = 0; i < c->nq; i++)
        if (c->q[i]->serial == serial) {
            cut(c);
            c->dead = 1;
            notice_down(c, "timeout");
            return;
        }
}

static pcmd *pcmd_push(redis_conn *c, redis_reply_fn fn, void *priv, int timeout_ms, size_t ncmds)
{
    pcmd *p = calloc(1, sizeof *p);
    if (!p) abort();
    p->serial = ++c->serial;
    p->fn = fn;
    p->priv = priv;
    p->ncmds = ncmds;
    p->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
    if (c->nq == c->qcap) {
        c->qcap = c->qcap ? c->qcap * 2 : 16;
        c->q = realloc(c->q, c->qcap * sizeof *c->q);
        if (!c->q) abort();
    }
    c->q[c->nq++] = p;
    c->stats.commands += ncmds;
    sim_at(sim_w->now + (uint64_t)p->timeout_ms * 1000000ULL, c->inst, ev_deadline, c, NULL, p->serial);
    return p;
}

/* ------------------------------------------------------------- the API -- */

/* A target of the simulated servers is "sim<N>" (redis_router_target);
 * any other (the config's) means the master the instance knows. */
static int target_srv(const redis_target *t, int inst)
{
    if (sim_w->cluster) {
        /* node i listens on 127.0.0.1:base+i (the router's TCP targets) */
        for (int i = 0; t && t->kind == REDIS_TARGET_TCP && i < sim_w->nsrv; i++)
            if (t->port == simc_port(sim_w->cluster, i)) return i;
        sim_fail("sim: a connection to %s:%d, which is no cluster node", t ? t->host : "?", t ? t->port : 0);
        return 0;
    }
    if (t && !strncmp(t->path, "sim", 3) && t->path[3]) {
        int n = atoi(t->path + 3);
        if (n >= 0 && n < sim_w->nsrv) return n;
    }
    return inst >= 0 ? sim_w->inst_master[inst] : sim_w->master;
}

int redis_conn_init(redis_conn **out, uv_loop_t *loop, const redis_target *t,
                    const redis_conn_options *opt, const redis_conn_callbacks *cb, void *data)
{
    redis_conn *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->inst = sim_w->cur;
    c->srv = target_srv(t, c->inst);
    snprintf(c->name, sizeof c->name, "%s", opt && opt->name ? opt->name : "allocd");
    if (cb) c->cb = *cb;
    c->data = data;
    c->backoff_min = opt && opt->backoff_min_ms > 0 ? opt->backoff_min_ms : 100;
    c->backoff_max = opt && opt->backoff_max_ms > 0 ? opt->backoff_max_ms : 5000;
    c->backoff_ms = c->backoff_min;
    redis_conn **n = realloc(conns, (nconns + 1) * sizeof *conns);
    if (!n) { free(c); return -ENOMEM; }
    conns = n;
    conns[nconns++] = c;
    schedule_connect(c, 0);
    *out = c;
    return 0;
}

int redis_conn_is_ready(const redis_conn *c) { return c && c->ready && !c->closed; }
/* Points c at another server: a live link drops (its pending commands
 * get their error), the reconnect goes there -- as redis_conn.c does. */
int redis_conn_retarget(redis_conn *c, const redis_target *t)
{
    if (!c || c->closed) return 0;
    int s = target_srv(t, c->inst);
    if (s == c->srv) return 0;
    c->srv = s;
    drop(c, "moving to another node");
    return 0;
}
const redis_conn_stats *redis_conn_get_stats(const redis_conn *c) { return &c->stats; }
const char *redis_conn_name(const redis_conn *c) { return c->name; }
void redis_conn_flush(redis_conn *c) { (void)c; }

/* allocd's WAIT asks for every replica the master has had (at least
 * wait_replicas; batch_replicas.c): after Sentinel promoted one of two, the
 * other acknowledges the partitioned old master's writes until it moves,
 * and drops them then. So a WAIT never asks a server for fewer replicas
 * than one answered on this connection, unless replica_forget_ms (the
 * config's, 10 s by default) passed since it last did. An answer counts once the
 * worker acted on it -- an apply sent after it (wait_acted): a worker
 * that reloaded meanwhile drops the reply unread, as a new one would. */
static void check_wait(redis_conn *c, const char *n)
{
    int want = atoi(n);
    if (want < c->wait_max[c->srv] && sim_w->now - c->wait_max_at[c->srv] < (uint64_t)sim_w->replica_forget_ms * 1000000ULL)
        sim_fail("WAIT: %s asks server %d for %d replicas, %d answered on it %llu ms ago", c->name, c->srv, want,
                 c->wait_max[c->srv], (unsigned long long)((sim_w->now - c->wait_max_at[c->srv]) / 1000000));
}

int redis_conn_commandargv(redis_conn *c, redis_reply_fn fn, void *privdata, int timeout_ms,
                           int argc, const char **argv, const size_t *argvlen)
{
    if (!c || argc < 1) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    pcmd *pc = pcmd_push(c, fn, privdata, timeout_ms, 1);
    if (argc == 3 && !strcasecmp(argv[0], "WAIT")) {
        check_wait(c, argv[1]);
        pc->wait_srv = c->srv + 1;
    }
    send_packet(c, packet_new(argc, argv, argvlen), c->serial);
    return 0;
}

/* One RESP command (an array of bulk strings) into argv. */
static packet *parse_resp(const char *p, size_t len)
{
    const char *end = p + len;
    if (len < 4 || *p != '*') return NULL;
    long n = strtol(p + 1, NULL, 10);
    const char *q = memchr(p, '\n', len);
    if (n <= 0 || n > 1000000 || !q) return NULL;
    q++;
    const char **argv = malloc((size_t)n * sizeof *argv);
    size_t *lens = malloc((size_t)n * sizeof *lens);
    if (!argv || !lens) abort();
    for (long i = 0; i < n; i++) {
        if (q >= end || *q != '$') { free(argv); free(lens); return NULL; }
        long l = strtol(q + 1, NULL, 10);
        q = memchr(q, '\n', (size_t)(end - q));
        if (!q || l < 0 || q + 1 + l + 2 > end) { free(argv); free(lens); return NULL; }
        argv[i] = q + 1;
        lens[i] = (size_t)l;
        q += 1 + l + 2;
    }
    packet *pk = packet_new((int)n, argv, lens);
    free(argv);
    free(lens);
    return pk;
}

int redis_conn_command_resp(redis_conn *c, redis_reply_fn fn, void *privdata, int timeout_ms,
                            const char *resp, size_t len)
{
    if (!c || !fn) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    packet *pk = parse_resp(resp, len);
    if (!pk) { sim_fail("sim: %s sent RESP that is not one command", c->name); return -EINVAL; }
    pcmd_push(c, fn, privdata, timeout_ms, 1);
    send_packet(c, pk, c->serial);
    return 0;
}

int redis_conn_command(redis_conn *c, redis_reply_fn fn, void *privdata, int timeout_ms,
                       const char *fmt, ...)
{
    if (!c || !fn) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    char *cmd;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0) return -ENOMEM;
    int rc = redis_conn_command_resp(c, fn, privdata, timeout_ms, cmd, (size_t)len);
    free(cmd);
    return rc;
}

void redis_script_init(redis_script *s, const char *source)
{
    s->source = source;
    sha1_hex(source, strlen(source), s->sha);
}

int redis_conn_eval(redis_conn *c, const redis_script *s, redis_reply_fn fn, void *privdata,
                    int timeout_ms, int nkeys, int argc, const char **argv, const size_t *argvlen)
{
    if (!c || !fn || !s) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    int n = argc + 3;
    const char *a[n];
    size_t l[n];
    char nk[16];
    snprintf(nk, sizeof nk, "%d", nkeys);
    a[0] = "EVALSHA"; l[0] = 7;
    a[1] = s->sha; l[1] = 40;
    a[2] = nk; l[2] = strlen(nk);
    for (int i = 0; i < argc; i++) { a[3 + i] = argv[i]; l[3 + i] = argvlen ? argvlen[i] : strlen(argv[i]); }
    pcmd *p = pcmd_push(c, fn, privdata, timeout_ms, 1);
    packet *pk = packet_new(n, a, l);
    p->script = s;
    p->argc = n;
    p->argv = malloc((size_t)n * sizeof *p->argv);
    p->lens = malloc((size_t)n * sizeof *p->lens);
    if (!p->argv || !p->lens) abort();
    for (int i = 0; i < n; i++) {
        p->argv[i] = malloc(pk->lens[i] + 1);
        if (!p->argv[i]) abort();
        memcpy(p->argv[i], pk->argv[i], pk->lens[i] + 1);
        p->lens[i] = pk->lens[i];
    }
    send_packet(c, pk, p->serial);
    return 0;
}

static void wait_acted(redis_conn *c)
{
    int s = c->wait_last_srv - 1;
    if (s != c->srv) return;
    if (c->wait_last >= c->wait_max[s]) {
        c->wait_max[s] = c->wait_last;
        c->wait_max_at[s] = sim_w->now;
    }
    c->wait_last_srv = 0;
}

int redis_conn_pipeline(redis_conn *c, redis_reply_fn fn, void *privdata, int timeout_ms,
                        const redis_slice *cmds, size_t ncmds)
{
    if (!c || !fn || !cmds || !ncmds) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    packet *pks[ncmds];
    for (size_t i = 0; i < ncmds; i++) {
        pks[i] = parse_resp(cmds[i].buf, cmds[i].len);
        if (!pks[i]) {
            for (size_t j = 0; j < i; j++) packet_free(pks[j]);
            sim_fail("sim: %s: pipeline slice %zu is not one command", c->name, i);
            return -EINVAL;
        }
    }
    /* an apply (WATCH, FENCE, MULTI ...) is sent only once WAIT answered enough */
    if (pks[0]->argc && pks[0]->lens[0] == 5 && !strncasecmp(pks[0]->argv[0], "WATCH", 5)) wait_acted(c);
    pcmd_push(c, fn, privdata, timeout_ms, ncmds);
    for (size_t i = 0; i < ncmds; i++) send_packet(c, pks[i], c->serial);
    return 0;
}

typedef struct close_ev { redis_close_fn fn; void *data; } close_ev;

static void ev_closed(void *a, void *b, uint64_t x)
{
    close_ev *e = b;
    if (e->fn) e->fn(a, e->data);
    free(e);
}

void redis_conn_close(redis_conn *c, redis_close_fn close_cb, void *data)
{
    if (!c || c->closed) return;
    cut(c);
    fail_pending(c, "closed");
    c->closed = 1;
    c->ready = 0;
    close_ev *e = malloc(sizeof *e);
    if (!e) abort();
    *e = (close_ev){ close_cb, data };
    sim_at(sim_w->now, c->inst, ev_closed, c, e, 0);
}

int redis_conn_eval_resp(redis_conn *c, const redis_script *s, redis_reply_fn fn, void *privdata,
                         int timeout_ms, int ntail, char *buf, size_t headroom, size_t tail_len)
{
    sim_fail("sim: redis_conn_eval_resp is not simulated");
    return -EINVAL;
}

/* -------------------------------------------------------------- faults -- */

void sim_net_reset_server(int srv, const char *why)
{
    for (size_t i = 0; i < nconns; i++)
        if (conns[i]->sc_srv == srv || conns[i]->srv == srv) drop(conns[i], why);
}

void sim_net_reset_random(void)
{
    if (!nconns) return;
    redis_conn *c = conns[sim_below(nconns)];
    if (!c->closed && c->ready) { sim_w->resets++; drop(c, "connection reset by peer"); }
}

int sim_net_live_conns(void)
{
    int n = 0;
    for (size_t i = 0; i < nconns; i++) n += !conns[i]->closed;
    return n;
}

void sim_net_free_all(void)
{
    sim_router_free_all();
    for (size_t i = 0; i < nconns; i++) {
        redis_conn *c = conns[i];
        for (size_t j = 0; j < c->nq; j++) pcmd_free(c->q[j]);
        free(c->q);
        simr_client_free(c->sc);
        for (size_t j = 0; j < c->norphans; j++) simr_client_free(c->orphans[j]);
        free(c->orphans);
        free(c);
    }
    free(conns);
    conns = NULL;
    nconns = 0;
}
