/* redis_url.h -- where a Redis server is: parsed from the URL forms of the
 * contract (`redis://[user:password@]host:port`, `unix:///path`), and
 * `sentinel://[user:password@]host:port[,host:port...]/mastername`: the
 * master of that name as Redis Sentinel reports it (redis/sentinel.h).
 *
 * Kept apart from the connection code so the config loader can validate a
 * URL (and report file:line) without touching the network.
 */
#ifndef ALLOCD_REDIS_URL_H
#define ALLOCD_REDIS_URL_H

#include <stddef.h>

typedef enum { REDIS_TARGET_TCP = 1, REDIS_TARGET_UNIX = 2, REDIS_TARGET_SENTINEL = 3 } redis_target_kind;

typedef struct redis_target {
    redis_target_kind kind;
    char host[256];          /* SENTINEL: the sentinels, "host:port,host:port" */
    int port;
    char path[108];          /* sun_path size; SENTINEL: the master's name */
    char user[128];          /* empty: no ACL user (AUTH password only) */
    char password[256];      /* empty: no AUTH */
} redis_target;

#define REDIS_SENTINELS_MAX 8

/* Returns 0, or -1 with a message in err ("redis URL: ..."). */
int redis_url_parse(const char *url, redis_target *t, char *err, size_t errlen);
/* "host:port" or the socket path, for logs; never includes the password. */
const char *redis_target_describe(const redis_target *t, char *buf, size_t len);

#endif
