/* cluster_slots.c -- see cluster_slots.h. */
#include "redis/cluster_slots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numtext.h"

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
    if (!n) return -ENOMEM;
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

/* Strict: the slot and the port are digits only and in range (atoi took
 * "63x" for 63 and a bad port for 0); the host is whatever precedes the
 * last ':' (Redis 7 may leave it empty). Text after the node, if a later
 * Redis adds any, is ignored. */
int cluster_parse_redirect(const char *err, uint16_t *slot, cluster_node *node)
{
    const char *sp = strchr(err, ' ');
    if (!sp) return -EINVAL;
    const char *slot_s = sp + 1, *slot_e = strchr(slot_s, ' ');
    if (!slot_e) return -EINVAL;
    const char *node_s = slot_e + 1, *node_e = strchr(node_s, ' ');
    size_t slot_len = (size_t)(slot_e - slot_s);
    size_t node_len = node_e ? (size_t)(node_e - node_s) : strlen(node_s);
    char num[NUMTEXT_MAX + 1], host[256];
    if (slot_len == 0 || slot_len > NUMTEXT_MAX || node_len == 0 || node_len >= sizeof host) return -EINVAL;
    memcpy(num, slot_s, slot_len);
    num[slot_len] = '\0';
    uint64_t s;
    if (numtext_parse_u64(num, &s) < 0 || s >= CLUSTER_SLOTS) return -EINVAL;
    memcpy(host, node_s, node_len);
    host[node_len] = '\0';
    char *colon = strrchr(host, ':');
    if (!colon) return -EINVAL;
    *colon = '\0';
    uint64_t port;
    if (numtext_parse_u64(colon + 1, &port) < 0 || port == 0 || port > 65535) return -EINVAL;
    *slot = (uint16_t)s;
    snprintf(node->host, sizeof node->host, "%s", host);
    node->port = (int)port;
    return 0;
}
