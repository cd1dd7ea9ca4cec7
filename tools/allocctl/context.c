/* context.c -- see context.h: the pieces every allocctl command shares
 * (messages, options, config, the Redis connection and its replies). */
#include "allocctl/context.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocctl/ctl_sync.h"
#include "core/numtext.h"

void errmsg(const ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (x && x->quiet) {            /* a full-screen dashboard owns the tty */
        vsnprintf(x->quiet, 256, fmt, ap);
        va_end(ap);
        return;
    }
    fprintf(stderr, "allocctl%s%s: ", x && x->cmd ? " " : "", x && x->cmd ? x->cmd : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- command-line options ------------------------------------------------ */

const opt *find_opt(const opt *spec, size_t n, const char *arg, const char **inline_value)
{
    *inline_value = NULL;
    if (arg[1] != '-') {
        for (size_t i = 0; i < n; i++)
            if (spec[i].short_name && spec[i].short_name == arg[1] && arg[2] == '\0') return &spec[i];
        return NULL;
    }
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    for (size_t i = 0; i < n; i++)
        if (strlen(spec[i].name) == len && strncmp(spec[i].name, arg + 2, len) == 0) {
            if (eq) *inline_value = eq + 1;
            return &spec[i];
        }
    return NULL;
}

int parse_opts(ctx *x, int argc, char **argv, int from, const opt *spec,
                      size_t n, const char **pos, size_t *npos)
{
    *npos = 0;
    for (int i = from; i < argc; i++) {
        const char *arg = argv[i], *val;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return -1;
        if (arg[0] != '-' || arg[1] == '\0') {
            if (*npos == MAX_POS) { errmsg(x, "unexpected argument '%s'", arg); return EX_USAGE; }
            pos[(*npos)++] = arg;
            continue;
        }
        const opt *o = find_opt(spec, n, arg, &val);
        if (!o) { errmsg(x, "unknown option '%s' (try --help)", arg); return EX_USAGE; }
        if (o->flag) {
            if (val) { errmsg(x, "option '%s' takes no value", arg); return EX_USAGE; }
            *o->flag = 1;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) { errmsg(x, "option '%s' needs a value", arg); return EX_USAGE; }
            /* `--id --raw`: an option name is not a value (write --id=--raw
             * for an id that really looks like one). */
            const char *unused;
            const char *next = argv[i + 1];
            if (next[0] == '-' && next[1] && (find_opt(spec, n, next, &unused) || !strcmp(next, "--help"))) {
                errmsg(x, "option '%s' needs a value before '%s'", arg, next);
                return EX_USAGE;
            }
            val = argv[++i];
        }
        *o->value = val;
    }
    return EX_OK;
}

int opt_int(const ctx *x, const char *name, const char *v, int64_t min,
                   int64_t max, int64_t *out)
{
    if (!v) return 0;
    if (numtext_parse_i64(v, out) < 0 || *out < min || *out > max) {
        errmsg(x, "--%s must be an integer from %" PRId64 " to %" PRId64 " (got '%s')",
               name, min, max, v);
        return -1;
    }
    return 0;
}

int one_batch(ctx *x, size_t npos, const char **pos, const char **batch)
{
    if (npos > 1) { errmsg(x, "unexpected argument '%s'", pos[1]); return EX_USAGE; }
    *batch = npos ? pos[0] : NULL;
    return EX_OK;
}

int show_help(const char *text)
{
    fputs(text, stdout);
    return EX_OK;
}

/* ---- config and Redis ------------------------------------------------------ */

int ctx_config(ctx *x)
{
    if (x->cfg_loaded) return EX_OK;
    char err[600];
    x->cli.action = CLI_RUN;
    x->cli.tool = 1;
    /* a relative --redis-password-file is relative to where allocctl runs
     * (in the config file it would name a systemd credential) */
    char abs[4096];
    const char *pf = x->cli.redis_password_file;
    if (pf && *pf && pf[0] != '/' && strlen(pf) < 2048 && getcwd(abs, sizeof abs - 2048)) {
        strcat(strcat(abs, "/"), pf);
        x->cli.redis_password_file = abs;
    }
    int rc = config_load(&x->cfg, &x->cli, err, sizeof err);
    x->cli.redis_password_file = pf;     /* abs goes out of scope */
    if (rc < 0) {
        errmsg(x, "%s", err);
        return strncmp(err, "command line", 12) == 0 ? EX_USAGE : EX_INPUT;
    }
    x->cfg_loaded = 1;
    snprintf(x->batches_key, sizeof x->batches_key, "%s:batches", x->cfg.prefix);
    return EX_OK;
}

int ctx_connect(ctx *x)
{
    int rc = ctx_config(x);
    if (rc != EX_OK || x->c) return rc;
    char err[600];
    x->c = ctl_connect(&x->cfg.redis, x->cfg.connect_timeout_ms, x->cfg.redis_timeout_ms,
                       err, sizeof err);
    if (!x->c) { errmsg(x, "%s", err); return EX_REDIS; }
    return EX_OK;
}

int ctx_batch(ctx *x, const char *b)
{
    if (!b) { errmsg(x, "which batch? (try --help)"); return EX_USAGE; }
    if (!batch_id_valid(b)) {
        errmsg(x, "batch id '%s' must be 1 to 64 characters from [A-Za-z0-9_.-]", b);
        return EX_USAGE;
    }
    int rc = ctx_config(x);
    if (rc != EX_OK) return rc;
    if (batch_keys_init(&x->k, x->cfg.prefix, b) < 0) {
        errmsg(x, "prefix and batch id are too long together");
        return EX_USAGE;
    }
    x->batch = b;
    return EX_OK;
}

void ctx_free(ctx *x)
{
    if (x->c) redisFree(x->c);
    if (x->cfg_loaded) config_free(&x->cfg);
}

/* A reply, or NULL after printing the Redis error (transport or -ERR). */
static redisReply *checked(ctx *x, redisReply *r)
{
    const char *e = ctl_reply_error(x->c, r);
    if (!e) return r;
    errmsg(x, "redis: %s", e);
    if (r) freeReplyObject(r);
    return NULL;
}

redisReply *rcmd(ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(x->c, fmt, ap);
    va_end(ap);
    return checked(x, r);
}

redisReply *rargv(ctx *x, const ctl_args *a)
{
    if (a->failed) { errmsg(x, "out of memory"); return NULL; }
    return checked(x, redisCommandArgv(x->c, (int)a->n, (const char **)a->v, a->len));
}

void free_replies(redisReply **r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i]) freeReplyObject(r[i]);
        r[i] = NULL;
    }
}

