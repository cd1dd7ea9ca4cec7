/* batch_replicas.c -- a batch worker with wait_replicas > 0: nothing a
 * client can read is written before the replicas hold it.
 *
 * Every apply waits for `WAIT n` to confirm that n replicas hold every
 * write before it, and only one apply is in flight. The apply of a chunk
 * does not write its effect where clients read: it stages it (a copy in
 * P:{B}:internal, apply_txn.h), and the next apply -- after its WAIT --
 * publishes it and stages its own chunk in the same transaction. So a
 * result, a holder or free units become visible only once a replica that
 * a failover would promote holds them; a failover to it finds the staged
 * copy at most, which the next load publishes before anything else
 * (batch__load_publish), with the same bytes. A chunk whose effect is
 * staged stays in the ring (CS_STAGED): its ids are in flight for dedup
 * until it is published. An idle worker publishes the last one with a
 * publish-only chunk.
 *
 * WAIT counts replicas, not which ones: after Sentinel promoted one of
 * two, the other still acknowledges the old master's writes until it is
 * moved to the new one, and drops them then. So each WAIT asks for every
 * replica the master has had (the most one WAIT counted, never fewer than
 * wait_replicas): a replica that leaves stalls the batch until Sentinel
 * names the new master, or -- one that is simply gone -- until
 * replica_forget_ms have passed.
 *
 * Replicas that do not acknowledge hold the batch by design (with
 * wait_replicas = 2 and one replica lost): the worker keeps asking, says
 * so in the log once and then every STALL_LOG_EVERY_MS, and in its stats
 * (`stalled`, shown by the dashboard), and its watchdog lets the batch go
 * when it cannot answer (contract 9.6). Nothing is reloaded meanwhile.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "core/assert.h"
#include "worker/apply_txn.h"
#include "batch_worker_int.h"

#define STALL_LOG_EVERY_MS 30000
#define STALL_RETRY_MS 200

chunk *batch__staged_chunk(batch_worker *w)
{
    for (size_t i = 0; i < w->ring.n; i++) {
        chunk *ch = chunk_ring_at(&w->ring, i);
        if (ch->state == CS_STAGED) return ch;
    }
    return NULL;
}

/* The apply of ch is sent: what Redis will hold once it is in is ch's
 * effect staged (or nothing staged, after a publish-only chunk). */
void batch__staged_sent(batch_worker *w, const chunk *ch)
{
    if (ch->publish_only) {
        argbuf_reset(&w->staged);
        return;
    }
    argbuf t = w->staged;
    w->staged = w->effect;
    w->effect = t;
}

/* The apply of ch is in: the chunk staged before is published (DONE),
 * and ch is staged in its place. */
void batch__staged_applied(batch_worker *w, chunk *ch)
{
    chunk *prev = batch__staged_chunk(w);
    if (prev) prev->state = CS_DONE;
    ch->state = ch->publish_only ? CS_DONE : CS_STAGED;
    ALLOC_ASSERT((batch__staged_chunk(w) != NULL) == (w->staged.ncmds > 0));
}

/* Nothing else to do: a chunk of no requests that publishes the staged one. */
void batch__publish_chunk(batch_worker *w)
{
    ALLOC_ASSERT(batch__staged_chunk(w) != NULL);
    chunk *ch = chunk_ring_push(&w->ring, CHUNK_NONE);
    if (!ch) { batch__fail(w, "apply", "no free chunk"); return; }
    ch->publish_only = 1;
    ch->state = CS_DEDUPED;
    batch__advance(w);
}

/* ------------------------------------------------------------ replicas -- */

/* How many replicas the next WAIT asks for: every one the current master
 * has had, at least wait_replicas. A new master starts from nothing. */
static int replicas_wanted(batch_worker *w)
{
    if (memcmp(&w->replicas_of, &w->target, sizeof w->target)) {
        w->replicas_of = w->target;
        w->replicas_seen = 0;
        w->replica_missing_since = 0;
    }
    return w->replicas_seen > w->cfg->wait_replicas ? w->replicas_seen : w->cfg->wait_replicas;
}

