/* lottery_pool.c -- the early=shuffle lottery pool (see lottery_pool.h). */
#include "worker/lottery_pool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/random.h"
#include "core/assert.h"
#include "core/numtext.h"
#include "core/engine_elig.h"
#include "core/vec.h"

static const char *id_of(const void *ctx, uint32_t i) { return ((const lottery_pool *)ctx)->reqs[i].id; }

void lottery_pool_init(lottery_pool *p, uint64_t hash_seed)
{
    memset(p, 0, sizeof *p);
    lottery_init(&p->lot, hash_seed);
    strmap_init(&p->ids, hash_seed ^ 0x5bd1e995ULL, id_of, p);
}

static void pending_free(lottery_pool *p)
{
    for (size_t i = 0; i < p->n_pending; i++) free(p->pending[i]);
    p->n_pending = 0;
}

void lottery_pool_free(lottery_pool *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->reqs[i].raw);
        free(p->reqs[i].id);
    }
    free(p->reqs);
    strmap_free(&p->ids);
    free(p->serve);
    free(p->draw_pos);
    pending_free(p);
    free(p->pending);
    lottery_free(&p->lot);
    memset(p, 0, sizeof *p);
}

static int pending_add(lottery_pool *p, char *entry)
{
    if (!entry || vec_reserve((void **)&p->pending, &p->cap_pending, p->n_pending + 1, sizeof *p->pending) < 0) {
        free(entry);
        return -ENOMEM;
    }
    p->pending[p->n_pending++] = entry;
    return 0;
}

/* A kept request, from a chunk or from the list. */
static int add_request(lottery_pool *p, const char *raw, size_t len, int64_t seq, const char *user,
                       const char *id)
{
    if (vec_reserve((void **)&p->reqs, &p->cap, p->n + 1, sizeof *p->reqs) < 0) return -ENOMEM;
    char *copy = malloc(len + 1), *idc = strdup(id);
    if (!copy || !idc) { free(copy); free(idc); return -ENOMEM; }
    memcpy(copy, raw, len);
    copy[len] = '\0';
    int rc = lottery_add_request(&p->lot, user);
    if (rc < 0) { free(copy); free(idc); return rc; }
    p->reqs[p->n] = (lottery_entry){ .raw = copy, .len = len, .seq = seq, .id = idc };
    /* a pool written before ids were checked may hold one twice: the first stays */
    if (strmap_find(&p->ids, idc) == STRMAP_NONE && strmap_insert(&p->ids, idc, (uint32_t)p->n) < 0) {
        free(copy);
        free(idc);
        return -ENOMEM;   /* the ticket stays: the pool is thrown away with the worker */
    }
    p->n++;
    return 0;
}

void lottery_pool_mark_kept(const lottery_pool *p, chunk *ch)
{
    if (!p->n || ch->kind == CHUNK_POOL) return;
    for (size_t i = 0; i < ch->n_items; i++) {
        chunk_item *it = &ch->items[i];
        if (it->q.outcome != REQUEST_DEAD && it->q.r.id && strmap_find(&p->ids, it->q.r.id) != STRMAP_NONE)
            it->dup = 1;
    }
}

/* Records the points of user's ticket; the user must hold one. */
static int set_points(lottery_pool *p, const char *user, int64_t points)
{
    uint32_t u = strmap_find(&p->lot.map, user);
    if (u == STRMAP_NONE || p->lot.users[u].ticket == STRMAP_NONE) return -EPROTO;
    int rc = lottery_set_points(&p->lot, user, points);
    if (rc == 0) p->points_recorded = 1;
    return rc == -ENOMEM ? rc : rc < 0 ? -EPROTO : 0;
}

int lottery_pool_points_of(const lottery_pool *p, const char *user, int64_t *points)
{
    uint32_t u = p->points_recorded ? strmap_find(&p->lot.map, user) : STRMAP_NONE;
    if (u == STRMAP_NONE || p->lot.users[u].ticket == STRMAP_NONE) return 0;
    *points = lottery_points_of(&p->lot, user);
    return 1;
}

