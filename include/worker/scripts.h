/* scripts.h -- the Lua scripts of allocd, and what each guarantees.
 *
 * Taking requests and applying a chunk need no script: the worker reads the
 * head of the queue with LRANGE (nothing moves), and the apply is a plain
 * MULTI/EXEC transaction that writes every effect of the chunk and LTRIMs
 * the decided requests off the queue, with stats.dequeued, in one atomic
 * step. Plain commands cost Redis a fraction of the same writes made from
 * Lua (no argument conversion into and out of the interpreter), and a
 * transaction is all-or-nothing as long as no command in it fails at run
 * time -- which FENCE (below) and WATCH make sure of. See docs/DESIGN.md,
 * "The apply transaction".
 */
#ifndef ALLOCD_SCRIPTS_H
#define ALLOCD_SCRIPTS_H

#include "redis/redis_conn.h"

/* FENCE runs between WATCH and MULTI in every apply pipeline:
 *
 *   WATCH <lease> <internal> <trip> <results> ...   (keys only allocd writes)
 *   EVAL FENCE ...
 *   MULTI ... EXEC
 *
 * It checks that the caller still holds the lease under its epoch, that the
 * chunks applied so far are the ones the caller built on (internal
 * chunks_applied, so an apply never lands after an earlier one failed),
 * and that every key the transaction writes has the type allocd needs (a
 * write to a key of another type would fail alone inside EXEC while the
 * rest, the LTRIM included, went through; a key the transaction does not
 * touch cannot break it, and checking only the written ones halves the
 * script's calls for a stock chunk). When anything is off it
 * writes the caller's own `trip` key, which the caller WATCHes: the EXEC
 * that follows is then refused as a whole, and the script's error reply
 * says why. Whatever changes after the check (a takeover SETs the lease, an
 * expiry deletes it) touches a watched key and aborts the EXEC the same way.
 *
 * KEYS: lease, internal, trip, results, holders, free, stats, log,
 *       participants, orders_ended, dead, capacity, early, queue, ctl,
 *       waitlist, groups
 * ARGV: token, epoch, chunks_applied expected, fault (1 = refuse, tests),
 *       written: one '0' or '1' per key, in KEYS order, '1' for each key a
 *       command of the transaction writes (apply_txn.c, fence_mark); without it
 *       the script trips
 * Reply: OK, or an error: FENCED, STALE, WRONGTYPE, FAULT, ERR fence.
 *
 * FENCE must run for the EXEC behind it to be guarded. It is sent with
 * EVAL (a NOSCRIPT answer would skip it), may write under OOM (allow-oom),
 * and trips on any error of its own checks. The one case it cannot cover
 * is a FENCE refused with BUSY -- someone else's script running past
 * busy-reply-threshold: the commands queued behind it are refused as well
 * (and EXEC answers EXECABORT) while Redis stays busy, but if the script
 * ends after Redis read FENCE and before it read the first queued command,
 * that EXEC runs unchecked. The first queued command is kept small so that
 * it usually arrives in the same read as FENCE. docs/DEPLOYMENT.md says
 * not to run long scripts on allocd's Redis. */
extern const char script_fence_src[];

enum {
    FENCE_KEY_LEASE = 0, FENCE_KEY_INTERNAL, FENCE_KEY_TRIP, FENCE_KEY_RESULTS,
    FENCE_KEY_HOLDERS, FENCE_KEY_FREE, FENCE_KEY_STATS, FENCE_KEY_LOG,
    FENCE_KEY_PARTICIPANTS, FENCE_KEY_ORDERS_ENDED, FENCE_KEY_DEAD, FENCE_KEY_CAPACITY,
    FENCE_KEY_EARLY, FENCE_KEY_QUEUE, FENCE_KEY_CTL,
    FENCE_KEY_WAITLIST,   /* type-checked; guarded by the lease like the rest */
    FENCE_KEY_GROUPS,     /* type-checked only: allocd alone writes it (9.2) */
    FENCE_NKEYS
};
/* The first FENCE_NWATCH keys are WATCHed: the ones nobody but allocd
 * writes (dead, capacity, early, queue and ctl are written by operators and
 * producers too; their types are checked but a push must not abort). */
#define FENCE_NWATCH (FENCE_KEY_ORDERS_ENDED + 1)

/* The early=shuffle lottery pool, read back after every load while the
 * lottery is not over (worker/lottery_pool.h).
 * KEYS: early, internal, lease
 * ARGV: token, epoch
 * Reply: {"done"} when the lottery is over, else
 *        {"pool", early_served, lottery_seed or "", entries of early}. */
extern const char script_lottery_src[];

/* Batch leases (docs/DESIGN.md, "Leases and fencing").
 * acquire: KEYS lease, internal; ARGV token, ttl_ms, dead_token. Reply
 *   {1, epoch} when the caller holds the lease (a new holder increments
 *   internal.epoch), or {0, pttl, holder} when another instance does. A
 *   lease still held by dead_token (a holder known to be dead) is taken
 *   over at once; fencing makes that safe even if it were not dead.
 * renew: KEYS lease; ARGV token, ttl_ms. 1 when still held, else 0.
 * release: KEYS lease; ARGV token. Compare-and-delete. */
extern const char script_lease_acquire_src[];
extern const char script_lease_renew_src[];
extern const char script_lease_release_src[];

/* A block of order-id counter values, and the deployment's permutation key.
 * KEYS: P:{allocd:orders}:counter, P:{allocd:orders}:key (one slot)
 * ARGV: a random key (hex; kept only if none exists yet), block size
 * Reply: {key_hex, counter_after_incr} */
extern const char script_order_block_src[];

/* Run at every load, before anything is read.
 * KEYS: participants, processing, queue, stats, ctlprocessing, ctl, trip
 * - An older allocd kept participants in a set: it becomes a list of the
 *   same members.
 * - An older allocd moved taken requests to `processing` (and admin
 *   commands to `ctlprocessing`) and advanced dequeued; what it left there
 *   goes back to the head of queue (ctl) in order, dequeued goes back by as
 *   many, so positions stay exact.
 * - The caller's trip key is deleted: it would otherwise expire while
 *   WATCHed and abort a healthy EXEC.
 * Reply: {participants converted (0|1), requests returned, commands returned} */
extern const char script_load_prepare_src[];

typedef struct allocd_scripts {
    redis_script fence;
    redis_script lottery;
    redis_script lease_acquire, lease_renew, lease_release;
    redis_script order_block;
    redis_script load_prepare;
} allocd_scripts;

void scripts_init(allocd_scripts *s);

#endif
