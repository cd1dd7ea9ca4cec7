/* pipe.c -- one pipelined, optionally paced, non-blocking Redis connection
 * (see pipe_job in bench.h).
 *
 * Every load the bench generates goes through here: producers pushing with
 * the position transaction, the Lua design's EVALSHA per request, the bulk
 * pre-push. A sliding window keeps `depth` units in flight so the producer
 * is never the bottleneck, and an optional schedule paces units for the
 * latency-at-a-given-rate measurement. hiredis's blocking API cannot wait
 * for "reply or next send time", hence the non-blocking socket and ppoll.
 */
#include "bench.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct pipe_state {
    const pipe_job *j;
    redisContext *c;
    long sent, done;
    int got;                  /* replies received for unit `done` */
    int unit_error;
} pipe_state;

/* Appends every unit that is due and fits in the window; returns the
 * microseconds until the next one is due (0: none waiting on time). */
static int64_t send_due(pipe_state *s)
{
    const pipe_job *j = s->j;
    int64_t now = j->due ? proc_mono_us() : 0;
    while (s->sent < j->n && s->sent - s->done < j->depth) {
        if (j->due) {
            int64_t at = j->due(j->ctx, s->sent);
            if (at > now) return at - now;
        }
        j->append(j->ctx, s->c, s->sent);
        s->sent++;
    }
    return 0;
}

static int take_replies(pipe_state *s)
{
    for (;;) {
        void *rv = NULL;
        if (redisReaderGetReply(s->c->reader, &rv) != REDIS_OK) return -1;
        if (!rv) return 0;
        redisReply *r = rv;
        if (r->type == REDIS_REPLY_ERROR) s->unit_error = 1;
        if (s->j->each) s->j->each(s->j->ctx, s->done, s->got, r);
        if (++s->got == s->j->replies) {
            if (s->j->done) s->j->done(s->j->ctx, s->done, r, s->unit_error);
            s->done++;
            s->got = 0;
            s->unit_error = 0;
        }
        freeReplyObject(r);
    }
}

/* Waits for readability (and writability while output is pending) at most
 * wait_us (<0: up to 100 ms, so stop flags are seen). */
static int wait_io(pipe_state *s, int want_write, int64_t wait_us)
{
    if (wait_us < 0 || wait_us > 100000) wait_us = 100000;
    struct pollfd p = { .fd = s->c->fd, .events = POLLIN | (want_write ? POLLOUT : 0) };
    struct timespec ts = { (time_t)(wait_us / 1000000), (long)(wait_us % 1000000) * 1000L };
    int rc = ppoll(&p, 1, &ts, NULL);
    if (rc < 0 && errno != EINTR) return -1;
    if (rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        if (redisBufferRead(s->c) != REDIS_OK) return -1;
        return take_replies(s);
    }
    return 0;
}

static int stopped(const pipe_job *j)
{
    if (j->stop && *j->stop) return 1;
    return j->deadline_us > 0 && proc_mono_us() >= j->deadline_us;
}

static int step(pipe_state *s)
{
    int64_t next = send_due(s);
    if (next > 0 && next < s->j->tick_us) next = s->j->tick_us;
    int wdone = 1;
    if (redisBufferWrite(s->c, &wdone) != REDIS_OK) return -1;
    int in_flight = s->sent > s->done;
    if (!in_flight && wdone) { proc_sleep_us(next > 1000 ? 1000 : next); return 0; }
    /* with time-paced units waiting, wake for the next one */
    return wait_io(s, !wdone, next > 0 ? next : -1);
}

long pipe_run(const pipe_job *j, char *err, size_t errlen)
{
    pipe_state s = { .j = j };
    s.c = bench_connect_nb(j->target);
    if (!s.c) { snprintf(err, errlen, "cannot connect to %s", j->target->url); return -1; }
    while (s.done < j->n && !stopped(j)) {
        if (step(&s) < 0) {
            snprintf(err, errlen, "redis I/O: %s", s.c->errstr[0] ? s.c->errstr : strerror(errno));
            redisFree(s.c);
            return -1;
        }
    }
    redisFree(s.c);
    return s.done;
}
