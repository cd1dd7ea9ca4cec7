/* redis_conn.h -- one Redis connection on the libuv loop, that survives.
 *
 * hiredis 0.14.1 ships a libuv adapter that ignores poll errors (a refused
 * connect then hangs forever) and has no timeouts. This module owns that
 * layer instead: its own adapter on uv_poll_t, a connect deadline and
 * per-command deadlines on one uv_timer_t, AUTH on connect, and automatic
 * reconnection with exponential backoff and jitter. A connection whose
 * command misses its deadline is torn down and reconnected: replies on one
 * connection arrive in order, so a late reply cannot be skipped safely.
 *
 * Callback rules, in the manner of libuv and h2o's redis wrapper:
 * - every command accepted (the call returned 0) gets exactly one reply
 *   callback: with the reply, or with reply == NULL and err set (timeout,
 *   connection lost, connection closed);
 * - a call that returns an error (negative errno) never calls its callback;
 * - a Redis error reply (REDIS_REPLY_ERROR) is a reply, not an err.
 *
 * Blocking commands (BLMOVE ...) must go on a connection of their own and
 * pass a deadline longer than their server-side timeout.
 */
#ifndef ALLOCD_REDIS_CONN_H
#define ALLOCD_REDIS_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <hiredis/hiredis.h>

#include "base/redis_url.h"

typedef struct redis_conn redis_conn;

typedef struct redis_conn_callbacks {
    /* Connected and authenticated: commands may be sent. */
    void (*on_ready)(redis_conn *c, void *data);
    /* Was ready, is not any more; a reconnect is scheduled. Every pending
     * command has had its callback (with err) before this is called. */
    void (*on_down)(redis_conn *c, const char *why, void *data);
} redis_conn_callbacks;

typedef struct redis_conn_options {
    const char *name;          /* for logs and CLIENT SETNAME; may be NULL */
    int connect_timeout_ms;    /* default 2000 */
    int backoff_min_ms;        /* default 100 */
    int backoff_max_ms;        /* default 5000 */
} redis_conn_options;

typedef void (*redis_reply_fn)(redis_conn *c, redisReply *reply,
                               const char *err, void *privdata);
typedef void (*redis_close_fn)(redis_conn *c, void *data);

typedef struct redis_conn_stats {
    uint64_t commands;         /* commands sent (EVAL after NOSCRIPT counts too) */
    uint64_t connects;         /* successful connects (the first one included) */
    uint64_t failures;         /* connects that failed or connections lost */
} redis_conn_stats;

/* Starts connecting at once. Returns 0 or -ENOMEM/-EINVAL. */
int redis_conn_init(redis_conn **out, uv_loop_t *loop, const redis_target *t,
                    const redis_conn_options *opt,
                    const redis_conn_callbacks *cb, void *data);
int redis_conn_is_ready(const redis_conn *c);
/* Points the connection at another server (a Redis Cluster node after a
 * MOVED). A live link is dropped like a lost connection: pending commands
 * get their error callback, on_down runs, and it reconnects to t. */
int redis_conn_retarget(redis_conn *c, const redis_target *t);
const redis_conn_stats *redis_conn_get_stats(const redis_conn *c);
const char *redis_conn_name(const redis_conn *c);

/* Send a command. timeout_ms <= 0 means the default deadline (5000 ms).
 * Returns 0, -ENOTCONN when not ready, -ENOMEM. */
int redis_conn_commandargv(redis_conn *c, redis_reply_fn fn, void *privdata,
                           int timeout_ms, int argc, const char **argv,
                           const size_t *argvlen);
int redis_conn_command(redis_conn *c, redis_reply_fn fn, void *privdata,
                       int timeout_ms, const char *fmt, ...);

/* A Lua script run with EVALSHA; the SHA1 is computed locally. */
typedef struct redis_script {
    const char *source;
    char sha[41];
} redis_script;

void redis_script_init(redis_script *s, const char *source);

/* EVALSHA sha nkeys args...; when Redis answers NOSCRIPT (after a restart or
 * SCRIPT FLUSH) the same call is resent as EVAL with the source, and fn gets
 * that reply. argv holds the keys then the arguments (argc of them). */
int redis_conn_eval(redis_conn *c, const redis_script *s, redis_reply_fn fn,
                    void *privdata, int timeout_ms, int nkeys, int argc,
                    const char **argv, const size_t *argvlen);

/* The same without formatting: for large commands built as RESP by the
 * caller (hiredis's argv formatting costs a snprintf per argument).
 * redis_conn_command_resp sends a complete RESP command.
 * redis_conn_eval_resp sends EVALSHA: buf holds `headroom` free bytes (at
 * least REDIS_CONN_RESP_HEADROOM), where the command and the SHA are
 * written, followed by `tail_len` bytes of RESP bulk strings (numkeys, the
 * keys, the arguments: ntail of them). buf must stay unchanged until the
 * callback, for the EVAL retry after NOSCRIPT. */
#define REDIS_CONN_RESP_HEADROOM 80
int redis_conn_command_resp(redis_conn *c, redis_reply_fn fn, void *privdata,
                            int timeout_ms, const char *resp, size_t len);
int redis_conn_eval_resp(redis_conn *c, const redis_script *s, redis_reply_fn fn,
                         void *privdata, int timeout_ms, int ntail, char *buf,
                         size_t headroom, size_t tail_len);

/* A pipeline of complete RESP commands sent back to back (a MULTI ... EXEC
 * transaction): hiredis copies each slice, so the caller's buffer may be
 * reused at once. fn runs once, after the last command's reply: with that
 * reply when every reply before it was a success, else with reply == NULL
 * and err = the first error (a Redis error reply or a lost connection).
 * Commands are matched to replies one by one, so every slice must hold
 * exactly one command. */
typedef struct redis_slice {
    const char *buf;
    size_t len;
} redis_slice;

int redis_conn_pipeline(redis_conn *c, redis_reply_fn fn, void *privdata,
                        int timeout_ms, const redis_slice *cmds, size_t ncmds);

/* Writes what is buffered for the socket now, as far as the socket takes
 * it, instead of on the loop's next writable event. For a caller about to
 * compute for a while: Redis can work on what was sent meanwhile. Never
 * calls a callback; a write error is noticed by the next event as usual. */
void redis_conn_flush(redis_conn *c);

/* Closes the connection: pending commands get their callback with err
 * "closed" (possibly before this returns), then close_cb (may be NULL) once
 * every handle is closed and the memory is freed. No other callback of the
 * connection runs after redis_conn_close() returns. */
void redis_conn_close(redis_conn *c, redis_close_fn close_cb, void *data);

#endif
