/* config.c -- allocd's settings: built-in defaults, then a libconfig file,
 * then the command line (last wins), with every error saying where it is.
 *
 * An operator who mistypes a setting must find out at start (or from
 * --check-config), not at 3 a.m. when the default silently applied. So the
 * file is checked strictly: every root setting must be one we know, of the
 * right libconfig type, within its range, and each error is reported as
 * `file:line: message`. Settings live in one table (SPECS) that drives both
 * the checking and the error text, so adding a setting is one line there.
 *
 * libconfig 1.5 reads an integer literal with atoi()/atoll() and so wraps
 * values that do not fit (`chunk = 4294967808` reads as 512, `log_maxlen =
 * 10000000000` as 1410065408) without any error. We re-scan the file text
 * for integer literals and reject those libconfig cannot have read exactly.
 *
 * A file is loaded into a copy and committed only when it is entirely valid,
 * so a failed SIGHUP reload leaves the running values untouched.
 */
#include "base/config.h"
#include "base/log.h"
#include "base/secret.h"
#include "base/textfile.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef ALLOCD_SYSCONFDIR
#define ALLOCD_SYSCONFDIR "/usr/local/etc"
#endif

#define DEFAULT_REDIS_URL "redis://127.0.0.1:6379"
#define DEFAULT_PREFIX    "alloc"
#define FALLBACK_INSTANCE "allocd"
#define NAME_MAX_CHARS    64      /* prefix and instance */
#define MSG_MAX           512     /* one error message before its location */

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- values: checks shared by the file and the command line ----------- */

/* The prefix ends up in every key name; braces would break the {B} hash
 * tag and spaces the redis-cli habits of operators, hence the small set. */
static int prefix_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > NAME_MAX_CHARS) return 0;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789_.:-") == n;
}

/* The instance name appears in the registry and in logs: any printable
 * ASCII except space, so it stays one word. */
static int instance_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > NAME_MAX_CHARS) return 0;
    for (; *s; s++)
        if (*s <= ' ' || *s > '~') return 0;
    return 1;
}

static int replace_string(char **field, const char *v, char *msg, size_t len)
{
    char *dup = strdup(v);
    if (!dup) {
        seterr(msg, len, "out of memory");
        return -1;
    }
    free(*field);
    *field = dup;
    return 0;
}

/* Setters for the string settings: validate, then store. On error they
 * write a message without a location; the caller adds `file:line: ` or
 * `command line: --flag: `. */
typedef int (*string_setter)(allocd_config *c, const char *v, char *msg, size_t len);

static int set_redis(allocd_config *c, const char *v, char *msg, size_t len)
{
    redis_target t;
    if (redis_url_parse(v, &t, msg, len) < 0) return -1;
    if (replace_string(&c->redis_url, v, msg, len) < 0) return -1;
    c->redis = t;
    return 0;
}

static int set_redis_user(allocd_config *c, const char *v, char *msg, size_t len)
{
    if (strlen(v) >= sizeof c->redis.user || strpbrk(v, " \t\r\n")) {
        seterr(msg, len, "redis_user must be an ACL user name: under 128 characters, no spaces");
        return -1;
    }
    return replace_string(&c->redis_user, v, msg, len);
}

/* Checked here, so a missing or unreadable file is reported at its line;
 * read again (and applied) once every source is in, by secret_apply. */
static int set_password_file(allocd_config *c, const char *v, char *msg, size_t len)
{
    char path[4096], pw[SECRET_MAX];
    if (*v && (secret_path("redis_password_file", v, path, sizeof path, msg, len) < 0 ||
               secret_read_file(path, pw, sizeof pw, msg, len) < 0))
        return -1;
    memset(pw, 0, sizeof pw);
    return replace_string(&c->redis_password_file, v, msg, len);
}

/* The string settings that are kept as given once a check passes; rule
 * says what the check wants, and the message adds the value it got. */
static int set_checked(char **field, int ok, const char *v, const char *rule,
                       char *msg, size_t len)
{
    if (!ok) {
        seterr(msg, len, "%s (got '%s')", rule, v);
        return -1;
    }
    return replace_string(field, v, msg, len);
}

