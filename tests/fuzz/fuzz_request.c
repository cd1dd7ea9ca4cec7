/* fuzz_request.c -- fuzz target over request_parse (both grammars) and the
 * records writer (wire/records) that writes what the parser produced.
 *
 * Why: request_parse is the one place where bytes from anybody meet
 * allocd; a crash, leak or undefined behaviour there takes every batch
 * down, and an outcome that breaks its promises (an OK request with an id
 * the contract forbids, an invalid one without a readable id, a dead entry
 * that loses the bytes) breaks the contract silently. For every input and
 * both grammars (queue, ctl) this checks:
 *   - the outcome is one of the three, with a non-empty error for dead and
 *     invalid, and a readable id for invalid and OK;
 *   - an OK request has the shape the contract promises (id 1..64
 *     printable ASCII, user 1..64 characters, qty 1..1e6, order > 0, group
 *     members include the user and nobody twice, at most 256 prefs/members,
 *     capacity 0..2e9, the op belongs to the grammar);
 *   - the result, invalid and dead documents wire/records writes are valid
 *     JSON that carry the same id, and a dead entry keeps the bytes (raw, or
 *     raw_base64 when they are not valid UTF-8);
 *   - an OK request decided by a small engine of its kind gives a result
 *     the records writer can write.
 * Built with libFuzzer (-DFUZZ_LIBFUZZER, `make fuzz`) or as a plain
 * replay binary (build/tests/unit/test_fuzz_replay_request, in `make test`)
 * that runs every file of tests/fuzz/corpus/request/ and
 * tests/fuzz/regressions/request/ through the same checks.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "wire/records.h"
#include "core/base64.h"
#include "core/engine.h"
#include "core/jsonw.h"
#include "wire/request.h"

#define MAX_BYTES 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_request: check failed: %s: ", #cond);      \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

static int printable_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > ENGINE_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return 0;
    return 1;
}

static int name_ok(const char *s)
{
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) return 0;
        if ((*p & 0xc0) != 0x80) chars++;
    }
    return chars >= 1 && chars <= ENGINE_ID_MAX;
}

static int is_admin(engine_op op)
{
    return (op >= OP_PAUSE && op <= OP_SET_CAPACITY) || op == OP_ASSIGN || op == OP_UNASSIGN;
}

static void check_ok_shape(const request *q, int admin)
{
    const engine_request *r = &q->r;
    CHECK(r->id && printable_id(r->id), "OK request with id '%s'", r->id ? r->id : "(null)");
    CHECK(r->op != OP_NONE && is_admin(r->op) == admin, "op %d in the %s grammar", r->op, admin ? "ctl" : "queue");
    if (admin) {
        if (r->op == OP_SET_CAPACITY) {
            CHECK(r->item && name_ok(r->item), "set_capacity without a good item");
            CHECK(r->qty >= 0 && r->qty <= 2000000000LL, "capacity %lld", (long long)r->qty);
        }
        if (r->op == OP_ASSIGN || r->op == OP_UNASSIGN)   /* contract 11.5: staff placements */
            CHECK(r->user && name_ok(r->user) && (r->op == OP_UNASSIGN || (r->item && name_ok(r->item))),
                  "%s without a good user or item", engine_op_name(r->op));
        return;
    }
    CHECK(r->user && name_ok(r->user), "OK request with a bad user");
    switch (r->op) {
    case OP_BUY:
        CHECK(r->item && name_ok(r->item), "buy without item");
        CHECK(r->qty >= 1 && r->qty <= 1000000, "buy qty %lld", (long long)r->qty);
        break;
    case OP_CONFIRM:
    case OP_CANCEL:
        CHECK(r->order > 0, "order 0");
        break;
    case OP_CHOOSE:
    case OP_SWITCH:
        CHECK(r->item && name_ok(r->item), "room missing");
        break;
    case OP_AUTO:
    case OP_GROUP:
    case OP_PREFS:
        CHECK(r->n_prefs <= REQUEST_MAX_LIST, "%zu prefs", r->n_prefs);
        CHECK(r->n_prefs > 0 || r->has_filter || r->op != OP_AUTO, "auto without prefs and filter");
        if (r->op == OP_PREFS) CHECK(r->version >= 0, "prefs version %lld", (long long)r->version);
        for (size_t i = 0; i < r->n_prefs; i++) CHECK(r->prefs[i] && name_ok(r->prefs[i]), "pref %zu", i);
        CHECK(!r->n_filter || r->filter, "filter pointer");
        for (size_t i = 0; i < r->n_filter; i++) CHECK(r->filter[i].key && r->filter[i].value, "filter %zu", i);
        if (r->op == OP_GROUP) {
            int has_user = r->n_members == 0;   /* none: a group formed by consent (9.2) */
            CHECK(r->n_members <= REQUEST_MAX_LIST, "%zu members", r->n_members);
            for (size_t i = 0; i < r->n_members; i++) {
                CHECK(r->members[i] && name_ok(r->members[i]), "member %zu", i);
                has_user |= !strcmp(r->members[i], r->user);
                for (size_t j = 0; j < i; j++) CHECK(strcmp(r->members[i], r->members[j]), "member twice");
            }
            CHECK(has_user, "members without the user");
        }
        break;
    case OP_RELEASE:
    case OP_LEAVE:
        break;
    case OP_INVITE:
        CHECK(r->n_to >= 1 && r->n_to <= REQUEST_MAX_LIST, "%zu invited", r->n_to);
        for (size_t i = 0; i < r->n_to; i++) CHECK(r->to[i] && name_ok(r->to[i]), "to %zu", i);
        break;
    case OP_ACCEPT:
    case OP_DECLINE:
    case OP_SWAP:
        CHECK(r->peer && name_ok(r->peer), "from/with missing");
        CHECK(r->op != OP_SWAP || strcmp(r->peer, r->user), "swap with oneself");
        break;
    default:
        CHECK(0, "queue op %d", r->op);
    }
}

