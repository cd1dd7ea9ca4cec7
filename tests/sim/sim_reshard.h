/* sim_reshard.h -- the operator moving a slot between cluster masters
 * mid-run, step by step as redis-cli --cluster reshard does
 * (sim_reshard.c), over the model's cluster (sim_cluster.h).
 */
#ifndef ALLOCD_SIM_RESHARD_H
#define ALLOCD_SIM_RESHARD_H

#include <stdint.h>

#include "sim/sim_cluster.h"

typedef struct sim_reshard sim_reshard;

sim_reshard *sim_reshard_new(simc *c, int nodes);
void sim_reshard_free(sim_reshard *r);
/* Moves slot to node `to` from its owner: 0, or -1 when a move is under
 * way or `to` owns it already. */
int sim_reshard_start(sim_reshard *r, uint16_t slot, int to);
int sim_reshard_busy(const sim_reshard *r);
uint64_t sim_reshard_done(const sim_reshard *r);   /* moves finished */

#endif
