/* test_apply_txn.c -- the exact bytes a decided chunk writes to Redis.
 *
 * Each tests/data/apply_txn/NAME.case sets a batch up, decides one chunk
 * with the worker's own decide_chunk (worker/decide.h) and encodes it with
 * apply_txn_encode (worker/apply_txn.h) under a fixed context: batch "b"
 * with prefix "alloc", a fixed lease token and epoch, now = NOW below. The
 * RESP bytes -- every command of the transaction, back to back, as they go
 * on the wire -- must equal NAME.resp byte for byte. The .resp files are
 * the contract of what a chunk writes: when one changes, read it.
 *
 *   UPDATE_GOLDEN=1 build/tests/unit/test_apply_txn
 *
 * rewrites them from the current code. Tests run from the repository root,
 * and the data is read relative to it.
 *
 * FENCE's Lua source is replaced by a placeholder: the script is the
 * scripts module's (and the integration tests'), and a golden file that
 * carried it would change with every edit of it. That it goes with EVAL,
 * with its keys and arguments, is pinned here.
 *
 * A case file, one statement per line ('#' starts a comment line):
 *   meta K=V ...            P:{B}:meta fields (before anything else)
 *   item ID CAPACITY        an item or room
 *   attr ROOM KEY JSON      a room attribute (canonical JSON)
 *   before MS JSON          a request decided at NOW+MS before the chunk,
 *                           its changes taken as already written
 *   chunk queue|ctl|pool|none|early   the chunk's kind (before its requests);
 *                           early = a queue chunk taken before opens_at with
 *                           early=shuffle (its kept requests join the pool)
 *   ctx K=V ...             first_apply, chunks_applied, dequeued,
 *                           pool_served, pool_n, log_maxlen, log_chunk,
 *                           fault (an id), archive_group (a name),
 *                           lottery_seed (64 hex: the batch has a lottery
 *                           pool with this seed), new_seed=1 (the seed was
 *                           drawn by this chunk, not yet written),
 *                           staged=1 (wait_replicas: the transaction that
 *                           stages the chunk's effect, followed in the
 *                           .resp by the publish-only transaction that
 *                           writes it, as the next apply would)
 * Requests of a pool chunk get draw positions 1, 2, ... in order.
 *   req RAW                 a request of the chunk, as pushed
 *   dup RAW                 one that dedup found answered already
 * Order ids come from a counter starting at 1001.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/numtext.h"
#include "redis/argbuf.h"
#include "wire/request.h"
#include "worker/apply_txn.h"
#include "worker/batch_keys.h"
#include "worker/batch_load.h"
#include "worker/chunk.h"
#include "worker/decide.h"
#include "worker/lottery_pool.h"
#include "unit/casedir.h"

#define DATA_DIR "tests/data/apply_txn"
#define NOW 1763800000000LL
#define TOKEN "test-host/4242/00c0ffee00c0ffee"
#define MAX_ITEMS 64

typedef struct txn_case {
    char name[128];               /* NAME of NAME.case */
    int line;
    engine_meta meta;
    engine *e;
    uint64_t next_order;
    chunk ch;
    int chunk_set;
    batch_keys keys;
    char trip_key[BATCH_KEY_MAX + 64];
    char fault[ENGINE_ID_MAX + 1];
    char archive_group[72];        /* ctx archive_group=NAME */
    apply_txn_ctx ctx;
    lottery_pool pool;
    argbuf out;
    int staged;                    /* ctx staged=1 */
} txn_case;

#define CASE_FAIL(c, ...) do { \
        fprintf(stderr, "%s.case:%d: ", (c)->name, (c)->line); \
        fail_msg(__VA_ARGS__); \
    } while (0)

static uint64_t next_order(void *data)
{
    txn_case *c = data;
    return c->next_order++;
}

/* The engine is made at the first statement after the meta lines. */
static engine *eng(txn_case *c)
{
    if (c->e) return c->e;
    if (!c->meta.kind) CASE_FAIL(c, "no 'meta kind=...' before the first statement");
    c->e = engine_new(&c->meta, 42);
    assert_non_null(c->e);
    engine_set_order_source(c->e, next_order, c);
    return c->e;
}

static void meta_line(txn_case *c, char *rest)
{
    if (c->e) CASE_FAIL(c, "meta after the batch was set up");
    for (char *kv = strtok(rest, " "); kv; kv = strtok(NULL, " ")) {
        char *eq = strchr(kv, '='), err[200];
        if (!eq) CASE_FAIL(c, "meta wants K=V, not '%s'", kv);
        *eq = '\0';
        if (batch_load_meta_field(&c->meta, kv, eq + 1, err, sizeof err) < 0) CASE_FAIL(c, "%s", err);
    }
}

