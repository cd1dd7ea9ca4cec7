/* batch_worker_int.h -- the batch worker's insides, shared by its phases.
 *
 * One worker is split by phase so that each file can be read alone:
 * batch_worker.c is the state machine (failure, load, idle waits, the
 * lease, the watchdog, start and stop, and the dispatch of replies),
 * batch_take.c reads the next chunk (take, read-ahead, the selection
 * slots, the lottery pool, the dedup lookups), batch_apply.c decides it
 * and writes it (order ids, the apply transaction and its reply), and
 * batch_replicas.c holds what wait_replicas adds (WAIT, staging and
 * publishing, the stall). Only the worker's own files include this header; the
 * functions it declares are private to them (the `batch__` prefix, like
 * libuv's `uv__`).
 */
#ifndef ALLOCD_BATCH_WORKER_INT_H
#define ALLOCD_BATCH_WORKER_INT_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "core/engine.h"
#include "core/metrics_hist.h"
#include "redis/argbuf.h"
#include "redis/redis_conn.h"
#include "worker/batch_keys.h"
#include "worker/batch_lease.h"
#include "worker/batch_load.h"
#include "worker/batch_watch.h"
#include "worker/apply_txn.h"
#include "worker/batch_worker.h"
#include "worker/chunk.h"
#include "worker/dedup.h"
#include "worker/lottery_pool.h"
#include "worker/order_ids.h"
#include "worker/profiles_scan.h"
#include "worker/profiles_watch.h"
#include "worker/slots_scan.h"

typedef enum {
    W_CONNECTING, W_ACQUIRING, W_LOADING, W_IDLE, W_SERVING, W_LOTTERY,
    W_BACKOFF, W_RELEASING, W_CLOSING
} worker_state;

/* A command in flight, as the privdata of its reply. `gen` is the worker's
 * generation when it was sent: batch__fail() starts a new one, and a reply
 * from an older generation is dropped (its chunk was thrown away). The
 * first four kinds name their step in batch__fail's message. */
typedef enum {
    WOP_TAKE, WOP_DEDUP, WOP_ORDERS, WOP_APPLY, WOP_LOAD_ORDERS, WOP_SLOTS, WOP_REPLICAS,
    WOP_LOAD_WAIT, WOP_LOAD_PUBLISH, WOP_PROFILES
} worker_op_kind;
#define WOP_LAST WOP_PROFILES
#define MAX_OPS 64

typedef struct worker_op {
    batch_worker *w;
    chunk *ch;
    uint64_t gen, take_gen;
    worker_op_kind kind;
    int busy;
} worker_op;

/* Requests decided between two flushes of the command connection. */
#define DECIDE_SLICE 64

struct batch_worker {
    uv_loop_t *loop;
    const allocd_config *cfg;
    const allocd_scripts *scripts;
    redis_router *router;
    redis_target target;      /* the node serving the batch's slot */
    char batch[BATCH_ID_MAX + 1];
    batch_keys keys;
    char trip_key[BATCH_KEY_MAX + 160];    /* FENCE's trip key for our token (set at load) */
    redis_conn *cmd, *reads, *wait_queue, *wait_ctl;
    redis_conn *watch_conn;   /* the WATCH on P:{B}:profiles (profiles_watch.h) */
    batch_lease lease;
    char lease_holder_seen[128]; /* logged once per holder while waiting */
    worker_state state;
    int stopping;
    int handles_open;
    int attempts;             /* failures since the last success: the backoff */
    batch_worker_stopped_fn on_stopped;
    void *data;
    uv_timer_t timer;

    /* loaded state */
    batch_load load;
    engine *eng;
    order_ids orders;
    int first_apply;          /* rewrite all of free and stats on the next apply */
    engine_phase written_phase;
    int lottery_done;
    lottery_pool pool;

    /* the pipeline: chunks in flight, oldest first */
    chunk_ring ring;
    worker_op ops[MAX_OPS];
    uint64_t gen;             /* a new one per failure: older replies are dropped */
    int takes_out;            /* takes not answered yet (read ahead: several) */
    uint64_t take_gen;        /* takes sent before a change are dropped */
    int dedups_out;           /* dedup HMGETs not answered yet */
    int64_t dequeued;         /* stats.dequeued once every apply sent is in */
    slots_scan slots;         /* P:{B}:slots read again in pages (slots_refresh) */
    slots_scan profiles;      /* P:{B}:profiles likewise (profiles_scan.h) */
    profiles_report profiles_report;
    profiles_watch profiles_watch;   /* when to read the profiles again */
    int64_t chunks_applied;   /* internal.chunks_applied, likewise */
    long queue_unsent, ctl_unsent; /* entries taken whose apply is not sent */
    dedup dedup;
    argbuf args;              /* the apply pipeline being built or waiting */
    argbuf reads_args;        /* a take or a dedup: built and sent at once */

