/* profiles_watch.c -- a WATCH on the profiles hash, polled with CLIENT
 * INFO, telling the scan when to read (see profiles_watch.h). */
#include "worker/profiles_watch.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/log.h"

void profiles_watch_init(profiles_watch *pw, redis_conn *conn, slots_scan *scan, const char *key,
                         const char *batch, int timeout_ms, void (*news)(void *data), void *data)
{
    memset(pw, 0, sizeof *pw);
    pw->news = news;
    pw->data = data;
    pw->conn = conn;
    pw->scan = scan;
    pw->key = key;
    pw->batch = batch;
    pw->timeout_ms = timeout_ms;
}

/* Nothing stands any more: the scan reads every second until it does. */
static void lost(profiles_watch *pw)
{
    if (pw->standing) log_notice("batch %s: profiles: the WATCH is lost; read every second until it stands again",
                                 pw->batch);
    pw->standing = 0;
    pw->armed_id = 0;
    slots_scan_watch_lost(pw->scan);
}

/* An error reply to a command of the watch: 1. Redis will never do it (an
 * ACL without it, a Redis without it): the scan polls for good. Any other
 * error (MOVED while a slot moves, LOADING, a failover's READONLY) only
 * loses the WATCH, which is armed again. */
static int refused(profiles_watch *pw, const redisReply *r, const char *what)
{
    if (!r || r->type != REDIS_REPLY_ERROR) return 0;
    if (strncmp(r->str, "NOPERM", 6) && strncasecmp(r->str, "ERR unknown", 11)) {
        lost(pw);
        return 1;
    }
    log_warn("batch %s: profiles: %s refused (%s): the profiles are read every second instead", pw->batch,
             what, r->str);
    pw->refused = 1;
    lost(pw);
    return 1;
}

/* The id a CLIENT ID or CLIENT INFO reply gives, 0 if none. */
static int64_t client_id(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type != REDIS_REPLY_STRING) return 0;
    const char *p = !strncmp(r->str, "id=", 3) ? r->str + 3 : strstr(r->str, " id=");
    if (p && p != r->str + 3) p += 4;
    return p ? strtoll(p, NULL, 10) : 0;
}

/* CLIENT ID's reply, the last of the arming: the WATCH stands, on the
 * connection with that id; the scan reads once, after now. */
static void armed(profiles_watch *pw, const redisReply *r, const char *err)
{
    if (pw->refused) return;   /* the WATCH was */
    if (err || !r || pw->arm_failed) { lost(pw); return; }
    if (refused(pw, r, "CLIENT ID")) return;
    pw->armed_id = client_id(r);
    if (!pw->armed_id) { lost(pw); return; }
    int64_t now = clock_mono_ms();
    if (!pw->standing)
        log_info("batch %s: profiles: WATCH %s stands; read when written, and every %d s", pw->batch, pw->key,
                 SLOTS_SCAN_WATCHED_EVERY_MS / 1000);
    pw->standing = 1;
    slots_scan_watch_armed(pw->scan, now);
    slots_scan_changed(pw->scan, now);
}

/* The owner hears when it stood (a load waiting for it goes on); a
 * failure is armed again at the next tick, and a waiting load goes on at
 * its own bound (batch_worker.c), not in a loop of re-armings. */
static void on_armed(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    profiles_watch *pw = priv;
    (void)c;
    pw->out = 0;
    armed(pw, r, err);
    if (pw->armed_id && pw->news) pw->news(pw->data);
}

static void on_step(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    profiles_watch *pw = priv;
    (void)c;
    if (err || !r || r->type == REDIS_REPLY_ERROR) pw->arm_failed = 1;   /* no WATCH stands */
    if (!err && r && !pw->refused) refused(pw, r, "WATCH");
}

/* CLIENT INFO: still the same connection, and flag d not set. */
static void on_info(redis_conn *c, redisReply *r, const char *err, void *priv)
{
    profiles_watch *pw = priv;
    (void)c;
    pw->out = 0;
    if (err || !r) { lost(pw); return; }
    if (refused(pw, r, "CLIENT INFO")) return;
    const char *flags = r->type == REDIS_REPLY_STRING ? strstr(r->str, " flags=") : NULL;
    if (!flags || client_id(r) != pw->armed_id) { lost(pw); return; }   /* another link: arm again */
    size_t n = strcspn(flags + 7, " ");
    if (memchr(flags + 7, 'd', n)) {   /* written since: arm again, then read */
        pw->armed_id = 0;
        pw->next_at = 0;
        profiles_watch_tick(pw, clock_mono_ms());
        return;
    }
    slots_scan_clean(pw->scan, pw->asked_at);
    if (pw->news) pw->news(pw->data);
}

static void arm(profiles_watch *pw)
{
    pw->out = 1;
    pw->arm_failed = 0;
    if (redis_conn_command(pw->conn, on_step, pw, pw->timeout_ms, "UNWATCH") < 0 ||
        redis_conn_command(pw->conn, on_step, pw, pw->timeout_ms, "WATCH %s", pw->key) < 0 ||
        redis_conn_command(pw->conn, on_armed, pw, pw->timeout_ms, "CLIENT ID") < 0)
        pw->out = 0;   /* not connected after all: the replies sent get their error */
}

int profiles_watch_stands(const profiles_watch *pw)
{
    return pw->armed_id != 0;
}

void profiles_watch_tick(profiles_watch *pw, int64_t now)
{
    if (pw->refused || pw->out) return;
    if (!redis_conn_is_ready(pw->conn)) {
        if (pw->armed_id) lost(pw);
        return;
    }
    if (pw->armed_id && now < pw->next_at) return;
    pw->next_at = now + PROFILES_WATCH_POLL_MS;
    if (!pw->armed_id) { arm(pw); return; }
    pw->out = 1;
    pw->asked_at = now;
    if (redis_conn_command(pw->conn, on_info, pw, pw->timeout_ms, "CLIENT INFO") < 0) pw->out = 0;
}

int profiles_watch_arming(profiles_watch *pw, int64_t now)
{
    if (pw->refused || pw->armed_id) return 0;
    if (!redis_conn_is_ready(pw->conn)) return 1;   /* connecting: armed once up */
    profiles_watch_tick(pw, now);
    return pw->out && !pw->armed_id;
}