static int set_prefix(allocd_config *c, const char *v, char *msg, size_t len)
{
    return set_checked(&c->prefix, prefix_ok(v), v,
                       "prefix must be 1 to 64 characters from [A-Za-z0-9_.:-]", msg, len);
}

static int set_instance(allocd_config *c, const char *v, char *msg, size_t len)
{
    return set_checked(&c->instance, instance_ok(v), v,
                       "instance must be 1 to 64 printable ASCII characters without spaces",
                       msg, len);
}

/* A Redis consumer group name, kept in the struct (no allocation). */
static int set_archive_group(allocd_config *c, const char *v, char *msg, size_t len)
{
    size_t n = strlen(v);
    if (n > 64 || strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") != n) {
        seterr(msg, len, "archive_group must be 0 to 64 characters from [A-Za-z0-9_.:-] (got '%s')", v);
        return -1;
    }
    memcpy(c->archive_group, v, n + 1);
    return 0;
}

static int set_log_level(allocd_config *c, const char *v, char *msg, size_t len)
{
    int level = log_level_parse(v);
    if (level < 0) {
        seterr(msg, len, "log_level must be one of error, warning, notice, info, "
               "debug (got '%s')", v);
        return -1;
    }
    c->log_level = level;
    return 0;
}

/* metrics_listen: host:port, any numeric address; localhost means
 * 127.0.0.1. Beyond loopback a token is required (cross_check). */
