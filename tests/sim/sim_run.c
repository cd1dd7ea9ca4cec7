/* sim_run.c -- one simulated run: the world, the workload, the faults and
 * the invariants (see sim.h for the seams).
 *
 * In the manner of TigerBeetle's VOPR: the seed draws everything (the
 * instances' settings, the requests and when they arrive, every latency,
 * every fault), the real worker code runs unchanged against the Redis
 * model, and the checks run on every transaction the model commits -- the
 * only moment the state changes:
 *   - fencing: a transaction that writes the batch ran FENCE, and at EXEC
 *     the lease still holds FENCE's token and internal.epoch its epoch;
 *   - a result, once written, is never rewritten with another value
 *     (except a `waiting` one, replaced once by its final result);
 *   - every request the transaction takes off the queue or ctl has a result
 *     after it (or went to dead, when it has no id to answer under);
 *   - replaying the event log from the start gives holders and free exactly
 *     (allocctl's ctl_replay, which also checks nothing is held twice or
 *     beyond capacity and per_user).
 * At the end the faults stop, the batch is resumed and the run drains:
 * every request left in Redis must be answered within the config's
 * answer_ms (contract 9.6; drawn per seed), queue and ctl empty.
 *
 * The workload is a table of ops (ops[] below): adding an op of a new
 * protocol version is one generator function and one line.
 */
#include "sim/sim_run.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocctl/ctl_replay.h"
#include "base/config.h"
#include "base/log.h"
#include "sim/sim.h"
#include "sim/sim_archive.h"
#include "sim/sim_c11.h"
#include "sim/sim_reshard.h"
#include "worker/batch_keys.h"
#include "service/registry.h"
#include "worker/batch_worker.h"
#include "worker/scripts.h"

#define BATCH "b1"
#define NUSERS 30
#define NITEMS 6
#define CLUSTER_NODES 3
#define CLUSTER_HOST "127.0.0.1"
#define CLUSTER_PORT 30001

/* ------------------------------------------------------------ workload -- */

typedef struct sent_req {
    char *raw;
    char id[32];
    char user[16];
    int is_buy;
} sent_req;

typedef struct workload {
    int room;         /* a room batch (beds), else stock */
    int formed;       /* a room batch with groups = formed (by consent), else listed */
    uint64_t next_id;
    sent_req *sent;
    size_t nsent, cap;
} workload;

enum { K_ANY, K_STOCK, K_ROOM };

typedef struct sim_op {
    const char *name;
    int kind;         /* the batches it is drawn for: K_ANY, K_STOCK, K_ROOM */
    int weight;
    int ctl;          /* pushed to ctl (an admin command), else the queue */
    /* writes the request into buf (size n); returns its length, 0 to skip */
    int (*gen)(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n);
} sim_op;

static void pick_user(char *user) { snprintf(user, 16, "u%d", (int)sim_below(NUSERS) + 1); }

static int gen_buy(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    pick_user(user);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"sku%d\",\"qty\":%d}",
                    id, user, (int)sim_below(NITEMS) + 1, (int)sim_below(3) + 1);
}

/* contract 9.5: a buy (stock) or choose (rooms) that joins the waitlist
 * when sold out, served when units come back */
static int gen_wait(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    pick_user(user);
    if (wl->room)
        return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"choose\",\"room\":\"R%d\",\"wait\":true}",
                        id, user, (int)sim_below(NITEMS) + 1);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"sku%d\",\"qty\":%d,"
                    "\"wait\":true}", id, user, (int)sim_below(NITEMS) + 1, (int)sim_below(2) + 1);
}

/* confirm or cancel an order a buy was granted (its result names it) */
static int gen_order_op(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf,
                        size_t n, const char *op)
{
    for (int tries = 0; tries < 8 && wl->nsent; tries++) {
        sent_req *r = &wl->sent[sim_below(wl->nsent)];
        if (!r->is_buy) continue;
        const char *res = simr_hget(s, k->results, r->id, NULL);
        const char *o = res ? strstr(res, "\"order\":\"") : NULL;
        if (!o) continue;
        o += 9;
        const char *e = strchr(o, '"');
        if (!e) continue;
        snprintf(user, 16, "%s", r->user);
        return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"%s\",\"order\":\"%.*s\"}",
                        id, user, op, (int)(e - o), o);
    }
    return 0;
}

static int gen_confirm(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    return gen_order_op(wl, s, k, id, user, buf, n, "confirm");
}

static int gen_cancel(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    return gen_order_op(wl, s, k, id, user, buf, n, "cancel");
}

static int gen_release(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    pick_user(user);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"release\"}", id, user);
}

/* a resubmission: the same request again (a client retrying) */
static int gen_resubmit(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    if (!wl->nsent) return 0;
    sent_req *r = &wl->sent[sim_below(wl->nsent)];
    if (r->raw[0] != '{' || strstr(r->raw, "\"op\":\"pause\"") || strstr(r->raw, "capacity")) return 0;
    snprintf(id, 32, "%s", r->id);
    snprintf(user, 16, "%s", r->user);
    return snprintf(buf, n, "%s", r->raw);
}

static int gen_invalid(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    pick_user(user);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":0}", id, user);
}

static int gen_garbage(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    id[0] = '\0';
    return snprintf(buf, n, "{\"id\":\"g%" PRIu64 "\",\"user\":", sim_rand() % 100000);
}

static int gen_pause(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    return snprintf(buf, n, "{\"id\":\"%s\",\"op\":\"pause\"}", id);
}

static int gen_resume(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    return snprintf(buf, n, "{\"id\":\"%s\",\"op\":\"resume\"}", id);
}

static int gen_capacity(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    const char *item = wl->room ? "R" : "sku";
    return snprintf(buf, n, "{\"id\":\"%s\",\"op\":\"set_capacity\",\"item\":\"%s%d\",\"capacity\":%d}", id,
                    item, (int)sim_below(NITEMS) + 1, (int)sim_below(wl->room ? 4 : 40));
}

/* rooms R1..R4 with 1..3 beds, attrs {"floor":"1"|"2"} */
static int gen_choose(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    pick_user(user);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"%s\",\"room\":\"R%d\"}", id, user,
                    sim_chance(0.7) ? "choose" : "switch", (int)sim_below(NITEMS) + 1);
}

static int gen_auto(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    pick_user(user);
    if (sim_chance(0.5))
        return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"auto\",\"prefs\":[\"R%d\",\"R%d\"]}",
                        id, user, (int)sim_below(NITEMS) + 1, (int)sim_below(NITEMS) + 1);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"auto\",\"filter\":{\"floor\":\"%d\"}}",
                    id, user, (int)sim_below(2) + 1);
}

/* groups = formed: users pair up (u1 with u2, u3 with u4 ...), so an
 * accept often meets an invitation; the group then places who consented */
static int partner(int a) { return a % 2 ? (a < NUSERS ? a + 1 : 1) : a - 1; }

/* Mostly the partner; now and then anybody, so groups grow past two, meet
 * max_group (3) and users already in another group. */
static int other_user(int a)
{
    if (sim_chance(0.7)) return partner(a);
    int b = (int)sim_below(NUSERS) + 1;
    return b == a ? partner(a) : b;
}

static int gen_invite(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    if (!wl->formed) return 0;
    int a = (int)sim_below(NUSERS) + 1;
    snprintf(user, 16, "u%d", a);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"u%d\",\"op\":\"invite\",\"to\":[\"u%d\"]}", id, a,
                    other_user(a));
}

static int gen_accept(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    if (!wl->formed) return 0;
    int a = (int)sim_below(NUSERS) + 1;
    snprintf(user, 16, "u%d", a);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"u%d\",\"op\":\"%s\",\"from\":\"u%d\"}", id, a,
                    sim_chance(0.85) ? "accept" : "decline", other_user(a));
}

/* contract 9.2: leaving hands the lead on or dissolves the group */
static int gen_leave(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    if (!wl->formed) return 0;
    pick_user(user);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"leave\"}", id, user);
}

/* contract 9.2: shared preferences with a version check; small versions,
 * so members race and most edits meet `conflict` */
static int gen_prefs(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    if (!wl->formed) return 0;
    pick_user(user);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"prefs\",\"prefs\":[\"R%d\",\"R%d\"],"
                    "\"version\":%d}", id, user, (int)sim_below(NITEMS) + 1, (int)sim_below(NITEMS) + 1,
                    (int)sim_below(3));
}

/* contract 9.3: an offer to another user waits (a `waiting` result,
 * replaced once) until they offer back or it ends */
static int gen_swap(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    int a = (int)sim_below(NUSERS) + 1;
    snprintf(user, 16, "u%d", a);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"u%d\",\"op\":\"swap\",\"with\":\"u%d\"}", id, a,
                    partner(a));
}

/* a group asks for one room, and half the time any room of a floor too
 * (contract 11.4's exact fill and 11.2's same_X across the members find
 * a room more often that way) */
static int gen_group(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    int a = (int)sim_below(NUSERS) + 1, b = (int)sim_below(NUSERS) + 1, c = (int)sim_below(NUSERS) + 1;
    if (a == b) b = b % NUSERS + 1;
    char filter[48] = "";
    if (sim_chance(0.5)) snprintf(filter, sizeof filter, ",\"filter\":{\"floor\":\"%d\"}", (int)sim_below(2) + 1);
    snprintf(user, 16, "u%d", a);
    if (wl->formed)
        return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"u%d\",\"op\":\"group\",\"prefs\":[\"R%d\"]%s}", id, a,
                        (int)sim_below(NITEMS) + 1, filter);
    char third[16] = "";
    if (c != a && c != b && sim_chance(0.3)) snprintf(third, sizeof third, ",\"u%d\"", c);
    return snprintf(buf, n, "{\"id\":\"%s\",\"user\":\"u%d\",\"op\":\"group\",\"members\":[\"u%d\",\"u%d\"%s],"
                    "\"prefs\":[\"R%d\"]%s}", id, a, a, b, third, (int)sim_below(NITEMS) + 1, filter);
}

/* contract 11.5: staff place a user whatever the batch's state, with
 * `check` (eligibility) half the time; rooms a bed, stock 1-2 units */
static int gen_assign(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    pick_user(user);
    const char *check = sim_chance(0.5) ? ",\"check\":true" : "";
    if (wl->room)
        return snprintf(buf, n, "{\"id\":\"%s\",\"op\":\"assign\",\"user\":\"%s\",\"item\":\"R%d\"%s}", id, user,
                        (int)sim_below(NITEMS) + 1, check);
    return snprintf(buf, n, "{\"id\":\"%s\",\"op\":\"assign\",\"user\":\"%s\",\"item\":\"sku%d\",\"qty\":%d%s}", id,
                    user, (int)sim_below(NITEMS) + 1, (int)sim_below(2) + 1, check);
}