/* A document written by wire/records: valid JSON, an object, with this id. */
static json_t *check_doc(const jsonw *w, size_t start, const char *id, const char *what)
{
    CHECK(!w->failed, "%s: jsonw failed", what);
    json_error_t err;
    json_t *doc = json_loadb(w->buf + start, w->len - start, JSON_ALLOW_NUL, &err);
    CHECK(json_is_object(doc), "%s is not a JSON object (%s): %.*s", what, err.text,
          (int)(w->len - start > 300 ? 300 : w->len - start), w->buf + start);
    if (id) CHECK(!strcmp(json_string_value(json_object_get(doc, "id")), id), "%s: id changed", what);
    return doc;
}

static void check_dead(jsonw *w, const uint8_t *data, size_t size, const request *q)
{
    jsonw_reset(w);
    records_dead(w, (const char *)data, size, q->error, 1);
    json_t *doc = check_doc(w, 0, NULL, "dead entry");
    size_t keep = size > RECORDS_DEAD_RAW_MAX ? RECORDS_DEAD_RAW_MAX : size;
    json_t *b64 = json_object_get(doc, "raw_base64");
    if (b64) {
        size_t n = 0;
        char *buf = base64_decode(json_string_value(b64), &n);
        CHECK(buf && n == keep && !memcmp(buf, data, n), "raw_base64 lost bytes");
        free(buf);
    } else {
        json_t *raw = json_object_get(doc, "raw");
        CHECK(json_string_length(raw) == keep && !memcmp(json_string_value(raw), data, keep),
              "raw lost bytes without raw_base64");
    }
    json_decref(doc);
}

/* Decides an OK request in a small engine of the request's kind and
 * writes the result as the worker would. */
static void decide_and_write(jsonw *w, const request *q)
{
    engine_meta m;
    engine_meta_defaults(&m);
    int room = q->r.op >= OP_CHOOSE && q->r.op <= OP_RELEASE;
    m.kind = room ? BATCH_ROOM : BATCH_STOCK;
    m.per_user = 3;
    m.hold_ms = 1000;
    engine *e = engine_new(&m, 42);
    CHECK(e, "engine_new");
    static const char *const items[] = { "sku1", "R101", "R102", "x" };
    for (size_t i = 0; i < 4; i++) engine_load_item(e, items[i], 2);
    engine_load_attr(e, "R101", "floor", "3");
    engine_load_attr(e, "R102", "building", "\"7\"");
    engine_request r = q->r;
    r.seq = 1;
    engine_result res;
    engine_decide(e, &r, 1763800000000LL, &res);
    CHECK(res.status != STATUS_NONE, "no decision for an OK request");
    CHECK(res.status != STATUS_REJECTED || res.reason != REASON_NONE, "rejected without a reason");
    const engine_counters *c = engine_get_counters(e);
    /* a staff grant (11.5) counts in ctl and, as a grant, in processed */
    int64_t staff_grant = r.op == OP_ASSIGN && res.status == STATUS_GRANTED;
    /* a granted assign counts in ctl and staff_granted, not processed (section 6) */
    CHECK(c->processed + c->ctl == 1 && c->staff_granted == staff_grant, "counted %lld + %lld", (long long)c->processed,
          (long long)c->ctl);
    jsonw_reset(w);
    records_result(w, q, &res, q->r.seq ? q->r.seq : 1, 1);
    json_t *doc = check_doc(w, 0, q->r.id, "result");
    CHECK(!strcmp(json_string_value(json_object_get(doc, "status")), engine_status_name(res.status)), "status");
    json_decref(doc);
    for (size_t i = 0; i < engine_dirty_user_count(e); i++) {
        engine_user_view v;
        engine_dirty_user_at(e, i, &v);
        jsonw_reset(w);
        records_holder(w, e, &v);
        json_decref(check_doc(w, 0, NULL, "holder"));
    }
    engine_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    jsonw w;
    jsonw_init(&w);
    for (int admin = 0; admin < 2; admin++) {
        request q;
        request_parse(&q, (const char *)data, size, MAX_BYTES, admin);
        switch (q.outcome) {
        case REQUEST_DEAD:
            CHECK(q.error[0], "dead without an error");
            check_dead(&w, data, size, &q);
            break;
        case REQUEST_INVALID:
            CHECK(q.error[0], "invalid without a detail");
            CHECK(q.r.id != NULL, "invalid without a readable id");
            CHECK(size <= MAX_BYTES, "a request over max_request_bytes was read");
            jsonw_reset(&w);
            records_invalid(&w, &q, 7, 1);
            {
                json_t *doc = check_doc(&w, 0, NULL, "invalid result");
                CHECK(!strcmp(json_string_value(json_object_get(doc, "status")), "invalid"), "status");
                json_decref(doc);
            }
            break;
        case REQUEST_OK:
            CHECK(size <= MAX_BYTES, "a request over max_request_bytes was read");
            check_ok_shape(&q, admin);
            decide_and_write(&w, &q);
            break;
        default:
            CHECK(0, "outcome %d", (int)q.outcome);
        }
        request_clear(&q);
    }
    jsonw_free(&w);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
#include "fuzz_replay.h"
FUZZ_REPLAY_MAIN("request")
#endif