static int is_loopback(const char *host)
{
    return !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

static int set_metrics_listen(allocd_config *c, const char *v, char *msg, size_t len)
{
    char host[64] = "";
    int port = 0;
    if (*v) {
        const char *colon = strrchr(v, ':');
        size_t hl = colon ? (size_t)(colon - v) : 0;
        char *end = NULL;
        long p = colon ? strtol(colon + 1, &end, 10) : 0;
        if (!colon || hl == 0 || hl >= sizeof host || *end || p < 1 || p > 65535) {
            seterr(msg, len, "metrics_listen must be host:port, e.g. 127.0.0.1:9464 (got '%s')", v);
            return -1;
        }
        memcpy(host, v, hl);
        host[hl] = '\0';
        if (host[0] == '[' && host[hl - 1] == ']') {
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = '\0';
        }
        if (!strcmp(host, "localhost")) strcpy(host, "127.0.0.1");
        unsigned char addr[16];
        if (inet_pton(AF_INET, host, addr) != 1 && inet_pton(AF_INET6, host, addr) != 1) {
            seterr(msg, len, "metrics_listen must name a numeric address or localhost, "
                   "e.g. 127.0.0.1:9464 or [::]:9464 (got '%s')", v);
            return -1;
        }
        port = (int)p;
    }
    if (replace_string(&c->metrics_listen, v, msg, len) < 0) return -1;
    snprintf(c->metrics_host, sizeof c->metrics_host, "%s", host);
    c->metrics_port = port;
    c->metrics_loopback = !*v || is_loopback(host);
    return 0;
}

static int set_log_format(allocd_config *c, const char *v, char *msg, size_t len)
{
    if (strcmp(v, "event") && strcmp(v, "chunk")) {
        seterr(msg, len, "log_format must be event or chunk (got '%s')", v);
        return -1;
    }
    c->log_chunk = !strcmp(v, "chunk");
    return 0;
}

/* A token is compared as given; printable ASCII only, so it survives an
 * Authorization header unchanged, and at least 16 characters so it is not
 * guessed. */
static int token_ok(const char *t, char *msg, size_t len, const char *what)
{
    size_t n = strlen(t);
    for (size_t i = 0; i < n; i++)
        if (t[i] <= ' ' || t[i] > '~') {
            seterr(msg, len, "%s must be printable ASCII without spaces", what);
            return -1;
        }
    if (n && n < 16) {
        seterr(msg, len, "%s must be at least 16 characters (got %zu)", what, n);
        return -1;
    }
    return 0;
}

static int set_metrics_token(allocd_config *c, const char *v, char *msg, size_t len)
{
    if (token_ok(v, msg, len, "metrics_token") < 0) return -1;
    return replace_string(&c->metrics_token, v, msg, len);
}

/* The file holds the token alone (one trailing newline allowed), so the
 * secret can live outside a config that is shared; it is read like
 * redis_password_file, a relative path naming a systemd credential. */
static int set_metrics_token_file(allocd_config *c, const char *v, char *msg, size_t len)
{
    /* allocctl shares the daemon's config but serves no metrics, and the
     * token file is often a credential of allocd's unit only (systemd's
     * LoadCredential=): the archive unit must not fail on it */
    if (c->tool) { c->metrics_token_unread = *v != '\0'; return 0; }
    char path[4096], token[SECRET_MAX], why[4200];
    if (secret_path("metrics_token_file", v, path, sizeof path, msg, len) < 0) return -1;
    if (secret_read_file(path, token, sizeof token, why, sizeof why) < 0) {
        seterr(msg, len, "metrics_token_file: %s", why);
        return -1;
    }
    int rc = -1;
    if (token_ok(token, msg, len, "the token in metrics_token_file") == 0)
        rc = replace_string(&c->metrics_token, token, msg, len);
    memset(token, 0, sizeof token);
    return rc;
}

static int set_cluster(allocd_config *c, const char *v, char *msg, size_t len)
{
    int ok = !strcmp(v, "auto") || !strcmp(v, "yes") || !strcmp(v, "no");
    return set_checked(&c->cluster, ok, v, "cluster must be auto, yes or no", msg, len);
}

/* ---- the settings table ---------------------------------------------- */

typedef enum { SET_STRING, SET_INT, SET_INT64 } setting_kind;

typedef struct setting_spec {
    const char *name;
    setting_kind kind;
    string_setter set;          /* SET_STRING */
    size_t off;                 /* SET_INT: int field, SET_INT64: int64_t field */
    long long min, max;
} setting_spec;

#define STR(n, fn)          { n, SET_STRING, fn, 0, 0, 0 }
#define INT(n, f, lo, hi)   { n, SET_INT, NULL, offsetof(allocd_config, f), lo, hi }
#define INT64(n, f, lo, hi) { n, SET_INT64, NULL, offsetof(allocd_config, f), lo, hi }

/* Ranges: the lower bounds keep a typo (0, or seconds written as ms) from
 * making the daemon spin or time out every command; the upper bounds (one
 * hour for durations) only catch absurd values. idle_wait_ms is the
 * server-side BLMOVE timeout, where 0 would mean "block forever" and stall
 * a drain, so it must be positive and stays short. */
static const setting_spec SPECS[] = {
    STR("redis", set_redis),
    STR("prefix", set_prefix),
    STR("instance", set_instance),
    INT("chunk", chunk, 1, 4096),
    INT("max_request_bytes", max_request_bytes, 64, 1048576),
    INT("heap_reserve_mb", heap_reserve_mb, 0, 2047),
    STR("log_level", set_log_level),
    INT64("log_maxlen", log_maxlen, 0, INT64_MAX),
    STR("log_format", set_log_format),
    STR("archive_group", set_archive_group),
    INT("redis_timeout_ms", redis_timeout_ms, 10, 3600000),
    INT("connect_timeout_ms", connect_timeout_ms, 10, 3600000),
    INT("backoff_min_ms", backoff_min_ms, 1, 3600000),
    INT("backoff_max_ms", backoff_max_ms, 1, 3600000),
    INT("registry_interval_ms", registry_interval_ms, 10, 3600000),
    INT("idle_wait_ms", idle_wait_ms, 10, 60000),
    INT("drain_timeout_ms", drain_timeout_ms, 0, 3600000),
    INT("max_attempts", max_attempts, 1, 100),
    STR("metrics_listen", set_metrics_listen),
    STR("metrics_token", set_metrics_token),
    STR("metrics_token_file", set_metrics_token_file),
    INT("metrics_max_connections", metrics_max_connections, 1, 10000),
    INT("metrics_timeout_ms", metrics_timeout_ms, 100, 3600000),
    INT("lease_ttl_ms", lease_ttl_ms, 1000, 600000),
    INT("answer_ms", answer_ms, 1000, 86400000),
    INT("wait_replicas", wait_replicas, 0, 16),
    INT("replica_forget_ms", replica_forget_ms, 0, 3600000),
    STR("cluster", set_cluster),
    STR("redis_user", set_redis_user),
    STR("redis_password_file", set_password_file),
};
#define NSPECS (sizeof SPECS / sizeof SPECS[0])

static int spec_index(const char *name)
{
    for (size_t i = 0; i < NSPECS; i++)
        if (strcmp(SPECS[i].name, name) == 0) return (int)i;
    return -1;
}

/* ---- defaults, copies, freeing ----------------------------------------- */

const char *config_default_path(void)
{
    /* The environment wins so packagers, tests and containers can point
     * at another file without a -c in every unit file. */
    const char *env = getenv("ALLOCD_CONFIG");
    if (env && *env) return env;
    return ALLOCD_SYSCONFDIR "/allocd/allocd.conf";
}

static char *default_instance(void)
{
    char host[256];
    if (gethostname(host, sizeof host) == 0) {
        host[sizeof host - 1] = '\0';
        if (instance_ok(host)) return strdup(host);
    }
    return strdup(FALLBACK_INSTANCE);
}

/* Treats *c as uninitialised. If an allocation fails a string stays NULL;
 * config_load reports that as "out of memory". */
void config_defaults(allocd_config *c)
{
    char unused[128];
    memset(c, 0, sizeof *c);
    c->redis_url = strdup(DEFAULT_REDIS_URL);
    redis_url_parse(DEFAULT_REDIS_URL, &c->redis, unused, sizeof unused);
    c->prefix = strdup(DEFAULT_PREFIX);
    c->instance = default_instance();
    c->chunk = 512;
    c->max_request_bytes = 4096;
    c->heap_reserve_mb = 64;
    c->log_level = ALOG_INFO;
    c->log_maxlen = 0;
    c->log_chunk = 1;
    c->redis_timeout_ms = 5000;
    c->connect_timeout_ms = 2000;
    c->backoff_min_ms = 100;
    c->backoff_max_ms = 5000;
    c->registry_interval_ms = 250;
    c->idle_wait_ms = 1000;
    c->drain_timeout_ms = 10000;
    c->max_attempts = 5;
    c->metrics_listen = strdup("");
    c->metrics_loopback = 1;
    c->metrics_token = strdup("");
    c->metrics_max_connections = 64;
    c->metrics_timeout_ms = 10000;
    c->lease_ttl_ms = 5000;
    c->answer_ms = 60000;
    c->replica_forget_ms = 10000;
    c->cluster = strdup("auto");
    c->redis_user = strdup("");
    c->redis_password_file = strdup("");
    c->source = NULL;
}

void config_free(allocd_config *c)
{
    if (!c) return;
    free(c->redis_url);
    free(c->prefix);
    free(c->instance);
    free(c->source);
    free(c->metrics_listen);
    free(c->metrics_token);
    free(c->cluster);
    free(c->redis_user);
    free(c->redis_password_file);
    memset(c->redis.password, 0, sizeof c->redis.password);
    c->redis_user = c->redis_password_file = NULL;
    c->redis_url = c->prefix = c->instance = c->source = c->metrics_listen = c->cluster = NULL;
    c->metrics_token = NULL;
}

static int dup_field(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return (src && !*dst) ? -1 : 0;
}

/* Deep copy, so a file can be applied to the copy and thrown away whole. */
static int config_copy(allocd_config *dst, const allocd_config *src)
{
    *dst = *src;
    dst->redis_url = dst->prefix = dst->instance = dst->source = dst->metrics_listen = NULL;
    dst->cluster = dst->redis_user = dst->redis_password_file = dst->metrics_token = NULL;
    if (dup_field(&dst->redis_user, src->redis_user) < 0 ||
        dup_field(&dst->redis_password_file, src->redis_password_file) < 0 ||
        dup_field(&dst->metrics_listen, src->metrics_listen) < 0 ||
        dup_field(&dst->metrics_token, src->metrics_token) < 0 ||
        dup_field(&dst->cluster, src->cluster) < 0 ||
        dup_field(&dst->redis_url, src->redis_url) < 0 ||
        dup_field(&dst->prefix, src->prefix) < 0 ||
        dup_field(&dst->instance, src->instance) < 0 ||
        dup_field(&dst->source, src->source) < 0) {
        config_free(dst);
        return -1;
    }
    return 0;
}

/* The one rule between settings. Returns 0, or -1 with a message. */
static int cross_check(const allocd_config *c, char *msg, size_t len, const char **blame)
{
    if (c->backoff_min_ms > c->backoff_max_ms) {
        seterr(msg, len, "backoff_min_ms (%d) must not exceed backoff_max_ms (%d)",
               c->backoff_min_ms, c->backoff_max_ms);
        if (blame) *blame = "backoff_max_ms";
        return -1;
    }
    /* Beyond loopback anyone on the network could read the metrics and the
     * dashboard (batch names, owners, queue sizes): refuse without a token. */
    if (!c->metrics_loopback && (!c->metrics_token || !*c->metrics_token) && !c->metrics_token_unread) {
        seterr(msg, len, "metrics_listen '%s' is not a loopback address: set metrics_token "
               "or metrics_token_file (clients then send 'Authorization: Bearer <token>')",
               c->metrics_listen);
        if (blame) *blame = "metrics_listen";
        return -1;
    }
    return 0;
}

/* ---- integer literals libconfig 1.5 misreads ------------------------- */

static int starts_number(const char *p)
{
    if (*p == '-' || *p == '+') p++;
    return isdigit((unsigned char)p[0]) || (p[0] == '.' && isdigit((unsigned char)p[1]));
}

/* Length of the number token at p, the way libconfig's scanner cuts it:
 * sign, digits/letters/dots, and a sign right after a decimal exponent. */
static size_t number_len(const char *p)
{
    size_t i = (*p == '-' || *p == '+') ? 1 : 0;
    int hex = p[i] == '0' && (p[i + 1] == 'x' || p[i + 1] == 'X');
    for (;; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (isalnum(ch) || ch == '.') continue;
        if (!hex && (ch == '-' || ch == '+') && (p[i - 1] == 'e' || p[i - 1] == 'E'))
            continue;
        return i;
    }
}

/* Checks one number token. Floats pass; integers must fit the type
 * libconfig gives them: int without the L suffix, long long with it. */
static int check_literal(const char *tok, size_t n, char *msg, size_t len)
{
    char buf[128];
    if (n >= sizeof buf) {
        seterr(msg, len, "number '%.20s...' is too long", tok);
        return -1;
    }
    memcpy(buf, tok, n);
    buf[n] = '\0';
    const char *digits = buf + (buf[0] == '-' || buf[0] == '+');
    int hex = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
    if (strchr(buf, '.') || (!hex && strpbrk(buf, "eE"))) return 0;   /* float */
    int is64 = n > 0 && buf[n - 1] == 'L';
    errno = 0;
    long long v = hex ? (long long)strtoull(buf, NULL, 16) : strtoll(buf, NULL, 10);
    int range = errno == ERANGE || (hex && v < 0);
    if (!range && (is64 || (v >= INT_MIN && v <= INT_MAX))) return 0;
    if (range)
        seterr(msg, len, "integer %s is out of range", buf);
    else
        seterr(msg, len, "integer %s is outside the 32-bit range (write %sL for "
               "a 64-bit integer)", buf, buf);
    return -1;
}

/* Comments and strings cannot hold a setting's number: skip them. Returns
 * the position after the comment or string, counting newlines into *line,
 * or NULL for a block comment that never ends: libconfig 1.5 silently
 * drops everything after such a comment, settings included. */
static const char *skip_opaque(const char *p, unsigned *line)
{
    if (*p == '#' || (p[0] == '/' && p[1] == '/')) return p + strcspn(p, "\n");
    if (p[0] == '/' && p[1] == '*') {
        for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
            if (*p == '\n') (*line)++;
        return *p ? p + 2 : NULL;
    }
    for (p++; *p && *p != '"'; p++) {     /* a string */
        if (*p == '\\' && p[1]) p++;
        if (*p == '\n') (*line)++;
    }
    return *p ? p + 1 : p;
}

static int is_name_start(char ch)
{
    return isalpha((unsigned char)ch) || ch == '*' || ch == '@';
}

static int is_name_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_' || ch == '-' || ch == '*';
}

