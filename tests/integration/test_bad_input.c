/* test_bad_input.c -- the bad input corpus (tests/data/bad/) through the
 * real daemon.
 *
 * Every corpus entry (plus a generated 1 MB payload) is pushed with a valid
 * request behind it, in 22 rounds. After each round: every "dead" entry is
 * in P:{B}:dead, in push order, holding exactly the pushed bytes; every
 * "invalid" entry has an invalid/bad_request result under its id; every
 * valid request in between got its normal answer (choose -> granted in even
 * rounds, release -> done in odd ones), so garbage never eats or disturbs
 * a neighbour; stats add up. allocd's resident memory (VmRSS) after the
 * warm-up round and after 20 more rounds must differ by less than 4 MB: a
 * leak per bad request would show as megabytes over 1,700 of them (and
 * 20 MB of 1 MB payloads).
 *
 * test_big_numbers_get_a_result: numbers jansson cannot hold must not send
 * a readable id to dead (they once did). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <cmocka.h>
#include <jansson.h>

#include "harness.h"
#include "itest.h"
#include "core/base64.h"

#define CORPUS_DIR "tests/data/bad"
#define MAX_CASES 256
/* Leaks are measured on the heap bytes allocd holds (its metrics' glibc
 * mallinfo2 count), not on RSS: RSS moves by megabytes as the allocator
 * keeps or trims free memory, which no leak does. The heap count has two
 * kinds of noise too: a buffer that comes and goes (a chunk of large bad
 * requests in flight as the count is read), and a buffer that grows once
 * to a new high-water mark (the apply pipeline, when the timing happens to
 * put several large requests in one chunk) and stays. So the measured
 * rounds are three windows; each window's reading is its least (a passing
 * buffer raises only some), and a leak must show as growth from the first
 * window to the second AND from the second to the third (a high-water
 * mark is reached once). The first rounds grow buffers and maps to their
 * working size and are not measured. */
#define WARMUP_ROUNDS 24
#define WINDOW 10
#define ROUNDS (WARMUP_ROUNDS + 3 * WINDOW)
#define HEAP_LIMIT_KB 1024

typedef struct bad_case {
    char name[300];
    int dead;               /* 1 dead, 0 invalid */
    char *bytes;
    size_t len;
} bad_case;

typedef struct fixture {
    harness_redis redis;
    harness_allocd allocd;
    redisContext *c;
    bad_case cases[MAX_CASES];
    size_t n;
    char conf[64];          /* metrics_listen on a free port: the heap gauge */
    int metrics_port;
} fixture;

static int cmp_case(const void *a, const void *b)
{
    return strcmp(((const bad_case *)a)->name, ((const bad_case *)b)->name);
}

static int load_corpus(fixture *f)
{
    DIR *d = opendir(CORPUS_DIR);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d)) && f->n < MAX_CASES - 1) {
        size_t nl = strlen(e->d_name);
        if (nl < 6 || strcmp(e->d_name + nl - 5, ".json")) continue;
        bad_case *c = &f->cases[f->n];
        snprintf(c->name, sizeof c->name, "%s", e->d_name);
        if (!strncmp(c->name, "dead--", 6)) c->dead = 1;
        else if (strncmp(c->name, "invalid--", 9)) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CORPUS_DIR, e->d_name);
        FILE *fp = fopen(path, "rb");
        if (!fp) continue;
        fseek(fp, 0, SEEK_END);
        long sz = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        c->bytes = malloc((size_t)sz + 1);
        c->len = fread(c->bytes, 1, (size_t)sz, fp);
        fclose(fp);
        f->n++;
    }
    closedir(d);
    qsort(f->cases, f->n, sizeof f->cases[0], cmp_case);
    /* the 1 MB payload, generated rather than committed */
    bad_case *c = &f->cases[f->n++];
    snprintf(c->name, sizeof c->name, "dead--1mb-payload (generated)");
    c->dead = 1;
    size_t big = 1 << 20;
    c->bytes = malloc(big + 1);
    int h = snprintf(c->bytes, big, "{\"id\":\"bad-1mb\",\"user\":\"u1\",\"op\":\"release\",\"pad\":\"");
    memset(c->bytes + h, 'x', big - (size_t)h - 2);
    memcpy(c->bytes + big - 2, "\"}", 2);
    c->len = big;
    return 0;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    *state = f;
    if (load_corpus(f) < 0 || f->n < 31) { fprintf(stderr, "corpus missing or too small\n"); return -1; }
    if (harness_redis_start(&f->redis, NULL) < 0) return -1;
    f->c = harness_redis_connect(&f->redis);
    if (!f->c) return -1;
    itest_batch(f->c, "bad", "kind room max_group 4", "R1 1000 R2 5 R3 5",
                "R1 {\"floor\":1} R2 {\"floor\":2} R3 {\"floor\":3}");
    f->metrics_port = itest_free_port();
    snprintf(f->conf, sizeof f->conf, "metrics_listen = \"127.0.0.1:%d\";", f->metrics_port);
    return harness_allocd_start(&f->allocd, &f->redis, f->conf);
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->allocd.pid > 0) {
        int rc = harness_allocd_stop(&f->allocd);
        if (rc != 0) harness_allocd_dump_log(&f->allocd);
    }
    if (f->c) redisFree(f->c);
    harness_redis_stop(&f->redis);
    for (size_t i = 0; i < f->n; i++) free(f->cases[i].bytes);
    free(f);
    return 0;
}

