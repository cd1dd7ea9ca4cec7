/* cmd_acl.h -- `allocctl acl` (cmd_acl.c). */
#ifndef ALLOCD_CMD_ACL_H
#define ALLOCD_CMD_ACL_H

#include "allocctl/context.h"

/* argv[at..] are its arguments; returns the exit code. */
int cmd_acl(ctx *x, int argc, char **argv, int at);

#endif
