/* cmd_lottery.h -- `allocctl lottery verify` (cmd_lottery.c). */
#ifndef ALLOCD_CMD_LOTTERY_H
#define ALLOCD_CMD_LOTTERY_H

#include "allocctl/context.h"

/* argv[at..] are its arguments; returns the exit code. */
int cmd_lottery(ctx *x, int argc, char **argv, int at);

#endif