/* Returns 0, or -1 with "file:line: ..." in err. The file has already
 * parsed, so the text is well-formed libconfig. */
static int scan_literals(const char *file, char *err, size_t errlen)
{
    char *text = textfile_read(file, NULL);
    if (!text) {
        seterr(err, errlen, "%s: cannot read: %s", file, strerror(errno ? errno : EIO));
        return -1;
    }
    unsigned line = 1;
    int rc = 0;
    char msg[MSG_MAX];
    for (const char *p = text; rc == 0 && *p;) {
        if (*p == '\n') { line++; p++; }
        else if (*p == '#' || *p == '"' || (p[0] == '/' && (p[1] == '/' || p[1] == '*'))) {
            unsigned start = line;
            if ((p = skip_opaque(p, &line)) == NULL) {
                seterr(err, errlen, "%s:%u: unterminated /* comment", file, start);
                rc = -1;
            }
        }
        else if (is_name_start(*p))
            for (p++; is_name_char(*p); p++) {}
        else if (starts_number(p)) {
            size_t n = number_len(p);
            if (check_literal(p, n, msg, sizeof msg) < 0) {
                seterr(err, errlen, "%s:%u: %s", file, line, msg);
                rc = -1;
            }
            p += n;
        } else p++;
    }
    free(text);
    return rc;
}

