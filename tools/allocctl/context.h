/* context.h -- what every allocctl command shares: the exit codes, the
 * context (config, Redis connection, prefix, the batch and its keys, where
 * messages go), the option parser and the Redis reply helpers.
 *
 * main.c fills one ctx from the global options and hands it to a command
 * (cmd_*.h); the command reports with errmsg() and returns an exit code.
 * Exit codes are part of the interface (docs/ALLOCCTL.md).
 */
#ifndef ALLOCD_CTL_CONTEXT_H
#define ALLOCD_CTL_CONTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "base/config.h"
#include "worker/batch_keys.h"
#include "allocctl/ctl_util.h"

enum { EX_OK = 0, EX_NOT = 1, EX_USAGE = 2, EX_REDIS = 3, EX_INPUT = 4 };

#define MAX_POS 4              /* positional arguments of any command */

typedef struct ctx {
    const char *cmd;                /* "push", "batch create", ... for messages */
    cli_args cli;                   /* -c, --redis, --prefix, --redis-user, ... */
    allocd_config cfg;
    int cfg_loaded;
    redisContext *c;
    const char *batch;
    batch_keys k;
    char batches_key[160];          /* P:batches */
    char *quiet;                    /* top: messages go here, not to stderr */
} ctx;

/* "allocctl CMD: message" on stderr, or into x->quiet (256 bytes). */
void errmsg(const ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- command-line options ---- */

typedef struct opt {
    const char *name;      /* long name without "--" */
    char short_name;
    const char **value;    /* option with a value */
    int *flag;             /* option without one */
} opt;

/* The options every command accepts, first in each command's spec. */
#define GLOBAL_OPTS(x) \
    { "config", 'c', &(x)->cli.config_path, NULL }, \
    { "redis", 0, &(x)->cli.redis_url, NULL }, \
    { "prefix", 0, &(x)->cli.prefix, NULL }, \
    { "redis-user", 0, &(x)->cli.redis_user, NULL }, \
    { "redis-password-file", 0, &(x)->cli.redis_password_file, NULL }

/* The spec entry for "-x", "--name" or "--name=value" (then *inline_value
 * points after the '='), or NULL. */
const opt *find_opt(const opt *spec, size_t n, const char *arg, const char **inline_value);
/* Parses argv[from..] against spec; positional arguments go to pos (at
 * most MAX_POS). Returns EX_OK, EX_USAGE (message printed), or -1 for --help. */
int parse_opts(ctx *x, int argc, char **argv, int from, const opt *spec,
               size_t n, const char **pos, size_t *npos);
/* An integer option within [min, max]; absent options (v NULL) keep *out.
 * Returns 0, or -1 with the message printed. */
int opt_int(const ctx *x, const char *name, const char *v, int64_t min,
            int64_t max, int64_t *out);
/* At most one positional argument: the batch (NULL when none). */
int one_batch(ctx *x, size_t npos, const char **pos, const char **batch);
/* Prints a command's help text to stdout; returns EX_OK. */
int show_help(const char *text);

/* ---- config and Redis ---- */

/* Loads the config once (-c, --redis, --prefix applied). */
int ctx_config(ctx *x);
/* Loads the config and connects, once. */
int ctx_connect(ctx *x);
/* Sets the batch (validated) and its key names. */
int ctx_batch(ctx *x, const char *b);
void ctx_free(ctx *x);

/* A command's reply, or NULL after printing the Redis error. */
redisReply *rcmd(ctx *x, const char *fmt, ...);
redisReply *rargv(ctx *x, const ctl_args *a);
/* Reads n pipelined replies into out[]; on any failure (all replies are
 * still read, to keep the connection in step) frees them all and returns
 * -1 with the message printed. */
int replies(ctx *x, size_t n, redisReply **out);
void free_replies(redisReply **r, size_t n);
/* After MULTI, `queued` commands and EXEC were appended: reads all their
 * replies and returns EXEC's, an array of `queued` replies (the caller
 * frees it), or NULL after printing `failed` (or the Redis error). */
redisReply *exec_reply(ctx *x, size_t queued, const char *failed);

/* The value of field name in an HGETALL reply, or NULL. */
const char *hfield(const redisReply *h, const char *name);
int64_t hfield_int(const redisReply *h, const char *name, int64_t dflt);
/* Sorts an array reply of strings (SMEMBERS) by byte order. */
void sort_strings(redisReply *array);

#endif
