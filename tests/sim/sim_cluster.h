/* sim_cluster.h -- Redis Cluster in the Redis model: masters owning slot
 * ranges, each with its own view of who owns what, and a slot migrating
 * between two of them as `redis-cli --cluster reshard` moves it.
 *
 * The nodes share one keyspace (one simr): every key lives in exactly one
 * place, and what sim_cluster.c decides is which node may serve it -- the
 * redirections of Redis 7.0's getNodeByQuery (MOVED, ASK, TRYAGAIN,
 * CROSSSLOT, CLUSTERDOWN) and CLUSTER SLOTS from the asked node's view.
 * So the simulator's checks, the producers and the archiver read and write
 * the keyspace as before, while allocd's connections see a cluster. During
 * a migration a key of the slot is on the source until MIGRATE moves it;
 * a key the source no longer has can only be created on the target (the
 * source answers ASK for it), which is how a key's side is known.
 */
#ifndef ALLOCD_SIM_CLUSTER_H
#define ALLOCD_SIM_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "sim/sim_redis.h"

#define SIMC_MAX_NODES 4
#define SIMC_SLOTS 16384

typedef struct simc simc;

typedef struct simc_counts {
    uint64_t moved, ask, tryagain, crossslot, down;   /* redirections and refusals answered */
    uint64_t asking_served;   /* commands the importing node served after ASKING */
    uint64_t migrated;        /* keys MIGRATE moved */
    uint64_t slots_moved;     /* migrations finalised (SETSLOT NODE on every node) */
} simc_counts;

/* n masters at host:ports[i], with the slots split in n ranges as
 * redis-cli --cluster create does; installs the route hook on s. */
simc *simc_new(simr *s, int n, const char *host, const int *ports);
void simc_free(simc *c);
int simc_port(const simc *c, int node);
/* Redis's key slot: CRC16 (XMODEM) of the key, or of the first non-empty
 * {tag}, modulo 16384. */
uint16_t simc_key_slot(const char *key, size_t len);
/* Who owns slot, in node's view. */
int simc_owner(const simc *c, int node, uint16_t slot);

/* A migration, in redis-cli's steps: CLUSTER SETSLOT IMPORTING on the
 * target, MIGRATING on the source (simc_begin; -1 if one is under way or
 * from does not own the slot); MIGRATE of up to max keys of the slot
 * (simc_migrate: the keys left on the source after it); CLUSTER SETSLOT
 * NODE on one node (simc_setslot_node: 1 once every node has it, the
 * migration over). */
int simc_begin(simc *c, uint16_t slot, int from, int to, int64_t now_ms);
size_t simc_migrate(simc *c, size_t max, int64_t now_ms);
/* MIGRATE of that one key (test_sim_model): 0, or -1 if the source has
 * no such key. */
int simc_migrate_key(simc *c, const char *key, size_t len, int64_t now_ms);
int simc_setslot_node(simc *c, int node);
int simc_migrating(const simc *c);
/* A key of the migrating slot that no longer exists on the source is
 * forgotten there (a later write creates it on the target): called
 * before a write that bypasses the nodes (the producers'). */
void simc_forget_missing(simc *c, int64_t now_ms);
const simc_counts *simc_counts_get(const simc *c);
void simc_counts_add(simc_counts *sum, const simc_counts *k);

#endif
