/* watch.h -- what every batch looks like from Redis, once a second.
 *
 * The watcher reads, for every batch listed in P:batches (served here or
 * not), its stats, meta, queue and dead list lengths, capacity and lease in
 * one read-only script, plus the instances' heartbeats. It keeps a short
 * history per batch (requests taken per second, for the dashboard's chart)
 * and estimates the age of the oldest queued request, which the protocol
 * does not record: it remembers when the total ever pushed (dequeued +
 * queue length) first reached each value, so the head of the queue
 * (ordinal dequeued + 1) was pushed no later than that moment. The estimate
 * is late by at most one tick, never early, so an alert on it does not
 * fire before its time; for a queue already full when watching began it
 * counts from then. It is an observer of its own, on its own connection:
 * a worker that is stuck does not stop the watcher from seeing its queue
 * age. Metrics and the dashboard read the snapshot; nothing waits.
 */
#ifndef ALLOCD_WATCH_H
#define ALLOCD_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <jansson.h>

#include "base/config.h"

#define WATCH_HISTORY 600     /* one sample a second: ten minutes */
#define WATCH_STEPS   1024    /* pushed-total steps kept for the age estimate */

typedef struct watch_sample {
    int64_t at_ms;
    int64_t dequeued;
} watch_sample;

typedef struct watch_step {
    int64_t pushed;           /* total pushed reached this value ... */
    int64_t at_ms;            /* ... when first seen here */
} watch_step;

typedef struct watch_batch {
    char id[72];
    int listed;
    int64_t seen_ms;          /* wall clock of the latest snapshot, 0 = none yet */
    json_t *stats;            /* object: P:{B}:stats fields as strings */
    json_t *meta;             /* object: P:{B}:meta */
    int64_t queue_len, ctl_len, dead_len, capacity_units;
    char lease[160];          /* lease token, "" = nobody holds it */
    int64_t lease_ttl_ms;
    uint64_t lease_changes;   /* times a new token took the lease */
    int64_t oldest_age_ms;    /* 0 when the queue is empty */
    watch_sample hist[WATCH_HISTORY];
    size_t hist_n, hist_head; /* ring: hist_head is the oldest */
    watch_step steps[WATCH_STEPS];
    size_t n_steps;
    int64_t last_pushed;
    int64_t detail_until_ms;  /* the dashboard asked for details recently */
    json_t *dead_recent;      /* array of the latest dead entries (strings) */
    json_t *log_recent;       /* array of the latest event log entries */
    /* the round, read only while a dashboard looks at it (watch_want_round),
     * by part (watch_part): objects of the hashes' fields as strings */
    int64_t round_until_ms[3], round_seen_ms[3];
    json_t *capacity, *attrs, *free, *holders, *groups, *slots;
    struct watch_lottery *lottery; /* the draw's replay (service/watch_lottery.h) */
    int pending;
    struct watch *owner;
} watch_batch;

typedef struct watch watch;

/* Called when a batch's meta differs from the previous snapshot; fields
 * names what changed ("per_user, opens_at"). */
typedef void (*watch_meta_fn)(const char *batch, const char *fields, void *data);

int watch_start(watch **out, uv_loop_t *loop, const allocd_config *cfg);
void watch_on_meta_change(watch *w, watch_meta_fn fn, void *data);
/* Frees asynchronously once its connection is closed. */
void watch_stop(watch *w);

size_t watch_count(const watch *w);
const watch_batch *watch_get(const watch *w, size_t i);
const watch_batch *watch_find(const watch *w, const char *batch);
/* The instances' heartbeats (object name -> JSON object), may be NULL. */
const json_t *watch_instances(const watch *w);
int watch_redis_ok(const watch *w);
/* Details (dead entries, event log) are read for a batch for a minute
 * after this is called; they appear from the next tick on. */
void watch_want_detail(watch *w, const char *batch);

/* The parts of a round (a bit each in watch_want_round's mask). */
typedef enum {
    WATCH_ROOMS = 0,          /* capacity, attrs, free */
    WATCH_HOLDERS = 1,        /* holders */
    WATCH_PEOPLE = 2          /* groups, slots */
} watch_part;
#define WATCH_PART(p) (1u << (p))

/* The parts of the batch's round in `parts` are read for a minute after
 * this is called, every other tick from the next one on, the parts wanted
 * in one atomic read: a round of 3,000 users is a few hundred kilobytes
 * and ~10 ms of Redis, so only what someone looks at is read. A part not
 * wanted for a minute is forgotten (round_seen_ms 0) until asked again. */
void watch_want_round(watch *w, const char *batch, unsigned parts);
/* 1 when every part in `parts` has been read. */
int watch_round_ready(const watch_batch *b, unsigned parts);

/* The pure part, exposed for the unit test: records a snapshot taken at
 * now_ms of `dequeued` and `queue_len` and updates oldest_age_ms. */
void watch_observe(watch_batch *b, int64_t now_ms, int64_t dequeued, int64_t queue_len);
/* Requests taken per second over the last `seconds`, or -1 without data. */
double watch_rate(const watch_batch *b, int seconds);

#endif
