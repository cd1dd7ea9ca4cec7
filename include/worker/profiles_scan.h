/* profiles_scan.h -- the users' profiles (contract 11.2) read into the
 * engine: with the batch at load (batch_load.c), and again while it is
 * served, so that an operator's edit holds within a second.
 *
 * P:{B}:profiles is a per-user hash of the operator's like P:{B}:slots, so
 * the worker reads it like it (worker/slots_scan.h): HSCAN pages of
 * SLOTS_SCAN_COUNT fields, when a WATCH says it was written
 * (worker/profiles_watch.h) or, without one, every SLOTS_SCAN_EVERY_MS; a
 * take (and the opening draw, which reads `points`) held back while the
 * profiles are older than the interval and its grace. A profile
 * stands alone, so the pages go in as they come (a streamed target): a
 * read holds no copy of the hash. This module is what a read installs.
 * Each read is compared with the one before by a hash of each value, kept
 * by the engine's number for the user (core/engine_elig.h), so only what
 * changed goes through the profile reader (wire/profile.h) into the
 * engine, users gone from the hash lose their profile, and a read of
 * 100,000 unchanged profiles costs a map lookup each and no parse.
 *
 * A value that is not a profile counts as none, and is reported once: a
 * log line the first time that user has that value (again if it is fixed
 * and broken anew), and profiles_report.bad, the users whose profile is
 * unreadable in the last complete read, for stats.bad_profiles. A field
 * whose name is no user id (empty, or longer than ENGINE_ID_MAX) is
 * logged once too and otherwise ignored.
 */
#ifndef ALLOCD_PROFILES_SCAN_H
#define ALLOCD_PROFILES_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "worker/slots_scan.h"

/* What the last reads saw of one user, by the engine's number for them:
 * a read stamps what it sees with its generation, and what the last
 * complete read did not stamp left the hash. */
typedef struct profiles_seen {
    uint64_t value_hash;
    uint16_t gen;             /* the read that last saw it */
    uint8_t bad;              /* the value is no profile */
    uint8_t used;             /* in the hash at the last read */
} profiles_seen;

#define PROFILES_BAD_IDS_MAX 256   /* bad field names remembered (logged once each) */

typedef struct profiles_report {
    profiles_seen *seen;      /* n of them, by engine_profile_user number */
    size_t n, cap;
    uint64_t *bad_ids;        /* hashes of the bad field names logged */
    size_t n_bad_ids, cap_bad_ids;
    uint16_t gen;             /* the read under way */
    int64_t bad;              /* stats.bad_profiles */
    int64_t logged;           /* log lines written (tests) */
} profiles_report;

void profiles_report_init(profiles_report *r);
void profiles_report_free(profiles_report *r);
/* A read of the whole hash into e: begin (fresh: e is a new engine, which
 * holds no profile yet), a pair per field, end. */
void profiles_begin(profiles_report *r, int fresh);
void profiles_pair(profiles_report *r, engine *e, const char *batch, const char *user, const char *value);
void profiles_end(profiles_report *r, engine *e);
/* The scan target (worker/slots_scan.h) of the reads while serving. */
slots_scan_target profiles_target(profiles_report *r);

#endif