int replies(ctx *x, size_t n, redisReply **out)
{
    int rc = 0;
    memset(out, 0, n * sizeof *out);
    for (size_t i = 0; i < n && !x->c->err; i++) {
        void *r = NULL;
        if (redisGetReply(x->c, &r) != REDIS_OK) r = NULL;
        out[i] = checked(x, r);
        if (!out[i]) rc = -1;
    }
    if (rc < 0 || x->c->err) {
        free_replies(out, n);
        return -1;
    }
    return 0;
}

redisReply *exec_reply(ctx *x, size_t queued, const char *failed)
{
    redisReply **r = calloc(queued + 2, sizeof *r);
    if (!r) { errmsg(x, "out of memory"); return NULL; }
    redisReply *exec = NULL;
    if (replies(x, queued + 2, r) == 0) {
        exec = r[queued + 1];
        r[queued + 1] = NULL;
        free_replies(r, queued + 1);
    }
    free(r);
    if (exec && (exec->type != REDIS_REPLY_ARRAY || exec->elements != queued)) {
        errmsg(x, "%s", failed);
        freeReplyObject(exec);
        exec = NULL;
    }
    return exec;
}

const char *hfield(const redisReply *h, const char *name)
{
    const redisReply *v = ctl_reply_field(h, name);
    return v ? v->str : NULL;
}

int64_t hfield_int(const redisReply *h, const char *name, int64_t dflt)
{
    return ctl_reply_field_int(h, name, dflt);
}

static int cmp_reply_str(const void *a, const void *b)
{
    return strcmp((*(redisReply *const *)a)->str, (*(redisReply *const *)b)->str);
}

void sort_strings(redisReply *array)
{
    qsort(array->element, array->elements, sizeof *array->element, cmp_reply_str);
}