/* WAIT counted `acked` replicas: 1 when that is enough to go on. Fewer
 * than the master has had but at least wait_replicas holds the batch
 * for replica_forget_ms, then the missing ones are forgotten. */
static int replicas_enough(batch_worker *w, long long acked)
{
    int wanted = replicas_wanted(w);
    if (acked > w->replicas_seen) w->replicas_seen = acked > 64 ? 64 : (int)acked;
    if (acked >= wanted) { w->replica_missing_since = 0; return 1; }
    if (acked < w->cfg->wait_replicas) return 0;
    int64_t now = clock_mono_ms();
    if (!w->replica_missing_since) {
        w->replica_missing_since = now;
        log_notice("batch %s: %lld of the master's %d replicas acknowledge: nothing is published until "
                   "the others do, Sentinel names another master, or replica_forget_ms (%d) pass",
                   w->batch, acked, wanted, w->cfg->replica_forget_ms);
    }
    if (now - w->replica_missing_since < w->cfg->replica_forget_ms) return 0;
    log_warn("batch %s: %d of the master's replicas did not acknowledge for %" PRId64 " ms: "
             "going on with the %lld that do", w->batch, wanted - (int)acked, now - w->replica_missing_since, acked);
    w->replicas_seen = (int)acked;
    w->replica_missing_since = 0;
    return 1;
}

/* ---------------------------------------------------------------- stall -- */

static void on_timer_replicas(uv_timer_t *t)
{
    batch_worker *w = t->data;
    w->replicas_retry = 0;
    if (w->state == W_SERVING) batch__advance(w);
    else if (w->state == W_LOADING && w->load.staged.ncmds) batch__load_publish(w);
}

/* The replicas did not all acknowledge: held by design. Says why (once,
 * then every STALL_LOG_EVERY_MS) and asks again shortly. */
static void stalled(batch_worker *w, long long acked)
{
    int64_t now = clock_mono_ms();
    int wanted = replicas_wanted(w);
    if (wanted > w->cfg->wait_replicas)
        snprintf(w->stats.stalled, sizeof w->stats.stalled,
                 "waiting for replicas: %lld of the master's %d acknowledge (wait_replicas = %d)", acked, wanted,
                 w->cfg->wait_replicas);
    else
        snprintf(w->stats.stalled, sizeof w->stats.stalled,
                 "waiting for replicas: %lld of wait_replicas = %d acknowledge", acked, w->cfg->wait_replicas);
    snprintf(w->last_failure, sizeof w->last_failure, "%s", w->stats.stalled);
    if (!w->stalled_since) w->stalled_since = now;
    if (!w->stall_logged_at || now - w->stall_logged_at >= STALL_LOG_EVERY_MS) {
        log_warn("batch %s: stalled for %" PRId64 " ms, %s; nothing is applied until they do "
                 "(docs/DEPLOYMENT.md, wait_replicas)", w->batch, now - w->stalled_since, w->stats.stalled);
        w->stall_logged_at = now;
    }
    w->replicas_retry = 1;
    uv_timer_start(&w->timer, on_timer_replicas, STALL_RETRY_MS, 0);
}

static void unstalled(batch_worker *w)
{
    if (!w->stalled_since) return;
    log_notice("batch %s: the replicas acknowledge again after %" PRId64 " ms stalled", w->batch,
               clock_mono_ms() - w->stalled_since);
    w->stalled_since = w->stall_logged_at = 0;
    w->stats.stalled[0] = '\0';
}

