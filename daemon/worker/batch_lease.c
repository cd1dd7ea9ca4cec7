/* batch_lease.c -- see batch_lease.h. */
#include "worker/batch_lease.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/random.h"
#include "core/numtext.h"

static uint64_t valid_for_ns(const batch_lease *l)
{
    return (uint64_t)l->ttl_ms * 900000ULL; /* 90% of the TTL */
}

static void lost(batch_lease *l, const char *why)
{
    l->held = 0;
    uv_timer_stop(&l->timer);
    if (!l->closing) l->cb->on_lost(l, why, l->data);
}

static void on_renew_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_lease *l = priv;
    l->renew_pending = 0;
    if (l->closing || !l->held) return;
    if (err || !r || r->type == REDIS_REPLY_ERROR) return; /* the clock decides */
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1)
        l->valid_until = l->renew_sent_at + valid_for_ns(l);
    else
        lost(l, "lease renewal refused: another instance holds it");
}

static void on_tick(uv_timer_t *t)
{
    batch_lease *l = t->data;
    if (!l->held) return;
    if (!batch_lease_valid(l)) { lost(l, "lease not renewed in time (expired on our clock)"); return; }
    if (l->renew_pending || !redis_conn_is_ready(l->conn)) return;
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%d", l->ttl_ms);
    const char *argv[] = { l->keys->lease, l->token, ttl };
    l->renew_sent_at = uv_hrtime();
    if (redis_conn_eval(l->conn, &l->scripts->lease_renew, on_renew_reply, l, l->ttl_ms / 3,
                        1, 3, argv, NULL) == 0)
        l->renew_pending = 1;
}

static void on_acquire_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_lease *l = priv;
    if (l->closing) return;
    if (err || !r || r->type == REDIS_REPLY_ERROR) {
        lost(l, err ? err : r ? r->str : "no reply");
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) { lost(l, "unexpected lease reply"); return; }
    if (r->element[0]->integer == 1) {
        snprintf(l->epoch, sizeof l->epoch, "%s", r->element[1]->str);
        l->held = 1;
        l->valid_until = l->renew_sent_at + valid_for_ns(l);
        uint64_t every = (uint64_t)l->ttl_ms / 3;
        uv_timer_start(&l->timer, on_tick, every, every);
        l->cb->on_acquired(l, l->data);
        return;
    }
    const char *holder = r->elements > 2 && r->element[2]->str ? r->element[2]->str : "?";
    l->cb->on_busy(l, r->element[1]->integer, holder, l->data);
}

void batch_lease_init(batch_lease *l, uv_loop_t *loop, redis_conn *conn,
                      const allocd_scripts *scripts, const batch_keys *keys,
                      int ttl_ms, const char *instance,
                      const batch_lease_callbacks *cb, void *data)
{
    memset(l, 0, sizeof *l);
    l->conn = conn;
    l->scripts = scripts;
    l->keys = keys;
    l->ttl_ms = ttl_ms;
    l->cb = cb;
    l->data = data;
    snprintf(l->token, sizeof l->token, "%s/%ld/%016" PRIx64, instance, (long)getpid(), random_u64());
    snprintf(l->instance, sizeof l->instance, "%s", instance);
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
}

int batch_lease_acquire_from(batch_lease *l, const char *holder)
{
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%d", l->ttl_ms);
    const char *argv[] = { l->keys->lease, l->keys->internal, l->token, ttl, holder ? holder : "" };
    l->renew_sent_at = uv_hrtime();
    return redis_conn_eval(l->conn, &l->scripts->lease_acquire, on_acquire_reply, l,
                           l->ttl_ms / 2, 2, 5, argv, NULL);
}

int batch_lease_acquire(batch_lease *l)
{
    return batch_lease_acquire_from(l, NULL);
}

/* Tokens are instance/pid/random. The same instance name with a pid that
 * is not ours and not running here is our own previous run, killed: a
 * restarted daemon need not wait out its lease. (Two hosts sharing one
 * instance name would take batches from each other; fencing keeps even
 * that safe, but give every instance its own name.) */
int batch_lease_holder_dead(const batch_lease *l, const char *holder)
{
    size_t n = strlen(l->instance);
    if (strncmp(holder, l->instance, n) || holder[n] != '/') return 0;
    /* A holder whose pid is not plain digits is never taken for dead: the
     * lease is then waited out, which is slow but safe. */
    const char *p = holder + n + 1, *slash = strchr(p, '/');
    char num[NUMTEXT_MAX + 1];
    if (!slash || slash == p || (size_t)(slash - p) > NUMTEXT_MAX) return 0;
    memcpy(num, p, (size_t)(slash - p));
    num[slash - p] = '\0';
    int64_t pid;
    if (numtext_parse_i64(num, &pid) < 0 || pid <= 0 || pid > INT32_MAX || pid == (int64_t)getpid()) return 0;
    return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

int batch_lease_valid(const batch_lease *l)
{
    return l->held && uv_hrtime() < l->valid_until;
}

void batch_lease_drop(batch_lease *l)
{
    l->held = 0;
    uv_timer_stop(&l->timer);
}

static void on_release_reply(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_lease *l = priv;
    if (!l->closing) l->cb->on_released(l, l->data);
}

void batch_lease_release(batch_lease *l)
{
    int was_held = l->held;
    batch_lease_drop(l);
    const char *argv[] = { l->keys->lease, l->token };
    if (!was_held || redis_conn_eval(l->conn, &l->scripts->lease_release, on_release_reply, l,
                                     l->ttl_ms / 2, 1, 2, argv, NULL) < 0)
        l->cb->on_released(l, l->data);
}

void batch_lease_close(batch_lease *l, uv_close_cb done)
{
    l->closing = 1;
    l->held = 0;
    uv_timer_stop(&l->timer);
    uv_close((uv_handle_t *)&l->timer, done);
}
