/* test_engine_prop.c -- the engine against a reference model, on random
 * request sequences.
 *
 * Each run draws a batch (kind, times, limits, throttle), a few items and
 * users, and some tens of steps of random requests at random times (ties
 * included, so expiries, opens_at and closes_at are hit exactly as often as
 * they are passed). Every step goes through the engine and through `model`,
 * a slow and obvious re-statement of the engine spec with arrays and linear
 * scans, and the two must agree on every field of the result and on every
 * event. After each step the invariants of the spec are checked on the
 * engine's own views, and a tiny replayer that knows nothing but the event
 * log must have rebuilt every holding and every free count exactly.
 *
 * The runs also play the shell: at random points they drain the engine
 * into a `store` (what Redis would hold), and sometimes throw the engine
 * away and load a fresh one from that store, so a missed dirty user or
 * ended order shows up as a difference after the restart.
 *
 * Reproducible: run seeds are ENGINE_PROP_SEED (default below) + run index;
 * a failure prints the run seed, and ENGINE_PROP_SEED=<it> ENGINE_PROP_RUNS=1
 * replays just that run.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/engine_elig.h"
#include "core/engine_groups.h"
#include "core/engine_wait.h"
#include "core/lottery.h"
#include "core/replay.h"
#include "core/sha256.h"
#include "prop_elig.h"

#define DEFAULT_SEED 20250601ULL
#define DEFAULT_RUNS 2500
#define T0 1000000LL

#define MAX_ITEMS 8        /* i0..i3 loaded; i4, i5, zz may come by set_capacity */
#define N_USERS 10         /* u0..u9 */
#define MAX_STEPS 80
#define MAX_ORDERS (MAX_STEPS + 1)
#define MAX_EV 1024
#define MAX_LIVE 8         /* per_user <= 4 and qty >= 1 */

/* ------------------------------------------------------------ random */

/* The generator of prop_elig.h (SplitMix64): one for all the runs. */
static uint64_t rnd_next(uint64_t *s) { return pe__next(s); }

/* Slightly biased for large n; irrelevant for picking test cases. */
static int64_t rnd(uint64_t *s, int64_t n) { return (int64_t)(rnd_next(s) % (uint64_t)n); }
static int chance(uint64_t *s, int percent) { return rnd(s, 100) < percent; }

/* ------------------------------------------------------------ failures */

typedef struct ctx {
    uint64_t seed;
    int step;
} ctx;

#define CHECK(t, cond) do { \
        if (!(cond)) { \
            print_error("property failed: run seed %llu, step %d: %s (%s:%d)\n" \
                        "reproduce: ENGINE_PROP_SEED=%llu ENGINE_PROP_RUNS=1\n", \
                        (unsigned long long)(t)->seed, (t)->step, #cond, \
                        __FILE__, __LINE__, (unsigned long long)(t)->seed); \
            fail(); \
        } \
    } while (0)

static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* ------------------------------------------------------------ model */

typedef struct m_item {
    char id[8];
    int64_t cap, free;
    const char *floor, *gender;   /* canonical JSON, NULL = no such attr */
    pe_rules rules;               /* only_X / same_X (11.2), prop_elig.h */
} m_item;

typedef struct m_order {
    uint64_t id;
    int user, item;
    int64_t qty, exp;
    int state;
    int staff;                    /* placed by staff without check (11.5) */
} m_order;

typedef struct m_user {
    char id[8];
    int seen;
    int room;                     /* item index, -1 none */
    int staff;                    /* the bed was placed by staff without check */
    int64_t since;
    const char *req;
    int has_win;
    int64_t win_start, pen, cnt;
} m_user;

typedef struct m_event {
    engine_event_type type;
    int user, item;               /* -1 when none */
    int64_t qty;
    uint64_t order;
    const char *req;
    int64_t at, exp;
    const char *state;
    const char *by;               /* "staff" (11.5) */
} m_event;

typedef struct model {
    engine_meta meta;
    engine_admin_state admin;
    int exact;                    /* group_fill = exact (11.4) */
    pe_profile prof[N_USERS];     /* P:{B}:profiles as the operator wrote it */
    m_item items[MAX_ITEMS];
    int n_items;
    m_user users[N_USERS];
    m_order orders[MAX_ORDERS];
    int n_orders;
    /* since the last drain */
    m_event ev[MAX_EV];
    int n_ev;
    int fresh[N_USERS];
    int n_fresh;
    int ended[MAX_ORDERS];
    int n_ended;
    int64_t processed, granted, done, rejected, invalid, ctl, staff_granted;
    uint64_t order_calls;         /* how often an order id was taken */
} model;

/* Order ids: a bijection of the call count, so unique and non-zero, but
 * not increasing -- "ties by order id" must not be "ties by grant order". */
static uint64_t order_id(uint64_t n) { return n * 0x9e3779b97f4a7c15ULL; }

typedef struct source {
    uint64_t calls;
} source;

static uint64_t next_order(void *p)
{
    source *s = p;
    return order_id(++s->calls);
}

static int m_item_find(const model *m, const char *id)
{
    for (int i = 0; id && i < m->n_items; i++)
        if (strcmp(m->items[i].id, id) == 0) return i;
    return -1;
}

static int m_user_find(const model *m, const char *id)
{
    for (int i = 0; id && i < N_USERS; i++)
        if (strcmp(m->users[i].id, id) == 0) return i;
    return -1;
}

static const char *m_phase_name(int p)
{
    static const char *const n[] = { "waiting", "open", "paused", "closed" };
    return n[p];
}

static int m_phase(const model *m, int64_t now)
{
    if (m->admin == ADMIN_CLOSED || (m->meta.closes_at && now >= m->meta.closes_at))
        return 3;
    if (m->admin == ADMIN_PAUSED) return 2;
    if (now < m->meta.opens_at) return 0;
    return 1;
}

static void m_emit(model *m, m_event ev)
{
    assert_true(m->n_ev < MAX_EV);
    m->ev[m->n_ev++] = ev;
}

static void m_see(model *m, int u)
{
    if (m->users[u].seen) return;
    m->users[u].seen = 1;
    m->fresh[m->n_fresh++] = u;
}

static int64_t m_units(const model *m, int u)
{
    int64_t n = 0;
    for (int i = 0; i < m->n_orders; i++) {
        const m_order *o = &m->orders[i];
        if (o->user == u && (o->state == ORDER_HELD || o->state == ORDER_CONFIRMED))
            n += o->qty;
    }
    return n;
}

static int m_live(const m_order *o) { return o->state == ORDER_HELD || o->state == ORDER_CONFIRMED; }

/* The holders of item it (rooms: its beds; stock: users with a live order
 * of it, a staff exception when every such order is one). */
static int m_holders(const model *m, int it, pe_holder *h)
{
    int n = 0;
    for (int u = 0; u < N_USERS; u++) {
        if (m->meta.kind == BATCH_ROOM) {
            if (m->users[u].room == it) h[n++] = (pe_holder){ u, m->users[u].staff };
            continue;
        }
        int any = 0, regular = 0;
        for (int i = 0; i < m->n_orders; i++) {
            const m_order *o = &m->orders[i];
            if (o->user != u || o->item != it || !m_live(o)) continue;
            any = 1;
            regular |= !o->staff;
        }
        if (any) h[n++] = (pe_holder){ u, !regular };
    }
    return n;
}

/* 11.2: may user u be given item it now? */
static int m_may(const model *m, int u, int it)
{
    pe_holder h[N_USERS];
    int n = m_holders(m, it, h);
    return pe_may(m->prof, u, &m->items[it].rules, h, n, -1);
}

/* 11.4: a bed of room it for a single user. */
static int m_single_ok(const model *m, int it)
{
    const m_item *p = &m->items[it];
    return p->free > 0 && pe_single_fits(m->exact, p->cap, p->cap - p->free);
}

static void m_expire_one(model *m, int i, int64_t now)
{
    m_order *o = &m->orders[i];
    o->state = ORDER_EXPIRED;
    m->items[o->item].free += o->qty;
    m_emit(m, (m_event){ EVENT_EXPIRE, o->user, o->item, o->qty, o->id, NULL, now, 0, NULL, NULL });
    m->ended[m->n_ended++] = i;
}

static size_t m_expire(model *m, int64_t now)
{
    size_t n = 0;
    for (;;) {
        int best = -1;
        for (int i = 0; i < m->n_orders; i++) {
            const m_order *o = &m->orders[i];
            if (o->state != ORDER_HELD || o->exp > now) continue;
            if (best < 0 || o->exp < m->orders[best].exp ||
                (o->exp == m->orders[best].exp && o->id < m->orders[best].id))
                best = i;
        }
        if (best < 0) return n;
        m_expire_one(m, best, now);
        n++;
    }
}

static void m_reject(engine_result *out, engine_reason r)
{
    memset(out, 0, sizeof *out);
    out->status = STATUS_REJECTED;
    out->reason = r;
}

#define REJECT(r) do { m_reject(out, (r)); return; } while (0)

static void m_grant(model *m, engine_result *out, int item)
{
    out->status = STATUS_GRANTED;
    out->item = m->items[item].id;
    out->rank = m->granted + 1;
}

static void m_buy(model *m, int u, const engine_request *r, int64_t now,
                  engine_result *out)
{
    int it = m_item_find(m, r->item);
    if (it < 0) REJECT(REASON_UNKNOWN_ITEM);
    if (!m_may(m, u, it)) REJECT(REASON_NOT_ELIGIBLE);
    if (r->qty > m->items[it].free) REJECT(REASON_SOLD_OUT);
    if (m_units(m, u) + r->qty > m->meta.per_user) REJECT(REASON_LIMIT);
    int hold = m->meta.hold_ms > 0;
    m_order o = { order_id(++m->order_calls), u, it, r->qty,
                  hold ? now + m->meta.hold_ms : 0,
                  hold ? ORDER_HELD : ORDER_CONFIRMED, 0 };
    m->orders[m->n_orders++] = o;
    m->items[it].free -= r->qty;
    m_emit(m, (m_event){ EVENT_GRANT, u, it, o.qty, o.id, r->id, now, o.exp, NULL, NULL });
    m_grant(m, out, it);
    out->qty = o.qty;
    out->order = o.id;
    out->expires_at = o.exp;
}

static int m_order_find(const model *m, int u, uint64_t id)
{
    for (int i = 0; i < m->n_orders; i++)
        if (m->orders[i].id == id && m->orders[i].user == u) return i;
    return -1;
}

static void m_order_done(const model *m, engine_result *out, const m_order *o)
{
    out->status = STATUS_DONE;
    out->item = m->items[o->item].id;
    out->qty = o->qty;
    out->order = o->id;
}

/* confirm and cancel share their refusals. */
static int m_order_usable(model *m, int u, const engine_request *r, int64_t now,
                          engine_result *out)
{
    int i = m_order_find(m, u, r->order);
    if (i < 0) {
        m_reject(out, REASON_UNKNOWN_ORDER);
        return -1;
    }
    m_order *o = &m->orders[i];
    if (o->state == ORDER_HELD && now >= o->exp) {
        m_expire_one(m, i, now);
        m_reject(out, REASON_EXPIRED);
        return -1;
    }
    if (o->state == ORDER_EXPIRED) m_reject(out, REASON_EXPIRED);
    if (o->state == ORDER_CANCELLED) m_reject(out, REASON_UNKNOWN_ORDER);
    return out->status ? -1 : i;
}

static void m_confirm(model *m, int u, const engine_request *r, int64_t now,
                      engine_result *out)
{
    int i = m_order_usable(m, u, r, now, out);
    if (i < 0) return;
    m_order *o = &m->orders[i];
    if (o->state == ORDER_HELD) {
        o->state = ORDER_CONFIRMED;
        o->exp = 0;
        m_emit(m, (m_event){ EVENT_CONFIRM, u, o->item, o->qty, o->id, r->id, now, 0, NULL, NULL });
    }
    m_order_done(m, out, o);
}

static void m_cancel(model *m, int u, const engine_request *r, int64_t now,
                     engine_result *out)
{
    int i = m_order_usable(m, u, r, now, out);
    if (i < 0) return;
    m_order *o = &m->orders[i];
    o->state = ORDER_CANCELLED;
    m->items[o->item].free += o->qty;
    m_emit(m, (m_event){ EVENT_CANCEL, u, o->item, o->qty, o->id, r->id, now, 0, NULL, NULL });
    m->ended[m->n_ended++] = i;
    m_order_done(m, out, o);
}

static void m_seat(model *m, int u, int it, const engine_request *r, int64_t now)
{
    m->users[u].room = it;
    m->users[u].since = now;
    m->users[u].req = r->id;
    m->items[it].free--;
    m_emit(m, (m_event){ EVENT_GRANT, u, it, 1, 0, r->id, now, 0, NULL, NULL });
}

static int m_unseat(model *m, int u, const engine_request *r, int64_t now)
{
    int it = m->users[u].room;
    m->users[u].room = -1;
    m->users[u].staff = 0;
    m->users[u].req = NULL;
    m->items[it].free++;
    m_emit(m, (m_event){ EVENT_RELEASE, u, it, 1, 0, r->id, now, 0, NULL, NULL });
    return it;
}

static const char *m_attr(const m_item *it, const char *key)
{
    if (strcmp(key, "floor") == 0) return it->floor;
    if (strcmp(key, "gender") == 0) return it->gender;
    return NULL;
}

static int m_matches(const m_item *it, const engine_request *r)
{
    for (size_t i = 0; i < r->n_filter; i++)
        if (!str_eq(m_attr(it, r->filter[i].key), r->filter[i].value)) return 0;
    return 1;
}

/* Room it for auto's user (mem NULL) or a group's members: free beds,
 * group_fill (11.4) and eligibility (11.2). */
