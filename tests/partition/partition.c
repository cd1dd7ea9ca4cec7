/* partition.c -- the partition run (partition.h): the network, Redis and
 * two allocd instances, a producer and a poller thread, and the faults of
 * one scenario driven from the main thread. */
#include "partition/partition.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "partition/part_net.h"

#define PART_BATCH "np"
#define PART_PER_USER 2
/* The password of a Redis only the test's namespaces can reach. */
#define PART_PASSWORD "partition-test"

typedef struct part_load {
    const part_params *p;
    part_report *rep;
    const proc_redis *redis;
    long max;                  /* requests the producer may push */
    atomic_int stop_producer, stop_poller;
    atomic_long pushed;
    long ctl;                  /* the producer's until joined, then main's */
    long capacity;             /* set_capacity raises it */
    part_history hist;
} part_load;

typedef struct part_run_state {
    const part_params *p;
    part_report *rep;
    part_net net;
    proc_redis redis;
    harness_allocd allocd[2];
    redisContext *c;
    uint64_t rng;
    int last_owner;
} part_run_state;

static const char *part_names[] = { "cut", "oneway", "delay", "flap" };
static const char *part_instance[2] = { "part-a", "part-b" };

const char *part_scenario_name(part_scenario s) { return part_names[s]; }

int part_scenario_parse(const char *name, part_scenario *s)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, part_names[i])) { *s = (part_scenario)i; return 0; }
    return -1;
}

void part_params_default(part_params *p, part_scenario s)
{
    memset(p, 0, sizeof *p);
    p->scenario = s;
    p->rounds = s == PART_FLAP ? 24 : 6;
    p->ttl_ms = 2000;
    p->fault_ms = s == PART_FLAP ? 12000 : s == PART_DELAY ? 6000 : 5000;
    p->rate = 250;
    p->seed = 1;
}

static uint64_t part__rand(part_run_state *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

static redisContext *part__connect(const proc_redis *r)
{
    redisContext *c = proc_redis_connect(r);
    if (!c) return NULL;
    redisReply *rep = redisCommand(c, "AUTH %s", PART_PASSWORD);
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep) freeReplyObject(rep);
    if (!ok) { redisFree(c); return NULL; }
    return c;
}

/* ------------------------------------------------------------ threads -- */

static int part__push(part_load *l, redisContext *c, const char *key, const char *json)
{
    redisReply *rep = redisCommand(c, "RPUSH alloc:{%s}:%s %s", PART_BATCH, key, json);
    int ok = rep && rep->type == REDIS_REPLY_INTEGER;
    if (!ok) {
        l->rep->other++;
        part_report_msg(l->rep, "RPUSH failed: %s", rep && rep->str ? rep->str : c->errstr);
    }
    if (rep) freeReplyObject(rep);
    return ok;
}

/* Pushes r0, r1, ... at p->rate per second: user u(n/3) asks three times
 * (per_user 2, so the third may get `limit`), every third request asks to
 * wait when sold out; every two seconds set_capacity adds units, which
 * serves the waitlist (the one result that may change). */
static void *part__producer(void *arg)
{
    part_load *l = arg;
    redisContext *c = part__connect(l->redis);
    int64_t t0 = proc_mono_us();
    char json[256];
    for (long n = 0; c && n < l->max && !atomic_load(&l->stop_producer); n++) {
        int64_t due = t0 + n * 1000000 / l->p->rate;
        if (due > proc_mono_us()) proc_sleep_us(due - proc_mono_us());
        snprintf(json, sizeof json, "{\"id\":\"r%ld\",\"user\":\"u%ld\",\"op\":\"buy\",\"item\":\"sku\"%s}",
                 n, n / 3, n % 3 == 1 ? ",\"wait\":true" : "");
        if (!part__push(l, c, "queue", json)) break;
        atomic_store(&l->pushed, n + 1);
        if (n > 0 && n % (2 * l->p->rate) == 0) {
            l->capacity += l->p->rate / 4;
            snprintf(json, sizeof json, "{\"id\":\"c%ld\",\"op\":\"set_capacity\",\"item\":\"sku\",\"capacity\":%ld}",
                     l->ctl, l->capacity);
            if (part__push(l, c, "ctl", json)) l->ctl++;
        }
    }
    if (c) redisFree(c);
    return NULL;
}

