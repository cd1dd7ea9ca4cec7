/* rtest.h -- hiredis replies built by hand, as hiredis would build them,
 * for the unit tests of code that reads replies (test_archive_log,
 * test_slots_scan). Each is freed with freeReplyObject. Header-only, like
 * etest.h: the tests link different libraries. */
#ifndef ALLOCD_TEST_RTEST_H
#define ALLOCD_TEST_RTEST_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>

static inline redisReply *rtest_str(const char *s)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_STRING;
    r->str = strdup(s);
    r->len = strlen(s);
    return r;
}

static inline redisReply *rtest_nil(void)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_NIL;
    return r;
}

/* An array of n elements, all NULL: the caller fills them. */
static inline redisReply *rtest_array_of(size_t n)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_ARRAY;
    r->elements = n;
    r->element = calloc(n ? n : 1, sizeof *r->element);
    return r;
}

/* An array of the n replies given. */
static inline redisReply *rtest_arr(size_t n, ...)
{
    redisReply *r = rtest_array_of(n);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

#endif
