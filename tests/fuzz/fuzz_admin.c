/* fuzz_admin.c -- fuzz target over admin commands (P:{B}:ctl), staff
 * placements above all (contract 11.5: assign, unassign), read by the
 * worker's parser and applied to an engine that holds rooms or stock,
 * groups, profiles and only_X / same_X rules, between the queue's own
 * requests, time steps, profile edits and reloads.
 *
 * Why: assign and unassign are the commands that bypass the round (phase,
 * slots, throttle, draw) and, without check, eligibility; whatever they
 * skip, they must not break what the engine promises: capacity, one bed
 * per user, per_user, groups whole, a holder placed without check marked
 * as a staff exception and every other holder within its item's rules,
 * and a reload (what the worker does after every failed write) that
 * gives back the same holders and the same answers.
 *
 * Input: 6 header bytes, then lines ('\n'):
 *   byte 0  bit 0 rooms (else stock), 1 group_fill=exact, 2 groups=listed,
 *           3 hold_ms 1000, 4-5 per_user-1, 6 max_group 4 (else 2),
 *           7 a reload loads the users in reverse order
 *   byte 1  the capacities of I0..I3, 2 bits each (1..4)
 *   byte 2  which rules the items get (a bit each, see rule_menu)
 *   3..5    the profile of u0..u7 from profile_menu, 3 bits each
 *   c<json> an admin command, parsed as the ctl list is (request_parse)
 *   q<json> a queue request, parsed as the queue is
 *   t<b>    time goes on (b+1)*250 ms      x  engine_expire now
 *   r       reload through the records and state_load, as the worker does
 *   p<u><json>  user u's profile becomes json (as profiles_scan reads it)
 *
 * After every line: engine_check_invariants; each event by=staff belongs to
 * the assign/unassign being decided and every grant of that decision went
 * to a user who was eligible just before (but an assign without check, and
 * a swap, whose leaving holder the check before cannot see); an assign
 * granted holds the item with the staff mark exactly when without check;
 * an unassign done leaves nothing (or not that order) held; admin commands
 * count in ctl (and a staff grant in processed, as a grant); until a profile is edited, every holder but staff
 * exceptions passes engine_holder_ok (verify's audit). After a reload:
 * the same holders, orders, free and staff marks, and (no profile edited,
 * no staff exception on the item, nobody waiting) the same eligibility.
 * Built with libFuzzer or as test_fuzz_replay_admin over
 * tests/fuzz/corpus/admin/ and tests/fuzz/regressions/admin/.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/engine_elig.h"
#include "core/engine_groups.h"
#include "core/engine_wait.h"
#include "core/jsonw.h"
#include "wire/profile.h"
#include "wire/records.h"
#include "wire/request.h"
#include "wire/state_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_admin: check failed: %s: ", #cond);        \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

#define NU 8
#define NI 4
#define MAX_BYTES 4096
#define T0 1763800000000LL

static const char *const users[NU] = { "u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7" };
static const char *const items[NI] = { "I0", "I1", "I2", "I3" };

/* Item rules by bit of header byte 2: a gender-restricted room, a
 * gender-flexible one, class years, an LLC floor. */
static const struct { int item; const char *attrs; } rule_menu[8] = {
    { 0, "{\"only_gender\":\"F\"}" },        { 1, "{\"same_gender\":true}" },
    { 2, "{\"only_year\":[3,4]}" },          { 3, "{\"same_llc\":true}" },
    { 1, "{\"only_llc\":[\"stem\",\"arts\"]}" }, { 0, "{\"same_year\":true}" },
    { 2, "{\"same_gender\":true}" },         { 3, "{\"only_gender\":[\"F\",\"X\"]}" },
};

static const char *const profile_menu[8] = {
    "{\"gender\":\"F\",\"year\":4,\"llc\":\"stem\",\"points\":30}",
    "{\"gender\":\"M\",\"year\":3,\"llc\":\"stem\"}",
    "{\"gender\":\"X\",\"year\":1,\"llc\":\"arts\"}",
    "{\"gender\":\"F\",\"year\":2,\"llc\":\"arts\",\"points\":5}",
    "{\"gender\":\"M\",\"year\":4}",
    "{\"year\":\"4\",\"gender\":\"F\"}",
    "{}",
    NULL,   /* no profile */
};

