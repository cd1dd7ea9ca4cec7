/* cmd_report.h -- `allocctl report` (cmd_report.c). */
#ifndef ALLOCD_CMD_REPORT_H
#define ALLOCD_CMD_REPORT_H

#include "allocctl/context.h"

/* argv[at..] are its arguments; returns the exit code. */
int cmd_report(ctx *x, int argc, char **argv, int at);

#endif
