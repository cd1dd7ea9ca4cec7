/* redis_conn.c -- one Redis connection on the libuv loop that survives
 * refused connects, hangs, restarts and wrong passwords (see redis_conn.h).
 *
 * hiredis' bundled libuv adapter hangs on a socket error and has no
 * timeouts, so the hooks are our own (redis_adapter.h); this file is the
 * policy around them.
 *
 * Shape:
 * - redis_conn is the long-lived object the caller holds. Each connection
 *   attempt gets a redis_link (redis_adapter.h): the hiredis async context
 *   and the uv_poll_t on its fd. A link dies with its context; the conn
 *   makes a new one.
 * - Our own FIFO of redis_cmd records mirrors hiredis' callback list (replies
 *   come in order). A record is taken off the FIFO before its callback runs,
 *   which is what makes "exactly one callback per accepted command" hold on
 *   every path: reply, connection lost, deadline, close.
 * - One uv_timer_t serves the state we are in: the backoff delay (WAITING),
 *   the connect deadline covering connect + AUTH + SETNAME (CONNECTING), the
 *   earliest command deadline (READY).
 * - refs counts the timer and the live links; the conn is freed when it
 *   drops to 0 once closing.
 *
 * hiredis 0.14.1 rules this file is built around (async.c):
 * - Pending callbacks get a NULL reply only while hiredis frees the context
 *   (__redisAsyncFree): on redisAsyncFree, or on its own after a read/write
 *   error or EOF. So a NULL reply on a live link means "connection lost and
 *   hiredis is freeing it right now".
 * - A failed connect calls onConnect(REDIS_ERR) and then frees the context;
 *   onDisconnect runs only for contexts that had connected.
 * - onConnect runs without REDIS_IN_CALLBACK, so redisAsyncFree from inside
 *   it frees at once and hiredis then touches freed memory. We never call
 *   user code from onConnect, and a context is never freed inside a
 *   redisAsyncHandleRead/Write for it (the adapter defers the free). That
 *   one rule covers reply callbacks, on_ready, on_down and redis_conn_close
 *   called from any of them.
 * - Once we give a link up (detached), every hiredis callback for it is
 *   ignored: its records were already answered from our FIFO.
 * - The reply object is freed by hiredis when the callback returns.
 */
#include "redis/redis_conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/async.h>

#include "core/assert.h"
#include "core/numtext.h"

#include "base/log.h"
#include "core/sha1.h"
#include "redis_adapter.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 2000
#define DEFAULT_BACKOFF_MIN_MS 100
#define DEFAULT_BACKOFF_MAX_MS 5000
#define DEFAULT_COMMAND_TIMEOUT_MS 5000

typedef enum {
    CONN_WAITING,     /* no link; the timer fires the next attempt */
    CONN_CONNECTING,  /* link up, TCP/unix connect or AUTH/SETNAME under way */
    CONN_READY,       /* commands accepted */
    CONN_CLOSED       /* redis_conn_close() was called */
} conn_state;

/* One accepted command (or a handshake command of ours). */
typedef struct redis_cmd {
    struct redis_cmd *next;
    redis_reply_fn fn;
    void *privdata;
    uint64_t deadline;       /* loop time (ms) */
    int timeout_ms;
    int user;                /* counted in stats, arms the deadline timer */
    /* EVALSHA only: what the EVAL retry needs. av/avlen have argc + 3
     * slots: command, sha or source, nkeys, then copies of the arguments. */
    const char *source;      /* the script's source: not copied, see eval */
    int retried;             /* EVAL already sent: never retry twice */
    int eval_argc;
    const char **av;
    size_t *avlen;
    /* EVALSHA sent pre-formatted: the caller's RESP tail (numkeys, keys,
     * args; alive until the callback) for the EVAL retry. */
    const char *resp_tail;
    size_t resp_tail_len;
    int resp_ntail;
} redis_cmd;

struct redis_conn {
    uv_loop_t *loop;
    redis_target target;
    redis_conn_callbacks cb;
    void *data;
    char name[64];           /* for logs */
    char client_name[64];    /* for CLIENT SETNAME: no spaces */
    char where[300];         /* "host:port" or "unix:/path", no password */
    int connect_timeout_ms;
    int backoff_min_ms;
    int backoff_max_ms;