/* the bed, all the user's orders, or (stock, 40%) one order a buy or an
 * assign was granted */
static int gen_unassign(workload *wl, simr *s, const batch_keys *k, char *id, char *user, char *buf, size_t n)
{
    for (int tries = 0; !wl->room && sim_chance(0.4) && tries < 8 && wl->nsent; tries++) {
        sent_req *r = &wl->sent[sim_below(wl->nsent)];
        const char *res = r->is_buy ? simr_hget(s, k->results, r->id, NULL) : NULL;
        const char *o = res ? strstr(res, "\"order\":\"") : NULL;
        const char *e = o ? strchr(o + 9, '"') : NULL;
        if (!e) continue;
        snprintf(user, 16, "%s", r->user);
        return snprintf(buf, n, "{\"id\":\"%s\",\"op\":\"unassign\",\"user\":\"%s\",\"order\":\"%.*s\"}", id, user,
                        (int)(e - o - 9), o + 9);
    }
    pick_user(user);
    return snprintf(buf, n, "{\"id\":\"%s\",\"op\":\"unassign\",\"user\":\"%s\"}", id, user);
}

/* The workload: one line per op. An op of a new protocol version is a
 * generator above and a line here. */
static const sim_op ops[] = {
    { "buy", K_STOCK, 50, 0, gen_buy },
    { "confirm", K_STOCK, 10, 0, gen_confirm },
    { "cancel", K_STOCK, 5, 0, gen_cancel },
    { "choose", K_ROOM, 30, 0, gen_choose },
    { "auto", K_ROOM, 20, 0, gen_auto },
    { "group", K_ROOM, 8, 0, gen_group },
    { "invite", K_ROOM, 6, 0, gen_invite },
    { "accept", K_ROOM, 6, 0, gen_accept },
    { "leave", K_ROOM, 2, 0, gen_leave },
    { "prefs", K_ROOM, 2, 0, gen_prefs },
    { "swap", K_ROOM, 5, 0, gen_swap },
    { "release", K_ANY, 8, 0, gen_release },
    { "wait", K_ANY, 12, 0, gen_wait },
    { "resubmit", K_ANY, 10, 0, gen_resubmit },
    { "invalid", K_ANY, 2, 0, gen_invalid },
    { "garbage", K_ANY, 2, 0, gen_garbage },
    { "pause", K_ANY, 1, 1, gen_pause },
    { "resume", K_ANY, 3, 1, gen_resume },
    { "set_capacity", K_ANY, 2, 1, gen_capacity },
    { "assign", K_ANY, 3, 1, gen_assign },
    { "unassign", K_ANY, 2, 1, gen_unassign },
};

#define NOPS (sizeof ops / sizeof ops[0])

static int op_drawn(const workload *wl, const sim_op *op)
{
    return op->kind == K_ANY || op->kind == (wl->room ? K_ROOM : K_STOCK);
}

static const sim_op *op_named(const char *name)
{
    for (size_t i = 0; i < NOPS; i++)
        if (!strcmp(ops[i].name, name)) return &ops[i];
    abort();
}

/* ------------------------------------------------------------- the run -- */

typedef struct sim_run_state {
    sim_world w;
    const sim_opts *o;
    batch_keys keys;
    allocd_config cfg[SIM_MAX_INST];
    allocd_scripts scripts;
    registry *reg[SIM_MAX_INST];
    simr_client *producer;
    workload wl;
    uint64_t requests, applies;
    int64_t per_user;
    int answer_ms;        /* every instance's config: the liveness bound */
    int wait_replicas;    /* config: WAIT before each apply (0 or 1) */
    int64_t log_maxlen;   /* config: the log's trim */
    int archive;          /* config archive_group "archive": LOG_TRIM, the archiver runs */
    sim_archive *arch;    /* every log entry written, and the archiver (sim_archive.h) */
    int failover_pending; /* the restart scheduled is a failover (snap = the replica) */
    int restart_pending;  /* a restart is scheduled (no switch starts meanwhile) */
    /* Sentinel's switch-master under way (ev_switch): the master it
     * leaves, the copy the promoted replica holds, the phase */
    int sw_from, sw_phase;        /* SW_NONE, SW_SYNCING, SW_PARTITIONED, SW_PROMOTED */
    simr_db *sw_snap;
    int switches;
    int replicas;                 /* the master's replicas (2 with the switch fault) */
    /* results a failover WAIT should have protected took back, owed until
     * they come back with the same bytes (check_owed) */
    char **owed_id, **owed_v;
    size_t nowed, capowed;
    /* the transaction being checked (exec_pre -> exec_post) */
    char **taken;         /* raw entries LTRIMmed off queue or ctl */
    size_t ntaken, taken_cap;
    int checking;
    int pool_closing;     /* it writes lottery_done: the pool is all served */
    int holders_written;  /* it writes P:{B}:holders */
    simr_db *snap;        /* for a restart that loses the last writes */
    int tearing_down;
    ctl_replay *replay;   /* the log replayed so far (check_replay) */
    size_t replay_fed;
    c11 *c11;             /* contract 11: profiles, rules, draw_by, group_fill (sim_c11.h) */
    size_t *by_num;       /* request number (r<n>, c<n>) -> its first sent entry + 1 */
    size_t by_num_cap;
    sim_reshard *reshard; /* the cluster fault: slots moving between masters */
} sim_run_state;

static int64_t producer_ms(void) { return sim_server_ms(); }

static redisReply *server_cmd(sim_run_state *st, int argc, const char **argv)
{
    size_t small[16], *lens = argc <= 16 ? small : calloc((size_t)argc, sizeof *lens);
    if (!lens) abort();
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    /* a producer in a cluster follows ASK: a key its slot's source no
     * longer has is written on the target */
    if (st->w.cluster) simc_forget_missing(st->w.cluster, producer_ms());
    redisReply *r = simr_exec(st->w.redis, st->producer, argc, argv, lens, producer_ms());
    if (lens != small) free(lens);
    return r;
}

/* A command of the producers or the operator: 0, or -1 when Redis refused
 * it (out of memory: the `oom` fault). */
static int server_cmd_quiet(sim_run_state *st, int argc, const char **argv)
{
    redisReply *r = server_cmd(st, argc, argv);
    int rc = r && r->type == REDIS_REPLY_ERROR ? -1 : 0;
    if (r) freeReplyObject(r);
    return rc;
}

/* Slots for n users outside the workload (x1, x2, ...), in one HSET. */
static void pad_slots(sim_run_state *st, int n)
{
    const char **argv = calloc((size_t)(2 + 2 * n), sizeof *argv);
    char (*names)[16] = calloc((size_t)n, sizeof *names), (*ats)[24] = calloc((size_t)n, sizeof *ats);
    if (!argv || !names || !ats) abort();
    argv[0] = "HSET";
    argv[1] = st->keys.slots;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "x%d", i + 1);
        snprintf(ats[i], sizeof ats[i], "%" PRId64, sim_server_ms() + (int64_t)sim_below(6000));
        argv[2 + 2 * i] = names[i];
        argv[3 + 2 * i] = ats[i];
    }
    server_cmd_quiet(st, 2 + 2 * n, argv);
    free(argv);
    free(names);
    free(ats);
}

/* The first request sent under an id (r<n>, c<n>: n is next_id). */
static void index_request(sim_run_state *st, const char *id, size_t i)
{
    size_t n = strtoull(id + 1, NULL, 10);
    if (n >= st->by_num_cap) {
        size_t cap = st->by_num_cap ? st->by_num_cap : 256;
        while (cap <= n) cap *= 2;
        st->by_num = realloc(st->by_num, cap * sizeof *st->by_num);
        if (!st->by_num) abort();
        memset(st->by_num + st->by_num_cap, 0, (cap - st->by_num_cap) * sizeof *st->by_num);
        st->by_num_cap = cap;
    }
    if (!st->by_num[n]) st->by_num[n] = i + 1;
}

static const char *request_raw(void *ud, const char *id)
{
    sim_run_state *st = ud;
    if (id[0] != 'r' && id[0] != 'c') return NULL;
    size_t n = strtoull(id + 1, NULL, 10);
    return n < st->by_num_cap && st->by_num[n] ? st->wl.sent[st->by_num[n] - 1].raw : NULL;
}

static int c11_cmd(void *ud, int argc, const char **argv)
{
    return server_cmd_quiet(ud, argc, argv);
}

static void push_request(sim_run_state *st, const sim_op *op)
{
    char id[32], user[16] = "", buf[512];
    snprintf(id, sizeof id, "%c%" PRIu64, op->ctl ? 'c' : 'r', ++st->wl.next_id);
    int n = op->gen(&st->wl, st->w.redis, &st->keys, id, user, buf, sizeof buf);
    if (n <= 0 || (size_t)n >= sizeof buf) return;
    const char *argv[] = { "RPUSH", op->ctl ? st->keys.ctl : st->keys.queue, buf };
    if (server_cmd_quiet(st, 3, argv) < 0) return;   /* refused: out of memory */
    st->requests++;
    if (st->wl.nsent == st->wl.cap) {
        st->wl.cap = st->wl.cap ? st->wl.cap * 2 : 256;
        st->wl.sent = realloc(st->wl.sent, st->wl.cap * sizeof *st->wl.sent);
        if (!st->wl.sent) abort();
    }
    sent_req *r = &st->wl.sent[st->wl.nsent++];
    r->raw = strdup(buf);
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->user, sizeof r->user, "%s", user);
    r->is_buy = op->gen == gen_buy || op->gen == gen_assign;
    index_request(st, id, st->wl.nsent - 1);
    sim_net_retry_blocked();
}

static void ev_produce(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    if (!st->w.faults_on) return;
    int total = 0;
    for (size_t i = 0; i < NOPS; i++) total += op_drawn(&st->wl, &ops[i]) ? ops[i].weight : 0;
    int pick = (int)sim_below((uint64_t)total);
    size_t i = 0;
    for (;; i++) {
        if (!op_drawn(&st->wl, &ops[i])) continue;
        if (pick < ops[i].weight) break;
        pick -= ops[i].weight;
    }
    push_request(st, &ops[i]);
    /* the operator edits a profile now and then (contract 11.2) */
    if (sim_chance(0.02)) c11_edit(st->c11);
    /* bursts and lulls: 0.2 ms .. 40 ms apart */
    uint64_t gap = sim_chance(0.7) ? 200000 + sim_below(2000000) : sim_below(40000000);
    sim_at(st->w.now + gap, -1, ev_produce, st, NULL, 0);
}

