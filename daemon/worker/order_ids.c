/* order_ids.c -- a worker's supply of order ids (see order_ids.h). */
#include "worker/order_ids.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numtext.h"

void order_ids_init(order_ids *o, const char *prefix, uint64_t chunk, uint64_t key_proposal)
{
    memset(o, 0, sizeof *o);
    o->chunk = chunk;
    /* one hash tag that no batch id can have (':' is not allowed in them) */
    snprintf(o->key_name, sizeof o->key_name, "%s:{allocd:orders}:key", prefix);
    snprintf(o->counter_name, sizeof o->counter_name, "%s:{allocd:orders}:counter", prefix);
    snprintf(o->key_hex, sizeof o->key_hex, "%016" PRIx64, key_proposal);
}

uint64_t order_ids_block_size(const order_ids *o, uint64_t need)
{
    uint64_t n = ORDER_ID_BLOCK;
    if (n < 16 * o->chunk) n = 16 * o->chunk;
    return n > need ? n : need;
}

int order_ids_request(order_ids *o, redis_router *router, const redis_script *script,
                      int timeout_ms, uint64_t need, redis_reply_fn fn, void *priv)
{
    char block[24];
    snprintf(block, sizeof block, "%" PRIu64, order_ids_block_size(o, need));
    const char *argv[] = { o->counter_name, o->key_name, o->key_hex, block };
    int rc = redis_router_eval(router, o->counter_name, script, fn, priv, timeout_ms, 2, 4, argv, NULL);
    if (rc == 0) o->outstanding++;
    return rc;
}

/* The block is the `size` values that end at counter_after. */
int order_ids_take(order_ids *o, const redisReply *r, uint64_t need)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_INTEGER)
        return -EPROTO;
    /* the key is the hex an allocd proposed (key_hex): anything else is a
     * damaged counter, and a made-up key could repeat another's order ids */
    if (numtext_parse_hex_u64(r->element[0]->str, &o->block.key) < 0) return -EPROTO;
    o->block.end = (uint64_t)r->element[1]->integer + 1;
    o->block.next = o->block.end - order_ids_block_size(o, need);
    return 0;
}
