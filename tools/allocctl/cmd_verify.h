/* cmd_verify.h -- `allocctl verify` (cmd_verify.c). */
#ifndef ALLOCD_CMD_VERIFY_H
#define ALLOCD_CMD_VERIFY_H

#include "allocctl/context.h"

/* argv[at..] are its arguments; returns the exit code. */
int cmd_verify(ctx *x, int argc, char **argv, int at);

#endif