static void *part__poller(void *arg)
{
    part_load *l = arg;
    redisContext *c = part__connect(l->redis);
    while (c && !atomic_load(&l->stop_poller)) {
        part_history_poll(&l->hist, l->rep, c, PART_BATCH);
        proc_sleep_ms(150);
    }
    if (c) part_history_poll(&l->hist, l->rep, c, PART_BATCH);   /* the end, too */
    if (c) redisFree(c);
    return NULL;
}

/* ---------------------------------------------------------- processes -- */

static int part__allocd_start(part_run_state *s, int side, int via_relay)
{
    harness_allocd *d = &s->allocd[side];
    memset(d, 0, sizeof *d);
    snprintf(d->instance, sizeof d->instance, "%s", part_instance[side]);
    snprintf(d->conf, sizeof d->conf, "%s/%s.conf", s->redis.dir, part_instance[side]);
    snprintf(d->log, sizeof d->log, "%s/%s.log", s->redis.dir, part_instance[side]);
    FILE *f = fopen(d->conf, "w");
    if (!f) return -1;
    fprintf(f, "redis = \"redis://%s@%s:%d\";\ninstance = \"%s\";\nprefix = \"alloc\";\n"
               "log_level = \"info\";\nlease_ttl_ms = %d;\nregistry_interval_ms = 200;\n"
               "backoff_min_ms = 50;\nbackoff_max_ms = 200;\nredis_timeout_ms = 1000;\n"
               "connect_timeout_ms = 500;\n",
            PART_PASSWORD, side ? PART_REDIS_B : PART_REDIS_A, via_relay ? PART_RELAY_PORT : PART_REDIS_PORT,
            d->instance, s->p->ttl_ms);
    fclose(f);
    char *argv[] = { (char *)harness_allocd_bin(), "-c", d->conf, NULL };
    d->pid = part_net_spawn(&s->net, side ? "b" : "a", argv, d->log);
    return d->pid > 0 ? 0 : -1;
}

static int part__setup(part_run_state *s)
{
    if (part_net_up(&s->net) < 0) return -1;
    if (part_net_redis_start(&s->net, &s->redis, PART_PASSWORD) < 0) return -1;
    s->c = part__connect(&s->redis);
    if (!s->c) return -1;
    redisReply *rep[3];
    rep[0] = redisCommand(s->c, "HSET alloc:{%s}:meta kind stock per_user %d", PART_BATCH, PART_PER_USER);
    rep[1] = redisCommand(s->c, "HSET alloc:{%s}:capacity sku %d", PART_BATCH, s->p->rate);
    rep[2] = redisCommand(s->c, "SADD alloc:batches %s", PART_BATCH);
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        ok = ok && rep[i] && rep[i]->type == REDIS_REPLY_INTEGER;
        if (rep[i]) freeReplyObject(rep[i]);
    }
    int relay = s->p->scenario == PART_DELAY;
    if (!ok || (relay && part_net_relays_start(&s->net, s->redis.dir, s->redis.dir) < 0)) return -1;
    return part__allocd_start(s, 0, relay) < 0 || part__allocd_start(s, 1, relay) < 0 ? -1 : 0;
}

static void part__teardown(part_run_state *s)
{
    for (int i = 0; i < 2; i++) {
        if (s->allocd[i].pid > 0) {
            s->rep->allocd_exit[i] = harness_allocd_stop(&s->allocd[i]);
            if (s->rep->allocd_exit[i] != 0 || s->p->verbose) harness_allocd_dump_log(&s->allocd[i]);
        }
    }
    part_net_relays_stop(&s->net);
    if (s->c) redisFree(s->c);
    s->c = NULL;
    if (s->redis.pid > 0) proc_redis_stop(&s->redis);
    part_net_down(&s->net);
}

/* ------------------------------------------------------------- faults -- */

/* Which instance a name or a lease value ("part-a/pid/rand") names. */
static int part__side_of(char *v)
{
    int side = -1;
    for (int i = 0; v && i < 2; i++) {
        size_t n = strlen(part_instance[i]);
        if (!strncmp(v, part_instance[i], n) && (v[n] == '/' || v[n] == '\0')) side = i;
    }
    free(v);
    return side;
}

static int part__owner(part_run_state *s)
{
    return part__side_of(harness_str(s->c, "GET alloc:{%s}:lease", PART_BATCH));
}

