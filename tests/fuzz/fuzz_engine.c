/* fuzz_engine.c -- fuzz target that drives one small engine (stock or room)
 * through a sequence of operations decoded from the input, with time.
 *
 * Why: the engine is where "no unit given twice" and "one bed per user"
 * are decided; the worker trusts it completely, and the event log it emits
 * must rebuild holders and free exactly (docs/PROTOCOL.md section 7). Unit
 * and property tests cover the cases someone thought of; this lets the
 * fuzzer look for the ones nobody did, including reloads in the middle
 * (what the worker does after every failure).
 *
 * Input: 3 header bytes (kind, hold_ms, per_user, throttle, opening and
 * closing times, max_group, capacities), then operations of a few bytes
 * each: buy, confirm, cancel, choose, auto, group, switch, release (8 users,
 * 4 items plus an unknown one, filters on attrs), time steps, expire,
 * set_capacity, pause/resume/close, drain, reload from the views (as the
 * worker reloads from Redis), and the shell's invalid/dead/duplicate notes.
 *
 * After every operation it checks, against a model rebuilt only from the
 * engine's events (the log replay) and against the engine's own views:
 * free + held == capacity and free >= 0 per item, one bed per user, units
 * <= per_user and == the sum of held + confirmed orders, holders equal to
 * the replay, processed == granted + done + rejected + invalid, free_units
 * == sum of free, participants == users, ranks and results consistent, no
 * reservation left past its expiry after a decision, and a reloaded engine
 * equal to the one it replaces. Any failure aborts with a message.
 *
 * Built with libFuzzer (-DFUZZ_LIBFUZZER, `make fuzz`) or as the replay
 * binary build/tests/unit/test_fuzz_replay_engine (in `make test`), which
 * runs tests/fuzz/corpus/engine/ and tests/fuzz/regressions/engine/.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_engine: check failed: %s: ", #cond);       \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

#define NU 8          /* users u0..u7 */
#define NI 5          /* items I0..I3 (I3 only via set_capacity) + "zz" never created */
#define MAXO 16
#define MAXT 4096
#define MAXK 4096
#define T0 1763800000000LL

static const char *const user_names[NU] = { "u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7" };
static const char *const item_names[NI] = { "I0", "I1", "I2", "I3", "zz" };

typedef struct morder {
    uint64_t id;
    int item;
    int64_t qty;
    int held;
    int64_t expires_at;
} morder;

typedef struct tomb {
    int user;
    uint64_t id;
    int item;
    int64_t qty;
    int state;
} tomb;

/* The state the event log replays to. */
typedef struct model {
    int room;
    int64_t per_user;
    int exists[NI];
    int64_t cap[NI], held[NI];
    int room_of[NU];
    morder orders[NU][MAXO];
    int n_orders[NU];
    tomb tombs[MAXT];
    int n_tombs;
    int tombs_overflow;
} model;

typedef struct fz {
    const uint8_t *p, *end;
    engine *e;
    engine_meta meta;
    model m;
    size_t ev_seen;
    int64_t now;
    uint64_t next_order;
    uint64_t known[MAXK];
    int n_known;
    int req_n;
} fz;

static uint8_t next(fz *f) { return f->p < f->end ? *f->p++ : 0; }

static uint64_t order_source(void *ctx)
{
    return ((fz *)ctx)->next_order++;
}

static int user_index(const char *s)
{
    for (int i = 0; i < NU; i++) if (s && !strcmp(s, user_names[i])) return i;
    return -1;
}

static int item_index(const char *s)
{
    for (int i = 0; i < NI; i++) if (s && !strcmp(s, item_names[i])) return i;
    return -1;
}

/* ------------------------------------------------------------ replay -- */

static int find_morder(const model *m, int u, uint64_t id)
{
    for (int i = 0; i < m->n_orders[u]; i++) if (m->orders[u][i].id == id) return i;
    return -1;
}

static void add_tomb(model *m, int u, const morder *o, int state)
{
    if (m->n_tombs == MAXT) { m->tombs_overflow = 1; return; }
    m->tombs[m->n_tombs++] = (tomb){ u, o->id, o->item, o->qty, state };
}

