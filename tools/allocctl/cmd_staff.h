/* cmd_staff.h -- `allocctl assign` and `allocctl unassign`, the staff
 * placements of contract 11.5 (cmd_staff.c). */
#ifndef ALLOCD_CMD_STAFF_H
#define ALLOCD_CMD_STAFF_H

#include "allocctl/context.h"

/* argv[at..] are their arguments; each returns the exit code. */
int cmd_assign(ctx *x, int argc, char **argv, int at);
int cmd_unassign(ctx *x, int argc, char **argv, int at);

#endif