static int part__stats_owner(part_run_state *s)
{
    return part__side_of(harness_str(s->c, "HGET alloc:{%s}:stats owner", PART_BATCH));
}

/* Waits until until_ms, counting the lease's changes of hands meanwhile. */
static void part__hold(part_run_state *s, int64_t until_ms)
{
    do {
        int o = part__owner(s);
        if (o >= 0 && o != s->last_owner) {
            if (s->last_owner >= 0) s->rep->owner_changes++;
            s->last_owner = o;
        }
        harness_sleep_ms(50);
    } while (harness_now_ms() < until_ms);
}

/* The instance serving the batch once that has held for a second (the
 * lease and stats.owner agree): right after a heal, placement may be
 * handing the batch over, and a cut then would time a hand-over, not a
 * takeover. */
static int part__wait_owner(part_run_state *s)
{
    int last = -1;
    int64_t since = harness_now_ms();
    for (int waited = 0; waited < 15000; waited += 20) {
        int o = part__owner(s);
        if (o < 0 || o != last || part__stats_owner(s) != o) { last = o; since = harness_now_ms(); }
        else if (harness_now_ms() - since >= 1000) return o;
        harness_sleep_ms(20);
    }
    s->rep->other++;
    part_report_msg(s->rep, "no instance served steadily for 15 s before a fault");
    return -1;
}

/* Records one takeover: the lease acquired acquired_ms after the fault,
 * the first chunk applied by the new owner served_ms after it. */
static void part__takeover_done(part_run_state *s, int cut, long acquired_ms, long served_ms, long limit_ms)
{
    part_report *r = s->rep;
    if (r->takeovers < PART_MAX_TAKEOVERS) {
        r->takeover_ms[r->takeovers] = acquired_ms;
        r->served_ms[r->takeovers] = served_ms;
    }
    r->takeovers++;
    if (acquired_ms > r->takeover_max_ms) r->takeover_max_ms = acquired_ms;
    if (served_ms > r->served_max_ms) r->served_max_ms = served_ms;
    if (acquired_ms > limit_ms) {
        r->slow_takeover++;
        part_report_msg(r, "takeover from %s took %ld ms (limit %ld)", part_instance[cut], acquired_ms, limit_ms);
    }
    if (s->p->verbose)
        fprintf(stderr, "partition: %s took the lease in %ld ms, served in %ld ms\n", part_instance[!cut],
                acquired_ms, served_ms);
}

/* From the fault at t0 until the other instance holds the lease (the
 * takeover, held to limit_ms), and on until it has applied a chunk
 * (stats.owner names it: served again, what a user sees). */
static void part__time_takeover(part_run_state *s, int cut, int64_t t0, long limit_ms)
{
    int64_t deadline = t0 + s->p->ttl_ms + 10000;
    long acquired = -1;
    while (harness_now_ms() < deadline) {
        int owner = part__owner(s);
        long ms = (long)(harness_now_ms() - t0);
        if (acquired < 0 && owner == !cut) acquired = ms;
        if (acquired >= 0 && part__stats_owner(s) == !cut) {
            part__takeover_done(s, cut, acquired, ms, limit_ms);
            return;
        }
        harness_sleep_ms(10);
    }
    s->rep->slow_takeover++;
    part_report_msg(s->rep, "%s was not taken over and served within %d ms", part_instance[cut],
                    s->p->ttl_ms + 10000);
}

/* A fault is checked, not only requested: a ping from the cut side must
 * fail, one from the other side must get through (expect_pong), and one
 * through a delaying relay must take at least min_ms. */
static void part__check_path(part_run_state *s, int side, int port, int expect_pong, long min_ms)
{
    long ms;
    int pong = part_net_ping(&s->net, side, port, PART_PASSWORD, expect_pong ? 8 : 1, &ms);
    if (pong == expect_pong && (!pong || ms >= min_ms)) {
        s->rep->fault_checks++;
        return;
    }
    s->rep->other++;
    part_report_msg(s->rep, "the fault is not in effect: a ping from %s to port %d %s after %ld ms",
                    part_instance[side], port, pong ? "got through" : "failed", ms);
}

/* cut, oneway, and the delay scenario's stalls: the serving instance loses
 * Redis for fault_ms; the other must take over in time. */
