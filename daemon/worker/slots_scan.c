/* slots_scan.c -- P:{B}:slots read again in HSCAN pages (see slots_scan.h). */
#include "worker/slots_scan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine_slots.h"
#include "core/vec.h"
#include "worker/batch_load.h"

static void slots_clear(engine *e, void *data)
{
    (void)data;
    engine_slots_clear(e);
}

static void slots_pair(engine *e, const char *batch, const char *user, const char *value, void *data)
{
    (void)data;
    batch_load_slot(e, batch, user, value);
}

void slots_scan_init_target(slots_scan *s, const slots_scan_target *t)
{
    memset(s, 0, sizeof *s);
    s->target = *t;
}

void slots_scan_init(slots_scan *s)
{
    const slots_scan_target slots = { slots_clear, slots_pair, NULL, NULL, 0 };
    slots_scan_init_target(s, &slots);
}

void slots_scan_free(slots_scan *s)
{
    free(s->staged);
    memset(s, 0, sizeof *s);
}

void slots_scan_abandon(slots_scan *s)
{
    s->running = 0;
    s->page_out = 0;
    s->staged_len = 0;
}

void slots_scan_loaded(slots_scan *s, int64_t now)
{
    slots_scan_abandon(s);
    s->started_at = s->installed_from = now;
    s->dirty_at = 0;   /* the load reads after now: a watch armed before keeps standing */
}

void slots_scan_watch_armed(slots_scan *s, int64_t now)
{
    s->watch_from = now > 0 ? now : 1;
}

void slots_scan_watch_lost(slots_scan *s)
{
    s->watch_from = 0;
    s->dirty_at = 0;
    s->clean_at = 0;
}

void slots_scan_changed(slots_scan *s, int64_t now)
{
    if (s->watch_from && !s->dirty_at) s->dirty_at = now > 0 ? now : 1;
}

/* The table holds what a read begun after the watch stood saw. */
static int watched(const slots_scan *s)
{
    return s->watch_from && s->installed_from >= s->watch_from;
}

void slots_scan_clean(slots_scan *s, int64_t asked_at)
{
    if (watched(s) && !s->dirty_at && asked_at > s->clean_at) s->clean_at = asked_at;
}

int slots_scan_current(const slots_scan *s, int64_t now)
{
    int64_t from = s->installed_from;
    if (watched(s) && s->clean_at > from) from = s->clean_at;
    return now - from <= SLOTS_SCAN_EVERY_MS + SLOTS_SCAN_GRACE_MS;
}

/* Whether a scan should begin now (none runs). */
static int due_now(const slots_scan *s, int64_t now)
{
    if (s->watch_from)
        return s->dirty_at || s->installed_from < s->watch_from ||
               now - s->started_at >= SLOTS_SCAN_WATCHED_EVERY_MS;
    return now - s->started_at >= SLOTS_SCAN_EVERY_MS || !slots_scan_current(s, now);
}

/* A scan from its first page: cursor 0, nothing staged. */
static void begin(slots_scan *s)
{
    s->running = 1;
    s->page_out = 0;
    s->cleared = 0;
    s->staged_len = 0;
    memcpy(s->cursor, "0", 2);
}

const char *slots_scan_due(slots_scan *s, int64_t now)
{
    if (s->page_out) return NULL;
    if (!s->running) {
        if (!due_now(s, now)) return NULL;
        begin(s);
        s->started_at = now;
        s->dirty_at = 0;   /* this read sees every change reported before it */
    }
    return s->cursor;
}

void slots_scan_sent(slots_scan *s)
{
    s->page_out = 1;
}

static int stage(slots_scan *s, const char *str, size_t len)
{
    void *p = s->staged;
    if (vec_reserve(&p, &s->staged_cap, s->staged_len + len + 1, 1) < 0) return -ENOMEM;
    s->staged = p;
    memcpy(s->staged + s->staged_len, str, len);
    s->staged[s->staged_len + len] = '\0';
    s->staged_len += len + 1;
    return 0;
}

/* The scan is whole: the staged pairs become the engine's table (the
 * target's). */
static void install(slots_scan *s, engine *e, const char *batch)
{
    s->target.clear(e, s->target.data);
    for (size_t at = 0; at < s->staged_len;) {
        const char *user = s->staged + at;
        const char *value = user + strlen(user) + 1;
        s->target.pair(e, batch, user, value, s->target.data);
        at = (size_t)(value + strlen(value) + 1 - s->staged);
    }
    if (s->target.end) s->target.end(e, s->target.data);
    s->staged_len = 0;
}

/* A streamed target's page: its pairs straight in (hiredis ends every
 * string with a NUL, so each reads up to its first, as staged ones do). */
static void stream(slots_scan *s, const redisReply *pairs, engine *e, const char *batch)
{
    if (!s->cleared) {
        s->target.clear(e, s->target.data);
        s->cleared = 1;
    }
    for (size_t i = 0; i + 1 < pairs->elements; i += 2)
        s->target.pair(e, batch, pairs->element[i]->str, pairs->element[i + 1]->str, s->target.data);
}

static int is_page(const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return 0;
    const redisReply *cur = r->element[0], *pairs = r->element[1];
    if (cur->type != REDIS_REPLY_STRING || cur->len == 0 || cur->len >= SLOTS_SCAN_CURSOR_MAX)
        return 0;
    if (pairs->type != REDIS_REPLY_ARRAY || pairs->elements % 2) return 0;
    for (size_t i = 0; i < pairs->elements; i++)
        if (pairs->element[i]->type != REDIS_REPLY_STRING) return 0;
    return 1;
}

int slots_scan_page(slots_scan *s, const redisReply *r, engine *e, const char *batch)
{
    s->page_out = 0;
    /* after a bad page the scan starts again from its first page, at once
     * (what was staged may be half of something else) */
    if (!is_page(r)) { begin(s); return -EPROTO; }
    const redisReply *pairs = r->element[1];
    if (s->target.streamed) stream(s, pairs, e, batch);
    for (size_t i = 0; !s->target.streamed && i < pairs->elements; i++) {
        /* read up to a NUL byte, as the HGETALL at load reads them (a
         * user id or a time never holds one) */
        const redisReply *x = pairs->element[i];
        if (stage(s, x->str, strnlen(x->str, x->len)) < 0) { begin(s); return -ENOMEM; }
    }
    const redisReply *cur = r->element[0];
    if (strcmp(cur->str, "0")) {
        memcpy(s->cursor, cur->str, cur->len + 1);
        return 0;
    }
    if (!s->target.streamed) install(s, e, batch);
    else if (s->target.end) s->target.end(e, s->target.data);
    s->running = 0;
    s->installed_from = s->started_at;
    return 1;
}
