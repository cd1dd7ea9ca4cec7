/* ctl_queue.c -- see ctl_queue.h. Part of libctl.a, allocctl's
 * library in tools/allocctl/; the daemon does not link it. */
#include "allocctl/ctl_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/ctl_sync.h"
#include "allocctl/ctl_util.h"
#include "core/base64.h"

/* Moves one dead entry back to the queue, atomically: the entry must still
 * be the expected bytes at that index (another operator may have requeued
 * it; the daemon only appends), it is replaced by a tombstone that cannot
 * be a dead entry (it starts with a NUL byte) and LREM removes exactly that,
 * and the request is pushed with the position read in the same step. */
static const char REQUEUE_LUA[] =
    "local i = tonumber(ARGV[1])\n"
    "if redis.call('LINDEX', KEYS[1], i) ~= ARGV[2] then\n"
    "  return redis.error_reply('CHANGED dead entry ' .. ARGV[1] .. ' changed meanwhile; list again')\n"
    "end\n"
    "redis.call('LSET', KEYS[1], i, '\\0allocctl-requeued')\n"
    "redis.call('LREM', KEYS[1], 1, '\\0allocctl-requeued')\n"
    "local l = redis.call('RPUSH', KEYS[2], ARGV[3])\n"
    "return {l, redis.call('HGET', KEYS[3], 'dequeued') or '0'}\n";

/* Reads n pipelined replies; the last (EXEC, of `want` elements) is
 * returned, the others freed. NULL with err on any failure. */
static redisReply *exec_reply(redisContext *c, size_t n, size_t want, char *err, size_t errlen)
{
    redisReply *last = NULL;
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(c, &r) != REDIS_OK) {
            snprintf(err, errlen, "%s", c->errstr);
            failed = 1;
            break;
        }
        const char *e = ctl_reply_error(c, r);
        if (e && !failed) {
            snprintf(err, errlen, "%s", e);
            failed = 1;
        }
        if (i + 1 == n) last = r;
        else freeReplyObject(r);
    }
    if (!failed && (last->type != REDIS_REPLY_ARRAY || last->elements != want)) {
        snprintf(err, errlen, "unexpected EXEC reply");
        failed = 1;
    }
    if (failed && last) {
        freeReplyObject(last);
        last = NULL;
    }
    return last;
}

int ctl_push_ordinal(redisContext *c, const batch_keys *k, const char *req,
                     size_t len, int64_t *ordinal, char *err, size_t errlen)
{
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "RPUSH %s %b", k->queue, req, len);
    redisAppendCommand(c, "HGET %s dequeued", k->stats);
    redisAppendCommand(c, "EXEC");
    redisReply *r = exec_reply(c, 4, 2, err, errlen);
    if (!r) return -1;
    *ordinal = ctl_reply_int(r->element[0]) + ctl_reply_int(r->element[1]);
    freeReplyObject(r);
    return 0;
}

/* 1 when the list element is the request with this id. */
static int element_is(const redisReply *e, const char *id)
{
    if (e->type != REDIS_REPLY_STRING || !memmem(e->str, e->len, id, strlen(id))) return 0;
    /* a lottery pool entry is "<seq> <request>" (worker/lottery_pool.h) */
    const char *s = e->str;
    size_t len = e->len, d = 0;
    while (d < len && s[d] >= '0' && s[d] <= '9') d++;
    if (d && d < len && s[d] == ' ') { s += d + 1; len -= d + 1; }
    json_error_t je;
    json_t *doc = json_loadb(s, len, 0, &je);
    const char *got = json_string_value(json_object_get(doc, "id"));
    int same = got && !strcmp(got, id);
    json_decref(doc);
    return same;
}

/* One page of the queue and `dequeued`, read in one transaction. */
static redisReply *queue_page(redisContext *c, const batch_keys *k, int64_t start,
                              int64_t *dequeued, char *err, size_t errlen)
{
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "HGET %s dequeued", k->stats);
    redisAppendCommand(c, "LRANGE %s %lld %lld", k->queue, (long long)start,
                       (long long)(start + CTL_QUEUE_PAGE - 1));
    redisAppendCommand(c, "EXEC");
    redisReply *r = exec_reply(c, 4, 2, err, errlen);
    if (!r) return NULL;
    *dequeued = ctl_reply_int(r->element[0]);
    redisReply *page = r->element[1];
    r->element[1] = NULL;          /* keep the page, free the rest */
    freeReplyObject(r);
    return page;
}

int ctl_queue_find(redisContext *c, const batch_keys *k, const char *id,
                   int64_t *ordinal, char *err, size_t errlen)
{
    /* next: ordinal - 1 of the first request not looked at yet. A page
     * read at `start` begins at ordinal dequeued + start + 1 >= next + 1
     * (dequeued only grows); whatever lies between was taken off the queue
     * meanwhile and need not be looked at. */
    int64_t next = 0, dequeued = 0;
    for (;;) {
        int64_t start = next > dequeued ? next - dequeued : 0;
        redisReply *page = queue_page(c, k, start, &dequeued, err, errlen);
        if (!page) return -1;
        size_t n = page->elements;
        for (size_t i = 0; i < n; i++)
            if (element_is(page->element[i], id)) {
                *ordinal = dequeued + start + (int64_t)i + 1;
                freeReplyObject(page);
                return 1;
            }
        freeReplyObject(page);
        if (n < CTL_QUEUE_PAGE) return 0;
        next = dequeued + start + (int64_t)n;
    }
}