static int m_fits(const model *m, const engine_request *r, int it, const int *mem, int n_mem)
{
    const m_item *p = &m->items[it];
    if (!mem) return m_single_ok(m, it) && m_may(m, m_user_find(m, r->user), it);
    pe_holder h[N_USERS];
    int n = m_holders(m, it, h);
    return pe_group_fits(m->exact, p->cap, p->cap - p->free, n_mem) &&
           pe_may_group(m->prof, mem, n_mem, &p->rules, h, n);
}

static int m_pick(const model *m, const engine_request *r, const int *mem, int n_mem)
{
    for (size_t i = 0; i < r->n_prefs; i++) {
        int it = m_item_find(m, r->prefs[i]);
        if (it >= 0 && m_fits(m, r, it, mem, n_mem)) return it;
    }
    if (!r->has_filter) return -1;
    int best = -1;
    for (int it = 0; it < m->n_items; it++) {
        const m_item *p = &m->items[it];
        if (!m_matches(p, r) || !m_fits(m, r, it, mem, n_mem)) continue;
        if (best < 0 || p->free < m->items[best].free ||
            (p->free == m->items[best].free && strcmp(p->id, m->items[best].id) < 0))
            best = it;
    }
    return best;
}

static void m_rooms(model *m, int u, const engine_request *r, int64_t now,
                    engine_result *out)
{
    int it = -1;
    switch (r->op) {
    case OP_CHOOSE:
        it = m_item_find(m, r->item);
        if (it < 0) REJECT(REASON_UNKNOWN_ITEM);
        if (m->users[u].room >= 0) REJECT(REASON_ALREADY_HOLDING);
        if (!m_may(m, u, it)) REJECT(REASON_NOT_ELIGIBLE);
        if (!m_single_ok(m, it)) REJECT(REASON_ROOM_FULL);
        m_seat(m, u, it, r, now);
        m_grant(m, out, it);
        return;
    case OP_AUTO:
        if (m->users[u].room >= 0) REJECT(REASON_ALREADY_HOLDING);
        it = m_pick(m, r, NULL, 0);
        if (it < 0) REJECT(REASON_NO_ROOM);
        m_seat(m, u, it, r, now);
        m_grant(m, out, it);
        return;
    case OP_GROUP: {
        if ((int64_t)r->n_members > m->meta.max_group)
            REJECT(REASON_GROUP_TOO_LARGE);
        int mem[N_USERS] = { 0 };
        for (size_t i = 0; i < r->n_members; i++) {
            mem[i] = m_user_find(m, r->members[i]);
            if (m->users[mem[i]].room >= 0) REJECT(REASON_MEMBER_BUSY);
        }
        it = m_pick(m, r, mem, (int)r->n_members);
        if (it < 0) REJECT(REASON_NO_ROOM);
        for (size_t i = 0; i < r->n_members; i++) m_see(m, m_user_find(m, r->members[i]));
        for (size_t i = 0; i < r->n_members; i++)
            m_seat(m, m_user_find(m, r->members[i]), it, r, now);
        m_grant(m, out, it);
        return;
    }
    case OP_SWITCH:
        it = m_item_find(m, r->item);
        if (it < 0) REJECT(REASON_UNKNOWN_ITEM);
        if (m->users[u].room < 0) REJECT(REASON_NOT_HOLDING);
        if (m->users[u].room == it) REJECT(REASON_ALREADY_HOLDING);
        if (!m_may(m, u, it)) REJECT(REASON_NOT_ELIGIBLE);
        if (!m_single_ok(m, it)) REJECT(REASON_ROOM_FULL);
        m_unseat(m, u, r, now);
        m_seat(m, u, it, r, now);
        m_grant(m, out, it);
        return;
    case OP_RELEASE:
        if (m->users[u].room < 0) REJECT(REASON_NOT_HOLDING);
        it = m_unseat(m, u, r, now);
        out->status = STATUS_DONE;
        out->item = m->items[it].id;
        return;
    default:
        fail();
    }
}

static int m_shape_ok(const engine_request *r)
{
    if (r->op == OP_BUY) return r->item && r->qty >= 1;
    if (r->op != OP_GROUP) return 1;
    int sender = 0;
    if (r->n_members == 0) return 0;
    for (size_t i = 0; i < r->n_members; i++) {
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->members[i], r->members[j]) == 0) return 0;
        sender |= strcmp(r->members[i], r->user) == 0;
    }
    return sender;
}

static int m_throttled(model *m, m_user *u, int64_t now)
{
    if (m->meta.rate_max <= 0) return 0;
    if (now < u->pen) return 1;
    if (!u->has_win || now - u->win_start >= m->meta.rate_window_ms) {
        u->has_win = 1;
        u->win_start = now;
        u->cnt = 0;
    }
    if (++u->cnt > m->meta.rate_max) {
        u->pen = now + m->meta.penalty_ms;
        return 1;
    }
    return 0;
}

static int is_stock_op(engine_op op) { return op == OP_BUY || op == OP_CONFIRM || op == OP_CANCEL; }

static void m_user_request(model *m, const engine_request *r, int64_t now,
                           engine_result *out)
{
    int u = m_user_find(m, r->user);
    m_see(m, u);
    if (!m_shape_ok(r)) {
        out->status = STATUS_INVALID;
        return;
    }
    int phase = m_phase(m, now);
    if (phase == 3) REJECT(REASON_CLOSED);
    if (phase == 0) REJECT(REASON_NOT_OPEN);
    if (phase == 2) REJECT(REASON_PAUSED);
    if (m_throttled(m, &m->users[u], now)) REJECT(REASON_THROTTLED);
    if (is_stock_op(r->op) != (m->meta.kind == BATCH_STOCK))
        REJECT(REASON_WRONG_KIND);
    if (r->op == OP_BUY) m_buy(m, u, r, now, out);
    else if (r->op == OP_CONFIRM) m_confirm(m, u, r, now, out);
    else if (r->op == OP_CANCEL) m_cancel(m, u, r, now, out);
    else m_rooms(m, u, r, now, out);
}

static void m_set_state(model *m, engine_admin_state s, const engine_request *r,
                        int64_t now)
{
    m->admin = s;
    m_emit(m, (m_event){ EVENT_STATE, -1, -1, 0, 0, r->id, now, 0,
                         m_phase_name(m_phase(m, now)), NULL });
}

/* The last event was the staff's (11.5). */
static void m_by_staff(model *m) { m->ev[m->n_ev - 1].by = "staff"; }

static void m_assign_bed(model *m, int u, int it, const engine_request *r, int64_t now,
                         engine_result *out)
{
    if (m->items[it].free <= 0) REJECT(REASON_ROOM_FULL);
    if (m->users[u].room >= 0) REJECT(REASON_ALREADY_HOLDING);
    if (r->check && !m_may(m, u, it)) REJECT(REASON_NOT_ELIGIBLE);
    m_seat(m, u, it, r, now);
    m_by_staff(m);
    m->users[u].staff = !r->check;
    m_grant(m, out, it);
}

static void m_assign_units(model *m, int u, int it, const engine_request *r, int64_t now,
                           engine_result *out)
{
    int64_t qty = r->qty > 0 ? r->qty : 1;
    if (qty > m->items[it].free) REJECT(REASON_SOLD_OUT);
    if (m_units(m, u) + qty > m->meta.per_user) REJECT(REASON_LIMIT);
    if (r->check && !m_may(m, u, it)) REJECT(REASON_NOT_ELIGIBLE);
    m_order o = { order_id(++m->order_calls), u, it, qty, 0, ORDER_CONFIRMED, !r->check };
    m->orders[m->n_orders++] = o;
    m->items[it].free -= qty;
    m_emit(m, (m_event){ EVENT_GRANT, u, it, qty, o.id, r->id, now, 0, NULL, "staff" });
    m_grant(m, out, it);
    out->qty = qty;
    out->order = o.id;
}

/* An order of u ended by an unassign. */
static void m_staff_cancel(model *m, int i, const engine_request *r, int64_t now, engine_result *out)
{
    m_order *o = &m->orders[i];
    o->state = ORDER_CANCELLED;
    m->items[o->item].free += o->qty;
    m_emit(m, (m_event){ EVENT_CANCEL, o->user, o->item, o->qty, o->id, r->id, now, 0, NULL, "staff" });
    m->ended[m->n_ended++] = i;
    m_order_done(m, out, o);
}

static void m_unassign(model *m, int u, const engine_request *r, int64_t now, engine_result *out)
{
    if (m->meta.kind == BATCH_ROOM) {
        if (m->users[u].room < 0) REJECT(REASON_NOT_HOLDING);
        int it = m_unseat(m, u, r, now);
        m_by_staff(m);
        out->status = STATUS_DONE;
        out->item = m->items[it].id;
        return;
    }
    if (r->order) {
        int i = m_order_find(m, u, r->order);
        if (i < 0 || !m_live(&m->orders[i])) REJECT(REASON_UNKNOWN_ORDER);
        m_staff_cancel(m, i, r, now, out);
        return;
    }
    int any = 0;
    for (int i = m->n_orders - 1; i >= 0; i--)   /* every live order, the newest first */
        if (m->orders[i].user == u && m_live(&m->orders[i])) {
            m_staff_cancel(m, i, r, now, out);
            any = 1;
        }
    if (!any) REJECT(REASON_NOT_HOLDING);
}

/* assign / unassign (11.5): whatever the phase, throttle and slots. */
static void m_staff(model *m, const engine_request *r, int64_t now, engine_result *out)
{
    int assign = r->op == OP_ASSIGN;
    if (!r->user || (assign && !r->item)) {
        out->status = STATUS_INVALID;
        return;
    }
    int it = assign ? m_item_find(m, r->item) : -1;
    if (assign && it < 0) REJECT(REASON_UNKNOWN_ITEM);
    int u = m_user_find(m, r->user);
    m_see(m, u);
    if (!assign) m_unassign(m, u, r, now, out);
    else if (m->meta.kind == BATCH_ROOM) m_assign_bed(m, u, it, r, now, out);
    else m_assign_units(m, u, it, r, now, out);
    if (out->status == STATUS_GRANTED) {   /* a grant, but no queue request (11.5, section 6) */
        m->granted++;
        m->staff_granted++;
    }
    if (out->status == STATUS_GRANTED || out->status == STATUS_DONE) out->by = "staff";
}

static void m_admin(model *m, const engine_request *r, int64_t now,
                    engine_result *out)
{
    m->ctl++;
    if (r->op == OP_ASSIGN || r->op == OP_UNASSIGN) {
        m_staff(m, r, now, out);
        return;
    }
    if (r->op == OP_SET_CAPACITY) {
        if (!r->item || r->qty < 0) {
            out->status = STATUS_INVALID;
            return;
        }
        int it = m_item_find(m, r->item);
        if (it >= 0 && r->qty < m->items[it].cap - m->items[it].free)
            REJECT(REASON_LIMIT);
        if (it < 0) {
            it = m->n_items++;
            memset(&m->items[it], 0, sizeof m->items[it]);
            snprintf(m->items[it].id, sizeof m->items[it].id, "%s", r->item);
            m->items[it].cap = m->items[it].free = r->qty;
        } else {
            m->items[it].free += r->qty - m->items[it].cap;
            m->items[it].cap = r->qty;
        }
        m_emit(m, (m_event){ EVENT_CAPACITY, -1, it, r->qty, 0, r->id, now, 0, NULL, NULL });
        out->status = STATUS_DONE;
        out->item = m->items[it].id;
        out->qty = r->qty;
        return;
    }
    if (r->op != OP_CLOSE && m_phase(m, now) == 3) REJECT(REASON_CLOSED);
    if (r->op == OP_PAUSE && m->admin != ADMIN_PAUSED) m_set_state(m, ADMIN_PAUSED, r, now);
    if (r->op == OP_RESUME && m->admin == ADMIN_PAUSED) m_set_state(m, ADMIN_NONE, r, now);
    if (r->op == OP_CLOSE && m->admin != ADMIN_CLOSED) m_set_state(m, ADMIN_CLOSED, r, now);
    out->status = STATUS_DONE;
}

static void m_decide(model *m, const engine_request *r, int64_t now,
                     engine_result *out)
{
    memset(out, 0, sizeof *out);
    m_expire(m, now);
    if (r->op >= OP_PAUSE) {
        m_admin(m, r, now, out);
        return;
    }
    m_user_request(m, r, now, out);
    m->processed++;
    switch (out->status) {
    case STATUS_GRANTED: m->granted++; break;
    case STATUS_DONE: m->done++; break;
    case STATUS_REJECTED: m->rejected++; break;
    default: m->invalid++; break;
    }
}

/* ------------------------------------------------------------ replayer */

/* The events go through the log's one replayer (core/replay.h), which
 * knows only the events: what it rebuilds must equal the engine, and any
 * rule it finds broken fails the run. */
static void rp_finding(void *ud, replay_kind kind, const char *msg)
{
    ctx *t = ud;
    print_error("replay: %s\n", msg);
    CHECK(t, !"the event log breaks a replay rule");
}

static void rp_apply(ctx *t, replay *p, const engine_event *ev)
{
    char order[24] = "";
    if (ev->order) snprintf(order, sizeof order, "%llu", (unsigned long long)ev->order);
    replay_event re = { .type = ev->type, .type_name = engine_event_name(ev->type), .user = ev->user,
                        .item = ev->item, .order = order, .req = ev->req, .state = ev->state,
                        .qty = ev->qty, .at = ev->at, .expires_at = ev->expires_at, .wait_no = ev->wait_no,
                        .by = ev->by };
    CHECK(t, replay_apply(p, "(engine)", &re) == 0);
}

/* ------------------------------------------------------------ store */

/* What the shell would have written to Redis from the drains. */
typedef struct store {
    struct { char id[8]; int64_t cap, free; } items[MAX_ITEMS];
    int n_items;
    struct {
        char room[8];
        int staff;
        int64_t since;
        char req[16];
        int64_t units;
        engine_order orders[MAX_LIVE];   /* item as an index of `items` */
        int n;
    } users[N_USERS];
    struct { int user; engine_order o; } tombs[MAX_ORDERS];
    int n_tombs;
    int participant[N_USERS];
    engine_counters counters;
    engine_admin_state admin;
} store;

