/* log_entry.c -- chunk-format log entries written and read (see
 * log_entry.h). The writer is jsonw (no allocation once warm: it runs once
 * per chunk in the apply); the reader is jansson, off the hot path (verify,
 * chaos, the archive).
 */
#include "wire/log_entry.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numtext.h"

enum { POS_TYPE, POS_USER, POS_ITEM, POS_QTY, POS_ORDER, POS_REQ, POS_AT, POS_EXPIRES, POS_STATE, POS_EXTRAS };

static const char *const field_names[POS_EXTRAS] = {
    "type", "user", "item", "qty", "order", "req", "at", "expires_at", "state",
};

size_t log_entry_extras(const engine_event *ev, log_extra out[LOG_EVENT_MAX_EXTRAS])
{
    size_t n = 0;
    if (ev->type == EVENT_WAIT || ev->type == EVENT_WAIT_SERVED)
        out[n++] = (log_extra){ "wait_no", NULL, ev->wait_no };
    if (ev->type == EVENT_WAIT_SERVED) {
        out[n++] = (log_extra){ "status", engine_status_name(ev->status), 0 };
        if (ev->reason != REASON_NONE) out[n++] = (log_extra){ "reason", engine_reason_name(ev->reason), 0 };
    }
    if (ev->by) out[n++] = (log_extra){ "by", ev->by, 0 };   /* staff (contract 11.5) */
    return n;
}

/* The extras of a chunk event: an object after the state position. */
static void write_extras(jsonw *w, const log_extra *x, size_t n)
{
    jsonw_obj_begin(w);
    for (size_t i = 0; i < n; i++) {
        jsonw_key(w, x[i].key);
        if (x[i].str) jsonw_str(w, x[i].str); else jsonw_int(w, x[i].num);
    }
    jsonw_obj_end(w);
}

void log_entry_write_events(jsonw *w, const engine *e)
{
    jsonw_arr_begin(w);
    for (size_t i = 0; i < engine_event_count(e); i++) {
        const engine_event *ev = engine_event_at(e, i);
        jsonw_arr_begin(w);
        jsonw_str(w, engine_event_name(ev->type));
        jsonw_str(w, ev->user ? ev->user : "");
        jsonw_str(w, ev->item ? ev->item : "");
        jsonw_int(w, ev->qty);
        if (ev->order) jsonw_u64_str(w, ev->order); else jsonw_str(w, "");
        jsonw_str(w, ev->req ? ev->req : "");
        jsonw_int(w, ev->at);
        log_extra x[LOG_EVENT_MAX_EXTRAS];
        size_t nx = log_entry_extras(ev, x);
        if (ev->expires_at || ev->state || nx) jsonw_int(w, ev->expires_at);
        if (ev->state || nx) jsonw_str(w, ev->state ? ev->state : "");
        if (nx) write_extras(w, x, nx);
        jsonw_arr_end(w);
    }
    jsonw_arr_end(w);
}

static const log_field *find(const log_field *f, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].key && !strcmp(f[i].key, key)) return &f[i];
    return NULL;
}

int log_entry_is_chunk(const log_field *entry, size_t n)
{
    const log_field *f = find(entry, n, "format");
    return f && f->val && f->vlen == 5 && !memcmp(f->val, "chunk", 5);
}

/* The object after the state position -> more fields, numbers printed
 * into num (one buffer per extra). */
