/* profiles_scan.h -- the users' profiles (contract 11.2) read into the
 * engine: with the batch at load (batch_load.c), and again while it is
 * served, so that an operator's edit holds within a second.
 *
 * P:{B}:profiles is a per-user hash of the operator's like P:{B}:slots, so
 * the worker reads it exactly like it (worker/slots_scan.h): HSCAN pages of
 * SLOTS_SCAN_COUNT fields every SLOTS_SCAN_EVERY_MS, installed in one step
 * when the cursor comes back to 0, a take (and the opening draw, which
 * reads `points`) held back while the profiles come from a scan begun more
 * than the interval and its grace ago. This module is what a read
 * installs. Each read is compared with the one before by a hash of each
 * user and value, so only what changed goes through the profile reader
 * (wire/profile.h) into the engine, users gone from the hash lose their
 * profile, and a read of 100,000 unchanged profiles costs a table probe
 * each and no engine call.
 *
 * A value that is not a profile counts as none, and is reported once: a
 * log line the first time that user has that value (again if it is fixed
 * and broken anew), and profiles_report.bad, the users whose profile is
 * unreadable in the last complete read, for stats.bad_profiles.
 */
#ifndef ALLOCD_PROFILES_SCAN_H
#define ALLOCD_PROFILES_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "worker/slots_scan.h"

/* One user of the hash, in an open-addressing table by user_hash: a read
 * stamps what it sees with its generation, and what the last complete
 * read did not stamp left the hash. No sort, and a user's id is copied
 * once, when it first appears. */
typedef struct profiles_seen {
    uint64_t user_hash, value_hash;
    uint32_t name;            /* offset of the user id in names */
    uint16_t gen;             /* the read that last saw it */
    uint8_t bad;              /* the value is no profile */
    uint8_t used;
} profiles_seen;

typedef struct profiles_report {
    profiles_seen *t;         /* cap slots, cap a power of 2 (0: none yet) */
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
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
