/* chaos_faults.c -- the fault schedule of the chaos run: allocd killed
 * (SIGKILL) and restarted or paused past its lease, Redis restarted or
 * stopped for an outage, at seeded moments; the answer watcher (contract
 * 9.6) that runs beside them, and the drain that waits for allocd to
 * finish. */
#include "chaos_int.h"

/* ---------------------------------------------------- allocd, Redis -- */

/* Starts instance i. With several instances each has its own name, and a
 * killed one comes back under that name (it takes over its own leases). */
void chaos__allocd_start(chaos_ctx *cx, int i)
{
    if (harness_allocd_start(&cx->allocd[i], &cx->redis, cx->inst_conf[i]) < 0)
        chaos__violation(cx, &cx->rep->other, "could not start allocd instance %d", i);
    cx->rep->allocd_starts++;
}

/* Notices an allocd that died on its own (a crash) and starts a new one. */
void chaos__allocd_watch(chaos_ctx *cx)
{
    for (int i = 0; i < cx->n_inst; i++) {
        harness_allocd *a = &cx->allocd[i];
        if (a->pid <= 0) { chaos__allocd_start(cx, i); continue; }
        int st;
        if (!proc_exited(a->pid, &st)) continue;   /* reaped and forgotten by the harness */
        cx->rep->allocd_unexpected_exits++;
        chaos__violation(cx, &cx->rep->other, "allocd instance %d pid %d exited by itself (%s %d); log %s", i,
                  (int)a->pid, WIFEXITED(st) ? "status" : "signal",
                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), a->log);
        a->pid = 0;
        chaos__allocd_start(cx, i);
    }
}

static void allocd_kill(chaos_ctx *cx, uint64_t *rng)
{
    chaos__allocd_watch(cx);
    int i = (int)chaos__rnd(rng, (uint32_t)cx->n_inst);
    /* a paused instance stays paused for the whole pause */
    if (cx->n_inst > 1 && cx->paused_pid > 0 && cx->allocd[i].pid == cx->paused_pid)
        i = (i + 1) % cx->n_inst;
    if (cx->allocd[i].pid == cx->paused_pid) cx->paused_pid = 0;
    harness_allocd_kill(&cx->allocd[i]);
    cx->rep->kills++;
    chaos__progress(cx, "kill -9 allocd instance %d (%d)", i, cx->rep->kills);
    harness_sleep_ms((int)chaos__rnd(rng, 300));
    chaos__allocd_start(cx, i);
}

/* SIGSTOP of one instance for longer than its lease: others take its
 * batches over, and when it wakes up fencing must keep it from writing. */
static void allocd_pause(chaos_ctx *cx, uint64_t *rng)
{
    chaos__allocd_watch(cx);
    if (cx->paused_pid > 0) return;
    int i = (int)chaos__rnd(rng, (uint32_t)cx->n_inst);
    /* prefer the holder of a batch's lease (token "instance/pid/random") */
    if (cx->n_inst > 1) {
        rconn c = { { NULL } };
        int bi = (int)chaos__rnd(rng, NB);
        redisReply *r = chaos__rcmd(cx, &c, cx->bslot[bi], "GET alloc:{%s}:lease", cx->b[bi].name);
        for (int j = 0; r && r->type == REDIS_REPLY_STRING && j < cx->n_inst; j++) {
            char pfx[32];
            snprintf(pfx, sizeof pfx, "chaos-%d/", j);
            if (!strncmp(r->str, pfx, strlen(pfx))) i = j;
        }
        if (r) freeReplyObject(r);
        chaos__rc_close(&c);
    }
    if (cx->allocd[i].pid <= 0 || kill(cx->allocd[i].pid, SIGSTOP) != 0) return;
    cx->paused_pid = cx->allocd[i].pid;
    cx->rep->pauses++;
    chaos__progress(cx, "SIGSTOP allocd instance %d (pid %d)", i, (int)cx->paused_pid);
}

static void allocd_resume(chaos_ctx *cx)
{
    if (cx->paused_pid <= 0) return;
    chaos__progress(cx, "SIGCONT pid %d", (int)cx->paused_pid);
    kill(cx->paused_pid, SIGCONT);
    cx->paused_pid = 0;
}

