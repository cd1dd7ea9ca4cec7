/* cmd_status.h -- `allocctl status` and `allocctl wait` (cmd_status.c). */
#ifndef ALLOCD_CMD_STATUS_H
#define ALLOCD_CMD_STATUS_H

#include "allocctl/context.h"

/* argv[at..] are their arguments; each returns the exit code. */
int cmd_status(ctx *x, int argc, char **argv, int at);
int cmd_wait(ctx *x, int argc, char **argv, int at);
/* Waits up to secs (0 = no limit) for id's final result in x's batch (a
 * `waiting` one is not final) and prints it: EX_OK, EX_NOT on timeout. */
int status_wait_final(ctx *x, const char *id, double secs, int raw);
/* --timeout's text (NULL = 30 s) in *secs; EX_USAGE (said) when bad. */
int status_wait_timeout(const ctx *x, const char *timeout, double *secs);

#endif
