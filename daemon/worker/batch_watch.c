/* batch_watch.c -- see batch_watch.h. */
#include "worker/batch_watch.h"

#include <string.h>

#include "base/clock.h"
#include "core/numtext.h"
#include "redis/argbuf.h"

int batch_watch_tick_ms(int answer_ms)
{
    int t = answer_ms / 10;
    return t < 100 ? 100 : t > 1000 ? 1000 : t;
}

/* EXEC's reply: {dequeued or nil, queue length, ctl length}. A reply of
 * another shape (a key of the wrong type) is ignored: the worker's own
 * steps report that. */
static void on_probe(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    batch_watch *bw = priv;
    bw->probe_pending = 0;
    if (bw->closing || err || !r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) return;
    redisReply *d = r->element[0], *q = r->element[1], *k = r->element[2];
    int64_t dequeued = 0;
    if (d->type == REDIS_REPLY_STRING && numtext_parse_i64(d->str, &dequeued) < 0) return;
    if (d->type != REDIS_REPLY_STRING && d->type != REDIS_REPLY_NIL) return;
    if (q->type != REDIS_REPLY_INTEGER || k->type != REDIS_REPLY_INTEGER || dequeued < 0) return;
    answer_watch_probe(&bw->aw, bw->probe_sent_ms, dequeued, q->integer, k->integer);
}

static void probe(batch_watch *bw, redis_conn *c)
{
    argbuf a;
    argbuf_init(&a);
    const char *cmds[][3] = {
        { "MULTI", NULL, NULL }, { "HGET", bw->keys->stats, "dequeued" },
        { "LLEN", bw->keys->queue, NULL }, { "LLEN", bw->keys->ctl, NULL }, { "EXEC", NULL, NULL },
    };
    for (size_t i = 0; i < 5; i++) {
        argbuf_cmd_begin(&a);
        for (size_t j = 0; j < 3 && cmds[i][j]; j++) argbuf_str(&a, cmds[i][j]);
        argbuf_cmd_end(&a);
    }
    redis_slice slices[5];
    if (!argbuf_failed(&a) && argbuf_slices(&a, slices, 5) == 5) {
        bw->probe_sent_ms = clock_mono_ms();
        if (redis_conn_pipeline(c, on_probe, bw, bw->timeout_ms, slices, 5) == 0) bw->probe_pending = 1;
    }
    argbuf_free(&a);
}

static void on_tick(uv_timer_t *t)
{
    batch_watch *bw = t->data;
    redis_conn *c = bw->cb->probe_conn(bw->data);
    if (c && !bw->probe_pending && redis_conn_is_ready(c)) probe(bw, c);
    bw->cb->check(bw->data, clock_mono_ms());
}

void batch_watch_init(batch_watch *bw, uv_loop_t *loop, const batch_keys *keys,
                      int answer_ms, int timeout_ms,
                      const batch_watch_callbacks *cb, void *data)
{
    memset(bw, 0, sizeof *bw);
    bw->keys = keys;
    bw->timeout_ms = timeout_ms;
    bw->cb = cb;
    bw->data = data;
    answer_watch_init(&bw->aw, clock_mono_ms());
    uv_timer_init(loop, &bw->timer);
    bw->timer.data = bw;
    int every = batch_watch_tick_ms(answer_ms);
    uv_timer_start(&bw->timer, on_tick, (uint64_t)every, (uint64_t)every);
}

void batch_watch_close(batch_watch *bw, uv_close_cb done)
{
    bw->closing = 1;
    uv_timer_stop(&bw->timer);
    uv_close((uv_handle_t *)&bw->timer, done);
}