static void part__cut_round(part_run_state *s, int round)
{
    int side = part__wait_owner(s);
    if (side < 0) return;
    const char *dir = s->p->scenario == PART_CUT ? "both" : round % 2 ? "to-redis" : "from-redis";
    int stall = s->p->scenario == PART_DELAY;
    if (s->p->verbose)
        fprintf(stderr, "partition: round %d: %s %s\n", round, stall ? "stall the relay of" : dir, part_instance[side]);
    if (stall) part_net_relay_set(&s->net, side, 0, 0, 0, 1);
    else part_net_cut(&s->net, side, dir);
    int64_t t0 = harness_now_ms();      /* the fault is complete from here */
    s->rep->faults++;
    /* With only the replies dropped, the renewal the owner sent last (at
     * most one is in flight, every TTL/3) still lands after the cut and
     * extends the lease by a whole TTL: the bound is a third of a TTL
     * later than where nothing gets through. */
    long limit = s->rep->takeover_limit_ms;
    if (!strcmp(dir, "from-redis") && !stall) limit += s->p->ttl_ms / 3;
    part__time_takeover(s, side, t0, limit);
    int port = stall ? PART_RELAY_PORT : PART_REDIS_PORT;
    part__check_path(s, side, port, 0, 0);
    part__check_path(s, !side, port, 1, 0);
    part__hold(s, t0 + s->p->fault_ms);
    if (stall) part_net_relay_set(&s->net, side, 0, 0, 0, 0);
    else part_net_heal(&s->net, side);
    part__hold(s, harness_now_ms() + 1500);
}

static void part__delay_round(part_run_state *s, int round)
{
    if (round % 2) { part__cut_round(s, round); return; }
    if (s->p->verbose) fprintf(stderr, "partition: round %d: 200 +/- 100 ms, 20%% loss on both\n", round);
    part_net_relay_set(&s->net, -1, 200, 100, 20, 0);
    s->rep->faults++;
    /* AUTH and PING: two round trips of at least 2 x 100 ms each */
    part__check_path(s, round / 2 % 2, PART_RELAY_PORT, 1, 400);
    part__hold(s, harness_now_ms() + s->p->fault_ms);
    part_net_relay_set(&s->net, -1, 0, 0, 0, 0);
    part__hold(s, harness_now_ms() + 1500);
}

/* One flap of the serving instance: its link down (an error at once) or
 * its packets dropped (silence), for 0.2-1.5 s, then 0.2-1 s of peace. */
static void part__flap_round(part_run_state *s, int round)
{
    int side = part__owner(s);
    if (side < 0) side = (int)(part__rand(s) % 2);
    if (round % 2) part_net_cut(&s->net, side, "both");
    else part_net_link(&s->net, side, 0);
    s->rep->faults++;
    part__hold(s, harness_now_ms() + 200 + (int64_t)(part__rand(s) % 1300));
    if (round % 2) part_net_heal(&s->net, side);
    else part_net_link(&s->net, side, 1);
    part__hold(s, harness_now_ms() + 200 + (int64_t)(part__rand(s) % 800));
}

static void part__faults(part_run_state *s)
{
    for (int round = 0; round < s->p->rounds; round++) {
        switch (s->p->scenario) {
        case PART_CUT:
        case PART_ONEWAY: part__cut_round(s, round); break;
        case PART_DELAY: part__delay_round(s, round); break;
        case PART_FLAP: part__flap_round(s, round); break;
        }
    }
    for (int side = 0; side < 2; side++) {     /* whatever a round left */
        part_net_heal(&s->net, side);
    }
    part_net_relay_set(&s->net, -1, 0, 0, 0, 0);
    part__hold(s, harness_now_ms() + 1500);
}

/* --------------------------------------------------------------- run -- */

/* Every pushed request answered, then `close` (so the waitlist's last
 * entries get their final answer), then that answered too. */
static void part__drain(part_run_state *s, part_load *l)
{
    part_report *r = s->rep;
    long want = r->pushed + r->ctl;
    if (harness_wait_hlen(s->c, "alloc:{" PART_BATCH "}:results", want, 30000) < want)
        part_report_msg(r, "not every request answered 30 s after the faults");
    char json[96];
    snprintf(json, sizeof json, "{\"id\":\"c%ld\",\"op\":\"close\"}", r->ctl);
    if (part__push(l, s->c, "ctl", json)) r->ctl++;
    char key[64];
    snprintf(key, sizeof key, "alloc:{%s}:results", PART_BATCH);
    char field[32];
    snprintf(field, sizeof field, "c%ld", r->ctl - 1);
    free(harness_wait_hget(s->c, key, field, 30000));
    harness_sleep_ms(500);
}

