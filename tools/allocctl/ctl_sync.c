/* ctl_sync.c -- see ctl_sync.h. Part of libctl.a, allocctl's
 * library in tools/allocctl/; the daemon does not link it. */
#include "allocctl/ctl_sync.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "core/numtext.h"

static struct timeval ms_tv(int ms)
{
    struct timeval tv = { ms / 1000, (long)(ms % 1000) * 1000L };
    return tv;
}

static int auth(redisContext *c, const redis_target *t, char *err, size_t errlen)
{
    if (!t->password[0]) return 0;
    redisReply *r = t->user[0]
        ? redisCommand(c, "AUTH %s %s", t->user, t->password)
        : redisCommand(c, "AUTH %s", t->password);
    const char *e = ctl_reply_error(c, r);
    if (e) snprintf(err, errlen, "AUTH failed: %s", e);
    if (r) freeReplyObject(r);
    return e ? -1 : 0;
}

redisContext *ctl_connect(const redis_target *t, int connect_ms, int cmd_ms,
                          char *err, size_t errlen)
{
    char where[400], why[300] = "cannot set the command timeout";
    redis_target_describe(t, where, sizeof where);
    redisContext *c = t->kind == REDIS_TARGET_UNIX
        ? redisConnectUnixWithTimeout(t->path, ms_tv(connect_ms))
        : redisConnectWithTimeout(t->host, t->port, ms_tv(connect_ms));
    if (!c || c->err) {
        snprintf(err, errlen, "cannot connect to Redis at %s: %s", where,
                 c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, ms_tv(cmd_ms)) != REDIS_OK ||
        auth(c, t, why, sizeof why) < 0) {
        snprintf(err, errlen, "Redis at %s: %s", where,
                 c->err ? c->errstr : why);
        redisFree(c);
        return NULL;
    }
    return c;
}

const char *ctl_reply_error(const redisContext *c, const redisReply *r)
{
    if (!r) return c->errstr[0] ? c->errstr : "no reply";
    if (r->type == REDIS_REPLY_ERROR) return r->str;
    return NULL;
}

int64_t ctl_reply_int(const redisReply *r)
{
    int64_t v = 0;
    if (r && r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r && r->type == REDIS_REPLY_STRING && numtext_parse_i64(r->str, &v) == 0) return v;
    return 0;
}
