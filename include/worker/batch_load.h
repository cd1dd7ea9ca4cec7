/* batch_load.h -- loading a batch: its state in Redis read into a fresh
 * engine.
 *
 * Redis is the only truth: the worker loads at start and after every
 * failure, and throws away whatever it held (docs/DESIGN.md, "Any failure
 * means reload"). A load first runs the load_prepare script (scripts.h:
 * upgrades what an older allocd left, deletes our trip key), then reads
 * meta, capacity, attrs, holders, tombstones, participants, stats and
 * internal in one pipeline on the worker's command connection, and builds
 * an engine from them. Once those are read the worker fetches an order-id
 * block and then calls batch_load_scan, which puts every id that has a
 * result into the dedup filter with HSCAN, so a big batch does not block
 * Redis (no other writer runs: the lease is ours, so the scan sees every
 * field).
 *
 * A failed step does not stop the load: it is noted (failed, err) and the
 * load runs to its end, where the worker sees it and backs off.
 */
#ifndef ALLOCD_BATCH_LOAD_H
#define ALLOCD_BATCH_LOAD_H

#include <stdint.h>

#include "base/config.h"
#include "core/engine.h"
#include "redis/argbuf.h"
#include "redis/redis_conn.h"
#include "worker/profiles_scan.h"
#include "worker/batch_keys.h"
#include "worker/dedup.h"
#include "worker/scripts.h"

typedef struct batch_load batch_load;

typedef struct batch_load_callbacks {
    /* 0 when the worker has moved on (failed, stopping): a reply that
     * arrives then is dropped. */
    int (*loading)(void *data);
    /* The hashes are read (maybe failed): fetch an order-id block, then
     * batch_load_scan. */
    void (*on_read)(void *data);
    /* The load is over, maybe failed (see batch_load.failed). */
    void (*on_done)(void *data);
} batch_load_callbacks;

/* The commands of one load, as the privdata of their replies. A load that
 * is abandoned (the worker failed and loads again) keeps its run until the
 * last of its replies is in, and those replies are dropped: they belong to
 * a generation that is gone, and must not be read as the new load's. */
typedef struct batch_load_run batch_load_run;

struct batch_load {
    redis_conn *conn;
    const allocd_config *cfg;
    const allocd_scripts *scripts;
    const batch_keys *keys;
    const char *batch;
    dedup *dedup;             /* where the ids with a result go */
    const batch_load_callbacks *cb;
    void *data;
    profiles_report *profiles; /* the profiles' reads (profiles_scan.h); NULL: not read */
    /* one load */
    uint64_t seed;            /* the engine's hash seed */
    engine *eng;              /* built by the load, until the worker takes it */
    int64_t dequeued;         /* stats.dequeued */
    int64_t chunks_applied;   /* internal.chunks_applied */
    int lottery_done;         /* internal.lottery_done */
    argbuf staged;            /* a chunk's effect staged and not published
                                 (apply_txn.h): the worker publishes it and
                                 loads again */
    int failed;
    char err[256];
    batch_load_run *run;      /* the current load's replies */
};

void batch_load_init(batch_load *l, redis_conn *conn, const allocd_config *cfg,
                     const allocd_scripts *scripts, const batch_keys *keys,
                     const char *batch, dedup *d, const batch_load_callbacks *cb, void *data);
/* Starts a load (dropping what an earlier one built, and the dedup
 * filter). trip_key: FENCE's trip key for the lease token now held; seed:
 * the new engine's hash seed. 0; -ENOTCONN: not everything could be sent
 * (the connection is down; its on_ready starts a new load); or another
 * negative errno (-ENOMEM, -EINVAL) from the first send refused, which no
 * reconnect will cure. */
int batch_load_start(batch_load *l, const char *trip_key, uint64_t seed);
/* The last step: the ids with a result, page by page; then on_done. */
void batch_load_scan(batch_load *l);
/* Notes a failure (the first one is kept for the log). */
void batch_load_fail(batch_load *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The engine the load built; the load forgets it. */
engine *batch_load_take_engine(batch_load *l);
/* Frees an engine built and not taken. */
void batch_load_clear(batch_load *l);
/* At the worker's end, once its connections are closed (every reply in). */
void batch_load_free(batch_load *l);
/* One P:{B}:meta field into m; unknown fields are the operator's own.
 * 0, or -EINVAL with a message in err. */
int batch_load_meta_field(engine_meta *m, const char *k, const char *v, char *err, size_t errlen);

/* One field of P:{B}:slots into the engine (at load and at every refresh
 * of the worker); a bad one is logged and skipped. */
void batch_load_slot(engine *e, const char *batch, const char *user, const char *value);

#endif