/* ------------------------------------------------------------ one run */

/* What the runs of one kind reached, so that a property over nothing
 * shows (contract 11: eligibility, exact fill, staff placements). */
typedef struct m_tally {
    long steps, not_eligible, exact_refusals, exact_groups, staff_grants, exceptions, unassigns,
         edits, restarts, staff_restarts;
} m_tally;

typedef struct run {
    m_tally *tally;
    ctx t;
    uint64_t rng;
    model m;
    replay *rp;
    store st;
    source src;
    engine *e;
    size_t applied;               /* engine events already replayed */
    int64_t now;
    engine_op op;                 /* the step's request, OP_NONE for none */
    char ids[MAX_STEPS][16];      /* request ids: events point at them */
} run;

#define N_NAMES 6
static const char *const item_names[N_NAMES] = { "i0", "i1", "i2", "i3", "i4", "i5" };

static void check_event(run *x, const engine_event *ev, const m_event *me)
{
    ctx *t = &x->t;
    const model *m = &x->m;
    CHECK(t, ev->type == me->type);
    CHECK(t, str_eq(ev->user, me->user >= 0 ? m->users[me->user].id : NULL));
    CHECK(t, str_eq(ev->item, me->item >= 0 ? m->items[me->item].id : NULL));
    CHECK(t, ev->qty == me->qty);
    CHECK(t, ev->order == me->order);
    CHECK(t, str_eq(ev->req, me->req));
    CHECK(t, ev->at == me->at);
    CHECK(t, ev->expires_at == me->exp);
    CHECK(t, str_eq(ev->state, me->state));
    CHECK(t, str_eq(ev->by, me->by));
}

static void check_result(run *x, const engine_result *a, const engine_result *b)
{
    ctx *t = &x->t;
    if (a->status != b->status || a->reason != b->reason)
        print_error("engine %s/%s, model %s/%s\n", engine_status_name(a->status),
                    engine_reason_name(a->reason), engine_status_name(b->status),
                    engine_reason_name(b->reason));
    CHECK(t, a->status == b->status);
    CHECK(t, a->reason == b->reason);
    CHECK(t, str_eq(a->item, b->item));
    CHECK(t, a->qty == b->qty);
    CHECK(t, a->order == b->order);
    CHECK(t, a->expires_at == b->expires_at);
    CHECK(t, a->rank == b->rank);
    CHECK(t, str_eq(a->by, b->by));
}

static int same_grant(const engine_event *a, const engine_event *b)
{
    return a->type == EVENT_GRANT && b->type == EVENT_GRANT && str_eq(a->req, b->req) &&
           str_eq(a->item, b->item);
}

/* The grants of one request in a row from event i on (a group's: one per
 * member), or 0 when event i is not the first of them. */
static size_t grant_run(const engine *e, size_t from, size_t i)
{
    const engine_event *ev = engine_event_at(e, i);
    if (ev->type != EVENT_GRANT || (i > from && same_grant(engine_event_at(e, i - 1), ev))) return 0;
    size_t k = 1;
    while (i + k < engine_event_count(e) && same_grant(engine_event_at(e, i + k), ev)) k++;
    return k;
}

/* 11.4, whatever a model says: with group_fill = exact the k grants of a
 * request of op into a room of cap beds, `held` held just before them,
 * are one bed beside a holder or a single, or, for a group, the whole
 * empty room of exactly its size. Staff placements (11.5) and swaps
 * (which keep the rooms as full as they were) are not bound by it. */
static int fill_ok(int exact, engine_op op, const char *by, int64_t cap, int64_t held, size_t k)
{
    if (!exact || by || op == OP_SWAP || op == OP_ASSIGN) return 1;
    if (op == OP_GROUP) return held == 0 && cap == (int64_t)k;
    return k == 1 && (cap == 1 || held > 0);
}

/* fill_ok on the log, read on the replay as it stood before the grants. */
static void check_fill(run *x, size_t i)
{
    const engine_event *ev = engine_event_at(x->e, i);
    size_t k = grant_run(x->e, 0, i);
    if (!k) return;
    const replay_item *ri = replay_item_get(x->rp, ev->item);
    CHECK(&x->t, fill_ok(x->m.exact, x->op, ev->by, ri ? ri->cap : 0, ri ? ri->held : 0, k));
}

/* The events (checked one by one and replayed), the order-id calls and
 * the counters against the model. */
static void check_events_and_counters(run *x)
{
    ctx *t = &x->t;
    model *m = &x->m;
    engine *e = x->e;

    const char *why = engine_check_invariants(e);   /* the engine's own view */
    if (why) print_error("engine_check_invariants: %s\n", why);
    CHECK(t, why == NULL);
    CHECK(t, engine_event_count(e) == (size_t)m->n_ev);
    for (int i = 0; i < m->n_ev; i++) check_event(x, engine_event_at(e, (size_t)i), &m->ev[i]);
    for (; x->applied < engine_event_count(e); x->applied++) {
        check_fill(x, x->applied);
        rp_apply(t, x->rp, engine_event_at(e, x->applied));
    }
    CHECK(t, x->src.calls == m->order_calls);

    const engine_counters *c = engine_get_counters(e);
    CHECK(t, c->processed == m->processed && c->granted == m->granted);
    CHECK(t, c->staff_granted == m->staff_granted);
    CHECK(t, c->done == m->done && c->rejected == m->rejected);
    CHECK(t, c->invalid == m->invalid && c->ctl == m->ctl);
    CHECK(t, c->processed + c->staff_granted == c->granted + c->done + c->rejected + c->invalid);
    int seen = 0;
    for (int u = 0; u < N_USERS; u++) seen += m->users[u].seen;
    CHECK(t, c->participants == seen);
    CHECK(t, (int64_t)engine_user_count(e) == seen);
    CHECK(t, engine_phase_at(e, x->now) == (engine_phase)m_phase(m, x->now));
}

/* A room user: engine, model and replay name the same bed. */
static void check_room_user(run *x, int u, const engine_user_view *v, int64_t *held)
{
    ctx *t = &x->t;
    model *m = &x->m;
    int r = m->users[u].room;
    CHECK(t, str_eq(v->room, r >= 0 ? m->items[r].id : NULL));
    const replay_user *ru = replay_user_get(x->rp, m->users[u].id);
    CHECK(t, str_eq(v->room, ru ? ru->item : NULL));
    CHECK(t, v->staff == m->users[u].staff);
    if (r >= 0) {
        held[r]++;
        CHECK(t, v->since == m->users[u].since && v->since == ru->since);
        CHECK(t, str_eq(v->req, m->users[u].req) && str_eq(v->req, ru->req));
    }
    CHECK(t, v->n_orders == 0 && v->units == 0);
}

/* A stock user: the same orders, in order, in the engine and the replay,
 * and as many units as the model says, within per_user. */
static void check_stock_user(run *x, int u, const engine_user_view *v, int64_t *held)
{
    ctx *t = &x->t;
    model *m = &x->m;
    int64_t sum = 0;
    const replay_user *ru = replay_user_get(x->rp, m->users[u].id);
    CHECK(t, v->n_orders == (ru ? ru->n_orders : 0));
    for (size_t i = 0; i < v->n_orders; i++) {
        const engine_order *o = &v->orders[i];
        const replay_order *ro = &ru->orders[i];
        engine_item_view iv;
        engine_item_view_at(x->e, o->item, &iv);
        CHECK(t, o->id == strtoull(ro->order, NULL, 10) && strcmp(iv.id, ro->item) == 0);
        CHECK(t, o->qty == ro->qty && o->state == ro->state);
        CHECK(t, o->expires_at == ro->expires_at);
        int mi = m_order_find(m, u, o->id);
        CHECK(t, mi >= 0 && m->orders[mi].state == o->state);
        CHECK(t, o->staff == m->orders[mi].staff);
        held[m_item_find(m, iv.id)] += o->qty;
        sum += o->qty;
    }
    CHECK(t, v->units == sum && sum == m_units(m, u));
    CHECK(t, v->units <= m->meta.per_user);
    CHECK(t, v->room == NULL);
}

/* Items: model, replay and engine agree; held == capacity - free; the free
 * total and the next expiry match the model. */
static void check_items(run *x, const int64_t *held)
{
    ctx *t = &x->t;
    model *m = &x->m;
    int64_t free_sum = 0;
    for (int i = 0; i < m->n_items; i++) {
        engine_item_view iv;
        CHECK(t, engine_item_view_get(x->e, m->items[i].id, &iv) == 0);
        CHECK(t, iv.capacity == m->items[i].cap && iv.free == m->items[i].free);
        const replay_item *ri = replay_item_get(x->rp, iv.id);
        CHECK(t, ri && ri->cap_known && ri->cap == iv.capacity);
        CHECK(t, ri->cap - ri->held == iv.free);
        CHECK(t, 0 <= iv.free && iv.free <= iv.capacity);
        CHECK(t, iv.capacity - iv.free == held[i]);
        free_sum += iv.free;
    }
    CHECK(t, engine_get_counters(x->e)->free_units == free_sum);
    int64_t next = INT64_MAX;
    for (int i = 0; i < m->n_orders; i++)
        if (m->orders[i].state == ORDER_HELD && m->orders[i].exp < next) next = m->orders[i].exp;
    CHECK(t, engine_next_expiry(x->e) == next);
}

/* The holders of item by the engine's own views, among users ids[0..n)
 * (a stock user is a staff exception when all its orders of the item are). */
static int holders_of(const engine *e, const char *const *ids, int n_ids, const char *item, pe_holder *h)
{
    int n = 0;
    for (int u = 0; u < n_ids; u++) {
        engine_user_view v;
        if (engine_user_view_get(e, ids[u], &v) < 0) continue;
        int any = v.room && !strcmp(v.room, item), regular = any && !v.staff;
        for (size_t i = 0; i < v.n_orders; i++) {
            engine_item_view iv;
            engine_item_view_at(e, v.orders[i].item, &iv);
            if (strcmp(iv.id, item)) continue;
            any = 1;
            regular |= !v.orders[i].staff;
        }
        if (any) h[n++] = (pe_holder){ u, !regular };
    }
    return n;
}

/* What a failure of check_rules needs to be read: the item's rules, its
 * holders and the profiles involved. */
static void print_rules(const run *x, int it, int u, const pe_holder *h, int n)
{
    const model *m = &x->m;
    char key[24], val[32];
    print_error("item %s (cap %lld, free %lld) rules:", m->items[it].id, (long long)m->items[it].cap,
                (long long)m->items[it].free);
    for (int k = 0; k < m->items[it].rules.n; k++) {
        pe_rule_attr(&m->items[it].rules.r[k], key, sizeof key, val, sizeof val);
        print_error(" %s=%s", key, val);
    }
    print_error("\n");
    for (int i = -1; i < n; i++) {
        int v = i < 0 ? u : h[i].user;
        print_error("  %s %s:", i < 0 ? "user" : h[i].staff ? "staff holder" : "holder", m->users[v].id);
        for (int k = 0; k < PE_KEYS; k++)
            print_error(" %s=%s", pe_key_names[k], pe_value(m->prof, v, k) ? pe_value(m->prof, v, k) : "-");
        print_error("\n");
    }
}

/* 11.2 after every step, on the engine's own views: no holder but a
 * staff exception breaks a rule of their item; verify's audit
 * (engine_holder_ok) and the why of status --user (engine_eligible)
 * answer as the reference does. */
static void check_rules(run *x)
{
    model *m = &x->m;
    for (int it = 0; it < m->n_items; it++) {
        pe_holder h[N_USERS];
        const char *id = m->items[it].id, *ids[N_USERS];
        for (int u = 0; u < N_USERS; u++) ids[u] = m->users[u].id;
        int n = holders_of(x->e, ids, N_USERS, id, h);
        const pe_rules *rs = &m->items[it].rules;
        int bad = pe_audit(m->prof, rs, h, n);
        if (bad >= 0) print_error("%s holds %s against its rules\n", m->users[h[bad].user].id, id);
        CHECK(&x->t, bad < 0);
        for (int i = 0; i < n; i++)
            CHECK(&x->t, engine_holder_ok(x->e, m->users[h[i].user].id, id, NULL) ==
                         pe_holder_ok(m->prof, rs, h, n, i));
        for (int u = 0; u < N_USERS; u++) {
            int want = m_may(m, u, it);
            if (engine_eligible(x->e, m->users[u].id, id, NULL) != want) print_rules(x, it, u, h, n);
            CHECK(&x->t, engine_eligible(x->e, m->users[u].id, id, NULL) == want);
        }
    }
}

/* Events, counters, replay and invariants after every step. */
static void check_state(run *x)
{
    ctx *t = &x->t;
    model *m = &x->m;
    check_events_and_counters(x);
    CHECK(t, engine_item_count(x->e) == (size_t)m->n_items);
    CHECK(t, replay_item_count(x->rp) == (size_t)m->n_items);
    int64_t held[MAX_ITEMS] = { 0 };
    for (int u = 0; u < N_USERS; u++) {
        engine_user_view v;
        if (engine_user_view_get(x->e, m->users[u].id, &v) < 0) {
            CHECK(t, !m->users[u].seen);
            continue;
        }
        if (m->meta.kind == BATCH_ROOM) check_room_user(x, u, &v, held);
        else check_stock_user(x, u, &v, held);
    }
    check_items(x, held);
    check_rules(x);
}

/* ------------------------------------------------------------ drain */

static void store_user(run *x, int u, const engine_user_view *v)
{
    store *s = &x->st;
    memset(&s->users[u], 0, sizeof s->users[u]);
    if (v->room) {
        snprintf(s->users[u].room, 8, "%s", v->room);
        s->users[u].staff = v->staff;
        s->users[u].since = v->since;
        snprintf(s->users[u].req, 16, "%s", v->req ? v->req : "");
    }
    s->users[u].units = v->units;
    s->users[u].n = (int)v->n_orders;
    CHECK(&x->t, v->n_orders <= MAX_LIVE);
    for (size_t i = 0; i < v->n_orders; i++) s->users[u].orders[i] = v->orders[i];
}

