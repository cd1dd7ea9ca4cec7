/* archive_fixture.c -- see archive_fixture.h. */
#include "archive_fixture.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

void afix_conf(afix *f, const char *extra)
{
    snprintf(f->conf, sizeof f->conf, "%s/allocctl.conf", f->redis.dir);
    FILE *cf = fopen(f->conf, "w");
    assert_non_null(cf);
    fprintf(cf, "redis = \"%s\";\nprefix = \"alloc\";\n%s\n", f->redis.url, extra ? extra : "");
    fclose(cf);
}

int afix_setup(void **state)
{
    afix *f = calloc(1, sizeof *f);
    *state = f;
    /* appendonly: a restart of Redis (archiver and allocd ride it out) keeps the data */
    if (!f || harness_redis_start(&f->redis, "--appendonly yes --appendfsync no") < 0) return -1;
    if (proc_pg_start(&f->pg, "pg") < 0) return -1;
    f->c = harness_redis_connect(&f->redis);
    f->db = PQconnectdb(f->pg.conninfo);
    if (!f->c || PQstatus(f->db) != CONNECTION_OK) return -1;
    afix_conf(f, NULL);
    return 0;
}

int afix_teardown(void **state)
{
    afix *f = *state;
    if (!f) return 0;
    if (f->allocd.pid > 0 && harness_allocd_stop(&f->allocd) != 0) harness_allocd_dump_log(&f->allocd);
    if (f->db) PQfinish(f->db);
    if (f->c) redisFree(f->c);
    proc_pg_stop(&f->pg);
    harness_redis_stop(&f->redis);
    free(f);
    return 0;
}

void afix_start_allocd(afix *f, const char *extra_conf)
{
    char conf[600];
    snprintf(conf, sizeof conf, "registry_interval_ms = 100;\n%s", extra_conf ? extra_conf : "");
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, conf), 0);
}

void afix_stock_batch(afix *f, const char *b, int cap, int n_items)
{
    itest_cmd(f->c, "HSET alloc:{%s}:meta kind stock per_user 2", b);
    for (int i = 1; i <= n_items; i++) itest_cmd(f->c, "HSET alloc:{%s}:capacity sku-%d %d", b, i, cap);
    itest_cmd(f->c, "SADD alloc:batches %s", b);
}

void afix_room_batch(afix *f, const char *b, int n_rooms, int beds)
{
    itest_cmd(f->c, "HSET alloc:{%s}:meta kind room", b);
    for (int i = 0; i < n_rooms; i++) {
        itest_cmd(f->c, "HSET alloc:{%s}:capacity R%d %d", b, 101 + i, beds);
        itest_cmd(f->c, "HSET alloc:{%s}:attrs R%d {\"floor\":%d}", b, 101 + i, i % 3);
    }
    itest_cmd(f->c, "SADD alloc:batches %s", b);
}

static long long processed(afix *f, const char *b)
{
    return proc_int(f->c, "HGET alloc:{%s}:stats processed", b);
}

void afix_wait_processed(afix *f, const char *b, long long n)
{
    for (int i = 0; i < 1500 && processed(f, b) < n; i++) harness_sleep_ms(20);
    assert_true(processed(f, b) >= n);
}

static void push_all(afix *f, const char *b, char **reqs, int n)
{
    long long before = processed(f, b);
    for (int i = 0; i < n; i++) redisAppendCommand(f->c, "RPUSH alloc:{%s}:queue %s", b, reqs[i]);
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
        free(reqs[i]);
    }
    afix_wait_processed(f, b, before + n);
}

/* A cancel of the order of request id (granted), as a request. */
static char *cancel_of(afix *f, const char *b, const char *id, int n)
{
    char *res = harness_str(f->c, "HGET alloc:{%s}:results %s", b, id);
    if (!res) return NULL;
    json_t *j = json_loads(res, 0, NULL);
    free(res);
    const char *order = j ? json_string_value(json_object_get(j, "order")) : NULL;
    const char *user = j ? json_string_value(json_object_get(j, "user")) : NULL;
    char *req = NULL;
    if (order && user && asprintf(&req, "{\"id\":\"c-%d\",\"user\":\"%s\",\"op\":\"cancel\",\"order\":\"%s\"}",
                                  n, user, order) < 0) req = NULL;
    json_decref(j);
    return req;
}

void afix_stock_traffic_from(afix *f, const char *b, int n, int from)
{
    char **reqs = calloc((size_t)n, sizeof *reqs);
    for (int i = 0; i < n; i++) {
        int k = from + i;
        assert_true(asprintf(&reqs[i], "{\"id\":\"r-%d\",\"user\":\"u-%d\",\"op\":\"buy\",\"item\":\"sku-%d\"}",
                             k, k % 6000, 1 + k % 3) > 0);
    }
    push_all(f, b, reqs, n);
    int nc = 0;
    for (int i = 0; i < n; i += 7) {
        char id[32];
        snprintf(id, sizeof id, "r-%d", from + i);
        char *c = cancel_of(f, b, id, from + i);
        if (c) reqs[nc++] = c;
    }
    push_all(f, b, reqs, nc);
    free(reqs);
}

