/* cluster_slots.h -- Redis Cluster key slots and the slot -> node map.
 *
 * A key's slot is CRC16/XMODEM of the key (or of its hash tag, the part
 * between the first '{' and the next '}' when that is not empty) modulo
 * 16384. Every key of batch B carries the tag {B}, so a batch lives in one
 * slot and one node. The map comes from CLUSTER SLOTS; it is only a cache:
 * a MOVED answer means it is stale and must be read again.
 */
#ifndef ALLOCD_CLUSTER_SLOTS_H
#define ALLOCD_CLUSTER_SLOTS_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "base/redis_url.h"

#define CLUSTER_SLOTS 16384

uint16_t cluster_crc16(const char *buf, size_t len);
uint16_t cluster_key_slot(const char *key, size_t len);

typedef struct cluster_node {
    char host[256];
    int port;
} cluster_node;

typedef struct cluster_map {
    cluster_node *nodes;       /* masters, deduplicated */
    size_t n_nodes;
    int16_t slot_node[CLUSTER_SLOTS]; /* index into nodes, -1 = not covered */
} cluster_map;

void cluster_map_init(cluster_map *m);
void cluster_map_free(cluster_map *m);
/* Fills the map from a CLUSTER SLOTS reply. Returns 0 or -EINVAL. An empty
 * host in the reply means "the node you asked": seed_host is used then. */
int cluster_map_parse(cluster_map *m, const redisReply *r, const char *seed_host);
/* The node serving `slot`, or NULL. */
const cluster_node *cluster_map_node(const cluster_map *m, uint16_t slot);
/* A redis_target for a node, keeping user/password of `base`. */
void cluster_node_target(const cluster_node *n, const redis_target *base, redis_target *out);
/* Parses "MOVED 3999 127.0.0.1:6381" / "ASK ..." into slot and node. */
int cluster_parse_redirect(const char *err, uint16_t *slot, cluster_node *node);

#endif