static int order_equal(const engine_order *a, const engine_order *b)
{
    return a->id == b->id && a->item == b->item && a->qty == b->qty &&
           a->expires_at == b->expires_at && a->state == b->state && a->staff == b->staff;
}

static int store_user_equal(const store *s, int u, const engine_user_view *v)
{
    if (!str_eq(s->users[u].room[0] ? s->users[u].room : NULL, v->room)) return 0;
    if (v->room && (s->users[u].since != v->since || s->users[u].staff != v->staff ||
                    strcmp(s->users[u].req, v->req ? v->req : "") != 0))
        return 0;
    if (s->users[u].units != v->units || s->users[u].n != (int)v->n_orders) return 0;
    for (size_t i = 0; i < v->n_orders; i++)
        if (!order_equal(&s->users[u].orders[i], &v->orders[i])) return 0;
    return 1;
}

static int store_item(store *s, const char *id)
{
    for (int i = 0; i < s->n_items; i++)
        if (strcmp(s->items[i].id, id) == 0) return i;
    return -1;
}

/* Plays the writer: takes the dirty lists into the store and checks that
 * nothing that changed was left out. */
static void drain(run *x)
{
    ctx *t = &x->t;
    model *m = &x->m;
    store *s = &x->st;
    engine *e = x->e;
    int dirty[N_USERS] = { 0 };
    for (size_t i = 0; i < engine_dirty_user_count(e); i++) {
        engine_user_view v;
        engine_dirty_user_at(e, i, &v);
        int u = m_user_find(m, v.id);
        CHECK(t, u >= 0 && !dirty[u]);
        dirty[u] = 1;
        store_user(x, u, &v);
    }
    for (int u = 0; u < N_USERS; u++) {
        engine_user_view v;
        if (engine_user_view_get(e, m->users[u].id, &v) == 0)
            CHECK(t, store_user_equal(s, u, &v));
    }
    for (size_t i = 0; i < engine_dirty_item_count(e); i++) {
        engine_item_view v;
        int cap_changed;
        engine_dirty_item_at(e, i, &v, &cap_changed);
        int k = store_item(s, v.id);
        if (k < 0) {
            CHECK(t, cap_changed);
            k = s->n_items++;
            snprintf(s->items[k].id, 8, "%s", v.id);
        }
        CHECK(t, cap_changed || s->items[k].cap == v.capacity);
        s->items[k].cap = v.capacity;
        s->items[k].free = v.free;
    }
    CHECK(t, s->n_items == m->n_items);
    for (int i = 0; i < s->n_items; i++) {
        engine_item_view v;
        CHECK(t, engine_item_view_get(e, s->items[i].id, &v) == 0);
        CHECK(t, v.capacity == s->items[i].cap && v.free == s->items[i].free);
    }
    CHECK(t, engine_new_participant_count(e) == (size_t)m->n_fresh);
    for (int i = 0; i < m->n_fresh; i++) {
        CHECK(t, strcmp(engine_new_participant_at(e, (size_t)i), m->users[m->fresh[i]].id) == 0);
        s->participant[m->fresh[i]] = 1;
    }
    CHECK(t, engine_ended_count(e) == (size_t)m->n_ended);
    for (int i = 0; i < m->n_ended; i++) {
        const char *who;
        engine_order o;
        engine_ended_at(e, (size_t)i, &who, &o);
        const m_order *mo = &m->orders[m->ended[i]];
        CHECK(t, strcmp(who, m->users[mo->user].id) == 0 && o.id == mo->id);
        CHECK(t, o.state == mo->state && o.qty == mo->qty);
        s->tombs[s->n_tombs].user = mo->user;
        s->tombs[s->n_tombs++].o = o;
    }
    s->counters = *engine_get_counters(e);
    s->admin = engine_get_admin_state(e);
    engine_drain_clear(e);
    m->n_ev = m->n_fresh = m->n_ended = 0;
    x->applied = 0;
}

/* ------------------------------------------------------------ restart */

static void load_attrs(run *x, int i)
{
    const m_item *it = &x->m.items[i];
    if (it->floor) assert_int_equal(engine_load_attr(x->e, it->id, "floor", it->floor), 0);
    if (it->gender) assert_int_equal(engine_load_attr(x->e, it->id, "gender", it->gender), 0);
    for (int k = 0; k < it->rules.n; k++) {
        char key[24], val[32];
        pe_rule_attr(&it->rules.r[k], key, sizeof key, val, sizeof val);
        assert_int_equal(engine_load_attr(x->e, it->id, key, val), 0);
    }
}

/* P:{B}:profiles into the engine, as the shell loads and re-reads it. */
static void load_profiles(run *x)
{
    for (int u = 0; u < N_USERS; u++) {
        engine_kv kv[PE_KEYS];
        size_t n = pe_profile_kv(&x->m.prof[u], kv);
        CHECK(&x->t, engine_profile_set(x->e, x->m.users[u].id, kv, n) == 0);
    }
}

static engine *new_engine(run *x)
{
    engine *e = engine_new(&x->m.meta, rnd_next(&x->rng));
    assert_non_null(e);
    engine_set_order_source(e, next_order, &x->src);
    return e;
}

static void load_tombstones(run *x)
{
    store *s = &x->st;
    for (int i = 0; i < s->n_tombs; i++) {
        engine_order o = s->tombs[i].o;
        CHECK(&x->t, engine_load_order(x->e, x->m.users[s->tombs[i].user].id, o.id,
                                       s->items[o.item].id, o.qty, o.state,
                                       o.expires_at) == 0);
    }
}

/* Throws the engine away and loads a new one from the store, as the shell
 * does after a failed write or a restart. Throttle windows are not stored,
 * so the model forgets them too. */
static void restart(run *x)
{
    store *s = &x->st;
    model *m = &x->m;
    ctx *t = &x->t;
    engine_free(x->e);
    x->e = new_engine(x);
    for (int i = 0; i < s->n_items; i++) {
        CHECK(t, engine_load_item(x->e, s->items[i].id, s->items[i].cap) == 0);
        load_attrs(x, m_item_find(m, s->items[i].id));
    }
    int tombs_first = chance(&x->rng, 50), profiles_first = chance(&x->rng, 50);
    if (profiles_first) load_profiles(x);
    if (tombs_first) load_tombstones(x);
    for (int u = 0; u < N_USERS; u++) {
        if (s->users[u].room[0])
            CHECK(t, engine_load_room_holder(x->e, m->users[u].id, s->users[u].room,
                                             s->users[u].since, s->users[u].req) == 0);
        if (s->users[u].room[0] && s->users[u].staff)
            CHECK(t, engine_load_staff(x->e, m->users[u].id, 0) == 0);
        for (int i = 0; i < s->users[u].n; i++) {
            engine_order o = s->users[u].orders[i];
            CHECK(t, engine_load_order(x->e, m->users[u].id, o.id, s->items[o.item].id,
                                       o.qty, o.state, o.expires_at) == 0);
            if (o.staff) CHECK(t, engine_load_staff(x->e, m->users[u].id, o.id) == 0);
        }
        if (s->participant[u])
            CHECK(t, engine_load_participant(x->e, m->users[u].id) == 0);
        m->users[u].has_win = 0;
        m->users[u].cnt = m->users[u].pen = m->users[u].win_start = 0;
    }
    if (!tombs_first) load_tombstones(x);
    if (!profiles_first) load_profiles(x);
    engine_load_counters(x->e, &s->counters);
    engine_load_admin_state(x->e, s->admin);
    CHECK(t, engine_new_participant_count(x->e) == 0);
    CHECK(t, engine_dirty_user_count(x->e) == 0 && engine_event_count(x->e) == 0);
    check_state(x);
}

/* ------------------------------------------------------------ generator */

static void setup_run(run *x, uint64_t seed)
{
    memset(x, 0, sizeof *x);
    x->t.seed = seed;
    x->rng = seed;
    uint64_t *g = &x->rng;
    model *m = &x->m;
    engine_meta_defaults(&m->meta);
    m->meta.kind = seed & 1 ? BATCH_ROOM : BATCH_STOCK;
    m->meta.groups = GROUPS_LISTED;
    m->meta.opens_at = chance(g, 50) ? 0 : T0 + rnd(g, 300);
    m->meta.closes_at = chance(g, 70) ? 0 : T0 + 200 + rnd(g, 3000);
    m->meta.hold_ms = chance(g, 40) ? 0 : 5 + rnd(g, 300);
    /* the model knows stock reservations only; holds of beds (rooms with
     * hold_ms, engine_hold.c) are tested in test_engine_hold.c */
    if (m->meta.kind == BATCH_ROOM) m->meta.hold_ms = 0;
    m->meta.per_user = 1 + rnd(g, 4);
    m->meta.max_group = 1 + rnd(g, 4);
    if (m->meta.kind == BATCH_ROOM && chance(g, 40)) m->meta.group_fill = GROUP_FILL_EXACT;
    m->exact = m->meta.group_fill == GROUP_FILL_EXACT;
    if (chance(g, 40)) {
        m->meta.rate_max = 1 + rnd(g, 3);
        m->meta.rate_window_ms = 10 + rnd(g, 100);
        m->meta.penalty_ms = rnd(g, 200);
    }
    m->n_items = 2 + (int)rnd(g, 3);
    for (int i = 0; i < m->n_items; i++) {
        m_item *it = &m->items[i];
        snprintf(it->id, sizeof it->id, "%s", item_names[i]);
        it->cap = it->free = rnd(g, 6);
        it->floor = chance(g, 80) ? (chance(g, 50) ? "1" : "2") : NULL;
        it->gender = chance(g, 80) ? (chance(g, 50) ? "\"F\"" : "\"M\"") : NULL;
        pe_gen_rules(g, &it->rules, 2);
    }
    for (int u = 0; u < N_USERS; u++) pe_gen_profile(g, &m->prof[u]);
    for (int u = 0; u < N_USERS; u++) {
        m->users[u].id[0] = 'u';                 /* u0..u9 */
        m->users[u].id[1] = (char)('0' + u);
        m->users[u].room = -1;
    }
    x->e = new_engine(x);
    int profiles_first = chance(g, 50);
    if (profiles_first) load_profiles(x);
    x->rp = replay_new(m->meta.kind == BATCH_ROOM, m->meta.per_user, rp_finding, &x->t);
    CHECK(&x->t, x->rp != NULL);
    for (int i = 0; i < m->n_items; i++) {
        CHECK(&x->t, engine_load_item(x->e, m->items[i].id, m->items[i].cap) == 0);
        load_attrs(x, i);
        CHECK(&x->t, replay_capacity(x->rp, m->items[i].id, m->items[i].cap) == 0);
        x->st.items[i].cap = x->st.items[i].free = m->items[i].cap;
        snprintf(x->st.items[i].id, 8, "%s", m->items[i].id);
    }
    x->st.n_items = m->n_items;
    if (!profiles_first) load_profiles(x);
}

/* An item id: mostly a known one, sometimes unknown or one set_capacity
 * may create. */
static const char *pick_item(run *x)
{
    if (chance(&x->rng, 10)) return "zz";
    if (chance(&x->rng, 10)) return item_names[rnd(&x->rng, N_NAMES)];
    return x->m.items[rnd(&x->rng, x->m.n_items)].id;
}

static uint64_t pick_order(run *x)
{
    if (x->m.n_orders == 0 || chance(&x->rng, 15)) return order_id((uint64_t)rnd(&x->rng, 100) + 1);
    return x->m.orders[rnd(&x->rng, x->m.n_orders)].id;
}

/* Scratch space for one request's arrays. */
typedef struct req_buf {
    const char *prefs[4];
    const char *members[6];
    engine_kv filter[3];
} req_buf;

static void gen_filter(run *x, engine_request *r, req_buf *b)
{
    static const engine_kv pairs[] = {
        { "floor", "1" }, { "floor", "2" }, { "gender", "\"F\"" },
        { "gender", "\"M\"" }, { "wing", "\"x\"" }, { "floor", "\"1\"" },
    };
    r->has_filter = chance(&x->rng, 50);
    if (!r->has_filter) return;
    r->n_filter = (size_t)rnd(&x->rng, 3);
    for (size_t i = 0; i < r->n_filter; i++)
        b->filter[i] = pairs[rnd(&x->rng, chance(&x->rng, 90) ? 4 : 6)];
    r->filter = b->filter;
}

static void gen_prefs(run *x, engine_request *r, req_buf *b)
{
    r->n_prefs = (size_t)rnd(&x->rng, 4);
    for (size_t i = 0; i < r->n_prefs; i++) b->prefs[i] = pick_item(x);
    r->prefs = b->prefs;
    gen_filter(x, r, b);
}

static void gen_group(run *x, engine_request *r, req_buf *b)
{
    uint64_t *g = &x->rng;
    int n = 1 + (int)rnd(g, x->m.meta.max_group + 1);   /* up to max_group + 1 */
    int used[N_USERS] = { 0 };
    for (int i = 0; i < n; i++) {
        int u;
        do u = (int)rnd(g, N_USERS); while (used[u]);
        used[u] = 1;
        b->members[i] = x->m.users[u].id;
    }
    r->members = b->members;
    r->n_members = (size_t)n;
    r->user = b->members[rnd(g, n)];
    if (chance(g, 3) && n > 1) b->members[1] = b->members[0];   /* invalid */
    if (chance(g, 3)) {                                           /* sender missing */
        for (int u = 0; u < N_USERS; u++)
            if (!used[u]) r->user = x->m.users[u].id;
    }
    gen_prefs(x, r, b);
}