typedef struct fz {
    engine *e;
    engine_meta meta;
    uint8_t rules, reverse;
    char *prof[NU];            /* the profile text in force, NULL none */
    int edited;                /* a profile changed after the start */
    int64_t now;
    uint64_t next_order;
    int64_t seq;
    int n_reload;
    jsonw w;
} fz;

static uint64_t order_source(void *ctx) { return ++((fz *)ctx)->next_order; }

static int item_index(const char *s)
{
    for (int i = 0; s && i < NI; i++) if (!strcmp(s, items[i])) return i;
    return -1;
}

/* What profiles_scan does with a text: install it, or clear. */
static void set_profile(fz *f, engine *e, int u, const char *text)
{
    profile p;
    char err[200];
    int rc = text ? profile_parse(&p, text, strlen(text), err, sizeof err) : -EINVAL;
    CHECK(engine_profile_set(e, users[u], rc == 0 ? p.kv : NULL, rc == 0 ? p.n : 0) == 0, "profile of %s", users[u]);
    if (text) profile_free(&p);
    if (e != f->e) return;
    free(f->prof[u]);
    f->prof[u] = text && rc == 0 ? strdup(text) : NULL;
}

static void load_items(fz *f, engine *e, const int64_t *cap)
{
    char err[200];
    for (int i = 0; i < NI; i++) {
        CHECK(engine_load_item(e, items[i], cap[i]) == 0, "load %s", items[i]);
        for (int b = 0; b < 8; b++)
            if ((f->rules >> b & 1) && rule_menu[b].item == i)
                CHECK(state_load_attrs(e, items[i], rule_menu[b].attrs, strlen(rule_menu[b].attrs), err,
                                       sizeof err) == 0, "attrs: %s", err);
    }
}

/* ---------------------------------------------------------- holdings -- */

/* Whether u holds item it, and whether only as a staff exception. */
static int holds(const engine *e, const char *uid, int it, int *staff_only)
{
    engine_user_view v;
    *staff_only = 0;
    if (engine_user_view_get(e, uid, &v) < 0) return 0;
    if (v.room) {
        *staff_only = v.staff;
        return !strcmp(v.room, items[it]);
    }
    int any = 0, regular = 0;
    for (size_t i = 0; i < v.n_orders; i++) {
        engine_item_view iv;
        engine_item_view_at(e, v.orders[i].item, &iv);
        if (strcmp(iv.id, items[it])) continue;
        any = 1;
        regular |= !v.orders[i].staff;
    }
    *staff_only = any && !regular;
    return any;
}

/* Someone holds item it as placed by staff without check. */
static int staff_on(const engine *e, int it)
{
    for (size_t u = 0; u < engine_user_count(e); u++) {
        engine_user_view v;
        engine_user_view_at(e, u, &v);
        if (v.room && v.staff && !strcmp(v.room, items[it])) return 1;
        for (size_t i = 0; i < v.n_orders; i++)
            if (v.orders[i].staff && v.orders[i].item == (uint32_t)it) return 1;
    }
    return 0;
}

/* verify's audit: every holder but staff exceptions keeps its rules. */
static void check_audit(const fz *f)
{
    if (f->edited) return;
    for (size_t i = 0; i < engine_user_count(f->e); i++) {
        engine_user_view v;
        engine_user_view_at(f->e, i, &v);
        for (int it = 0; it < NI; it++) {
            int staff;
            if (!holds(f->e, v.id, it, &staff) || staff) continue;
            engine_elig_why why = { 0 };
            CHECK(engine_holder_ok(f->e, v.id, items[it], &why) == 1, "%s holds %s against %s (value %s)",
                  v.id, items[it], why.rule ? why.rule : "?", why.value ? why.value : "none");
        }
    }
}

