/* codec.c -- see codec.h. */
#include "wire/codec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

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

void codec_result(jsonw *w, const request *q, const engine_result *res,
                  int64_t seq, int64_t at)
{
    common_head(w, q);
    jsonw_kstr(w, "status", engine_status_name(res->status));
    if (res->status == ST_REJECTED) jsonw_kstr(w, "reason", engine_reason_name(res->reason));
    if (res->item) jsonw_kstr(w, "item", res->item);
    if (q->r.op == OP_SET_CAPACITY) {
        if (res->status != ST_REJECTED) jsonw_kint(w, "capacity", res->qty);
    } else {
        stock_fields(w, res);
    }
    if (q->r.op == OP_GROUP && res->status == ST_GRANTED) {
        jsonw_key(w, "members");
        jsonw_arr_begin(w);
        for (size_t i = 0; i < q->r.n_members; i++) jsonw_str(w, q->r.members[i]);
        jsonw_arr_end(w);
    }
    if (res->status == ST_GRANTED) jsonw_kint(w, "rank", res->rank);
    common_tail(w, seq, at);
}

void codec_invalid(jsonw *w, const request *q, int64_t seq, int64_t at)
{
    common_head(w, q);
    jsonw_kstr(w, "status", "invalid");
    jsonw_kstr(w, "reason", "bad_request");
    jsonw_kstr(w, "detail", q->error);
    common_tail(w, seq, at);
}

static const char *order_state_name(int s)
{
    switch (s) {
    case ORDER_HELD: return "held";
    case ORDER_CONFIRMED: return "confirmed";
    case ORDER_EXPIRED: return "expired";
    case ORDER_CANCELLED: return "cancelled";
    }
    return "unknown";
}

static const char *item_id(const engine *e, uint32_t idx)
{
    engine_item_view iv;
    engine_item_view_at(e, idx, &iv);
    return iv.id;
}

void codec_holder(jsonw *w, const engine *e, const engine_user_view *v)
{
    jsonw_obj_begin(w);
    if (v->room) {
        jsonw_kstr(w, "item", v->room);
        jsonw_kint(w, "since", v->since);
        if (v->req) jsonw_kstr(w, "req", v->req);
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
        jsonw_kstr(w, "state", order_state_name(o->state));
        if (o->state == ORDER_HELD) jsonw_kint(w, "expires_at", o->expires_at);
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

void codec_dead(jsonw *w, const char *raw, size_t len, const char *error,
                int64_t at)
{
    size_t keep = len > CODEC_DEAD_RAW_MAX ? CODEC_DEAD_RAW_MAX : len;
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

void codec_ended(jsonw *w, const engine *e, const char *user,
                 const engine_order *o)
{
    jsonw_obj_begin(w);
    jsonw_kstr(w, "user", user);
    jsonw_kstr(w, "item", item_id(e, o->item));
    jsonw_kint(w, "qty", o->qty);
    jsonw_kstr(w, "state", order_state_name(o->state));
    jsonw_obj_end(w);
}

/* ---- reading back ---- */

static int state_parse(const char *s)
{
    if (!s) return 0;
    if (!strcmp(s, "held")) return ORDER_HELD;
    if (!strcmp(s, "confirmed")) return ORDER_CONFIRMED;
    if (!strcmp(s, "expired")) return ORDER_EXPIRED;
    if (!strcmp(s, "cancelled")) return ORDER_CANCELLED;
    return 0;
}

static uint64_t order_parse(json_t *v)
{
    if (json_is_integer(v)) return (uint64_t)json_integer_value(v);
    if (json_is_string(v)) return strtoull(json_string_value(v), NULL, 10);
    return 0;
}

static int load_stock_orders(engine *e, const char *user, json_t *orders,
                             char *err, size_t errlen)
{
    size_t i;
    json_t *o;
    json_array_foreach(orders, i, o) {
        uint64_t id = order_parse(json_object_get(o, "order"));
        const char *item = json_string_value(json_object_get(o, "item"));
        int st = state_parse(json_string_value(json_object_get(o, "state")));
        json_t *qty = json_object_get(o, "qty"), *exp = json_object_get(o, "expires_at");
        if (!id || !item || !st || !json_is_integer(qty)) {
            snprintf(err, errlen, "holder '%s': order %zu is malformed", user, i);
            return -1;
        }
        int rc = engine_load_order(e, user, id, item, json_integer_value(qty), st,
                                   json_is_integer(exp) ? json_integer_value(exp) : 0);
        if (rc < 0) {
            snprintf(err, errlen, "holder '%s': order %" PRIu64 " rejected by the engine (%d)",
                     user, id, rc);
            return -1;
        }
    }
    return 0;
}

int codec_load_holder(engine *e, const char *user, const char *json,
                      size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, 0, &jerr);
    if (!json_is_object(doc)) {
        snprintf(err, errlen, "holder '%s': not a JSON object", user);
        json_decref(doc);
        return -1;
    }
    int rc = 0;
    json_t *item = json_object_get(doc, "item"), *orders = json_object_get(doc, "orders");
    if (json_is_string(item)) {
        json_t *since = json_object_get(doc, "since");
        const char *req = json_string_value(json_object_get(doc, "req"));
        int erc = engine_load_room_holder(e, user, json_string_value(item),
                                          json_is_integer(since) ? json_integer_value(since) : 0,
                                          req ? req : "");
        if (erc < 0) {
            snprintf(err, errlen, "holder '%s': room '%s' rejected by the engine (%d)",
                     user, json_string_value(item), erc);
            rc = -1;
        }
    } else if (json_is_array(orders)) {
        rc = load_stock_orders(e, user, orders, err, errlen);
    } else {
        snprintf(err, errlen, "holder '%s': neither a room nor stock orders", user);
        rc = -1;
    }
    json_decref(doc);
    return rc;
}

int codec_load_ended(engine *e, const char *order, const char *json,
                     size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, 0, &jerr);
    const char *user = json_string_value(json_object_get(doc, "user"));
    const char *item = json_string_value(json_object_get(doc, "item"));
    json_t *qty = json_object_get(doc, "qty");
    int st = state_parse(json_string_value(json_object_get(doc, "state")));
    uint64_t id = strtoull(order, NULL, 10);
    int rc = -1;
    if (user && item && json_is_integer(qty) && st && id)
        rc = engine_load_order(e, user, id, item, json_integer_value(qty), st, 0);
    if (rc < 0) snprintf(err, errlen, "ended order '%s' is malformed or unknown", order);
    json_decref(doc);
    return rc < 0 ? -1 : 0;
}

int codec_load_attrs(engine *e, const char *item, const char *json,
                     size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, 0, &jerr);
    if (!json_is_object(doc)) {
        snprintf(err, errlen, "attrs of '%s' is not a JSON object", item);
        json_decref(doc);
        return -1;
    }
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(doc, key, val) {
        char *canon = request_canonical_json(val);
        int erc = canon ? engine_load_attr(e, item, key, canon) : -1;
        free(canon);
        if (erc < 0) {
            snprintf(err, errlen, "attrs of '%s': item unknown or out of memory", item);
            rc = -1;
            break;
        }
    }
    json_decref(doc);
    return rc;
}
