/* archive_fixture.h -- what the archive tests share (test_archive and the
 * long form, tests/archive/archive_long.c): a private redis-server and
 * PostgreSQL, allocd, batches and traffic, allocctl runs, and the checks
 * that the database holds every log entry and final result exactly once. */
#ifndef ALLOCD_TEST_ARCHIVE_FIXTURE_H
#define ALLOCD_TEST_ARCHIVE_FIXTURE_H

#include <sys/types.h>
#include <libpq-fe.h>

#include "harness.h"
#include "itest.h"

typedef struct afix {
    harness_redis redis;
    harness_allocd allocd;
    proc_pg pg;
    redisContext *c;
    PGconn *db;
    char conf[400];        /* allocctl's config (redis, archive_group) */
} afix;

int afix_setup(void **state);
int afix_teardown(void **state);
/* Writes allocctl's config again with extra settings (archive_group, ...). */
void afix_conf(afix *f, const char *extra);
void afix_start_allocd(afix *f, const char *extra_conf);

/* stock: items sku-1..sku-N of cap units each, per_user 2 */
void afix_stock_batch(afix *f, const char *b, int cap, int n_items);
/* rooms: R101.. with beds each */
void afix_room_batch(afix *f, const char *b, int n_rooms, int beds);
/* n requests (ids r-<from>..), buys by 6000 users and a few cancels; waits
 * until allocd has answered all of them */
void afix_stock_traffic_from(afix *f, const char *b, int n, int from);
void afix_stock_traffic(afix *f, const char *b, int n);
void afix_room_traffic(afix *f, const char *b, int n);
/* Waits until stats.processed >= n. */
void afix_wait_processed(afix *f, const char *b, long long n);

/* Runs allocctl -c CONF args... (NULL-terminated); asserts the exit code,
 * returns the output (stdout and stderr; caller frees). */
#define AFIX_CTL(f, want, ...) afix_ctl(f, want, __VA_ARGS__, NULL)
char *afix_ctl(afix *f, int want, ...);
/* Starts allocctl in the background (output to DIR/allocctl-bg.log). */
pid_t afix_ctl_spawn(afix *f, ...);

long long afix_pg_int(afix *f, const char *sql);
void afix_pg_exec(afix *f, const char *sql);

/* Every event of P:{b}:log is one alloc_events row and nothing else is:
 * an event-format entry one row, a chunk-format entry its n rows (ev_idx
 * 0..n-1). Returns the number of rows. */
long long afix_assert_log_archived(afix *f, const char *b);
/* Every result of P:{b}:results (not waiting) is one alloc_results row,
 * equal as JSON, and nothing else is. */
void afix_assert_results_archived(afix *f, const char *b);
/* Polls until the database has as many events as the log and as many
 * results as the hash. */
void afix_wait_archived(afix *f, const char *b, int timeout_ms);

#endif
