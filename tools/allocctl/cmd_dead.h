/* cmd_dead.h -- `allocctl dead` (cmd_dead.c). */
#ifndef ALLOCD_CMD_DEAD_H
#define ALLOCD_CMD_DEAD_H

#include "allocctl/context.h"

/* argv[at..] are its arguments; returns the exit code. */
int cmd_dead(ctx *x, int argc, char **argv, int at);

#endif