static int extra_fields(json_t *obj, log_field *out, char num[][24], size_t *n)
{
    if (!json_is_object(obj) || json_object_size(obj) > LOG_EVENT_MAX_EXTRAS) return -1;
    const char *key;
    json_t *v;
    size_t k = 0;
    json_object_foreach(obj, key, v) {
        /* an extra never repeats a position's field: readers that take the
         * first (verify) and the last (the archive) would see two events */
        for (size_t p = 0; p < POS_EXTRAS; p++)
            if (!strcmp(key, field_names[p])) return -1;
        log_field *f = &out[(*n)++];
        f->key = key;
        if (json_is_string(v)) {
            f->val = json_string_value(v);
            f->vlen = json_string_length(v);
        } else if (json_is_integer(v)) {
            f->vlen = (size_t)snprintf(num[k], 24, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            f->val = num[k++];
        } else {
            return -1;
        }
    }
    return 0;
}

/* One event array -> event-format fields; numbers printed into num. */
static int event_fields(json_t *ev, log_field *out, char num[][24], size_t *n)
{
    size_t len = json_array_size(ev);
    if (!json_is_array(ev) || len < 7 || len > POS_EXTRAS + 1) return -1;
    *n = 0;
    for (size_t p = 0; p < len; p++) {
        json_t *v = json_array_get(ev, p);
        log_field *f = &out[*n];
        if (p == POS_EXTRAS) return extra_fields(v, out, num + 3, n);
        f->key = field_names[p];
        if (p == POS_QTY || p == POS_AT || p == POS_EXPIRES) {
            if (!json_is_integer(v)) return -1;
            json_int_t x = json_integer_value(v);
            if (p == POS_EXPIRES && x == 0) continue; /* none: the event format leaves it out */
            char *buf = num[p == POS_QTY ? 0 : p == POS_AT ? 1 : 2];
            f->vlen = (size_t)snprintf(buf, 24, "%" JSON_INTEGER_FORMAT, x);
            f->val = buf;
        } else {
            if (!json_is_string(v)) return -1;
            f->val = json_string_value(v);
            f->vlen = json_string_length(v);
            if (p == POS_STATE && f->vlen == 0) continue; /* "" before extras: no state */
        }
        (*n)++;
    }
    return 0;
}

static int decode_chunk(const log_field *entry, size_t n, log_event_fn fn, void *ud, char *err, size_t errlen)
{
    const log_field *evf = find(entry, n, "events"), *nf = find(entry, n, "n");
    json_error_t jerr;
    json_t *arr = evf && evf->val ? json_loadb(evf->val, evf->vlen, 0, &jerr) : NULL;
    if (!json_is_array(arr)) {
        snprintf(err, errlen, "chunk log entry: events is %s", arr ? "not an array" : "missing or not JSON");
        json_decref(arr);
        return -1;
    }
    size_t count = json_array_size(arr);
    /* a value is vlen bytes, not a C string (fuzz_log_entry read past one) */
    char nbuf[24] = "";
    if (nf && nf->val && nf->vlen < sizeof nbuf) memcpy(nbuf, nf->val, nf->vlen);
    if (nf && (!nf->val || nf->vlen >= sizeof nbuf || strtoull(nbuf, NULL, 10) != count)) {
        snprintf(err, errlen, "chunk log entry: n says %.*s, events has %zu", nf->val ? (int)nf->vlen : 7,
                 nf->val ? nf->val : "nothing", count);
        json_decref(arr);
        return -1;
    }
    int rc = (int)count;
    for (size_t i = 0; i < count; i++) {
        log_field f[LOG_EVENT_MAX_FIELDS];
        char num[3 + LOG_EVENT_MAX_EXTRAS][24];
        size_t k;
        if (event_fields(json_array_get(arr, i), f, num, &k) < 0) {
            snprintf(err, errlen, "chunk log entry: event %zu is not [type,user,item,qty,order,req,at,...] (then {extras})", i);
            rc = -1;
            break;
        }
        int stop = fn(ud, f, k);
        if (stop) { rc = stop; break; }
    }
    json_decref(arr);
    return rc;
}

int log_entry_decode(const log_field *entry, size_t n, log_event_fn fn, void *ud, char *err, size_t errlen)
{
    if (errlen) err[0] = '\0';
    if (log_entry_is_chunk(entry, n)) return decode_chunk(entry, n, fn, ud, err, errlen);
    int stop = fn(ud, entry, n);
    return stop ? stop : 1;
}

static int event_type(const char *name)
{
    for (int t = EVENT_GRANT; t <= EVENT_WAIT_SERVED; t++)
        if (!strcmp(name, engine_event_name((engine_event_type)t))) return t;
    return REPLAY_TYPE_OTHER;
}

/* A number field: absent is 0, as the event format leaves out what it
 * does not have. */
static int event_int(const log_field *f, size_t n, const char *key, int64_t *out, char *err, size_t errlen)
{
    const log_field *v = find(f, n, key);
    char buf[32];
    *out = 0;
    if (!v || !v->val || v->vlen == 0) return 0;
    if (v->vlen < sizeof buf) {
        memcpy(buf, v->val, v->vlen);
        buf[v->vlen] = '\0';
        if (numtext_parse_i64(buf, out) == 0) return 0;
    }
    snprintf(err, errlen, "field %s '%.*s' is not an integer", key, (int)(v->vlen > 40 ? 40 : v->vlen), v->val);
    return -1;
}

static const char *event_str(const log_field *f, size_t n, const char *key)
{
    const log_field *v = find(f, n, key);
    return v && v->val ? v->val : "";
}

int log_entry_event(const log_field *f, size_t n, replay_event *out, char *err, size_t errlen)
{
    if (errlen) err[0] = '\0';
    *out = (replay_event){ .type_name = event_str(f, n, "type"), .user = event_str(f, n, "user"),
                           .item = event_str(f, n, "item"), .order = event_str(f, n, "order"),
                           .req = event_str(f, n, "req"), .state = event_str(f, n, "state"),
                           .by = event_str(f, n, "by") };
    out->type = event_type(out->type_name);
    if (event_int(f, n, "qty", &out->qty, err, errlen) < 0 || event_int(f, n, "at", &out->at, err, errlen) < 0 ||
        event_int(f, n, "expires_at", &out->expires_at, err, errlen) < 0 ||
        event_int(f, n, "wait_no", &out->wait_no, err, errlen) < 0)
        return -1;
    return 0;
}
