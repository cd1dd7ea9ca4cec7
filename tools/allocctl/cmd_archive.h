/* cmd_archive.h -- the archive commands (docs/ARCHIVE.md): `allocctl
 * archive` (log and results into PostgreSQL through a Redis consumer
 * group), `reconcile`, `export` and `purge`. */
#ifndef ALLOCD_CTL_CMD_ARCHIVE_H
#define ALLOCD_CTL_CMD_ARCHIVE_H

#include "allocctl/context.h"

/* Exit code of the archive commands when PostgreSQL fails (docs/ALLOCCTL.md). */
#define EX_DB 5
/* The consumer group and consumer name when neither the config
 * (archive_group) nor --group / --consumer names one. */
#define ARCHIVE_GROUP_DEFAULT "archive"
#define ARCHIVE_CONSUMER_DEFAULT "archiver"

int cmd_archive(ctx *x, int argc, char **argv, int at);
int cmd_reconcile(ctx *x, int argc, char **argv, int at);
int cmd_export(ctx *x, int argc, char **argv, int at);
int cmd_purge(ctx *x, int argc, char **argv, int at);

#endif
