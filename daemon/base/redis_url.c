/* redis_url.c -- parse the two URL forms the contract allows. */
#include "base/redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The URL as an error message may show it: never the user:password part,
 * which goes to logs, journals and --check-config output. */
static int fail(char *err, size_t errlen, const char *msg, const char *url)
{
    const char *scheme = strstr(url, "://");
    const char *at = scheme ? strrchr(scheme, '@') : NULL;
    if (at)
        snprintf(err, errlen, "redis URL '%.*s***@%s': %s", (int)(scheme + 3 - url), url,
                 at + 1, msg);
    else
        snprintf(err, errlen, "redis URL '%s': %s", url, msg);
    return -1;
}

static int copy_part(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap) return -1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return 0;
}

static int parse_userinfo(const char *s, size_t n, redis_target *t)
{
    const char *colon = memchr(s, ':', n);
    if (!colon) /* a lone word is the password, as redis-cli reads it */
        return copy_part(t->password, sizeof t->password, s, n);
    if (copy_part(t->user, sizeof t->user, s, (size_t)(colon - s)) < 0) return -1;
    return copy_part(t->password, sizeof t->password, colon + 1,
                     n - (size_t)(colon - s) - 1);
}

static int parse_tcp(const char *url, const char *rest, redis_target *t,
                     char *err, size_t errlen)
{
    const char *at = strrchr(rest, '@');
    const char *hostport = rest;
    if (at) {
        if (parse_userinfo(rest, (size_t)(at - rest), t) < 0)
            return fail(err, errlen, "user or password too long", url);
        hostport = at + 1;
    }
    size_t len = strcspn(hostport, "/?");
    if (hostport[len] == '/' && hostport[len + 1] != '\0' &&
        strcmp(hostport + len, "/0") != 0)
        return fail(err, errlen, "database numbers other than 0 are not supported", url);
    const char *colon = memrchr(hostport, ':', len);
    t->port = 6379;
    size_t hostlen = len;
    if (colon) {
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || end != hostport + len || port < 1 || port > 65535)
            return fail(err, errlen, "port must be a number from 1 to 65535", url);
        t->port = (int)port;
        hostlen = (size_t)(colon - hostport);
    }
    if (hostlen == 0) return fail(err, errlen, "missing host", url);
    if (copy_part(t->host, sizeof t->host, hostport, hostlen) < 0)
        return fail(err, errlen, "host name too long", url);
    t->kind = REDIS_TARGET_TCP;
    return 0;
}

/* sentinel://[userinfo@]h:p[,h:p...]/name: every sentinel is checked as a
 * redis:// host:port would be; the list and the name are kept as written. */
static int parse_sentinel(const char *url, const char *rest, redis_target *t,
                          char *err, size_t errlen)
{
    const char *at = strchr(rest, '@'), *slash;
    if (at && (slash = strchr(rest, '/')) && slash < at) at = NULL;
    if (at) {
        if (parse_userinfo(rest, (size_t)(at - rest), t) < 0)
            return fail(err, errlen, "user or password too long", url);
        rest = at + 1;
    }
    slash = strchr(rest, '/');
    if (!slash || !slash[1]) return fail(err, errlen, "sentinel URL needs /mastername after the sentinels", url);
    if (strpbrk(slash + 1, "/?@ ,")) return fail(err, errlen, "bad master name", url);
    if (copy_part(t->path, sizeof t->path, slash + 1, strlen(slash + 1)) < 0)
        return fail(err, errlen, "master name too long", url);
    if (copy_part(t->host, sizeof t->host, rest, (size_t)(slash - rest)) < 0)
        return fail(err, errlen, "sentinel list too long", url);
    int n = 0;
    for (const char *p = rest; p < slash; n++) {
        size_t len = strcspn(p, ",/");
        const char *colon = memrchr(p, ':', len);
        char *end;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (!colon || colon == p || end == colon + 1 || end != p + len || port < 1 || port > 65535)
            return fail(err, errlen, "each sentinel must be host:port with a port from 1 to 65535", url);
        p += len;
        if (*p == ',') p++;
    }
    if (n == 0 || n > REDIS_SENTINELS_MAX) return fail(err, errlen, "give 1 to 8 sentinels", url);
    t->port = 0;
    t->kind = REDIS_TARGET_SENTINEL;
    return 0;
}

int redis_url_parse(const char *url, redis_target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (!url || !*url) return fail(err, errlen, "empty", url ? url : "");
    if (strncmp(url, "unix://", 7) == 0) {
        const char *path = url + 7;
        if (path[0] != '/') return fail(err, errlen, "unix socket path must be absolute", url);
        if (copy_part(t->path, sizeof t->path, path, strlen(path)) < 0)
            return fail(err, errlen, "unix socket path too long", url);
        t->kind = REDIS_TARGET_UNIX;
        return 0;
    }
    if (strncmp(url, "redis://", 8) == 0) return parse_tcp(url, url + 8, t, err, errlen);
    if (strncmp(url, "sentinel://", 11) == 0) return parse_sentinel(url, url + 11, t, err, errlen);
    return fail(err, errlen, "must start with redis://, unix:// or sentinel://", url);
}

const char *redis_target_describe(const redis_target *t, char *buf, size_t len)
{
    if (t->kind == REDIS_TARGET_UNIX)
        snprintf(buf, len, "unix:%s", t->path);
    else if (t->kind == REDIS_TARGET_SENTINEL)
        snprintf(buf, len, "sentinel %s of %s", t->path, t->host);
    else
        snprintf(buf, len, "%s:%d", t->host, t->port);
    return buf;
}