/* "= <points> <user>" (lottery_pool.h). */
static int load_points(lottery_pool *p, const char *s, size_t len)
{
    const char *sp = memchr(s + 2, ' ', len - 2);
    char digits[24], user[ENGINE_ID_MAX * 4 + 1];
    int64_t points;
    if (!sp || sp == s + 2 || (size_t)(sp - s - 2) >= sizeof digits) return -EPROTO;
    size_t ulen = len - (size_t)(sp + 1 - s);
    if (ulen < 1 || ulen >= sizeof user) return -EPROTO;
    memcpy(digits, s + 2, (size_t)(sp - s - 2));
    digits[sp - s - 2] = '\0';
    memcpy(user, sp + 1, ulen);
    user[ulen] = '\0';
    if (numtext_parse_i64(digits, &points) < 0) return -EPROTO;
    return set_points(p, user, points);
}

/* One list entry (lottery_pool.h). The user of a kept request is read
 * back with the request parser, as the chunk read it. */
int lottery_pool_load_entry(lottery_pool *p, const char *s, size_t len)
{
    if (len > 2 && s[0] == '=' && s[1] == ' ') return load_points(p, s, len);
    if (len > 2 && s[0] == '!' && s[1] == ' ') {
        char user[ENGINE_ID_MAX + 1];
        if (len - 2 > ENGINE_ID_MAX) return -EPROTO;
        memcpy(user, s + 2, len - 2);
        user[len - 2] = '\0';
        int rc = lottery_mark_throttled(&p->lot, user);
        return rc < 0 ? rc : 0;
    }
    const char *sp = memchr(s, ' ', len);
    char digits[24];
    int64_t seq;
    if (!sp || sp == s || (size_t)(sp - s) >= sizeof digits) return -EPROTO;
    memcpy(digits, s, (size_t)(sp - s));
    digits[sp - s] = '\0';
    if (numtext_parse_i64(digits, &seq) < 0 || seq < 1) return -EPROTO;
    const char *raw = sp + 1;
    size_t raw_len = len - (size_t)(raw - s);
    request q;
    request_parse(&q, raw, raw_len, raw_len + 1, 0);
    int rc = q.outcome == REQUEST_OK && q.r.user ? add_request(p, raw, raw_len, seq, q.r.user, q.r.id) : -EPROTO;
    request_clear(&q);
    return rc;
}

static int is_str(const redisReply *e)
{
    return e && (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) && e->str;
}

/* Every element is checked before it is used: a wrong shape (an older
 * script, a hand-edited list) must fail the worker, not serve a made-up
 * pool. */
int lottery_pool_from_reply(lottery_pool *p, const redisReply *r, int *done)
{
    *done = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !is_str(r->element[0])) return -EPROTO;
    if (!strcmp(r->element[0]->str, "done")) {
        *done = 1;
        return 0;
    }
    if (strcmp(r->element[0]->str, "pool") || r->elements != 4) return -EPROTO;
    const redisReply *served = r->element[1], *seed = r->element[2], *items = r->element[3];
    if (!served || served->type != REDIS_REPLY_INTEGER || served->integer < 0 || !is_str(seed) ||
        !items || items->type != REDIS_REPLY_ARRAY)
        return -EPROTO;
    uint8_t bytes[LOTTERY_SEED_LEN];
    if (seed->len && lottery_seed_parse(seed->str, bytes) < 0) return -EPROTO;
    snprintf(p->seed, sizeof p->seed, "%s", seed->str);
    for (size_t i = 0; i < items->elements; i++) {
        if (!is_str(items->element[i])) return -EPROTO;
        int rc = lottery_pool_load_entry(p, items->element[i]->str, items->element[i]->len);
        if (rc < 0) return rc;
    }
    if (p->n && !p->seed[0]) return -EPROTO;        /* kept requests are written with the seed */
    p->served = (size_t)served->integer > p->n ? p->n : (size_t)served->integer;
    p->loaded = 1;
    return 0;
}

/* 32 bytes from getrandom (random.h): the seed must not be guessable
 * before it is revealed, or the commitment would mean nothing. */
static void draw_seed(lottery_pool *p)
{
    uint8_t bytes[LOTTERY_SEED_LEN];
    for (int i = 0; i < LOTTERY_SEED_LEN; i += 8) {
        uint64_t v = random_u64();
        memcpy(bytes + i, &v, 8);
    }
    lottery_seed_format(bytes, p->seed);
    p->seed_unsaved = 1;
}

