/* alt_lock.c -- the lock-per-room (or per-item) design, the other usual
 * alternative.
 *
 * Each request, on one of many client threads (64 by default, each with its
 * own blocking connection, as an application server pool would have):
 *   1. SET lock NX PX -- if the lock is taken, sleep a little and retry;
 *   2. double check: read the state under the lock (HGET free, the user);
 *   3. read-modify-write: HSET the new values, XADD the order/grant;
 *   4. unlock with the compare-and-delete Lua script.
 * The reads and the writes of steps 2 and 3 are pipelined (one round trip
 * each), which is the kindest version of this design. Reservations expire
 * lazily under the item's lock. --lock-precheck adds an unlocked read before
 * step 1 so full rooms are skipped without locking. Note that this design
 * cannot keep per_user exact: two items' locks do not protect one user.
 */
#include "alt_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char lua_unlock[] =
"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
"return 0\n";

typedef struct lock_shared {
    const alt_opts *o;
    char unlock_sha[41];
    char free_key[256], users_key[256], log_key[256];
    long next;                /* next request index (atomic) */
    int64_t deadline;
    alt_result *res;
} lock_shared;

typedef struct lock_thread {
    lock_shared *sh;
    redisContext *c;
    int id;
    long tokens;
    uint64_t rng;
    char token[48];
    int failed;
    char err[160];
    pthread_t th;
} lock_thread;

static long long reply_int(redisReply *r)
{
    if (!r) return -1;
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type == REDIS_REPLY_STRING) return strtoll(r->str, NULL, 10);
    return r->type == REDIS_REPLY_NIL ? 0 : -1;
}

/* Reads n pipelined replies; the integers go to out (may be NULL). */
static int read_replies(lock_thread *t, int n, long long *out)
{
    for (int k = 0; k < n; k++) {
        redisReply *r = NULL;
        if (redisGetReply(t->c, (void **)&r) != REDIS_OK) { t->failed = 1; return -1; }
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(t->err, sizeof t->err, "%s", r->str);
            t->failed = 1;
        }
        if (out) out[k] = reply_int(r);
        freeReplyObject(r);
    }
    return t->failed ? -1 : 0;
}

static void lock_name(const lock_shared *sh, const char *item, char *buf, size_t len)
{
    snprintf(buf, len, "bench:{%s}:lock:L:%s", sh->o->batch, item);
}

/* SET NX PX, sleeping base..2*base us between tries. */
static int lock_take(lock_thread *t, const char *lock)
{
    snprintf(t->token, sizeof t->token, "t%d-%ld", t->id, ++t->tokens);
    for (;;) {
        redisReply *r = redisCommand(t->c, "SET %s %s NX PX 2000", lock, t->token);
        if (!r) { t->failed = 1; return -1; }
        int got = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (got) return 0;
        __atomic_add_fetch(&t->sh->res->lock_retries, 1, __ATOMIC_RELAXED);
        if (proc_mono_us() > t->sh->deadline) return -1;
        t->rng = bench_mix(t->rng);
        int base = t->sh->o->lock_sleep_us;
        proc_sleep_us(base + (int64_t)(t->rng % (uint64_t)(base > 0 ? base : 1)));
    }
}

static void lock_drop(lock_thread *t, const char *lock)
{
    redisReply *r = redisCommand(t->c, "EVALSHA %s 1 %s %s", t->sh->unlock_sha, lock, t->token);
    if (!r) t->failed = 1;
    else freeReplyObject(r);
}

/* Under the item's lock: hand back the item's due reservations. */
static void expire_due(lock_thread *t, const char *item, const char *holds, int64_t now)
{
    redisReply *r = redisCommand(t->c, "ZRANGEBYSCORE %s -inf %lld LIMIT 0 32", holds, (long long)now);
    if (!r || r->type != REDIS_REPLY_ARRAY) { if (r) freeReplyObject(r); t->failed = !r; return; }
    const lock_shared *sh = t->sh;
    for (size_t e = 0; e < r->elements; e++) {
        const char *m = r->element[e]->str; /* user|qty|expires */
        char user[64];
        if (sscanf(m, "%63[^|]", user) != 1) continue;
        redisAppendCommand(t->c, "HINCRBY %s %s 1", sh->free_key, item);
        redisAppendCommand(t->c, "HINCRBY %s %s -1", sh->users_key, user);
        redisAppendCommand(t->c, "ZREM %s %s", holds, m);
        redisAppendCommand(t->c, "XADD %s * type expire user %s item %s qty 1", sh->log_key, user, item);
    }
    size_t n = r->elements;
    freeReplyObject(r);
    read_replies(t, (int)n * 4, NULL);
}

static int buy(lock_thread *t, long i, const wl_req *rq)
{
    const lock_shared *sh = t->sh;
    const workload *w = sh->o->w;
    char user[48], item[48], lock[320], holds[320];
    wl_user_name(i, rq, 0, user, sizeof user);
    wl_item_name(w, rq->item, item, sizeof item);
    lock_name(sh, item, lock, sizeof lock);
    if (lock_take(t, lock) < 0) return -1;
    int64_t now = proc_wall_us() / 1000;
    snprintf(holds, sizeof holds, "bench:{%s}:lock:holds:%s", sh->o->batch, item);
    if (w->hold_ms > 0) expire_due(t, item, holds, now);
    long long v[2];
    redisAppendCommand(t->c, "HGET %s %s", sh->free_key, item);
    redisAppendCommand(t->c, "HGET %s %s", sh->users_key, user);
    int granted = 0;
    if (read_replies(t, 2, v) == 0 && v[0] >= 1 && v[1] + 1 <= w->per_user) {
        redisAppendCommand(t->c, "HSET %s %s %lld", sh->free_key, item, v[0] - 1);
        redisAppendCommand(t->c, "HSET %s %s %lld", sh->users_key, user, v[1] + 1);
        redisAppendCommand(t->c, "XADD %s * type grant user %s item %s qty 1", sh->log_key, user, item);
        int n = 3;
        if (w->hold_ms > 0) {
            redisAppendCommand(t->c, "ZADD %s %lld %s|1|%lld", holds, (long long)(now + w->hold_ms), user, (long long)i);
            n++;
        }
        granted = read_replies(t, n, NULL) == 0;
    }
    lock_drop(t, lock);
    return granted;
}