/* `WAIT n timeout` on the command connection, for op kind `kind`. */
static int send_wait(batch_worker *w, worker_op_kind kind)
{
    char n[16], ms[16];
    snprintf(n, sizeof n, "%d", replicas_wanted(w));
    snprintf(ms, sizeof ms, "%d", w->cfg->redis_timeout_ms / 2);
    const char *argv[] = { "WAIT", n, ms };
    worker_op *o = batch__op_new(w, kind, NULL);
    if (!o) return -ENOMEM;
    if (redis_conn_commandargv(w->cmd, batch__on_op_reply, o, w->cfg->redis_timeout_ms, 3, argv, NULL) < 0) {
        o->busy = 0;
        return -ENOTCONN;
    }
    return 0;
}

/* ------------------------------------------------------------ serving -- */

/* No apply is sent before `WAIT n` confirmed that n replicas hold every
 * write before it, and only one apply is in flight. 1 while the apply
 * must wait. */
int batch__replicas_wait(batch_worker *w)
{
    for (size_t i = 0; i < w->ring.n; i++)
        if (chunk_ring_at(&w->ring, i)->state == CS_APPLYING) return 1;
    if (w->replicas_acked) { w->replicas_acked = 0; return 0; }
    if (w->replicas_out || w->replicas_retry) return 1;
    int rc = send_wait(w, WOP_REPLICAS);
    if (rc < 0) {
        batch__fail(w, "wait for replicas", rc == -ENOMEM ? "too many commands in flight" : "Redis not connected");
        return 1;
    }
    w->replicas_out = 1;
    return 1;
}

void batch__on_replicas(batch_worker *w, redisReply *r)
{
    w->replicas_out = 0;
    if (r->type != REDIS_REPLY_INTEGER) { batch__fail(w, "wait for replicas", "unexpected reply"); return; }
    if (!replicas_enough(w, r->integer)) { stalled(w, r->integer); return; }
    unstalled(w);
    w->replicas_acked = 1;
    batch__advance(w);
}

/* ---------------------------------------------------------------- load -- */

static void load_publish_send(batch_worker *w)
{
    apply_txn_ctx ctx;
    batch__txn_ctx(w, &ctx, clock_wall_ms());
    ctx.chunks_applied = w->load.chunks_applied;
    ctx.fault_apply_id = NULL;
    if (apply_txn_encode_publish(&w->args, &ctx, &w->load.staged) < 0) {
        batch__fail(w, "loading", "out of memory");
        return;
    }
    batch__send_args(w, WOP_LOAD_PUBLISH, NULL, "loading");
}

/* The load found a chunk's effect staged (batch_load.h): it may have been
 * published on a master that is gone, so it is published here -- after a
 * WAIT when wait_replicas asks for one -- and the batch is loaded again. */
void batch__load_publish(batch_worker *w)
{
    if (batch__lease_check(w, "loading") < 0) return;
    if (w->cfg->wait_replicas <= 0) { load_publish_send(w); return; }
    int rc = send_wait(w, WOP_LOAD_WAIT);
    if (rc < 0) batch__fail(w, "loading", rc == -ENOMEM ? "too many commands in flight" : "Redis not connected");
}

void batch__on_load_publish(worker_op *o, redisReply *r, const char *err)
{
    batch_worker *w = o->w;
    o->busy = 0;
    if (o->gen != w->gen || w->state != W_LOADING) return;
    const char *e = batch__reply_error(r, err);
    if (!e && o->kind == WOP_LOAD_PUBLISH) e = batch__exec_error(r);
    if (e) { batch__fail(w, "publishing the staged chunk", e); return; }
    if (o->kind == WOP_LOAD_WAIT) {
        if (r->type != REDIS_REPLY_INTEGER) { batch__fail(w, "loading", "unexpected reply to WAIT"); return; }
        if (!replicas_enough(w, r->integer)) { stalled(w, r->integer); return; }
        unstalled(w);
        load_publish_send(w);
        return;
    }
    log_notice("batch %s: published the chunk a previous run staged (%zu commands)", w->batch,
               w->load.staged.ncmds);
    batch__load_start(w);
}
