/* ctl_sync.c -- see ctl_sync.h. Part of libctl.a, allocctl's
 * library in tools/allocctl/; the daemon does not link it. */
#include "allocctl/ctl_sync.h"

#include <stdio.h>
#include <stdlib.h>
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

/* sentinel:// -- the master the first sentinel that answers names (one
 * question, like redis-cli; the daemon follows failovers, a command line
 * tool only needs where the master is now). 0, or -1 with err. */
static int sentinel_resolve(const redis_target *spec, redis_target *out, int connect_ms,
                            char *err, size_t errlen)
{
    const char *p = spec->host;
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *colon = memrchr(p, ':', len);
        char host[256];
        size_t hl = colon ? (size_t)(colon - p) : len;
        snprintf(host, sizeof host, "%.*s", (int)hl, p);
        redisContext *c = redisConnectWithTimeout(host, colon ? atoi(colon + 1) : 26379, ms_tv(connect_ms));
        redisReply *r = c && !c->err ? redisCommand(c, "SENTINEL get-master-addr-by-name %s", spec->path) : NULL;
        int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2;
        if (ok) {
            *out = *spec;
            out->kind = REDIS_TARGET_TCP;
            out->path[0] = '\0';
            snprintf(out->host, sizeof out->host, "%s", r->element[0]->str);
            out->port = atoi(r->element[1]->str);
        }
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (ok) return 0;
        p += len;
        if (*p == ',') p++;
    }
    snprintf(err, errlen, "no sentinel of %s names master '%s'", spec->host, spec->path);
    return -1;
}

redisContext *ctl_connect(const redis_target *t, int connect_ms, int cmd_ms,
                          char *err, size_t errlen)
{
    redis_target master;
    if (t->kind == REDIS_TARGET_SENTINEL) {
        if (sentinel_resolve(t, &master, connect_ms, err, errlen) < 0) return NULL;
        t = &master;
    }
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

int ctl_reply_to_int(const redisReply *r, int64_t *v)
{
    if (r && r->type == REDIS_REPLY_INTEGER) { *v = r->integer; return 0; }
    if (r && r->type == REDIS_REPLY_STRING && numtext_parse_i64(r->str, v) == 0) return 0;
    return -1;
}

int64_t ctl_reply_int(const redisReply *r)
{
    int64_t v;
    return ctl_reply_to_int(r, &v) == 0 ? v : 0;
}
