/* itest.c -- see itest.h. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "itest.h"
#include "wire/log_entry.h"

int itest_setup(void **state)
{
    itest *t = calloc(1, sizeof *t);
    if (!t || harness_redis_start(&t->redis, NULL) < 0) return -1;
    t->c = harness_redis_connect(&t->redis);
    *state = t;
    return t->c ? 0 : -1;
}

int itest_teardown(void **state)
{
    itest *t = *state;
    if (t->allocd.pid > 0 && harness_allocd_stop(&t->allocd) != 0) harness_allocd_dump_log(&t->allocd);
    redisFree(t->c);
    harness_redis_stop(&t->redis);
    free(t);
    return 0;
}

void itest_start(itest *t, const char *extra_conf)
{
    assert_int_equal(harness_allocd_start(&t->allocd, &t->redis, extra_conf), 0);
}

int itest_start_metrics(itest *t, const char *b)
{
    int port = itest_free_port();
    char conf[100], stats[160];
    snprintf(conf, sizeof conf, "metrics_listen = \"127.0.0.1:%d\";", port);
    itest_start(t, conf);
    snprintf(stats, sizeof stats, "alloc:{%s}:stats", b);
    itest_expect_hget(t->c, stats, "state");
    harness_sleep_ms(1500);
    return port;
}

/* Fails the test on no reply or an error reply; frees the reply. */
static void expect_ok(redisReply *r)
{
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR) fail_msg("redis: %s", r->str);
    freeReplyObject(r);
}

void itest_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    expect_ok(r);
}

/* HSET alloc:{b}:<hash> with the space-separated words of fields. */
static void hset_words(redisContext *c, const char *b, const char *hash, const char *fields)
{
    char key[160], words[2048];
    snprintf(key, sizeof key, "alloc:{%s}:%s", b, hash);
    assert_true(strlen(fields) < sizeof words);
    snprintf(words, sizeof words, "%s", fields);
    const char *argv[128] = { "HSET", key };
    int argc = 2;
    char *save = NULL;
    for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        assert_true(argc < 128);
        argv[argc++] = w;
    }
    expect_ok(redisCommandArgv(c, argc, argv, NULL));
}

void itest_batch(redisContext *c, const char *b, const char *meta, const char *capacity,
                 const char *attrs)
{
    hset_words(c, b, "meta", meta);
    hset_words(c, b, "capacity", capacity);
    if (attrs) hset_words(c, b, "attrs", attrs);
    itest_cmd(c, "SADD alloc:batches %s", b);
}

int itest_sh(const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    int st = system(line);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int itest_ctl(itest *t, char **out, const char *fmt, ...)
{
    char args[1500], line[2500];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof args);
    n = snprintf(line, sizeof line, "%s/allocctl --redis '%s' %s", harness_build_dir(), t->redis.url, args);
    assert_true(n >= 0 && (size_t)n < sizeof line);
    char *const argv[] = { "/bin/sh", "-c", line, NULL };
    char *buf;
    int rc = proc_run_capture(argv, &buf);
    if (rc < 0) fail_msg("allocctl could not be run: %s", line);
    if (out) *out = buf;
    else free(buf);
    return rc;
}

void itest_push(itest *t, const char *b, const char *fmt, ...)
{
    char json[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(json, sizeof json, fmt, ap);
    va_end(ap);
    itest_cmd(t->c, "RPUSH alloc:{%s}:queue %s", b, json);
}

json_t *itest_result(itest *t, const char *b, const char *id)
{
    char key[128];
    snprintf(key, sizeof key, "alloc:{%s}:results", b);
    char *v = harness_wait_hget(t->c, key, id, 10000);
    if (!v) {
        harness_allocd_dump_log(&t->allocd);
        fail_msg("no result for %s within 10 s", id);
    }
    json_error_t e;
    json_t *doc = json_loads(v, 0, &e);
    free(v);
    assert_non_null(doc);
    return doc;
}

const char *itest_jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

long long itest_jint(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

void itest_expect(itest *t, const char *b, const char *id, const char *status,
                  const char *detail)
{
    json_t *r = itest_result(t, b, id);
    int ok = !strcmp(itest_jstr(r, "status"), status);
    if (ok && detail) {
        int by_reason = !strcmp(status, "rejected") || !strcmp(status, "invalid");
        ok = !strcmp(itest_jstr(r, by_reason ? "reason" : "item"), detail);
    }
    if (!ok) {
        char *s = json_dumps(r, 0);
        fail_msg("%s: expected %s %s, got %s", id, status, detail ? detail : "", s);
    }
    json_decref(r);
}

int itest_count_in_log(const harness_allocd *d, const char *needle)
{
    FILE *f = fopen(d->log, "r");
    if (!f) return 0;
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f)) if (strstr(line, needle)) n++;
    fclose(f);
    return n;
}