/* ---------------------------------------------------------- invariants -- */

static int is_key(const char *a, size_t n, const char *key)
{
    return n == strlen(key) && !memcmp(a, key, n);
}

static int batch_write(const sim_run_state *st, const char *cmd, const char *key, size_t kn)
{
    static const char *const writes[] = { "HSET", "HDEL", "RPUSH", "XADD", "LTRIM", "DEL", "SET", "HINCRBY" };
    int w = 0;
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) w |= !strcasecmp(cmd, writes[i]);
    char pfx[64];
    snprintf(pfx, sizeof pfx, "alloc:{%s}:", BATCH);
    return w && kn >= strlen(pfx) && !memcmp(key, pfx, strlen(pfx));
}

static void take_entries(sim_run_state *st, const char *list, long n)
{
    for (long i = 0; i < n; i++) {
        size_t len;
        const char *raw = simr_lindex(st->w.redis, list, (size_t)i, &len);
        if (!raw) break;
        if (st->ntaken == st->taken_cap) {
            st->taken_cap = st->taken_cap ? st->taken_cap * 2 : 64;
            st->taken = realloc(st->taken, st->taken_cap * sizeof *st->taken);
            if (!st->taken) abort();
        }
        st->taken[st->ntaken++] = strndup(raw, len);
    }
}

/* "waiting" (contract 9.5) is the only status ever replaced, and by a
 * final one: waiting again would be a second waitlist entry. */
static int is_waiting(const char *v, size_t n)
{
    json_t *j = json_loadb(v, n, 0, NULL);
    const char *status = json_string_value(json_object_get(j, "status"));
    int w = status && !strcmp(status, "waiting");
    json_decref(j);
    return w;
}

/* Contract 9.4: nobody's buy, choose or auto passes before their selection
 * slot: granted, or waiting on the waitlist (9.5), only at or after it on
 * the clock of the instance that decided, which is also the result's `at`.
 * A grant that ends a wait was let in when it joined (that `waiting`
 * result was checked); its own `at` is when units came back, which the
 * clock faults can put back before the slot. The slots come from
 * P:{B}:slots, which the worker reads in HSCAN pages (worker/slots_scan.h)
 * when the hash is large. */
static void check_slot(sim_run_state *st, const char *had, size_t had_len, const char *v, size_t n)
{
    json_t *j = json_loadb(v, n, 0, NULL);
    const char *status = json_string_value(json_object_get(j, "status"));
    const char *op = json_string_value(json_object_get(j, "op"));
    const char *user = json_string_value(json_object_get(j, "user"));
    json_int_t at = json_integer_value(json_object_get(j, "at"));
    const char *slot = user ? simr_hget(st->w.redis, st->keys.slots, user, NULL) : NULL;
    int let_in = status && (!strcmp(status, "waiting") ||
                            (!strcmp(status, "granted") && !(had && is_waiting(had, had_len))));
    if (slot && let_in && op && (!strcmp(op, "buy") || !strcmp(op, "choose") || !strcmp(op, "auto")) &&
        at < strtoll(slot, NULL, 10))
        sim_fail("user %s let in at %" PRId64 ", before their slot %s: %.*s", user, (int64_t)at, slot,
                 (int)n, v);
    json_decref(j);
}

static void check_owed(sim_run_state *st, const char *id, const char *v, size_t vn);

static void check_result_write(sim_run_state *st, int argc, char **argv, size_t *lens)
{
    for (int i = 2; i + 1 < argc; i += 2) {
        size_t have_len;
        const char *have = simr_hget(st->w.redis, st->keys.results, argv[i], &have_len);
        check_slot(st, have, have_len, argv[i + 1], lens[i + 1]);
        check_owed(st, argv[i], argv[i + 1], lens[i + 1]);
        if (have && (have_len != lens[i + 1] || memcmp(have, argv[i + 1], have_len)) &&
            !(is_waiting(have, have_len) && !is_waiting(argv[i + 1], lens[i + 1])))
            sim_fail("request %s has two results: %.*s, then %s", argv[i], (int)have_len, have, argv[i + 1]);
    }
}

/* The position formula (PROTOCOL.md, "Queue position"): a request taken
 * off the queue at index i of a transaction that starts from dequeued D
 * is the (D + i + 1)th ever pushed, and its result says so in `seq`. */
static void check_seq(sim_run_state *st, int n, int *argc, char ***argv, size_t **lens)
{
    const char *d = simr_hget(st->w.redis, st->keys.stats, "dequeued", NULL);
    int64_t base = d ? strtoll(d, NULL, 10) : 0;
    for (int c = 0; c < n; c++) {
        if (strcasecmp(argv[c][0], "LTRIM") || !is_key(argv[c][1], lens[c][1], st->keys.queue)) continue;
        long k = strtol(argv[c][2], NULL, 10);
        char **ids = calloc(k > 0 ? (size_t)k : 1, sizeof *ids);
        if (!ids) abort();
        for (long i = 0; i < k; i++) {   /* each entry's id, read once */
            size_t len;
            const char *raw = simr_lindex(st->w.redis, st->keys.queue, (size_t)i, &len);
            json_t *j = raw ? json_loadb(raw, len, 0, NULL) : NULL;
            const char *id = json_string_value(json_object_get(j, "id"));
            ids[i] = id ? strdup(id) : NULL;
            json_decref(j);
        }
        for (long i = 0; i < k; i++) {
            const char *id = ids[i];
            /* the result this transaction writes for it, if any (not for a
             * duplicate, or the second copy of an id in one chunk; a
             * duplicate of a waiting request may meet the original's final
             * result, served from the waitlist, with the original's seq) */
            if (id && simr_hget(st->w.redis, st->keys.results, id, NULL)) id = NULL;
            int first = 1;
            for (long e = 0; id && e < i && first; e++) first = !(ids[e] && !strcmp(ids[e], id));
            for (int h = 0; id && first && h < n; h++) {
                if (strcasecmp(argv[h][0], "HSET") || !is_key(argv[h][1], lens[h][1], st->keys.results)) continue;
                for (int f = 2; f + 1 < argc[h]; f += 2) {
                    if (strcmp(argv[h][f], id)) continue;
                    json_t *r = json_loads(argv[h][f + 1], 0, NULL);
                    json_t *seq = json_object_get(r, "seq");
                    if (!json_is_integer(seq) || json_integer_value(seq) != base + i + 1)
                        sim_fail("request %s: seq %" PRId64 ", but it is the %" PRId64 "th pushed", id,
                                 json_is_integer(seq) ? (int64_t)json_integer_value(seq) : -1, base + i + 1);
                    json_decref(r);
                }
            }
        }
        for (long i = 0; i < k; i++) free(ids[i]);
        free(ids);
    }
}

static void exec_pre(void *ud, simr *s, simr_client *c, int n, int *argc, char ***argv, size_t **lens)
{
    sim_run_state *st = ud;
    int writes = 0;
    st->ntaken = 0;
    st->pool_closing = 0;
    st->holders_written = 0;
    for (int i = 0; i < n; i++) {
        if (argc[i] < 2) continue;
        st->holders_written |= is_key(argv[i][1], lens[i][1], st->keys.holders);
        if (batch_write(st, argv[i][0], argv[i][1], lens[i][1])) writes++;
        if (!strcasecmp(argv[i][0], "HSET") && is_key(argv[i][1], lens[i][1], st->keys.results)) {
            check_result_write(st, argc[i], argv[i], lens[i]);
            c11_pre(st->c11, argc[i], argv[i], lens[i]);
        }
        if (!strcasecmp(argv[i][0], "LTRIM") && (is_key(argv[i][1], lens[i][1], st->keys.queue) ||
                                                 is_key(argv[i][1], lens[i][1], st->keys.ctl)))
            take_entries(st, argv[i][1], strtol(argv[i][2], NULL, 10));
        /* the pool's last chunk: every request in it is answered after */
        if (!strcasecmp(argv[i][0], "HSET") && is_key(argv[i][1], lens[i][1], st->keys.internal))
            for (int f = 2; f + 1 < argc[i]; f += 2)
                if (!strcmp(argv[i][f], "lottery_done") && !strcmp(argv[i][f + 1], "1")) st->pool_closing = 1;
    }
    st->checking = writes > 0;
    if (!writes) return;
    check_seq(st, n, argc, argv, lens);
    st->applies++;
    const char *tok = simr_client_fence_token(c), *ep = simr_client_fence_epoch(c);
    if (!tok) {
        sim_fail("fencing: a transaction writes the batch without FENCE (%d commands, the first %s %s)", n,
                 n ? argv[0][0] : "-", n && argc[0] > 1 ? argv[0][1] : "");
        return;
    }
    const char *lease = simr_get_str(s, st->keys.lease, NULL, sim_server_ms());
    const char *epoch = simr_hget(s, st->keys.internal, "epoch", NULL);
    if (!lease || strcmp(lease, tok))
        sim_fail("fencing: a stale owner writes: FENCE passed for %s, the lease is now %s", tok,
                 lease ? lease : "(none)");
    else if (!epoch || strcmp(epoch, ep))
        sim_fail("fencing: epoch %s written under epoch %s", ep, epoch ? epoch : "(none)");
}

static void on_replay_finding(void *ud, replay_kind kind, const char *msg)
{
    sim_fail("log replay: %s", msg);
}

typedef struct kvs { ctl_kv *kv; size_t n, cap; } kvs;

static void kv_add(void *ud, const char *k, size_t kn, const char *v, size_t vn)
{
    kvs *a = ud;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 32;
        a->kv = realloc(a->kv, a->cap * sizeof *a->kv);
        if (!a->kv) abort();
    }
    a->kv[a->n++] = (ctl_kv){ k, v, vn };
}

/* The entries written since the last check, from the simulator's copy of
 * the log (sim_archive.h): trimming leaves the replay whole. */
static void replay_feed(sim_run_state *st)
{
    for (; st->replay_fed < sima_count(st->arch); st->replay_fed++) {
        const sima_entry *e = sima_at(st->arch, st->replay_fed);
        ctl_kv kv[32];
        size_t n = 0;
        for (size_t i = 0; i + 1 < e->nf && n < 32; i += 2) kv[n++] = (ctl_kv){ e->f[i], e->f[i + 1], e->fl[i + 1] };
        ctl_replay_entry(st->replay, e->id, kv, n);
    }
}

/* The log replayed from the start equals holders and free. The replay is
 * kept between checks and fed only the new entries (a restart that loses
 * writes starts it again): the comparison itself runs on every commit. */