    conn_state state;
    int closing;
    redis_link *link;        /* the current link, or NULL */
    uv_timer_t timer;
    uint64_t armed_at;       /* command deadline the timer is set for, 0: none */

    redis_cmd *head, *tail;  /* sent, waiting for a reply, in order */
    int sorted;              /* deadlines non-decreasing along the FIFO */

    int backoff_ms;          /* next backoff before jitter */
    uint64_t rng;
    int down_logged;         /* failure already logged since the last change */
    char why[200];           /* reason passed to callbacks of the last drop */

    redis_conn_stats stats;
    int refs;                /* the timer + live links; freed at 0 once closing */
    redis_close_fn close_cb;
    void *close_data;
};

static void conn_connect(redis_conn *c);
static void conn_down(redis_conn *c, const char *why);
static void on_reply(redisAsyncContext *ac, void *r, void *privdata);

/* ---- small helpers ------------------------------------------------------ */

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return *s = x;
}

/* Uniform in [d/2, d]: spreads the reconnects of many daemons after a Redis
 * restart instead of having them all knock at once. */
static int jitter(redis_conn *c, int d)
{
    int lo = d / 2;
    return lo + (int)(xorshift(&c->rng) % (uint64_t)(d - lo + 1));
}

/* Best description of why a context failed; copied by conn_down at once. */
static const char *ac_error(const redisAsyncContext *ac, const char *dflt)
{
    if (ac->c.err && ac->c.errstr[0]) return ac->c.errstr;
    if (ac->err && ac->errstr && ac->errstr[0]) return ac->errstr;
    return dflt;
}

static void conn_unref(redis_conn *c)
{
    ALLOC_ASSERT(c->refs > 0);
    if (--c->refs > 0 || !c->closing) return;
    ALLOC_ASSERT(!c->link && !c->head && !c->tail);
    /* Every handle is closed and the hiredis context freed: the last thing
     * is close_cb, which may still read the stats and name. */
    if (c->close_cb) c->close_cb(c, c->close_data);
    free(c);
}

/* ---- the FIFO of sent commands ------------------------------------------ */

static void fifo_push(redis_conn *c, redis_cmd *cmd)
{
    ALLOC_ASSERT(!c->closing && (c->head == NULL) == (c->tail == NULL));
    cmd->next = NULL;
    if (c->tail) {
        ALLOC_ASSERT(c->tail->next == NULL);
        if (cmd->deadline < c->tail->deadline) c->sorted = 0;
        c->tail->next = cmd;
    } else {
        c->head = cmd;
        c->sorted = 1;
    }
    c->tail = cmd;
}

static redis_cmd *fifo_pop(redis_conn *c)
{
    redis_cmd *cmd = c->head;
    ALLOC_ASSERT((cmd == NULL) == (c->tail == NULL));
    if (!cmd) return NULL;
    ALLOC_ASSERT(cmd->next != NULL || cmd == c->tail);
    c->head = cmd->next;
    if (!c->head) {
        c->tail = NULL;
        c->sorted = 1;
    }
    cmd->next = NULL;
    return cmd;
}

/* Earliest deadline of the pending commands, 0 when none. With one timeout
 * for all commands the FIFO is sorted and this is the head; mixed timeouts
 * cost a scan, done only when the timer fires. */
static uint64_t fifo_earliest(const redis_conn *c)
{
    if (!c->head) return 0;
    if (c->sorted) return c->head->deadline;
    uint64_t min = c->head->deadline;
    for (const redis_cmd *p = c->head->next; p; p = p->next)
        if (p->deadline < min) min = p->deadline;
    return min;
}

/* The record is off the FIFO: run its callback once and free it. */
static void cmd_done(redis_conn *c, redis_cmd *cmd, redisReply *reply,
                     const char *err)
{
    /* exactly one callback: a record on the FIFO is never answered */
    ALLOC_ASSERT(cmd->next == NULL && cmd != c->head && cmd != c->tail);
    ALLOC_ASSERT((reply == NULL) != (err == NULL));
    if (cmd->fn) cmd->fn(c, reply, err, cmd->privdata);
    free(cmd);
}

/* ---- the timer: backoff, connect deadline, command deadlines ------------ */

static void on_timer(uv_timer_t *t);

