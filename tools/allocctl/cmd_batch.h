/* cmd_batch.h -- `allocctl batch create|list|rm` (cmd_batch.c). */
#ifndef ALLOCD_CMD_BATCH_H
#define ALLOCD_CMD_BATCH_H

#include "allocctl/context.h"

/* argv[at] is the subcommand; returns the exit code. */
int cmd_batch(ctx *x, int argc, char **argv, int at);

#endif