static void replay_event(fz *f, const engine_event *ev)
{
    model *m = &f->m;
    if (ev->type == EVENT_STATE) return;
    int it = item_index(ev->item);
    CHECK(it >= 0, "event %d names item '%s'", ev->type, ev->item ? ev->item : "(null)");
    if (ev->type == EVENT_CAPACITY) {
        CHECK(ev->qty >= m->held[it], "capacity of %s set to %" PRId64 " below %" PRId64 " held",
              item_names[it], ev->qty, m->held[it]);
        m->exists[it] = 1;
        m->cap[it] = ev->qty;
        return;
    }
    CHECK(m->exists[it], "event on item %s that was never created", item_names[it]);
    int u = user_index(ev->user);
    CHECK(u >= 0, "event %d for user '%s'", ev->type, ev->user ? ev->user : "(null)");
    switch (ev->type) {
    case EVENT_GRANT:
        CHECK(m->held[it] + ev->qty <= m->cap[it], "grant of %" PRId64 " of %s: %" PRId64 " held of %" PRId64,
              ev->qty, item_names[it], m->held[it], m->cap[it]);
        m->held[it] += ev->qty;
        if (m->room) {
            CHECK(ev->qty == 1, "room grant of %" PRId64 " beds", ev->qty);
            CHECK(m->room_of[u] < 0, "%s gets a second bed", user_names[u]);
            m->room_of[u] = it;
        } else {
            int64_t units = 0;
            for (int i = 0; i < m->n_orders[u]; i++) units += m->orders[u][i].qty;
            CHECK(units + ev->qty <= m->per_user, "%s over per_user: %" PRId64 " + %" PRId64,
                  user_names[u], units, ev->qty);
            CHECK(ev->order != 0 && find_morder(m, u, ev->order) < 0, "order %" PRIu64 " granted twice", ev->order);
            CHECK(m->n_orders[u] < MAXO, "too many live orders");
            m->orders[u][m->n_orders[u]++] = (morder){ ev->order, it, ev->qty, ev->expires_at != 0, ev->expires_at };
        }
        return;
    case EVENT_RELEASE:
        CHECK(m->room && m->room_of[u] == it, "release of %s by %s who holds %d", item_names[it], user_names[u], m->room_of[u]);
        m->room_of[u] = -1;
        m->held[it] -= 1;
        return;
    case EVENT_CONFIRM:
    case EVENT_CANCEL:
    case EVENT_EXPIRE: {
        CHECK(!m->room, "stock event in a room batch");
        int i = find_morder(m, u, ev->order);
        CHECK(i >= 0, "event %d for order %" PRIu64 " that %s does not hold", ev->type, ev->order, user_names[u]);
        morder *o = &m->orders[u][i];
        CHECK(o->item == it && o->qty == ev->qty, "event %d for order %" PRIu64 " with other item/qty", ev->type, ev->order);
        if (ev->type == EVENT_CONFIRM) {
            CHECK(o->held, "confirm of a confirmed order");
            o->held = 0;
            o->expires_at = 0;
            return;
        }
        if (ev->type == EVENT_EXPIRE) {
            CHECK(o->held, "expiry of a confirmed order");
            CHECK(o->expires_at <= ev->at, "expired before its time: %" PRId64 " > %" PRId64, o->expires_at, ev->at);
        }
        add_tomb(m, u, o, ev->type == EVENT_EXPIRE ? ORDER_EXPIRED : ORDER_CANCELLED);
        m->held[it] -= o->qty;
        memmove(o, o + 1, (size_t)(m->n_orders[u] - i - 1) * sizeof *o);
        m->n_orders[u]--;
        return;
    }
    default:
        CHECK(0, "unknown event type %d", ev->type);
    }
}

static void replay_new_events(fz *f)
{
    size_t n = engine_event_count(f->e);
    for (; f->ev_seen < n; f->ev_seen++) replay_event(f, engine_event_at(f->e, f->ev_seen));
}

/* ------------------------------------------------------------ checks -- */

