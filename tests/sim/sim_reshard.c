/* sim_reshard.c -- `redis-cli --cluster reshard` moving one slot, as
 * events of the simulated world (see sim_reshard.h).
 *
 * redis-cli 7.0's clusterManagerMoveSlot: CLUSTER SETSLOT IMPORTING on the
 * target, MIGRATING on the source; then CLUSTER GETKEYSINSLOT and MIGRATE
 * ... KEYS in pipelines of --cluster-pipeline keys (10 by default, drawn
 * 1-10 here) until the slot is empty on the source; then CLUSTER SETSLOT
 * NODE on every master, one after the other. Each round trip takes a
 * moment, now and then a long one (a busy redis-cli host), so the batch's
 * commands land between the steps.
 */
#include "sim/sim_reshard.h"

#include <stdlib.h>

#include "sim/sim.h"

struct sim_reshard {
    simc *c;
    int n;
    int busy;
    int pipeline;
    int order[SIMC_MAX_NODES], told;
    uint64_t done;
};

sim_reshard *sim_reshard_new(simc *c, int n)
{
    sim_reshard *r = calloc(1, sizeof *r);
    if (!r) abort();
    r->c = c;
    r->n = n;
    return r;
}

void sim_reshard_free(sim_reshard *r) { free(r); }
int sim_reshard_busy(const sim_reshard *r) { return r->busy; }
uint64_t sim_reshard_done(const sim_reshard *r) { return r->done; }

static uint64_t step_ns(void)
{
    uint64_t ms = sim_chance(0.1) ? 50 + sim_below(700) : 1 + sim_below(30);
    return ms * 1000000ULL;
}

static void ev_setslot(void *a, void *b, uint64_t x)
{
    sim_reshard *r = a;
    int rc = simc_setslot_node(r->c, r->order[r->told++]);
    if (rc < 0) { sim_fail("sim: reshard: CLUSTER SETSLOT NODE refused by the source, which still holds keys"); return; }
    sim_net_retry_blocked();   /* a client blocked on the slot's key is answered MOVED */
    if (rc == 1) { r->busy = 0; r->done++; return; }
    sim_at(sim_w->now + step_ns() / 4, -1, ev_setslot, r, NULL, 0);
}

static void ev_migrate(void *a, void *b, uint64_t x)
{
    sim_reshard *r = a;
    size_t left = simc_migrate(r->c, (size_t)r->pipeline, sim_server_ms());
    sim_net_retry_blocked();
    if (left) { sim_at(sim_w->now + step_ns(), -1, ev_migrate, r, NULL, 0); return; }
    /* every master is told, in redis-cli's list order: drawn here */
    for (int i = 0; i < r->n; i++) r->order[i] = i;
    for (int i = r->n - 1; i > 0; i--) {
        int j = (int)sim_below((uint64_t)i + 1), t = r->order[i];
        r->order[i] = r->order[j];
        r->order[j] = t;
    }
    r->told = 0;
    /* half the time a while before SETSLOT (the operator's redis-cli
     * between two slots of a larger reshard): the keys are all on the
     * target, clients still sent to the source are answered ASK */
    uint64_t wait_ms = sim_chance(0.5) ? sim_below(1500) : 0;
    sim_at(sim_w->now + step_ns() + wait_ms * 1000000ULL, -1, ev_setslot, r, NULL, 0);
}

int sim_reshard_start(sim_reshard *r, uint16_t slot, int to)
{
    int from = simc_owner(r->c, to, slot);
    if (r->busy || from < 0 || from == to || simc_begin(r->c, slot, from, to, sim_server_ms()) < 0) return -1;
    r->busy = 1;
    r->pipeline = 1 + (int)sim_below(10);
    sim_at(sim_w->now + step_ns(), -1, ev_migrate, r, NULL, 0);
    return 0;
}
