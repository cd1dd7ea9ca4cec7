/* chunk.h -- a chunk of requests, and the ring of chunks in flight.
 *
 * A chunk is the unit of a batch worker's work: the requests one take
 * brought (from the head of the queue, of ctl, or from the lottery pool),
 * deduplicated together, decided at one `now` (worker/decide.h) and
 * written in one transaction (worker/apply_txn.h). Each item carries what
 * every step learns about its request -- the parse, its seq, the dedup
 * marks, the engine's result -- so that the steps hand the chunk on instead
 * of talking to each other.
 *
 * Up to CHUNK_RING_MAX chunks are in flight, oldest first, in a fixed ring
 * (docs/DESIGN.md, "Overlap"). The item arrays are kept when a chunk is
 * dropped, so a worker in its stride allocates nothing per chunk but the
 * requests' own parse.
 */
#ifndef ALLOCD_CHUNK_H
#define ALLOCD_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "wire/request.h"

typedef enum {
    CHUNK_NONE = 0,      /* no requests: expiries, phase change, first write */
    CHUNK_QUEUE,         /* from the head of P:{B}:queue */
    CHUNK_CTL,           /* from the head of P:{B}:ctl */
    CHUNK_POOL           /* from the early=shuffle lottery pool */
} chunk_kind;

/* One request of a chunk. */
typedef struct chunk_item {
    request q;                /* must not move between parse and clear */
    int64_t seq;
    int dup;                  /* its id already has a result: not decided */
    int asked;                /* its id was in the dedup HMGET */
    uint64_t id_hash;         /* keyed hash of the id (dedup, idfilter) */
    char *raw;                /* copy of the bytes, only for dead entries
                                 and the requests of an early chunk */
    size_t raw_len;
    int64_t draw;             /* lottery pool: its user's position in the draw */
    /* What the engine answered (decide_chunk). Only meaningful when the
     * item has a result (chunk_item_answered) and q.outcome is REQUEST_OK;
     * pointers in it live as long as the engine. */
    engine_result res;
} chunk_item;

/* A chunk goes TAKING -> DEDUP -> DEDUPED -> APPLYING -> DONE. A DONE chunk
 * (its apply confirmed) is kept until no dedup is out: see dedup.h. */
typedef enum { CS_FREE = 0, CS_TAKING, CS_DEDUP, CS_DEDUPED, CS_APPLYING, CS_DONE } chunk_state;

typedef struct chunk {
    chunk_state state;
    chunk_kind kind;
    chunk_item *items;
    size_t n_items, cap_items;
    long asked;               /* LRANGE count of the take */
    int asked_queue;          /* the take read the queue too, not only ctl */
    long queue_len, ctl_len;  /* entries this chunk removes from queue / ctl */
    size_t pool_len;          /* lottery pool requests in it */
    int64_t seq_base;         /* seq of its first queue entry, minus one */
    int dead_lettering;       /* its first request goes to dead (poison) */
    int early;                /* taken before opens_at with early=shuffle: decided
                                 before the opening, its kept requests go to the
                                 lottery pool (their bytes are kept) */
    uint64_t taken_at, apply_sent_at;      /* uv_hrtime() of its steps */
    uint64_t status[STATUS_INVALID + 1];       /* counted into stats once applied */
    uint64_t rejects[REASON_LAST + 1];
} chunk;

/* Frees the chunk's requests and zeroes it, keeping its item array. */
void chunk_clear(chunk *ch);
/* Room for n items. 0 or -ENOMEM. */
int chunk_reserve(chunk *ch, size_t n);
/* Parses raw[0..len) as the next item (room must be reserved), with the
 * ctl grammar for a CHUNK_CTL chunk. A non-NULL dead_reason sends it to
 * dead whatever it holds (poison isolation; marks ch->dead_lettering).
 * 0, or -ENOMEM when a dead entry's bytes could not be copied. */
int chunk_add(chunk *ch, const char *raw, size_t len, int64_t seq,
              size_t max_bytes, const char *dead_reason);
/* The item gets a result: it is neither dead nor a duplicate. */
static inline int chunk_item_answered(const chunk_item *it)
{
    return it->q.outcome != REQUEST_DEAD && !it->dup;
}
/* Counts one result into the chunk's status and reject tallies. */
void chunk_count_result(chunk *ch, engine_status st, engine_reason reason);
/* Order ids the chunk's own requests may take: one per buy, and one per
 * bed a choose, auto or group may grant (held beds, contract 9.4): a
 * group's `members`, or group_ids when not 0 (a formed group, 9.2, whose
 * members the request does not name: the batch's max_group). */
size_t chunk_buys(const chunk *ch, size_t group_ids);
/* 1 when a request of the chunk has this id. */
int chunk_has_id(const chunk *ch, const char *id);

#define CHUNK_RING_MAX 6

typedef struct chunk_ring {
    chunk slots[CHUNK_RING_MAX];
    size_t head, n;
} chunk_ring;

/* The i-th chunk in flight, 0 = oldest. */
chunk *chunk_ring_at(chunk_ring *r, size_t i);
chunk *chunk_ring_newest(chunk_ring *r);       /* NULL when empty */
/* A cleared chunk of that kind at the new end; NULL when the ring is full. */
chunk *chunk_ring_push(chunk_ring *r, chunk_kind kind);
void chunk_ring_pop_newest(chunk_ring *r);
void chunk_ring_pop_oldest(chunk_ring *r);
/* Pops the DONE chunks at the head. */
void chunk_ring_pop_done(chunk_ring *r);
/* Drops every chunk (after a failure) and starts the ring at slot 0. */
void chunk_ring_clear(chunk_ring *r);
/* chunk_ring_clear, and the item arrays too. */
void chunk_ring_free(chunk_ring *r);
/* Chunks in flight, not counting the DONE ones kept for dedup. */
size_t chunk_ring_busy(chunk_ring *r);
/* Requests in the chunks that are not DONE. */
long chunk_ring_requests(chunk_ring *r);
/* Items in every chunk of the ring, DONE ones included. */
size_t chunk_ring_items(chunk_ring *r);

#endif