/* Every file the settings came from (the file itself and its @includes). */
static int scan_all_literals(config_setting_t *root, const char *path,
                             char *err, size_t errlen)
{
    if (scan_literals(path, err, errlen) < 0) return -1;
    int n = config_setting_length(root);
    for (int i = 0; i < n; i++) {
        const char *f = config_setting_source_file(config_setting_get_elem(root, (unsigned)i));
        int seen = !f || strcmp(f, path) == 0;
        for (int j = 0; j < i && !seen; j++) {
            const char *g = config_setting_source_file(config_setting_get_elem(root, (unsigned)j));
            seen = g && strcmp(f, g) == 0;
        }
        if (!seen && scan_literals(f, err, errlen) < 0) return -1;
    }
    return 0;
}

/* ---- applying one libconfig setting ----------------------------------- */

/* Edit distance, for "did you mean". Names are short; longer input gets
 * no suggestion. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[65];
    if (la > 64 || lb > 64) return (size_t)-1;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static void unknown_setting(const char *name, char *msg, size_t len)
{
    const char *best = NULL;
    size_t best_d = 3;                    /* suggest within 2 edits */
    for (size_t i = 0; i < NSPECS; i++) {
        size_t d = edit_distance(name, SPECS[i].name);
        if (d < best_d) { best_d = d; best = SPECS[i].name; }
    }
    if (best)
        seterr(msg, len, "unknown setting '%s' (did you mean '%s'?)", name, best);
    else
        seterr(msg, len, "unknown setting '%s'", name);
}

