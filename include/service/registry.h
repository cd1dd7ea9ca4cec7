/* registry.h -- which batches this daemon serves.
 *
 * Polls P:batches (SMEMBERS) every registry_interval_ms on a connection of
 * its own, starts a batch_worker for each new id and stops (drains) the
 * worker of each id that left the set. A batch is never served by two
 * workers of one daemon: a re-added id waits until its old worker is gone.
 */
#ifndef ALLOCD_REGISTRY_H
#define ALLOCD_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/config.h"
#include "core/jsonw.h"
#include "worker/batch_worker.h"
#include "worker/scripts.h"

typedef struct registry registry;
typedef void (*registry_stopped_fn)(registry *r, void *data);

int registry_start(registry **out, uv_loop_t *loop, const allocd_config *cfg,
                   const allocd_scripts *scripts);
/* Stops polling and drains every worker; done is called once all workers
 * and the registry's own handles are closed (then r is freed). */
void registry_stop(registry *r, registry_stopped_fn done, void *data);
/* After registry_stop: abort the workers still draining. */
void registry_abort(registry *r);

size_t registry_batch_count(const registry *r);
/* Rendezvous placement: a batch belongs to the live instance with the
 * highest score (exposed so tools can predict placement). */
uint64_t registry_placement_score(const char *instance, const char *batch);
/* Appends the per-batch Prometheus metrics of every worker. */
void registry_render_metrics(registry *r, jsonw *out);
int registry_redis_ready(const registry *r);
/* The in-memory stats of the worker serving `batch` here, or NULL. */
const batch_worker_stats *registry_worker_stats(registry *r, const char *batch);

#endif
