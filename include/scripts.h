/* scripts.h -- the Lua scripts that make each step of a batch atomic.
 *
 * TAKE moves the next requests off the queue (or admin commands off ctl)
 * into the batch's processing list and advances stats.dequeued in the same
 * step, so the queue-position formula of the contract stays exact. It hands
 * back a non-empty processing list untouched instead: that is how a
 * restarted daemon finds the chunk it was deciding when it died.
 *
 * APPLY writes everything one chunk decided -- results, holders, free,
 * capacity, stats, log entries, dead entries, participants -- and deletes
 * the processing list, all in one script. Either the whole chunk is in
 * Redis or none of it is. It checks key types and the processing list
 * length before its first write, because a Lua script that fails half way
 * does not roll back.
 */
#ifndef ALLOCD_SCRIPTS_H
#define ALLOCD_SCRIPTS_H

#include "redis_conn.h"

/* Every script that writes batch state first checks the caller's lease
 * token and epoch (fencing) and answers "FENCED ..." without writing when
 * they are not current.
 *
 * KEYS: ctl, queue, ctlprocessing, processing, stats, lease, internal
 * ARGV: max, take_queue (0|1), token, epoch
 * Reply: {kind, ctl_items, queue_items, dequeued, queue_length_after};
 * kind "leftover" or "new". */
extern const char script_take_src[];

/* KEYS: results, holders, free, stats, log, dead, processing,
 *       ctlprocessing, participants, capacity, orders_ended, internal, early,
 *       lease
 * ARGV: processing_len (-1 = not a queue chunk), ctlprocessing_len (-1 =
 *       not a ctl chunk), log_maxlen, early_served_before (-1 = not a
 *       lottery chunk), delete_early (0|1), consume (requests removed from
 *       the head of the processing list: all of them, or 1 while a poison
 *       request is being isolated), token, epoch, then sections, each a count followed by its values:
 *       results (pairs), holders set (pairs), holders del (list),
 *       free (pairs), capacity (pairs), orders_ended (pairs), internal
 *       (pairs), participants (list), dead (list), log (entries: field
 *       count, then field/value pairs), stats (pairs). */
extern const char script_apply_src[];

enum {
    APPLY_KEY_RESULTS = 0, APPLY_KEY_HOLDERS, APPLY_KEY_FREE, APPLY_KEY_STATS,
    APPLY_KEY_LOG, APPLY_KEY_DEAD, APPLY_KEY_PROCESSING, APPLY_KEY_CTLPROCESSING,
    APPLY_KEY_PARTICIPANTS, APPLY_KEY_CAPACITY, APPLY_KEY_ORDERS_ENDED,
    APPLY_KEY_INTERNAL, APPLY_KEY_EARLY, APPLY_KEY_LEASE, APPLY_NKEYS
};

/* The early=shuffle lottery, run once the batch opens.
 * KEYS: queue, early, stats, internal, lease
 * ARGV: seed (decimal), token, epoch
 * The first run renames the whole queue to `early` (O(1): everything queued
 * before the opening, in push order) and advances dequeued by its length;
 * it records early_base (dequeued before), early_served = 0 and the seed in
 * internal. Later runs (after a restart) find that record.
 * Reply: {"done"} when the lottery is over, else
 *        {"pool", early_base, early_served, seed, items}. */
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

typedef struct allocd_scripts {
    redis_script take;
    redis_script apply;
    redis_script lottery;
    redis_script lease_acquire, lease_renew, lease_release;
    redis_script order_block;
} allocd_scripts;

void scripts_init(allocd_scripts *s);

#endif