static void timer_start(redis_conn *c, uint64_t ms)
{
    c->armed_at = 0;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* Keep the timer at or before every pending deadline. Firing early is
 * harmless (check_deadlines re-arms), so pops do not touch it. */
static void arm_deadline(redis_conn *c, uint64_t deadline)
{
    if (c->armed_at && c->armed_at <= deadline) return;
    uint64_t now = uv_now(c->loop);
    uv_timer_start(&c->timer, on_timer, deadline > now ? deadline - now : 0, 0);
    c->armed_at = deadline;
}

static void check_deadlines(redis_conn *c)
{
    c->armed_at = 0;
    uint64_t min = fifo_earliest(c);
    if (!min) return;
    /* A late reply would still arrive and be matched to the next command,
     * so a missed deadline condemns the whole connection. */
    if (min <= uv_now(c->loop)) conn_down(c, "timeout");
    else arm_deadline(c, min);
}

static void on_timer(uv_timer_t *t)
{
    redis_conn *c = t->data;
    switch (c->state) {
    case CONN_WAITING: conn_connect(c); break;
    case CONN_CONNECTING: conn_down(c, "connect timeout"); break;
    case CONN_READY: check_deadlines(c); break;
    case CONN_CLOSED: break;
    }
}

static void on_timer_close(uv_handle_t *h)
{
    conn_unref(h->data);
}

static void schedule_reconnect(redis_conn *c)
{
    int delay = jitter(c, c->backoff_ms);
    c->backoff_ms = c->backoff_ms >= c->backoff_max_ms / 2
                        ? c->backoff_max_ms : c->backoff_ms * 2;
    timer_start(c, (uint64_t)delay);
}

/* ---- sending ------------------------------------------------------------ */

/* Hands a formatted command to hiredis and records it. No callback can run
 * here: redisAsyncFormattedCommand only appends to the output buffer. */
static int cmd_send(redis_conn *c, redis_cmd *cmd, const char *buf, int len)
{
    /* handshake commands go out while connecting, the caller's once ready */
    ALLOC_ASSERT(c->link && !c->link->detached && !c->closing);
    ALLOC_ASSERT(cmd->user ? c->state == CONN_READY : c->state == CONN_CONNECTING);
    redisAsyncContext *ac = c->link->ac;
    if (redisAsyncFormattedCommand(ac, on_reply, cmd, buf, (size_t)len) != REDIS_OK)
        return -ENOMEM;
    /* uv_now() is cached per loop iteration; a caller that worked a while
     * before sending would get a deadline that is partly used up. */
    uv_update_time(c->loop);
    cmd->deadline = uv_now(c->loop) + (uint64_t)cmd->timeout_ms;
    fifo_push(c, cmd);
    if (cmd->user) {
        c->stats.commands++;
        arm_deadline(c, cmd->deadline);
    }
    return 0;
}

static int cmd_send_argv(redis_conn *c, redis_cmd *cmd, int argc,
                         const char **argv, const size_t *argvlen)
{
    char *buf;
    int len = redisFormatCommandArgv(&buf, argc, argv, argvlen);
    if (len < 0) return -ENOMEM;
    int rc = cmd_send(c, cmd, buf, len);
    redisFreeCommand(buf);
    return rc;
}

static redis_cmd *cmd_new(size_t extra, redis_reply_fn fn, void *privdata,
                          int timeout_ms)
{
    redis_cmd *cmd = calloc(1, sizeof *cmd + extra);
    if (!cmd) return NULL;
    cmd->fn = fn;
    cmd->privdata = privdata;
    cmd->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_COMMAND_TIMEOUT_MS;
    cmd->user = 1;
    return cmd;
}

/* ---- connecting: connect, AUTH, CLIENT SETNAME, ready ------------------- */

static void conn_ready(redis_conn *c)
{
    ALLOC_ASSERT(c->state == CONN_CONNECTING && c->link);
    c->state = CONN_READY;
    c->backoff_ms = c->backoff_min_ms;
    c->stats.connects++;
    c->down_logged = 0;
    uv_timer_stop(&c->timer);
    c->armed_at = 0;
    log_notice("redis %s: connected to %s", c->name, c->where);
    if (c->cb.on_ready) c->cb.on_ready(c, c->data);
}

static int is_error(const redisReply *r, const char *prefix)
{
    size_t n = strlen(prefix);
    return r && r->type == REDIS_REPLY_ERROR && r->str && r->len >= n &&
           strncmp(r->str, prefix, n) == 0;
}

static void on_auth_reply(redis_conn *c, redisReply *r, const char *err,
                          void *privdata)
{
    if (err) return;   /* the drop that caused it is handled already */
    if (r->type == REDIS_REPLY_ERROR) {
        char why[200];
        snprintf(why, sizeof why, "AUTH failed: %.*s", (int)r->len, r->str);
        conn_down(c, why);
    }
}

/* Last handshake reply: SETNAME's own failure does not matter, but NOAUTH
 * means the server wants a password we were not given. */
static void on_setname_reply(redis_conn *c, redisReply *r, const char *err,
                             void *privdata)
{
    if (err) return;
    if (is_error(r, "NOAUTH")) conn_down(c, "server requires a password (NOAUTH)");
    else conn_ready(c);
}

static int send_internal(redis_conn *c, redis_reply_fn fn, int argc,
                         const char **argv)
{
    redis_cmd *cmd = cmd_new(0, fn, NULL, c->connect_timeout_ms);
    if (!cmd) return -ENOMEM;
    cmd->user = 0;   /* the connect deadline covers it */
    int rc = cmd_send_argv(c, cmd, argc, argv, NULL);
    if (rc < 0) free(cmd);
    return rc;
}

static int send_handshake(redis_conn *c)
{
    const redis_target *t = &c->target;
    if (t->password[0]) {
        /* AUTH user password (ACL, Redis 6+) or AUTH password. */
        const char *auth[3] = { "AUTH", t->user, t->password };
        int rc = t->user[0]
                     ? send_internal(c, on_auth_reply, 3, auth)
                     : send_internal(c, on_auth_reply, 2,
                                     (const char *[]){ "AUTH", t->password });
        if (rc < 0) return rc;
    }
    const char *setname[3] = { "CLIENT", "SETNAME", c->client_name };
    return send_internal(c, on_setname_reply, 3, setname);
}

/* Called from inside redisAsyncHandleWrite/Read (in_handle > 0); user code
 * must not run here (see the top comment), only our handshake commands. */
static void on_connect(const redisAsyncContext *ac, int status)
{
    redis_link *l = ac->data;
    if (l->detached) return;
    redis_conn *c = l->owner;
    ALLOC_ASSERT(c->link == l && c->state == CONN_CONNECTING);
    if (status != REDIS_OK) {
        l->ac_gone = 1;   /* hiredis frees it when we return */
        conn_down(c, ac_error(ac, "connect failed"));
        return;
    }
    if (send_handshake(c) < 0) conn_down(c, "out of memory");
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    redis_link *l = ac->data;
    if (l->detached) return;
    l->ac_gone = 1;
    conn_down(l->owner, ac_error(ac, "connection closed"));
}

/* The link's socket failed under it (redis_adapter.h). */
static void on_link_error(redis_link *l, const char *why)
{
    conn_down(l->owner, why);
}

static void on_link_freed(void *owner)
{
    conn_unref(owner);
}

/* The conn gives its link up: from now on it only has to die. */
static void conn_drop_link(redis_conn *c)
{
    if (!c->link) return;
    redis_link *l = c->link;
    c->link = NULL;
    redis_adapter_drop(l);
}

static void conn_connect(redis_conn *c)
{
    ALLOC_ASSERT(c->state == CONN_WAITING && !c->link && !c->head);
    const redis_target *t = &c->target;
    redisAsyncContext *ac = t->kind == REDIS_TARGET_UNIX
                                ? redisAsyncConnectUnix(t->path)
                                : redisAsyncConnect(t->host, t->port);
    if (!ac) {
        conn_down(c, "out of memory");
        return;
    }
    if (ac->err) {
        /* Refused at once (no socket file, loopback RST, bad address). */
        char why[200];
        snprintf(why, sizeof why, "%s", ac_error(ac, "connect failed"));
        redisAsyncFree(ac);
        conn_down(c, why);
        return;
    }
    static const redis_adapter_callbacks link_cb = { on_link_error, on_link_freed };
    redis_link *l = redis_adapter_attach(c->loop, ac, c->name, &link_cb, c);
    if (!l) {
        redisAsyncFree(ac);
        conn_down(c, "out of memory");
        return;
    }
    c->refs++;               /* the link's, given back in on_link_freed */
    c->link = l;
    c->state = CONN_CONNECTING;
    timer_start(c, (uint64_t)c->connect_timeout_ms);
    redisAsyncSetConnectCallback(ac, on_connect);   /* starts the write watch */
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

/* ---- losing the connection ---------------------------------------------- */

static void log_down(redis_conn *c, int was_ready)
{
    if (was_ready)
        log_warn("redis %s: connection lost: %s", c->name, c->why);
    else if (!c->down_logged)
        log_warn("redis %s: cannot connect to %s: %s (will retry)", c->name,
                 c->where, c->why);
    else
        log_debug("redis %s: connect to %s failed: %s", c->name, c->where, c->why);
    c->down_logged = 1;
}

/* The one path for every failure: give the link up, schedule the next
 * attempt, answer every pending command with why, then tell on_down. User
 * code in those callbacks may close the conn; then we stop at once (close
 * answered the rest with "closed"). */
static void conn_down(redis_conn *c, const char *why)
{
    if (c->closing) return;
    ALLOC_ASSERT(c->state != CONN_CLOSED);
    int was_ready = c->state == CONN_READY;
    snprintf(c->why, sizeof c->why, "%s", why);
    conn_drop_link(c);
    c->state = CONN_WAITING;
    c->stats.failures++;
    log_down(c, was_ready);
    schedule_reconnect(c);

    redis_cmd *cmd;
    while (!c->closing && (cmd = fifo_pop(c)))
        cmd_done(c, cmd, NULL, c->why);
    if (!c->closing && was_ready && c->cb.on_down)
        c->cb.on_down(c, c->why, c->data);
}

/* ---- replies ------------------------------------------------------------ */

/* EVAL in place of a refused EVALSHA: the same tail, a new head. */
static int eval_retry_resp(redis_conn *c, redis_cmd *cmd)
{
    size_t srclen = strlen(cmd->source);
    char *buf = malloc(64 + srclen + cmd->resp_tail_len);
    if (!buf) return -ENOMEM;
    size_t n = 0;
    buf[n++] = '*';
    n += numtext_u64(buf + n, (uint64_t)cmd->resp_ntail + 2);
    static const char eval_head[] = "\r\n$4\r\nEVAL\r\n$";
    memcpy(buf + n, eval_head, sizeof eval_head - 1);
    n += sizeof eval_head - 1;
    n += numtext_u64(buf + n, srclen);
    buf[n++] = '\r';
    buf[n++] = '\n';
    memcpy(buf + n, cmd->source, srclen);
    n += srclen;
    buf[n++] = '\r';
    buf[n++] = '\n';
    memcpy(buf + n, cmd->resp_tail, cmd->resp_tail_len);
    n += cmd->resp_tail_len;
    int rc = cmd_send(c, cmd, buf, (int)n);
    free(buf);
    return rc;
}

static int eval_retry(redis_conn *c, redis_cmd *cmd)
{
    cmd->retried = 1;
    if (cmd->resp_tail) return eval_retry_resp(c, cmd);
    cmd->av[0] = "EVAL";
    cmd->avlen[0] = 4;
    cmd->av[1] = cmd->source;
    cmd->avlen[1] = strlen(cmd->source);
    return cmd_send_argv(c, cmd, cmd->eval_argc, cmd->av, cmd->avlen);
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    redis_link *l = ac->data;
    if (l->detached) return;   /* already answered from our FIFO */
    redis_conn *c = l->owner;
    ALLOC_ASSERT(c->link == l);
    if (!r) {
        /* Only __redisAsyncFree passes NULL: hiredis lost the connection
         * and is freeing the context. */
        l->ac_gone = 1;
        conn_down(c, ac_error(ac, "connection lost"));
        return;
    }
    redis_cmd *cmd = fifo_pop(c);
    if (cmd != privdata) {
        /* Cannot happen while both lists stay in step; if it ever does,
         * the matching is lost and the only safe thing is to drop. */
        log_err("redis %s: reply out of step with the command list", c->name);
        if (cmd) cmd_done(c, cmd, NULL, "protocol error");
        conn_down(c, "protocol error");
        return;
    }
    if (cmd->source && !cmd->retried && is_error(r, "NOSCRIPT")) {
        /* Stays on the FIFO under a new deadline: still exactly once. */
        if (eval_retry(c, cmd) < 0) cmd_done(c, cmd, NULL, "out of memory");
        return;
    }
    cmd_done(c, cmd, r, NULL);
}

/* ---- public API --------------------------------------------------------- */

static void set_names(redis_conn *c, const char *name)
{
    snprintf(c->name, sizeof c->name, "%s", name && *name ? name : "allocd");
    /* CLIENT SETNAME accepts only '!'..'~'. */
    snprintf(c->client_name, sizeof c->client_name, "%s", c->name);
    for (char *p = c->client_name; *p; p++)
        if (*p < '!' || *p > '~') *p = '-';
    redis_target_describe(&c->target, c->where, sizeof c->where);
}

static int opt_or(int v, int dflt)
{
    return v > 0 ? v : dflt;
}

static int target_valid(const redis_target *t)
{
    if (t->kind == REDIS_TARGET_UNIX) return t->path[0] == '/';
    if (t->kind == REDIS_TARGET_TCP) return t->host[0] && t->port > 0 && t->port < 65536;
    return 0;
}

int redis_conn_init(redis_conn **out, uv_loop_t *loop, const redis_target *t,
                    const redis_conn_options *opt,
                    const redis_conn_callbacks *cb, void *data)
{
    if (!out || !loop || !t || !target_valid(t)) return -EINVAL;
    redis_conn *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    redis_conn_options o = { 0 };
    if (opt) o = *opt;
    c->loop = loop;
    c->target = *t;
    if (cb) c->cb = *cb;
    c->data = data;
    c->connect_timeout_ms = opt_or(o.connect_timeout_ms, DEFAULT_CONNECT_TIMEOUT_MS);
    c->backoff_min_ms = opt_or(o.backoff_min_ms, DEFAULT_BACKOFF_MIN_MS);
    c->backoff_max_ms = opt_or(o.backoff_max_ms, DEFAULT_BACKOFF_MAX_MS);
    if (c->backoff_max_ms < c->backoff_min_ms) c->backoff_max_ms = c->backoff_min_ms;
    c->backoff_ms = c->backoff_min_ms;
    c->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)c;
    if (!c->rng) c->rng = 0x9e3779b97f4a7c15ull;
    c->sorted = 1;
    set_names(c, o.name);
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->refs = 1;
    *out = c;
    conn_connect(c);
    return 0;
}

int redis_conn_retarget(redis_conn *c, const redis_target *t)
{
    if (!c || !t || !target_valid(t)) return -EINVAL;
    if (!memcmp(&c->target, t, sizeof *t)) return 0;
    c->target = *t;
    redis_target_describe(&c->target, c->where, sizeof c->where);
    /* A live link points at the old node: drop it (pending commands get
     * their error); the reconnect goes to the new one. */
    if (c->state != CONN_WAITING) conn_down(c, "moving to another node");
    return 0;
}

int redis_conn_is_ready(const redis_conn *c)
{
    return c && c->state == CONN_READY;
}

const redis_conn_stats *redis_conn_get_stats(const redis_conn *c)
{
    return &c->stats;
}

const char *redis_conn_name(const redis_conn *c)
{
    return c->name;
}

int redis_conn_commandargv(redis_conn *c, redis_reply_fn fn, void *privdata,
                           int timeout_ms, int argc, const char **argv,
                           const size_t *argvlen)
{
    if (!c || argc <= 0 || !argv) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    redis_cmd *cmd = cmd_new(0, fn, privdata, timeout_ms);
    if (!cmd) return -ENOMEM;
    int rc = cmd_send_argv(c, cmd, argc, argv, argvlen);
    if (rc < 0) free(cmd);
    return rc;
}

int redis_conn_command(redis_conn *c, redis_reply_fn fn, void *privdata,
                       int timeout_ms, const char *fmt, ...)
{
    if (!c || !fmt) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    char *buf;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&buf, fmt, ap);
    va_end(ap);
    if (len == -2) return -EINVAL;   /* bad format string */
    if (len < 0) return -ENOMEM;
    redis_cmd *cmd = cmd_new(0, fn, privdata, timeout_ms);
    int rc = cmd ? cmd_send(c, cmd, buf, len) : -ENOMEM;
    if (rc < 0) free(cmd);
    redisFreeCommand(buf);
    return rc;
}