int ctl_list_find(redisContext *c, const char *key, const char *id,
                  char *err, size_t errlen)
{
    for (long long start = 0;; start += CTL_QUEUE_PAGE) {
        redisReply *r = redisCommand(c, "LRANGE %s %lld %lld", key, start,
                                     start + CTL_QUEUE_PAGE - 1);
        const char *e = ctl_reply_error(c, r);
        if (e) {
            snprintf(err, errlen, "%s", e);
            if (r) freeReplyObject(r);
            return -1;
        }
        size_t n = r->elements;
        int found = 0;
        for (size_t i = 0; i < n && !found; i++) found = element_is(r->element[i], id);
        freeReplyObject(r);
        if (found) return 1;
        if (n < CTL_QUEUE_PAGE) return 0;
    }
}

char *ctl_dead_payload(const char *entry, size_t len, size_t *n)
{
    json_error_t je;
    json_t *doc = json_loadb(entry, len, JSON_ALLOW_NUL, &je);
    const char *b64 = json_string_value(json_object_get(doc, "raw_base64"));
    json_t *raw = json_object_get(doc, "raw");
    char *out = NULL;
    if (b64) out = base64_decode(b64, n);
    else if (json_is_string(raw)) {
        *n = json_string_length(raw);
        out = malloc(*n + 1);
        if (out) memcpy(out, json_string_value(raw), *n);
    }
    json_decref(doc);
    return out;
}

int ctl_dead_requeue(redisContext *c, const batch_keys *k, int64_t index,
                     const char *expected, size_t len, int64_t *ordinal,
                     char *err, size_t errlen)
{
    return ctl_dead_requeue_as(c, k, index, expected, len, NULL, 0, ordinal, err, errlen);
}

/* Removes the entry at index if it still holds expected. */
static const char DELETE_LUA[] =
    "local i = tonumber(ARGV[1])\n"
    "if redis.call('LINDEX', KEYS[1], i) ~= ARGV[2] then\n"
    "  return redis.error_reply('CHANGED dead entry ' .. ARGV[1] .. ' changed or is gone; list again')\n"
    "end\n"
    "redis.call('LSET', KEYS[1], i, '\\0allocctl-deleted')\n"
    "return redis.call('LREM', KEYS[1], 1, '\\0allocctl-deleted')\n";

int ctl_dead_delete(redisContext *c, const batch_keys *k, int64_t index,
                    const char *expected, size_t len, char *err, size_t errlen)
{
    char idx[32];
    snprintf(idx, sizeof idx, "%lld", (long long)index);
    const char *argv[] = { "EVAL", DELETE_LUA, "1", k->dead, idx, expected };
    size_t lens[] = { 4, strlen(DELETE_LUA), 1, strlen(k->dead), strlen(idx), len };
    redisReply *r = redisCommandArgv(c, 6, argv, lens);
    const char *e = ctl_reply_error(c, r);
    int rc = e ? (r && !strncmp(r->str, "CHANGED", 7) ? 1 : -1) : 0;
    if (e) snprintf(err, errlen, "%s", e);
    if (r) freeReplyObject(r);
    return rc;
}

int ctl_dead_requeue_as(redisContext *c, const batch_keys *k, int64_t index,
                        const char *expected, size_t len, const char *edited, size_t elen,
                        int64_t *ordinal, char *err, size_t errlen)
{
    size_t n = elen;
    char *payload = edited ? malloc(elen + 1) : ctl_dead_payload(expected, len, &n);
    if (edited && payload) memcpy(payload, edited, elen);
    if (!payload) {
        snprintf(err, errlen, "dead entry %lld has no raw request to requeue", (long long)index);
        return 1;
    }
    char idx[32];
    snprintf(idx, sizeof idx, "%lld", (long long)index);
    const char *argv[] = { "EVAL", REQUEUE_LUA, "3", k->dead, k->queue, k->stats,
                           idx, expected, payload };
    size_t lens[] = { 4, strlen(REQUEUE_LUA), 1, strlen(k->dead), strlen(k->queue),
                      strlen(k->stats), strlen(idx), len, n };
    redisReply *r = redisCommandArgv(c, 9, argv, lens);
    free(payload);
    const char *e = ctl_reply_error(c, r);
    int rc = e ? (r && !strncmp(r->str, "CHANGED", 7) ? 1 : -1) : 0;
    if (e) snprintf(err, errlen, "%s", e);
    else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        *ordinal = ctl_reply_int(r->element[0]) + ctl_reply_int(r->element[1]);
    else { snprintf(err, errlen, "unexpected reply from the requeue script"); rc = -1; }
    if (r) freeReplyObject(r);
    return rc;
}