static void check_engine(fz *f, engine *e, int after_decision)
{
    model *m = &f->m;
    const engine_counters *c = engine_get_counters(e);
    CHECK(engine_error(e) == 0, "engine error %d", engine_error(e));
    CHECK(c->processed == c->granted + c->done + c->rejected + c->invalid,
          "processed %" PRId64 " != %" PRId64 " + %" PRId64 " + %" PRId64 " + %" PRId64,
          c->processed, c->granted, c->done, c->rejected, c->invalid);
    CHECK(c->participants == (int64_t)engine_user_count(e), "participants %" PRId64 " users %zu",
          c->participants, engine_user_count(e));
    int64_t held_v[NI] = { 0 }, free_sum = 0;
    size_t nu = engine_user_count(e);
    for (size_t i = 0; i < nu; i++) {
        engine_user_view v;
        engine_user_view_at(e, i, &v);
        int u = user_index(v.id);
        CHECK(u >= 0, "engine has user '%s'", v.id);
        if (m->room) {
            int it = v.room ? item_index(v.room) : -1;
            CHECK(it == m->room_of[u], "%s holds %s, the log says %s", v.id, v.room ? v.room : "nothing",
                  m->room_of[u] >= 0 ? item_names[m->room_of[u]] : "nothing");
            if (it >= 0) held_v[it]++;
            continue;
        }
        int64_t units = 0;
        CHECK((int)v.n_orders == m->n_orders[u], "%s has %zu live orders, the log says %d", v.id, v.n_orders, m->n_orders[u]);
        for (size_t j = 0; j < v.n_orders; j++) {
            const engine_order *o = &v.orders[j];
            const morder *w = &m->orders[u][j];
            engine_item_view iv;
            engine_item_view_at(e, o->item, &iv);
            int it = item_index(iv.id);
            CHECK(o->id == w->id && it == w->item && o->qty == w->qty &&
                  (o->state == ORDER_HELD) == w->held && (o->state == ORDER_HELD || o->state == ORDER_CONFIRMED),
                  "%s order %zu: engine %" PRIu64 "/%s/%d/state %d, log %" PRIu64 "/%s/%" PRId64 "/held %d",
                  v.id, j, o->id, iv.id, o->qty, o->state, w->id, item_names[w->item], w->qty, w->held);
            if (o->state == ORDER_HELD) {
                CHECK(o->expires_at == w->expires_at, "%s order %" PRIu64 " expires %" PRId64 ", log %" PRId64,
                      v.id, o->id, o->expires_at, w->expires_at);
                CHECK(!after_decision || o->expires_at > f->now, "order %" PRIu64 " still held at %" PRId64
                      " after its expiry %" PRId64, o->id, f->now, o->expires_at);
            }
            units += o->qty;
            held_v[it] += o->qty;
        }
        CHECK(units == v.units, "%s: units %" PRId64 " but orders sum to %" PRId64, v.id, v.units, units);
        CHECK(units <= m->per_user, "%s holds %" PRId64 " units, per_user %" PRId64, v.id, units, m->per_user);
    }
    size_t ni = engine_item_count(e);
    for (size_t i = 0; i < ni; i++) {
        engine_item_view iv;
        engine_item_view_at(e, i, &iv);
        int it = item_index(iv.id);
        CHECK(it >= 0 && m->exists[it], "engine has item '%s'", iv.id);
        CHECK(iv.capacity == m->cap[it], "%s capacity %" PRId64 ", log %" PRId64, iv.id, iv.capacity, m->cap[it]);
        CHECK(iv.free == m->cap[it] - m->held[it], "%s free %" PRId64 ", log %" PRId64 " - %" PRId64,
              iv.id, iv.free, m->cap[it], m->held[it]);
        CHECK(iv.free >= 0 && iv.free + held_v[it] == iv.capacity, "%s: free %" PRId64 " + held %" PRId64
              " != capacity %" PRId64, iv.id, iv.free, held_v[it], iv.capacity);
        free_sum += iv.free;
    }
    int n_exist = 0;
    for (int i = 0; i < NI; i++) n_exist += m->exists[i];
    CHECK((size_t)n_exist == ni, "engine has %zu items, the log %d", ni, n_exist);
    CHECK(c->free_units == free_sum, "free_units %" PRId64 ", sum of free %" PRId64, c->free_units, free_sum);
}