static void check_state(const fz *f)
{
    const char *why = engine_check_invariants(f->e);
    CHECK(why == NULL, "%s", why);
    CHECK(engine_error(f->e) == 0, "engine error %d", engine_error(f->e));
    check_audit(f);
}

/* ---------------------------------------------------------- deciding -- */

typedef struct before {
    const char **who;          /* every user of the engine, then those the
                                  request names */
    int (*elig)[NI];           /* ... and what engine_eligible said for each */
    size_t n;
    int64_t free[NI];
    int held_by_user;          /* the request's user held something */
    int held_order;            /* ... the order it names (stock) */
    engine_counters c;
    size_t events;
} before;

static void snapshot(const fz *f, const engine_request *r, before *b)
{
    size_t n = engine_user_count(f->e);
    b->who = calloc(n + 2 + r->n_members, sizeof *b->who);
    b->elig = calloc(n + 2 + r->n_members, sizeof *b->elig);
    CHECK(b->who && b->elig, "out of memory");
    for (b->n = 0; b->n < n; b->n++) {
        engine_user_view v;
        engine_user_view_at(f->e, b->n, &v);
        b->who[b->n] = v.id;
    }
    if (r->user) b->who[b->n++] = r->user;
    if (r->peer) b->who[b->n++] = r->peer;
    for (size_t i = 0; i < r->n_members; i++) b->who[b->n++] = r->members[i];
    for (size_t i = 0; i < b->n; i++)
        for (int it = 0; it < NI; it++) b->elig[i][it] = engine_eligible(f->e, b->who[i], items[it], NULL);
    for (int it = 0; it < NI; it++) {
        engine_item_view iv;
        engine_item_view_get(f->e, items[it], &iv);
        b->free[it] = iv.free;
    }
    engine_user_view v;
    int has = r->user && engine_user_view_get(f->e, r->user, &v) == 0;
    b->held_by_user = has && (v.room || v.n_orders);
    b->held_order = 0;
    for (size_t i = 0; has && !v.room && i < v.n_orders; i++) b->held_order |= v.orders[i].id == r->order;
    b->c = *engine_get_counters(f->e);
    b->events = engine_event_count(f->e);
}

/* What engine_eligible said of uid for item it before the decision. */
static int elig_before(const before *b, const char *uid, int it)
{
    for (size_t i = b->n; i-- > 0;)
        if (!strcmp(b->who[i], uid)) return b->elig[i][it];
    CHECK(0, "%s granted something, a user the decision did not name", uid);
    return -1;
}

/* Every event of this decision: staff marks only on the staff's own, and
 * its grants only to users eligible just before. */
static void check_events(const fz *f, const engine_request *r, const before *b)
{
    int staff_op = r->op == OP_ASSIGN || r->op == OP_UNASSIGN;
    for (size_t i = b->events; i < engine_event_count(f->e); i++) {
        const engine_event *ev = engine_event_at(f->e, i);
        if (ev->by) CHECK(staff_op && !strcmp(ev->by, "staff") && ev->req && !strcmp(ev->req, r->id),
                          "event %d by '%s' from request %s (op %d)", ev->type, ev->by, r->id, r->op);
        else CHECK(!staff_op || !ev->req || strcmp(ev->req, r->id), "the staff's event %d without by", ev->type);
        if (ev->type != EVENT_GRANT || !ev->req || strcmp(ev->req, r->id)) continue;
        if (r->op == OP_SWAP || (r->op == OP_ASSIGN && !r->check)) continue;
        int it = item_index(ev->item);
        CHECK(ev->user && it >= 0, "grant of %s", ev->item);
        CHECK(elig_before(b, ev->user, it) == 1, "%s granted %s to %s, who was not eligible", r->id, ev->item, ev->user);
    }
}