static int apply_integer(allocd_config *c, const setting_spec *sp,
                         const config_setting_t *s, char *msg, size_t len)
{
    int type = config_setting_type(s);
    if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64) {
        seterr(msg, len, "'%s' must be an integer", sp->name);
        return -1;
    }
    long long v = config_setting_get_int64(s);
    if (v < sp->min || v > sp->max) {
        if (sp->max == INT64_MAX)
            seterr(msg, len, "'%s' must be at least %lld", sp->name, sp->min);
        else
            seterr(msg, len, "'%s' must be between %lld and %lld", sp->name,
                   sp->min, sp->max);
        return -1;
    }
    if (sp->kind == SET_INT64)
        *(int64_t *)(void *)((char *)c + sp->off) = v;
    else
        *(int *)(void *)((char *)c + sp->off) = (int)v;
    return 0;
}

static int apply_setting(allocd_config *c, const setting_spec *sp,
                         const config_setting_t *s, char *msg, size_t len)
{
    if (sp->kind != SET_STRING) return apply_integer(c, sp, s, msg, len);
    if (config_setting_type(s) != CONFIG_TYPE_STRING) {
        seterr(msg, len, "'%s' must be a string", sp->name);
        return -1;
    }
    return sp->set(c, config_setting_get_string(s), msg, len);
}