static engine_op gen_op(run *x)
{
    static const engine_op stock[] = { OP_BUY, OP_BUY, OP_BUY, OP_BUY, OP_BUY,
        OP_CONFIRM, OP_CONFIRM, OP_CONFIRM, OP_CANCEL, OP_CANCEL };
    static const engine_op rooms[] = { OP_CHOOSE, OP_CHOOSE, OP_CHOOSE, OP_AUTO,
        OP_AUTO, OP_AUTO, OP_GROUP, OP_GROUP, OP_SWITCH, OP_SWITCH, OP_RELEASE };
    int as_stock = (x->m.meta.kind == BATCH_STOCK) != chance(&x->rng, 8);
    if (chance(&x->rng, 12)) {
        static const engine_op admin[] = { OP_PAUSE, OP_RESUME, OP_RESUME,
            OP_SET_CAPACITY, OP_SET_CAPACITY, OP_SET_CAPACITY, OP_CLOSE,
            OP_ASSIGN, OP_ASSIGN, OP_ASSIGN, OP_UNASSIGN, OP_UNASSIGN };
        engine_op op = admin[rnd(&x->rng, 12)];
        if (op == OP_CLOSE && chance(&x->rng, 70)) op = OP_RESUME;
        return op;
    }
    return as_stock ? stock[rnd(&x->rng, 10)] : rooms[rnd(&x->rng, 11)];
}

static void gen_request(run *x, engine_request *r, req_buf *b)
{
    uint64_t *g = &x->rng;
    memset(r, 0, sizeof *r);
    snprintf(x->ids[x->t.step], 16, "r%d", x->t.step);
    r->id = x->ids[x->t.step];
    r->op = gen_op(x);
    r->seq = x->t.step + 1;
    if (r->op < OP_PAUSE) r->user = x->m.users[rnd(g, N_USERS)].id;
    switch (r->op) {
    case OP_BUY:
        r->item = pick_item(x);
        r->qty = chance(g, 4) ? 0 : 1 + rnd(g, 3);
        break;
    case OP_CONFIRM: case OP_CANCEL: r->order = pick_order(x); break;
    case OP_CHOOSE: case OP_SWITCH: r->item = pick_item(x); break;
    case OP_AUTO: gen_prefs(x, r, b); break;
    case OP_GROUP: gen_group(x, r, b); break;
    case OP_SET_CAPACITY:
        r->item = pick_item(x);
        r->qty = chance(g, 3) ? -1 : rnd(g, 7);
        break;
    case OP_ASSIGN:   /* 11.5: a staff placement, now and then checked */
        r->user = chance(g, 3) ? NULL : x->m.users[rnd(g, N_USERS)].id;
        r->item = pick_item(x);
        r->qty = rnd(g, 4);
        r->check = chance(g, 40);
        break;
    case OP_UNASSIGN: {   /* mostly someone who holds something */
        int u = (int)rnd(g, N_USERS);
        for (int k = 0; k < N_USERS && chance(g, 80); k++, u = (u + 1) % N_USERS)
            if (x->m.users[u].room >= 0 || m_units(&x->m, u) > 0) break;
        r->user = x->m.users[u].id;
        r->order = x->m.meta.kind == BATCH_STOCK && chance(g, 50) ? pick_order(x) : 0;
        break;
    }
    default: break;
    }
}

/* An operator's edit of P:{B}:profiles, read by the engine between two
 * decisions (11.2), of a user who holds nothing: an edit of a holder
 * leaves the same_X value of their item to the next restart (the engine
 * keeps the value it recorded, a reload reads it from the holders). Now
 * and then a profile that is not one: refused, the old one stays. */
static void edit_profile(run *x)
{
    model *m = &x->m;
    int u = (int)rnd(&x->rng, N_USERS);
    if (m->users[u].room >= 0 || m_units(m, u) > 0) return;
    if (chance(&x->rng, 10)) {
        engine_kv bad[2] = { { "gender", "\"F\"" }, { "gender", chance(&x->rng, 50) ? "true" : "\"M\"" } };
        CHECK(&x->t, engine_profile_set(x->e, m->users[u].id, bad, 2) == -EINVAL);
    } else {
        pe_gen_profile(&x->rng, &m->prof[u]);
        engine_kv kv[PE_KEYS];
        size_t n = pe_profile_kv(&m->prof[u], kv);
        CHECK(&x->t, engine_profile_set(x->e, m->users[u].id, kv, n) == 0);
    }
    for (int k = 0; k < PE_KEYS; k++)
        CHECK(&x->t, str_eq(engine_profile_get(x->e, m->users[u].id, pe_key_names[k]),
                            pe_value(m->prof, u, k)));
}

static int64_t advance(run *x, int64_t now)
{
    uint64_t *g = &x->rng;
    switch (rnd(g, 10)) {
    case 0: case 1: return now;
    case 2: case 3: return now + 1;
    case 4: case 5: case 6: return now + rnd(g, 30);
    default: return now + rnd(g, 2 * x->m.meta.hold_ms + 60);
    }
}

static const char *room_of_view(const engine *e, const char *u)
{
    engine_user_view v;
    return engine_user_view_get(e, u, &v) == 0 ? v.room : NULL;
}

static void one_step(run *x, int64_t now)
{
    x->op = OP_NONE;
    if (chance(&x->rng, 10)) {
        size_t a = engine_expire(x->e, now), b = m_expire(&x->m, now);
        CHECK(&x->t, a == b);
        return;
    }
    if (chance(&x->rng, 5)) {
        edit_profile(x);
        x->tally->edits++;
        return;
    }
    engine_request r;
    req_buf b;
    engine_result got, want;
    gen_request(x, &r, &b);
    x->op = r.op;
    engine_decide(x->e, &r, now, &got);
    m_decide(&x->m, &r, now, &want);
    if (getenv("ENGINE_PROP_TRACE"))   /* a failing seed, step by step */
        print_message("step %d at %lld: %s user %s item %s qty %lld check %d -> %s %s %s\n", x->t.step,
                      (long long)now, engine_op_name(r.op), r.user ? r.user : "-", r.item ? r.item : "-",
                      (long long)r.qty, r.check, engine_status_name(got.status),
                      engine_reason_name(got.reason), got.item ? got.item : "");
    check_result(x, &got, &want);
    m_tally *t = x->tally;
    t->not_eligible += got.reason == REASON_NOT_ELIGIBLE;
    t->exact_refusals += x->m.exact && (got.reason == REASON_ROOM_FULL || got.reason == REASON_NO_ROOM);
    t->exact_groups += x->m.exact && r.op == OP_GROUP && got.status == STATUS_GRANTED;
    t->staff_grants += r.op == OP_ASSIGN && got.status == STATUS_GRANTED;
    t->exceptions += r.op == OP_ASSIGN && got.status == STATUS_GRANTED && !r.check;
    t->unassigns += r.op == OP_UNASSIGN && got.status == STATUS_DONE;
    if (got.status == STATUS_GRANTED && r.op == OP_GROUP)   /* members share a room */
        for (size_t i = 0; i < r.n_members; i++)
            CHECK(&x->t, str_eq(room_of_view(x->e, r.members[i]), got.item));
}

/* Whether the store holds a staff exception (a restart must load it). */
static int store_has_staff(const store *s)
{
    for (int u = 0; u < N_USERS; u++) {
        if (s->users[u].room[0] && s->users[u].staff) return 1;
        for (int i = 0; i < s->users[u].n; i++)
            if (s->users[u].orders[i].staff) return 1;
    }
    return 0;
}

static void one_run(uint64_t seed, m_tally *t)
{
    run *x = calloc(1, sizeof *x);
    assert_non_null(x);
    setup_run(x, seed);
    x->tally = t;
    int steps = 20 + (int)rnd(&x->rng, MAX_STEPS - 20);
    int64_t now = T0 - 50 + rnd(&x->rng, 100);
    for (x->t.step = 0; x->t.step < steps; x->t.step++) {
        now = advance(x, now);
        x->now = now;
        one_step(x, now);
        t->steps++;
        CHECK(&x->t, engine_error(x->e) == 0);
        check_state(x);
        if (chance(&x->rng, 30)) {
            drain(x);
            if (chance(&x->rng, 10)) {
                t->restarts++;
                t->staff_restarts += store_has_staff(&x->st);
                restart(x);
            }
        }
    }
    drain(x);
    engine_free(x->e);
    replay_free(x->rp);
    free(x);
}

/* ------------------------------------------------------------ main */

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : def;
}

/* The kind of a run is the low bit of its seed, so one printed seed is
 * enough to replay a failure. */
static void run_many(int rooms)
{
    uint64_t base = env_u64("ENGINE_PROP_SEED", DEFAULT_SEED);
    uint64_t runs = env_u64("ENGINE_PROP_RUNS", DEFAULT_RUNS);
    m_tally t = { 0 };
    for (uint64_t i = 0; i < runs; i++)
        one_run(((base & ~1ULL) + 2 * i) | (uint64_t)rooms, &t);
    print_message("%s: %llu runs, %ld steps; %ld not_eligible, %ld exact-fill refusals, %ld exact group grants, "
                  "%ld staff grants (%ld exceptions), %ld unassigns, %ld profile edits, %ld restarts "
                  "(%ld with staff exceptions)\n", rooms ? "rooms" : "stock", (unsigned long long)runs, t.steps,
                  t.not_eligible, t.exact_refusals, t.exact_groups, t.staff_grants, t.exceptions, t.unassigns,
                  t.edits, t.restarts, t.staff_restarts);
    /* every part of contract 11 is reached (a property over nothing proves
     * nothing): at least about half of what 2500 runs reach */
    long r = (long)runs;
    assert_true(r < 500 || (t.not_eligible > r && t.staff_grants > r / 4 && t.exceptions > r / 6 &&
                            t.unassigns > r / 15 && t.edits > r && t.staff_restarts > r / 10));
    assert_true(r < 500 || !rooms || (t.exact_refusals > r && t.exact_groups > r / 40));
}

static void test_prop_stock(void **state) { run_many(0); }
static void test_prop_rooms(void **state) { run_many(1); }

/* ------------------------------------------------------------ formed groups */

/* Groups formed by consent (contract 9.2) on random sequences of invite,
 * accept, decline, leave, prefs and group mixed with choose, switch and
 * release (and swap, whose exchanges must keep every bed single). No
 * reference model here: the properties the contract promises
 * are checked after every step instead --
 *   - no bed twice (the engine's own sweep, and beds counted per room);
 *   - no member split: a group grant puts every member in the one room;
 *   - nobody placed without having accepted: every member of a granted
 *     group joined it by their own invite (creating it) or accept, as a
 *     shadow of consent kept here from the results says;
 *   - one group per user, at most max_group members, the engine's view of
 *     each user's group equal to the shadow's.
 * And the shell's part: at random points what changed is drained into a
 * store (P:{B}:groups and holders), and sometimes the engine is rebuilt
 * from the store alone, so a group change not marked dirty shows.
 * Contract 11 too: the rooms carry random only_X/same_X rules, the users
 * random profiles, group_fill is exact in some runs, and staff assign
 * and unassign (with and without check) among the requests; after every
 * step no holder but a staff exception breaks a rule of their room
 * (prop_elig.h, with verify's audit agreeing), and every grant of the
 * step keeps exact fill (fill_ok) -- swaps and formed groups included. */

#define FG_USERS 8
#define FG_ROOMS 3
#define FG_STEPS 120
#define FG_MAX_GROUPS (FG_STEPS + 1)

typedef struct fg_group {
    char id[24];
    int alive;
    char members[FG_USERS][8], invited[FG_USERS][8], prefs[4][8];
    size_t n_members, n_invited, n_prefs;
    int64_t version;
} fg_group;

typedef struct fg_run {
    uint64_t rng, seed;
    engine_meta meta;
    engine *e;
    char shadow[FG_USERS][24];          /* the group each user consented to */
    fg_group store[FG_MAX_GROUPS];      /* P:{B}:groups */
    size_t n_store;
    char room_of[FG_USERS][8];          /* holders */
    int staff_of[FG_USERS];             /* a holder placed by staff without check */
    pe_profile prof[FG_USERS];          /* 11.2 */
    pe_rules rules[FG_ROOMS];
} fg_run;

static const char *const FG_ROOM_IDS[FG_ROOMS] = { "R0", "R1", "R2" };
static const int64_t FG_CAP[FG_ROOMS] = { 2, 3, 1 };

static void fg_fail(const fg_run *x, int step, const char *what)
{
    fail_msg("formed groups, seed %llu, step %d: %s", (unsigned long long)x->seed, step, what);
}

static int fg_user(const char *id) { return id && id[0] == 'u' ? atoi(id + 1) : -1; }

static engine *fg_new_engine(fg_run *x)
{
    engine *e = engine_new(&x->meta, x->seed);
    assert_non_null(e);
    char key[24], val[32], id[16];
    for (int r = 0; r < FG_ROOMS; r++) {
        assert_int_equal(engine_load_item(e, FG_ROOM_IDS[r], FG_CAP[r]), 0);
        for (int k = 0; k < x->rules[r].n; k++) {
            pe_rule_attr(&x->rules[r].r[k], key, sizeof key, val, sizeof val);
            assert_int_equal(engine_load_attr(e, FG_ROOM_IDS[r], key, val), 0);
        }
    }
    for (int u = 0; u < FG_USERS; u++) {
        engine_kv kv[PE_KEYS];
        snprintf(id, sizeof id, "u%d", u);
        assert_int_equal(engine_profile_set(e, id, kv, pe_profile_kv(&x->prof[u], kv)), 0);
    }
    return e;
}

