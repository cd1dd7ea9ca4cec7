/* itest.h -- the cmocka side of integration tests: a fixture with a real
 * redis-server and allocd, and assertions on results read back from Redis.
 * (harness.h starts the processes; this adds what every test file used to
 * copy: define a batch, run a command or allocctl or fail, wait for a result
 * and check it.) */
#ifndef ALLOCD_TEST_ITEST_H
#define ALLOCD_TEST_ITEST_H

#include <jansson.h>
#include "harness.h"

typedef struct itest {
    harness_redis redis;
    harness_allocd allocd;
    redisContext *c;
} itest;

/* cmocka group-free setup/teardown: a private Redis; allocd is started by
 * the test (itest_start). Teardown stops allocd (dumping its log when it
 * did not exit 0) and Redis. */
int itest_setup(void **state);
int itest_teardown(void **state);
void itest_start(itest *t, const char *extra_conf);
/* itest_start with metrics_listen on a free loopback port, then waits for
 * allocd to serve batch b (its stats have a state) and for one watcher tick
 * (1.5 s); returns the port. */
int itest_start_metrics(itest *t, const char *b);
/* A test in main()'s table, run on a fixture of its own (itest_setup,
 * itest_teardown). */
/* How long an edit of P:{B}:slots or P:{B}:profiles may take to hold:
 * a request dequeued 1.5 s after it is decided with it (docs/PROTOCOL.md,
 * "Edits while serving"), and 100 ms for the clocks' ticks. A test waits
 * this long after an edit, so it tests that bound and not how busy the
 * machine is. */
#define ITEST_EDIT_HOLDS_MS 1600

#define ITEST_CASE(test) cmocka_unit_test_setup_teardown(test, itest_setup, itest_teardown)

/* Runs a command; fails the test on an error reply. */
void itest_cmd(redisContext *c, const char *fmt, ...);
/* Defines batch b: HSET alloc:{b}:meta <meta>, alloc:{b}:capacity
 * <capacity> and, unless attrs is NULL, alloc:{b}:attrs <attrs>, then SADD
 * alloc:batches b. Each is a "field value field value ..." list split at
 * spaces (no value may hold one); an error reply fails the test. */
void itest_batch(redisContext *c, const char *b, const char *meta, const char *capacity,
                 const char *attrs);
/* RPUSH P:{b}:queue <printf-formatted JSON> */
void itest_push(itest *t, const char *b, const char *fmt, ...);
/* Waits (10 s) for the result of id in batch b; fails the test if none. */
json_t *itest_result(itest *t, const char *b, const char *id);
const char *itest_jstr(json_t *o, const char *k);
long long itest_jint(json_t *o, const char *k);
/* Asserts the status, and the reason (rejected/invalid) or the item
 * (granted/done) when `detail` is not NULL. */
void itest_expect(itest *t, const char *b, const char *id, const char *status,
                  const char *detail);
/* The events of alloc:{b}:log in order, whichever format each entry has
 * (wire/log_entry.h: a chunk entry holds many, any other entry is one): a
 * JSON array of objects with the event format's field names, values as
 * strings. Fails the test on an entry that does not decode. */
json_t *itest_log(redisContext *c, const char *b);
/* The number of events (not stream entries) in alloc:{b}:log. */
long long itest_log_len(redisContext *c, const char *b);
/* How many of the log's events have type `type`. */
int itest_log_count(redisContext *c, const char *b, const char *type);
/* Lines of the daemon's log containing needle. */
int itest_count_in_log(const harness_allocd *d, const char *needle);
/* Waits up to timeout_ms for n such lines; returns how many there are. */
int itest_wait_log(const harness_allocd *d, const char *needle, int n, int timeout_ms);
/* A loopback TCP port free right now (for metrics_listen). */
int itest_free_port(void);
/* Keeps `port` on loopback from being handed out while the server that had
 * it is down (killed, to be restarted there): a socket bound to it, not
 * listening, so a connection is refused as by a dead server but no other
 * process's bind(0) gets the port. Returns the socket, or -1; close it
 * just before the restart. */
int itest_port_hold(int port);
/* GET path on 127.0.0.1:port; the malloc'd response (headers and body),
 * or NULL when nothing answers. */
char *itest_http_get(int port, const char *path);
/* The same with extra header lines, each ending in "\r\n". */
char *itest_http_get_with(int port, const char *path, const char *headers);
/* Waits (10 s) for a hash field to exist; fails the test if it does not. */
void itest_expect_hget(redisContext *c, const char *key, const char *field);
/* Runs a shell command line (printf-style); its exit status, -1 if killed. */
int itest_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs allocctl --redis <t's Redis> with args (printf-style; a shell
 * fragment) through proc_run_capture; its exit status (128 + the signal
 * that ended it). Unless out is NULL, *out is stdout and stderr together
 * (malloc'd); allocctl that cannot be run fails the test. */
int itest_ctl(itest *t, char **out, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