/* allocd_heap_inuse_bytes from the daemon's metrics, in kB (-1 if none). */
static long heap_kb(const fixture *f)
{
    char *text = itest_http_get(f->metrics_port, "/metrics");
    const char *p = text ? strstr(text, "\nallocd_heap_inuse_bytes ") : NULL;
    long kb = p ? (long)(strtod(p + strlen("\nallocd_heap_inuse_bytes "), NULL) / 1024) : -1;
    free(text);
    return kb;
}

/* The dead entry must hold exactly the pushed bytes. */
static void check_dead_entry(const bad_case *c, const char *entry, size_t len)
{
    /* NUL bytes show up as U+FFFD in raw (raw_base64 has them); allowing
     * NUL here keeps the check meaningful for older entries too */
    json_t *doc = json_loadb(entry, len, JSON_ALLOW_NUL, NULL);
    if (!json_is_object(doc)) fail_msg("%s: dead entry is not a JSON object: %.200s", c->name, entry);
    const char *error = json_string_value(json_object_get(doc, "error"));
    if (!error || !*error) fail_msg("%s: dead entry without error", c->name);
    if (!json_is_integer(json_object_get(doc, "at"))) fail_msg("%s: dead entry without at", c->name);
    /* entries keep at most the first 64 KB, then say so (docs/PROTOCOL.md) */
    size_t want = c->len;
    if (json_is_true(json_object_get(doc, "truncated"))) {
        json_int_t full = json_integer_value(json_object_get(doc, "raw_bytes"));
        if ((size_t)full != c->len) fail_msg("%s: raw_bytes %lld, pushed %zu", c->name, (long long)full, c->len);
        want = 65536;
    } else if (c->len > 65536) {
        fail_msg("%s: a %zu byte request is kept whole in the dead list", c->name, c->len);
    }
    json_t *b64 = json_object_get(doc, "raw_base64");
    if (b64) {
        size_t n = 0;
        char *buf = base64_decode(json_string_value(b64), &n);
        if (!buf || n != want || memcmp(buf, c->bytes, n))
            fail_msg("%s: raw_base64 of the dead entry is not the pushed bytes", c->name);
        free(buf);
    } else {
        json_t *raw = json_object_get(doc, "raw");
        if (json_string_length(raw) != want || memcmp(json_string_value(raw), c->bytes, want))
            fail_msg("%s: raw of the dead entry is not the pushed bytes (%zu vs %zu bytes)", c->name,
                     json_string_length(raw), want);
    }
    json_decref(doc);
}

static json_t *result_of(fixture *f, const char *id)
{
    redisReply *r = redisCommand(f->c, "HGET alloc:{bad}:results %b", id, strlen(id));
    assert_non_null(r);
    json_t *doc = r->type == REDIS_REPLY_STRING ? json_loadb(r->str, r->len, 0, NULL) : NULL;
    freeReplyObject(r);
    return doc;
}

/* The bytes case c pushes in `round`: a dead case as it is; an invalid
 * one with its "bad-" id tag made "rNN-", so every round has new ids.
 * *id gets the id its result is under (NULL for a dead case). The caller
 * frees what differs from c->bytes. */