static void fg_drain(fg_run *x)
{
    engine_user_view v;
    for (size_t i = 0; i < engine_dirty_user_count(x->e); i++) {
        engine_dirty_user_at(x->e, i, &v);
        int u = fg_user(v.id);
        if (u >= 0) snprintf(x->room_of[u], sizeof x->room_of[u], "%s", v.room ? v.room : "");
        if (u >= 0) x->staff_of[u] = v.room && v.staff;
    }
    engine_group_view g;
    for (size_t i = 0; i < engine_dirty_group_count(x->e); i++) {
        engine_dirty_group_at(x->e, i, &g);
        size_t k = 0;
        while (k < x->n_store && strcmp(x->store[k].id, g.id)) k++;
        if (k == x->n_store) x->n_store++;
        fg_group *s = &x->store[k];
        memset(s, 0, sizeof *s);
        snprintf(s->id, sizeof s->id, "%s", g.id);
        s->alive = g.alive;
        if (!g.alive) continue;
        for (size_t j = 0; j < g.n_members; j++) snprintf(s->members[j], 8, "%s", g.members[j]);
        for (size_t j = 0; j < g.n_invited; j++) snprintf(s->invited[j], 8, "%s", g.invited[j]);
        for (size_t j = 0; j < g.n_prefs && j < 4; j++) snprintf(s->prefs[j], 8, "%s", g.prefs[j]);
        s->n_members = g.n_members;
        s->n_invited = g.n_invited;
        s->n_prefs = g.n_prefs < 4 ? g.n_prefs : 4;
        s->version = g.version;
    }
    engine_drain_clear(x->e);
}

/* A fresh engine from the store alone, as a restart would load it. */
static void fg_reload(fg_run *x)
{
    engine_free(x->e);
    x->e = fg_new_engine(x);
    char id[16];
    for (int u = 0; u < FG_USERS; u++) {
        snprintf(id, sizeof id, "u%d", u);
        assert_int_equal(engine_load_participant(x->e, id), 0);
        if (x->room_of[u][0]) assert_int_equal(engine_load_room_holder(x->e, id, x->room_of[u], T0, "r"), 0);
        if (x->staff_of[u]) assert_int_equal(engine_load_staff(x->e, id, 0), 0);
    }
    for (size_t k = 0; k < x->n_store; k++) {
        fg_group *s = &x->store[k];
        if (!s->alive) continue;
        const char *m[FG_USERS], *inv[FG_USERS], *p[4];
        for (size_t j = 0; j < s->n_members; j++) m[j] = s->members[j];
        for (size_t j = 0; j < s->n_invited; j++) inv[j] = s->invited[j];
        for (size_t j = 0; j < s->n_prefs; j++) p[j] = s->prefs[j];
        engine_group_view g = { .id = s->id, .alive = 1, .members = m, .n_members = s->n_members,
                                .invited = inv, .n_invited = s->n_invited, .prefs = p,
                                .n_prefs = s->n_prefs, .version = s->version };
        assert_int_equal(engine_load_group(x->e, &g), 0);
    }
}

static void fg_request(fg_run *x, engine_request *r, char ids[4][16], const char **list, const char **prefs)
{
    uint64_t *g = &x->rng;
    static const engine_op ops[] = { OP_INVITE, OP_INVITE, OP_ACCEPT, OP_ACCEPT, OP_ACCEPT, OP_DECLINE,
                                     OP_LEAVE, OP_PREFS, OP_GROUP, OP_GROUP, OP_CHOOSE, OP_RELEASE,
                                     OP_SWITCH, OP_SWAP, OP_SWAP, OP_ASSIGN, OP_UNASSIGN };
    r->op = ops[rnd(g, sizeof ops / sizeof ops[0])];
    r->check = (int)rnd(g, 2);
    snprintf(ids[0], 16, "u%d", (int)rnd(g, FG_USERS));
    snprintf(ids[1], 16, "u%d", (int)rnd(g, FG_USERS));
    r->user = ids[0];
    r->peer = ids[1];
    r->item = FG_ROOM_IDS[rnd(g, FG_ROOMS)];
    size_t n = 1 + (size_t)rnd(g, 3);
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[1 + i], 16, "u%d", (int)rnd(g, FG_USERS));
        list[i] = ids[1 + i];
    }
    r->to = list;
    r->n_to = n;
    size_t np = (size_t)rnd(g, 3);
    for (size_t i = 0; i < np; i++) prefs[i] = FG_ROOM_IDS[rnd(g, FG_ROOMS)];
    r->prefs = prefs;
    r->n_prefs = np;
    r->version = rnd(g, 4);
}

/* Beds held per room now, and who holds each (with the staff marks). */
static void fg_holders(const fg_run *x, int64_t *held, pe_holder h[FG_ROOMS][FG_USERS], int *n)
{
    char id[16];
    for (int r = 0; r < FG_ROOMS; r++) held[r] = n[r] = 0;
    for (int u = 0; u < FG_USERS; u++) {
        engine_user_view v;
        snprintf(id, sizeof id, "u%d", u);
        if (engine_user_view_get(x->e, id, &v) < 0 || !v.room) continue;
        int r = v.room[1] - '0';
        held[r]++;
        h[r][n[r]++] = (pe_holder){ u, v.staff };
    }
}

/* 11.2 after a step: nobody but a staff exception breaks a rule of their
 * room, and verify's audit says so too. */
static void fg_rules(const fg_run *x, int step)
{
    int64_t held[FG_ROOMS];
    pe_holder h[FG_ROOMS][FG_USERS];
    int n[FG_ROOMS];
    char id[16];
    fg_holders(x, held, h, n);
    for (int r = 0; r < FG_ROOMS; r++) {
        if (pe_audit(x->prof, &x->rules[r], h[r], n[r]) >= 0) fg_fail(x, step, "a holder breaks a rule of the room");
        for (int i = 0; i < n[r]; i++) {
            snprintf(id, sizeof id, "u%d", h[r][i].user);
            if (engine_holder_ok(x->e, id, FG_ROOM_IDS[r], NULL) != pe_holder_ok(x->prof, &x->rules[r], h[r], n[r], i))
                fg_fail(x, step, "verify's audit and the reference disagree");
        }
    }
}

/* 11.4 on the step's events (from on), beds counted as they go from
 * `held` (the rooms before the step). */
static void fg_fill(const fg_run *x, int step, size_t from, int64_t *held, engine_op op)
{
    for (size_t i = from; i < engine_event_count(x->e); i++) {
        const engine_event *ev = engine_event_at(x->e, i);
        if (ev->type != EVENT_GRANT && ev->type != EVENT_RELEASE) continue;
        int r = ev->item[1] - '0';
        size_t k = grant_run(x->e, from, i);
        if (k && !fill_ok(x->meta.group_fill == GROUP_FILL_EXACT, op, ev->by, FG_CAP[r], held[r], k))
            fg_fail(x, step, "a grant breaks group_fill = exact");
        held[r] += ev->type == EVENT_GRANT ? 1 : -1;
    }
}

/* The properties after one decision (see above). */
static void fg_check(fg_run *x, int step, const engine_request *r, const engine_result *res)
{
    engine *e = x->e;
    const char *why = engine_check_invariants(e);
    if (why) fg_fail(x, step, why);
    fg_rules(x, step);
    int u = fg_user(r->user);
    if (res->status == STATUS_DONE && (r->op == OP_INVITE || r->op == OP_ACCEPT))
        snprintf(x->shadow[u], sizeof x->shadow[u], "%s", res->group);
    if (res->status == STATUS_DONE && r->op == OP_LEAVE) x->shadow[u][0] = '\0';
    if (r->op == OP_GROUP && res->status == STATUS_GRANTED) {
        if (!res->members || !res->n_members || (int64_t)res->n_members > x->meta.max_group)
            fg_fail(x, step, "a group grant without its members, or too many");
        for (size_t i = 0; i < res->n_members; i++) {
            engine_user_view v;
            int m = fg_user(res->members[i]);
            if (engine_user_view_get(e, res->members[i], &v) < 0 || !v.room || strcmp(v.room, res->item))
                fg_fail(x, step, "a member of a granted group is not in its room (split)");
            if (m < 0 || strcmp(x->shadow[m], res->group))
                fg_fail(x, step, "a member placed without having accepted");
        }
    }
    int in_groups[FG_USERS] = { 0 }, beds[FG_ROOMS] = { 0 };
    engine_group_view g;
    for (size_t i = 0; i < engine_group_count(e); i++) {
        engine_group_view_at(e, i, &g);
        if (!g.alive) continue;
        if (!g.n_members || (int64_t)g.n_members > x->meta.max_group) fg_fail(x, step, "group size");
        for (size_t j = 0; j < g.n_members; j++) in_groups[fg_user(g.members[j])]++;
    }
    char id[16];
    for (int k = 0; k < FG_USERS; k++) {
        engine_user_view v;
        snprintf(id, sizeof id, "u%d", k);
        if (in_groups[k] > 1) fg_fail(x, step, "a user in two groups");
        const char *eg = engine_user_view_get(e, id, &v) == 0 ? v.group : NULL;
        if (strcmp(eg ? eg : "", x->shadow[k])) fg_fail(x, step, "the engine's group of a user is not the one consented to");
        if ((eg != NULL) != (in_groups[k] == 1)) fg_fail(x, step, "a user's group and the members lists disagree");
        for (int r2 = 0; eg && v.room && r2 < FG_ROOMS; r2++) beds[r2] += !strcmp(v.room, FG_ROOM_IDS[r2]);
        for (int r2 = 0; !eg && engine_user_view_get(e, id, &v) == 0 && v.room && r2 < FG_ROOMS; r2++)
            beds[r2] += !strcmp(v.room, FG_ROOM_IDS[r2]);
    }
    for (int r2 = 0; r2 < FG_ROOMS; r2++) {
        engine_item_view iv;
        engine_item_view_get(e, FG_ROOM_IDS[r2], &iv);
        if (beds[r2] + iv.free != FG_CAP[r2]) fg_fail(x, step, "a bed given twice (or lost)");
    }
}

typedef struct fg_tally { long grants, accepts, conflicts, leaves, reloads, not_eligible, staff, exact_groups; } fg_tally;

static void fg_one_run(uint64_t seed, fg_tally *t)
{
    fg_run *x = calloc(1, sizeof *x);
    assert_non_null(x);
    x->seed = x->rng = seed;
    engine_meta_defaults(&x->meta);
    x->meta.kind = BATCH_ROOM;
    x->meta.max_group = 1 + rnd(&x->rng, 4);
    if (chance(&x->rng, 40)) x->meta.group_fill = GROUP_FILL_EXACT;
    for (int r = 0; r < FG_ROOMS; r++) pe_gen_rules(&x->rng, &x->rules[r], 2);
    for (int u = 0; u < FG_USERS; u++) pe_gen_profile(&x->rng, &x->prof[u]);
    x->e = fg_new_engine(x);
    char rid[16];
    for (int step = 0; step < FG_STEPS; step++) {
        engine_request r;
        memset(&r, 0, sizeof r);
        char ids[4][16];
        const char *list[3], *prefs[3];
        fg_request(x, &r, ids, list, prefs);
        snprintf(rid, sizeof rid, "r%d", step);
        r.id = rid;
        r.seq = step + 1;
        engine_result res;
        int64_t held[FG_ROOMS];
        pe_holder h[FG_ROOMS][FG_USERS];
        int n[FG_ROOMS];
        fg_holders(x, held, h, n);
        size_t from = engine_event_count(x->e);
        engine_decide(x->e, &r, T0 + step, &res);
        if (res.status == STATUS_NONE) fg_fail(x, step, "no result");
        fg_check(x, step, &r, &res);
        fg_fill(x, step, from, held, r.op);
        t->not_eligible += res.reason == REASON_NOT_ELIGIBLE;
        t->staff += r.op == OP_ASSIGN && res.status == STATUS_GRANTED;
        t->exact_groups += x->meta.group_fill == GROUP_FILL_EXACT && r.op == OP_GROUP && res.status == STATUS_GRANTED;
        t->grants += r.op == OP_GROUP && res.status == STATUS_GRANTED;
        t->accepts += r.op == OP_ACCEPT && res.status == STATUS_DONE;
        t->conflicts += res.reason == REASON_CONFLICT;
        t->leaves += r.op == OP_LEAVE && res.status == STATUS_DONE;
        if (chance(&x->rng, 30)) {
            fg_drain(x);
            if (chance(&x->rng, 30)) {
                t->reloads++;
                fg_reload(x);
                fg_check(x, step, &r, &(engine_result){ .status = STATUS_REJECTED });
            }
        }
    }
    engine_free(x->e);
    free(x);
}

/* ------------------------------------------------------------ waitlist */

/* The waitlist (core/engine_wait.h) on random runs, checked on the
 * engine's own outputs rather than against `model`: many requests with
 * "wait":true on few units, returns of every kind (cancel, expiry, release,
 * switch, set_capacity, pause/resume, close, wait_ms), and after every
 * call:
 * - no unit is given twice: the grants, releases and returns of the event
 *   log, replayed, never hold more than an item's capacity, and leave
 *   exactly the engine's free (the invariant sweep checks the rest);
 * - within a call, requests leave the waitlist in ticket order, each at
 *   most once over the whole run, and a waiting request gets exactly one
 *   wait_served entry and one final result;
 * - served strictly in order among the requests that fit: at the end of a
 *   call in an open phase no waiting request fits what is free (else the
 *   pass, which goes oldest first, would have served it).
 * Together: a request is served only when every older one still waiting
 * did not fit at that moment.
 * Contract 11 too: the items carry random only_X/same_X rules, the users
 * random profiles, rooms use group_fill = exact in some runs, and staff
 * assign and unassign come among the requests. "Fits" is then "would be
 * granted now" (free units, exact fill, eligibility: w_fits); after
 * every call no holder but a staff exception breaks a rule of their item,
 * and every grant -- those served from the waitlist above all -- keeps
 * exact fill (fill_ok). */
#define W_ITEMS 3
#define W_USERS 8
#define W_STEPS 120

typedef struct wrun {
    ctx t;
    uint64_t rng;
    engine *e;
    int rooms;
    int64_t held[W_ITEMS], cap[W_ITEMS];
    int64_t last_done;              /* ticket of the last request served, per call */
    char seen_done[4 * W_STEPS];    /* by request number: its final result came */
    char waiting[4 * W_STEPS];
    uint64_t orders[W_USERS][16];   /* stock: live order ids of each user */
    int n_orders[W_USERS];
    int exact;                      /* group_fill = exact (rooms) */
    pe_profile prof[W_USERS];       /* 11.2 */
    pe_rules rules[W_ITEMS];
    engine_op op_of[4 * W_STEPS];   /* by request number */
    long not_eligible, staff;
} wrun;