    /* poison requests (see isolating) */
    int apply_failures;       /* consecutive failed applies */
    long isolate_left;        /* requests to go one at a time before trusting chunks */
    int last_take_full;       /* the last take came back with a full chunk of queue requests */
    char apply_error[160];
    /* the request alone in the last chunk refused while isolating: the
     * only one dead-lettering may send to dead (its list and id) */
    chunk_kind suspect_kind;
    char suspect_id[ENGINE_ID_MAX + 1];
    const char *fault_apply_id; /* ALLOCD_FAULT_APPLY_ID, for tests */

    int wait_queue_pending, wait_ctl_pending;
    metrics_hist recent, recent_prev;      /* latency of the last ~10 s, for stats */
    uint64_t recent_started;
    batch_worker_stats stats;

    /* every request answered (batch_watch.h) */
    batch_watch watch;
    int lease_wait;           /* backing off because another instance holds the lease */
    int64_t load_after_watch; /* mono ms the load began waiting for the profiles' WATCH; 0: not */
    int gave_up;              /* stopped because it could not serve */
    char last_failure[200];   /* the last step that failed, for the give-up's log line */
    /* wait_replicas: one apply at a time, each after a WAIT (replicas_wait);
     * each stages its chunk's effect and publishes the one staged before
     * (apply_txn.h) */
    int replicas_out, replicas_acked;
    int replicas_retry;       /* a WAIT came back short: the timer asks again */
    int replicas_seen;        /* the most replicas one WAIT on replicas_of counted:
                                 each WAIT asks for all of them */
    redis_target replicas_of; /* the master replicas_seen is about */
    int64_t replica_missing_since; /* mono ms; 0: none of them missing */
    argbuf effect;            /* the effect of the chunk being encoded */
    argbuf staged;            /* the effect staged in Redis, not yet published */
    argbuf loaded_free;       /* free as loaded, for the first apply (apply_txn_encode_free) */
    int64_t stalled_since, stall_logged_at; /* mono ms; 0: not stalled */
};

/* batch_worker.c: the state machine */
void batch__set_state(batch_worker *w, worker_state to);
const char *batch__reply_error(redisReply *r, const char *err);
worker_op *batch__op_new(batch_worker *w, worker_op_kind kind, chunk *ch);
void batch__chunks_gc(batch_worker *w);
void batch__fail(batch_worker *w, const char *what, const char *why);
int batch__lease_check(batch_worker *w, const char *step);
void batch__go_idle(batch_worker *w);
void batch__finish(batch_worker *w);
void batch__on_op_reply(redis_conn *c, redisReply *r, const char *err, void *priv);
void batch__load_start(batch_worker *w);

/* batch_take.c: the next chunk, up to its dedup */
int batch__take_queue_now(const batch_worker *w, int64_t now);
int batch__isolating(const batch_worker *w);
size_t batch__ids_needed(batch_worker *w, const chunk *ch);
void batch__take_start(batch_worker *w);
/* The profiles' read its WATCH asks for, begun while no take is (idle,
 * paused): batch_take.c. */
void batch__profiles_refresh(batch_worker *w, int64_t now);
void batch__on_take(batch_worker *w, chunk *ch, redisReply *r);
void batch__on_slots(worker_op *o, redisReply *r, const char *err);
void batch__on_dedup(batch_worker *w, chunk *ch, redisReply *r);
void batch__lottery_start(batch_worker *w);

/* batch_apply.c: decide and apply */
void batch__txn_ctx(batch_worker *w, apply_txn_ctx *ctx, int64_t now);
const char *batch__exec_error(redisReply *r);
int batch__send_args(batch_worker *w, worker_op_kind kind, chunk *ch, const char *what);
void batch__advance(batch_worker *w);
void batch__on_orders(batch_worker *w, chunk *ch, redisReply *r);

/* batch_replicas.c: wait_replicas > 0 -- WAIT, stage, publish, stall */
int batch__replicas_wait(batch_worker *w);
void batch__on_replicas(batch_worker *w, redisReply *r);
chunk *batch__staged_chunk(batch_worker *w);
void batch__staged_sent(batch_worker *w, const chunk *ch);
void batch__staged_applied(batch_worker *w, chunk *ch);
void batch__publish_chunk(batch_worker *w);
void batch__load_publish(batch_worker *w);
void batch__on_load_publish(worker_op *o, redisReply *r, const char *err);
void batch__on_applied(batch_worker *w, chunk *ch, redisReply *r);
/* ch's apply failed with why (before batch__fail): where the poison is,
 * when it was a refusal that counts (batch__redis_refused). */
void batch__note_suspect(batch_worker *w, const chunk *ch, const char *why);
/* why is Redis refusing the transaction, and maybe for the request's sake
 * (not a lost link, not the server's state): it counts towards
 * max_attempts. */
int batch__redis_refused(const char *why);

#endif