/* ---------------------------------------------------------- requests -- */

static void decide(fz *f, engine_request *r)
{
    char id[24];
    snprintf(id, sizeof id, "r%d", f->req_n++);
    r->id = id;
    r->seq = f->req_n;
    engine_counters before = *engine_get_counters(f->e);
    engine_result res;
    engine_decide(f->e, r, f->now, &res);
    const engine_counters *c = engine_get_counters(f->e);
    CHECK(res.status != STATUS_NONE, "no decision (engine error %d)", engine_error(f->e));
    CHECK((res.status == STATUS_REJECTED) == (res.reason != REASON_NONE), "status %d reason %d", res.status, res.reason);
    int admin = r->op >= OP_PAUSE;
    CHECK(c->processed + c->ctl == before.processed + before.ctl + 1, "one decision counted %" PRId64 " times",
          c->processed + c->ctl - before.processed - before.ctl);
    CHECK(admin ? c->ctl == before.ctl + 1 : c->processed == before.processed + 1, "counted in the wrong place");
    if (res.status == STATUS_GRANTED) {
        CHECK(res.rank == c->granted, "rank %" PRId64 ", granted %" PRId64, res.rank, c->granted);
        CHECK(res.item != NULL, "granted without an item");
        if (r->op == OP_BUY) {
            CHECK(res.qty == r->qty && res.order != 0, "buy granted qty %" PRId64 " order %" PRIu64, res.qty, res.order);
            CHECK(f->meta.hold_ms ? res.expires_at == f->now + f->meta.hold_ms : res.expires_at == 0,
                  "expires_at %" PRId64, res.expires_at);
            if (f->n_known < MAXK) f->known[f->n_known++] = res.order;
        }
    }
    replay_new_events(f);
    check_engine(f, f->e, 1);
}

static const char *pick_item(fz *f)
{
    return item_names[next(f) % NI];
}

static uint64_t pick_order(fz *f)
{
    uint8_t s = next(f);
    if (s < 224 && f->n_known > 0) return f->known[s % f->n_known];
    return s;
}

static const engine_kv filter_floor1[] = { { "floor", "1" } };
static const engine_kv filter_g_f[] = { { "g", "\"F\"" } };
static const engine_kv filter_both[] = { { "floor", "1" }, { "g", "\"M\"" } };

static void set_filter(fz *f, engine_request *r)
{
    switch (next(f) % 5) {
    case 0: break;
    case 1: r->has_filter = 1; break;   /* {} matches every room */
    case 2: r->has_filter = 1; r->filter = filter_floor1; r->n_filter = 1; break;
    case 3: r->has_filter = 1; r->filter = filter_g_f; r->n_filter = 1; break;
    default: r->has_filter = 1; r->filter = filter_both; r->n_filter = 2; break;
    }
}

static void op_request(fz *f, int op)
{
    engine_request r;
    memset(&r, 0, sizeof r);
    int u = next(f) % NU;
    r.user = user_names[u];
    const char *prefs[4];
    const char *members[NU];
    switch (op) {
    case 0:
        r.op = OP_BUY;
        r.item = pick_item(f);
        r.qty = 1 + next(f) % 3;
        break;
    case 1: r.op = OP_CONFIRM; r.order = pick_order(f); break;
    case 2: r.op = OP_CANCEL; r.order = pick_order(f); break;
    case 3: r.op = OP_CHOOSE; r.item = pick_item(f); break;
    case 4:
    case 5: {
        r.op = op == 4 ? OP_AUTO : OP_GROUP;
        size_t np = next(f) % 4;
        for (size_t i = 0; i < np; i++) prefs[i] = pick_item(f);
        r.prefs = prefs;
        r.n_prefs = np;
        set_filter(f, &r);
        if (op == 4 && np == 0 && !r.has_filter) r.has_filter = 1;   /* the parser's rule */
        if (op == 5) {
            uint8_t mask = next(f);
            size_t nm = 0;
            members[nm++] = r.user;
            for (int i = 0; i < NU; i++)
                if ((mask >> i) & 1 && i != u) members[nm++] = user_names[i];
            r.members = members;
            r.n_members = nm;
        }
        break;
    }
    case 6: r.op = OP_SWITCH; r.item = pick_item(f); break;
    default: r.op = OP_RELEASE; break;
    }
    decide(f, &r);
}

