/* part_check.c -- the partition tests' history and end-state checks
 * (part_check.h). */
#include "partition/part_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "proc/proc.h"
#include "wire/log_entry.h"

void part_report_init(part_report *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
}

void part_report_free(part_report *r) { pthread_mutex_destroy(&r->lock); }

void part_report_msg(part_report *r, const char *fmt, ...)
{
    pthread_mutex_lock(&r->lock);
    if (r->n_msgs < PART_MAX_MSGS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msgs[r->n_msgs++], sizeof r->msgs[0], fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&r->lock);
}

void part_history_init(part_history *h, long max)
{
    memset(h, 0, sizeof *h);
    h->max = max;
    h->seen = calloc((size_t)max, sizeof *h->seen);
}

void part_history_free(part_history *h)
{
    for (long i = 0; h->seen && i < h->max; i++) free(h->seen[i]);
    free(h->seen);
    h->seen = NULL;
}

/* "r<n>" -> n, else -1. */
static long part__req_no(const char *id, long max)
{
    if (id[0] != 'r' || !id[1]) return -1;
    char *end;
    long n = strtol(id + 1, &end, 10);
    return *end || n < 0 || n >= max ? -1 : n;
}

static int part__waiting(const char *v) { return strstr(v, "\"status\":\"waiting\"") != NULL; }

/* One result as the poller sees it now, against what it saw before. */
static void part__observe(part_history *h, part_report *r, long n, const char *v)
{
    char *old = h->seen[n];
    if (old && !strcmp(old, v)) return;
    if (!old) {
        if (part__waiting(v)) r->waits_seen++;
    } else if (part__waiting(old) && !part__waiting(v)) {
        r->waits_served++;
    } else {
        r->changed++;
        part_report_msg(r, "r%ld changed from %.120s to %.120s", n, old, v);
    }
    free(old);
    h->seen[n] = strdup(v);
}

static void part__stat_monotonic(part_report *r, long long *last, long long now, const char *name)
{
    if (now < *last) {
        r->backwards++;
        part_report_msg(r, "stats.%s went back from %lld to %lld", name, *last, now);
    }
    if (now > *last) *last = now;
}

void part_history_poll(part_history *h, part_report *r, redisContext *c, const char *b)
{
    /* stats first: a result read after them is at least as new */
    redisReply *st = redisCommand(c, "HMGET alloc:{%s}:stats processed dequeued", b);
    if (st && st->type == REDIS_REPLY_ARRAY && st->elements == 2) {
        long long v[2];
        for (int i = 0; i < 2; i++)
            v[i] = st->element[i]->type == REDIS_REPLY_STRING ? atoll(st->element[i]->str) : 0;
        part__stat_monotonic(r, &h->processed, v[0], "processed");
        part__stat_monotonic(r, &h->dequeued, v[1], "dequeued");
    }
    if (st) freeReplyObject(st);
    redisReply *rep = redisCommand(c, "HGETALL alloc:{%s}:results", b);
    if (rep && rep->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i + 1 < rep->elements; i += 2) {
            long n = part__req_no(rep->element[i]->str, h->max);
            if (n >= 0) part__observe(h, r, n, rep->element[i + 1]->str);
        }
        r->polls++;
    }
    if (rep) freeReplyObject(rep);
}

/* ------------------------------------------------------------ the end -- */

typedef struct part_final {
    part_report *r;
    unsigned char *grant_events;   /* per request: grant events in the log */
    long log_grants;
} part_final;

static int part__on_event(void *ud, const log_field *f, size_t n)
{
    part_final *fin = ud;
    const char *type = NULL, *req = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(f[i].key, "type")) type = f[i].val;
        else if (!strcmp(f[i].key, "req")) req = f[i].val;
    }
    if (!type || strcmp(type, "grant")) return 0;
    fin->log_grants++;
    long no = req ? part__req_no(req, fin->r->pushed) : -1;
    if (no < 0) {
        fin->r->other++;
        part_report_msg(fin->r, "a grant in the log for '%s', no request of ours", req ? req : "");
    } else if (++fin->grant_events[no] == 2) {
        fin->r->doubled++;
        part_report_msg(fin->r, "r%ld granted twice in the log", no);
    }
    return 0;
}

/* One XRANGE entry: [id, [field, value, ...]]. */
static void part__log_entry(part_final *fin, const redisReply *e)
{
    const redisReply *kv = e->element[1];
    log_field fields[32];
    size_t n = 0;
    for (size_t i = 0; i + 1 < kv->elements && n < 32; i += 2, n++)
        fields[n] = (log_field){ kv->element[i]->str, kv->element[i + 1]->str, kv->element[i + 1]->len };
    char err[200] = "";
    if (log_entry_decode(fields, n, part__on_event, fin, err, sizeof err) < 0) {
        fin->r->other++;
        part_report_msg(fin->r, "log entry %s does not decode: %s", e->element[0]->str, err);
    }
}

