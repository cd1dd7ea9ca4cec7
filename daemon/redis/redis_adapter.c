/* redis_adapter.c -- hiredis' event hooks on a uv_poll_t (see
 * redis_adapter.h for why allocd has its own adapter).
 *
 * hiredis 0.14.1 rules this file keeps: hook_cleanup runs inside
 * __redisAsyncFree before the fd is closed, so the poll handle leaves epoll
 * there and the link is freed only in the poll's close callback (hiredis
 * still reads ac->data after cleanup); a context is never freed while one
 * of our redisAsyncHandle* calls for it is under way (in_handle), the free
 * is carried out on the way out instead (free_pending).
 */
#include "redis_adapter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/log.h"
#include "core/assert.h"

static void on_poll(uv_poll_t *h, int status, int events);

/* Only on a real change: hiredis asks for reads again after every read and
 * for writes after every command, and each uv_poll_start costs libuv two
 * epoll_ctl calls on the next loop turn (1.44 re-adds the watcher). */
static void link_set_events(redis_link *l, int events)
{
    if (events == l->events) return;
    l->events = events;
    if (l->poll_closing) return;
    if (l->events) uv_poll_start(&l->poll, l->events, on_poll);
    else uv_poll_stop(&l->poll);
}

static void hook_add_read(void *p)
{
    redis_link *l = p;
    link_set_events(l, l->events | UV_READABLE);
}

static void hook_del_read(void *p)
{
    redis_link *l = p;
    link_set_events(l, l->events & ~UV_READABLE);
}

static void hook_add_write(void *p)
{
    redis_link *l = p;
    link_set_events(l, l->events | UV_WRITABLE);
}

static void hook_del_write(void *p)
{
    redis_link *l = p;
    link_set_events(l, l->events & ~UV_WRITABLE);
}

static void on_poll_close(uv_handle_t *h)
{
    redis_link *l = h->data;
    ALLOC_ASSERT(l->ac_gone && l->in_handle == 0);
    void *owner = l->owner;
    const redis_adapter_callbacks *cb = l->cb;
    free(l);
    cb->on_freed(owner);
}

/* hiredis calls this from __redisAsyncFree, before closing the fd and
 * freeing the context: the poll handle must leave epoll before the fd goes
 * (uv_close removes it at once), and the link must outlive the rest of that
 * free (onDisconnect still reads ac->data), so it is freed in on_poll_close. */
static void hook_cleanup(void *p)
{
    redis_link *l = p;
    l->ac_gone = 1;
    if (l->poll_closing) return;   /* 0.14 calls it once; newer may repeat */
    l->poll_closing = 1;
    uv_close((uv_handle_t *)&l->poll, on_poll_close);
}

/* Free a context we gave up, from outside any hiredis call for it. Its
 * pending callbacks run with NULL and are ignored (the link is detached). */
static void link_free_ac(redis_link *l)
{
    l->free_pending = 0;
    redisAsyncFree(l->ac);
}

void redis_adapter_drop(redis_link *l)
{
    ALLOC_ASSERT(!l->detached);   /* dropped once: the owner forgets it */
    l->detached = 1;
    if (l->ac_gone) return;                 /* hiredis is freeing it already */
    if (l->in_handle) l->free_pending = 1;  /* inside hiredis: on the way out */
    else link_free_ac(l);
}

static const char *poll_error(redis_link *l, int status, char *buf, size_t len)
{
    int err = 0;
    socklen_t elen = sizeof err;
    if (getsockopt(l->ac->c.fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err)
        snprintf(buf, len, "%s", strerror(err));
    else
        snprintf(buf, len, "socket error (%s)", uv_strerror(status));
    return buf;
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    redis_link *l = h->data;
    redisAsyncContext *ac = l->ac;
    l->in_handle++;
    if (status < 0) {
        /* libuv 1.44: POLLERR arrives as UV_EBADF and the poll is stopped.
         * Let hiredis see the error: while connecting, HandleWrite reads
         * SO_ERROR and fails the connect; otherwise HandleRead gets the
         * read error. */
        log_debug("redis %s: poll: %s", l->name, uv_strerror(status));
        l->events = 0;
        if (ac->c.flags & REDIS_CONNECTED) redisAsyncHandleRead(ac);
        else redisAsyncHandleWrite(ac);
    } else {
        if (events & UV_READABLE) redisAsyncHandleRead(ac);
        if ((events & UV_WRITABLE) && !l->detached && !l->ac_gone)
            redisAsyncHandleWrite(ac);
    }
    l->in_handle--;
    ALLOC_ASSERT(l->in_handle >= 0);
    if (l->ac_gone) return;
    if (l->free_pending) {
        link_free_ac(l);
        return;
    }
    if (status < 0 && !l->detached) {
        /* The context survived a socket error and the poll is stopped:
         * nothing would ever wake it again. */
        char buf[160];
        l->cb->on_error(l, poll_error(l, status, buf, sizeof buf));
    }
}

redis_link *redis_adapter_attach(uv_loop_t *loop, redisAsyncContext *ac, const char *name,
                                 const redis_adapter_callbacks *cb, void *owner)
{
    redis_link *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    if (uv_poll_init(loop, &l->poll, ac->c.fd) != 0) {
        free(l);
        return NULL;
    }
    l->poll.data = l;
    l->owner = owner;
    l->name = name;
    l->cb = cb;
    l->ac = ac;
    ac->data = l;
    ac->ev.data = l;
    ac->ev.addRead = hook_add_read;
    ac->ev.delRead = hook_del_read;
    ac->ev.addWrite = hook_add_write;
    ac->ev.delWrite = hook_del_write;
    ac->ev.cleanup = hook_cleanup;
    return l;
}