static void check_replay(sim_run_state *st)
{
    if (!st->replay) {
        st->replay = ctl_replay_new(st->wl.room, st->per_user, on_replay_finding, st);
        st->replay_fed = 0;
        if (!st->replay) abort();
        c11_attach(st->c11, st->replay);
    }
    replay_feed(st);
    kvs cap = { 0 }, hold = { 0 }, fr = { 0 }, wait = { 0 };
    simr_hash_each(st->w.redis, st->keys.capacity, kv_add, &cap);
    simr_hash_each(st->w.redis, st->keys.holders, kv_add, &hold);
    simr_hash_each(st->w.redis, st->keys.free, kv_add, &fr);
    simr_hash_each(st->w.redis, st->keys.waitlist, kv_add, &wait);
    const char *fu = simr_hget(st->w.redis, st->keys.stats, "free_units", NULL);
    /* stats.waiting is the waitlist's length (contract 9.5), as the log's
     * waits are (open swap offers, 9.3, are stats.swap_offers) */
    const char *wn = simr_hget(st->w.redis, st->keys.stats, "waiting", NULL);
    ctl_snapshot snap = { cap.kv, cap.n, hold.kv, hold.n, fr.kv, fr.n, fu != NULL, fu ? strtoll(fu, NULL, 10) : 0,
                          wait.kv, wait.n, wn != NULL, wn ? strtoll(wn, NULL, 10) : 0 };
    ctl_replay_finish(st->replay, &snap);
    free(cap.kv);
    free(hold.kv);
    free(fr.kv);
    free(wait.kv);
}

static void replay_reset(sim_run_state *st)
{
    if (st->replay) ctl_replay_free(st->replay);
    st->replay = NULL;
    st->replay_fed = 0;
}

/* dead holds {"raw": raw, ...} */
static int in_dead(sim_run_state *st, const char *raw)
{
    size_t n = simr_llen(st->w.redis, st->keys.dead);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *e = simr_lindex(st->w.redis, st->keys.dead, i, &len);
        json_t *j = json_loadb(e, len, 0, NULL);
        const char *r = json_string_value(json_object_get(j, "raw"));
        int hit = r && !strcmp(r, raw);
        json_decref(j);
        if (hit) return 1;
    }
    return 0;
}

/* P:{B}:early holds "<seq> <request bytes>" per kept request (and
 * "! <user>" per throttled user, "= <points> <user>" per ticket drawn by
 * points): is raw one of them? */
static const char *pool_raw(const char *e, size_t len, size_t *n)
{
    if (len < 2 || e[0] == '!' || e[0] == '=') return NULL;
    const char *sp = memchr(e, ' ', len);
    if (!sp) return NULL;
    *n = len - (size_t)(sp + 1 - e);
    return sp + 1;
}

static int in_pool(sim_run_state *st, const char *raw)
{
    size_t n = simr_llen(st->w.redis, st->keys.early), rl = strlen(raw);
    for (size_t i = 0; i < n; i++) {
        size_t len, pl;
        const char *e = simr_lindex(st->w.redis, st->keys.early, i, &len);
        const char *p = e ? pool_raw(e, len, &pl) : NULL;
        if (p && pl == rl && !memcmp(p, raw, rl)) return 1;
    }
    return 0;
}

static size_t pool_requests(sim_run_state *st)
{
    size_t n = simr_llen(st->w.redis, st->keys.early), k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len, pl;
        const char *e = simr_lindex(st->w.redis, st->keys.early, i, &len);
        k += e && pool_raw(e, len, &pl) != NULL;
    }
    return k;
}

/* the pool's requests not served yet: the pool stays after the lottery */
static size_t pool_pending(sim_run_state *st)
{
    const char *done = simr_hget(st->w.redis, st->keys.internal, "lottery_done", NULL);
    if (done && !strcmp(done, "1")) return 0;
    const char *served = simr_hget(st->w.redis, st->keys.internal, "early_served", NULL);
    size_t k = pool_requests(st), sv = served ? strtoull(served, NULL, 10) : 0;
    return k > sv ? k - sv : 0;
}

/* once the lottery is done, every request of the pool has its result (or
 * is dead: a poison request) */
static void check_pool_answered(sim_run_state *st)
{
    size_t n = simr_llen(st->w.redis, st->keys.early);
    for (size_t i = 0; i < n; i++) {
        size_t len, pl;
        const char *e = simr_lindex(st->w.redis, st->keys.early, i, &len);
        const char *p = e ? pool_raw(e, len, &pl) : NULL;
        if (!p) continue;
        char *raw = strndup(p, pl);
        json_t *j = json_loads(raw, 0, NULL);
        const char *id = json_string_value(json_object_get(j, "id"));
        if (id && !simr_hget(st->w.redis, st->keys.results, id, NULL) && !in_dead(st, raw))
            sim_fail("lottery: the pool is served (lottery_done), yet %s has no result", id);
        json_decref(j);
        free(raw);
    }
}

static int64_t stat_of(sim_run_state *st, const char *f)
{
    const char *v = simr_hget(st->w.redis, st->keys.stats, f, NULL);
    return v ? strtoll(v, NULL, 10) : 0;
}

/* The counters' contract (PROTOCOL.md 6): processed and the staff's
 * placements (11.5, in granted, not in processed) are the sum of the
 * statuses (`waiting` results included: stats.waiting, the waitlist, and
 * stats.swap_offers, the open swap offers), and
 * every request taken off the queue is counted once --
 * dequeued = processed + dead + duplicates + (early_kept - early served). */
static void check_stats(sim_run_state *st)
{
    if (!simr_hget(st->w.redis, st->keys.stats, "processed", NULL)) return;
    int64_t processed = stat_of(st, "processed"), sum = stat_of(st, "granted") + stat_of(st, "done") +
                        stat_of(st, "rejected") + stat_of(st, "invalid") + stat_of(st, "waiting") +
                        stat_of(st, "swap_offers"), staff = stat_of(st, "staff_granted");
    if (processed + staff != sum)
        sim_fail("stats: processed %" PRId64 " + staff_granted %" PRId64 ", but granted + done + rejected + invalid + "
                 "waiting + swap_offers = %" PRId64, processed, staff, sum);
    const char *served = simr_hget(st->w.redis, st->keys.internal, "early_served", NULL);
    int64_t kept = stat_of(st, "early_kept") - (served ? strtoll(served, NULL, 10) : 0);
    int64_t d = stat_of(st, "dequeued"), counted = processed + stat_of(st, "dead") + stat_of(st, "duplicates");
    if (d != counted + kept)
        sim_fail("stats: dequeued %" PRId64 " but processed + dead + duplicates = %" PRId64
                 ", early_kept - early_served = %" PRId64, d, counted, kept);
    if (kept < 0 || (size_t)stat_of(st, "early_kept") != pool_requests(st))
        sim_fail("lottery: early_kept %" PRId64 " (%" PRId64 " not served), the pool holds %zu requests",
                 stat_of(st, "early_kept"), kept, pool_requests(st));
    /* contract 9.5: stats.waiting = the waitlist's length (open swap
     * offers, 9.3, are stats.swap_offers, not in it) */
    if (stat_of(st, "waiting") != (int64_t)simr_hlen(st->w.redis, st->keys.waitlist))
        sim_fail("stats: waiting %" PRId64 ", but the waitlist holds %zu (swap_offers %" PRId64 ")",
                 stat_of(st, "waiting"), simr_hlen(st->w.redis, st->keys.waitlist), stat_of(st, "swap_offers"));
    /* contract 9.5: at close the waitlist's remaining requests are
     * refused; 9.3: so are the open swap offers */
    const char *state = simr_hget(st->w.redis, st->keys.stats, "state", NULL);
    if (state && !strcmp(state, "closed") &&
        (stat_of(st, "waiting") || simr_hlen(st->w.redis, st->keys.waitlist) || stat_of(st, "swap_offers")))
        sim_fail("waitlist: the batch is closed, yet %" PRId64 " requests wait (%zu in the waitlist, %" PRId64
                 " swap offers)", stat_of(st, "waiting"), simr_hlen(st->w.redis, st->keys.waitlist),
                 stat_of(st, "swap_offers"));
}

static void exec_post(void *ud, simr *s, simr_client *c)
{
    sim_run_state *st = ud;
    if (!st->checking) return;
    for (size_t i = 0; i < st->ntaken; i++) {
        json_t *j = json_loads(st->taken[i], 0, NULL);
        json_t *id = j && json_is_object(j) ? json_object_get(j, "id") : NULL;
        if (id && json_is_string(id)) {
            /* a poison request goes to dead after 2 x max_attempts (PROTOCOL.md 3.1);
             * no other request with an id ever does */
            int answered = simr_hget(s, st->keys.results, json_string_value(id), NULL) != NULL;
            int dead = !answered && in_dead(st, st->taken[i]);
            const char *poison = getenv("ALLOCD_FAULT_APPLY_ID");
            if (dead && (!poison || strcmp(poison, json_string_value(id))))
                sim_fail("request %s went to dead, but only the poison request (%s) may: %s", json_string_value(id),
                         poison ? poison : "none this seed", st->taken[i]);
            else if (!answered && !dead && !in_pool(st, st->taken[i]))
                sim_fail("request %s was taken off the queue without a result: %s", json_string_value(id), st->taken[i]);
        } else if (!in_dead(st, st->taken[i])) {
            sim_fail("a request without an id was taken off the queue and is not in dead: %s", st->taken[i]);
        }
        json_decref(j);
        free(st->taken[i]);
    }
    st->ntaken = 0;
    if (st->pool_closing) check_pool_answered(st);
    check_replay(st);
    sima_check(st->arch, s);
    check_stats(st);
    c11_commit(st->c11, st->holders_written);
}

/* -------------------------------------------------------------- faults -- */

enum { SW_NONE, SW_SYNCING, SW_PARTITIONED, SW_PROMOTED };

static void ev_redis_up(void *a, void *b, uint64_t x)
{
    sim_w->srv[x].down = 0;
}

/* ------------------------------------------------ results taken back -- */

static size_t owed_find(sim_run_state *st, const char *id)
{
    for (size_t i = 0; i < st->nowed; i++)
        if (!strcmp(st->owed_id[i], id)) return i;
    return (size_t)-1;
}

static void owed_drop(sim_run_state *st, size_t i)
{
    free(st->owed_id[i]);
    free(st->owed_v[i]);
    st->owed_id[i] = st->owed_id[--st->nowed];
    st->owed_v[i] = st->owed_v[st->nowed];
}

typedef struct lost_walk { sim_run_state *st; simr *after; int guarded; } lost_walk;