static void ctx_line(txn_case *c, char *rest)
{
    struct { const char *name; int64_t *dst; } ints[] = {
        { "chunks_applied", &c->ctx.chunks_applied }, { "dequeued", &c->ctx.dequeued },
        { "log_maxlen", &c->ctx.log_maxlen },
    };
    for (char *kv = strtok(rest, " "); kv; kv = strtok(NULL, " ")) {
        char *eq = strchr(kv, '=');
        if (!eq) CASE_FAIL(c, "ctx wants K=V, not '%s'", kv);
        *eq++ = '\0';
        int64_t v = 0;
        int is_int = numtext_parse_i64(eq, &v) == 0;
        int known = 0;
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
            if (!strcmp(kv, ints[i].name) && is_int) { *ints[i].dst = v; known = 1; }
        if (!strcmp(kv, "first_apply") && is_int) { c->ctx.first_apply = (int)v; known = 1; }
        if (!strcmp(kv, "pool_served") && is_int) { c->ctx.pool_served = (size_t)v; known = 1; }
        if (!strcmp(kv, "pool_n") && is_int) { c->ctx.pool_n = (size_t)v; known = 1; }
        if (!strcmp(kv, "lottery_seed")) {
            uint8_t bytes[LOTTERY_SEED_LEN];
            if (lottery_seed_parse(eq, bytes) < 0) CASE_FAIL(c, "lottery_seed: not 64 hex digits");
            snprintf(c->pool.seed, sizeof c->pool.seed, "%s", eq);
            c->pool.loaded = 1;
            c->ctx.pool = &c->pool;
            known = 1;
        }
        if (!strcmp(kv, "new_seed") && is_int) { c->pool.seed_unsaved = (int)v; known = 1; }
        if (!strcmp(kv, "log_chunk") && is_int) { c->ctx.log_chunk = (int)v; known = 1; }
        if (!strcmp(kv, "staged") && is_int) { c->staged = (int)v; known = 1; }
        if (!strcmp(kv, "cluster") && is_int) { c->ctx.cluster = (int)v; known = 1; }
        if (!strcmp(kv, "archive_group")) {
            snprintf(c->archive_group, sizeof c->archive_group, "%s", eq);
            c->ctx.archive_group = c->archive_group;
            known = 1;
        }
        if (!strcmp(kv, "fault")) {
            snprintf(c->fault, sizeof c->fault, "%s", eq);
            c->ctx.fault_apply_id = c->fault;
            known = 1;
        }
        if (!known) CASE_FAIL(c, "unknown ctx field or not an integer: %s=%s", kv, eq);
    }
}

/* A request decided before the chunk; what it changed counts as written. */
static void before_line(txn_case *c, char *rest)
{
    char *json = strchr(rest, ' ');
    int64_t at;
    if (!json) CASE_FAIL(c, "before wants MS JSON");
    *json++ = '\0';
    if (numtext_parse_i64(rest, &at) < 0) CASE_FAIL(c, "before: '%s' is not a time offset", rest);
    request q;
    request_parse(&q, json, strlen(json), 4096, 0);
    if (q.outcome != REQUEST_OK) CASE_FAIL(c, "before: not a valid request: %s", q.error);
    engine_result res;
    q.r.seq = 1;
    engine_decide(eng(c), &q.r, NOW + at, &res);
    engine_drain_clear(c->e);     /* before q goes: events point at its id */
    request_clear(&q);
}

static void chunk_line(txn_case *c, const char *kind)
{
    static const struct { const char *name; chunk_kind kind; } kinds[] = {
        { "queue", CHUNK_QUEUE }, { "ctl", CHUNK_CTL }, { "pool", CHUNK_POOL }, { "none", CHUNK_NONE },
        { "early", CHUNK_QUEUE },
    };
    c->ch.early = !strcmp(kind, "early");
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(kind, kinds[i].name)) {
            c->ch.kind = kinds[i].kind;
            c->chunk_set = 1;
            return;
        }
    CASE_FAIL(c, "unknown chunk kind '%s'", kind);
}

