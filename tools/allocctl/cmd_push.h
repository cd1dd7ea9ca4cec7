/* cmd_push.h -- `allocctl push` (cmd_push.c). */
#ifndef ALLOCD_CMD_PUSH_H
#define ALLOCD_CMD_PUSH_H

#include "allocctl/context.h"

/* argv[at..] are its arguments; returns the exit code. */
int cmd_push(ctx *x, int argc, char **argv, int at);

#endif
