/* lottery.c -- the opening lottery over users (see lottery.h for the
 * exact draw, which docs/PROTOCOL.md repeats for anyone replaying it). */
#include "core/lottery.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "core/sha256.h"
#include "core/vec.h"

static const char *user_key(const void *ctx, uint32_t i)
{
    return ((const lottery *)ctx)->users[i].id;
}

void lottery_init(lottery *l, uint64_t hash_seed)
{
    memset(l, 0, sizeof *l);
    strmap_init(&l->map, hash_seed, user_key, l);
}

void lottery_free(lottery *l)
{
    for (size_t i = 0; i < l->n_users; i++) free(l->users[i].id);
    free(l->users);
    free(l->tickets);
    free(l->req_ticket);
    strmap_free(&l->map);
    memset(l, 0, sizeof *l);
}

/* The user's record, made on first sight. STRMAP_NONE when out of memory. */
static uint32_t user_get(lottery *l, const char *id)
{
    uint32_t h = strmap_hash32(&l->map, id);
    uint32_t u = strmap_find_hashed(&l->map, id, h);
    if (u != STRMAP_NONE) return u;
    if (l->n_users >= STRMAP_NONE - 1 || vec_reserve((void **)&l->users, &l->cap_users, l->n_users + 1, sizeof *l->users) < 0)
        return STRMAP_NONE;
    char *copy = strdup(id);
    if (!copy) return STRMAP_NONE;
    u = (uint32_t)l->n_users;
    l->users[u] = (lottery_user){ .id = copy, .ticket = STRMAP_NONE };
    if (strmap_insert_hashed(&l->map, copy, u, h) < 0) { free(copy); return STRMAP_NONE; }
    l->n_users++;
    return u;
}

int lottery_add_request(lottery *l, const char *user)
{
    if (!user || !*user) return -EINVAL;
    if (vec_reserve((void **)&l->req_ticket, &l->cap_reqs, l->n_reqs + 1, sizeof *l->req_ticket) < 0 ||
        vec_reserve((void **)&l->tickets, &l->cap_tickets, l->n_tickets + 1, sizeof *l->tickets) < 0)
        return -ENOMEM;
    uint32_t u = user_get(l, user);
    if (u == STRMAP_NONE) return -ENOMEM;
    lottery_user *lu = &l->users[u];
    if (lu->ticket == STRMAP_NONE) {
        lu->ticket = (uint32_t)l->n_tickets;
        l->tickets[l->n_tickets++] = u;
    }
    l->req_ticket[l->n_reqs++] = lu->ticket;
    return 0;
}

int lottery_mark_throttled(lottery *l, const char *user)
{
    if (!user || !*user) return -EINVAL;
    uint32_t u = user_get(l, user);
    if (u == STRMAP_NONE) return -ENOMEM;
    if (l->users[u].throttled) return 0;
    l->users[u].throttled = 1;
    return 1;
}

int lottery_set_points(lottery *l, const char *user, int64_t points)
{
    if (!user || !*user) return -EINVAL;
    uint32_t u = user_get(l, user);
    if (u == STRMAP_NONE) return -ENOMEM;
    l->users[u].points = points;
    return 0;
}

