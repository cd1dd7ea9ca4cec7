/* state_load.c -- see state_load.h. */
#include "wire/state_load.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "core/engine_groups.h"
#include "core/engine_swap.h"
#include "core/engine_wait.h"
#include "core/numtext.h"
#include "wire/records.h"
#include "wire/request.h"


static uint64_t order_parse(json_t *v)
{
    if (json_is_integer(v)) return (uint64_t)json_integer_value(v);
    uint64_t u;
    if (json_is_string(v) && numtext_parse_u64(json_string_value(v), &u) == 0) return u;
    return 0;
}

/* "by":"staff" on a bed or an order: placed by staff without check
 * (contract 11.5; records_holder writes it). */
static int staff_mark(const json_t *o)
{
    const char *by = json_string_value(json_object_get(o, "by"));
    return by && !strcmp(by, "staff");
}

static int load_stock_orders(engine *e, const char *user, json_t *orders,
                             char *err, size_t errlen)
{
    size_t i;
    json_t *o;
    json_array_foreach(orders, i, o) {
        uint64_t id = order_parse(json_object_get(o, "order"));
        const char *item = json_string_value(json_object_get(o, "item"));
        int st = records_order_state_parse(json_string_value(json_object_get(o, "state")));
        json_t *qty = json_object_get(o, "qty"), *exp = json_object_get(o, "expires_at");
        if (!id || !item || !st || !json_is_integer(qty)) {
            snprintf(err, errlen, "holder '%s': order %zu is malformed", user, i);
            return -1;
        }
        int rc = engine_load_order(e, user, id, item, json_integer_value(qty), st,
                                   json_is_integer(exp) ? json_integer_value(exp) : 0);
        if (rc == 0 && staff_mark(o)) rc = engine_load_staff(e, user, id);
        if (rc < 0) {
            snprintf(err, errlen, "holder '%s': order %" PRIu64 " rejected by the engine (%d)",
                     user, id, rc);
            return -1;
        }
    }
    return 0;
}

/* The JSON object a saved value must be, or NULL with the message (a
 * format naming `name` once) in err. */
static json_t *load_object(const char *json, size_t len, const char *msg, const char *name,
                           char *err, size_t errlen)
    __attribute__((format(printf, 3, 0)));
static json_t *load_object(const char *json, size_t len, const char *msg, const char *name,
                           char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, 0, &jerr);
    if (json_is_object(doc)) return doc;
    snprintf(err, errlen, msg, name);
    json_decref(doc);
    return NULL;
}

/* A room holder's open swap offers (records_holder writes them). */
static int load_swap_offers(engine *e, const char *user, json_t *offers)
{
    if (!offers) return 0;
    if (!json_is_array(offers)) return -EINVAL;
    for (size_t i = 0; i < json_array_size(offers); i++) {
        json_t *o = json_array_get(offers, i), *seq = json_object_get(o, "seq");
        json_t *draw = json_object_get(o, "draw"), *points = json_object_get(o, "points");
        engine_swap_offer so = { .req = json_string_value(json_object_get(o, "req")),
                                 .with = json_string_value(json_object_get(o, "with")) };
        if (!so.req || !so.with || !json_is_integer(seq) || (draw && !json_is_integer(draw)) ||
            (points && !json_is_integer(points)))
            return -EINVAL;
        so.seq = json_integer_value(seq);
        so.drawn = (engine_swap_drawn){ json_integer_value(draw), json_integer_value(points), points != NULL };
        int rc = engine_load_swap_offer(e, user, &so);
        if (rc < 0) return rc;
    }
    return 0;
}