void afix_stock_traffic(afix *f, const char *b, int n)
{
    afix_stock_traffic_from(f, b, n, 0);
}

void afix_room_traffic(afix *f, const char *b, int n)
{
    char **reqs = calloc((size_t)n, sizeof *reqs);
    for (int i = 0; i < n; i++) {
        int u = i % 30, r = 101 + (i * 7) % 12;
        const char *fmt = i % 5 == 0 ? "{\"id\":\"q-%d\",\"user\":\"s-%d\",\"op\":\"auto\",\"prefs\":[\"R%d\"],\"filter\":{\"floor\":1}}"
                        : i % 5 == 3 ? "{\"id\":\"q-%d\",\"user\":\"s-%d\",\"op\":\"release\",\"x\":%d}"
                        : i % 5 == 4 ? "{\"id\":\"q-%d\",\"user\":\"s-%d\",\"op\":\"switch\",\"room\":\"R%d\"}"
                        : "{\"id\":\"q-%d\",\"user\":\"s-%d\",\"op\":\"choose\",\"room\":\"R%d\"}";
        assert_true(asprintf(&reqs[i], fmt, i, u, r) > 0);
    }
    push_all(f, b, reqs, n);
    free(reqs);
}

static int run_ctl(afix *f, char **out, const char **args)
{
    const char *argv[48] = { harness_allocctl_bin(), "-c", f->conf };
    int n = 3;
    for (int i = 0; args[i] && n < 47; i++) argv[n++] = args[i];
    argv[n] = NULL;
    int rc = proc_run_capture((char *const *)argv, out);
    assert_true(rc >= 0);
    return rc;
}

char *afix_ctl(afix *f, int want, ...)
{
    const char *a[40];
    int n = 0;
    va_list ap;
    va_start(ap, want);
    for (const char *s; n < 39 && (s = va_arg(ap, const char *)) != NULL;) a[n++] = s;
    va_end(ap);
    a[n] = NULL;
    char *out = NULL;
    int rc = run_ctl(f, &out, a);
    if (rc != want) {
        if (f->allocd.pid > 0) harness_allocd_dump_log(&f->allocd);
        fail_msg("allocctl %s %s: exit %d, expected %d; output:\n%s", a[0], n > 1 ? a[n - 1] : "",
                 rc, want, out);
    }
    return out;
}

pid_t afix_ctl_spawn(afix *f, ...)
{
    char *argv[48] = { (char *)harness_allocctl_bin(), "-c", f->conf };
    int n = 3;
    va_list ap;
    va_start(ap, f);
    for (char *s; n < 47 && (s = va_arg(ap, char *)) != NULL;) argv[n++] = s;
    va_end(ap);
    argv[n] = NULL;
    char log[400];
    snprintf(log, sizeof log, "%s/allocctl-bg.log", f->redis.dir);
    pid_t pid = proc_spawn(argv, log);
    assert_true(pid > 0);
    return pid;
}

/* A query's result, reconnecting once after a restart of the server. */
static PGresult *pg_exec(afix *f, const char *sql, ExecStatusType want)
{
    PGresult *r = PQexec(f->db, sql);
    if (PQresultStatus(r) != want && PQstatus(f->db) != CONNECTION_OK) {
        PQclear(r);
        PQreset(f->db);
        r = PQexec(f->db, sql);
    }
    if (PQresultStatus(r) != want) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", PQerrorMessage(f->db));
        PQclear(r);
        fail_msg("%s: %s", sql, msg);
    }
    return r;
}

long long afix_pg_int(afix *f, const char *sql)
{
    PGresult *r = pg_exec(f, sql, PGRES_TUPLES_OK);
    long long v = PQntuples(r) == 1 ? atoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    if (v < 0) fail_msg("%s: not one row", sql);
    return v;
}

void afix_pg_exec(afix *f, const char *sql)
{
    PQclear(pg_exec(f, sql, PGRES_COMMAND_OK));
}