void redis_script_init(redis_script *s, const char *source)
{
    s->source = source;
    sha1_hex(source, strlen(source), s->sha);
}

/* One allocation: the record, argc + 3 argument slots and lengths, the
 * nkeys digits and copies of the arguments, so the EVAL retry can be sent
 * after the caller's buffers are gone. The script source is not copied:
 * redis_script sources are expected to live as long as the program. */
static redis_cmd *eval_new(const redis_script *s, redis_reply_fn fn,
                           void *privdata, int timeout_ms, int nkeys, int argc,
                           const char **argv, const size_t *argvlen)
{
    size_t slots = (size_t)argc + 3, bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += argvlen ? argvlen[i] : strlen(argv[i]);
    size_t extra = slots * (sizeof(char *) + sizeof(size_t)) + 16 + bytes;
    redis_cmd *cmd = cmd_new(extra, fn, privdata, timeout_ms);
    if (!cmd) return NULL;
    cmd->av = (const char **)(cmd + 1);
    cmd->avlen = (size_t *)(cmd->av + slots);
    char *p = (char *)(cmd->avlen + slots);
    cmd->source = s->source;
    cmd->eval_argc = (int)slots;
    cmd->av[0] = "EVALSHA";
    cmd->avlen[0] = 7;
    cmd->av[1] = s->sha;
    cmd->avlen[1] = 40;
    cmd->avlen[2] = (size_t)snprintf(p, 16, "%d", nkeys);
    cmd->av[2] = p;
    p += 16;
    for (int i = 0; i < argc; i++) {
        size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
        if (n) memcpy(p, argv[i], n);
        cmd->av[3 + i] = p;
        cmd->avlen[3 + i] = n;
        p += n;
    }
    return cmd;
}

