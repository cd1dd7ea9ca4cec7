/* lottery.h -- the opening lottery of early=shuffle, drawn over users
 * (contract 9.1).
 *
 * Before opens_at the worker keeps every early request that is not
 * throttled and tells the lottery whose it is (lottery_add_request, in
 * the order the requests were dequeued) and who was throttled
 * (lottery_mark_throttled). A user holds one ticket from their first kept
 * request on, however many they send. At the opening, lottery_serve_order
 * draws the tickets and lists the kept requests in the order they are to
 * be served: ticket by ticket, each user's requests in the order the user
 * sent them.
 *
 * The draw, exactly (docs/PROTOCOL.md has a replay in Python):
 *   - the seed is 32 bytes, written as 64 lowercase hex digits;
 *   - the generator is SHA-256 in counter mode: block c (c = 0, 1, ...) is
 *     SHA-256(seed bytes || c as 8 bytes big-endian); each block gives four
 *     64-bit draws, its bytes 0-7, 8-15, 16-23, 24-31 read big-endian;
 *   - a number below `bound` is the first draw x with
 *     x >= (2^64 - bound) mod bound, taken mod bound (rejection sampling:
 *     every residue equally likely);
 *   - the tickets, in the order of each user's first kept request, are
 *     shuffled by Fisher-Yates: for i = n-1 down to 1, j = below(i+1),
 *     swap positions i and j;
 *   - with draw_by=points (contract 11.3), the shuffled tickets are then
 *     sorted by each user's points (lottery_set_points; missing = 0),
 *     highest first, stably: equal points keep their shuffled order;
 *   - then the users who were throttled before the opening are moved
 *     behind the others, each part keeping its order.
 * SHA-256 is chosen over a faster generator because anyone can replay it
 * with any language's standard library, and because the seed's commitment
 * is a SHA-256 already.
 *
 * Pure: no I/O, no clock. Strings are copied.
 */
#ifndef ALLOCD_LOTTERY_H
#define ALLOCD_LOTTERY_H

#include <stddef.h>
#include <stdint.h>

#include "core/strmap.h"

#define LOTTERY_SEED_LEN 32
#define LOTTERY_SEED_HEX (2 * LOTTERY_SEED_LEN)

typedef struct lottery_user {
    char *id;
    uint32_t ticket;          /* index into tickets, STRMAP_NONE before a kept request */
    uint8_t throttled;        /* throttled before the opening */
    int64_t points;           /* 11.3: recorded with the draw, 0 = none */
} lottery_user;

typedef struct lottery {
    strmap map;               /* user id -> index into users */
    lottery_user *users;
    size_t n_users, cap_users;
    uint32_t *tickets;        /* user index, in order of first kept request */
    size_t n_tickets, cap_tickets;
    uint32_t *req_ticket;     /* kept request i -> its user's ticket */
    size_t n_reqs, cap_reqs;
} lottery;

void lottery_init(lottery *l, uint64_t hash_seed);
void lottery_free(lottery *l);
/* The next kept request is the user's. 0, -EINVAL (empty user), -ENOMEM. */
int lottery_add_request(lottery *l, const char *user);
/* The user was throttled before the opening: 1 the first time, 0 after,
 * -EINVAL, -ENOMEM. */
int lottery_mark_throttled(lottery *l, const char *user);
/* 11.3: the user's points for a draw by points, recorded now (a later
 * profile edit changes nothing). 0, -EINVAL, -ENOMEM. */
int lottery_set_points(lottery *l, const char *user, int64_t points);
/* The recorded points of a user, 0 when none or unknown. */
int64_t lottery_points_of(const lottery *l, const char *user);
static inline size_t lottery_request_count(const lottery *l) { return l->n_reqs; }
static inline size_t lottery_ticket_count(const lottery *l) { return l->n_tickets; }

/* "<64 lowercase hex digits>" -> 32 bytes. 0 or -EINVAL. */
int lottery_seed_parse(const char *hex, uint8_t seed[LOTTERY_SEED_LEN]);
void lottery_seed_format(const uint8_t seed[LOTTERY_SEED_LEN], char hex[LOTTERY_SEED_HEX + 1]);
/* stats.lottery_commit: the hex SHA-256 of the seed's 64 hex characters. */
void lottery_commit(const char *seed_hex, char hex[LOTTERY_SEED_HEX + 1]);

/* The generator (above). */
typedef struct lottery_rng {
    uint8_t seed[LOTTERY_SEED_LEN];
    uint64_t counter;
    uint8_t block[32];
    unsigned used;            /* draws taken from block (4 = empty) */
} lottery_rng;

void lottery_rng_init(lottery_rng *g, const uint8_t seed[LOTTERY_SEED_LEN]);
uint64_t lottery_rng_next(lottery_rng *g);
/* Uniform in [0, bound), bound >= 1. */
uint64_t lottery_rng_below(lottery_rng *g, uint64_t bound);
/* perm = 0..n-1 shuffled by Fisher-Yates with the generator. */
void lottery_shuffle(uint32_t *perm, size_t n, const uint8_t seed[LOTTERY_SEED_LEN]);

/* The draw: order[k] = user index (into l->users) of the k-th ticket drawn
 * (n_tickets entries). 0 or -ENOMEM. */
int lottery_draw(const lottery *l, const uint8_t seed[LOTTERY_SEED_LEN], uint32_t *order);
/* The same with by_points (11.3): the shuffle, then by points; by_points 0
 * is lottery_draw exactly. */
int lottery_draw_by(const lottery *l, const uint8_t seed[LOTTERY_SEED_LEN], int by_points,
                    uint32_t *order);
/* The kept requests in serving order: serve[k] = the index of the k-th
 * request to serve; draw_pos[i] = 1-based position of request i's ticket
 * in the draw. Both hold n_reqs entries. 0 or -ENOMEM. */
int lottery_serve_order(const lottery *l, const uint8_t seed[LOTTERY_SEED_LEN],
                        uint32_t *serve, uint32_t *draw_pos);
/* lottery_serve_order with by_points (11.3); points (n_reqs entries, may be
 * NULL) gets each request's ticket's recorded points, for its result. */
int lottery_serve_order_by(const lottery *l, const uint8_t seed[LOTTERY_SEED_LEN], int by_points,
                           uint32_t *serve, uint32_t *draw_pos, int64_t *points);

#endif