/* One column of a query, in order, as a list of malloc'd strings. */
static char **pg_column(afix *f, const char *sql, const char *batch, size_t *n)
{
    const char *params[1] = { batch };
    PGresult *r = PQexecParams(f->db, sql, 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK && PQstatus(f->db) != CONNECTION_OK) {
        PQclear(r);
        PQreset(f->db);
        r = PQexecParams(f->db, sql, 1, NULL, params, NULL, NULL, 0);
    }
    if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("%s: %s", sql, PQerrorMessage(f->db));
    *n = (size_t)PQntuples(r);
    char **v = calloc(*n + 1, sizeof *v);
    for (size_t i = 0; i < *n; i++) v[i] = strdup(PQgetvalue(r, (int)i, 0));
    PQclear(r);
    return v;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* How many events a log entry holds: n of a chunk-format entry, else 1. */
static long long entry_events(const redisReply *e)
{
    const redisReply *kv = e->element[1];
    const char *format = NULL, *n = NULL;
    for (size_t j = 0; j + 1 < kv->elements; j += 2) {
        if (!strcmp(kv->element[j]->str, "format")) format = kv->element[j + 1]->str;
        if (!strcmp(kv->element[j]->str, "n")) n = kv->element[j + 1]->str;
    }
    if (!format || strcmp(format, "chunk")) return 1;
    assert_non_null(n);
    return atoll(n);
}

long long afix_assert_log_archived(afix *f, const char *b)
{
    size_t n;
    char **db = pg_column(f, "SELECT stream_id || '#' || ev_idx FROM alloc_events WHERE batch = $1 "
                             "ORDER BY id_ms, id_seq, ev_idx", b, &n);
    size_t at = 0;
    char start[64] = "-", want[96];
    for (;;) {
        redisReply *r = redisCommand(f->c, "XRANGE alloc:{%s}:log %s + COUNT 1000", b, start);
        assert_non_null(r);
        for (size_t i = 0; i < r->elements; i++) {
            const char *id = r->element[i]->element[0]->str;
            long long events = entry_events(r->element[i]);
            for (long long k = 0; k < events; k++, at++) {
                snprintf(want, sizeof want, "%s#%lld", id, k);
                if (at >= n) fail_msg("%s: log event %s is not in alloc_events (it has %zu rows)", b, want, n);
                if (strcmp(db[at], want)) fail_msg("%s: row %zu is %s, log event is %s", b, at, db[at], want);
            }
        }
        size_t got = r->elements;
        if (got) snprintf(start, sizeof start, "(%s", r->element[got - 1]->element[0]->str);
        freeReplyObject(r);
        if (got < 1000) break;
    }
    if (at != n) fail_msg("%s: alloc_events has %zu rows, the log %zu events", b, n, at);
    assert_true(n > 0);
    free_list(db, n);
    return (long long)n;
}

void afix_assert_results_archived(afix *f, const char *b)
{
    size_t n;
    char **db = pg_column(f, "SELECT req_id || ' ' || result::text FROM alloc_results WHERE batch = $1 "
                             "ORDER BY req_id COLLATE \"C\"", b, &n);
    redisReply *r = redisCommand(f->c, "HGETALL alloc:{%s}:results", b);
    assert_non_null(r);
    size_t final = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        json_t *j = json_loads(r->element[i + 1]->str, 0, NULL);
        assert_non_null(j);
        if (strcmp(itest_jstr(j, "status"), "waiting")) {
            final++;
            /* the row for this id, found by bisection over the sorted list */
            size_t lo = 0, hi = n, klen = r->element[i]->len;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strncmp(db[mid], r->element[i]->str, klen);
                if (!c) c = db[mid][klen] == ' ' ? 0 : 1;
                if (c < 0) lo = mid + 1; else hi = mid;
            }
            if (lo >= n || strncmp(db[lo], r->element[i]->str, klen) || db[lo][klen] != ' ')
                fail_msg("%s: result %s is not in alloc_results", b, r->element[i]->str);
            json_t *row = json_loads(db[lo] + klen + 1, 0, NULL);
            if (!json_equal(row, j))
                fail_msg("%s: result %s differs: %s vs %s", b, r->element[i]->str, db[lo] + klen + 1,
                         r->element[i + 1]->str);
            json_decref(row);
        }
        json_decref(j);
    }
    freeReplyObject(r);
    if (final != n) fail_msg("%s: alloc_results has %zu rows, Redis %zu final results", b, n, final);
    free_list(db, n);
}

void afix_wait_archived(afix *f, const char *b, int timeout_ms)
{
    char q1[200], q2[200];
    snprintf(q1, sizeof q1, "SELECT count(*) FROM alloc_events WHERE batch = '%s'", b);
    snprintf(q2, sizeof q2, "SELECT count(*) FROM alloc_results WHERE batch = '%s'", b);
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        long long events = itest_log_len(f->c, b);
        long long hlen = proc_int(f->c, "HLEN alloc:{%s}:results", b);
        if (afix_pg_int(f, q1) == events && afix_pg_int(f, q2) == hlen) return;
        harness_sleep_ms(50);
    }
    fail_msg("%s: not archived within %d ms", b, timeout_ms);
}
