/* sim_archive.h -- the batch's event log as the simulator keeps it, and
 * the archiver that follows it (allocctl archive's part, played by the
 * simulator).
 *
 * Every entry allocd writes to P:{B}:log is copied here as the model runs
 * the XADD (an observer of the model), so the replay of the whole log
 * (sim_run.c's "the log is the truth") does not depend on what trimming
 * left in Redis. A restart that loses writes cuts the copy back to what
 * the restored log holds.
 *
 * With archive_group configured, the archiver reads the log with the
 * consumer group "archive" (created with MKSTREAM when it first runs,
 * a while into the run), keeps what it read, and acknowledges it a little
 * later -- or never, when it "crashes" between the two, and then reads its
 * pending entries again first, as allocctl archive does. The invariant,
 * checked on every commit: no entry leaves the log (allocd's LOG_TRIM)
 * before the archive acknowledged it.
 */
#ifndef ALLOCD_SIM_ARCHIVE_H
#define ALLOCD_SIM_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/sim_redis.h"

typedef struct sim_archive sim_archive;

typedef struct sima_entry {
    char id[48];
    uint64_t ms, seq;
    size_t nf;
    char **f;
    size_t *fl;
} sima_entry;

/* archiver: 1 when the config names archive_group (the archiver runs). */
sim_archive *sima_new(const char *log_key, const char *group, int archiver);
void sima_free(sim_archive *a);

/* The model wrote an entry to some stream (simr_observer.stream_added). */
void sima_added(sim_archive *a, const char *key, size_t klen, const char *id, size_t nf, const char *const *f,
                const size_t *fl);
size_t sima_count(const sim_archive *a);
const sima_entry *sima_at(const sim_archive *a, size_t i);
/* A restart put back an older copy of the keyspace. */
void sima_restored(sim_archive *a, simr *s);

/* Starts the archiver (events of the world, sim_at) on client c (which
 * it frees); _stop makes its events do nothing (the run's teardown). */
void sima_start(sim_archive *a, simr_client *c);
void sima_stop(sim_archive *a);
/* Every entry trimmed from the log was acknowledged by the archive. */
void sima_check(sim_archive *a, simr *s);

typedef struct sima_counts { uint64_t read, acked, trimmed, crashes; } sima_counts;
const sima_counts *sima_counts_get(const sim_archive *a);

#endif