static void op_admin(fz *f, int what)
{
    engine_request r;
    memset(&r, 0, sizeof r);
    if (what == 0) {
        r.op = OP_SET_CAPACITY;
        r.item = item_names[next(f) % 4];
        r.qty = next(f) % 6;
    } else {
        uint8_t b = next(f);
        if (b < 100) r.op = OP_PAUSE;
        else if (b < 200) r.op = OP_RESUME;
        else if (b == 255) r.op = OP_CLOSE;
        else return;
    }
    decide(f, &r);
}

/* What the worker does after a failure: a fresh engine loaded from what the
 * old one would have written (items, attrs, holders, tombstones,
 * participants, counters, admin state). It must be the same engine. */
static void load_attrs(engine *e, int it)
{
    engine_load_attr(e, item_names[it], "floor", it % 2 ? "2" : "1");
    engine_load_attr(e, item_names[it], "g", it < 2 ? "\"F\"" : "\"M\"");
}

static void op_reload(fz *f)
{
    if (f->m.tombs_overflow) return;
    engine *old = f->e;
    engine *e = engine_new(&f->meta, 0x1234 + (uint64_t)f->req_n);
    CHECK(e, "engine_new");
    engine_set_order_source(e, order_source, f);
    for (size_t i = 0; i < engine_item_count(old); i++) {
        engine_item_view iv;
        engine_item_view_at(old, i, &iv);
        CHECK(engine_load_item(e, iv.id, iv.capacity) == 0, "reload item %s", iv.id);
        load_attrs(e, item_index(iv.id));
    }
    for (size_t i = 0; i < engine_user_count(old); i++) {
        engine_user_view v;
        engine_user_view_at(old, i, &v);
        if (v.room) CHECK(engine_load_room_holder(e, v.id, v.room, v.since, v.req) == 0, "reload holder %s", v.id);
        for (size_t j = 0; j < v.n_orders; j++) {
            engine_item_view iv;
            engine_item_view_at(old, v.orders[j].item, &iv);
            CHECK(engine_load_order(e, v.id, v.orders[j].id, iv.id, v.orders[j].qty, v.orders[j].state,
                                    v.orders[j].expires_at) == 0, "reload order %" PRIu64, v.orders[j].id);
        }
    }
    for (int i = 0; i < f->m.n_tombs; i++) {
        const tomb *t = &f->m.tombs[i];
        CHECK(engine_load_order(e, user_names[t->user], t->id, item_names[t->item], t->qty, t->state, 0) == 0,
              "reload tombstone %" PRIu64, t->id);
    }
    for (size_t i = 0; i < engine_user_count(old); i++) {
        engine_user_view v;
        engine_user_view_at(old, i, &v);
        CHECK(engine_load_participant(e, v.id) == 0, "reload participant %s", v.id);
    }
    engine_load_counters(e, engine_get_counters(old));
    engine_load_admin_state(e, engine_get_admin_state(old));
    CHECK(engine_next_expiry(e) == engine_next_expiry(old), "next expiry %" PRId64 " after reload, %" PRId64 " before",
          engine_next_expiry(e), engine_next_expiry(old));
    CHECK(engine_dirty_user_count(e) == 0 && engine_event_count(e) == 0, "loading marked something dirty");
    engine_free(old);
    f->e = e;
    f->ev_seen = 0;
    check_engine(f, e, 0);
}

/* The batch from the input's first three bytes: kind, holds, per_user,
 * throttle, opening and closing, group size, three items' capacities. */
