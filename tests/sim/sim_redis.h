/* sim_redis.h -- an in-process model of the Redis server allocd talks to.
 *
 * The deterministic simulator (tests/sim/sim.c) runs the real worker
 * against this model instead of a redis-server: exactly the commands allocd
 * sends (strings with PX/NX leases, hashes, lists with BLMOVE, sets,
 * streams, MULTI/EXEC/WATCH) and its Lua scripts as their effects (a script
 * is recognised by its source, which is the one in worker/scripts.c, so a
 * changed script is noticed: it answers "ERR sim: unknown script").
 * test_sim_model runs the same command sequences against a real
 * redis-server and this model and compares the replies.
 *
 * Time is passed in (ms), like the core: the model has no clock. Replies
 * are hiredis redisReply trees (freeReplyObject frees them). A snapshot is
 * a deep copy of the keyspace, for restarts that lose the last writes.
 */
#ifndef ALLOCD_SIM_REDIS_H
#define ALLOCD_SIM_REDIS_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

typedef struct simr simr;
typedef struct simr_client simr_client;
typedef struct simr_db simr_db;

/* What a transaction did, for the simulator's invariant checks: called
 * before a committed EXEC runs its commands and after. */
typedef struct simr_observer {
    void (*exec_pre)(void *ud, simr *s, simr_client *c, int ncmds, int *argc, char ***argv, size_t **lens);
    void (*exec_post)(void *ud, simr *s, simr_client *c);
    void *ud;
    /* WAIT answered with every replica in sync: they hold all writes so
     * far (a failover now loses none of them). May be NULL. */
    void (*replicas_synced)(void *ud, simr *s);
    /* XADD wrote entry id to stream key (its field/value strings). May
     * be NULL. */
    void (*stream_added)(void *ud, const char *key, size_t klen, const char *id, size_t nf,
                         const char *const *f, const size_t *fl);
} simr_observer;

/* Replicas WAIT counts (0, as a lone redis-server, by default). */
void simr_set_replicas(simr *s, int n);
/* Out of memory (maxmemory reached, noeviction) or not: denyoom commands
 * are refused with -OOM, a transaction queues nothing, an EXEC of denyoom
 * commands is aborted, a script without allow-oom is refused at its first
 * denyoom call before any write (Redis 7.0). */
void simr_set_oom(simr *s, int oom);
/* A master demoted to a replica (replica-read-only yes, Redis 7.0
 * processCommand): a write command is refused with -READONLY, in a
 * transaction too (EXEC then answers -EXECABORT), and a script's first
 * write call is refused with it. */
void simr_set_readonly(simr *s, int ro);

/* Redis Cluster (sim_cluster.c): before a command of a client connected
 * to cluster node `node` runs -- or a transaction's queue at EXEC (ncmds
 * commands), or a blocked command retried -- the hook answers NULL to
 * serve it here, else the reply (a redirection, CROSSSLOT, TRYAGAIN, or
 * CLUSTER SLOTS's answer). asking: the client sent ASKING before it. */
typedef redisReply *(*simr_route_fn)(void *ud, int node, int asking, int ncmds, const int *argc,
                                     const char *const *const *argv, const size_t *const *lens, int64_t now_ms);
void simr_set_route(simr *s, simr_route_fn fn, void *ud);
void simr_client_set_node(simr_client *c, int node);
int simr_client_node(const simr_client *c);
/* The key exists (an expired one is deleted on the way, as a lookup does). */
int simr_exists(simr *s, const char *key, size_t len, int64_t now_ms);
/* WATCH sees the key changed (a MIGRATE moved it away). */
void simr_touch(simr *s, const char *key, size_t len);
/* Every key, in insertion order (fn must not change the keyspace). */
void simr_keys_each(simr *s, void (*fn)(void *ud, const char *k, size_t kn), void *ud);

/* Reply trees as the model builds them (for sim_cluster.c's answers). */
redisReply *simr_reply_str(int type, const char *s);   /* STRING, STATUS or ERROR */
redisReply *simr_reply_int(long long v);
redisReply *simr_reply_arr(size_t n);                  /* n elements, NULL until set */

simr *simr_new(void);
void simr_free(simr *s);
void simr_set_observer(simr *s, const simr_observer *o);

simr_client *simr_client_new(simr *s);
/* The connection dropped: MULTI, WATCH and a blocked command are gone. */
void simr_client_reset(simr_client *c);
void simr_client_free(simr_client *c);
/* The FENCE token and epoch of the transaction being built (NULL when
 * none ran since the last EXEC). */
const char *simr_client_fence_token(const simr_client *c);
const char *simr_client_fence_epoch(const simr_client *c);

/* Runs one command. Returns the reply, or NULL when the command blocks
 * (BLMOVE on an empty list): simr_retry_blocked() runs it again. */
redisReply *simr_exec(simr *s, simr_client *c, int argc, const char **argv,
                      const size_t *lens, int64_t now_ms);
/* A blocked command of c, run again: its reply, or NULL while still blocked. */
redisReply *simr_retry_blocked(simr *s, simr_client *c, int64_t now_ms);
int simr_client_blocked(const simr_client *c);
/* The blocked command timed out: the nil reply. */
redisReply *simr_block_timeout(simr_client *c);

/* Snapshots: the keyspace now, and putting one back (a restart). The
 * script cache is emptied on restore, like a restarted server's. */
simr_db *simr_snapshot(simr *s);
void simr_restore(simr *s, const simr_db *d);
void simr_db_free(simr_db *d);
void simr_flush_scripts(simr *s);

/* Read access for the checker (no expiry applied, no version bumped). */
const char *simr_get_str(simr *s, const char *key, size_t *len, int64_t now_ms);
const char *simr_hget(simr *s, const char *key, const char *field, size_t *len);
size_t simr_llen(simr *s, const char *key);
size_t simr_hlen(simr *s, const char *key);
const char *simr_lindex(simr *s, const char *key, size_t i, size_t *len);
/* Hash fields in order; returns the number, fills up to max. */
typedef void (*simr_pair_fn)(void *ud, const char *k, size_t klen, const char *v, size_t vlen);
void simr_hash_each(simr *s, const char *key, simr_pair_fn fn, void *ud);
/* Stream entries in order: id, then field/value pairs. */
typedef void (*simr_entry_fn)(void *ud, const char *id, size_t nf, const char *const *f,
                              const size_t *flen);
void simr_stream_each(simr *s, const char *key, simr_entry_fn fn, void *ud);
uint64_t simr_commands(const simr *s);
/* A stream's first and last ids (the last one generated: it stays when
 * the entries are trimmed) and length; -1 when key is no stream. Any
 * pointer may be NULL. */
int simr_stream_bounds(simr *s, const char *key, uint64_t *first_ms, uint64_t *first_seq, uint64_t *last_ms,
                       uint64_t *last_seq, size_t *len);

#endif