int redis_conn_eval(redis_conn *c, const redis_script *s, redis_reply_fn fn,
                    void *privdata, int timeout_ms, int nkeys, int argc,
                    const char **argv, const size_t *argvlen)
{
    if (!c || !s || !s->source || argc < 0 || nkeys < 0 || nkeys > argc ||
        (argc > 0 && !argv))
        return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    redis_cmd *cmd = eval_new(s, fn, privdata, timeout_ms, nkeys, argc, argv, argvlen);
    if (!cmd) return -ENOMEM;
    int rc = cmd_send_argv(c, cmd, cmd->eval_argc, cmd->av, cmd->avlen);
    if (rc < 0) free(cmd);
    return rc;
}

int redis_conn_command_resp(redis_conn *c, redis_reply_fn fn, void *privdata,
                            int timeout_ms, const char *resp, size_t len)
{
    if (!c || !resp || !len || len > INT32_MAX) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    redis_cmd *cmd = cmd_new(0, fn, privdata, timeout_ms);
    if (!cmd) return -ENOMEM;
    int rc = cmd_send(c, cmd, resp, (int)len);
    if (rc < 0) free(cmd);
    return rc;
}

int redis_conn_eval_resp(redis_conn *c, const redis_script *s, redis_reply_fn fn,
                         void *privdata, int timeout_ms, int ntail, char *buf,
                         size_t headroom, size_t tail_len)
{
    if (!c || !s || !s->source || ntail < 1 || !buf || headroom < REDIS_CONN_RESP_HEADROOM ||
        headroom + tail_len > INT32_MAX)
        return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    /* "*N\r\n$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n", right before the tail */
    char head[REDIS_CONN_RESP_HEADROOM];
    size_t n = 0;
    head[n++] = '*';
    n += numtext_u64(head + n, (uint64_t)ntail + 2);
    static const char sha_head[] = "\r\n$7\r\nEVALSHA\r\n$40\r\n";
    memcpy(head + n, sha_head, sizeof sha_head - 1);
    n += sizeof sha_head - 1;
    memcpy(head + n, s->sha, 40);
    n += 40;
    head[n++] = '\r';
    head[n++] = '\n';
    char *start = buf + headroom - n;
    memcpy(start, head, n);
    redis_cmd *cmd = cmd_new(0, fn, privdata, timeout_ms);
    if (!cmd) return -ENOMEM;
    cmd->source = s->source;
    cmd->resp_tail = buf + headroom;
    cmd->resp_tail_len = tail_len;
    cmd->resp_ntail = ntail;
    int rc = cmd_send(c, cmd, start, (int)(n + tail_len));
    if (rc < 0) free(cmd);
    return rc;
}