/* One result of the copy before a restore: taken back when the copy after
 * has it no more, or otherwise. A loss WAIT should have prevented is owed
 * (it must come back with the same bytes); any other may be decided again
 * (appendfsync everysec, asynchronous replication), and is owed no more. */
static void lost_result(void *ud, const char *k, size_t kn, const char *v, size_t vn)
{
    lost_walk *lw = ud;
    sim_run_state *st = lw->st;
    char id[128];
    snprintf(id, sizeof id, "%.*s", (int)kn, k);
    size_t now_len;
    const char *now = simr_hget(lw->after, st->keys.results, id, &now_len);
    if (now && now_len == vn && !memcmp(now, v, vn)) return;
    st->w.taken_back++;
    size_t i = owed_find(st, id);
    if (!lw->guarded) { if (i != (size_t)-1) owed_drop(st, i); return; }
    if (i != (size_t)-1) return;
    if (st->nowed == st->capowed) {
        st->capowed = st->capowed ? st->capowed * 2 : 64;
        st->owed_id = realloc(st->owed_id, st->capowed * sizeof *st->owed_id);
        st->owed_v = realloc(st->owed_v, st->capowed * sizeof *st->owed_v);
        if (!st->owed_id || !st->owed_v) abort();
    }
    st->owed_id[st->nowed] = strdup(id);
    st->owed_v[st->nowed++] = strndup(v, vn);
}

/* The results of `before` that `after` lost (counted, owed when guarded). */
static void count_lost(sim_run_state *st, simr *before, simr *after, int guarded)
{
    lost_walk lw = { st, after, guarded };
    simr_hash_each(before, st->keys.results, lost_result, &lw);
}

/* A result written while owed: the same bytes pay it (a waiting one may
 * become final), other bytes are a result a user saw taken back. */
static void check_owed(sim_run_state *st, const char *id, const char *v, size_t vn)
{
    size_t i = owed_find(st, id);
    if (i == (size_t)-1) return;
    if ((strlen(st->owed_v[i]) == vn && !memcmp(st->owed_v[i], v, vn)) ||
        (is_waiting(st->owed_v[i], strlen(st->owed_v[i])) && !is_waiting(v, vn))) {
        owed_drop(st, i);
        return;
    }
    sim_fail("failover: %s's result %s was taken back although WAIT counted the replica promoted, and decided "
             "again: %.*s", id, st->owed_v[i], (int)vn, v);
}

/* At the end: every owed result came back. */
static void check_owed_paid(sim_run_state *st)
{
    for (size_t i = 0; i < st->nowed && !st->w.failed; i++) {
        size_t len;
        const char *v = simr_hget(st->w.redis, st->keys.results, st->owed_id[i], &len);
        if (!v || len != strlen(st->owed_v[i]) || memcmp(v, st->owed_v[i], len))
            sim_fail("failover: %s's result %s was taken back although WAIT counted the replica promoted, and is %s",
                     st->owed_id[i], st->owed_v[i], v ? "another now" : "gone");
    }
}

static void ev_snapshot(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    simr_db_free(st->snap);
    st->snap = simr_snapshot(st->w.redis);
}

/* WAIT counted the replicas: they hold every write so far, so the
 * failover pending promotes a copy with all of them; so does a switch
 * whose replica is not cut off yet */
static void replicas_synced(void *ud, simr *s)
{
    sim_run_state *st = ud;
    if (s != st->w.redis) return;
    if (st->failover_pending) ev_snapshot(st, NULL, 0);
    if (st->sw_phase == SW_SYNCING) {
        simr_db_free(st->sw_snap);
        st->sw_snap = simr_snapshot(s);
    }
}

/* x: 0 restart keeping everything, 1 AOF everysec losing the tail, 2 failover */
static void ev_restart(void *a, void *b, uint64_t kind)
{
    sim_run_state *st = a;
    st->restart_pending = 0;
    if (!st->w.faults_on || st->sw_phase != SW_NONE) return;
    if (st->w.verbose) fprintf(stderr, "sim: server %d restarts (%s)\n", st->w.master,
                               kind == 2 ? "failover" : kind ? "losing the last writes" : "keeping every write");
    st->w.restarts++;
    sim_server *sv = &st->w.srv[st->w.master];
    sv->gen++;
    simr_set_oom(st->w.redis, 0);   /* a restarted server starts with its memory free */
    sim_net_reset_server(st->w.master, "connection lost");
    st->failover_pending = 0;
    if (kind && st->snap) {
        /* a failover's loss is one WAIT guards against; AOF's is not */
        simr *after = simr_new();
        simr_restore(after, st->snap);
        count_lost(st, st->w.redis, after, kind == 2 && st->wait_replicas > 0);
        simr_free(after);
        simr_restore(st->w.redis, st->snap);
        sima_restored(st->arch, st->w.redis);
        replay_reset(st);
        c11_restored(st->c11);
    } else {
        simr_flush_scripts(st->w.redis);
    }
    simr_db_free(st->snap);
    st->snap = NULL;
    /* a restart is down a while; a failover's new master is there at once */
    sv->down = 1;
    uint64_t down = kind == 2 ? 50 + sim_below(300) : 100 + sim_below(2000);
    sim_at(st->w.now + down * 1000000ULL, -1, ev_redis_up, st, NULL, (uint64_t)st->w.master);
}

static void stream_added(void *ud, const char *key, size_t klen, const char *id, size_t nf, const char *const *f,
                         const size_t *fl);

/* ---------------------------------------------- Sentinel switch-master -- */

/* The master M has two replicas, R1 and R2. A switch (ev_fault):
 *   SW_SYNCING      R1's copy is taken (lagging up to 300 ms; a WAIT that
 *                   counts it brings it up to date)
 *   SW_PARTITIONED  M is cut off from Sentinel and R1, not from the
 *                   instances that use it: it takes writes on, WAIT counts
 *                   R2 only
 *   SW_PROMOTED     0.3 - 1.5 s later Sentinel promotes R1 (a new server
 *                   at a new address, with R1's copy and no replica); each
 *                   instance's router hears of it within 2.5 s and moves;
 *                   M, still serving the instances that have not heard,
 *                   takes writes that are lost; R2 moves to R1 within 3 s
 *   (healed)        M is demoted (its connections drop, it joins R1 as a
 *                   replica): the new master has two replicas again.
 * allocd's WAIT asks for every replica the master has had: with
 * wait_replicas = 2, nothing it publishes is lost by a switch (owed). */
static void old_master_commit(void *ud, simr *s, simr_client *c, int n, int *argc, char ***argv, size_t **lens)
{
    sim_run_state *st = ud;
    for (int i = 0; i < n; i++) {
        if (strcasecmp(argv[i][0], "HSET") || !is_key(argv[i][1], lens[i][1], st->keys.results)) continue;
        st->w.taken_back += (uint64_t)(argc[i] - 2) / 2;
        if (st->wait_replicas >= 2)
            sim_fail("switch: results published on the partitioned old master (its one replica left acknowledged), "
                     "lost when it is demoted: %s ...", argv[i][2]);
    }
}

static void ev_sw_partition(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    if (st->sw_phase != SW_SYNCING) return;
    st->sw_phase = SW_PARTITIONED;
    simr_set_replicas(st->w.srv[st->sw_from].r, 1);   /* R2 only */
    if (st->w.verbose) fprintf(stderr, "sim: switch: server %d partitioned\n", st->sw_from);
}

static void ev_sw_learn(void *a, void *b, uint64_t inst)
{
    sim_run_state *st = a;
    if (st->w.inst_master[inst] == st->w.master) return;
    st->w.inst_master[inst] = st->w.master;
    sim_net_master_moved((int)inst);
}

static void ev_sw_replica_moved(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    if (st->sw_phase != SW_PROMOTED || (int)x != st->sw_from) return;   /* healed already: moved with it */
    simr_set_replicas(st->w.srv[x].r, 0);
    simr_set_replicas(st->w.redis, 1);
}

static void sw_heal(sim_run_state *st)
{
    if (st->sw_phase != SW_PROMOTED) return;
    for (int i = 0; i < st->w.ninst; i++) ev_sw_learn(st, NULL, (uint64_t)i);
    sim_server *old = &st->w.srv[st->sw_from];
    old->gen++;
    old->down = 1;   /* a replica now: allocd never connects there again */
    sim_net_reset_server(st->sw_from, "connection lost");
    simr_set_replicas(st->w.redis, 2);
    st->sw_phase = SW_NONE;
    if (st->w.verbose) fprintf(stderr, "sim: switch: server %d demoted\n", st->sw_from);
}

/* In some seeds Sentinel reaches the old master before every instance has
 * heard of the switch: it is demoted (REPLICAOF the new master, then CLIENT
 * KILL TYPE normal, as sentinelSendSlaveOf does), not cut off. An instance
 * that has not heard reconnects to it and its writes are refused with
 * -READONLY (a transaction with -EXECABORT, WAIT with an error) until it
 * moves; nothing it sent there is taken. */
static void ev_sw_demote(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    if (st->sw_phase != SW_PROMOTED || (int)x != st->sw_from) return;
    sim_server *old = &st->w.srv[x];
    old->gen++;
    sim_net_reset_server((int)x, "connection lost");
    simr_set_readonly(old->r, 1);
    if (st->w.verbose) fprintf(stderr, "sim: switch: server %d demoted early, read-only\n", (int)x);
}

static void ev_sw_heal(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    if ((int)x == st->sw_from) sw_heal(st);
}

static void ev_sw_promote(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    if (st->sw_phase != SW_PARTITIONED) return;
    simr *old = st->w.srv[st->sw_from].r;
    int n = st->w.nsrv++;
    sim_server *nv = &st->w.srv[n];
    memset(nv, 0, sizeof *nv);
    nv->r = simr_new();
    simr_restore(nv->r, st->sw_snap);
    simr_db_free(st->sw_snap);
    st->sw_snap = NULL;
    simr_observer obs = { exec_pre, exec_post, st, replicas_synced, stream_added },
                  doomed = { old_master_commit, NULL, st, NULL, NULL };
    simr_set_observer(nv->r, &obs);
    simr_set_observer(old, &doomed);
    st->w.master = n;
    st->w.redis = nv->r;
    st->w.restarts++;
    count_lost(st, old, nv->r, st->wait_replicas >= 2);
    sima_restored(st->arch, nv->r);
    replay_reset(st);
    c11_restored(st->c11);
    st->sw_phase = SW_PROMOTED;
    if (st->w.verbose) fprintf(stderr, "sim: switch: server %d promoted, the master now\n", n);
    uint64_t last = 0;
    for (int i = 0; i < st->w.ninst; i++) {
        uint64_t t = sim_below(2500) * 1000000ULL;
        if (t > last) last = t;
        sim_at(st->w.now + t, -1, ev_sw_learn, st, NULL, (uint64_t)i);
    }
    sim_at(st->w.now + (200 + sim_below(2800)) * 1000000ULL, -1, ev_sw_replica_moved, st, NULL, (uint64_t)st->sw_from);
    if (sim_chance(0.5))
        sim_at(st->w.now + sim_below(2500) * 1000000ULL, -1, ev_sw_demote, st, NULL, (uint64_t)st->sw_from);
    sim_at(st->w.now + last + (3000 + sim_below(1000)) * 1000000ULL, -1, ev_sw_heal, st, NULL, (uint64_t)st->sw_from);
}

