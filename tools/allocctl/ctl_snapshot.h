/* ctl_snapshot.h -- the Redis side of a replay (ctl_replay.h), shared by
 * `allocctl verify` and `allocctl reconcile`: a batch's hashes and the
 * ends of its log read in one MULTI, the replay made for the batch's
 * meta, and the replayed state compared with those hashes.
 *
 * One MULTI, because the daemon changes holders, free and the log in one
 * atomic step: read together, the hashes are exactly what replaying the
 * log up to the last entry read must give.
 */
#ifndef ALLOCD_CTL_SNAPSHOT_H
#define ALLOCD_CTL_SNAPSHOT_H

#include <hiredis/hiredis.h>

#include "allocctl/context.h"
#include "allocctl/ctl_replay.h"

/* The elements of a snapshot: HGETALL of meta, capacity, holders, free,
 * stats and waitlist; XLEN; the log's first and last entry (an array of
 * at most one); XINFO STREAM (an error reply when there is no log). */
enum { CTL_SN_META, CTL_SN_CAP, CTL_SN_HOLDERS, CTL_SN_FREE, CTL_SN_STATS, CTL_SN_WAITLIST,
       CTL_SN_XLEN, CTL_SN_FIRST, CTL_SN_LAST, CTL_SN_XINFO, CTL_SN_N };

/* The snapshot of x->batch: the EXEC reply (CTL_SN_N elements), or NULL
 * after printing the Redis error. */
redisReply *ctl_snapshot_read(ctx *x);
/* A replay for the snapshot's batch: a room batch when meta kind is
 * "room", per_user from meta (1 when absent). NULL without memory. */
ctl_replay *ctl_snapshot_replay(const redisReply *sn, ctl_finding_fn fn, void *ud);
/* ctl_replay_finish with the snapshot's hashes. Returns 0, or -1 after
 * printing "out of memory" (then nothing was compared). */
int ctl_snapshot_finish(ctx *x, ctl_replay *rp, const redisReply *sn);

#endif
