/* reader.c -- the live end-to-end mode's poller (see reader.h). */
#include "reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { READ_SLICE = 512, READ_MIN = 8, READ_IDLE_US = 100 };

typedef struct rstate {
    reader_job *j;
    redisContext *c;
    long *next;               /* per producer: k of the first unread request */
    long *want;               /* plain: ids to ask for next round */
    int *asked;               /* this round */
    int64_t dequeued;
    char (*ids)[24];          /* producers * READ_SLICE */
    const char **argv;
} rstate;

static long req_index(const rstate *s, int p, long k) { return k * s->j->producers + p; }

static long load_acked(const reader_job *j, int p)
{
    return __atomic_load_n(&j->acked[p], __ATOMIC_ACQUIRE);
}

/* How many of producer p's next ids are worth asking for. */
static int askable(const rstate *s, int p)
{
    const reader_job *j = s->j;
    long avail = load_acked(j, p) - s->next[p];
    if (avail > READ_SLICE) avail = READ_SLICE;
    if (!j->ordinal) {
        /* decided but not read yet, shared evenly by the producers (they
         * push at the same rate), with a margin; nothing when none is */
        long budget = (long)s->dequeued - j->read;
        if (budget <= 0) return 0;
        long share = budget / j->producers + budget / (4 * j->producers) + READ_MIN;
        if (share > s->want[p]) share = s->want[p];
        return (int)(avail < share ? avail : share);
    }
    int c = 0;
    while (c < avail) {
        int64_t o = j->ordinal[req_index(s, p, s->next[p] + c)];
        if (o < 0) o = -o; /* peek: only an upper bound is known */
        if (o == 0 || o > s->dequeued) break;
        c++;
    }
    return c;
}

/* Producer p's next `count` ids, appended to the round's one HMGET. */
static void add_ids(rstate *s, int p, int count, int *argc)
{
    char (*ids)[24] = s->ids + (size_t)p * READ_SLICE;
    for (int k = 0; k < count; k++) {
        snprintf(ids[k], sizeof ids[k], "%ld", req_index(s, p, s->next[p] + k));
        s->argv[(*argc)++] = ids[k];
    }
    s->j->fields_asked += count;
}

static long field_int(const char *s, const char *name)
{
    const char *p = strstr(s, name);
    return p ? strtol(p + strlen(name), NULL, 10) : -1;
}

static void note(rstate *s, long i, const redisReply *e, int64_t now)
{
    reader_job *j = s->j;
    const char *st = strstr(e->str, "\"status\":\"");
    if (st) outcome_note(&j->out, st + 10, strlen(st + 10));
    latency_add(&j->lat, (double)(now - j->push_us[i]) / 1000.0);
    if (j->read_us) j->read_us[i] = now;
    if (j->dump) fprintf(j->dump, "%ld %.3f %.3f %ld\n", i, (double)j->push_us[i] / 1000.0, (double)now / 1000.0, field_int(e->str, "\"at\":"));
    if (j->ordinal) {
        long seq = field_int(e->str, "\"seq\":");
        if (j->ordinal[i] > 0 ? seq != j->ordinal[i] : seq > -j->ordinal[i]) j->out.errors++;
    }
    j->read++;
}

/* The answered prefix of producer p's part of the HMGET reply (`count`
 * fields from element `first`). Returns the ids read. */
static long take_part(rstate *s, int p, const redisReply *r, size_t first, int count, int64_t now)
{
    long got = 0;
    while (got < count && r->element[first + (size_t)got]->type == REDIS_REPLY_STRING) {
        note(s, req_index(s, p, s->next[p] + got), r->element[first + (size_t)got], now);
        got++;
    }
    for (long e = got; e < count; e++)
        s->j->nil_fields += r->element[first + (size_t)e]->type != REDIS_REPLY_STRING;
    s->next[p] += got;
    s->want[p] = got + got / 4 + READ_MIN; /* room to grow, few nil fields */
    return got;
}