static const char *const w_items[W_ITEMS] = { "i0", "i1", "i2" };
static const char *const w_users[W_USERS] = { "u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7" };

static int w_item(const char *id)
{
    for (int i = 0; i < W_ITEMS; i++)
        if (id && !strcmp(id, w_items[i])) return i;
    return -1;
}

static int w_user(const char *id)
{
    for (int i = 0; i < W_USERS; i++)
        if (id && !strcmp(id, w_users[i])) return i;
    return -1;
}

static void w_forget_order(wrun *x, int u, uint64_t order)
{
    for (int i = 0; i < x->n_orders[u]; i++)
        if (x->orders[u][i] == order) x->orders[u][i] = x->orders[u][--x->n_orders[u]];
}

/* May the waiting request's user (or its members) be given item it now
 * (11.2, its holders as the views show them)? */
static int w_may(const wrun *x, const engine_request *r, int it)
{
    pe_holder h[W_USERS];
    int n = holders_of(x->e, w_users, W_USERS, w_items[it], h);
    if (r->op != OP_GROUP) return pe_may(x->prof, w_user(r->user), &x->rules[it], h, n, -1);
    int mem[2] = { w_user(r->members[0]), w_user(r->members[1]) };
    return pe_may_group(x->prof, mem, 2, &x->rules[it], h, n);
}

/* Would a waiting request be granted now (free units, exact fill, 11.4,
 * and eligibility, 11.2)? The rules that would give it a final refusal --
 * limit, member_busy, already_holding -- make it "fit" too where its own
 * refusal is lifted: the pass would have ended it. An ineligible one is not asserted
 * either way: who may hold an item changes with grants too (same_X), which
 * start no serving pass, and it ends at the next one or by wait_ms. */
static int w_fits(const wrun *x, const engine_request *r)
{
    engine_item_view v;
    if (r->op == OP_BUY) {
        engine_item_view_get(x->e, r->item, &v);
        return v.free >= r->qty && w_may(x, r, w_item(r->item));
    }
    engine_user_view uv;
    int holds = engine_user_view_get(x->e, r->user, &uv) == 0 && uv.room;
    if (r->op == OP_CHOOSE) {
        engine_item_view_get(x->e, r->item, &v);
        return v.free > 0 && pe_single_fits(x->exact, v.capacity, v.capacity - v.free) &&
               (holds || w_may(x, r, w_item(r->item)));
    }
    int64_t need = r->op == OP_GROUP ? (int64_t)r->n_members : 1;
    for (size_t i = 0; i < r->n_prefs; i++) {
        engine_item_view_get(x->e, r->prefs[i], &v);
        int64_t held = v.capacity - v.free;
        int room_ok = need == 1 && r->op != OP_GROUP ? v.free > 0 && pe_single_fits(x->exact, v.capacity, held)
                                                     : pe_group_fits(x->exact, v.capacity, held, need);
        if (room_ok && w_may(x, r, w_item(r->prefs[i]))) return 1;
    }
    return 0;
}

/* 11.2 after a call: no holder but a staff exception breaks a rule. */
static void w_rules(wrun *x)
{
    for (int it = 0; it < W_ITEMS; it++) {
        pe_holder h[W_USERS];
        int n = holders_of(x->e, w_users, W_USERS, w_items[it], h);
        CHECK(&x->t, pe_audit(x->prof, &x->rules[it], h, n) < 0);
    }
}

static void w_events(wrun *x, size_t from)
{
    for (size_t i = from; i < engine_event_count(x->e); i++) {
        const engine_event *ev = engine_event_at(x->e, i);
        int it = w_item(ev->item), u = w_user(ev->user);
        /* a return (or resume) starts a new serving pass: the order is
         * per pass -- one that did not fit before the return may now */
        if (ev->type == EVENT_RELEASE || ev->type == EVENT_CANCEL || ev->type == EVENT_EXPIRE ||
            ev->type == EVENT_CAPACITY || ev->type == EVENT_STATE)
            x->last_done = 0;
        size_t k = x->rooms ? grant_run(x->e, from, i) : 0;
        if (k) {   /* 11.4: the request's own op, served from the waitlist or not */
            int n = ev->req && ev->req[0] == 'q' ? atoi(ev->req + 1) : 0;
            CHECK(&x->t, fill_ok(x->exact, x->op_of[n], ev->by, x->cap[it], x->held[it], k));
        }
        switch (ev->type) {
        case EVENT_GRANT:
            x->held[it] += ev->qty;
            CHECK(&x->t, x->held[it] <= x->cap[it]);          /* never a unit twice */
            if (!x->rooms && x->n_orders[u] < 16) x->orders[u][x->n_orders[u]++] = ev->order;
            break;
        case EVENT_RELEASE: x->held[it] -= ev->qty; break;
        case EVENT_CANCEL: case EVENT_EXPIRE:
            x->held[it] -= ev->qty;
            w_forget_order(x, u, ev->order);
            break;
        case EVENT_CAPACITY: x->cap[it] = ev->qty; break;
        case EVENT_WAIT_SERVED: {
            int n = atoi(ev->req + 1);
            CHECK(&x->t, x->waiting[n] && !x->seen_done[n]);   /* exactly once */
            x->seen_done[n] = 1;
            x->waiting[n] = 0;
            CHECK(&x->t, ev->wait_no > x->last_done);          /* in ticket order */
            x->last_done = ev->wait_no;
            break;
        }
        default: break;
        }
        CHECK(&x->t, x->held[it < 0 ? 0 : it] >= 0);
    }
}

static void w_check(wrun *x, int64_t now)
{
    CHECK(&x->t, engine_check_invariants(x->e) == NULL);
    for (int i = 0; i < W_ITEMS; i++) {
        engine_item_view v;
        engine_item_view_get(x->e, w_items[i], &v);
        CHECK(&x->t, v.free == x->cap[i] - x->held[i]);
    }
    if (engine_phase_at(x->e, now) != PHASE_OPEN) return;
    for (size_t i = 0; i < engine_wait_count(x->e); i++) {
        const engine_request *r;
        engine_wait_at(x->e, i, &r, NULL, NULL, NULL);
        if (w_fits(x, r)) {
            print_error("waiting %s: %s by %s for %s fits now\n", r->id, engine_op_name(r->op), r->user,
                        r->item ? r->item : r->n_prefs ? r->prefs[0] : "-");
            for (int it = 0; it < W_ITEMS; it++) {
                engine_item_view v;
                engine_item_view_get(x->e, w_items[it], &v);
                char key[24] = "", val[32] = "";
                if (x->rules[it].n) pe_rule_attr(&x->rules[it].r[0], key, sizeof key, val, sizeof val);
                print_error("  %s: capacity %lld free %lld, %d rules %s=%s, eligible %d (reference %d)\n", v.id,
                            (long long)v.capacity, (long long)v.free, x->rules[it].n, key, val,
                            engine_eligible(x->e, r->user, v.id, NULL), w_may(x, r, it));
            }
            for (size_t j = 0; j < r->n_prefs; j++) print_error("  pref %s\n", r->prefs[j]);
        }
        CHECK(&x->t, !w_fits(x, r));                           /* nobody left who fits */
    }
}

/* 11.5 among the requests: a placement (checked or not) or its undoing. */
static engine_request w_staff(wrun *x, const char *id, int u, const char *item)
{
    if (chance(&x->rng, 50))
        return (engine_request){ .id = id, .op = OP_ASSIGN, .user = w_users[u], .item = item,
                                 .qty = 1 + rnd(&x->rng, 2), .check = chance(&x->rng, 50) };
    uint64_t order = !x->rooms && x->n_orders[u] && chance(&x->rng, 50) ? x->orders[u][0] : 0;
    return (engine_request){ .id = id, .op = OP_UNASSIGN, .user = w_users[u], .order = order };
}

/* One random request or command; n numbers it (its id is "q<n>"). */
static void w_step(wrun *x, int n, int64_t now)
{
    char id[16];
    snprintf(id, sizeof id, "q%d", n);
    int u = (int)rnd(&x->rng, W_USERS), k = (int)rnd(&x->rng, 100);
    const char *item = w_items[rnd(&x->rng, W_ITEMS)];
    static const char *const pair[2] = { "u6", "u7" };
    const char *prefs[2] = { w_items[rnd(&x->rng, W_ITEMS)], w_items[rnd(&x->rng, W_ITEMS)] };
    engine_request r = { .id = id, .user = w_users[u], .seq = n, .item = item, .qty = 1,
                         .wait = chance(&x->rng, 80) };
    if (k < 8) {
        r = (engine_request){ .id = id, .op = k < 2 ? OP_PAUSE : k < 4 ? OP_RESUME : OP_SET_CAPACITY,
                              .item = item, .qty = x->held[w_item(item)] + rnd(&x->rng, 3) };
    } else if (k < 14) {
        r = w_staff(x, id, u, item);
    } else if (!x->rooms && k < 60) {
        r.op = OP_BUY;
        r.qty = 1 + rnd(&x->rng, 2);
    } else if (!x->rooms) {
        r.op = chance(&x->rng, 50) ? OP_CANCEL : OP_CONFIRM;
        r.order = x->n_orders[u] ? x->orders[u][rnd(&x->rng, x->n_orders[u])] : 1;
    } else if (k < 40) {
        r.op = OP_CHOOSE;
    } else if (k < 55) {
        r.op = OP_AUTO;
        r.prefs = prefs;
        r.n_prefs = 2;
    } else if (k < 62) {
        r = (engine_request){ .id = id, .op = OP_GROUP, .user = "u6", .seq = n, .members = pair,
                              .n_members = 2, .prefs = prefs, .n_prefs = 2, .wait = 1 };
    } else if (k < 80) {
        r.op = OP_RELEASE;
    } else {
        r.op = OP_SWITCH;
    }
    engine_result out;
    size_t from = engine_event_count(x->e);
    x->last_done = 0;
    x->op_of[n] = r.op;
    engine_decide(x->e, &r, now, &out);
    CHECK(&x->t, out.status != STATUS_NONE);
    if (out.status == STATUS_WAITING) x->waiting[n] = 1;
    if (getenv("ENGINE_PROP_TRACE")) {
        engine_item_view v[W_ITEMS];
        for (int i = 0; i < W_ITEMS; i++) engine_item_view_get(x->e, w_items[i], &v[i]);
        print_message("q%d at %lld: %s %s %s qty %lld -> %s %s %s; free %lld/%lld %lld/%lld %lld/%lld, "
                      "%zu events, %lld waiting\n", n, (long long)now, engine_op_name(r.op), r.user ? r.user : "-",
                      r.item ? r.item : "-", (long long)r.qty, engine_status_name(out.status),
                      engine_reason_name(out.reason), out.item ? out.item : "", (long long)v[0].free,
                      (long long)v[0].capacity, (long long)v[1].free, (long long)v[1].capacity,
                      (long long)v[2].free, (long long)v[2].capacity, engine_event_count(x->e) - from,
                      (long long)engine_wait_count(x->e));
    }
    x->not_eligible += out.reason == REASON_NOT_ELIGIBLE;
    x->staff += r.op == OP_ASSIGN && out.status == STATUS_GRANTED;
    w_events(x, from);
}

typedef struct w_tally { long joined, served, ended, not_eligible, staff; } w_tally;

static void w_run(uint64_t seed, int rooms, w_tally *tally)
{
    wrun *x = calloc(1, sizeof *x);
    x->t.seed = seed;
    x->rng = seed;
    x->rooms = rooms;
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = rooms ? BATCH_ROOM : BATCH_STOCK;
    m.groups = GROUPS_LISTED;   /* its group names the members (u6, u7) */
    m.per_user = rooms ? 1 : 1 + rnd(&x->rng, 3);
    m.hold_ms = rooms ? 0 : 50 * rnd(&x->rng, 3);
    m.wait_ms = 100 * rnd(&x->rng, 4);
    m.closes_at = chance(&x->rng, 30) ? T0 + 2000 : 0;
    if (rooms && chance(&x->rng, 40)) m.group_fill = GROUP_FILL_EXACT;
    x->exact = m.group_fill == GROUP_FILL_EXACT;
    x->e = engine_new(&m, seed);
    char key[24], val[32];
    for (int i = 0; i < W_ITEMS; i++) {
        x->cap[i] = rnd(&x->rng, 3);
        engine_load_item(x->e, w_items[i], x->cap[i]);
        pe_gen_rules(&x->rng, &x->rules[i], 1);
        for (int j = 0; j < x->rules[i].n; j++) {
            pe_rule_attr(&x->rules[i].r[j], key, sizeof key, val, sizeof val);
            CHECK(&x->t, engine_load_attr(x->e, w_items[i], key, val) == 0);
        }
    }
    for (int u = 0; u < W_USERS; u++) {
        engine_kv kv[PE_KEYS];
        pe_gen_profile(&x->rng, &x->prof[u]);
        CHECK(&x->t, engine_profile_set(x->e, w_users[u], kv, pe_profile_kv(&x->prof[u], kv)) == 0);
    }
    int64_t now = T0;
    for (int n = 1; n <= W_STEPS; n++) {
        x->t.step = n;
        now += rnd(&x->rng, 40);
        if (chance(&x->rng, 10)) {      /* an expiry-only step, as the shell runs them */
            size_t from = engine_event_count(x->e);
            x->last_done = 0;
            engine_expire(x->e, now);
            w_events(x, from);
        } else {
            w_step(x, n, now);
        }
        w_check(x, now);
        w_rules(x);
        if (chance(&x->rng, 30)) engine_drain_clear(x->e);
    }
    /* close: everyone still waiting gets a final result, once */
    engine_drain_clear(x->e);
    engine_decide(x->e, &(engine_request){ .id = "c", .op = OP_CLOSE }, now, &(engine_result){ 0 });
    x->last_done = 0;
    w_events(x, 0);
    CHECK(&x->t, engine_wait_count(x->e) == 0);
    for (int n = 0; n < 4 * W_STEPS; n++) CHECK(&x->t, !x->waiting[n]);
    const engine_counters *c = engine_get_counters(x->e);
    CHECK(&x->t, c->wait_joined == c->wait_served + c->wait_ended);
    tally->joined += c->wait_joined;
    tally->served += c->wait_served;
    tally->ended += c->wait_ended;
    tally->not_eligible += x->not_eligible;
    tally->staff += x->staff;
    engine_free(x->e);
    free(x);
}

