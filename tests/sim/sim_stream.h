/* sim_stream.h -- a Redis stream in the simulator's Redis model
 * (sim_redis.c): its entries, the macro nodes Redis 7.0 packs them into,
 * and its consumer groups.
 *
 * The nodes matter because trimming with `~` (XADD MAXLEN ~, XTRIM MINID ~,
 * and so allocd's LOG_TRIM) removes whole nodes only. Redis closes a node
 * when it holds stream-node-max-entries (100) entries or when its listpack
 * would reach stream-node-max-bytes (4096): the model computes each
 * node's listpack size byte for byte (listpack.c's encodings: integers in
 * 1 to 9 bytes, strings with a 1, 2 or 5 byte header, each element's back
 * length), so it cuts where Redis does. test_sim_model checks the trims
 * against a redis-server.
 *
 * Consumer groups keep their last-delivered id and their pending entries
 * list (per consumer), which is what the archive's LOG_TRIM reads.
 * Times are passed in (ms); nothing here has a clock.
 */
#ifndef ALLOCD_SIM_STREAM_H
#define ALLOCD_SIM_STREAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct xid { uint64_t ms, seq; } xid;

typedef struct xentry {
    xid id;
    char text[48];            /* "<ms>-<seq>" */
    size_t nf;                /* field and value strings */
    char **f;
    size_t *fl;
    uint64_t node;            /* the node it is packed in */
} xentry;

typedef struct xpending {
    xid id;
    char consumer[72];
} xpending;

typedef struct xgroup {
    char name[72];
    xid last;                 /* last-delivered-id */
    xpending *pel;            /* by id */
    size_t npel, cappel;
    char (*consumers)[72];    /* in name order */
    size_t ncons;
} xgroup;

typedef struct xstream xstream;

xstream *xs_new(void);
void xs_free(xstream *s);
xstream *xs_copy(const xstream *s);

size_t xs_len(const xstream *s);
const xentry *xs_at(const xstream *s, size_t i);
xid xs_last_id(const xstream *s);
/* The entry of id, NULL when it is not in the stream. */
const xentry *xs_find(const xstream *s, xid id);

/* XADD with '*': the next id at now_ms, the fields packed into the tail
 * node or a new one. */
const xentry *xs_add(xstream *s, uint64_t now_ms, size_t nf, const char *const *f, const size_t *fl);
/* XADD with an explicit id: NULL when it is not above the last one. */
const xentry *xs_add_id(xstream *s, xid id, size_t nf, const char *const *f, const size_t *fl);
/* XTRIM / XADD's trim: MAXLEN (minid NULL) or MINID, exact or `~`
 * (whole nodes only), at most limit entries (0: no limit). Returns how
 * many entries it removed. */
int64_t xs_trim(xstream *s, uint64_t maxlen, const xid *minid, int approx, int64_t limit);

xgroup *xs_group(xstream *s, const char *name);
/* 0, or -1 when the group exists (BUSYGROUP). */
int xs_group_create(xstream *s, const char *name, xid last);
/* XREADGROUP ... >: up to count (0: all) entries after the group's last
 * delivered one, now pending for consumer; their indices in *out (the
 * caller frees). */
size_t xs_read_new(xstream *s, xgroup *g, const char *consumer, size_t count, size_t **out);
/* XREADGROUP ... <id>: the consumer's pending ids after `after`, at most
 * count (0: all), each delivered once more. */
size_t xs_read_pending(xgroup *g, const char *consumer, xid after, size_t count, xid **out);
/* XACK: 1 when id was pending (and is no more). */
int xs_ack(xgroup *g, xid id);

/* "<ms>-<seq>", "<ms>" (seq 0, or max with max_seq), "-", "+": 0 or -1. */
int xid_parse(const char *p, size_t n, int max_seq, xid *out);
int xid_cmp(xid a, xid b);

#endif