static char *round_bytes(const bad_case *c, int round, char **id)
{
    *id = NULL;
    if (c->dead) return c->bytes;
    char *bytes = malloc(c->len + 1);
    assert_non_null(bytes);
    memcpy(bytes, c->bytes, c->len);
    bytes[c->len] = '\0';
    char *at = memmem(bytes, c->len, "bad-", 4);
    if (at) { char tag[8]; snprintf(tag, sizeof tag, "r%02d-", round); memcpy(at, tag, 4); }
    json_t *doc = json_loadb(bytes, c->len, 0, NULL);
    const char *s = json_string_value(json_object_get(doc, "id"));
    char plain[128] = "";
    if (!s) {
        /* a number jansson cannot hold: read "id":"..." as text */
        const char *p = memmem(bytes, c->len, "\"id\":\"", 6);
        const char *q = p ? memchr(p + 6, '"', c->len - (size_t)(p + 6 - bytes)) : NULL;
        if (q && q - p - 6 < (long)sizeof plain) {
            memcpy(plain, p + 6, (size_t)(q - p - 6));
            s = plain;
        }
    }
    if (!s) fail_msg("%s: the corpus says invalid but the id cannot be read", c->name);
    *id = strdup(s);
    json_decref(doc);
    return bytes;
}

/* Every case, each followed by a valid request (a choose in even rounds,
 * a release in odd ones), pipelined; waits for the last one's result. */
static void push_round(fixture *f, int round, char **ids)
{
    char last_valid[64] = "";
    for (size_t i = 0; i < f->n; i++) {
        bad_case *c = &f->cases[i];
        char *bytes = round_bytes(c, round, &ids[i]);
        redisAppendCommand(f->c, "RPUSH alloc:{bad}:queue %b", bytes, c->len);
        if (bytes != c->bytes) free(bytes);
        snprintf(last_valid, sizeof last_valid, "v%02d-%zu", round, i);
        char valid[160];
        if (round % 2 == 0)
            snprintf(valid, sizeof valid, "{\"id\":\"%s\",\"user\":\"v%zu\",\"op\":\"choose\",\"room\":\"R1\"}", last_valid, i);
        else
            snprintf(valid, sizeof valid, "{\"id\":\"%s\",\"user\":\"v%zu\",\"op\":\"release\"}", last_valid, i);
        redisAppendCommand(f->c, "RPUSH alloc:{bad}:queue %s", valid);
    }
    for (size_t i = 0; i < 2 * f->n; i++) {
        redisReply *r;
        assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        freeReplyObject(r);
    }
    char *v = harness_wait_hget(f->c, "alloc:{bad}:results", last_valid, 30000);
    if (!v) { harness_allocd_dump_log(&f->allocd); fail_msg("round %d: %s not answered within 30 s", round, last_valid); }
    free(v);
}

/* The valid request after case i was served as usual. */
static void check_valid_after(fixture *f, int round, size_t i)
{
    char vid[64];
    snprintf(vid, sizeof vid, "v%02d-%zu", round, i);
    json_t *vr = result_of(f, vid);
    if (!vr) fail_msg("round %d: valid request after %s got no result", round, f->cases[i].name);
    const char *want = round % 2 == 0 ? "granted" : "done";
    if (strcmp(json_string_value(json_object_get(vr, "status")), want))
        fail_msg("round %d: valid request after %s: %s, expected %s", round, f->cases[i].name,
                 json_string_value(json_object_get(vr, "status")), want);
    json_decref(vr);
}

/* An invalid case's result: invalid, bad_request, with a detail. */
static void check_invalid(fixture *f, int round, const bad_case *c, const char *id)
{
    json_t *res = result_of(f, id);
    if (!res) fail_msg("round %d: %s (id '%.80s') got no result", round, c->name, id);
    if (strcmp(json_string_value(json_object_get(res, "status")), "invalid") ||
        strcmp(json_string_value(json_object_get(res, "reason")), "bad_request") ||
        !json_string_value(json_object_get(res, "detail")))
        fail_msg("round %d: %s: expected invalid/bad_request, got %s", round, c->name,
                 json_dumps(res, JSON_COMPACT));
    json_decref(res);
}

/* stats add up, and nothing is left queued. */
static void check_round_stats(fixture *f, int round)
{
    long long d = proc_int(f->c, "HGET alloc:{bad}:stats dequeued"),
              p = proc_int(f->c, "HGET alloc:{bad}:stats processed"),
              dd = proc_int(f->c, "HGET alloc:{bad}:stats dead"),
              du = proc_int(f->c, "HGET alloc:{bad}:stats duplicates");
    if (d != p + dd + du) fail_msg("round %d: dequeued %lld != processed %lld + dead %lld + duplicates %lld", round, d, p, dd, du);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{bad}:dead"), dd);
    assert_int_equal(proc_int(f->c, "LLEN alloc:{bad}:queue"), 0);
}

