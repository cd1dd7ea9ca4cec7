/* fuzz_log_entry.c -- fuzz target over the one decoder of P:{B}:log
 * entries (wire/log_entry.h), which allocctl verify, reconcile, the
 * archive and the chaos and partition checkers all trust. A log is
 * written by the daemon, but it lives in Redis where anyone with write
 * access can add entries, and a reader must answer a bad one with an
 * error, never with a crash or a wrong event.
 *
 * Input: byte 0 chooses the entry's shape (bit 0: a `format` field, bit 1:
 * its value is "chunk" (else the next line of the input), bit 2: an `n`
 * field, its value the next line); the rest is the `events` value. Every
 * value is handed over as an exact-length heap copy with no NUL after it,
 * as log_field promises nothing more (val, vlen), so a read past vlen is
 * an ASan error under `make fuzz`.
 *
 * Checks, for every input: the decoder returns -1 with a message, or the
 * number of events it called back with; a chunk entry's events have the
 * event format's fields in order (type, user, item, qty, order, req, at,
 * then expires_at, state and extras when present), qty, at and expires_at
 * in decimal, every value as long as it says; a callback's non-zero return
 * stops the decoding and is returned; two decodings agree. Built with
 * libFuzzer or as test_fuzz_replay_log_entry over
 * tests/fuzz/corpus/log_entry/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/log_entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_log_entry: check failed: %s: ", #cond);    \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

typedef struct tally {
    int chunk;              /* the entry says chunk format */
    int events;             /* callbacks so far */
    int stop_at;            /* return 7 from this callback (-1: never) */
    uint64_t digest;        /* of every field seen, to compare two decodings */
} tally;

static const char *const chunk_keys[] = { "type", "user", "item", "qty", "order", "req", "at" };

static int decimal(const char *s, size_t n)
{
    size_t i = s[0] == '-' ? 1 : 0;
    if (n <= i || n > 21) return 0;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static void check_chunk_event(const log_field *f, size_t n)
{
    CHECK(n >= 7 && n <= LOG_EVENT_MAX_FIELDS, "%zu fields", n);
    for (size_t i = 0; i < 7; i++)
        CHECK(!strcmp(f[i].key, chunk_keys[i]), "field %zu is '%s', not '%s'", i, f[i].key, chunk_keys[i]);
    CHECK(decimal(f[3].val, f[3].vlen) && decimal(f[6].val, f[6].vlen), "qty '%.*s' at '%.*s'",
          (int)f[3].vlen, f[3].val, (int)f[6].vlen, f[6].val);
    for (size_t i = 7; i < n; i++)
        if (!strcmp(f[i].key, "expires_at"))
            CHECK(decimal(f[i].val, f[i].vlen) && strcmp(f[i].val, "0"), "expires_at '%.*s'", (int)f[i].vlen, f[i].val);
}

static int on_event(void *ud, const log_field *f, size_t n)
{
    tally *t = ud;
    t->events++;
    for (size_t i = 0; i < n; i++) {
        CHECK(f[i].key && f[i].val, "field %zu without a key or value", i);
        CHECK(memchr(f[i].val, '\0', f[i].vlen) == NULL || !t->chunk, "NUL inside '%s'", f[i].key);
        for (size_t k = 0; f[i].key[k]; k++) t->digest = t->digest * 131 + (unsigned char)f[i].key[k];
        for (size_t k = 0; k < f[i].vlen; k++) t->digest = t->digest * 131 + (unsigned char)f[i].val[k];
    }
    if (t->chunk) check_chunk_event(f, n);
    return t->events == t->stop_at ? 7 : 0;
}

/* The next line of [*p, end) as a heap copy of exactly its length. */
static char *take_line(const uint8_t **p, const uint8_t *end, size_t *len)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
    char *s = malloc(n ? n : 1);
    if (n) memcpy(s, *p, n);
    *len = n;
    *p += n + (nl ? 1 : 0);
    return s;
}

static int decode(const log_field *e, size_t n, tally *t, char *err, size_t errlen)
{
    t->events = 0;
    t->digest = 0;
    return log_entry_decode(e, n, on_event, t, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536) return 0;
    unsigned shape = data[0];
    const uint8_t *p = data + 1, *end = data + size;
    log_field e[3];
    char *own[3] = { NULL, NULL, NULL };
    size_t n = 0;
    if (shape & 1) {
        size_t len = 5;
        own[n] = (shape & 2) ? (char *)memcpy(malloc(5), "chunk", 5) : take_line(&p, end, &len);
        e[n] = (log_field){ "format", own[n], len }, n++;
    }
    if (shape & 4) {
        size_t len;
        own[n] = take_line(&p, end, &len);
        e[n] = (log_field){ "n", own[n], len }, n++;
    }
    size_t len = (size_t)(end - p);
    own[n] = malloc(len ? len : 1);
    if (len) memcpy(own[n], p, len);
    e[n] = (log_field){ "events", own[n], len }, n++;

    tally t = { .chunk = log_entry_is_chunk(e, n), .stop_at = -1 };
    char err[256] = "x";
    int rc = decode(e, n, &t, err, sizeof err);
    if (!t.chunk) CHECK(rc == 1 && t.events == 1 && !err[0], "event format: rc %d, %d callbacks", rc, t.events);
    if (rc < 0) CHECK(err[0] != '\0', "-1 without a message");
    else CHECK(rc == t.events && !err[0], "rc %d after %d callbacks, err '%s'", rc, t.events, err);
    if (rc > 1) {        /* the same again, stopped by the callback half-way */
        uint64_t first = t.digest;
        tally again = { .chunk = t.chunk, .stop_at = rc / 2 + 1 };
        CHECK(decode(e, n, &again, err, sizeof err) == 7 && again.events == rc / 2 + 1, "stop not honoured");
        tally third = { .chunk = t.chunk, .stop_at = -1 };
        CHECK(decode(e, n, &third, err, sizeof err) == rc && third.digest == first, "two decodings differ");
    }
    for (int i = 0; i < 3; i++) free(own[i]);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
#include "fuzz_replay.h"
FUZZ_REPLAY_MAIN("log_entry")
#endif