static void check_assign(const fz *f, const engine_request *r, const engine_result *res, const before *b)
{
    int it = item_index(r->item);
    if (res->status == STATUS_GRANTED) {
        CHECK(it >= 0, "assign of %s to %s granted", r->item, r->user);
        CHECK(!r->check || elig_before(b, r->user, it) == 1, "assign with check granted %s to %s", r->item, r->user);
        engine_user_view v;
        CHECK(engine_user_view_get(f->e, r->user, &v) == 0, "assigned user gone");
        if (v.room || f->meta.kind == BATCH_ROOM) {
            CHECK(v.room && !strcmp(v.room, r->item) && v.staff == !r->check, "%s holds %s staff %d after assign",
                  r->user, v.room ? v.room : "nothing", v.staff);
            return;
        }
        int found = 0;
        for (size_t i = 0; i < v.n_orders; i++)
            if (v.orders[i].id == res->order)
                found = v.orders[i].qty == (r->qty > 0 ? r->qty : 1) && v.orders[i].state == ORDER_CONFIRMED &&
                        v.orders[i].staff == !r->check && v.orders[i].item == (uint32_t)it;
        CHECK(found, "assigned order %" PRIu64 " not held as placed", res->order);
        return;
    }
    if (res->reason == REASON_NOT_ELIGIBLE) CHECK(r->check && it >= 0 && elig_before(b, r->user, it) == 0, "not_eligible");
    if (res->reason == REASON_ROOM_FULL || res->reason == REASON_SOLD_OUT)
        CHECK(it >= 0 && b->free[it] < (r->qty > 0 ? r->qty : 1), "full with %" PRId64 " free", b->free[it]);
}

static void check_unassign(const fz *f, const engine_request *r, const engine_result *res, const before *b)
{
    engine_user_view v;
    int has = engine_user_view_get(f->e, r->user, &v) == 0;
    if (res->status == STATUS_DONE) {
        CHECK(b->held_by_user, "unassign done for %s who held nothing", r->user);
        CHECK(!has || (!v.room && (r->order || !v.n_orders)), "%s still holds after unassign", r->user);
        for (size_t i = 0; has && r->order && i < v.n_orders; i++)
            CHECK(v.orders[i].id != r->order, "order %" PRIu64 " still live after unassign", r->order);
    } else if (res->reason == REASON_NOT_HOLDING) {
        CHECK(!b->held_by_user, "not_holding for %s who held", r->user);
    } else if (res->reason == REASON_UNKNOWN_ORDER) {
        CHECK(r->order && !b->held_order, "unknown_order for a live order");
    }
}

static void decide(fz *f, request *q, int admin)
{
    engine_request *r = &q->r;
    engine_expire(f->e, f->now);
    before b;
    snapshot(f, r, &b);
    r->seq = admin ? 0 : ++f->seq;
    engine_result res;
    engine_decide(f->e, r, f->now, &res);
    const engine_counters *c = engine_get_counters(f->e);
    CHECK(engine_error(f->e) == 0 && res.status != STATUS_NONE, "no decision for %s", r->id);
    CHECK((res.status == STATUS_REJECTED) == (res.reason != REASON_NONE), "status %d reason %d", res.status, res.reason);
    /* a staff grant counts in granted, so in processed too (engine.c) */
    int64_t staff_grant = admin && res.status == STATUS_GRANTED;
    /* a granted assign is no queue request: in staff_granted, not processed (section 6) */
    CHECK(admin ? c->ctl == b.c.ctl + 1 && c->processed == b.c.processed && c->staff_granted == b.c.staff_granted + staff_grant
                : c->ctl == b.c.ctl,
          "%s counted: ctl %" PRId64 " -> %" PRId64 ", processed %" PRId64 " -> %" PRId64, r->id, b.c.ctl, c->ctl,
          b.c.processed, c->processed);
    int staff = r->op == OP_ASSIGN || r->op == OP_UNASSIGN;
    int placed = res.status == STATUS_GRANTED || res.status == STATUS_DONE;
    CHECK((staff && placed) == (res.by && !strcmp(res.by, "staff")), "result by '%s' for op %d",
          res.by ? res.by : "", r->op);
    check_events(f, r, &b);
    if (r->op == OP_ASSIGN) check_assign(f, r, &res, &b);
    if (r->op == OP_UNASSIGN) check_unassign(f, r, &res, &b);
    free(b.who);
    free(b.elig);
}

