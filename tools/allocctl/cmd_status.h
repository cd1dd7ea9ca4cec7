/* cmd_status.h -- `allocctl status` and `allocctl wait` (cmd_status.c). */
#ifndef ALLOCD_CMD_STATUS_H
#define ALLOCD_CMD_STATUS_H

#include "allocctl/context.h"

/* argv[at..] are their arguments; each returns the exit code. */
int cmd_status(ctx *x, int argc, char **argv, int at);
int cmd_wait(ctx *x, int argc, char **argv, int at);

#endif
