/* test_order_ids.c -- a worker's supply of order-id blocks: the reply of
 * the order-block script read as a block, and the next block drawn ahead
 * once half of the current one is minted, so a refill needs no wait. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "worker/order_ids.h"

/* The script's reply {key_hex, counter_after}, on the stack. */
typedef struct block_reply {
    redisReply top, key, counter;
    redisReply *elems[2];
} block_reply;

static redisReply *reply_of(block_reply *b, const char *key_hex, long long counter_after)
{
    memset(b, 0, sizeof *b);
    b->key.type = REDIS_REPLY_STRING;
    b->key.str = (char *)key_hex;
    b->key.len = strlen(key_hex);
    b->counter.type = REDIS_REPLY_INTEGER;
    b->counter.integer = counter_after;
    b->elems[0] = &b->key;
    b->elems[1] = &b->counter;
    b->top.type = REDIS_REPLY_ARRAY;
    b->top.elements = 2;
    b->top.element = b->elems;
    return &b->top;
}

/* chunk 512: a block is 16 chunks, 8192 counter values */
static void init(order_ids *o)
{
    order_ids_init(o, "alloc", 512, 0x1234);
}

static void test_take_reads_the_block_ending_at_the_counter(void **state)
{
    order_ids o;
    block_reply b;
    init(&o);
    assert_int_equal(order_ids_block_size(&o, 0), 8192);
    assert_int_equal(order_ids_block_size(&o, 10000), 10000);
    assert_int_equal(order_ids_take(&o, reply_of(&b, "00000000000000ff", 8191), 0), 0);
    assert_int_equal(o.block.key, 0xff);
    assert_int_equal(o.block.next, 0);
    assert_int_equal(o.block.end, 8192);
    /* not a hex key, not an array: refused, the block unchanged */
    assert_int_equal(order_ids_take(&o, reply_of(&b, "nothex", 99999), 0), -EPROTO);
    b.top.type = REDIS_REPLY_NIL;
    assert_int_equal(order_ids_take_spare(&o, &b.top), -EPROTO);
    assert_int_equal(o.block.end, 8192);
    assert_false(o.has_spare);
}

/* Ahead of time: wanted once fewer than half of the ids are left, and not
 * while a request is out or a spare is kept. */
static void test_spare_wanted_after_half(void **state)
{
    order_ids o;
    block_reply b;
    init(&o);
    assert_int_equal(order_ids_take(&o, reply_of(&b, "00000000000000ff", 8191), 0), 0);
    o.block.next = 4096;                 /* 4096 left: half */
    assert_false(order_ids_want_spare(&o));
    o.block.next = 4097;
    assert_true(order_ids_want_spare(&o));
    o.outstanding = 1;
    assert_false(order_ids_want_spare(&o));
    o.outstanding = 0;
    assert_int_equal(order_ids_take_spare(&o, reply_of(&b, "00000000000000ff", 20000)), 0);
    assert_true(o.has_spare);
    assert_false(order_ids_want_spare(&o));
    /* the spare did not replace the block the engine mints from */
    assert_int_equal(o.block.next, 4097);
    assert_int_equal(o.spare.next, 20001 - 8192);
}

/* The spare replaces the block only when the block cannot cover a chunk's
 * need and the spare can; the engine's pointer and its clock stay. */
static void test_use_spare_only_when_needed(void **state)
{
    order_ids o;
    block_reply b;
    init(&o);
    assert_int_equal(order_ids_take(&o, reply_of(&b, "00000000000000ff", 8191), 0), 0);
    o.block.now_ms = 77;
    o.block.next = 8000;                 /* 192 left */
    assert_int_equal(order_ids_use_spare(&o, 100), 0);      /* no spare */
    assert_int_equal(order_ids_take_spare(&o, reply_of(&b, "00000000000000ff", 30000)), 0);
    assert_int_equal(order_ids_use_spare(&o, 192), 0);      /* the block still covers it */
    assert_int_equal(o.block.next, 8000);
    assert_int_equal(order_ids_use_spare(&o, 9000), 0);     /* the spare cannot either */
    assert_int_equal(order_ids_use_spare(&o, 193), 1);
    assert_int_equal(o.block.next, 30001 - 8192);
    assert_int_equal(o.block.end, 30001);
    assert_int_equal(o.block.now_ms, 77);
    assert_false(o.has_spare);
    assert_int_equal(order_ids_use_spare(&o, 9000), 0);     /* used up: gone */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_reads_the_block_ending_at_the_counter),
        cmocka_unit_test(test_spare_wanted_after_half),
        cmocka_unit_test(test_use_spare_only_when_needed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
