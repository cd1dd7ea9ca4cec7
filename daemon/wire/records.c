/* records.c -- see records.h. */
#include "wire/records.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"

static void common_head(jsonw *w, const request *q)
{
    jsonw_obj_begin(w);
    jsonw_kstr(w, "id", q->r.id);
    if (q->r.user) jsonw_kstr(w, "user", q->r.user);
    if (q->op_name) jsonw_kstr(w, "op", q->op_name);
}

static void common_tail(jsonw *w, int64_t seq, int64_t at)
{
    if (seq > 0) jsonw_kint(w, "seq", seq);
    jsonw_kint(w, "at", at);
    jsonw_obj_end(w);
}

static void stock_fields(jsonw *w, const engine_result *res)
{
    if (res->qty) jsonw_kint(w, "qty", res->qty);
    if (res->order) { jsonw_key(w, "order"); jsonw_u64_str(w, res->order); }
    if (res->expires_at) jsonw_kint(w, "expires_at", res->expires_at);
}

static void result_fields(jsonw *w, const request *q, const engine_result *res)
{
    common_head(w, q);
    jsonw_kstr(w, "status", engine_status_name(res->status));
    if (res->status == STATUS_REJECTED) jsonw_kstr(w, "reason", engine_reason_name(res->reason));
    if (res->retry_at) jsonw_kint(w, "retry_at", res->retry_at);
    if (res->opens_at) jsonw_kint(w, "opens_at", res->opens_at);
    if (res->item) jsonw_kstr(w, "item", res->item);
    if (res->pref) jsonw_kint(w, "pref", res->pref);
    if (q->r.op == OP_SET_CAPACITY) {
        if (res->status != STATUS_REJECTED) jsonw_kint(w, "capacity", res->qty);
    } else {
        stock_fields(w, res);
    }
    if (res->group) jsonw_kstr(w, "group", res->group);
    if (res->has_version) jsonw_kint(w, "version", res->version);
    if (q->r.op == OP_GROUP && res->status == STATUS_GRANTED) {
        /* a formed group's members are the engine's, not the request's */
        const char *const *m = res->members ? res->members : q->r.members;
        size_t n = res->members ? res->n_members : q->r.n_members;
        jsonw_key(w, "members");
        jsonw_arr_begin(w);
        for (size_t i = 0; i < n; i++) jsonw_str(w, m[i]);
        jsonw_arr_end(w);
    }
    if (res->status == STATUS_GRANTED) jsonw_kint(w, "rank", res->rank);
    if (res->by) {   /* staff placements (contract 11.5) */
        jsonw_kstr(w, "by", res->by);
        /* raw, comma included: jsonw_raw leaves the separator state as the
         * key set it, so the key and a raw value would run into "at" */
        if (q->r.check) jsonw_raw(w, ",\"check\":true", 13);
    }
    /* a waitlist place; a swap offer (9.3) has none */
    if (res->status == STATUS_WAITING && res->wait_no) records_waiting_fields(w, res);
    else if (res->wait_no) jsonw_kint(w, "wait_no", res->wait_no);   /* decided from the waitlist */
}

void records_result(jsonw *w, const request *q, const engine_result *res,
                  int64_t seq, int64_t at)
{
    result_fields(w, q, res);
    common_tail(w, seq, at);
}

void records_result_drawn(jsonw *w, const request *q, const engine_result *res,
                          int64_t seq, int64_t at, int64_t draw, const int64_t *points)
{
    result_fields(w, q, res);
    jsonw_kint(w, "draw", draw);
    if (points) jsonw_kint(w, "points", *points);
    common_tail(w, seq, at);
}

void records_waiting_fields(jsonw *w, const engine_result *res)
{
    jsonw_kint(w, "wait_pos", res->wait_pos);
    jsonw_kint(w, "wait_no", res->wait_no);
}

void records_invalid(jsonw *w, const request *q, int64_t seq, int64_t at)
{
    common_head(w, q);
    jsonw_kstr(w, "status", "invalid");
    jsonw_kstr(w, "reason", "bad_request");
    jsonw_kstr(w, "detail", q->error);
    common_tail(w, seq, at);
}

