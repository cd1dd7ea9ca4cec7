/* ctl_queue.h -- the queue-side operations of the contract, for tools on a
 * synchronous hiredis connection: pushing with the position transaction,
 * finding a request's ordinal in a live queue, and moving a dead entry
 * back to the queue atomically.
 *
 * These are the operations a producer or operator must get exactly right
 * (the position formula, races with the daemon popping and appending), so
 * they live in one place, allocctl's libctl.a, instead of in each command.
 * Every function returns -1 with a message in err on a Redis error.
 */
#ifndef ALLOCD_CTL_QUEUE_H
#define ALLOCD_CTL_QUEUE_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "worker/batch_keys.h"

#define CTL_QUEUE_PAGE 1000

/* MULTI; RPUSH queue req; HGET stats dequeued; EXEC. *ordinal = L + D,
 * the `seq` the result will carry. Returns 0 or -1. */
int ctl_push_ordinal(redisContext *c, const batch_keys *k, const char *req,
                     size_t len, int64_t *ordinal, char *err, size_t errlen);

/* Scans the queue in pages (each read in one MULTI with stats.dequeued, so
 * ordinals stay exact while the daemon pops) for the request with this id.
 * O(queue length); only elements containing the id are parsed. Returns 1
 * found (*ordinal set), 0 not queued, -1 error. */
int ctl_queue_find(redisContext *c, const batch_keys *k, const char *id,
                   int64_t *ordinal, char *err, size_t errlen);

/* 1 when the list at key holds the request with this id, 0 not, -1 error. */
int ctl_list_find(redisContext *c, const char *key, const char *id,
                  char *err, size_t errlen);

/* The exact request bytes of a dead entry: raw_base64 decoded when
 * present, else raw. malloc'd with *n set; NULL when there is none. */
char *ctl_dead_payload(const char *entry, size_t len, size_t *n);

/* Moves dead entry `index`, which must still be exactly expected[0..len),
 * back to the queue in one Lua script (tombstone + LREM of that index,
 * RPUSH, HGET dequeued). Returns 0 (*ordinal set), 1 when the entry
 * changed meanwhile or has no request (err says which), -1 error. */
int ctl_dead_requeue(redisContext *c, const batch_keys *k, int64_t index,
                     const char *expected, size_t len, int64_t *ordinal,
                     char *err, size_t errlen);
/* The same, pushing `edited` (elen bytes) instead of the entry's raw bytes. */
int ctl_dead_requeue_as(redisContext *c, const batch_keys *k, int64_t index,
                        const char *expected, size_t len, const char *edited, size_t elen,
                        int64_t *ordinal, char *err, size_t errlen);
/* Removes dead entry index if it still holds expected: 0, 1 when it
 * changed (err says so), -1 on a Redis error. */
int ctl_dead_delete(redisContext *c, const batch_keys *k, int64_t index,
                    const char *expected, size_t len, char *err, size_t errlen);

#endif
