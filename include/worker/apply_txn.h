/* apply_txn.h -- encoding a decided chunk as its apply transaction.
 *
 * Everything a chunk changed is written in one MULTI/EXEC pipeline
 * (docs/DESIGN.md, "The apply transaction"):
 *
 *   WATCH <keys only allocd writes>
 *   EVAL FENCE <keys> token epoch chunks_applied fault
 *   MULTI
 *   HSET internal chunks_applied <n+1>          (small: see scripts.h, BUSY)
 *   HSET results <id> <result> ...
 *   HSET holders ... / HDEL holders ...         (dirty users)
 *   HSET free ... / HSET capacity ...           (dirty items)
 *   HSET orders_ended ...                       (tombstones)
 *   HSET internal admin_state / early_served / lottery_done
 *   RPUSH participants ...
 *   RPUSH early ..., HSET internal lottery_seed, HSET stats lottery_commit,
 *   HSET stats early_kept lottery_users / lottery_seed  (the lottery)
 *   RPUSH dead ...
 *   XADD log ...                                (one per event, or one per
 *                                                chunk with log_format chunk)
 *   LTRIM queue|ctl <n> -1
 *   HSET stats dequeued ... state ... owner ...
 *   EXEC
 *
 * With wait_replicas > 0 a chunk's effect is staged instead: its
 * transaction writes the commands above (everything between the
 * chunks_applied HSET and EXEC) as values of P:{B}:internal fields
 * staged.0, staged.1, ..., and the next transaction -- sent only after WAIT
 * confirmed that the replicas hold the staged copy -- runs those commands
 * and deletes the copy (apply_txn_encode_staged / _publish). A result, a
 * holder, free units, the log, the stats and the LTRIM with
 * stats.dequeued all become visible in that one step, so nothing a client
 * can read is lost by a failover to a replica WAIT counted; a load that
 * finds a staged copy publishes it first (batch_worker.c).
 *
 * Commands that would carry no field are left out. The encoding is a
 * function of the decided chunk (worker/decide.h), the engine's drained
 * changes and the small context below -- no clock, no socket, no worker --
 * so a test can pin the exact bytes (tests/unit/test_apply_txn.c, golden
 * files in tests/data/apply_txn).
 */
#ifndef ALLOCD_APPLY_TXN_H
#define ALLOCD_APPLY_TXN_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/engine_swap.h"
#include "redis/argbuf.h"
#include "worker/batch_keys.h"
#include "worker/chunk.h"
#include "worker/lottery_pool.h"

/* What the transaction needs besides the chunk and the engine. */
typedef struct apply_txn_ctx {
    const batch_keys *keys;
    const char *trip_key;         /* FENCE's trip key for our token */
    const char *fence_src;        /* FENCE's source: sent with EVAL, never EVALSHA */
    const char *token, *epoch;    /* the lease the worker holds */
    int64_t chunks_applied;       /* internal.chunks_applied this chunk builds on */
    int64_t dequeued;             /* stats.dequeued before this chunk */
    int64_t now;                  /* ms: when the chunk was decided */
    int first_apply;              /* first apply after a load: every item's free
                                     and the admin state are written */
    size_t pool_served, pool_n;   /* the lottery pool: served before this chunk, size */
    const lottery_pool *pool;     /* early=shuffle: its entries not yet written,
                                     the seed; NULL otherwise */
    int64_t log_maxlen;           /* XADD MAXLEN ~ n; 0 = unbounded */
    int log_chunk;                /* one log entry per chunk (wire/log_entry.h) */
    const char *archive_group;    /* "" or NULL: none; else log_maxlen trims only
                                     what this group acknowledged (log_trim.h) */
    const char *instance;         /* stats.owner */
    int64_t decision_p50_us, decision_p99_us; /* recent latency, for stats */
    const char *fault_apply_id;   /* tests: FENCE refuses a chunk with this id; NULL */
    const argbuf *immediate;      /* wait_replicas: commands written at once, not
                                     staged (apply_txn_encode_free); NULL */
    const int64_t *bad_profiles;  /* stats.bad_profiles (contract 11.2: users whose
                                     profile cannot be read); NULL = not written */
    int cluster;                  /* Redis Cluster: the body ends with EXISTS of
                                     FENCE's keys (txn_close) */
} apply_txn_ctx;

/* Writes the chunk's whole transaction into out (reset first), as one
 * argbuf command per Redis command (argbuf_slices gives them). ch must be
 * decided at ctx->now on e, and e's changes not drained yet. The caller
 * calls engine_drain_clear(e) as soon as this returns 0, before the send:
 * out then holds every change, the next chunk's drain must start empty,
 * and a send or apply that fails reloads the engine from Redis, so the
 * lists are never needed again. 0, or -ENOMEM. */
int apply_txn_encode(argbuf *out, const apply_txn_ctx *ctx, const chunk *ch, const engine *e);

/* The fields of P:{B}:internal that hold a staged effect: PREFIX0, 1, ... */
#define APPLY_TXN_STAGED_PREFIX "staged."
void apply_txn_staged_field(char *buf, size_t len, size_t i);

/* wait_replicas: the chunk's effect goes into `effect` (reset first; one
 * argbuf command each) and out gets the transaction that publishes
 * `staged` (the effect of the chunk staged before, or NULL) and stages
 * this one's. The same rules about the drain as apply_txn_encode. 0, or
 * -ENOMEM. */
int apply_txn_encode_staged(argbuf *out, argbuf *effect, const apply_txn_ctx *ctx, const argbuf *staged,
                            const chunk *ch, const engine *e);
/* HSET free of every item as the engine holds them now: with
 * wait_replicas, the first apply after a load writes free as loaded (as
 * the first apply always does) at once -- it is the published state, not
 * a decision -- while the chunk's own effect is staged. 0, or -ENOMEM. */
int apply_txn_encode_free(argbuf *out, const batch_keys *keys, const engine *e);
/* A transaction that only publishes `staged` (no chunk: an idle worker's
 * last staged chunk, or the one a load found). 0, or -ENOMEM. */
int apply_txn_encode_publish(argbuf *out, const apply_txn_ctx *ctx, const argbuf *staged);

#endif