static void sw_start(sim_run_state *st)
{
    if (st->sw_phase != SW_NONE || st->restart_pending || st->w.nsrv >= SIM_MAX_SRV || st->switches >= 2) return;
    st->switches++;
    st->sw_from = st->w.master;
    st->sw_phase = SW_SYNCING;
    simr_db_free(st->sw_snap);
    st->sw_snap = simr_snapshot(st->w.redis);
    uint64_t lag = sim_below(300), detect = 300 + sim_below(1200);
    sim_at(st->w.now + lag * 1000000ULL, -1, ev_sw_partition, st, NULL, 0);
    sim_at(st->w.now + (lag + detect) * 1000000ULL, -1, ev_sw_promote, st, NULL, 0);
}

static void ev_boot(void *a, void *b, uint64_t i)
{
    sim_run_state *st = a;
    if (st->tearing_down || st->reg[i]) return;
    if (registry_start(&st->reg[i], NULL, &st->cfg[i], &st->scripts) < 0) sim_fail("sim: instance %d did not restart", (int)i);
}

/* kill -9: nothing is handed back (no lease release, no farewell); what
 * was written to the sockets may still run (sim_net.c) */
static void crash(sim_run_state *st, int i)
{
    if (!st->reg[i]) return;
    st->w.crashes++;
    st->w.inst[i].boots++;   /* the next run has a new pid */
    st->w.cur = i;
    sim_resume(i);
    registry_abort(st->reg[i]);
    registry_stop(st->reg[i], NULL, NULL);
    st->reg[i] = NULL;
    st->w.cur = -1;
    sim_at(st->w.now + (100 + sim_below(2000)) * 1000000ULL, i, ev_boot, st, NULL, (uint64_t)i);
}

/* Redis has memory again (maxmemory raised, keys freed). */
static void ev_oom_end(void *a, void *b, uint64_t x)
{
    simr_set_oom(sim_w->redis, 0);
}

/* Redis reaches maxmemory (noeviction) for 0.2 - 3 s: every write that
 * may grow it is refused with -OOM, a transaction queues nothing, a
 * script is refused at its first such write (simr_set_oom) -- the
 * producers' pushes too. */
static void oom_start(sim_run_state *st)
{
    st->w.ooms++;
    simr_set_oom(st->w.redis, 1);
    sim_at(st->w.now + (200 + sim_below(2800)) * 1000000ULL, -1, ev_oom_end, st, NULL, 0);
}

static void ev_fault(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    if (!st->w.faults_on) return;
    unsigned f = st->w.faults;
    if ((f & SF_RESET) && sim_chance(0.08 * st->w.intensity)) sim_net_reset_random();
    if ((f & SF_CLOCK) && sim_chance(0.01 * st->w.intensity)) {
        sim_inst *in = &st->w.inst[sim_below((uint64_t)st->w.ninst)];
        in->wall_offset_ms += (int64_t)sim_below(20000) - 10000;
        /* a random walk, kept within 30 s of the truth: a clock a minute
         * behind keeps a batch before its opening past the drain's 60 s
         * (seed 30590 of --first 30000 drifted to -69 s) */
        if (in->wall_offset_ms > 30000) in->wall_offset_ms = 30000;
        if (in->wall_offset_ms < -30000) in->wall_offset_ms = -30000;
        st->w.clock_jumps++;
    }
    if ((f & SF_PAUSE) && sim_chance(0.006 * st->w.intensity)) {
        sim_inst *in = &st->w.inst[sim_below((uint64_t)st->w.ninst)];
        uint64_t ms = 500 + sim_below((uint64_t)st->cfg[0].lease_ttl_ms * 3);
        uint64_t until = st->w.now + ms * 1000000ULL;
        if (until > in->paused_until) in->paused_until = until;
        st->w.pauses++;
    }
    if ((f & SF_CRASH) && sim_chance(0.003 * st->w.intensity)) crash(st, (int)sim_below((uint64_t)st->w.ninst));
    if ((f & SF_OOM) && sim_chance(0.002 * st->w.intensity)) oom_start(st);
    if ((f & SF_SWITCH) && sim_chance(0.002 * st->w.intensity)) sw_start(st);
    unsigned restarts = f & (SF_RESTART | SF_AOF_LOSS | SF_FAILOVER);
    /* one restart at a time: a second one's snapshot would stand for the
     * first's replica */
    if (restarts && st->sw_phase == SW_NONE && !st->restart_pending && sim_chance(0.004 * st->w.intensity)) {
        unsigned kinds[3];
        int nk = 0;
        if (f & SF_RESTART) kinds[nk++] = 0;
        if (f & SF_AOF_LOSS) kinds[nk++] = 1;
        if (f & SF_FAILOVER) kinds[nk++] = 2;
        unsigned k = kinds[sim_below((uint64_t)nk)];
        uint64_t lag_ms = k == 1 ? sim_below(1001) : k == 2 ? sim_below(300) : 0;
        /* the copy that survives is the server as it was lag_ms ago: take
         * it now and restart lag_ms later */
        if (k) ev_snapshot(st, NULL, 0);
        st->failover_pending = k == 2;
        st->restart_pending = 1;
        sim_at(st->w.now + lag_ms * 1000000ULL, -1, ev_restart, st, NULL, k);
    }
    sim_at(st->w.now + 10000000ULL, -1, ev_fault, st, NULL, 0);
}

/* ------------------------------------------------------------- set up -- */

static void setup_batch(sim_run_state *st)
{
    char hold[24], per[24];
    st->wl.room = sim_chance(0.4);
    st->per_user = 2 + (int64_t)sim_below(4);
    snprintf(per, sizeof per, "%" PRId64, st->per_user);
    snprintf(hold, sizeof hold, "%d", sim_chance(0.5) ? 0 : 300 + (int)sim_below(3000));
    const char *meta[] = { "HSET", st->keys.meta, "kind", "stock", "per_user", per, "hold_ms", hold };
    st->wl.formed = st->wl.room && sim_chance(0.5);
    const char *room_meta[] = { "HSET", st->keys.meta, "kind", "room", "max_group", "3", "groups",
                                st->wl.formed ? "formed" : "listed" };
    if (st->wl.room) server_cmd_quiet(st, 8, room_meta);
    else server_cmd_quiet(st, 8, meta);
    /* an opening (early requests rejected, or kept for the lottery) and a
     * closing, for some seeds */
    char at[24];
    if (sim_chance(0.35)) {
        snprintf(at, sizeof at, "%" PRId64, sim_server_ms() + 300 + (int64_t)sim_below(3000));
        const char *o[] = { "HSET", st->keys.meta, "opens_at", at, "early", sim_chance(0.5) ? "shuffle" : "reject" };
        server_cmd_quiet(st, 6, o);
    }
    if (sim_chance(0.15)) {
        snprintf(at, sizeof at, "%" PRId64, sim_server_ms() + 4000 + (int64_t)sim_below(5000));
        const char *c[] = { "HSET", st->keys.meta, "closes_at", at };
        server_cmd_quiet(st, 4, c);
    }
    /* selection slots (contract 9.4) for some users, for some seeds:
     * their requests before the slot are answered not_open */
    if (sim_chance(0.25)) {
        for (int u = 1; u <= 10; u++) {
            char user[16];
            snprintf(user, sizeof user, "u%d", u);
            snprintf(at, sizeof at, "%" PRId64, sim_server_ms() + (int64_t)sim_below(6000));
            const char *sl[] = { "HSET", st->keys.slots, user, at };
            server_cmd_quiet(st, 4, sl);
        }
        /* and for most of those, slots for 1,000-3,000 users who never
         * come: a hash the worker reads again in 2-4 HSCAN pages */
        if (sim_chance(0.6)) pad_slots(st, 1000 + (int)sim_below(2001));
    }
    const char *list[] = { "SADD", "alloc:batches", BATCH };
    server_cmd_quiet(st, 3, list);
    /* contract 11: profiles, the items' rules, draw_by, group_fill */
    c11_env env = { &st->keys, c11_cmd, request_raw, st };
    st->c11 = c11_new(&env, st->wl.room, NUSERS, NITEMS);
    for (int i = 1; i <= NITEMS; i++) {
        char item[16], cap[16], attrs[512];
        snprintf(item, sizeof item, "%s%d", st->wl.room ? "R" : "sku", i);
        int units = st->wl.room ? 1 + (int)sim_below(4) : 1 + (int)sim_below(60);
        snprintf(cap, sizeof cap, "%d", units);
        const char *c[] = { "HSET", st->keys.capacity, item, cap };
        server_cmd_quiet(st, 4, c);
        c11_item_capacity(st->c11, i, units);
        c11_item_attrs(st->c11, i, attrs, sizeof attrs);
        const char *a[] = { "HSET", st->keys.attrs, item, attrs };
        if (attrs[0]) server_cmd_quiet(st, 4, a);
    }
    c11_setup(st->c11);
}

static void setup_instance(sim_run_state *st, int i)
{
    allocd_config *c = &st->cfg[i];
    config_defaults(c);
    free(c->instance);
    char name[16];
    snprintf(name, sizeof name, "sim%c", 'A' + i);
    c->instance = strdup(name);
    /* mostly small chunks (many applies per run); in a fifth of the
     * instances 129-200, so a take asks for 128 on a short queue and for
     * the whole chunk once an outage has piled up 4 x chunk (take_size) */
    c->chunk = sim_chance(0.2) ? 129 + (int)sim_below(72) : 1 + (int)sim_below(16);
    c->lease_ttl_ms = 2000;
    c->redis_timeout_ms = 1000;
    c->idle_wait_ms = 100 + (int)sim_below(900);
    c->backoff_min_ms = 10;
    c->backoff_max_ms = 500;
    c->max_attempts = 1 + (int)sim_below(4);
    c->registry_interval_ms = 100 + (int)sim_below(200);
    c->answer_ms = st->answer_ms;
    c->wait_replicas = st->wait_replicas;
    st->w.replica_forget_ms = c->replica_forget_ms;
    c->log_maxlen = st->log_maxlen;
    if (st->archive) snprintf(c->archive_group, sizeof c->archive_group, "archive");
    if (st->w.cluster) {
        /* redis_url names one master, drawn: the router finds the others */
        c->redis.kind = REDIS_TARGET_TCP;
        snprintf(c->redis.host, sizeof c->redis.host, "%s", CLUSTER_HOST);
        c->redis.port = simc_port(st->w.cluster, (int)sim_below((uint64_t)st->w.nsrv));
    }
    st->w.cur = i;
    st->w.inst[i].id = i;
    if (registry_start(&st->reg[i], NULL, c, &st->scripts) < 0) sim_fail("sim: instance %d did not start", i);
    st->w.cur = -1;
}