static const char *setting_file(const config_setting_t *s, const char *path)
{
    const char *f = config_setting_source_file(s);
    return f ? f : path;
}

/* Applies every root setting to c, remembering in where[] which libconfig
 * setting gave each value (NULL = not in the file) for the cross check. */
static int apply_root(allocd_config *c, config_setting_t *root, const char *path,
                      const config_setting_t **where, char *err, size_t errlen)
{
    char msg[MSG_MAX];
    int n = config_setting_length(root);
    for (int i = 0; i < n; i++) {
        config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
        const char *name = config_setting_name(s);
        int k = name ? spec_index(name) : -1;
        int rc = 0;
        if (k < 0) {
            unknown_setting(name ? name : "?", msg, sizeof msg);
            rc = -1;
        } else {
            rc = apply_setting(c, &SPECS[k], s, msg, sizeof msg);
            where[k] = s;
        }
        if (rc < 0) {
            seterr(err, errlen, "%s:%u: %s", setting_file(s, path),
                   config_setting_source_line(s), msg);
            return -1;
        }
    }
    return 0;
}

/* The cross check, blamed on the setting it names when the file sets it
 * (backoff_max_ms, the usual fix, falls back to backoff_min_ms). */
static int check_file_values(const allocd_config *c, const char *path,
                             const config_setting_t **where, char *err, size_t errlen)
{
    char msg[MSG_MAX];
    const char *blame = NULL;
    if (cross_check(c, msg, sizeof msg, &blame) == 0) return 0;
    const config_setting_t *s = where[spec_index(blame)];
    if (!s && !strcmp(blame, "backoff_max_ms")) s = where[spec_index("backoff_min_ms")];
    if (s)
        seterr(err, errlen, "%s:%u: %s", setting_file(s, path),
               config_setting_source_line(s), msg);
    else    /* both came from earlier sources: no line to point at */
        seterr(err, errlen, "%s: %s", path, msg);
    return -1;
}

/* ---- loading a file --------------------------------------------------- */

/* libconfig says only "file I/O error"; find the real reason first. Returns
 * 0 readable, 1 missing (and allowed to be), -1 with err. */
static int check_readable(const char *path, int must_exist, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        if (e == ENOENT && !must_exist) return 1;
        seterr(err, errlen, "%s: cannot read: %s", path, strerror(e));
        return -1;
    }
    struct stat st;
    int is_dir = fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode);
    fclose(f);
    if (is_dir) {
        seterr(err, errlen, "%s: cannot read: %s", path, strerror(EISDIR));
        return -1;
    }
    return 0;
}

/* No include_dir: libconfig 1.5 would prefix it even to absolute @include
 * paths. So @include paths are taken as written (relative ones from the
 * working directory), and the settings' source files can be reopened as
 * named for the literal scan. */
static int parse_file(config_t *cfg, const char *path, char *err, size_t errlen)
{
    if (config_read_file(cfg, path)) return 0;
    const char *file = config_error_file(cfg);
    if (config_error_type(cfg) == CONFIG_ERR_FILE_IO)
        seterr(err, errlen, "%s: cannot read: %s", file ? file : path,
               config_error_text(cfg));
    else
        seterr(err, errlen, "%s:%d: %s", file ? file : path, config_error_line(cfg),
               config_error_text(cfg));
    return -1;
}