int reader_note_timeline(timeline *tl, int64_t t_us, int64_t dequeued, long read, pid_t redis_pid,
                         pid_t allocd_pid)
{
    size_t kept = tl->n;
    if (timeline_note(tl, t_us, dequeued, read) < 0) return -1;
    if (tl->n == kept) return 0;
    timeline_sample *s = &tl->s[tl->n - 1];
    if (redis_pid) bench_proc_sched_ns(redis_pid, &s->redis_run_ns, &s->redis_wait_ns);
    if (allocd_pid) bench_proc_sched_ns(allocd_pid, &s->allocd_run_ns, NULL);
    return 0;
}

/* Every producer's askable ids in one HMGET (one command per round, not
 * one per producer: each costs Redis a lookup of the hash and a reply
 * header), then HGET dequeued, pipelined: what this round's HMGET asks
 * for is what the previous round's dequeued allows. Returns the results
 * read, or -1. */
static long round_trip(rstate *s)
{
    reader_job *j = s->j;
    int argc = 0, fields = 0;
    s->argv[argc++] = "HMGET";
    s->argv[argc++] = j->results;
    for (int p = 0; p < j->producers; p++) {
        s->asked[p] = askable(s, p);
        if (s->asked[p] > 0) add_ids(s, p, s->asked[p], &argc);
        fields += s->asked[p];      /* askable: never negative */
    }
    if (fields) { redisAppendCommandArgv(s->c, argc, s->argv, NULL); j->hmgets++; }
    redisAppendCommand(s->c, "HGET %s dequeued", j->stats);
    j->dequeued_polls++;
    redisReply *r = NULL;
    long got = 0;
    int64_t now = 0;
    if (fields) {
        if (redisGetReply(s->c, (void **)&r) != REDIS_OK) return -1;
        now = proc_wall_us();
        if (r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)fields) {
            size_t first = 0;
            for (int p = 0; p < j->producers; p++) {
                if (s->asked[p] <= 0) continue;
                got += take_part(s, p, r, first, s->asked[p], now);
                first += (size_t)s->asked[p];
            }
        } else {
            j->out.errors++;
        }
        freeReplyObject(r);
    }
    if (redisGetReply(s->c, (void **)&r) != REDIS_OK) return -1;
    if (r->type == REDIS_REPLY_STRING) s->dequeued = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    /* dequeued as of now (out of memory for the timeline: the run goes on
     * without it) */
    if (j->tl && reader_note_timeline(j->tl, proc_wall_us(), s->dequeued, j->read, j->redis_pid, j->allocd_pid) < 0)
        j->tl = NULL;
    if (got) j->t_last = now;
    return got;
}

static int rstate_init(rstate *s, reader_job *j)
{
    memset(s, 0, sizeof *s);
    s->j = j;
    size_t P = (size_t)j->producers;
    s->next = calloc(P, sizeof *s->next);
    s->want = calloc(P, sizeof *s->want);
    s->asked = calloc(P, sizeof *s->asked);
    s->ids = calloc(P * READ_SLICE, sizeof *s->ids);
    s->argv = calloc(P * READ_SLICE + 2, sizeof *s->argv);
    if (!s->next || !s->want || !s->asked || !s->ids || !s->argv) return -1;
    for (size_t p = 0; p < P; p++) s->want[p] = READ_MIN;
    s->c = bench_connect(j->target);
    return s->c ? 0 : -1;
}

static void rstate_free(rstate *s)
{
    if (s->c) redisFree(s->c);
    free(s->next);
    free(s->want);
    free(s->asked);
    free(s->ids);
    free(s->argv);
}

int reader_run(reader_job *j)
{
    rstate s;
    int rc = -1;
    if (rstate_init(&s, j) < 0) { snprintf(j->err, sizeof j->err, "reader: cannot start"); goto out; }
    while (j->read < j->n) {
        if (proc_mono_us() > j->deadline_us) {
            snprintf(j->err, sizeof j->err, "reader: %ld of %ld results read by the deadline", j->read, j->n);
            goto out;
        }
        int64_t before = s.dequeued;
        long got = round_trip(&s);
        if (got < 0) { snprintf(j->err, sizeof j->err, "reader: redis I/O: %s", s.c->errstr); goto out; }
        /* a poller's interval when nothing is new; a round that learned
         * of new decisions asks for them at once */
        if (got == 0 && s.dequeued == before) proc_sleep_us(READ_IDLE_US);
    }
    rc = 0;
out:
    rstate_free(&s);
    return rc;
}
