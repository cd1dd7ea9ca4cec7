/* round_int.h -- what the round's files share (round.c runs the phases,
 * round_io.c talks to Redis and allocctl, round_check.c checks the end). */
#ifndef ALLOCD_TOOLS_CAMPUS_ROUND_INT_H
#define ALLOCD_TOOLS_CAMPUS_ROUND_INT_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "round.h"

/* A file of one JSON request per line: the text as pushed, and parsed. */
typedef struct rlines {
    char **text;
    json_t **json;
    size_t n;
} rlines;

enum { RK_QUEUE, RK_CTL, RK_RESULTS, RK_STATS, RK_HOLDERS, RK_GROUPS, RK_CAPACITY, RK_COUNT };

typedef struct rctx {
    const round_opts *o;
    redisContext *c;
    const char *url;
    char key[RK_COUNT][200];
    long long expected;   /* results the batch should have by now */
    FILE *requests;       /* requests.jsonl: every request pushed, for `allocctl report --requests` */
    json_t *campus;       /* campus.txt: name -> integer */
    int64_t t0;           /* when the round began, monotonic us */
    long long profiles_at;  /* when the profiles were loaded, ms */
    int failed;           /* a check failed */
} rctx;

/* Lines for a newcomer (not with --quiet), and lines always printed. */
void rio_say(rctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rio_fact(rctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A failed check: printed with FAIL, remembered in r->failed. */
void rio_fail(rctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int rio_connect(rctx *r);
/* Reads DIR/name; 0, or -1 with a message (a line that is not JSON). */
int rio_load(rctx *r, const char *name, rlines *l);
void rio_lines_free(rlines *l);
/* The integer campus.txt gives for name (0 when absent). */
long long rio_campus(const rctx *r, const char *name);

/* RPUSHes texts to key k (RK_QUEUE or RK_CTL) in one pipeline, expects a
 * result for each, and records queue requests in requests.jsonl. 0 or -1. */
int rio_push(rctx *r, int k, char *const *text, size_t n);
/* Waits until the results hash holds r->expected results; 0, or -1 after
 * timeout_s seconds (saying what it waited for). */
int rio_wait(rctx *r, const char *what, int timeout_s);
/* A stats field as an integer (0 when absent), or a string field. */
long long rio_stat(rctx *r, const char *field);
char *rio_stat_str(rctx *r, const char *field);
/* The whole hash k (HGETALL), field -> parsed JSON value; NULL on error. */
json_t *rio_hash(rctx *r, int k);
/* HMGET of the fields in hash k: an object of field -> parsed JSON for the
 * fields that exist. */
json_t *rio_hmget(rctx *r, int k, const char *const *fields, size_t n);

/* Runs allocctl --redis URL --prefix P with args (NULL-terminated); its
 * exit status, *out its output (malloc'd). With show, the command line and
 * its output are printed (indented) for the newcomer. */
int rio_allocctl(rctx *r, char **out, int show, const char *const *args);
/* Seconds since the round began. */
double rio_elapsed(const rctx *r);

/* The end of the round (round_check.c): every check and the figures. */
void round_check(rctx *r);

#endif
