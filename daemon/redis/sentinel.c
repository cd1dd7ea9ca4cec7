/* sentinel.c -- see sentinel.h.
 *
 * Two links to the sentinel currently chosen: a redis_conn for the polls
 * (deadlines and reconnects come with it) and a plain hiredis async context
 * for the subscription, whose replies keep coming on one callback, which
 * redis_conn's one-reply-per-command contract does not allow. The poll is
 * the source of truth; the subscription only makes a failover known sooner.
 */
#include "redis/sentinel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libuv.h>

#include "base/log.h"
#include "core/numtext.h"
#include "redis/redis_conn.h"

#define POLL_MS 500
#define MISSES_BEFORE_NEXT 3     /* polls without an answer before trying the next sentinel */

struct redis_sentinel {
    uv_loop_t *loop;
    redis_target spec;
    char master_name[108];
    redis_target sentinels[REDIS_SENTINELS_MAX];
    int n, cur;
    int timeout_ms;
    char name[96];
    redis_conn *conn;
    redisAsyncContext *sub;
    int sub_on;                  /* SUBSCRIBE confirmed */
    uv_timer_t timer;
    int poll_pending, misses;
    redis_target master;
    int have_master;
    int64_t epoch;               /* highest config epoch accepted */
    redis_sentinel_master_fn on_master;
    void *data;
    int closing, handles_open;
    void (*done)(void *data);
    void *done_data;
};

static void split_sentinels(redis_sentinel *s)
{
    const char *p = s->spec.host;
    while (*p && s->n < REDIS_SENTINELS_MAX) {
        size_t len = strcspn(p, ",");
        const char *colon = memrchr(p, ':', len);
        redis_target *t = &s->sentinels[s->n++];
        memset(t, 0, sizeof *t);
        t->kind = REDIS_TARGET_TCP;
        size_t hl = colon ? (size_t)(colon - p) : len;
        if (hl >= sizeof t->host) hl = sizeof t->host - 1;
        memcpy(t->host, p, hl);
        t->port = colon ? atoi(colon + 1) : 26379;
        p += len;
        if (*p == ',') p++;
    }
}

/* A new address: adopted and reported when it differs. */
static void adopt(redis_sentinel *s, const char *ip, int port, const char *how)
{
    redis_target t = s->spec;          /* the master's user and password */
    t.kind = REDIS_TARGET_TCP;
    t.path[0] = '\0';
    snprintf(t.host, sizeof t.host, "%s", ip);
    t.port = port;
    if (s->have_master && !memcmp(&t, &s->master, sizeof t)) return;
    s->master = t;
    s->have_master = 1;
    log_notice("sentinel: master %s is at %s:%d (%s)", s->master_name, ip, port, how);
    s->on_master(&s->master, s->data);
}

/* ---- the subscription ---- */

static void sub_connect(redis_sentinel *s);

static void on_sub_message(redisAsyncContext *ac, void *reply, void *priv)
{
    redis_sentinel *s = priv;
    redisReply *r = reply;
    if (!r || s->closing || r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
    if (r->element[0]->type != REDIS_REPLY_STRING) return;
    if (!strcmp(r->element[0]->str, "subscribe")) { s->sub_on = 1; return; }
    if (strcmp(r->element[0]->str, "message") || r->element[2]->type != REDIS_REPLY_STRING) return;
    /* "<name> <old ip> <old port> <new ip> <new port>" */
    char name[108], oip[64], nip[64];
    int oport, nport;
    if (sscanf(r->element[2]->str, "%107s %63s %d %63s %d", name, oip, &oport, nip, &nport) != 5) return;
    if (strcmp(name, s->master_name)) return;
    s->epoch++;                        /* a switch is a newer epoch than any seen */
    adopt(s, nip, nport, "+switch-master");
}

static void on_sub_connect(const redisAsyncContext *ac, int status)
{
    redis_sentinel *s = ac->data;
    if (status != REDIS_OK) s->sub = NULL;    /* hiredis frees it */
    (void)s;
}

static void on_sub_disconnect(const redisAsyncContext *ac, int status)
{
    redis_sentinel *s = ac->data;
    s->sub = NULL;
    s->sub_on = 0;
}

static void sub_connect(redis_sentinel *s)
{
    const redis_target *t = &s->sentinels[s->cur];
    redisAsyncContext *ac = redisAsyncConnect(t->host, t->port);
    if (!ac) return;
    if (ac->err) { redisAsyncFree(ac); return; }
    ac->data = s;
    if (redisLibuvAttach(ac, s->loop) != REDIS_OK) { redisAsyncFree(ac); return; }
    redisAsyncSetConnectCallback(ac, on_sub_connect);
    redisAsyncSetDisconnectCallback(ac, on_sub_disconnect);
    s->sub = ac;
    redisAsyncCommand(ac, on_sub_message, s, "SUBSCRIBE +switch-master");
}

/* ---- the poll ---- */

static const char *field(redisReply *r, const char *key)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && !strcmp(r->element[i]->str, key) &&
            r->element[i + 1]->type == REDIS_REPLY_STRING)
            return r->element[i + 1]->str;
    return NULL;
}