static void req_line(txn_case *c, const char *raw, int dup)
{
    if (!c->chunk_set) CASE_FAIL(c, "a 'chunk' line must come before the requests");
    if (c->ch.n_items == MAX_ITEMS) CASE_FAIL(c, "more than %d requests", MAX_ITEMS);
    eng(c);
    assert_int_equal(chunk_add(&c->ch, raw, strlen(raw), 0, 4096, NULL), 0);
    c->ch.items[c->ch.n_items - 1].dup = dup;
}

static void one_line(txn_case *c, char *buf)
{
    buf[strcspn(buf, "\r\n")] = '\0';
    if (!buf[0] || buf[0] == '#') return;
    char *rest = strchr(buf, ' ');
    if (rest) *rest++ = '\0';
    else rest = buf + strlen(buf);
    char a[ENGINE_ID_MAX + 1], b[ENGINE_ID_MAX + 1], v[256];
    long long n;
    if (!strcmp(buf, "meta")) meta_line(c, rest);
    else if (!strcmp(buf, "ctx")) ctx_line(c, rest);
    else if (!strcmp(buf, "before")) before_line(c, rest);
    else if (!strcmp(buf, "chunk")) chunk_line(c, rest);
    else if (!strcmp(buf, "req")) req_line(c, rest, 0);
    else if (!strcmp(buf, "dup")) req_line(c, rest, 1);
    else if (!strcmp(buf, "item") && sscanf(rest, "%64s %lld", a, &n) == 2)
        assert_int_equal(engine_load_item(eng(c), a, n), 0);
    else if (!strcmp(buf, "attr") && sscanf(rest, "%64s %64s %255s", a, b, v) == 3)
        assert_int_equal(engine_load_attr(eng(c), a, b, v), 0);
    else CASE_FAIL(c, "cannot read this line");
}

/* The chunk's bookkeeping, as a take would have set it. */
static void finish_chunk(txn_case *c)
{
    chunk *ch = &c->ch;
    for (size_t i = 0; i < ch->n_items; i++)
        ch->items[i].seq = ch->kind == CHUNK_CTL ? 0 : c->ctx.dequeued + (int64_t)i + 1;
    if (ch->kind == CHUNK_CTL) ch->ctl_len = (long)ch->n_items;
    else if (ch->kind == CHUNK_POOL) ch->pool_len = ch->n_items;
    else ch->queue_len = (long)ch->n_items;
    if (ch->kind == CHUNK_POOL)
        for (size_t i = 0; i < ch->n_items; i++) ch->items[i].draw = (int64_t)i + 1;
}

/* ------------------------------------------------------------ golden -- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    *len = 0;
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n < cap) continue;
        char *more = realloc(buf, cap *= 2);
        if (!more) free(buf);
        buf = more;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Shows bytes around a difference with \r\n spelled out. */
static void show(const char *label, const char *s, size_t len, size_t at)
{
    size_t from = at > 120 ? at - 120 : 0, to = at + 120 < len ? at + 120 : len;
    fprintf(stderr, "%s (bytes %zu..%zu):\n  ", label, from, to);
    for (size_t i = from; i < to; i++) {
        if (s[i] == '\r') fputs("\\r", stderr);
        else if (s[i] == '\n') fputs("\\n\n  ", stderr);
        else fputc(s[i], stderr);
    }
    fputc('\n', stderr);
}

static void compare_golden(txn_case *c, const char *got, size_t got_len)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s.resp", DATA_DIR, c->name);
    const char *update = getenv("UPDATE_GOLDEN");
    if (update && !strcmp(update, "1")) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(got, 1, got_len, f) != got_len || fclose(f) != 0)
            fail_msg("%s: cannot write: %s", path, strerror(errno));
        fprintf(stderr, "updated %s (%zu bytes): review it before committing\n", path, got_len);
        return;
    }
    size_t want_len = 0;
    char *want = read_file(path, &want_len);
    if (!want) fail_msg("%s: %s (UPDATE_GOLDEN=1 writes it)", path, strerror(errno));
    size_t at = 0;
    while (at < want_len && at < got_len && want[at] == got[at]) at++;
    if (at < want_len || at < got_len) {
        fprintf(stderr, "%s: the transaction differs from the golden file at byte %zu\n", path, at);
        show("expected", want, want_len, at);
        show("encoded", got, got_len, at);
    }
    free(want);
    assert_int_equal(at, want_len);
    assert_int_equal(at, got_len);
}

/* -------------------------------------------------------------- cases -- */

