/* cmd_groups.h -- what allocctl shows of groups formed by consent and of
 * swap offers (contract 9.2, 9.3): `batch show B` and the part of
 * `status B --user U` about U's group, invitations and offers. */
#ifndef ALLOCD_CMD_GROUPS_H
#define ALLOCD_CMD_GROUPS_H

#include "allocctl/context.h"

/* `allocctl batch show B`: meta, stats and every group. Exit code. */
int groups_batch_show(ctx *x, const char *batch);
/* Prints U's group, pending invitations and swap offers (to and from U);
 * holder is the caller's HGET of U in P:{B}:holders (nil when U holds
 * nothing). Returns 1 when there was any, 0 when none, -1 on a Redis error. */
int groups_user_status(ctx *x, const char *user, const redisReply *holder);

#endif
