/* cmd_lottery.h -- `allocctl lottery verify` (cmd_lottery.c). */
#ifndef ALLOCD_CMD_LOTTERY_H
#define ALLOCD_CMD_LOTTERY_H

#include "allocctl/context.h"
#include "worker/lottery_verify.h"

/* argv[at..] are its arguments; returns the exit code. */
int cmd_lottery(ctx *x, int argc, char **argv, int at);
/* `lottery verify B` itself (x connected or not): EX_OK on MATCH, EX_NOT on
 * a mismatch or no lottery, EX_REDIS. Prints what the command prints; with
 * quiet set, prints nothing and hands each difference to it (report). */
int lottery_verify_batch(ctx *x, const char *b, lottery_diff_fn quiet, void *ud);

#endif