static void one_round(fixture *f, int round)
{
    long long dead_before = proc_int(f->c, "LLEN alloc:{bad}:dead");
    char **ids = calloc(f->n, sizeof *ids);
    assert_non_null(ids);
    push_round(f, round, ids);
    size_t n_dead = 0;
    for (size_t i = 0; i < f->n; i++) n_dead += f->cases[i].dead;
    redisReply *dl = redisCommand(f->c, "LRANGE alloc:{bad}:dead %lld -1", dead_before);
    assert_non_null(dl);
    if (dl->elements != n_dead) fail_msg("round %d: %zu new dead entries, expected %zu", round, dl->elements, n_dead);
    size_t k = 0;
    for (size_t i = 0; i < f->n; i++) {
        const bad_case *c = &f->cases[i];
        check_valid_after(f, round, i);
        if (c->dead) {
            check_dead_entry(c, dl->element[k]->str, dl->element[k]->len);
            k++;
            continue;
        }
        check_invalid(f, round, c, ids[i]);
        free(ids[i]);
    }
    freeReplyObject(dl);
    free(ids);
    check_round_stats(f, round);
}

static void test_corpus_rounds_and_memory(void **state)
{
    fixture *f = *state;
    size_t n_dead = 0;
    for (size_t i = 0; i < f->n; i++) n_dead += f->cases[i].dead;
    printf("corpus: %zu cases (%zu dead, %zu invalid), %d rounds\n", f->n, n_dead, f->n - n_dead, ROUNDS);
    for (int r = 0; r < WARMUP_ROUNDS; r++) one_round(f, r);  /* choose and release both seen */
    long least[3] = { -1, -1, -1 }, rss_before = proc_status_kb(f->allocd.pid, "VmRSS");
    for (int r = WARMUP_ROUNDS; r < ROUNDS; r++) {
        one_round(f, r);
        long kb = heap_kb(f), *w = &least[(r - WARMUP_ROUNDS) / WINDOW];
        if (*w < 0 || kb < *w) *w = kb;
    }
    long rss_after = proc_status_kb(f->allocd.pid, "VmRSS");
    long g1 = least[1] - least[0], g2 = least[2] - least[1];
    long growth = g1 < g2 ? g1 : g2;
    printf("allocd heap in use, least of each %d rounds: %ld, %ld, %ld kB (leak growth %ld kB, limit %d kB); "
           "VmRSS %ld -> %ld kB\n", WINDOW, least[0], least[1], least[2], growth, HEAP_LIMIT_KB,
           rss_before, rss_after);
    if (proc_is_asan(f->allocd.pid))
        printf("allocd is an ASan build: heap growth not checked (its allocator); LeakSanitizer checks at exit\n");
    else {
        assert_true(least[0] > 0 && least[1] > 0 && least[2] > 0);
        assert_true(growth < HEAP_LIMIT_KB);
    }
    assert_true(harness_allocd_alive(&f->allocd));
    /* a clean drain: exit 0 (under ASan also: no leak found at exit) */
    int rc = harness_allocd_stop(&f->allocd);
    if (rc != 0) harness_allocd_dump_log(&f->allocd);
    assert_int_equal(rc, 0);
    assert_int_equal(harness_allocd_start(&f->allocd, &f->redis, f->conf), 0);
}

/* Valid JSON with a readable id but a number beyond int64 or a double:
 * jansson refuses the document, and allocd once sent it to dead, leaving the
 * producer without a result. It must get an `invalid` result. */
static void test_big_numbers_get_a_result(void **state)
{
    fixture *f = *state;
    redisReply *r = redisCommand(f->c, "RPUSH alloc:{bad}:queue %s",
                                 "{\"id\":\"big-1\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"R1\",\"qty\":99999999999999999999}");
    freeReplyObject(r);
    r = redisCommand(f->c, "RPUSH alloc:{bad}:queue %s",
                     "{\"id\":\"big-2\",\"user\":\"u1\",\"op\":\"release\",\"note\":1e999}");
    freeReplyObject(r);
    char *v1 = harness_wait_hget(f->c, "alloc:{bad}:results", "big-1", 5000);
    char *v2 = harness_wait_hget(f->c, "alloc:{bad}:results", "big-2", 5000);
    if (!v1 || !v2) fail_msg("readable ids big-1/big-2 got no result (big-1: %s, big-2: %s)", v1 ? v1 : "none", v2 ? v2 : "none");
    assert_non_null(strstr(v1, "\"status\":\"invalid\""));
    assert_non_null(strstr(v2, "out of range"));
    free(v1);
    free(v2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_rounds_and_memory),
        cmocka_unit_test(test_big_numbers_get_a_result),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