static void next_sentinel(redis_sentinel *s, const char *why)
{
    if (s->n < 2) return;
    s->cur = (s->cur + 1) % s->n;
    char where[300];
    log_warn("sentinel: %s; asking %s next", why, redis_target_describe(&s->sentinels[s->cur], where, sizeof where));
    redis_conn_retarget(s->conn, &s->sentinels[s->cur]);
    if (s->sub) redisAsyncDisconnect(s->sub);   /* resubscribed on the next tick */
    s->misses = 0;
}

static void on_poll(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    redis_sentinel *s = priv;
    s->poll_pending = 0;
    if (s->closing) return;
    if (err || !r || r->type != REDIS_REPLY_ARRAY) {
        if (r && r->type == REDIS_REPLY_ERROR) log_warn("sentinel: SENTINEL MASTER %s: %s", s->master_name, r->str);
        if (++s->misses >= MISSES_BEFORE_NEXT) next_sentinel(s, "no answer about the master");
        return;
    }
    s->misses = 0;
    const char *ip = field(r, "ip"), *port = field(r, "port"), *ep = field(r, "config-epoch");
    int64_t epoch = 0, p = 0;
    if (!ip || !port || numtext_parse_i64(port, &p) < 0 || p < 1 || p > 65535) return;
    if (ep && numtext_parse_i64(ep, &epoch) < 0) return;
    if (s->have_master && epoch < s->epoch) return;   /* a sentinel behind the others */
    s->epoch = epoch;
    adopt(s, ip, (int)p, "SENTINEL MASTER");
}

static void poll_now(redis_sentinel *s)
{
    if (s->closing || s->poll_pending) return;
    if (!redis_conn_is_ready(s->conn)) {
        if (++s->misses >= MISSES_BEFORE_NEXT) next_sentinel(s, "cannot connect");
        return;
    }
    const char *argv[] = { "SENTINEL", "MASTER", s->master_name };
    if (redis_conn_commandargv(s->conn, on_poll, s, s->timeout_ms, 3, argv, NULL) == 0) s->poll_pending = 1;
}

static void on_tick(uv_timer_t *t)
{
    redis_sentinel *s = t->data;
    if (!s->sub) sub_connect(s);
    poll_now(s);
}

static void on_conn_ready(redis_conn *c, void *data)
{
    poll_now(data);
}

int redis_sentinel_init(redis_sentinel **out, uv_loop_t *loop, const redis_target *spec,
                        const char *name, int timeout_ms, int connect_timeout_ms,
                        redis_sentinel_master_fn on_master, void *data)
{
    if (spec->kind != REDIS_TARGET_SENTINEL) return -EINVAL;
    redis_sentinel *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->loop = loop;
    s->spec = *spec;
    snprintf(s->master_name, sizeof s->master_name, "%s", spec->path);
    snprintf(s->name, sizeof s->name, "%s/sentinel", name);
    s->timeout_ms = timeout_ms;
    s->on_master = on_master;
    s->data = data;
    split_sentinels(s);
    if (s->n == 0) { free(s); return -EINVAL; }
    static const redis_conn_callbacks cb = { on_conn_ready, NULL };
    redis_conn_options opt = { .name = s->name, .connect_timeout_ms = connect_timeout_ms,
                               .backoff_min_ms = 100, .backoff_max_ms = 1000 };
    int rc = redis_conn_init(&s->conn, loop, &s->sentinels[0], &opt, &cb, s);
    if (rc < 0) { free(s); return rc; }
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    uv_timer_start(&s->timer, on_tick, 0, POLL_MS);
    *out = s;
    return 0;
}

int redis_sentinel_master(const redis_sentinel *s, redis_target *out)
{
    if (!s->have_master) return -EAGAIN;
    *out = s->master;
    return 0;
}

static void maybe_done(redis_sentinel *s)
{
    if (--s->handles_open > 0) return;
    void (*done)(void *) = s->done;
    void *data = s->done_data;
    free(s);
    if (done) done(data);
}

static void on_conn_closed(redis_conn *c, void *data) { maybe_done(data); }
static void on_timer_closed(uv_handle_t *h) { maybe_done(h->data); }

void redis_sentinel_close(redis_sentinel *s, void (*done)(void *data), void *data)
{
    s->closing = 1;
    s->done = done;
    s->done_data = data;
    s->handles_open = 2;
    if (s->sub) { redisAsyncContext *ac = s->sub; s->sub = NULL; redisAsyncFree(ac); }
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, on_timer_closed);
    redis_conn_close(s->conn, on_conn_closed, s);
}
