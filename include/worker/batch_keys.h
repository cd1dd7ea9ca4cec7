/* batch_keys.h -- the Redis key names of one batch, built once.
 *
 * Every key of batch B is `P:{B}:name`: the hash tag {B} puts a whole batch
 * in one Redis Cluster slot, so each script touching it is single-slot.
 * The contract's keys come first; the daemon's internal keys after them
 * (documented in docs/PROTOCOL.md).
 */
#ifndef ALLOCD_BATCH_KEYS_H
#define ALLOCD_BATCH_KEYS_H

#define BATCH_ID_MAX 64
#define BATCH_KEY_MAX 192

typedef struct batch_keys {
    /* contract */
    char meta[BATCH_KEY_MAX], capacity[BATCH_KEY_MAX], attrs[BATCH_KEY_MAX];
    char queue[BATCH_KEY_MAX], ctl[BATCH_KEY_MAX], results[BATCH_KEY_MAX];
    char holders[BATCH_KEY_MAX], free[BATCH_KEY_MAX], stats[BATCH_KEY_MAX];
    char log[BATCH_KEY_MAX], dead[BATCH_KEY_MAX];
    char groups[BATCH_KEY_MAX];        /* rooms: groups formed by consent (9.2) */
    char profiles[BATCH_KEY_MAX];      /* operator: user -> profile JSON (11.2) */
    /* internal */
    char participants[BATCH_KEY_MAX];  /* list of users seen, each once */
    char orders_ended[BATCH_KEY_MAX];  /* order id -> tombstone JSON */
    char internal[BATCH_KEY_MAX];      /* hash: epoch, chunks_applied, admin_state, lottery */
    char early[BATCH_KEY_MAX];         /* early=shuffle: the lottery pool */
    char lease[BATCH_KEY_MAX];         /* owner token of the instance serving it */
    char slots[BATCH_KEY_MAX];         /* operator: user -> selection slot (ms) */
    char waitlist[BATCH_KEY_MAX];      /* request id -> waiting request (records_wait_entry) */
} batch_keys;

/* 1 when b is 1 to 64 characters of [A-Za-z0-9_.-]. */
int batch_id_valid(const char *b);
/* Returns 0, or -EINVAL for a bad batch id or a too-long prefix. */
int batch_keys_init(batch_keys *k, const char *prefix, const char *batch);

#endif