static void teardown(sim_run_state *st)
{
    st->w.faults_on = 0;
    st->tearing_down = 1;
    if (st->arch) sima_stop(st->arch);
    for (int i = 0; i < st->w.ninst; i++) {
        sim_resume(i);
        st->w.cur = i;
        if (st->reg[i]) {
            registry_stop(st->reg[i], NULL, NULL);
            registry_abort(st->reg[i]);
        }
        st->w.cur = -1;
    }
    /* the closes finish; timers and deliveries left find nothing to do */
    for (int i = 0; i < 1000000 && sim_step(); i++) {}
    sim_queue_clear();
    sim_net_free_all();
    for (int i = 0; i < st->w.ninst; i++) config_free(&st->cfg[i]);
    simr_client_free(st->producer);
    /* a cluster's nodes share one keyspace */
    for (int i = 0; i < st->w.nsrv; i++)
        if (!st->w.cluster || i == 0) simr_free(st->w.srv[i].r);
    simc_free(st->w.cluster);
    sim_reshard_free(st->reshard);
    simr_db_free(st->snap);
    simr_db_free(st->sw_snap);
    for (size_t i = 0; i < st->nowed; i++) { free(st->owed_id[i]); free(st->owed_v[i]); }
    free(st->owed_id);
    free(st->owed_v);
    replay_reset(st);
    c11_free(st->c11);
    sima_free(st->arch);
    free(st->by_num);
    for (size_t i = 0; i < st->wl.nsent; i++) free(st->wl.sent[i].raw);
    free(st->wl.sent);
    for (size_t i = 0; i < st->ntaken; i++) free(st->taken[i]);
    free(st->taken);
}

/* ------------------------------------------------------------ options -- */

static const struct { const char *name; unsigned bit; } fault_names[] = {
    { "reset", SF_RESET }, { "lost", SF_LOST_REPLY }, { "delay", SF_DELAY },
    { "restart", SF_RESTART }, { "aof", SF_AOF_LOSS }, { "failover", SF_FAILOVER },
    { "clock", SF_CLOCK }, { "pause", SF_PAUSE }, { "crash", SF_CRASH }, { "oom", SF_OOM },
    { "switch", SF_SWITCH }, { "cluster", SF_CLUSTER },
};

int sim_faults_parse(const char *s, unsigned *out)
{
    unsigned f = 0;
    if (!strcmp(s, "all")) { *out = SF_ALL; return 0; }
    if (!strcmp(s, "none")) { *out = 0; return 0; }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t i;
        if (!strcmp(t, "all")) { f |= SF_ALL; continue; }
        for (i = 0; i < sizeof fault_names / sizeof fault_names[0]; i++)
            if (!strcmp(t, fault_names[i].name)) { f |= fault_names[i].bit; break; }
        if (i == sizeof fault_names / sizeof fault_names[0]) return -1;
    }
    *out = f;
    return 0;
}

void sim_faults_format(unsigned f, char *buf, size_t n)
{
    if (f == SF_ALL) { snprintf(buf, n, "all"); return; }
    if (!f) { snprintf(buf, n, "none"); return; }
    buf[0] = '\0';
    unsigned all = (f & SF_ALL) == SF_ALL ? SF_ALL : 0;
    if (all) snprintf(buf, n, "all");
    for (size_t i = 0; i < sizeof fault_names / sizeof fault_names[0]; i++)
        if ((f & ~all) & fault_names[i].bit) {
            size_t l = strlen(buf);
            snprintf(buf + l, n - l, "%s%s", l ? "," : "", fault_names[i].name);
        }
}

void sim_replay_line(const sim_opts *o, char *buf, size_t n)
{
    char f[128];
    sim_faults_format(o->faults, f, sizeof f);
    snprintf(buf, n, "./build/tests/sim/sim --seed %" PRIu64 " --faults=%s --instances %d --duration-ms %d",
             o->seed, f, o->instances, o->duration_ms);
}

/* ------------------------------------------------------------- running -- */

static void dump_kv(void *ud, const char *k, size_t kn, const char *v, size_t vn)
{
    fprintf(stderr, "  %s %.*s = %.*s\n", (const char *)ud, (int)kn, k, (int)vn, v);
}

/* -v: what a failing run left in Redis, to read beside allocd's log */
static void dump_state(sim_run_state *st)
{
    const char *lease = simr_get_str(st->w.redis, st->keys.lease, NULL, sim_server_ms());
    fprintf(stderr, "sim: at %" PRId64 " ms (server clock %" PRId64 "): lease %s\n", (int64_t)(st->w.now / 1000000),
            sim_server_ms(), lease ? lease : "(none)");
    for (int i = 0; i < st->w.ninst; i++)
        fprintf(stderr, "  instance %d: wall clock %+" PRId64 " ms\n", i, st->w.inst[i].wall_offset_ms);
    simr_hash_each(st->w.redis, st->keys.meta, dump_kv, "meta");
    simr_hash_each(st->w.redis, st->keys.stats, dump_kv, "stats");
    simr_hash_each(st->w.redis, st->keys.internal, dump_kv, "internal");
    simr_hash_each(st->w.redis, st->keys.groups, dump_kv, "groups");
    simr_hash_each(st->w.redis, st->keys.results, dump_kv, "results");
    c11_dump(st->c11);
    for (size_t i = 0; i < simr_llen(st->w.redis, st->keys.early); i++) {
        size_t len;
        const char *e = simr_lindex(st->w.redis, st->keys.early, i, &len);
        fprintf(stderr, "  early %zu = %.*s\n", i, (int)len, e);
    }
    for (size_t i = 0; i < simr_llen(st->w.redis, st->keys.dead); i++) {
        size_t len;
        const char *e = simr_lindex(st->w.redis, st->keys.dead, i, &len);
        fprintf(stderr, "  dead %zu = %.*s\n", i, (int)len, e);
    }
}

static int drained(sim_run_state *st)
{
    return simr_llen(st->w.redis, st->keys.queue) == 0 && simr_llen(st->w.redis, st->keys.ctl) == 0 &&
           pool_pending(st) == 0;
}

static void stream_added(void *ud, const char *key, size_t klen, const char *id, size_t nf, const char *const *f,
                         const size_t *fl)
{
    sim_run_state *st = ud;
    if (st->arch) sima_added(st->arch, key, klen, id, nf, f, fl);
}

/* ------------------------------------------------------------ cluster -- */

/* The `cluster` fault: three masters at CLUSTER_HOST:CLUSTER_PORT+i over
 * the one keyspace, the real router (sim_router.c), and the faults that
 * act on the single master -- restart, aof, failover, switch -- left out. */
static void cluster_start(sim_run_state *st)
{
    st->w.faults &= ~(unsigned)(SF_RESTART | SF_AOF_LOSS | SF_FAILOVER | SF_SWITCH);
    static const int ports[CLUSTER_NODES] = { CLUSTER_PORT, CLUSTER_PORT + 1, CLUSTER_PORT + 2 };
    st->w.cluster = simc_new(st->w.redis, CLUSTER_NODES, CLUSTER_HOST, ports);
    for (int i = 1; i < CLUSTER_NODES; i++) st->w.srv[i].r = st->w.redis;
    st->w.nsrv = CLUSTER_NODES;
    st->reshard = sim_reshard_new(st->w.cluster, CLUSTER_NODES);
}

/* The operator moves a slot to another master, in the middle of the
 * batch: the batch's own slot (x 0), or the slot of a global key the
 * registry and the order ids use through the router (x 1). */
static void ev_reshard(void *a, void *b, uint64_t x)
{
    sim_run_state *st = a;
    if (st->tearing_down) return;
    const char *key = x == 0 ? st->keys.meta : sim_chance(0.5) ? "alloc:{allocd:orders}:counter" : "alloc:batches";
    uint16_t slot = simc_key_slot(key, strlen(key));
    int owner = simc_owner(st->w.cluster, 0, slot);
    int to = (owner + 1 + (int)sim_below(CLUSTER_NODES - 1)) % CLUSTER_NODES;
    if (sim_reshard_start(st->reshard, slot, to) < 0)
        sim_at(st->w.now + 200000000ULL, -1, ev_reshard, st, NULL, x);
}

static void cluster_schedule(sim_run_state *st)
{
    if (!st->w.cluster) return;
    uint64_t dur = (uint64_t)st->o->duration_ms;
    sim_at((300 + sim_below(dur / 2)) * 1000000ULL, -1, ev_reshard, st, NULL, 0);
    sim_at((dur / 4 + sim_below(dur / 2)) * 1000000ULL, -1, ev_reshard, st, NULL, 1);
    if (sim_chance(0.5)) sim_at((dur / 2 + sim_below(dur / 2)) * 1000000ULL, -1, ev_reshard, st, NULL, 0);
}

/* The world of one run: its seed, clock origin, fault intensity and
 * instances, the modelled Redis with its replica, and the batch. */
static void world_start(sim_run_state *st, const sim_opts *o)
{
    st->o = o;
    sim_w = &st->w;
    st->w.seed = o->seed;
    st->w.rng = o->seed * 0x2545f4914f6cdd1dULL + 1;
    st->w.epoch_ms = 1760000000000LL + (int64_t)sim_below(1000000000);
    st->w.cur = -1;
    st->w.faults = o->faults;
    st->w.faults_on = 1;
    st->w.verbose = o->verbose;
    /* some runs barely faulty (long stretches of progress), some a storm */
    st->w.intensity = (double)(1 + sim_below(30)) / 10.0;
    st->w.ninst = o->instances > 0 ? o->instances : 2 + (int)sim_below(2);
    if (st->w.ninst > SIM_MAX_INST) st->w.ninst = SIM_MAX_INST;
    log_set_level(o->verbose ? ALOG_DEBUG : -1);
    st->w.redis = simr_new();
    st->w.srv[0].r = st->w.redis;
    st->w.nsrv = 1;
    if (o->faults & SF_CLUSTER) cluster_start(st);
    simr_observer obs = { exec_pre, exec_post, st, replicas_synced, stream_added };
    simr_set_observer(st->w.redis, &obs);
    /* the one a failover promotes; with Sentinel's switch, two */
    st->replicas = st->w.faults & SF_SWITCH ? 2 : 1;
    simr_set_replicas(st->w.redis, st->replicas);
    st->producer = simr_client_new(st->w.redis);
    batch_keys_init(&st->keys, "alloc", BATCH);
    scripts_init(&st->scripts);
    setup_batch(st);
}