/* One room of the preferences under its lock: 1 granted, 0 not. */
static int try_room(lock_thread *t, long i, const wl_req *rq, const char *room)
{
    const lock_shared *sh = t->sh;
    int k = rq->op == OPK_GROUP ? rq->n_members : 1;
    char lock[320], name[WL_MEMBERS][48];
    for (int m = 0; m < k; m++) wl_user_name(i, rq, m, name[m], sizeof name[m]);
    if (sh->o->lock_precheck && proc_int(t->c, "HGET %s %s", sh->free_key, room) < k) return 0;
    lock_name(sh, room, lock, sizeof lock);
    if (lock_take(t, lock) < 0) return -1;
    long long v[1 + WL_MEMBERS];
    redisAppendCommand(t->c, "HGET %s %s", sh->free_key, room);
    for (int m = 0; m < k; m++) redisAppendCommand(t->c, "HEXISTS %s %s", sh->users_key, name[m]);
    int ok = read_replies(t, 1 + k, v) == 0 && v[0] >= k;
    for (int m = 0; ok && m < k; m++) ok = v[1 + m] == 0;
    if (ok) {
        redisAppendCommand(t->c, "HSET %s %s %lld", sh->free_key, room, v[0] - k);
        for (int m = 0; m < k; m++) {
            redisAppendCommand(t->c, "HSET %s %s %s", sh->users_key, name[m], room);
            redisAppendCommand(t->c, "XADD %s * type grant user %s item %s", sh->log_key, name[m], room);
        }
        ok = read_replies(t, 1 + 2 * k, NULL) == 0;
    }
    lock_drop(t, lock);
    return ok;
}

static int rooms(lock_thread *t, long i, const wl_req *rq)
{
    char user[48], room[48];
    wl_user_name(i, rq, 0, user, sizeof user);
    if (proc_int(t->c, "HEXISTS %s %s", t->sh->users_key, user) == 1) return 0;
    for (int p = 0; p < rq->n_prefs; p++) {
        wl_item_name(t->sh->o->w, rq->prefs[p], room, sizeof room);
        int got = try_room(t, i, rq, room);
        if (got != 0) return got;
    }
    return 0;
}

static void *lock_main(void *arg)
{
    lock_thread *t = arg;
    lock_shared *sh = t->sh;
    outcome *o = &sh->res->out;
    for (;;) {
        long i = __atomic_fetch_add(&sh->next, 1, __ATOMIC_RELAXED);
        if (i >= sh->o->w->n || proc_mono_us() > sh->deadline || t->failed) break;
        wl_req rq;
        workload_request(sh->o->w, i, &rq);
        int got = rq.op == OPK_BUY ? buy(t, i, &rq) : rooms(t, i, &rq);
        if (got < 0) break; /* deadline while waiting for a lock */
        __atomic_add_fetch(got ? &o->granted : &o->rejected, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&sh->res->decided, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static int lock_threads(lock_shared *sh, char *err, size_t errlen)
{
    int n = sh->o->threads, rc = 0;
    lock_thread *t = calloc((size_t)n, sizeof *t);
    if (!t) return -1;
    for (int k = 0; k < n && rc == 0; k++) {
        t[k] = (lock_thread){ .sh = sh, .id = k, .rng = bench_mix((uint64_t)k + 1) };
        t[k].c = bench_connect(sh->o->target);
        if (!t[k].c || pthread_create(&t[k].th, NULL, lock_main, &t[k]) != 0) rc = -1;
    }
    for (int k = 0; k < n; k++) {
        if (t[k].th) pthread_join(t[k].th, NULL);
        if (t[k].c) redisFree(t[k].c);
        if ((t[k].failed || !t[k].c) && !err[0])
            snprintf(err, errlen, "lock thread %d: %s", k, t[k].err[0] ? t[k].err : "redis I/O error");
    }
    free(t);
    return rc < 0 || err[0] ? -1 : 0;
}

int alt_lock_run(const alt_opts *o, alt_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    err[0] = '\0';
    redisContext *c = bench_connect(o->target);
    if (!c) { snprintf(err, errlen, "cannot connect"); return -1; }
    lock_shared sh = { .o = o, .res = res };
    alt_key(sh.free_key, sizeof sh.free_key, o->batch, "lock", "free");
    alt_key(sh.users_key, sizeof sh.users_key, o->batch, "lock", "users");
    alt_key(sh.log_key, sizeof sh.log_key, o->batch, "lock", "log");
    int rc = alt_seed_free(c, o->w, o->batch, "lock");
    if (rc == 0) rc = bench_script_load(c, lua_unlock, sh.unlock_sha);
    if (rc == 0) {
        alt_window win;
        alt_window_open(&win, c, o);
        sh.deadline = win.t0 + (int64_t)o->max_seconds * 1000000;
        rc = lock_threads(&sh, err, errlen);
        alt_window_close(&win, c, o, res);
    }
    redisFree(c);
    return rc;
}