static int keep(lottery_pool *p, const chunk_item *it)
{
    ALLOC_ASSERT(it->raw != NULL);   /* an early chunk keeps every request's bytes */
    if (!p->seed[0]) draw_seed(p);
    int rc = add_request(p, it->raw, it->raw_len, it->seq, it->q.r.user, it->q.r.id);
    if (rc < 0) return rc;
    size_t size = it->raw_len + 32;
    char *entry = malloc(size);
    if (!entry) return -ENOMEM;
    int n = snprintf(entry, size, "%" PRId64 " ", it->seq);
    memcpy(entry + n, it->raw, it->raw_len);
    entry[(size_t)n + it->raw_len] = '\0';
    return pending_add(p, entry);
}

int lottery_pool_take_chunk(lottery_pool *p, const chunk *ch)
{
    ALLOC_ASSERT(p->loaded && !p->active);
    for (size_t i = 0; i < ch->n_items; i++) {
        const chunk_item *it = &ch->items[i];
        if (!chunk_item_answered(it) || it->q.outcome != REQUEST_OK) continue;
        int rc = 0;
        if (it->res.kept) {
            rc = keep(p, it);
        } else if (it->res.status == STATUS_REJECTED && it->res.reason == REASON_THROTTLED) {
            rc = lottery_mark_throttled(&p->lot, it->q.r.user);
            if (rc == 1) {
                size_t size = strlen(it->q.r.user) + 3;
                char *entry = malloc(size);
                if (entry) snprintf(entry, size, "! %s", it->q.r.user);
                rc = pending_add(p, entry);
            }
        }
        if (rc < 0) return rc;
    }
    return 0;
}

/* draw_by=points, the first draw: every ticket's profile points now,
 * recorded in the pool ("= <points> <user>", written with the first pool
 * chunk) so that a takeover and lottery verify draw the same order. */
static int record_points(lottery_pool *p, const engine *e)
{
    for (size_t t = 0; t < p->lot.n_tickets; t++) {
        const char *user = p->lot.users[p->lot.tickets[t]].id;
        int64_t points = engine_profile_int(e, user, "points", 0);
        int rc = set_points(p, user, points);
        size_t size = strlen(user) + 32;
        char *entry = rc == 0 ? malloc(size) : NULL;
        if (entry) snprintf(entry, size, "= %" PRId64 " %s", points, user);
        if (rc < 0 || pending_add(p, entry) < 0) return rc < 0 ? rc : -ENOMEM;
    }
    p->points_recorded = 1;
    return 0;
}

int lottery_pool_draw(lottery_pool *p, const engine *e)
{
    ALLOC_ASSERT(!p->active);
    uint8_t seed[LOTTERY_SEED_LEN] = { 0 };
    if (p->n && lottery_seed_parse(p->seed, seed) < 0) return -EPROTO;
    int by_points = e ? engine_get_meta(e)->draw_by == DRAW_BY_POINTS : p->points_recorded;
    if (by_points && !p->points_recorded) {
        int rc = record_points(p, e);
        if (rc < 0) return rc;
    }
    p->serve = malloc((p->n ? p->n : 1) * sizeof *p->serve);
    p->draw_pos = malloc((p->n ? p->n : 1) * sizeof *p->draw_pos);
    if (!p->serve || !p->draw_pos) return -ENOMEM;
    if (lottery_serve_order_by(&p->lot, seed, by_points, p->serve, p->draw_pos, NULL) < 0) return -ENOMEM;
    p->active = 1;
    return 0;
}

void lottery_pool_at(const lottery_pool *p, size_t j, const char **raw, size_t *len, int64_t *seq,
                     int64_t *draw)
{
    ALLOC_ASSERT(p->active && p->served + j < p->n);
    uint32_t idx = p->serve[p->served + j];
    *raw = p->reqs[idx].raw;
    *len = p->reqs[idx].len;
    *seq = p->reqs[idx].seq;
    *draw = p->draw_pos[idx];
}

int lottery_pool_served(lottery_pool *p, size_t k)
{
    ALLOC_ASSERT(k <= p->n - p->served);
    p->served += k;
    return p->served == p->n;
}

void lottery_pool_pending_clear(lottery_pool *p)
{
    pending_free(p);
    p->seed_unsaved = 0;
}
