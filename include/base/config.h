/* config.h -- allocd's settings: built-in defaults, the libconfig file, and
 * the command line, in that order of precedence (last wins).
 *
 * Every error names where it is: `file:line: message` for the file (libconfig
 * syntax errors, unknown settings, wrong types, values out of range), and
 * `command line: --flag: message` for arguments. The loaded config is one of
 * the two pieces of process-wide state (with the loop); it is passed
 * explicitly to the modules that need it.
 */
#ifndef ALLOCD_CONFIG_H
#define ALLOCD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/cli.h"
#include "base/redis_url.h"

typedef struct allocd_config {
    char *redis_url;          /* "redis"; default redis://127.0.0.1:6379 */
    redis_target redis;       /* parsed redis_url, then redis_user and the
                                 password applied (base/secret.h) */
    char *redis_user;         /* "redis_user"; "" = the URL's user (or none) */
    char *redis_password_file;/* "redis_password_file"; "" = none; relative =
                                 under $CREDENTIALS_DIRECTORY (systemd) */
    char *prefix;             /* "prefix"; default "alloc"; [A-Za-z0-9_.:-]{1,64} */
    char *instance;           /* "instance"; default: host name */
    int chunk;                /* "chunk"; requests per atomic step; 512 (1..4096) */
    int max_request_bytes;    /* "max_request_bytes"; 4096 (64..1048576) */
    int heap_reserve_mb;      /* "heap_reserve_mb"; heap touched at start, 64 (0..2047),
                                 base/heap_reserve.h; read at start only */
    int log_level;            /* "log_level": error|warning|notice|info|debug */
    int64_t log_maxlen;       /* "log_maxlen"; 0 = never trim the event log */
    int log_chunk;            /* "log_format": "chunk" (1, default, contract 11.1)
                                 or "event" (0),
                                 see wire/log_entry.h */
    char archive_group[65];   /* "archive_group"; "" = none. With log_maxlen, the log
                                 is trimmed only below what this consumer group (the
                                 archive, docs/ARCHIVE.md) has acknowledged */
    int redis_timeout_ms;     /* "redis_timeout_ms"; command deadline, 5000 */
    int connect_timeout_ms;   /* "connect_timeout_ms"; 2000 */
    int backoff_min_ms;       /* "backoff_min_ms"; 100 */
    int backoff_max_ms;       /* "backoff_max_ms"; 5000 */
    int registry_interval_ms; /* "registry_interval_ms"; batch list poll, 1000 */
    int idle_wait_ms;         /* "idle_wait_ms"; server-side BLMOVE timeout, 1000 */
    int drain_timeout_ms;     /* "drain_timeout_ms"; SIGTERM drain deadline, 10000 */
    int max_attempts;         /* "max_attempts"; tries of a failing chunk before
                                 its requests go to dead one by one, 5 */
    char *cluster;            /* "cluster": "auto" (CLUSTER SLOTS decides), "yes", "no" */
    int lease_ttl_ms;         /* "lease_ttl_ms"; batch lease lifetime, 5000 (1000..600000) */
    int answer_ms;            /* "answer_ms"; contract 9.6: every request answered within
                                 it, 60000 (1000..86400000); a worker unable to serve
                                 for half of it gives its batch up */
    int wait_replicas;        /* "wait_replicas"; 0 (0..16): before each apply, WAIT until this
                                 many replicas have every earlier write (DEPLOYMENT.md) */
    int replica_forget_ms;    /* "replica_forget_ms"; 10000 (0..3600000): with wait_replicas,
                                 how long a replica the master had may stop acknowledging
                                 before it no longer counts (DEPLOYMENT.md) */
    char *metrics_listen;     /* "metrics_listen"; "" = off, else host:port */
    char metrics_host[64];    /* parsed metrics_listen */
    int metrics_port;
    int metrics_loopback;     /* metrics_host is a loopback address */
    char *metrics_token;      /* "metrics_token", or the token in
                                 "metrics_token_file"; "" = none (loopback only) */
    int tool;                 /* loaded for allocctl (cli_args.tool) */
    int metrics_token_unread; /* tool: metrics_token_file is set, not read */
    int metrics_max_connections; /* "metrics_max_connections"; 64 (1..10000) */
    int metrics_timeout_ms;   /* "metrics_timeout_ms"; idle connection limit, 10000 */
    char *source;             /* file the values came from, NULL = defaults */
} allocd_config;

#define ALLOCD_VERSION "0.1.0"

const char *config_default_path(void);

void config_defaults(allocd_config *c);
void config_free(allocd_config *c);

/* Reads a config file over the current values. Returns 0 when loaded,
 * 1 when the file does not exist and must_exist is 0 (values unchanged),
 * -1 with "file:line: message" in err. */
int config_load_file(allocd_config *c, const char *path, int must_exist,
                     char *err, size_t errlen);

/* Defaults, then the file (-c, or the default path if present), then the
 * command-line overrides, then validation. Returns 0 or -1 with err. */
int config_load(allocd_config *c, const cli_args *a, char *err, size_t errlen);

#endif