/* What this seed draws of the daemon's options: a poison request, answer_ms,
 * wait_replicas and the log's trim. Returns whether it drew a poison
 * request. */
static int draw_options(sim_run_state *st)
{
    /* a poison request for some seeds: FENCE refuses every apply holding
     * it (ALLOCD_FAULT_APPLY_ID, read by each worker as it starts), so it
     * is isolated, then moved to dead */
    int poisoned = sim_chance(0.2);
    if (poisoned) {
        char poison[32];
        snprintf(poison, sizeof poison, "r%d", 2 + (int)sim_below(200));
        setenv("ALLOCD_FAULT_APPLY_ID", poison, 1);
    } else {
        unsetenv("ALLOCD_FAULT_APPLY_ID");
    }
    /* short enough that the watchdog's give-up (at answer_ms / 2) runs
     * under pauses and outages, long enough for a lease to expire and a
     * new holder to load and serve */
    st->answer_ms = 4000 + (int)sim_below(8001);
    /* main's config options, for some seeds: WAIT before each apply, and
     * the log trimmed -- by LOG_TRIM behind the archive's group (the
     * simulator's archiver follows the log), or without an archive by
     * XADD MAXLEN ~ */
    st->wait_replicas = sim_chance(0.25) ? 1 + (int)sim_below((uint64_t)st->replicas) : 0;
    st->log_maxlen = sim_chance(0.35) ? 20 + (int64_t)sim_below(200) : 0;
    st->archive = st->log_maxlen && sim_chance(0.7);
    st->arch = sima_new(st->keys.log, "archive", st->archive);
    return poisoned;
}

/* Contract 11.2, a profile edit is read while serving: once drained, the
 * probe user's profile is edited so that it no longer admits the probe
 * item, and 3.5 s later (the rescan's second, its half-second grace, a
 * command's deadline and room to spare) a request of theirs for that
 * item is pushed: it must be decided with the edit (c11_probe_check). */
static void drain_probe(sim_run_state *st)
{
    if (!c11_probe_edit(st->c11)) return;
    uint64_t at = st->w.now + 3500000000ULL;
    while (!st->w.failed && sim_next_time() <= at && sim_step()) {}
    if (st->w.now < at) st->w.now = at;
    char buf[256];
    c11_probe_request(st->c11, buf, sizeof buf);
    const char *argv[] = { "RPUSH", st->keys.queue, buf };
    server_cmd_quiet(st, 3, argv);
    sim_net_retry_blocked();
    uint64_t end = st->w.now + 60000000000ULL;
    while (!st->w.failed && st->w.now < end && !drained(st) && sim_step()) {}
    if (!st->w.failed && !drained(st)) sim_fail("liveness: the profile probe is not answered 60 s after it was pushed");
    if (!st->w.failed) c11_probe_check(st->c11);
}

/* The drain after the faults stop: every instance awake, the batch resumed.
 * Contract 9.6: every request answered within answer_ms, unless
 * stats.state says why not (paused; waiting for its opening on the
 * holder's clock, which the clock faults may have left far behind: an
 * instance whose clock says the batch is not open when the drain starts
 * excuses the run, since it serves the opening late). A poison request is
 * a fault still active: each copy of it takes max_attempts refused
 * applies. Those get the old bound, 60 s. Returns 1 if the run was held
 * to answer_ms. */
static int drain(sim_run_state *st, int poisoned)
{
    /* a switch under way completes: Sentinel promotes, everyone hears */
    if (st->sw_phase == SW_SYNCING) ev_sw_partition(st, NULL, 0);
    if (st->sw_phase == SW_PARTITIONED) ev_sw_promote(st, NULL, 0);
    sw_heal(st);
    st->w.faults_on = 0;
    for (int i = 0; i < st->w.ninst; i++) sim_resume(i);
    st->w.srv[st->w.master].down = 0;
    simr_set_oom(st->w.redis, 0);
    push_request(st, op_named("resume"));
    const char *opens = simr_hget(st->w.redis, st->keys.meta, "opens_at", NULL);
    int not_open = 0;
    for (int i = 0; opens && i < st->w.ninst; i++)
        not_open |= sim_server_ms() + st->w.inst[i].wall_offset_ms < strtoll(opens, NULL, 10);
    uint64_t drain_start = st->w.now, drain_end = drain_start + (uint64_t)st->answer_ms * 1000000ULL;
    while (!st->w.failed && st->w.now < drain_end && !drained(st) && sim_step()) {}
    const char *state = simr_hget(st->w.redis, st->keys.stats, "state", NULL);
    int excused = poisoned || not_open || (state && (!strcmp(state, "waiting") || !strcmp(state, "paused")));
    if (!st->w.failed && !drained(st) && !excused)
        sim_fail("liveness: %zu requests, %zu commands and %zu in the lottery pool still waiting answer_ms "
                 "(%d ms) after the faults stopped, the batch %s", simr_llen(st->w.redis, st->keys.queue),
                 simr_llen(st->w.redis, st->keys.ctl), pool_pending(st), st->answer_ms,
                 state ? state : "(no state)");
    drain_end = drain_start + 60000000000ULL;
    while (!st->w.failed && st->w.now < drain_end && !drained(st) && sim_step()) {}
    if (!st->w.failed && !drained(st))
        sim_fail("liveness: %zu requests, %zu commands and %zu in the lottery pool still waiting 60 s after "
                 "the faults stopped", simr_llen(st->w.redis, st->keys.queue), simr_llen(st->w.redis, st->keys.ctl),
                 pool_pending(st));
    if (!st->w.failed) drain_probe(st);
    /* every key of one command or transaction in one slot: the batch's
     * keys share the hash tag {B}, a global key stands alone */
    if (!st->w.failed && st->w.cluster && simc_counts_get(st->w.cluster)->crossslot)
        sim_fail("cluster: allocd sent keys of different slots in one command or transaction (CROSSSLOT)");
    if (!st->w.failed) check_owed_paid(st);
    return !excused;
}

static void fill_result(const sim_run_state *st, sim_result *res, int held)
{
    memset(res, 0, sizeof *res);
    res->failed = st->w.failed;
    snprintf(res->failure, sizeof res->failure, "%s", st->w.failure);
    res->events = st->w.events;
    res->requests = st->requests;
    res->applies = st->applies;
    res->resets = st->w.resets;
    res->lost_replies = st->w.lost_replies;
    res->delays = st->w.delays;
    res->restarts = st->w.restarts;
    res->clock_jumps = st->w.clock_jumps;
    res->pauses = st->w.pauses;
    res->taken_back = st->w.taken_back;
    res->late_runs = st->w.late_runs;
    res->crashes = st->w.crashes;
    res->ooms = st->w.ooms;
    res->sim_ms = (int64_t)(st->w.now / 1000000);
    res->room = st->wl.room;
    res->held_to_answer_ms = held;
    const char *g = simr_hget(st->w.redis, st->keys.stats, "granted", NULL);
    res->granted = g ? strtoll(g, NULL, 10) : 0;
    const c11_counts *cc = c11_counts_get(st->c11);
    res->c11_grants = cc->grants_checked;
    res->c11_not_eligible = cc->not_eligible;
    res->c11_staff = cc->staff;
    res->c11_edits = cc->edits;
    res->c11_draws = cc->draws_checked;
    res->c11_groups = cc->groups_checked;
    res->c11_probes_refused = cc->probes_refused;
    const sima_counts *ac = sima_counts_get(st->arch);
    res->log_archived = ac->read;
    res->log_acked = ac->acked;
    res->log_trimmed = ac->trimmed;
    if (st->w.cluster) res->cl = *simc_counts_get(st->w.cluster);
}

int sim_run(const sim_opts *o, sim_result *res)
{
    sim_run_state *st = calloc(1, sizeof *st);
    if (!st) abort();
    world_start(st, o);
    int poisoned = draw_options(st);
    for (int i = 0; i < st->w.ninst; i++) setup_instance(st, i);
    sima_start(st->arch, simr_client_new(st->w.redis));
    sim_at(1000000, -1, ev_produce, st, NULL, 0);
    sim_at(5000000, -1, ev_fault, st, NULL, 0);
    cluster_schedule(st);

    uint64_t end = (uint64_t)o->duration_ms * 1000000ULL;
    while (!st->w.failed && st->w.now < end && sim_step()) {}
    int held = drain(st, poisoned);
    if (st->w.verbose) dump_state(st);
    if (!st->w.failed) check_replay(st);
    if (!st->w.failed) sima_check(st->arch, st->w.redis);

    fill_result(st, res, held);
    unsetenv("ALLOCD_FAULT_APPLY_ID");
    teardown(st);
    sim_w = NULL;
    free(st);
    return res->failed ? -1 : 0;
}

void sim_result_add(sim_result *sum, const sim_result *r)
{
    sum->events += r->events;
    sum->requests += r->requests;
    sum->applies += r->applies;
    sum->resets += r->resets;
    sum->lost_replies += r->lost_replies;
    sum->delays += r->delays;
    sum->restarts += r->restarts;
    sum->clock_jumps += r->clock_jumps;
    sum->pauses += r->pauses;
    sum->taken_back += r->taken_back;
    sum->late_runs += r->late_runs;
    sum->crashes += r->crashes;
    sum->ooms += r->ooms;
    sum->held_to_answer_ms += r->held_to_answer_ms;
    sum->c11_grants += r->c11_grants;
    sum->c11_not_eligible += r->c11_not_eligible;
    sum->c11_staff += r->c11_staff;
    sum->c11_edits += r->c11_edits;
    sum->c11_draws += r->c11_draws;
    sum->c11_groups += r->c11_groups;
    sum->c11_probes_refused += r->c11_probes_refused;
    sum->log_archived += r->log_archived;
    sum->log_acked += r->log_acked;
    sum->log_trimmed += r->log_trimmed;
    simc_counts_add(&sum->cl, &r->cl);
}
