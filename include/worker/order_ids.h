/* order_ids.h -- a worker's supply of order ids: blocks of the global
 * counter.
 *
 * Order ids are minted in memory from a block of counter values drawn from
 * the one global counter (core/order_id.h), so a buy costs no round trip.
 * A block is drawn with the order-block script (worker/scripts.h) on the
 * node of the global keys, through the router -- whose connections outlive
 * the worker, so an answer still due holds the worker open (`outstanding`).
 * A block lasts sixteen chunks of buys at least: a refill stalls the
 * pipeline for a round trip. Ids left in a block when the worker stops are
 * simply never used.
 */
#ifndef ALLOCD_ORDER_IDS_H
#define ALLOCD_ORDER_IDS_H

#include <stdint.h>
#include <hiredis/hiredis.h>

#include "core/order_id.h"
#include "redis/redis_router.h"
#include "worker/batch_keys.h"

typedef struct order_ids {
    order_block block;        /* the engine mints from it (order_block_mint) */
    int outstanding;          /* block requests not answered yet */
    uint64_t chunk;           /* the worker's chunk size */
    char key_name[BATCH_KEY_MAX + 16], counter_name[BATCH_KEY_MAX + 16];
    char key_hex[40];         /* our proposal for the deployment's key */
} order_ids;

/* key_proposal: a random permutation key, kept by Redis only if the
 * deployment has none yet. */
void order_ids_init(order_ids *o, const char *prefix, uint64_t chunk, uint64_t key_proposal);
/* Counter values to draw when `need` ids are needed now. */
uint64_t order_ids_block_size(const order_ids *o, uint64_t need);
/* Asks for a block that covers `need` ids; fn gets the reply. 0 or the
 * router's error (then no callback). */
int order_ids_request(order_ids *o, redis_router *router, const redis_script *script,
                      int timeout_ms, uint64_t need, redis_reply_fn fn, void *priv);
/* The script's reply {key_hex, counter_after} to a request for `need`:
 * the new block. 0, or -EPROTO for an unexpected reply. */
int order_ids_take(order_ids *o, const redisReply *r, uint64_t need);

#endif