static void part__read_log(part_final *fin, redisContext *c, const char *b)
{
    char from[64] = "-";
    for (;;) {
        redisReply *rep = redisCommand(c, "XRANGE alloc:{%s}:log %s + COUNT 1000", b, from);
        if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements == 0) {
            if (rep) freeReplyObject(rep);
            return;
        }
        for (size_t i = 0; i < rep->elements; i++) part__log_entry(fin, rep->element[i]);
        snprintf(from, sizeof from, "(%s", rep->element[rep->elements - 1]->element[0]->str);
        freeReplyObject(rep);
    }
}

/* Every request and admin command: one final result; grants counted. */
static void part__check_results(part_report *r, redisContext *c, const char *b, int per_user,
                                const unsigned char *grant_events)
{
    long users = r->pushed / 3 + 1;
    unsigned char *held = calloc((size_t)users, 1);
    unsigned char *rank_seen = calloc((size_t)r->pushed + 1, 1);
    for (long n = 0; n < r->pushed; n++) {
        char *v = NULL;
        redisReply *rep = redisCommand(c, "HGET alloc:{%s}:results r%ld", b, n);
        if (rep && rep->type == REDIS_REPLY_STRING) v = strdup(rep->str);
        if (rep) freeReplyObject(rep);
        json_t *j = v ? json_loads(v, 0, NULL) : NULL;
        const char *status = json_string_value(json_object_get(j, "status"));
        if (!status) {
            r->lost++;
            part_report_msg(r, "r%ld: no result (%s)", n, v ? v : "nil");
        } else if (!strcmp(status, "granted")) {
            r->granted++;
            long rank = (long)json_integer_value(json_object_get(j, "rank"));
            if (rank < 1 || rank > r->pushed || rank_seen[rank]++) {
                r->doubled++;
                part_report_msg(r, "r%ld: rank %ld out of range or given twice", n, rank);
            }
            if (grant_events[n] == 0) { r->other++; part_report_msg(r, "r%ld granted, no grant in the log", n); }
            if (++held[n / 3] > per_user) { r->oversold++; part_report_msg(r, "user u%ld above per_user", n / 3); }
        } else if (!strcmp(status, "rejected")) {
            r->rejected++;
        } else {
            r->other++;
            part_report_msg(r, "r%ld: status %s at the end", n, status);
        }
        json_decref(j);
        free(v);
    }
    free(held);
    free(rank_seen);
}

static void part__check_ctl_and_phantoms(part_report *r, redisContext *c, const char *b)
{
    for (long k = 0; k < r->ctl; k++) {
        char *v = NULL;
        redisReply *rep = redisCommand(c, "HGET alloc:{%s}:results c%ld", b, k);
        if (rep && rep->type == REDIS_REPLY_STRING) v = rep->str;
        if (!v) { r->lost++; part_report_msg(r, "admin command c%ld: no result", k); }
        if (rep) freeReplyObject(rep);
    }
    r->results = proc_int(c, "HLEN alloc:{%s}:results", b);
    if (r->results != r->pushed + r->ctl) {
        r->phantom += r->results > r->pushed + r->ctl ? r->results - r->pushed - r->ctl : 0;
        part_report_msg(r, "%ld results for %ld requests and %ld admin commands", r->results, r->pushed, r->ctl);
    }
}

void part_check_final(part_report *r, redisContext *c, const char *b, int per_user)
{
    part_final fin = { r, calloc((size_t)r->pushed + 1, 1), 0 };
    part__read_log(&fin, c, b);
    part__check_results(r, c, b, per_user, fin.grant_events);
    part__check_ctl_and_phantoms(r, c, b);
    r->capacity = proc_int(c, "HGET alloc:{%s}:capacity sku", b);
    long long free_units = proc_int(c, "HGET alloc:{%s}:free sku", b);
    long long stats_granted = proc_int(c, "HGET alloc:{%s}:stats granted", b);
    if (r->granted > r->capacity || free_units != r->capacity - r->granted) {
        r->oversold++;
        part_report_msg(r, "granted %ld, capacity %ld, free %lld", r->granted, r->capacity, free_units);
    }
    if (stats_granted != r->granted || fin.log_grants != r->granted) {
        r->other++;
        part_report_msg(r, "granted results %ld, stats.granted %lld, grants in the log %ld",
                        r->granted, stats_granted, fin.log_grants);
    }
    free(fin.grant_events);
    r->violations = r->lost + r->phantom + r->doubled + r->oversold + r->changed + r->backwards +
                    r->slow_takeover + r->other;
}
