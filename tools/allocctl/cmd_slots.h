/* cmd_slots.h -- `allocctl batch slots` (cmd_slots.c). */
#ifndef ALLOCD_CMD_SLOTS_H
#define ALLOCD_CMD_SLOTS_H

#include "allocctl/context.h"

/* argv[at] is "slots"; returns the exit code. */
int cmd_batch_slots(ctx *x, int argc, char **argv, int at);

#endif
