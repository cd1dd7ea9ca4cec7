/* cluster_slots.c -- see cluster_slots.h. */
#include "redis/cluster_slots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CRC16/XMODEM (polynomial 0x1021, init 0), bitwise: it runs once per batch
 * and per global key, never per request. */
uint16_t cluster_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

uint16_t cluster_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return cluster_crc16(open + 1, (size_t)(close - open - 1)) & (CLUSTER_SLOTS - 1);
    }
    return cluster_crc16(key, len) & (CLUSTER_SLOTS - 1);
}

void cluster_map_init(cluster_map *m)
{
    memset(m, 0, sizeof *m);
    for (size_t i = 0; i < CLUSTER_SLOTS; i++) m->slot_node[i] = -1;
}

void cluster_map_free(cluster_map *m)
{
    free(m->nodes);
    cluster_map_init(m);
}

static int node_index(cluster_map *m, const char *host, int port)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].port == port && !strcmp(m->nodes[i].host, host)) return (int)i;
    cluster_node *n = realloc(m->nodes, (m->n_nodes + 1) * sizeof *n);
    if (!n) return -1;
    m->nodes = n;
    snprintf(n[m->n_nodes].host, sizeof n->host, "%s", host);
    n[m->n_nodes].port = port;
    return (int)m->n_nodes++;
}

int cluster_map_parse(cluster_map *m, const redisReply *r, const char *seed_host)
{
    cluster_map_free(m);
    if (!r || r->type != REDIS_REPLY_ARRAY) return -EINVAL;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) return -EINVAL;
        const redisReply *master = e->element[2];
        if (master->type != REDIS_REPLY_ARRAY || master->elements < 2) return -EINVAL;
        const char *host = master->element[0]->str && *master->element[0]->str
                         ? master->element[0]->str : seed_host;
        int idx = node_index(m, host, (int)master->element[1]->integer);
        if (idx < 0) return -ENOMEM;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        if (lo < 0 || hi >= CLUSTER_SLOTS || lo > hi) return -EINVAL;
        for (long long s = lo; s <= hi; s++) m->slot_node[s] = (int16_t)idx;
    }
    return 0;
}

const cluster_node *cluster_map_node(const cluster_map *m, uint16_t slot)
{
    int idx = m->slot_node[slot & (CLUSTER_SLOTS - 1)];
    return idx < 0 ? NULL : &m->nodes[idx];
}

void cluster_node_target(const cluster_node *n, const redis_target *base, redis_target *out)
{
    *out = *base;
    out->kind = REDIS_TARGET_TCP;
    snprintf(out->host, sizeof out->host, "%s", n->host);
    out->port = n->port;
}

int cluster_parse_redirect(const char *err, uint16_t *slot, cluster_node *node)
{
    char host[256];
    unsigned s;
    int port;
    const char *sp = strchr(err, ' ');
    if (!sp || sscanf(sp + 1, "%u %255[^ ]", &s, host) != 2) return -EINVAL;
    char *colon = strrchr(host, ':');
    if (!colon) return -EINVAL;
    *colon = '\0';
    port = atoi(colon + 1);
    if (s >= CLUSTER_SLOTS || port <= 0) return -EINVAL;
    *slot = (uint16_t)s;
    snprintf(node->host, sizeof node->host, "%s", host);
    node->port = port;
    return 0;
}