/* One reply collector per pipeline: every command of it carries this as
 * privdata; the user's callback runs when the last reply is in. */
typedef struct pipeline {
    redis_reply_fn fn;
    void *privdata;
    size_t left;             /* replies still to come */
    char err[200];           /* the first error, "" while none */
} pipeline;

static void on_pipeline_part(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    pipeline *p = priv;
    ALLOC_ASSERT(p->left > 0);   /* one reply per part, the last one frees p */
    if (!p->err[0]) {
        if (err) snprintf(p->err, sizeof p->err, "%s", err);
        else if (r && r->type == REDIS_REPLY_ERROR) snprintf(p->err, sizeof p->err, "%s", r->str);
    }
    if (--p->left > 0) return;
    if (p->err[0]) p->fn(c, NULL, p->err, p->privdata);
    else p->fn(c, r, NULL, p->privdata);
    free(p);
}

int redis_conn_pipeline(redis_conn *c, redis_reply_fn fn, void *privdata,
                        int timeout_ms, const redis_slice *cmds, size_t ncmds)
{
    if (!c || !fn || !cmds || !ncmds) return -EINVAL;
    for (size_t i = 0; i < ncmds; i++)
        if (!cmds[i].buf || !cmds[i].len || cmds[i].len > INT32_MAX) return -EINVAL;
    if (!redis_conn_is_ready(c)) return -ENOTCONN;
    /* Every record is allocated before anything is sent: a failure then
     * returns with nothing on the wire and no callback, as the rules say. */
    pipeline *p = calloc(1, sizeof *p);
    redis_cmd **rec = calloc(ncmds, sizeof *rec);
    int ok = p && rec;
    for (size_t i = 0; ok && i < ncmds; i++) ok = (rec[i] = cmd_new(0, on_pipeline_part, p, timeout_ms)) != NULL;
    if (!ok) {
        for (size_t i = 0; rec && i < ncmds; i++) free(rec[i]);
        free(rec);
        free(p);
        return -ENOMEM;
    }
    p->fn = fn;
    p->privdata = privdata;
    p->left = ncmds;
    size_t sent = 0;
    while (sent < ncmds && cmd_send(c, rec[sent], cmds[sent].buf, (int)cmds[sent].len) == 0) sent++;
    if (sent < ncmds) {
        /* hiredis 0.14 refuses a formatted command only while its context
         * is disconnecting or being freed, which cannot start in between
         * on this thread; should it anyway, the link goes, so a half-sent
         * MULTI never survives on it: the records sent get their error
         * callbacks, and the one callback comes with the last of them. */
        for (size_t i = sent; i < ncmds; i++) free(rec[i]);
        p->left = sent;
        if (sent == 0) { free(rec); free(p); return -ENOTCONN; }
        snprintf(p->err, sizeof p->err, "could not send the whole pipeline");
        free(rec);
        conn_down(c, "could not send a whole pipeline");
        return 0;
    }
    free(rec);
    return 0;
}