static void part__load_run(part_run_state *s)
{
    part_load l = { .p = s->p, .rep = s->rep, .redis = &s->redis, .capacity = s->p->rate };
    l.max = (long)s->p->rate * 900;
    part_history_init(&l.hist, l.max);
    pthread_t producer, poller;
    pthread_create(&producer, NULL, part__producer, &l);
    pthread_create(&poller, NULL, part__poller, &l);
    char *first = harness_wait_hget(s->c, "alloc:{" PART_BATCH "}:results", "r0", 15000);
    if (first) part__faults(s);
    else { s->rep->other++; part_report_msg(s->rep, "r0 not answered in 15 s: allocd never served"); }
    free(first);
    atomic_store(&l.stop_producer, 1);
    pthread_join(producer, NULL);
    s->rep->pushed = atomic_load(&l.pushed);
    s->rep->ctl = l.ctl;
    part__drain(s, &l);
    atomic_store(&l.stop_poller, 1);
    pthread_join(poller, NULL);
    part_check_final(s->rep, s->c, PART_BATCH, PART_PER_USER);
    part_history_free(&l.hist);
}

int part_run(const part_params *p, part_report *rep)
{
    part_report_init(rep);
    rep->takeover_limit_ms = p->ttl_ms + 1000;
    part_run_state s;
    memset(&s, 0, sizeof s);
    s.p = p;
    s.rep = rep;
    s.rng = p->seed * 2654435761u + 1;
    s.last_owner = -1;
    int64_t t0 = harness_now_ms();
    int rc = -1;
    if (part__setup(&s) == 0) {
        part__load_run(&s);
        rc = 0;
    }
    part__teardown(&s);
    for (int i = 0; i < 2 && rc == 0; i++)
        if (rep->allocd_exit[i] != 0) {
            rep->other++;
            rep->violations++;
            part_report_msg(rep, "%s exited %d after SIGTERM", part_instance[i], rep->allocd_exit[i]);
        }
    rep->seconds = (double)(harness_now_ms() - t0) / 1000.0;
    return rc < 0 ? -1 : rep->violations ? 1 : 0;
}

void part_print_report(FILE *f, const part_params *p, const part_report *r)
{
    fprintf(f, "partition %s: %d rounds, fault %d ms, lease TTL %d ms, %d req/s, seed %llu, %.1f s\n",
            part_scenario_name(p->scenario), p->rounds, p->fault_ms, p->ttl_ms, p->rate,
            (unsigned long long)p->seed, r->seconds);
    fprintf(f, "  pushed %ld requests + %ld admin commands; faults %d (%d pings showed them in effect); "
               "lease changed hands %d times\n",
            r->pushed, r->ctl, r->faults, r->fault_checks, r->owner_changes);
    fprintf(f, "  results %ld: granted %ld of capacity %ld, rejected %ld; waiting seen %ld, served %ld\n",
            r->results, r->granted, r->capacity, r->rejected, r->waits_seen, r->waits_served);
    fprintf(f, "  polls %ld; takeovers %d: lease taken max %ld ms (limit %ld, + TTL/3 with only replies "
               "dropped), served again max %ld ms; taken/served:",
            r->polls, r->takeovers, r->takeover_max_ms, r->takeover_limit_ms, r->served_max_ms);
    for (int i = 0; i < r->takeovers && i < PART_MAX_TAKEOVERS; i++)
        fprintf(f, " %ld/%ld", r->takeover_ms[i], r->served_ms[i]);
    fprintf(f, "\n  lost %ld, phantom %ld, doubled %ld, oversold %ld, changed %ld, backwards %ld, "
               "slow takeover %ld, other %ld: violations %ld\n",
            r->lost, r->phantom, r->doubled, r->oversold, r->changed, r->backwards, r->slow_takeover,
            r->other, r->violations);
    for (int i = 0; i < r->n_msgs; i++) fprintf(f, "  ! %s\n", r->msgs[i]);
}