static void redis_restart(chaos_ctx *cx, int hard)
{
    chaos__progress(cx, "restarting Redis (%s)", hard ? "SIGKILL" : "SIGTERM");
    if (hard) harness_redis_kill(&cx->redis);
    for (int tries = 0; harness_redis_restart(&cx->redis) < 0; tries++) {
        if (tries == 3) { chaos__violation(cx, &cx->rep->other, "Redis does not restart (%s/redis.log)", cx->redis.dir); return; }
        harness_sleep_ms(500);
    }
    cx->rep->redis_restarts++;
}

static void redis_stop(chaos_ctx *cx)
{
    chaos__progress(cx, "Redis outage begins (%d ms)", cx->p->outage_ms);
    harness_reap(cx->redis.pid, SIGTERM);
    cx->redis.pid = 0;
    atomic_store(&cx->redis_down, 1);
}

static void redis_back(chaos_ctx *cx)
{
    for (int tries = 0; harness_redis_restart(&cx->redis) < 0; tries++) {
        if (tries == 3) { chaos__violation(cx, &cx->rep->other, "Redis does not come back after the outage"); return; }
        harness_sleep_ms(500);
    }
    atomic_store(&cx->redis_down, 0);
    cx->rep->outages++;
    chaos__progress(cx, "Redis outage ends");
}

/* ---------------------------------------------------------- answers -- */

/* Contract 9.6, from outside: every 200 ms each batch's stats.dequeued,
 * stats.state and queue/ctl lengths, read atomically (one script), feed an
 * answer_watch; the oldest unanswered request must never be older than
 * answer_ms. Exempt, as the contract and physics say: a batch that is
 * paused or waiting (its watch forgets what it saw), and Redis being down
 * (a failed probe forgets too, so the time Redis was away is not counted). */
static const char ANSWER_PROBE[] =
    "return {redis.call('HGET', KEYS[1], 'dequeued') or false, redis.call('HGET', KEYS[1], 'state') or false,"
    " redis.call('LLEN', KEYS[2]), redis.call('LLEN', KEYS[3])}";

static void answer_probe(chaos_ctx *cx, rconn *rc, int bi, answer_watch *aw)
{
    const char *b = cx->b[bi].name;
    int64_t sent = harness_now_ms();
    redisReply *r = chaos__rcmd(cx, rc, cx->bslot[bi], "EVAL %s 3 alloc:{%s}:stats alloc:{%s}:queue alloc:{%s}:ctl",
                         ANSWER_PROBE, b, b, b);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
             r->element[2]->type == REDIS_REPLY_INTEGER && r->element[3]->type == REDIS_REPLY_INTEGER;
    const char *state = ok && r->element[1]->type == REDIS_REPLY_STRING ? r->element[1]->str : "";
    if (!ok || !strcmp(state, "paused") || !strcmp(state, "waiting") || atomic_load(&cx->redis_down)) {
        answer_watch_reset(aw);
        if (!r) chaos__rc_close(rc);
    } else {
        long long dequeued = r->element[0]->type == REDIS_REPLY_STRING ? atoll(r->element[0]->str) : 0;
        answer_watch_probe(aw, sent, dequeued, r->element[2]->integer, r->element[3]->integer);
        double age = answer_watch_oldest_ms(aw, harness_now_ms()) / 1000.0;
        pthread_mutex_lock(&cx->msg_mu);
        if (age > cx->rep->max_unanswered_s) {
            cx->rep->max_unanswered_s = age;
            snprintf(cx->rep->max_unanswered_batch, sizeof cx->rep->max_unanswered_batch, "%s", b);
        }
        pthread_mutex_unlock(&cx->msg_mu);
    }
    if (r) freeReplyObject(r);
}

void *chaos__answer_main(void *arg)
{
    chaos_ctx *cx = arg;
    answer_watch aw[NB];
    for (int bi = 0; bi < NB; bi++) answer_watch_init(&aw[bi], harness_now_ms());
    rconn rc = { { NULL } };
    while (!atomic_load(&cx->answer_stop)) {
        for (int bi = 0; bi < NB; bi++) answer_probe(cx, &rc, bi, &aw[bi]);
        harness_sleep_ms(200);
    }
    chaos__rc_close(&rc);
    return NULL;
}

/* -------------------------------------------------------- schedule -- */

typedef struct fault { double at; int what; } fault;
enum { F_KILL, F_REDIS, F_OUTAGE_START, F_OUTAGE_END, F_PAUSE, F_CONT };

/* a pause lasts longer than lease_ttl_ms (2000 in cluster mode) */
#define PAUSE_SECONDS 3.5