static void on_request(fz *f, const uint8_t *p, size_t n, int admin)
{
    request q;
    request_parse(&q, (const char *)p, n, MAX_BYTES, admin);
    if (q.outcome == REQUEST_OK) decide(f, &q, admin);
    else if (!admin && q.outcome == REQUEST_INVALID) engine_note_invalid(f->e, q.r.user, f->now);
    else if (!admin) engine_note_dead(f->e);
    request_clear(&q);
}

/* ------------------------------------------------------------ reload -- */

static void reload_users(fz *f, engine *e)
{
    char err[256];
    size_t n = engine_user_count(f->e);
    for (size_t k = 0; k < n; k++) {
        engine_user_view v;
        engine_user_view_at(f->e, f->reverse ? n - 1 - k : k, &v);
        if (!v.room && !v.n_orders) {
            CHECK(engine_load_participant(e, v.id) == 0, "participant %s", v.id);
            continue;
        }
        jsonw_reset(&f->w);
        records_holder(&f->w, f->e, &v);
        CHECK(!f->w.failed && state_load_holder(e, v.id, f->w.buf, f->w.len, err, sizeof err) == 0,
              "holder %s: %s: %.*s", v.id, err, (int)f->w.len, f->w.buf);
    }
    for (size_t i = 0; i < engine_group_count(f->e); i++) {
        engine_group_view g;
        engine_group_view_at(f->e, i, &g);
        if (!g.alive) continue;
        jsonw_reset(&f->w);
        records_group(&f->w, &g);
        CHECK(state_load_group(e, g.id, f->w.buf, f->w.len, err, sizeof err) == 0, "group %s: %s", g.id, err);
    }
    for (size_t i = 0; i < engine_wait_count(f->e); i++) {
        const engine_request *r;
        int64_t no, at;
        engine_reason why;
        engine_wait_at(f->e, i, &r, &no, &at, &why);
        CHECK(engine_wait_load(e, r, no, at, why) == 0, "waiting %s", r->id);
    }
}

static void same_views(const engine *a, const engine *b)
{
    CHECK(engine_user_count(a) == engine_user_count(b), "%zu users, reloaded %zu", engine_user_count(a),
          engine_user_count(b));
    for (size_t u = 0; u < engine_user_count(a); u++) {
        engine_user_view x, y;
        engine_user_view_at(a, u, &x);
        CHECK(engine_user_view_get(b, x.id, &y) == 0, "%s gone in the reload", x.id);
        CHECK((x.room == NULL) == (y.room == NULL) && (!x.room || !strcmp(x.room, y.room)) && x.staff == y.staff,
              "%s: bed %s staff %d, reloaded %s staff %d", x.id, x.room ? x.room : "-", x.staff,
              y.room ? y.room : "-", y.staff);
        CHECK(x.units == y.units && x.n_orders == y.n_orders, "%s: units or orders differ after reload", x.id);
        for (size_t i = 0; i < x.n_orders; i++)
            CHECK(x.orders[i].id == y.orders[i].id && x.orders[i].qty == y.orders[i].qty &&
                  x.orders[i].state == y.orders[i].state && x.orders[i].staff == y.orders[i].staff,
                  "%s order %zu differs after reload", x.id, i);
    }
    for (int it = 0; it < NI; it++) {
        engine_item_view x, y;
        engine_item_view_get(a, items[it], &x);
        engine_item_view_get(b, items[it], &y);
        CHECK(x.capacity == y.capacity && x.free == y.free, "%s: %" PRId64 "/%" PRId64 " reloaded %" PRId64 "/%" PRId64,
              items[it], x.free, x.capacity, y.free, y.capacity);
    }
}