void redis_conn_flush(redis_conn *c)
{
    if (!c || c->state != CONN_READY || !c->link || c->link->detached || c->link->ac_gone) return;
    redisContext *rc = &c->link->ac->c;
    if (rc->err || !(rc->flags & REDIS_CONNECTED)) return;
    /* redisBufferWrite only writes and records an error in the context; it
     * frees nothing, so it is safe even inside a reply callback. The write
     * interest stays on: the next writable event writes the rest, or runs
     * into the recorded error and takes the usual disconnect path. */
    int done = 0;
    (void)redisBufferWrite(rc, &done);
}

void redis_conn_close(redis_conn *c, redis_close_fn close_cb, void *data)
{
    if (!c || c->closing) return;
    ALLOC_ASSERT(c->refs > 0);
    c->closing = 1;
    c->close_cb = close_cb;
    c->close_data = data;
    c->state = CONN_CLOSED;
    conn_drop_link(c);
    /* Answered now, while the caller is still inside redis_conn_close:
     * nothing of this conn runs after it returns except close_cb. */
    redis_cmd *cmd;
    while ((cmd = fifo_pop(c))) cmd_done(c, cmd, NULL, "closed");
    uv_close((uv_handle_t *)&c->timer, on_timer_close);
    log_info("redis %s: closed", c->name);
}