static void fz_start(fz *f)
{
    static const int64_t holds[4] = { 0, 50, 500, 5000 };
    f->now = T0;
    f->next_order = 1000;
    uint8_t h0 = next(f), h1 = next(f), h2 = next(f);
    engine_meta_defaults(&f->meta);
    f->meta.kind = h0 & 1 ? BATCH_ROOM : BATCH_STOCK;
    f->meta.hold_ms = holds[(h0 >> 1) & 3];
    /* the model here knows stock reservations only: holds of beds (rooms
     * with hold_ms, core/engine_hold.c) are tested by test_engine_hold and
     * tests/integration/test_room_holds.c */
    if (f->meta.kind == BATCH_ROOM) f->meta.hold_ms = 0;
    f->meta.per_user = 1 + ((h0 >> 3) & 3);
    if ((h0 >> 5) & 1) { f->meta.rate_max = 2; f->meta.rate_window_ms = 100; f->meta.penalty_ms = 300; }
    if (h1 & 1) f->meta.opens_at = T0 + 200;
    if (h1 & 2) f->meta.closes_at = T0 + 20000;
    f->meta.max_group = 2 + ((h1 >> 2) & 3);
    f->e = engine_new(&f->meta, 99);
    CHECK(f->e, "engine_new");
    engine_set_order_source(f->e, order_source, f);
    model *m = &f->m;
    m->room = f->meta.kind == BATCH_ROOM;
    m->per_user = m->room ? 1 : f->meta.per_user;
    for (int i = 0; i < NU; i++) m->room_of[i] = -1;
    for (int i = 0; i < 3; i++) {
        m->exists[i] = 1;
        m->cap[i] = ((h2 >> (2 * i)) & 3) + (i == 0);
        CHECK(engine_load_item(f->e, item_names[i], m->cap[i]) == 0, "load item");
        load_attrs(f->e, i);
    }
    check_engine(f, f->e, 0);
}

/* What the worker drains after an apply: everything, and nothing left. */
static void op_drain_clear(fz *f)
{
    replay_new_events(f);
    engine_drain_clear(f->e);
    f->ev_seen = 0;
    CHECK(engine_event_count(f->e) == 0 && engine_dirty_user_count(f->e) == 0 &&
          engine_dirty_item_count(f->e) == 0 && engine_ended_count(f->e) == 0 &&
          engine_new_participant_count(f->e) == 0, "drain_clear left something");
}

/* The edge's notes: an invalid request, a dead one, a duplicate. */
static void op_note(fz *f)
{
    uint8_t b = next(f);
    engine_counters before = *engine_get_counters(f->e);
    if (b % 3 == 0) {
        engine_note_invalid(f->e, b & 8 ? user_names[b % NU] : NULL, f->now);
        CHECK(engine_get_counters(f->e)->invalid == before.invalid + 1, "note_invalid");
    } else if (b % 3 == 1) {
        engine_note_dead(f->e);
        CHECK(engine_get_counters(f->e)->dead == before.dead + 1, "note_dead");
    } else {
        engine_note_duplicate(f->e);
        CHECK(engine_get_counters(f->e)->duplicates == before.duplicates + 1, "note_duplicate");
    }
    check_engine(f, f->e, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz *f = calloc(1, sizeof *f);
    if (!f) return 0;
    f->p = data;
    f->end = data + size;
    fz_start(f);
    while (f->p < f->end) {
        uint8_t op = next(f) % 16;
        switch (op) {
        case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7:
            op_request(f, op);
            break;
        case 8: f->now += (int64_t)next(f) * 7; break;
        case 9: f->now += (int64_t)next(f) * 97; break;
        case 10:
            engine_expire(f->e, f->now);
            replay_new_events(f);
            check_engine(f, f->e, 1);
            break;
        case 11: op_admin(f, 0); break;
        case 12: op_admin(f, 1); break;
        case 13: op_drain_clear(f); break;
        case 14: replay_new_events(f); op_reload(f); break;
        default: op_note(f); break;
        }
    }
    engine_free(f->e);
    free(f);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
#include "fuzz_replay.h"
FUZZ_REPLAY_MAIN("engine")
#endif