const char *records_order_state_name(int s)
{
    switch (s) {
    case ORDER_HELD: return "held";
    case ORDER_CONFIRMED: return "confirmed";
    case ORDER_EXPIRED: return "expired";
    case ORDER_CANCELLED: return "cancelled";
    }
    return "unknown";
}

int records_order_state_parse(const char *s)
{
    if (!s) return 0;
    if (!strcmp(s, "held")) return ORDER_HELD;
    if (!strcmp(s, "confirmed")) return ORDER_CONFIRMED;
    if (!strcmp(s, "expired")) return ORDER_EXPIRED;
    if (!strcmp(s, "cancelled")) return ORDER_CANCELLED;
    return 0;
}

static const char *item_id(const engine *e, uint32_t idx)
{
    engine_item_view iv;
    engine_item_view_at(e, idx, &iv);
    return iv.id;
}

/* A room holder's open swap offers (contract 9.3): kept with the bed they
 * offer, so they are written and loaded with it. */
static void swap_offers(jsonw *w, const engine *e, const char *user)
{
    engine_swap_offer o[ENGINE_SWAP_OFFERS_MAX];
    size_t n = engine_swap_offers_of(e, user, o, ENGINE_SWAP_OFFERS_MAX);
    if (!n) return;
    jsonw_key(w, "swap_offers");
    jsonw_arr_begin(w);
    for (size_t i = 0; i < n && i < ENGINE_SWAP_OFFERS_MAX; i++) {
        jsonw_obj_begin(w);
        jsonw_kstr(w, "req", o[i].req);
        jsonw_kstr(w, "with", o[i].with);
        jsonw_kint(w, "seq", o[i].seq);
        if (o[i].drawn.draw) jsonw_kint(w, "draw", o[i].drawn.draw);   /* an early swap (9.1) */
        if (o[i].drawn.has_points) jsonw_kint(w, "points", o[i].drawn.points);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}

void records_holder(jsonw *w, const engine *e, const engine_user_view *v)
{
    jsonw_obj_begin(w);
    if (v->room) {
        jsonw_kstr(w, "item", v->room);
        jsonw_kint(w, "since", v->since);
        if (v->req) jsonw_kstr(w, "req", v->req);
        if (v->room_order) {   /* a held bed (contract 9.4) */
            jsonw_key(w, "order");
            jsonw_u64_str(w, v->room_order);
            jsonw_kstr(w, "state", records_order_state_name(v->room_state));
            if (v->room_expires_at) jsonw_kint(w, "expires_at", v->room_expires_at);
        }
        if (v->group) jsonw_kstr(w, "group", v->group);
        if (v->staff) jsonw_kstr(w, "by", "staff");   /* without check: verify's exception */
        swap_offers(w, e, v->id);
        jsonw_obj_end(w);
        return;
    }
    jsonw_kint(w, "units", v->units);
    jsonw_key(w, "orders");
    jsonw_arr_begin(w);
    for (size_t i = 0; i < v->n_orders; i++) {
        const engine_order *o = &v->orders[i];
        if (o->state != ORDER_HELD && o->state != ORDER_CONFIRMED) continue;
        jsonw_obj_begin(w);
        jsonw_key(w, "order");
        jsonw_u64_str(w, o->id);
        jsonw_kstr(w, "item", item_id(e, o->item));
        jsonw_kint(w, "qty", o->qty);
        jsonw_kstr(w, "state", records_order_state_name(o->state));
        if (o->state == ORDER_HELD) jsonw_kint(w, "expires_at", o->expires_at);
        if (o->staff) jsonw_kstr(w, "by", "staff");
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
    jsonw_obj_end(w);
}

static void base64(jsonw *w, const unsigned char *s, size_t n)
{
    char out[BASE64_LEN(768)];
    jsonw_raw(w, ",\"raw_base64\":\"", 15);
    for (size_t i = 0; i < n; i += 768)     /* whole groups of 3: one padding at the end */
        jsonw_raw(w, out, base64_encode(out, s + i, n - i < 768 ? n - i : 768));
    jsonw_raw(w, "\"", 1);
}

void records_dead(jsonw *w, const char *raw, size_t len, const char *error,
                int64_t at)
{
    size_t keep = len > RECORDS_DEAD_RAW_MAX ? RECORDS_DEAD_RAW_MAX : len;
    jsonw_obj_begin(w);
    jsonw_key(w, "raw");
    jsonw_strn(w, raw, keep);
    jsonw_kstr(w, "error", error);
    jsonw_kint(w, "at", at);
    if (keep < len) {
        jsonw_kint(w, "raw_bytes", (int64_t)len);
        jsonw_key(w, "truncated");
        jsonw_raw(w, "true", 4);
    }
    if (!utf8_valid(raw, keep, 1)) base64(w, (const unsigned char *)raw, keep);
    jsonw_obj_end(w);
}

void records_ended(jsonw *w, const engine *e, const char *user,
                 const engine_order *o)
{
    jsonw_obj_begin(w);
    jsonw_kstr(w, "user", user);
    jsonw_kstr(w, "item", item_id(e, o->item));
    jsonw_kint(w, "qty", o->qty);
    jsonw_kstr(w, "state", records_order_state_name(o->state));
    jsonw_obj_end(w);
}

static void names(jsonw *w, const char *key, const char *const *v, size_t n)
{
    jsonw_key(w, key);
    jsonw_arr_begin(w);
    for (size_t i = 0; i < n; i++) jsonw_str(w, v[i]);
    jsonw_arr_end(w);
}

/* A key may need escaping (jsonw_key's may not) and the value is canonical
 * JSON already (engine_kv): the key as a string, then ":" and the value raw. */
static void filter(jsonw *w, const engine_kv *kv, size_t n)
{
    jsonw_key(w, "filter");
    jsonw_obj_begin(w);
    for (size_t i = 0; i < n; i++) {
        jsonw_str(w, kv[i].key);
        jsonw_raw(w, ":", 1);
        jsonw_raw(w, kv[i].value, strlen(kv[i].value));
    }
    jsonw_obj_end(w);
}

void records_group(jsonw *w, const engine_group_view *g)
{
    jsonw_obj_begin(w);
    jsonw_kstr(w, "leader", g->members[0]);
    names(w, "members", g->members, g->n_members);
    names(w, "invited", g->invited, g->n_invited);
    names(w, "prefs", g->prefs, g->n_prefs);
    filter(w, g->filter, g->n_filter);
    jsonw_kint(w, "version", g->version);
    jsonw_obj_end(w);
}

void records_request(jsonw *w, const engine_request *r)
{
    jsonw_obj_begin(w);
    jsonw_kstr(w, "id", r->id);
    jsonw_kstr(w, "user", r->user);
    jsonw_kstr(w, "op", engine_op_name(r->op));
    if (r->item) jsonw_kstr(w, r->op == OP_BUY ? "item" : "room", r->item);
    if (r->op == OP_BUY) jsonw_kint(w, "qty", r->qty);
    if (r->n_prefs) names(w, "prefs", r->prefs, r->n_prefs);
    /* a formed group's `group` names nobody (contract 9.2) */
    if (r->op == OP_GROUP && r->n_members) names(w, "members", r->members, r->n_members);
    if (r->has_filter) filter(w, r->filter, r->n_filter);
    if (r->wait) {   /* last: jsonw_raw leaves the separator state alone */
        jsonw_key(w, "wait");
        jsonw_raw(w, "true", 4);
    }
    jsonw_obj_end(w);
}

void records_wait_entry(jsonw *w, const engine_result *res, const char *why,
                        int64_t seq, int64_t at, const engine_request *r)
{
    jsonw_obj_begin(w);
    jsonw_kint(w, "no", res->wait_no);
    jsonw_kint(w, "at", at);
    jsonw_kstr(w, "why", why);
    jsonw_kint(w, "seq", seq);
    if (r->draw) jsonw_kint(w, "draw", r->draw);       /* a pool request (9.1) */
    if (r->has_points) jsonw_kint(w, "points", r->points);
    jsonw_key(w, "req");
    records_request(w, r);
    jsonw_obj_end(w);
}