static int apply_file(allocd_config *t, config_t *cfg, const char *path,
                      char *err, size_t errlen)
{
    const config_setting_t *where[NSPECS] = {0};
    if (parse_file(cfg, path, err, errlen) < 0) return -1;
    config_setting_t *root = config_root_setting(cfg);
    if (scan_all_literals(root, path, err, errlen) < 0) return -1;
    if (apply_root(t, root, path, where, err, errlen) < 0) return -1;
    if (check_file_values(t, path, where, err, errlen) < 0) return -1;
    return replace_string(&t->source, path, err, errlen);
}

int config_load_file(allocd_config *c, const char *path, int must_exist,
                     char *err, size_t errlen)
{
    int rc = check_readable(path, must_exist, err, errlen);
    if (rc != 0) return rc;
    allocd_config t;
    if (config_copy(&t, c) < 0) {
        seterr(err, errlen, "%s: out of memory", path);
        return -1;
    }
    config_t cfg;
    config_init(&cfg);
    rc = apply_file(&t, &cfg, path, err, errlen);
    config_destroy(&cfg);
    if (rc < 0) {
        config_free(&t);
        return -1;
    }
    config_free(c);
    *c = t;
    return 0;
}

/* ---- everything together ---------------------------------------------- */

static int override(allocd_config *c, string_setter set, const char *flag,
                    const char *value, char *err, size_t errlen)
{
    char msg[MSG_MAX];
    if (!value) return 0;
    if (set(c, value, msg, sizeof msg) == 0) return 0;
    seterr(err, errlen, "command line: --%s: %s", flag, msg);
    return -1;
}

static int apply_cli(allocd_config *c, const cli_args *a, char *err, size_t errlen)
{
    if (override(c, set_redis, "redis", a->redis_url, err, errlen) < 0) return -1;
    if (override(c, set_prefix, "prefix", a->prefix, err, errlen) < 0) return -1;
    if (override(c, set_redis_user, "redis-user", a->redis_user, err, errlen) < 0) return -1;
    if (override(c, set_password_file, "redis-password-file", a->redis_password_file,
                 err, errlen) < 0) return -1;
    return override(c, set_instance, "instance", a->instance, err, errlen);
}

/* The final word on the merged values. Each source was checked as it was
 * applied; this catches what only the combination can break. */
static int validate(const allocd_config *c, char *err, size_t errlen)
{
    char msg[MSG_MAX];
    if (!c->redis_url || !c->prefix || !c->instance || !c->cluster || !c->metrics_listen ||
        !c->redis_user || !c->redis_password_file || !c->metrics_token) {
        seterr(err, errlen, "config: out of memory");
        return -1;
    }
    if (cross_check(c, msg, sizeof msg, NULL) == 0) return 0;
    seterr(err, errlen, "%s: %s", c->source ? c->source : "config", msg);
    return -1;
}

/* The URL, redis_user, redis_password_file and $ALLOCD_REDIS_PASSWORD
 * together give the login (base/secret.h). */
static int apply_secret(allocd_config *c, char *err, size_t errlen)
{
    char msg[MSG_MAX];
    if (secret_apply(&c->redis, c->redis_user, c->redis_password_file, msg, sizeof msg) == 0)
        return 0;
    seterr(err, errlen, "%s: %s", c->source ? c->source : "config", msg);
    return -1;
}

int config_load(allocd_config *c, const cli_args *a, char *err, size_t errlen)
{
    static const cli_args none = { CLI_RUN, NULL, NULL, NULL, NULL, NULL, NULL, 0 };
    if (!a) a = &none;
    config_defaults(c);
    c->tool = a->tool;
    int rc = -1;
    if (!c->redis_url || !c->prefix || !c->instance)
        seterr(err, errlen, "config: out of memory");
    else if (a->config_path)
        rc = config_load_file(c, a->config_path, 1, err, errlen);
    else
        rc = config_load_file(c, config_default_path(), 0, err, errlen);
    /* rc == 1: no default file; the defaults stand and source stays NULL. */
    if (rc >= 0 && apply_cli(c, a, err, errlen) == 0 && validate(c, err, errlen) == 0 &&
        apply_secret(c, err, errlen) == 0)
        return 0;
    config_free(c);
    return -1;
}