/* The slices in order are the bytes on the wire. */
static void append_wire(jsonw *wire, argbuf *out)
{
    redis_slice cmds[256];
    size_t n = argbuf_slices(out, cmds, 256);
    assert_int_equal(n, out->ncmds);
    for (size_t i = 0; i < n; i++) jsonw_raw(wire, cmds[i].buf, cmds[i].len);
}

static void run_case(void **state)
{
    txn_case *c = *state;
    char path[300], buf[4096];
    snprintf(path, sizeof path, "%s/%s.case", DATA_DIR, c->name);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    while (fgets(buf, sizeof buf, f)) {
        c->line++;
        one_line(c, buf);
    }
    fclose(f);
    c->line = 0;
    if (!c->chunk_set) CASE_FAIL(c, "no 'chunk' line");
    finish_chunk(c);
    decide_chunk(&c->ch, eng(c), NOW, 0, c->ch.n_items);
    assert_int_equal(engine_error(c->e), 0);
    if (c->ch.early) {
        if (!c->pool.loaded) CASE_FAIL(c, "an early chunk needs ctx lottery_seed=...");
        assert_int_equal(lottery_pool_take_chunk(&c->pool, &c->ch), 0);
    }
    jsonw wire;
    jsonw_init(&wire);
    if (c->staged) {
        argbuf effect;
        argbuf_init(&effect);
        assert_int_equal(apply_txn_encode_staged(&c->out, &effect, &c->ctx, NULL, &c->ch, c->e), 0);
        append_wire(&wire, &c->out);
        apply_txn_ctx next = c->ctx;
        next.chunks_applied++;
        assert_int_equal(apply_txn_encode_publish(&c->out, &next, &effect), 0);
        argbuf_free(&effect);
    } else {
        assert_int_equal(apply_txn_encode(&c->out, &c->ctx, &c->ch, c->e), 0);
    }
    append_wire(&wire, &c->out);
    assert_false(wire.failed);
    compare_golden(c, wire.buf, wire.len);
    jsonw_free(&wire);
}

static int setup_case(void **state)
{
    txn_case *c = *state;
    engine_meta_defaults(&c->meta);
    c->next_order = 1001;
    lottery_pool_init(&c->pool, 42);
    assert_int_equal(batch_keys_init(&c->keys, "alloc", "b"), 0);
    snprintf(c->trip_key, sizeof c->trip_key, "alloc:{b}:trip:%s", TOKEN);
    assert_int_equal(chunk_reserve(&c->ch, MAX_ITEMS), 0);  /* parsed items must not move */
    argbuf_init(&c->out);
    c->ctx = (apply_txn_ctx){
        .keys = &c->keys, .trip_key = c->trip_key, .fence_src = "<FENCE: scripts.h>",
        .token = TOKEN, .epoch = "3", .now = NOW, .instance = "test-host",
        .decision_p50_us = 12, .decision_p99_us = 345,
    };
    return 0;
}

/* Frees everything also when a case failed halfway. */
static int teardown_case(void **state)
{
    txn_case *c = *state;
    chunk_clear(&c->ch);
    free(c->ch.items);
    c->ch.items = NULL;
    if (c->e) engine_free(c->e);
    c->e = NULL;
    argbuf_free(&c->out);
    lottery_pool_free(&c->pool);
    return 0;
}

/* Every .case file is run; a name too long for the case fails the test
 * rather than leaving the file out. */
int main(void)
{
    size_t n;
    char **paths = casedir_list(DATA_DIR, ".case", &n);
    if (!paths) {
        fprintf(stderr, "%s: no cases read (run the tests from the repository root)\n", DATA_DIR);
        return 1;
    }
    txn_case *cases = calloc(n, sizeof *cases);
    struct CMUnitTest *tests = calloc(n, sizeof *tests);
    assert_true(cases && tests);
    for (size_t i = 0; i < n; i++) {
        const char *base = strrchr(paths[i], '/') + 1;
        size_t len = strlen(base) - 5;
        if (len >= sizeof cases[i].name) {
            fprintf(stderr, "%s: case name too long (at most %zu characters)\n", paths[i], sizeof cases[i].name - 1);
            return 1;
        }
        memcpy(cases[i].name, base, len);
        tests[i] = (struct CMUnitTest){ .name = cases[i].name, .test_func = run_case,
                                        .setup_func = setup_case, .teardown_func = teardown_case,
                                        .initial_state = &cases[i] };
    }
    int rc = _cmocka_run_group_tests("apply_txn", tests, n, NULL, NULL);
    casedir_free(paths, n);
    free(tests);
    free(cases);
    return rc;
}