int state_load_holder(engine *e, const char *user, const char *json,
                      size_t len, char *err, size_t errlen)
{
    json_t *doc = load_object(json, len, "holder '%s': not a JSON object", user, err, errlen);
    if (!doc) return -1;
    int rc = 0;
    json_t *item = json_object_get(doc, "item"), *orders = json_object_get(doc, "orders");
    if (json_is_string(item)) {
        json_t *since = json_object_get(doc, "since");
        const char *req = json_string_value(json_object_get(doc, "req"));
        int erc = engine_load_room_holder(e, user, json_string_value(item),
                                          json_is_integer(since) ? json_integer_value(since) : 0,
                                          req ? req : "");
        if (erc == 0) erc = load_swap_offers(e, user, json_object_get(doc, "swap_offers"));
        if (erc == 0 && staff_mark(doc)) erc = engine_load_staff(e, user, 0);
        if (erc < 0) {
            snprintf(err, errlen, "holder '%s': room '%s' rejected by the engine (%d)",
                     user, json_string_value(item), erc);
            rc = -1;
        }
        json_t *order = json_object_get(doc, "order");
        if (rc == 0 && order) {   /* a held bed (contract 9.4) */
            json_t *exp = json_object_get(doc, "expires_at");
            int st = records_order_state_parse(json_string_value(json_object_get(doc, "state")));
            uint64_t id = order_parse(order);
            erc = id && st ? engine_load_order(e, user, id, json_string_value(item), 1, st,
                                              json_is_integer(exp) ? json_integer_value(exp) : 0)
                           : -EINVAL;
            if (erc < 0) {
                snprintf(err, errlen, "holder '%s': the hold of room '%s' rejected (%d)",
                         user, json_string_value(item), erc);
                rc = -1;
            }
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

int state_load_ended(engine *e, const char *order, const char *json,
                     size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, 0, &jerr);
    const char *user = json_string_value(json_object_get(doc, "user"));
    const char *item = json_string_value(json_object_get(doc, "item"));
    json_t *qty = json_object_get(doc, "qty");
    int st = records_order_state_parse(json_string_value(json_object_get(doc, "state")));
    /* the field is an order id allocd wrote: only its digits will do */
    uint64_t id = 0;
    int id_ok = numtext_parse_u64(order, &id) == 0 && id != 0;
    int rc = -1;
    if (user && item && json_is_integer(qty) && st && id_ok)
        rc = engine_load_order(e, user, id, item, json_integer_value(qty), st, 0);
    if (rc < 0) snprintf(err, errlen, "ended order '%s' is malformed or unknown", order);
    json_decref(doc);
    return rc < 0 ? -1 : 0;
}

int state_load_attrs(engine *e, const char *item, const char *json,
                     size_t len, char *err, size_t errlen)
{
    json_t *doc = load_object(json, len, "attrs of '%s' is not a JSON object", item, err, errlen);
    if (!doc) return -1;
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

/* An array of strings as a vector pointing into doc (NULL on a bad shape;
 * an empty array gives a vector of none). */
static const char **strings(json_t *arr, size_t *n)
{
    *n = 0;
    if (!json_is_array(arr)) return NULL;
    size_t k = json_array_size(arr);
    const char **v = calloc(k ? k : 1, sizeof *v);
    for (size_t i = 0; v && i < k; i++)
        if (!(v[i] = json_string_value(json_array_get(arr, i)))) { free(v); return NULL; }
    *n = k;
    return v;
}

int state_load_group(engine *e, const char *id, const char *json,
                     size_t len, char *err, size_t errlen)
{
    json_t *doc = load_object(json, len, "group '%s': not a JSON object", id, err, errlen);
    if (!doc) return -1;
    engine_group_view g = { .id = id, .alive = 1 };
    size_t nm, ni, np;
    const char **m = strings(json_object_get(doc, "members"), &nm);
    const char **inv = strings(json_object_get(doc, "invited"), &ni);
    const char **prefs = strings(json_object_get(doc, "prefs"), &np);
    json_t *filter = json_object_get(doc, "filter"), *version = json_object_get(doc, "version");
    size_t nf = json_is_object(filter) ? json_object_size(filter) : 0;
    engine_kv *kv = calloc(nf ? nf : 1, sizeof *kv);
    char **canon = calloc(nf ? nf : 1, sizeof *canon);
    int rc = -1;
    if (m && inv && prefs && kv && canon && json_is_integer(version)) {
        const char *key;
        json_t *val;
        size_t k = 0;
        int ok = 1;
        if (json_is_object(filter)) json_object_foreach(filter, key, val) {
            canon[k] = request_canonical_json(val);
            kv[k] = (engine_kv){ key, canon[k] };
            ok &= canon[k++] != NULL;
        }
        g.members = m; g.n_members = nm; g.invited = inv; g.n_invited = ni;
        g.prefs = prefs; g.n_prefs = np; g.filter = kv; g.n_filter = nf; g.has_filter = nf > 0;
        g.version = json_integer_value(version);
        rc = ok ? engine_load_group(e, &g) : -ENOMEM;
    }
    if (rc < 0) snprintf(err, errlen, "group '%s': malformed, or a member in two groups (%d)", id, rc);
    for (size_t i = 0; canon && i < nf; i++) free(canon[i]);
    free(canon);
    free(kv);
    free(m);
    free(inv);
    free(prefs);
    json_decref(doc);
    return rc < 0 ? -1 : 0;
}

int state_load_wait(engine *e, const char *id, const char *json, size_t len,
                    size_t max_bytes, char *err, size_t errlen)
{
    json_t *doc = load_object(json, len, "waitlist '%s' is not a JSON object", id, err, errlen);
    if (!doc) return -1;
    json_t *no = json_object_get(doc, "no"), *at = json_object_get(doc, "at");
    json_t *seq = json_object_get(doc, "seq"), *req = json_object_get(doc, "req");
    engine_reason why = engine_wait_reason_parse(json_string_value(json_object_get(doc, "why")));
    char *raw = json_is_object(req) ? json_dumps(req, JSON_COMPACT) : NULL;
    int rc = -1;
    if (!json_is_integer(no) || !json_is_integer(at) || !json_is_integer(seq) || !raw || !why) {
        snprintf(err, errlen, "waitlist '%s' is malformed", id);
    } else {
        request q;
        request_parse(&q, raw, strlen(raw), max_bytes, 0);
        if (q.outcome != REQUEST_OK || strcmp(q.r.id, id) != 0) {
            snprintf(err, errlen, "waitlist '%s': the request does not parse: %s", id, q.error);
        } else {
            q.r.seq = json_integer_value(seq);
            json_t *draw = json_object_get(doc, "draw"), *points = json_object_get(doc, "points");
            if (json_is_integer(draw) && json_integer_value(draw) > 0) q.r.draw = json_integer_value(draw);
            if (json_is_integer(points)) { q.r.points = json_integer_value(points); q.r.has_points = 1; }
            rc = engine_wait_load(e, &q.r, json_integer_value(no), json_integer_value(at), why);
            if (rc < 0) snprintf(err, errlen, "waitlist '%s' rejected by the engine (%d)", id, rc);
        }
        request_clear(&q);
    }
    free(raw);
    json_decref(doc);
    return rc < 0 ? -1 : 0;
}