static int cmp_fault(const void *a, const void *b)
{
    double x = ((const fault *)a)->at, y = ((const fault *)b)->at;
    return x < y ? -1 : x > y;
}

void chaos__run_faults(chaos_ctx *cx, uint64_t *rng)
{
    const chaos_params *p = cx->p;
    size_t n = 0, cap = (size_t)p->kills + (size_t)p->redis_restarts + 2 + 2 * (size_t)p->pauses;
    fault *f = chaos__xmalloc(cap * sizeof *f);
    double S = cx->seconds;
    double o_start = S * 0.3, o_end = o_start + p->outage_ms / 1000.0;
    for (int i = 0; i < p->kills; i++) f[n++] = (fault){ S * (0.03 + 0.94 * chaos__rndf(rng)), F_KILL };
    for (int i = 0; i < p->redis_restarts; i++) {
        double t = S * (0.05 + 0.9 * chaos__rndf(rng));
        if (p->outage_ms && t > o_start - 1 && t < o_end + 1) t = o_end + 1 + chaos__rndf(rng);
        f[n++] = (fault){ t, F_REDIS };
    }
    for (int i = 0; i < p->pauses; i++) {
        double t = S * (0.1 + 0.7 * chaos__rndf(rng));
        f[n++] = (fault){ t, F_PAUSE };
        f[n++] = (fault){ t + PAUSE_SECONDS, F_CONT };
    }
    if (p->outage_ms) {
        f[n++] = (fault){ o_start, F_OUTAGE_START };
        f[n++] = (fault){ o_end, F_OUTAGE_END };
    }
    qsort(f, n, sizeof *f, cmp_fault);
    size_t next = 0;
    int hard = 0;
    while (next < n || atomic_load(&cx->producers_running) > 0) {
        chaos__allocd_watch(cx);
        if (next < n && chaos__now_s() - cx->t0 >= f[next].at) {
            switch (f[next].what) {
            case F_KILL:
                allocd_kill(cx, rng);
                if (cx->arch) chaos_archive_kill(cx->arch);
                break;
            case F_REDIS: redis_restart(cx, hard); hard = !hard; break;
            case F_OUTAGE_START: redis_stop(cx); break;
            case F_OUTAGE_END: redis_back(cx); break;
            case F_PAUSE: allocd_pause(cx, rng); break;
            case F_CONT: allocd_resume(cx); break;
            }
            next++;
            continue;
        }
        harness_sleep_ms(20);
    }
    allocd_resume(cx);
    free(f);
}

/* ------------------------------------------------------------ drain -- */

long long chaos__hget_ll(chaos_ctx *cx, rconn *rc, int bi, const char *key, const char *field)
{
    return chaos__rint_(cx, rc, cx->bslot[bi], "HGET alloc:{%s}:%s %s", cx->b[bi].name, key, field);
}

/* 1 when drained, 0 when not (yet), -1 on a connection error. */
static int drained(chaos_ctx *cx, rconn *rc)
{
    for (int b = 0; b < NB; b++) {
        const char *n = cx->b[b].name;
        uint16_t sl = cx->bslot[b];
        long long q = chaos__rint_(cx, rc, sl, "LLEN alloc:{%s}:queue", n);
        long long ct = chaos__rint_(cx, rc, sl, "LLEN alloc:{%s}:ctl", n);
        if (q < 0 || ct < 0) return -1;
        if (q != 0 || ct != 0) return 0;
        long long d = chaos__hget_ll(cx, rc, b, "stats", "dequeued"), p = chaos__hget_ll(cx, rc, b, "stats", "processed"),
                  dd = chaos__hget_ll(cx, rc, b, "stats", "dead"), du = chaos__hget_ll(cx, rc, b, "stats", "duplicates");
        /* open swap offers and waitlist places are in processed (9.5);
         * granted assigns (11.5) are not, nor dequeued */
        if (d < 0 || p < 0 || dd < 0 || du < 0 || d != p + dd + du) return 0;
    }
    return 1;
}

int chaos__wait_drain(chaos_ctx *cx)
{
    double start = chaos__now_s();
    int limit = cx->p->drain_seconds;
    rconn rc = { { NULL } };
    while (chaos__now_s() - start < limit) {
        chaos__allocd_watch(cx);
        int d = drained(cx, &rc);
        if (d < 0) chaos__rc_close(&rc);
        else if (d) { chaos__rc_close(&rc); return 0; }
        harness_sleep_ms(200);
    }
    chaos__rc_close(&rc);
    return -1;
}
