/* chaos_archive.h -- the archive under the chaos run (make chaos,
 * --archive): a private PostgreSQL, `allocctl archive --follow` killed
 * (SIGKILL) and restarted with every kill of allocd and riding out the
 * run's Redis restarts and outage; at the end one more `archive` and a
 * `reconcile` of every batch, whose differences are violations. */
#ifndef ALLOCD_CHAOS_ARCHIVE_H
#define ALLOCD_CHAOS_ARCHIVE_H

#include <stddef.h>
#include <sys/types.h>

#include "proc/proc.h"

typedef struct chaos_archive {
    proc_pg pg;
    pid_t pid;            /* the following archiver, 0 when none */
    char conf[400];       /* allocctl's config: redis and prefix */
    char log[400];        /* the archivers' output */
    int starts, kills;
} chaos_archive;

/* Starts PostgreSQL and a following archiver against redis_url, writing its
 * config and log into dir. Returns 0 or -1. */
int chaos_archive_start(chaos_archive *a, const char *redis_url, const char *dir);
/* SIGKILL of the archiver and a new one. */
void chaos_archive_kill(chaos_archive *a);
/* Stops the follower, archives to the end and reconciles each batch.
 * Returns the number of batches that failed; the first failure's output
 * (its DIFF lines) goes to msg. */
int chaos_archive_check(chaos_archive *a, const char *const *batches, size_t n, char *msg, size_t len);
void chaos_archive_stop(chaos_archive *a);

#endif
