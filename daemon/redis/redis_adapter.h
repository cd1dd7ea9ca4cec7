/* redis_adapter.h -- hiredis on libuv: one async context's socket on a
 * uv_poll_t (private to daemon/redis, used by redis_conn.c).
 *
 * hiredis 0.14.1 ships a libuv adapter, but with libuv 1.44 a socket error
 * (POLLERR, e.g. a refused TCP connect) reaches its poll callback as
 * UV_EBADF with the poll already stopped and it just returns: the context
 * hangs forever. This adapter hands such an error to hiredis (and to its
 * owner when the context survives it), asks libuv for a change of events
 * only when there is one, and never frees a context from inside a hiredis
 * call for it. Timeouts are the owner's (redis_conn's timer).
 *
 * A redis_link lives as long as its context: the owner attaches one to a
 * fresh context, drops it when giving it up, and hears on_freed once the
 * link's memory is gone (the uv_poll_t closed after hiredis freed the
 * context). Once dropped (detached), the owner ignores every hiredis
 * callback for it.
 */
#ifndef ALLOCD_REDIS_ADAPTER_H
#define ALLOCD_REDIS_ADAPTER_H

#include <hiredis/async.h>
#include <uv.h>

typedef struct redis_link redis_link;

typedef struct redis_adapter_callbacks {
    /* The context survived a socket error with the poll stopped: nothing
     * would wake it again, so the owner must drop the link. */
    void (*on_error)(redis_link *l, const char *why);
    /* The link is freed (after redis_adapter_drop or hiredis' own free). */
    void (*on_freed)(void *owner);
} redis_adapter_callbacks;

struct redis_link {
    void *owner;
    const char *name;        /* the owner's, for logs; outlives the link */
    const redis_adapter_callbacks *cb;
    redisAsyncContext *ac;
    uv_poll_t poll;
    int events;              /* UV_READABLE | UV_WRITABLE wanted by hiredis */
    int in_handle;           /* depth of our redisAsyncHandle* calls */
    unsigned detached : 1;   /* given up by the owner: ignore its callbacks */
    unsigned ac_gone : 1;    /* hiredis is freeing (or has freed) ac */
    unsigned free_pending : 1; /* free ac once in_handle is back to 0 */
    unsigned poll_closing : 1;
};

/* Hooks ac's events to a new uv_poll_t on its fd. Returns NULL when out of
 * memory or the poll cannot be made (ac is left to the caller). */
redis_link *redis_adapter_attach(uv_loop_t *loop, redisAsyncContext *ac, const char *name,
                                 const redis_adapter_callbacks *cb, void *owner);
/* The owner gives the link up: the context is freed now, or on the way out
 * of the hiredis call under way; its pending callbacks run with NULL. */
void redis_adapter_drop(redis_link *l);

#endif