int64_t lottery_points_of(const lottery *l, const char *user)
{
    uint32_t u = user ? strmap_find(&l->map, user) : STRMAP_NONE;
    return u == STRMAP_NONE ? 0 : l->users[u].points;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int lottery_seed_parse(const char *hex, uint8_t seed[LOTTERY_SEED_LEN])
{
    if (!hex || strlen(hex) != LOTTERY_SEED_HEX) return -EINVAL;
    for (int i = 0; i < LOTTERY_SEED_LEN; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return -EINVAL;
        seed[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

void lottery_seed_format(const uint8_t seed[LOTTERY_SEED_LEN], char hex[LOTTERY_SEED_HEX + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < LOTTERY_SEED_LEN; i++) {
        hex[2 * i] = digits[seed[i] >> 4];
        hex[2 * i + 1] = digits[seed[i] & 15];
    }
    hex[LOTTERY_SEED_HEX] = '\0';
}

void lottery_commit(const char *seed_hex, char hex[LOTTERY_SEED_HEX + 1])
{
    sha256_hex(seed_hex, strlen(seed_hex), hex);
}

/* ---------------------------------------------------------------- generator */

void lottery_rng_init(lottery_rng *g, const uint8_t seed[LOTTERY_SEED_LEN])
{
    memcpy(g->seed, seed, LOTTERY_SEED_LEN);
    g->counter = 0;
    g->used = 4;
}

uint64_t lottery_rng_next(lottery_rng *g)
{
    if (g->used == 4) {
        uint8_t in[LOTTERY_SEED_LEN + 8];
        memcpy(in, g->seed, LOTTERY_SEED_LEN);
        for (int i = 0; i < 8; i++) in[LOTTERY_SEED_LEN + i] = (uint8_t)(g->counter >> (56 - 8 * i));
        sha256(in, sizeof in, g->block);
        g->counter++;
        g->used = 0;
    }
    const uint8_t *p = g->block + 8 * g->used++;
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x = x << 8 | p[i];
    return x;
}

uint64_t lottery_rng_below(lottery_rng *g, uint64_t bound)
{
    ALLOC_ASSERT(bound >= 1);
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t x = lottery_rng_next(g);
        if (x >= threshold) return x % bound;
    }
}

void lottery_shuffle(uint32_t *perm, size_t n, const uint8_t seed[LOTTERY_SEED_LEN])
{
    lottery_rng g;
    lottery_rng_init(&g, seed);
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)lottery_rng_below(&g, i);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

/* ---------------------------------------------------------------- the draw */

/* 11.3: a stable merge sort of the shuffled tickets by points, highest
 * first: equal points keep their shuffled order. tmp holds n entries. */
static void sort_by_points(const lottery *l, uint32_t *perm, uint32_t *tmp, size_t n)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int64_t a = l->users[l->tickets[perm[i]]].points;
                int64_t b = l->users[l->tickets[perm[j]]].points;
                tmp[k++] = b > a ? perm[j++] : perm[i++];
            }
            while (i < mid) tmp[k++] = perm[i++];
            while (j < hi) tmp[k++] = perm[j++];
        }
        memcpy(perm, tmp, n * sizeof *perm);
    }
}

int lottery_draw(const lottery *l, const uint8_t seed[LOTTERY_SEED_LEN], uint32_t *order)
{
    return lottery_draw_by(l, seed, 0, order);
}

int lottery_draw_by(const lottery *l, const uint8_t seed[LOTTERY_SEED_LEN], int by_points,
                    uint32_t *order)
{
    size_t n = l->n_tickets;
    uint32_t *perm = malloc((n ? n : 1) * sizeof *perm);
    uint32_t *tmp = by_points ? malloc((n ? n : 1) * sizeof *tmp) : NULL;
    if (!perm || (by_points && !tmp)) {
        free(perm);
        free(tmp);
        return -ENOMEM;
    }
    lottery_shuffle(perm, n, seed);
    if (by_points) sort_by_points(l, perm, tmp, n);
    free(tmp);
    /* stable partition: the throttled behind the others */
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            uint32_t u = l->tickets[perm[i]];
            if (l->users[u].throttled == pass) order[k++] = u;
        }
    ALLOC_ASSERT(k == n);
    free(perm);
    return 0;
}

/* A counting sort of the requests by their ticket's position: stable, so
 * each user's requests keep the order the user sent them in. */
int lottery_serve_order(const lottery *l, const uint8_t seed[LOTTERY_SEED_LEN],
                        uint32_t *serve, uint32_t *draw_pos)
{
    return lottery_serve_order_by(l, seed, 0, serve, draw_pos, NULL);
}

int lottery_serve_order_by(const lottery *l, const uint8_t seed[LOTTERY_SEED_LEN], int by_points,
                           uint32_t *serve, uint32_t *draw_pos, int64_t *points)
{
    size_t n = l->n_tickets;
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    uint32_t *pos = malloc((n ? n : 1) * sizeof *pos);       /* ticket -> position */
    size_t *start = calloc(n + 1, sizeof *start);
    int rc = -ENOMEM;
    if (!order || !pos || !start || lottery_draw_by(l, seed, by_points, order) < 0) goto out;
    for (size_t k = 0; k < n; k++) pos[l->users[order[k]].ticket] = (uint32_t)k;
    for (size_t i = 0; i < l->n_reqs; i++) start[pos[l->req_ticket[i]] + 1]++;
    for (size_t k = 0; k < n; k++) start[k + 1] += start[k];
    for (size_t i = 0; i < l->n_reqs; i++) {
        uint32_t p = pos[l->req_ticket[i]];
        serve[start[p]++] = (uint32_t)i;
        draw_pos[i] = p + 1;
        if (points) points[i] = l->users[order[p]].points;
    }
    rc = 0;
out:
    free(order);
    free(pos);
    free(start);
    return rc;
}
