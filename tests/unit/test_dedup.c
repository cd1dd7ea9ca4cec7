/* test_dedup.c -- the worker's in-memory duplicate check
 * (worker/dedup.c, dedup_mark_in_flight): a request whose id occurs in an
 * older chunk still in flight, or earlier in its own chunk, is a
 * duplicate -- unless that older occurrence was kept for the lottery pool
 * (contract 9.1), which answers it only when the pool serves it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "redis/argbuf.h"
#include "worker/chunk.h"
#include "worker/dedup.h"

static chunk *taken(chunk_ring *ring, chunk_kind kind, const char *const *ids, size_t n)
{
    chunk *ch = chunk_ring_push(ring, kind);
    assert_non_null(ch);
    assert_int_equal(chunk_reserve(ch, n), 0);
    for (size_t i = 0; i < n; i++) {
        char raw[128];
        int len = snprintf(raw, sizeof raw, "{\"id\":\"%s\",\"user\":\"u%zu\",\"op\":\"buy\",\"item\":\"sku\"}", ids[i], i);
        assert_int_equal(chunk_add(ch, raw, (size_t)len, (int64_t)i + 1, 4096, NULL), 0);
    }
    return ch;
}

/* ids are hashed by dedup_ask, as the worker does before marking */
static void hashed(dedup *d, chunk *ch)
{
    argbuf a;
    argbuf_init(&a);
    dedup_ask(d, ch, &a, "alloc:{b}:results");
    argbuf_free(&a);
}

static void test_in_flight_and_kept(void **state)
{
    dedup d;
    dedup_init(&d, 7);
    chunk_ring ring;
    memset(&ring, 0, sizeof ring);
    /* an early chunk: r1 answered (too early, say), r2 kept for the pool */
    chunk *early = taken(&ring, CHUNK_QUEUE, (const char *[]){ "r1", "r2" }, 2);
    hashed(&d, early);
    assert_int_equal(dedup_mark_in_flight(&d, &ring, early), 0);
    early->items[1].res.kept = 1;
    early->state = CS_STAGED;
    /* the pool serves r2; r1 again (a resubmission) is a duplicate */
    chunk *pool = taken(&ring, CHUNK_POOL, (const char *[]){ "r2", "r1", "r2" }, 3);
    hashed(&d, pool);
    assert_int_equal(dedup_mark_in_flight(&d, &ring, pool), 0);
    assert_int_equal(pool->items[0].dup, 0);   /* kept before: served now */
    assert_int_equal(pool->items[1].dup, 1);   /* answered in the older chunk */
    assert_int_equal(pool->items[2].dup, 1);   /* twice in one chunk: the first is decided */
    chunk_ring_free(&ring);
    dedup_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_flight_and_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