int itest_wait_log(const harness_allocd *d, const char *needle, int n, int timeout_ms)
{
    int have = itest_count_in_log(d, needle);
    for (int waited = 0; have < n && waited < timeout_ms; waited += 10) {
        harness_sleep_ms(10);
        have = itest_count_in_log(d, needle);
    }
    return have;
}

int itest_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

int itest_port_hold(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    /* Without SO_REUSEADDR first: that also keeps out a server binding
     * with it. With it when the dead server's connections, in TIME_WAIT,
     * hold the port too: a bind(0) without it still conflicts. */
    for (int reuse = 0; reuse <= 1; reuse++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return -1;
        if ((!reuse || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof reuse) == 0) &&
            bind(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return fd;
        close(fd);
    }
    return -1;
}

/* GET path; returns malloc'd response (headers and body) or NULL. */
char *itest_http_get(int port, const char *path)
{
    return itest_http_get_with(port, path, "");
}

char *itest_http_get_with(int port, const char *path, const char *headers)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { close(fd); return NULL; }
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n",
                     path, headers);
    if (write(fd, req, (size_t)n) != n) { close(fd); return NULL; }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)r;
    buf[len] = '\0';
    close(fd);
    return buf;
}

void itest_expect_hget(redisContext *c, const char *key, const char *field)
{
    char *v = harness_wait_hget(c, key, field, 10000);
    assert_non_null(v);
    free(v);
}


static int itest__log_event(void *ud, const log_field *f, size_t n)
{
    json_t *ev = json_object();
    for (size_t i = 0; ev && i < n; i++)
        json_object_set_new(ev, f[i].key, json_stringn(f[i].val, f[i].vlen));
    return ev && json_array_append_new(ud, ev) == 0 ? 0 : -2;
}

json_t *itest_log(redisContext *c, const char *b)
{
    json_t *events = json_array();
    redisReply *x = redisCommand(c, "XRANGE alloc:{%s}:log - +", b);
    assert_true(events && x && x->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < x->elements; i++) {
        const redisReply *kv = x->element[i]->element[1];
        log_field f[2 * LOG_EVENT_MAX_FIELDS];
        size_t n = 0;
        for (size_t j = 0; j + 1 < kv->elements && n < sizeof f / sizeof *f; j += 2)
            f[n++] = (log_field){ kv->element[j]->str, kv->element[j + 1]->str, kv->element[j + 1]->len };
        char err[160] = "";
        if (log_entry_decode(f, n, itest__log_event, events, err, sizeof err) < 0)
            fail_msg("%s log entry %s: %s", b, x->element[i]->element[0]->str, err);
    }
    freeReplyObject(x);
    return events;
}

long long itest_log_len(redisContext *c, const char *b)
{
    json_t *events = itest_log(c, b);
    long long n = (long long)json_array_size(events);
    json_decref(events);
    return n;
}

int itest_log_count(redisContext *c, const char *b, const char *type)
{
    json_t *events = itest_log(c, b), *ev;
    size_t i;
    int n = 0;
    json_array_foreach(events, i, ev)
        if (!strcmp(itest_jstr(ev, "type"), type)) n++;
    json_decref(events);
    return n;
}
