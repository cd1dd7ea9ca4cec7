/* giveups.h -- batches an instance gave up because it could not serve them.
 *
 * Placement (registry.c, rendezvous hashing) names one instance per batch;
 * when that instance's worker cannot serve (batch_worker.h: "gave up") the
 * batch must go to another instance, or nobody would serve it. The instance
 * keeps the batches it gave up, each for a cooldown that doubles with every
 * give-up of the same batch (answer_ms, 2x, 4x, ... up to an hour), and
 * publishes them in its heartbeat ("gave_up"); every instance leaves a
 * (instance, batch) pair found here out of the placement of that batch,
 * unless every live instance gave it up, when plain placement decides (so
 * somebody always keeps trying). Times are wall-clock ms, like heartbeats.
 */
#ifndef ALLOCD_GIVEUPS_H
#define ALLOCD_GIVEUPS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "core/jsonw.h"

typedef struct giveup_entry {
    char *instance;           /* NULL: our own */
    char *batch;
    int64_t until_ms;
    int count;                /* own: give-ups of this batch in a row */
} giveup_entry;

typedef struct giveups {
    giveup_entry *own, *peers;
    size_t n_own, n_peers;
} giveups;

void giveups_init(giveups *g);
void giveups_free(giveups *g);
/* We gave batch up at now_ms; base_ms is the first cooldown. Returns the
 * cooldown chosen (ms), or -1 out of memory. */
int64_t giveups_add(giveups *g, const char *batch, int64_t now_ms, int64_t base_ms);
/* Our active give-ups as a JSON array of batch ids. */
void giveups_json(const giveups *g, jsonw *w, int64_t now_ms);
/* Replaces what peers published: call clear, then one add per heartbeat. */
void giveups_peers_clear(giveups *g);
void giveups_peer(giveups *g, const char *instance, json_t *gave_up, int64_t now_ms, int64_t ttl_ms);
/* 1 when `instance` (NULL or self_instance: our own) gave batch up. */
int giveups_excluded(const giveups *g, const char *self_instance, const char *instance,
                     const char *batch, int64_t now_ms);

#endif
