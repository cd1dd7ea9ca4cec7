/* profiles_watch.h -- knowing that P:{B}:profiles changed without reading
 * it (contract 11.2: an edit holds within a second).
 *
 * Reading a housing round's whole profiles hash every second to find the
 * few an operator edited cost a 200,000-user round a third of its
 * decision rate (commit 3230fc5). Redis tells a client whether a key
 * it WATCHes was written since: CLIENT INFO shows flag `d` then ("a
 * watched key has been modified - EXEC will fail"), without touching the
 * WATCH. So a connection of its own per batch holds `WATCH <profiles>`
 * and asks CLIENT INFO at most every PROFILES_WATCH_POLL_MS, with the
 * takes and the watchdog's tick: a key written since
 * (any HSET, HDEL, DEL, expiry, FLUSHALL) re-arms the WATCH (UNWATCH,
 * WATCH) and, once Redis confirms it, tells the scan (worker/slots_scan.h)
 * that the hash changed: the read it starts then begins after the new
 * WATCH stands, so nothing written in between is lost. The connection's
 * CLIENT ID is checked with every poll: a reconnect (a failover, a Cluster
 * slot moved, a dropped link) drops the WATCH with it, and it is armed
 * again followed by a read. While nothing stands -- not yet armed, the
 * link down, or Redis refusing CLIENT INFO (an ACL without it, Redis
 * before 6.2: said once in the log) -- the scan reads every second as it
 * always did.
 */
#ifndef ALLOCD_PROFILES_WATCH_H
#define ALLOCD_PROFILES_WATCH_H

#include <stdint.h>

#include "redis/redis_conn.h"
#include "worker/slots_scan.h"

#define PROFILES_WATCH_POLL_MS 250

typedef struct profiles_watch {
    redis_conn *conn;         /* the watch's own link (the worker's) */
    slots_scan *scan;         /* told: armed, lost, changed */
    const char *key, *batch;
    int timeout_ms;
    int64_t armed_id;         /* CLIENT ID the WATCH stands on (0: none) */
    int64_t next_at;          /* mono ms: the next poll */
    int out;                  /* a command is out */
    int refused;              /* Redis refused: the scan polls, for good */
    int standing;             /* armed since it was last lost (logged when it comes) */
    int arm_failed;           /* UNWATCH or WATCH of the arming under way failed */
    int64_t asked_at;         /* mono ms the CLIENT INFO out was sent */
    void (*news)(void *data); /* an answer came: a held take may go */
    void *data;
} profiles_watch;

void profiles_watch_init(profiles_watch *pw, redis_conn *conn, slots_scan *scan, const char *key,
                         const char *batch, int timeout_ms, void (*news)(void *data), void *data);
/* Called often (with every take): arms, polls or notices a lost link. */
void profiles_watch_tick(profiles_watch *pw, int64_t now);
/* 1 while a WATCH is about to stand: Redis has not refused it, none
 * stands yet, and its link is coming up or the arming is out (started
 * here if it was not). The caller bounds the wait: a link that never
 * comes up keeps this 1. A
 * load that waits for this to end reads the profiles after the WATCH
 * stands, and so is the read the WATCH needs (batch__load_start). */
int profiles_watch_arming(profiles_watch *pw, int64_t now);
/* 1 while a WATCH stands, unwritten since its CLIENT INFO said so: a read
 * begun now is the one it needs, and none follows until it is written. */
int profiles_watch_stands(const profiles_watch *pw);

#endif
