/* fuzz_config.c -- fuzz target over the config parser (base/config).
 *
 * Why: the config file is the one input an operator writes by hand, and
 * the brief promises that every mistake in it is reported as
 * `file:line: message` -- never a crash, a leak or a value outside its
 * documented range. For every input (written to a file, since the loader
 * reads a path, and libconfig's own integer readings are re-checked from
 * the text) this checks:
 *   - the loader returns 0 or -1, and with -1 a message that starts with
 *     the file's name and a colon;
 *   - with 0, every setting is inside the range its table gives (the
 *     values the daemon relies on: chunk, timeouts, lease, answer_ms,
 *     wait_replicas, ...), and the redis URL parses again into the target
 *     the config holds;
 *   - the loaded config frees cleanly (ASan in `make fuzz`).
 * Inputs that contain `@include` are skipped: a file naming /dev/zero or a
 * FIFO would hang the fuzzer, and includes are covered by the data-driven
 * tests (tests/data/config). Built with libFuzzer (`make fuzz`) or as the
 * replay binary test_fuzz_replay_config over tests/fuzz/corpus/config/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_config: check failed: %s: ", #cond);       \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

#define IN(v, lo, hi) ((v) >= (lo) && (v) <= (hi))

static void check_loaded(const allocd_config *c)
{
    CHECK(IN(c->chunk, 1, 4096), "chunk %d", c->chunk);
    CHECK(IN(c->max_request_bytes, 64, 1048576), "max_request_bytes %d", c->max_request_bytes);
    CHECK(c->log_maxlen >= 0, "log_maxlen %lld", (long long)c->log_maxlen);
    CHECK(IN(c->redis_timeout_ms, 10, 3600000), "redis_timeout_ms %d", c->redis_timeout_ms);
    CHECK(IN(c->connect_timeout_ms, 10, 3600000), "connect_timeout_ms %d", c->connect_timeout_ms);
    CHECK(IN(c->backoff_min_ms, 1, 3600000) && IN(c->backoff_max_ms, 1, 3600000), "backoff");
    CHECK(IN(c->idle_wait_ms, 10, 60000), "idle_wait_ms %d", c->idle_wait_ms);
    CHECK(IN(c->max_attempts, 1, 100), "max_attempts %d", c->max_attempts);
    CHECK(IN(c->lease_ttl_ms, 1000, 600000), "lease_ttl_ms %d", c->lease_ttl_ms);
    CHECK(IN(c->answer_ms, 1000, 86400000), "answer_ms %d", c->answer_ms);
    CHECK(IN(c->wait_replicas, 0, 16), "wait_replicas %d", c->wait_replicas);
    CHECK(c->redis_url && c->prefix && c->instance && c->cluster && c->metrics_listen, "a string is NULL");
    char err[256];
    redis_target t;
    CHECK(redis_url_parse(c->redis_url, &t, err, sizeof err) == 0, "stored URL '%s' does not parse: %s",
          c->redis_url, err);
    CHECK(!memcmp(&t, &c->redis, sizeof t), "URL '%s' parses to another target", c->redis_url);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[256];
    if (!path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/fuzz_config_%ld.conf", tmp && *tmp && strlen(tmp) < 180 ? tmp : "/tmp",
                 (long)getpid());
        log_set_level(ALOG_ERR);       /* warnings about values are expected */
    }
    if (size > 65536 || memmem(data, size, "@include", 8)) return 0;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) { fclose(f); unlink(path); return 0; }
    fclose(f);
    allocd_config c;
    config_defaults(&c);
    char err[1024] = "";
    int rc = config_load_file(&c, path, 1, err, sizeof err);
    unlink(path);
    CHECK(rc == 0 || rc == -1, "config_load_file returned %d", rc);
    if (rc == -1) {
        size_t n = strlen(path);
        CHECK(!strncmp(err, path, n) && err[n] == ':', "error without file:line: '%s'", err);
    } else {
        check_loaded(&c);
    }
    config_free(&c);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
#include "fuzz_replay.h"
FUZZ_REPLAY_MAIN("config")
#endif
