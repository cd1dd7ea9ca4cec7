/* cmd_profiles.h -- `allocctl profiles load|show` (cmd_profiles.c). */
#ifndef ALLOCD_CMD_PROFILES_H
#define ALLOCD_CMD_PROFILES_H

#include "allocctl/context.h"

/* argv[at] is the subcommand; returns the exit code. */
int cmd_profiles(ctx *x, int argc, char **argv, int at);

#endif