static void reload(fz *f)
{
    engine *e = engine_new(&f->meta, 0x5eed + (uint64_t)f->n_reload++);
    CHECK(e, "engine_new");
    engine_set_order_source(e, order_source, f);
    int64_t cap[NI];
    for (int it = 0; it < NI; it++) {
        engine_item_view iv;
        CHECK(engine_item_view_get(f->e, items[it], &iv) == 0, "item %s", items[it]);
        cap[it] = iv.capacity;
    }
    load_items(f, e, cap);
    for (int u = 0; u < NU; u++) set_profile(f, e, u, f->prof[u]);
    reload_users(f, e);
    engine_load_counters(e, engine_get_counters(f->e));
    engine_load_admin_state(e, engine_get_admin_state(f->e));
    same_views(f->e, e);
    int waiting = engine_wait_count(f->e) > 0;
    engine_expire(f->e, f->now);
    engine_expire(e, f->now);   /* the worker's first call: same_X of loaded holders */
    for (int it = 0; !waiting && !f->edited && it < NI; it++) {
        if (staff_on(f->e, it)) continue;
        for (int u = 0; u < NU; u++) {
            int was = engine_eligible(f->e, users[u], items[it], NULL), is = engine_eligible(e, users[u], items[it], NULL);
            CHECK(was == is, "%s for %s: %d before the reload, %d after", users[u], items[it], was, is);
        }
    }
    engine_free(f->e);
    f->e = e;
}

/* ------------------------------------------------------------- input -- */

static void on_line(fz *f, const uint8_t *p, size_t n)
{
    if (n < 1) return;
    switch (p[0]) {
    case 'c': on_request(f, p + 1, n - 1, 1); break;
    case 'q': on_request(f, p + 1, n - 1, 0); break;
    case 't': f->now += 250 * (1 + (n > 1 ? p[1] : 0)); break;
    case 'x': engine_expire(f->e, f->now); break;
    case 'r': reload(f); break;
    case 'p': {
        if (n < 2) return;
        char *text = strndup((const char *)p + 2, n - 2);
        set_profile(f, f->e, p[1] % NU, text);
        free(text);
        f->edited = 1;
        break;
    }
    default: return;
    }
    check_state(f);
    engine_drain_clear(f->e);
}

static void fz_init(fz *f, const uint8_t *h)
{
    engine_meta_defaults(&f->meta);
    f->meta.kind = (h[0] & 1) ? BATCH_ROOM : BATCH_STOCK;
    f->meta.group_fill = (h[0] & 2) ? GROUP_FILL_EXACT : GROUP_FILL_ANY;
    f->meta.groups = (h[0] & 4) ? GROUPS_LISTED : GROUPS_FORMED;
    f->meta.hold_ms = (h[0] & 8) ? 1000 : 0;
    f->meta.per_user = 1 + (h[0] >> 4 & 3);
    f->meta.max_group = (h[0] & 64) ? 4 : 2;
    f->reverse = h[0] >> 7;
    f->rules = h[2];
    f->now = T0;
    jsonw_init(&f->w);
    f->e = engine_new(&f->meta, 42);
    CHECK(f->e, "engine_new");
    engine_set_order_source(f->e, order_source, f);
    int64_t cap[NI];
    for (int it = 0; it < NI; it++) cap[it] = 1 + (h[1] >> (2 * it) & 3);
    load_items(f, f->e, cap);
    uint32_t picks = (uint32_t)h[3] | (uint32_t)h[4] << 8 | (uint32_t)h[5] << 16;
    for (int u = 0; u < NU; u++) set_profile(f, f->e, u, profile_menu[picks >> (3 * u) & 7]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6 || size > 16384) return 0;
    fz f = { 0 };
    fz_init(&f, data);
    const uint8_t *p = data + 6, *end = data + size;
    while (p < end) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        on_line(&f, p, n);
        p += n + (nl ? 1 : 0);
    }
    reload(&f);
    check_state(&f);
    engine_free(f.e);
    for (int u = 0; u < NU; u++) free(f.prof[u]);
    jsonw_free(&f.w);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
#include "fuzz_replay.h"
FUZZ_REPLAY_MAIN("admin")
#endif
