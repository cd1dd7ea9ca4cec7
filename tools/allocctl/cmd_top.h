/* cmd_top.h -- `allocctl top` (cmd_top.c). */
#ifndef ALLOCD_CMD_TOP_H
#define ALLOCD_CMD_TOP_H

#include "allocctl/context.h"

/* argv[at..] are its arguments; returns the exit code. */
int cmd_top(ctx *x, int argc, char **argv, int at);

#endif