static void test_prop_formed_groups(void **state)
{
    uint64_t base = env_u64("ENGINE_PROP_SEED", DEFAULT_SEED);
    uint64_t runs = env_u64("ENGINE_PROP_RUNS", DEFAULT_RUNS);
    fg_tally t = { 0 };
    for (uint64_t i = 0; i < runs; i++) fg_one_run(base + i, &t);
    print_message("formed groups: %ld group grants (%ld exact fill), %ld accepts, %ld conflicts, %ld leaves, "
                  "%ld reloads, %ld not_eligible, %ld staff grants\n", t.grants, t.exact_groups, t.accepts,
                  t.conflicts, t.leaves, t.reloads, t.not_eligible, t.staff);
    /* the runs reach every kind of step (a property over nothing proves nothing) */
    assert_true(runs < 100 || (t.grants > 100 && t.accepts > 100 && t.conflicts > 100 && t.leaves > 100 &&
                               t.reloads > 100 && t.not_eligible > 100 && t.staff > 100 && t.exact_groups > 10));
}

static void test_prop_wait(void **state)
{
    uint64_t base = env_u64("ENGINE_PROP_SEED", DEFAULT_SEED);
    uint64_t runs = env_u64("ENGINE_PROP_RUNS", DEFAULT_RUNS) / 2;
    w_tally t = { 0 };
    for (uint64_t i = 0; i < runs; i++) w_run(((base & ~1ULL) + 2 * i) | (i & 1), (int)(i & 1), &t);
    print_message("waitlist: %ld joined, %ld served, %ld ended, %ld not_eligible, %ld staff grants\n", t.joined,
                  t.served, t.ended, t.not_eligible, t.staff);
    /* the runs wait, are served and run out (a property over nothing proves nothing) */
    assert_true(runs < 50 || (t.joined > 100 && t.served > 100 && t.ended > 100 && t.not_eligible > 100 &&
                              t.staff > 100));
}

/* ------------------------------------------------------------ the draw */

/* The opening draw by points (contract 11.3, core/lottery.c) on random
 * pools. A pool is made as the worker makes it (worker/lottery_pool.c):
 * requests before opens_at go through an early=shuffle engine, a kept one
 * gives its user a ticket, a throttled one marks its user; at the draw
 * every ticket's points are read from the profiles and recorded. Then:
 *   - the order equals a reference written from the contract's text with
 *     nothing of lottery.c but SHA-256 (d_reference);
 *   - the recorded pool drawn again by a fresh lottery (as lottery verify
 *     and a takeover do), after every profile changed, replays the same
 *     serving order, draw positions and points;
 *   - within equal points the order is the draw's without points, the
 *     throttled come last, each user's requests in the order sent. */
#define D_USERS 24
#define D_REQS 64

typedef struct d_pool {
    int req_user[D_REQS];         /* the kept requests, by user, in dequeue order */
    int n_reqs;
    int throttled[D_USERS];
    int64_t points[D_USERS];      /* recorded at the draw */
    uint8_t seed[LOTTERY_SEED_LEN];
} d_pool;

typedef struct d_rng {
    const uint8_t *seed;
    uint64_t counter;
    uint8_t block[SHA256_LEN];
    int used;
} d_rng;

/* SHA-256 in counter mode, four big-endian 64-bit draws a block. */
static uint64_t d_next(d_rng *g)
{
    if (g->used == 0 || g->used == 4) {
        uint8_t in[LOTTERY_SEED_LEN + 8];
        memcpy(in, g->seed, LOTTERY_SEED_LEN);
        for (int i = 0; i < 8; i++) in[LOTTERY_SEED_LEN + i] = (uint8_t)(g->counter >> (8 * (7 - i)));
        sha256(in, sizeof in, g->block);
        g->counter++;
        g->used = 0;
    }
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x = (x << 8) | g->block[8 * g->used + i];
    g->used++;
    return x;
}

/* Uniform below bound: rejection of the first (2^64 - bound) mod bound. */
static uint64_t d_below(d_rng *g, uint64_t bound)
{
    uint64_t reject = (UINT64_MAX - bound + 1) % bound;
    for (;;) {
        uint64_t x = d_next(g);
        if (x >= reject) return x % bound;
    }
}

/* The contract's draw: serve[] the requests in serving order, pos[] each
 * request's ticket position (1-based), pts[] its ticket's points. */
static void d_reference(const d_pool *p, int by_points, uint32_t *serve, uint32_t *pos, int64_t *pts)
{
    int ticket[D_USERS], n = 0, order[D_USERS], k = 0;
    for (int i = 0; i < p->n_reqs; i++) {
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= ticket[j] == p->req_user[i];
        if (!seen) ticket[n++] = p->req_user[i];
    }
    d_rng g = { .seed = p->seed };
    for (int i = n; i > 1; i--) {
        int j = (int)d_below(&g, (uint64_t)i), t = ticket[i - 1];
        ticket[i - 1] = ticket[j];
        ticket[j] = t;
    }
    /* highest points first, equal points in drawn order; then the throttled */
    for (int part = 0; part < 2; part++) {
        int used[D_USERS] = { 0 };
        for (;;) {
            int best = -1;
            for (int j = 0; j < n; j++) {
                if (used[j] || p->throttled[ticket[j]] != part) continue;
                if (best < 0 || (by_points && p->points[ticket[j]] > p->points[ticket[best]])) best = j;
            }
            if (best < 0) break;
            used[best] = 1;
            order[k++] = ticket[best];
        }
    }
    int s = 0;
    for (int t = 0; t < k; t++)
        for (int i = 0; i < p->n_reqs; i++)
            if (p->req_user[i] == order[t]) {
                serve[s++] = (uint32_t)i;
                pos[i] = (uint32_t)t + 1;
                pts[i] = p->points[order[t]];
            }
}

static const char *d_id(int u)
{
    static const char *const ids[D_USERS] = { "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9",
        "s10", "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23" };
    return ids[u];
}

/* A profile's points as the contract reads them: an integer, else 0. */
static int64_t d_profile(engine *e, uint64_t *g, int u)
{
    static const char *const pts[] = { "0", "30", "30", "7", "-2", "100", "\"30\"", "12" };
    int k = (int)rnd(g, 10);
    if (k == 0) {
        assert_int_equal(engine_profile_set(e, d_id(u), NULL, 0), 0);
        return 0;
    }
    engine_kv kv[2] = { { "gender", "\"F\"" }, { "points", pts[rnd(g, 8)] } };
    size_t n = k == 1 ? 1 : 2;
    assert_int_equal(engine_profile_set(e, d_id(u), kv, n), 0);
    return n == 2 && kv[1].value[0] != '"' ? strtoll(kv[1].value, NULL, 10) : 0;
}

/* The early requests of a pool through an early=shuffle engine. */
static void d_fill(uint64_t *g, engine *e, lottery *l, d_pool *p, int n_users)
{
    int n = (int)rnd(g, D_REQS + 1);
    for (int i = 0; i < n; i++) {
        int u = (int)rnd(g, n_users);
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        engine_result res;
        engine_decide(e, &(engine_request){ .op = OP_BUY, .id = id, .user = d_id(u), .seq = i + 1,
                                            .item = "sku", .qty = 1 }, T0 + i * 7, &res);
        if (res.kept) {
            assert_int_equal(lottery_add_request(l, d_id(u)), 0);
            p->req_user[p->n_reqs++] = u;
        } else {
            assert_true(res.status == STATUS_REJECTED && res.reason == REASON_THROTTLED);
            assert_true(lottery_mark_throttled(l, d_id(u)) >= 0);
            p->throttled[u] = 1;
        }
    }
}

static void d_same(const uint32_t *a, const uint32_t *b, size_t n, uint64_t seed, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) fail_msg("draw, seed %llu: %s differs at %zu", (unsigned long long)seed, what, i);
}

/* A fresh lottery from the recorded pool alone, as lottery verify and a
 * takeover build it: the throttle marks before or after the requests. */
static void d_from_record(lottery *l, const d_pool *p, uint64_t *g, uint64_t seed, int n_users)
{
    lottery_init(l, seed ^ 0x5555);
    for (int u = n_users - 1; u >= 0; u--)
        if (p->throttled[u] && rnd(g, 2)) assert_true(lottery_mark_throttled(l, d_id(u)) >= 0);
    for (int i = 0; i < p->n_reqs; i++) assert_int_equal(lottery_add_request(l, d_id(p->req_user[i])), 0);
    for (int u = 0; u < n_users; u++) {
        if (p->throttled[u]) assert_true(lottery_mark_throttled(l, d_id(u)) >= 0);
        if (p->points[u] != 0) assert_int_equal(lottery_set_points(l, d_id(u), p->points[u]), 0);
    }
}

static void d_run(uint64_t seed, long *tally)
{
    uint64_t g = seed;
    engine_meta m;
    engine_meta_defaults(&m);
    m.kind = BATCH_STOCK;
    m.early = EARLY_SHUFFLE;
    m.draw_by = DRAW_BY_POINTS;
    m.opens_at = T0 + 1000000;
    m.rate_max = 1 + rnd(&g, 3);
    m.rate_window_ms = 20;
    m.penalty_ms = 30;
    engine *e = engine_new(&m, seed);
    assert_non_null(e);
    assert_int_equal(engine_load_item(e, "sku", 5), 0);
    d_pool p = { .n_reqs = 0 };
    int n_users = 1 + (int)rnd(&g, D_USERS);
    int64_t want_points[D_USERS];
    for (int u = 0; u < n_users; u++) want_points[u] = d_profile(e, &g, u);
    for (int i = 0; i < LOTTERY_SEED_LEN; i++) p.seed[i] = (uint8_t)rnd(&g, 256);
    lottery live;
    lottery_init(&live, seed);
    d_fill(&g, e, &live, &p, n_users);
    /* the draw: each ticket's points now, recorded */
    for (size_t t = 0; t < live.n_tickets; t++) {
        const char *who = live.users[live.tickets[t]].id;
        int u = atoi(who + 1);
        p.points[u] = engine_profile_int(e, who, "points", 0);
        assert_true(p.points[u] == want_points[u]);
        assert_int_equal(lottery_set_points(&live, who, p.points[u]), 0);
    }
    size_t n = p.n_reqs;
    uint32_t serve[D_REQS + 1], pos[D_REQS + 1], rserve[D_REQS + 1], rpos[D_REQS + 1];
    int64_t pts[D_REQS + 1], rpts[D_REQS + 1];
    assert_int_equal(lottery_serve_order_by(&live, p.seed, 1, serve, pos, pts), 0);
    d_reference(&p, 1, rserve, rpos, rpts);
    d_same(serve, rserve, n, seed, "the serving order (reference)");
    d_same(pos, rpos, n, seed, "a draw position (reference)");
    for (size_t i = 0; i < n; i++) assert_true(pts[i] == rpts[i]);
    /* every profile changes; the recorded pool replays, marks in any order */
    for (int u = 0; u < n_users; u++) d_profile(e, &g, u);
    lottery replayed;
    d_from_record(&replayed, &p, &g, seed, n_users);
    uint32_t serve2[D_REQS + 1], pos2[D_REQS + 1];
    int64_t pts2[D_REQS + 1];
    assert_int_equal(lottery_serve_order_by(&replayed, p.seed, 1, serve2, pos2, pts2), 0);
    d_same(serve, serve2, n, seed, "the replayed serving order");
    d_same(pos, pos2, n, seed, "a replayed draw position");
    for (size_t i = 0; i < n; i++) assert_true(pts[i] == pts2[i]);
    /* without points: the shuffle alone, the reference's too */
    assert_int_equal(lottery_serve_order_by(&replayed, p.seed, 0, serve2, pos2, NULL), 0);
    d_reference(&p, 0, rserve, rpos, rpts);
    d_same(serve2, rserve, n, seed, "the serving order without points");
    for (size_t i = 1; i < n; i++) {
        int a = p.req_user[serve[i - 1]], b = p.req_user[serve[i]];
        assert_true(p.throttled[a] <= p.throttled[b]);
        if (p.throttled[a] == p.throttled[b]) assert_true(pts[serve[i - 1]] >= pts[serve[i]]);
        if (a == b) assert_true(serve[i - 1] < serve[i]);
    }
    tally[0] += (long)n;
    tally[1] += (long)live.n_tickets;
    for (int u = 0; u < n_users; u++) tally[2] += p.throttled[u];
    lottery_free(&live);
    lottery_free(&replayed);
    engine_free(e);
}

static void test_prop_draw(void **state)
{
    uint64_t base = env_u64("ENGINE_PROP_SEED", DEFAULT_SEED);
    uint64_t runs = env_u64("ENGINE_PROP_RUNS", DEFAULT_RUNS) / 5;
    long t[3] = { 0 };
    for (uint64_t i = 0; i < runs; i++) d_run(base + i, t);
    print_message("draw by points: %llu pools, %ld kept requests, %ld tickets, %ld throttled users\n",
                  (unsigned long long)runs, t[0], t[1], t[2]);
    assert_true(runs < 100 || (t[0] > 20 * (long)runs && t[1] > 5 * (long)runs && t[2] > (long)runs / 10));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prop_stock),
        cmocka_unit_test(test_prop_rooms),
        cmocka_unit_test(test_prop_formed_groups),
        cmocka_unit_test(test_prop_wait),
        cmocka_unit_test(test_prop_draw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
