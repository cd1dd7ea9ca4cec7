/* cmd_archive.c -- `allocctl archive`: copies each batch's event log and
 * final results into PostgreSQL (docs/ARCHIVE.md).
 *
 * The log is read through a Redis consumer group on P:{B}:log, so the
 * archive resumes where it stopped and the daemon can see what is safe to
 * trim (archive_group): an entry is XACKed only after the PostgreSQL
 * transaction holding its rows has committed. A crash between the commit
 * and the XACK leaves the entry pending; the next run reads its own pending
 * entries first (XREADGROUP ... 0) and inserts them again, which the
 * primary keys turn into nothing (ON CONFLICT DO NOTHING). So a crash or a
 * rerun never loses or duplicates a row.
 *
 * Results are not in the log (a rejection changes no state), so they are
 * copied by full HSCAN passes of P:{B}:results, each page one insert of
 * the results neither this run nor the database has (archive_seen.h). A
 * pass records the stats.updated_at it saw before it began: every result
 * written by then was in the hash for the whole pass, and HSCAN returns
 * every such field at least once; `purge` compares that mark with the
 * batch's current stats.updated_at. `waiting` results are skipped: they
 * are the only ones ever replaced, and a later pass takes the final one.
 * A batch is caught up only when its last completed pass began after the
 * last chunk of the log this run archived. The daemon writes an event and
 * its result in one step, so such a pass saw the result of every archived
 * event; a pass under way while a chunk was archived may have gone past the
 * field of its result (new, or still waiting) before the daemon wrote it.
 *
 * One thread, batches served round-robin. Blocking hiredis; libpq blocking
 * but for the chunk in flight: its COPY runs in PostgreSQL while the next
 * chunk is read from Redis and encoded (its text handed over between
 * entries), and its entries are XACKed once its commit came back and the
 * next chunk's COPY has started. SIGINT/SIGTERM are blocked and polled, so
 * a stop always falls between chunks. Progress goes to stdout and to the hash P:{B}:archive, which
 * `allocctl top` shows.
 */
#include "allocctl/cmd_archive.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "allocctl/archive_log.h"
#include "allocctl/archive_pg.h"
#include "allocctl/archive_results.h"
#include "allocctl/ctl_sync.h"

#define RETRY_NOFOLLOW_MS 60000   /* without --follow, give up on an outage after this */
#define REPORT_MS 1000
#define BATCH_LIST_MS 1000
#define ROWS_PER_TXN 20000        /* events in one transaction, about (next_count) */
#define CHUNK_DEFAULT 5000        /* --chunk: entries in one transaction, at most */
#define FIRST_READ 16             /* entries of a batch's first read (next_count) */

typedef struct arch_batch {
    char id[BATCH_ID_MAX + 1];
    batch_keys k;
    char progress[BATCH_KEY_MAX + 16];
    int read_pending;          /* 1: read our pending entries (id 0) before new ones */
    int log_idle;              /* the last read found nothing new */
    int listed;                /* in P:batches at the last look */
    int64_t events, results;   /* rows inserted by this run */
    int64_t log_chunks;        /* chunks of the log read and archived by this run */
    int64_t read_count;        /* entries to read next (next_count); 0: FIRST_READ */
    int64_t reported_events;
    /* results pass */
    int scanning;
    char cursor[32];
    char pass_upto[32];        /* stats.updated_at seen before the running pass */
    int passes;                /* completed passes */
    int64_t pass_end_ms;
    char done_upto[32];        /* pass_upto of the last completed pass */
    int64_t pass_chunks;       /* log_chunks when the running pass began */
    int64_t done_chunks;       /* pass_chunks of the last completed pass */
    archive_seen *seen;        /* results the database has (load_seen): passes skip them */
    int64_t lag_entries, lag_ms;
    double rate;
    int64_t pool_sent;         /* lottery pool entries archived (by an earlier run too) */
    int pool_resumed;          /* pool_sent was read from the database */
} arch_batch;

/* The chunk whose COPY runs in PostgreSQL while the next one is read from
 * Redis and encoded: its reply, kept for the XACK after its commit. */
typedef struct arch_flight {
    int active;
    char batch[BATCH_ID_MAX + 1];
    redisReply *reply;
    const redisReply *entries;
} arch_flight;

typedef struct archiver {
    ctx *x;
    archive_pg pg;
    arch_flight fl;
    archive_buf buf[2];        /* COPY rows (binary): the flight's (buf[fl_buf]) and the next chunk's */
    int fl_buf;
    const char *conninfo, *group, *consumer;
    int64_t chunk, interval_ms, claim_idle_ms;
    int follow, quiet;
    const char **named;
    size_t nnamed;
    arch_batch *b;
    size_t nb;
    sigset_t stop;
    int64_t last_report, last_list, outage_since;
    int64_t heartbeat_ms, last_line;   /* --heartbeat-ms; when a line was last printed */
    int64_t last_outage_msg, last_redis_msg;
} archiver;

enum { AR_OK = 0, AR_REDIS = -1, AR_PG = -2, AR_FATAL = -3 };

static int stop_requested(archiver *a)
{
    sigset_t p;
    if (sigpending(&p) < 0) return 0;
    return sigismember(&p, SIGINT) || sigismember(&p, SIGTERM);
}

/* Sleeps ms, waking early for a stop. */
static void nap(archiver *a, int64_t ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    siginfo_t si;
    if (sigtimedwait(&a->stop, &si, &ts) > 0) raise(si.si_signo); /* keep it pending */
}

/* ------------------------------------------------------------ batches -- */

/* Log drained, and the last completed results pass began after the last
 * chunk of the log was archived: every archived event's result is in. */
static int caught_up(const arch_batch *b)
{
    return b->log_idle && !b->scanning && b->passes && b->done_chunks == b->log_chunks;
}

static arch_batch *find_batch(archiver *a, const char *id)
{
    for (size_t i = 0; i < a->nb; i++)
        if (!strcmp(a->b[i].id, id)) return &a->b[i];
    return NULL;
}

static int add_batch(archiver *a, const char *id)
{
    if (find_batch(a, id)) return 0;
    batch_keys k;
    if (batch_keys_init(&k, a->x->cfg.prefix, id) < 0) return 0;   /* not a batch id: skip */
    arch_batch *nb = realloc(a->b, (a->nb + 1) * sizeof *nb);
    if (!nb) return -1;
    a->b = nb;
    arch_batch *b = &a->b[a->nb++];
    memset(b, 0, sizeof *b);
    snprintf(b->id, sizeof b->id, "%s", id);
    b->k = k;
    archive_progress_key(b->progress, sizeof b->progress, a->x->cfg.prefix, id);
    b->read_pending = 1;
    b->listed = 1;
    return 0;
}

/* The named batches, or (again every second) every member of P:batches. */
static int list_batches(archiver *a)
{
    int64_t now = clock_mono_ms();
    if (a->nb && (a->nnamed || now - a->last_list < BATCH_LIST_MS)) return AR_OK;
    a->last_list = now;
    for (size_t i = 0; i < a->nnamed; i++)
        if (add_batch(a, a->named[i]) < 0) return AR_FATAL;
    if (a->nnamed) return AR_OK;
    redisReply *m = redisCommand(a->x->c, "SMEMBERS %s", a->x->batches_key);
    if (!m || m->type != REDIS_REPLY_ARRAY) { if (m) freeReplyObject(m); return AR_REDIS; }
    sort_strings(m);
    int rc = AR_OK;
    for (size_t i = 0; i < a->nb; i++) a->b[i].listed = 0;
    for (size_t i = 0; i < m->elements && rc == AR_OK; i++) {
        if (add_batch(a, m->element[i]->str) < 0) rc = AR_FATAL;
        arch_batch *b = find_batch(a, m->element[i]->str);
        if (b) b->listed = 1;
    }
    freeReplyObject(m);
    /* a batch out of P:batches (batch rm, purge) is followed until it is
     * caught up, then dropped: its keys may be about to go */
    for (size_t i = 0; i < a->nb;) {
        arch_batch *b = &a->b[i];
        if (!b->listed && !b->read_pending && caught_up(b)) {
            archive_seen_free(b->seen);
            a->b[i] = a->b[--a->nb];
        } else i++;
    }
    return rc;
}

/* ------------------------------------------------------------- the log -- */

/* XGROUP CREATE ... 0: an existing group is fine, and so is a log that
 * does not exist yet (no MKSTREAM: a purged batch is not made again).
 * *no_log: the log is not there. */
static int ensure_group(archiver *a, arch_batch *b, int *no_log)
{
    *no_log = 0;
    redisReply *r = redisCommand(a->x->c, "XGROUP CREATE %s %s 0", b->k.log, a->group);
    if (!r) return AR_REDIS;
    int ok = r->type != REDIS_REPLY_ERROR || !strncmp(r->str, "BUSYGROUP", 9);
    if (!ok && strstr(r->str, "requires the key to exist")) ok = *no_log = 1;
    if (!ok) errmsg(a->x, "%s: XGROUP CREATE: %s", b->id, r->str);
    freeReplyObject(r);
    return ok ? AR_OK : AR_REDIS;
}

/* One write to PostgreSQL, to be retried as a whole after a reconnect. */
typedef enum { JOB_EVENTS, JOB_RESULTS, JOB_BATCH, JOB_ITEMS, JOB_POOL, JOB_LOTTERY, JOB_POOL_FROM,
               JOB_SEEN } pg_job_kind;
typedef struct pg_job {
    pg_job_kind kind;
    const char *batch;
    const char *text[3];     /* rows (events, results); meta, capacity, stats (batch) */
    size_t len;              /* of text[0], for events and results (COPY binary); for
                                the pool, the position of its first entry */
    int64_t inserted;
    archive_seen *seen;      /* filled by JOB_SEEN */
} pg_job;

static int pg_job_run(archive_pg *p, pg_job *j)
{
    switch (j->kind) {
    case JOB_EVENTS:  return archive_pg_copy_events(p, j->text[0], j->len, &j->inserted);
    case JOB_RESULTS: return archive_pg_copy_results(p, j->text[0], j->len, &j->inserted);
    case JOB_ITEMS:   return archive_pg_put_items(p, j->batch, j->text[0]);
    case JOB_POOL:    return archive_pg_put_pool(p, j->batch, (int64_t)j->len, j->text[0]);
    case JOB_LOTTERY: return archive_pg_put_lottery(p, j->batch, j->text[0], j->text[1], j->text[2]);
    case JOB_POOL_FROM: return archive_pg_pool_entries(p, j->batch, &j->inserted);
    case JOB_SEEN:    return archive_pg_results_ids(p, j->batch, j->seen);
    default:          return archive_pg_put_batch(p, j->batch, j->text[0], j->text[1], j->text[2]);
    }
}

/* Runs the job until it succeeds, reconnecting to PostgreSQL in between;
 * gives up on a statement the server refuses, or (without --follow) after
 * RETRY_NOFOLLOW_MS. */
static int pg_retry(archiver *a, pg_job *j)
{
    int64_t start = clock_mono_ms(), wait = 100;
    for (;;) {
        if (archive_pg_open(&a->pg, a->conninfo) == 0 && pg_job_run(&a->pg, j) == 0) return AR_OK;
        /* a statement the server refuses: no retry, exit 5 (docs/ARCHIVE.md) */
        if (!archive_pg_lost(&a->pg)) { errmsg(a->x, "%s", a->pg.err); return AR_PG; }
        int64_t now = clock_mono_ms();
        if (now - a->last_outage_msg > 10000) {
            errmsg(a->x, "%s; retrying", a->pg.err);
            a->last_outage_msg = now;
        }
        if ((!a->follow && now - start > RETRY_NOFOLLOW_MS) || stop_requested(a)) return AR_PG;
        nap(a, wait);
        if (wait < 2000) wait *= 2;
    }
}

/* The next reply on the synchronous Redis context, awaited while a chunk
 * is in flight with poll on Redis's socket and PostgreSQL's, handing
 * libpq more of the flight's rows whenever PostgreSQL can take them. The
 * socket holds a fraction of a chunk, and without this PostgreSQL ran dry
 * while Redis answered an XREADGROUP or an XACK. With nothing left to
 * send, or no progress on either socket for a second, it waits for Redis
 * as redisGetReply does (the context's timeout applies). REDIS_OK or
 * REDIS_ERR, as redisGetReply. */
static int reply_pumping(archiver *a, void **reply)
{
    redisContext *c = a->x->c;
    int done = 0, pg_fd;
    *reply = NULL;
    do {
        if (redisBufferWrite(c, &done) == REDIS_ERR) return REDIS_ERR;
    } while (!done);
    while ((pg_fd = archive_pg_copy_fd(&a->pg)) >= 0) {   /* -1 when no COPY is in flight */
        if (redisGetReplyFromReader(c, reply) == REDIS_ERR) return REDIS_ERR;
        if (*reply) return REDIS_OK;
        struct pollfd pf[2] = { { c->fd, POLLIN, 0 }, { pg_fd, POLLOUT, 0 } };
        int n = poll(pf, 2, 1000);
        if (n == 0 || (n < 0 && errno != EINTR)) break;
        if (n > 0 && pf[1].revents) (void)archive_pg_copy_pump(&a->pg);   /* a failure shows in _finish */
        if (n > 0 && pf[0].revents && redisBufferRead(c) == REDIS_ERR) return REDIS_ERR;
    }
    return redisGetReply(c, reply);
}

/* redisCommand, through reply_pumping. */
static redisReply *command_pumping(archiver *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAppendCommand(a->x->c, fmt, ap);
    va_end(ap);
    void *reply = NULL;
    if (rc != REDIS_OK || reply_pumping(a, &reply) != REDIS_OK) return NULL;
    return reply;
}

/* XACK of every entry of the reply, and the progress counters. */
static int ack(archiver *a, arch_batch *b, const redisReply *entries, int64_t inserted)
{
    ctl_args args = { 0 };
    ctl_args_add(&args, "XACK");
    ctl_args_add(&args, b->k.log);
    ctl_args_add(&args, a->group);
    const char *last = NULL;
    for (size_t i = 0; i < entries->elements; i++)
        if ((last = archive_log_entry_id(entries->element[i])) != NULL) ctl_args_add(&args, last);
    int rc = args.failed ? AR_FATAL : AR_OK;
    if (rc == AR_OK) {
        redisAppendCommandArgv(a->x->c, (int)args.n, (const char **)args.v, args.len);
        redisAppendCommand(a->x->c, "HINCRBY %s events %lld", b->progress, (long long)inserted);
        redisAppendCommand(a->x->c, "HSET %s last_id %s group %s", b->progress, last ? last : "",
                           a->group);
        for (int i = 0; i < 3; i++) {
            redisReply *r = NULL;
            if (reply_pumping(a, (void **)&r) != REDIS_OK || !r || r->type == REDIS_REPLY_ERROR)
                rc = AR_REDIS;
            if (r) freeReplyObject(r);
            if (rc == AR_REDIS && !r) break;
        }
    }
    ctl_args_free(&args);
    return rc;
}

/* Entries pending for another consumer of the group that has been idle
 * for claim_idle_ms (an archiver that died under another --consumer name)
 * become ours (XAUTOCLAIM), to be read with our own pending ones.
 * Returns how many were claimed, or AR_REDIS. */
static int claim_orphans(archiver *a, arch_batch *b)
{
    redisReply *r = redisCommand(a->x->c, "XAUTOCLAIM %s %s %s %lld 0-0 COUNT %lld JUSTID", b->k.log,
                                 a->group, a->consumer, (long long)a->claim_idle_ms, (long long)a->chunk);
    if (!r) return AR_REDIS;
    int n = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 && r->element[1]->type == REDIS_REPLY_ARRAY)
        n = (int)r->element[1]->elements;
    freeReplyObject(r);
    return n;
}

/* Entries to read next: --chunk, fewer when entries hold many events (the
 * chunk format), so one transaction holds about ROWS_PER_TXN rows. A
 * batch's first read takes FIRST_READ entries, whose size is not known
 * yet: --chunk entries of 512 events each would be the whole of a sale's
 * log in one transaction, encoded while PostgreSQL waits and then copied
 * while allocctl waits, with nothing overlapped. */
static int64_t next_count(const archiver *a, size_t entries, int rows)
{
    if (!entries || rows <= 0) return a->chunk;
    int64_t per_entry = (rows + (int64_t)entries - 1) / (int64_t)entries;
    int64_t n = ROWS_PER_TXN / per_entry;
    return n < 1 ? 1 : n > a->chunk ? a->chunk : n;
}

/* Lands the chunk in flight: waits for its commit (through pg_retry when
 * the connection was lost), then, when next_b is given, starts the COPY of
 * the chunk encoded in the other buffer, so that PostgreSQL works on it
 * during the XACK of the first. */
static int flight_land_then(archiver *a, arch_batch *next_b, redisReply *next_r, const redisReply *next_e)
{
    arch_flight done = a->fl;
    int rc = AR_OK;
    int64_t inserted = 0;
    a->fl.active = 0;
    if (done.active && archive_pg_copy_finish(&a->pg, &inserted) < 0) {
        if (!archive_pg_lost(&a->pg)) { errmsg(a->x, "%s", a->pg.err); rc = AR_PG; }
        archive_buf *t = &a->buf[a->fl_buf];
        pg_job j = { JOB_EVENTS, done.batch, { t->p, NULL, NULL }, t->len, 0, NULL };
        if (rc == AR_OK) rc = pg_retry(a, &j);
        inserted = j.inserted;
    }
    if (rc == AR_OK && next_b) {
        a->fl_buf = !a->fl_buf;
        a->fl = (arch_flight){ 1, "", next_r, next_e };
        snprintf(a->fl.batch, sizeof a->fl.batch, "%s", next_b->id);
        /* a failure shows in archive_pg_copy_finish */
        (void)archive_pg_copy_start(&a->pg, a->buf[a->fl_buf].p, a->buf[a->fl_buf].len);
    } else if (next_r) freeReplyObject(next_r);
    arch_batch *b = done.active ? find_batch(a, done.batch) : NULL;
    if (rc == AR_OK && b) rc = ack(a, b, done.entries, inserted);
    if (rc == AR_OK && b) b->events += inserted;
    if (done.active) freeReplyObject(done.reply);
    return rc;
}

static int flight_land(archiver *a)
{
    return flight_land_then(a, NULL, NULL, NULL);
}

/* The COPY rows of a chunk into the buffer the flight does not use,
 * handing libpq more of the flight's rows as it goes. Rows, or AR_FATAL. */
static int encode_chunk(archiver *a, arch_batch *b, const redisReply *entries)
{
    archive_buf *rows = &a->buf[!a->fl_buf];
    archive_copy_begin(rows);
    size_t pumped = 0;
    int nrows = 0;
    for (size_t i = 0; i < entries->elements; i++) {
        int n = archive_log_entry_copy(entries->element[i], b->id, rows);
        if (n < 0 || rows->failed) return AR_FATAL;
        nrows += n;
        if (a->fl.active && rows->len - pumped >= 65536) {
            (void)archive_pg_copy_pump(&a->pg);     /* a failure shows in _finish */
            pumped = rows->len;
        }
    }
    archive_copy_end(rows);
    return rows->failed ? AR_FATAL : nrows;
}

/* One chunk of the log: read it, encode it, land the chunk in flight and
 * send this one (flight_land_then). Its entries are XACKed in a later
 * step, after its commit. Returns 1 when it moved something, 0 when there
 * was nothing (and nothing is in flight), or AR_*. */
static int log_step(archiver *a, arch_batch *b)
{
    if (!b->read_count) b->read_count = FIRST_READ < a->chunk ? FIRST_READ : a->chunk;
    /* our pending entries from the start include the flight's: land it first */
    int rc = b->read_pending ? flight_land(a) : AR_OK;
    if (rc != AR_OK) return rc;
    redisReply *r = command_pumping(a, "XREADGROUP GROUP %s %s COUNT %lld STREAMS %s %s",
                                 a->group, a->consumer, (long long)b->read_count, b->k.log,
                                 b->read_pending ? "0" : ">");
    if (!r) return AR_REDIS;
    if (r->type == REDIS_REPLY_ERROR) {
        /* NOGROUP: the log was deleted and made again (or purged) */
        int nogroup = !strncmp(r->str, "NOGROUP", 7);
        if (!nogroup) errmsg(a->x, "%s: XREADGROUP: %s", b->id, r->str);
        freeReplyObject(r);
        if (!nogroup) return AR_REDIS;
        b->read_pending = 1;     /* ensure_group runs again in the next round */
        b->log_idle = 0;         /* ... and then reads the new log, or finds none */
        return flight_land(a);
    }
    const redisReply *entries = NULL;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->elements == 2)
        entries = r->element[0]->element[1];
    if (!entries || entries->elements == 0) {
        freeReplyObject(r);
        if ((rc = flight_land(a)) != AR_OK) return rc;   /* idle once all read is in */
        if (b->read_pending) {
            int claimed = claim_orphans(a, b);
            if (claimed < 0) return claimed;
            b->read_pending = claimed > 0;   /* read what was claimed, then new entries */
            if (claimed > 0) b->log_idle = 0;   /* not caught up before they are in */
            return 1;
        }
        b->log_idle = 1;
        return 0;
    }
    b->log_idle = 0;
    b->log_chunks++;
    int nrows = encode_chunk(a, b, entries);
    if (nrows < 0) {
        errmsg(a->x, "%s: could not archive a chunk of the log", b->id);
        freeReplyObject(r);
        return AR_FATAL;
    }
    b->read_count = next_count(a, entries->elements, nrows);
    if (nrows > 0) rc = flight_land_then(a, b, r, entries);
    else {
        /* entries whose fields are gone: nothing to insert */
        rc = flight_land(a);
        if (rc == AR_OK) rc = ack(a, b, entries, 0);
        freeReplyObject(r);
    }
    return rc == AR_OK ? 1 : rc;
}

/* ----------------------------------------------------------- results -- */

/* An HGETALL reply as a JSON object text (values as strings). */
static char *hash_json(const redisReply *h)
{
    json_t *o = json_object();
    for (size_t i = 0; o && h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2) {
        json_t *v = json_stringn(h->element[i + 1]->str, h->element[i + 1]->len);
        if (v) json_object_setn_new(o, h->element[i]->str, h->element[i]->len, v);
    }
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

static int put_round(archiver *a, arch_batch *b, const redisReply *meta, const redisReply *cap,
                     const redisReply *attrs);

/* After each results pass: meta, capacity and stats into alloc_batches,
 * so that the database alone answers "when did each item sell out"; then
 * the round's items and pool (put_round), from the same reads. */
static int put_batch(archiver *a, arch_batch *b)
{
    redisAppendCommand(a->x->c, "HGETALL %s", b->k.meta);
    redisAppendCommand(a->x->c, "HGETALL %s", b->k.capacity);
    redisAppendCommand(a->x->c, "HGETALL %s", b->k.stats);
    redisAppendCommand(a->x->c, "HGETALL %s", b->k.attrs);
    redisReply *r[4];
    if (replies(a->x, 4, r) < 0) return AR_REDIS;
    char *meta = hash_json(r[0]), *cap = hash_json(r[1]), *stats = hash_json(r[2]);
    int rc = AR_FATAL;
    if (meta && cap && stats) {
        pg_job j = { JOB_BATCH, b->id, { meta, cap, stats }, 0, 0, NULL };
        rc = pg_retry(a, &j);
    }
    if (rc == AR_OK) rc = put_round(a, b, r[0], r[1], r[3]);
    free_replies(r, 4);
    free(meta);
    free(cap);
    free(stats);
    return rc;
}

/* capacity and attrs -> [{"k":item,"c":capacity,"a":attrs}, ...] */
static char *items_rows(const redisReply *cap, const redisReply *attrs)
{
    json_t *rows = json_array(), *a = json_object();
    for (size_t i = 0; a && i + 1 < attrs->elements; i += 2) {
        const redisReply *v = attrs->element[i + 1];
        json_t *doc = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
        json_object_setn_new(a, attrs->element[i]->str, attrs->element[i]->len, doc ? doc : json_stringn(v->str, v->len));
    }
    for (size_t i = 0; rows && i + 1 < cap->elements; i += 2) {
        const char *item = cap->element[i]->str;
        json_t *at = json_object_get(a, item);
        json_array_append_new(rows, json_pack("{s:s, s:s%, s:O}", "k", item, "c", cap->element[i + 1]->str,
                                              cap->element[i + 1]->len, "a", at ? at : json_null()));
    }
    char *text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
    json_decref(rows);
    json_decref(a);
    return text;
}

/* The lottery pool's entries not yet archived, a page per job, then its
 * progress. The list only grows, so an entry's position is its key: a run
 * goes on from the entries an earlier one archived whole (its progress row
 * is written after them), and one killed between a page and the progress
 * sends that page again, which changes nothing. */
static int put_pool(archiver *a, arch_batch *b)
{
    if (!b->pool_resumed) {
        pg_job from = { JOB_POOL_FROM, b->id, { NULL, NULL, NULL }, 0, 0, NULL };
        int rc = pg_retry(a, &from);
        if (rc != AR_OK) return rc;
        b->pool_sent = from.inserted;
        b->pool_resumed = 1;
    }
    redisAppendCommand(a->x->c, "HMGET %s early_served lottery_done", b->k.internal);
    redisAppendCommand(a->x->c, "LLEN %s", b->k.early);
    redisReply *r[2];
    if (replies(a->x, 2, r) < 0) return AR_REDIS;
    const redisReply *sv = r[0]->element[0], *dn = r[0]->element[1];
    char served[24], done[4], len[24];
    snprintf(served, sizeof served, "%s", sv->type == REDIS_REPLY_STRING ? sv->str : "0");
    snprintf(done, sizeof done, "%s", dn->type == REDIS_REPLY_STRING ? dn->str : "0");
    int64_t n = r[1]->integer;
    snprintf(len, sizeof len, "%lld", (long long)n);
    free_replies(r, 2);
    int rc = AR_OK;
    while (rc == AR_OK && b->pool_sent < n) {
        redisReply *page = redisCommand(a->x->c, "LRANGE %s %lld %lld", b->k.early, (long long)b->pool_sent,
                                        (long long)(b->pool_sent + a->chunk - 1));
        if (!page) return AR_REDIS;
        json_t *arr = json_array();
        for (size_t i = 0; i < page->elements; i++)
            json_array_append_new(arr, json_stringn(page->element[i]->str, page->element[i]->len));
        char *text = json_dumps(arr, JSON_COMPACT);
        pg_job j = { JOB_POOL, b->id, { text, NULL, NULL }, (size_t)b->pool_sent, 0, NULL };
        rc = text && page->elements ? pg_retry(a, &j) : AR_FATAL;
        b->pool_sent += (int64_t)page->elements;
        free(text);
        json_decref(arr);
        freeReplyObject(page);
    }
    pg_job j = { JOB_LOTTERY, b->id, { served, done, len }, 0, 0, NULL };
    return rc == AR_OK ? pg_retry(a, &j) : rc;
}

/* With each alloc_batches row, what the report needs after a purge:
 * alloc_items (attrs and capacity) and, for early=shuffle, the pool. */
static int put_round(archiver *a, arch_batch *b, const redisReply *meta, const redisReply *cap,
                     const redisReply *attrs)
{
    int shuffle = 0;
    for (size_t i = 0; i + 1 < meta->elements; i += 2)
        shuffle |= !strcmp(meta->element[i]->str, "early") && !strcmp(meta->element[i + 1]->str, "shuffle");
    pg_job j = { JOB_ITEMS, b->id, { items_rows(cap, attrs), NULL, NULL }, 0, 0, NULL };
    int rc = j.text[0] ? pg_retry(a, &j) : AR_FATAL;
    free((char *)j.text[0]);
    return rc == AR_OK && shuffle ? put_pool(a, b) : rc;
}

/* Whether a new pass is due: none yet, or interval_ms has passed and the
 * daemon wrote since the last one or a chunk of the log was archived after
 * it began. Reads stats.updated_at into pass_upto. */
static int pass_due(archiver *a, arch_batch *b, int *due)
{
    *due = 0;
    if (b->passes && clock_mono_ms() - b->pass_end_ms < a->interval_ms) return AR_OK;
    redisReply *r = redisCommand(a->x->c, "HGET %s updated_at", b->k.stats);
    if (!r) return AR_REDIS;
    snprintf(b->pass_upto, sizeof b->pass_upto, "%s", r->type == REDIS_REPLY_STRING ? r->str : "0");
    freeReplyObject(r);
    *due = !b->passes || strcmp(b->pass_upto, b->done_upto) != 0 || b->done_chunks != b->log_chunks;
    return AR_OK;
}

/* Before this run's first pass over b: the results the database has, so
 * that a restarted archiver does not offer them all again. Without memory
 * for the set, every result is offered (the primary key skips them). */
static int load_seen(archiver *a, arch_batch *b)
{
    if (b->seen || !(b->seen = archive_seen_new())) return AR_OK;
    pg_job j = { JOB_SEEN, b->id, { NULL, NULL, NULL }, 0, 0, b->seen };
    return pg_retry(a, &j);
}

/* One HSCAN page of a results pass. Returns 1 (moved), 0 (nothing to do) or AR_*. */
static int results_step(archiver *a, arch_batch *b)
{
    if (!b->scanning) {
        int due, rc = pass_due(a, b, &due);
        if (rc != AR_OK || !due) return rc;
        if ((rc = load_seen(a, b)) != AR_OK) return rc;
        b->scanning = 1;
        b->pass_chunks = b->log_chunks;
        snprintf(b->cursor, sizeof b->cursor, "0");
    }
    redisReply *r = redisCommand(a->x->c, "HSCAN %s %s COUNT %lld", b->k.results, b->cursor,
                                 (long long)a->chunk);
    if (!r) return AR_REDIS;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        errmsg(a->x, "%s: HSCAN: %s", b->id, r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        freeReplyObject(r);
        return AR_REDIS;
    }
    int rc = AR_OK;
    int64_t inserted = 0;
    /* the log's flight has landed (log_step found nothing): both buffers are free */
    assert(!a->fl.active);
    archive_buf *rows = &a->buf[!a->fl_buf];
    const redisReply *page = r->element[1];
    unsigned char *sent = malloc(page->elements / 2 + 1);
    archive_copy_begin(rows);
    int nrows = sent ? archive_results_copy(page, b->id, b->seen, sent, rows) : -1;
    archive_copy_end(rows);
    if (nrows < 0 || rows->failed) {
        errmsg(a->x, "%s: could not archive a page of results (a field that is not UTF-8 text?)", b->id);
        rc = AR_FATAL;
    } else if (nrows > 0) {
        pg_job j = { JOB_RESULTS, b->id, { rows->p, NULL, NULL }, rows->len, 0, NULL };
        rc = pg_retry(a, &j);
        inserted = j.inserted;
        /* committed: later passes of this run skip them (one the set has
         * no memory for is offered again, which the primary key skips) */
        for (size_t i = 0; rc == AR_OK && b->seen && i + 1 < page->elements; i += 2)
            if (sent[i / 2]) (void)archive_seen_add(b->seen, page->element[i]->str);
    }
    free(sent);
    if (rc == AR_OK) {
        snprintf(b->cursor, sizeof b->cursor, "%s", r->element[0]->str);
        b->results += inserted;
        if (!strcmp(b->cursor, "0")) {
            b->scanning = 0;
            b->passes++;
            b->pass_end_ms = clock_mono_ms();
            snprintf(b->done_upto, sizeof b->done_upto, "%s", b->pass_upto);
            b->done_chunks = b->pass_chunks;
            rc = put_batch(a, b);
        }
        redisReply *h = redisCommand(a->x->c, "HINCRBY %s results %lld", b->progress, (long long)inserted);
        if (!h) rc = AR_REDIS; else freeReplyObject(h);
        if (rc == AR_OK && !b->scanning) {
            h = redisCommand(a->x->c, "HSET %s results_upto %s results_passes %d", b->progress,
                             b->done_upto, b->passes);
            if (!h) rc = AR_REDIS; else freeReplyObject(h);
        }
    }
    freeReplyObject(r);
    return rc == AR_OK ? 1 : rc;
}

/* ---------------------------------------------------------- progress -- */

/* The ms part of a stream id ("1763800000123-4"). */
static int64_t id_ms(const char *id)
{
    return id ? strtoll(id, NULL, 10) : 0;
}

/* Lag of our group: entries not yet acknowledged (XINFO GROUPS lag +
 * pending) and how far, in stream time, the oldest of them is behind the
 * newest entry. */
static int measure_lag(archiver *a, arch_batch *b)
{
    redisAppendCommand(a->x->c, "XINFO GROUPS %s", b->k.log);
    redisAppendCommand(a->x->c, "XREVRANGE %s + - COUNT 1", b->k.log);
    redisAppendCommand(a->x->c, "XPENDING %s %s", b->k.log, a->group);
    /* error replies are answers here (no log yet: no group, no lag) */
    redisReply *r[3] = { NULL, NULL, NULL };
    for (int i = 0; i < 3; i++)
        if (redisGetReply(a->x->c, (void **)&r[i]) != REDIS_OK) {
            free_replies(r, 3);
            return AR_REDIS;
        }
    const redisReply *g = NULL;
    for (size_t i = 0; r[0]->type == REDIS_REPLY_ARRAY && i < r[0]->elements; i++) {
        const redisReply *name = ctl_reply_field(r[0]->element[i], "name");
        if (name && name->str && !strcmp(name->str, a->group)) g = r[0]->element[i];
    }
    const redisReply *delivered = ctl_reply_field(g, "last-delivered-id");
    int64_t pending = r[2]->type == REDIS_REPLY_ARRAY && r[2]->elements ? ctl_reply_int(r[2]->element[0]) : 0;
    const char *oldest = pending && r[2]->element[1]->type == REDIS_REPLY_STRING ? r[2]->element[1]->str : NULL;
    const char *newest = r[1]->type == REDIS_REPLY_ARRAY && r[1]->elements ? r[1]->element[0]->element[0]->str : NULL;
    b->lag_entries = ctl_reply_field_int(g, "lag", 0) + pending;
    if (!oldest && delivered && delivered->str) oldest = delivered->str;
    b->lag_ms = b->lag_entries && newest && oldest ? id_ms(newest) - id_ms(oldest) : 0;
    if (b->lag_ms < 0) b->lag_ms = 0;
    free_replies(r, 3);
    return AR_OK;
}

/* With --follow, a line every --heartbeat-ms while nothing else is
 * printed, so an idle archiver is seen to be alive (and what it has done). */
static void heartbeat(archiver *a, int64_t now)
{
    if (!a->follow || a->quiet || !a->heartbeat_ms || now - a->last_line < a->heartbeat_ms) return;
    int64_t events = 0, results = 0, lag = 0;
    for (size_t i = 0; i < a->nb; i++) {
        events += a->b[i].events;
        results += a->b[i].results;
        lag += a->b[i].lag_entries;
    }
    printf("archive: idle %.0f s, following %zu batch%s; this run: events %" PRId64 ", results %" PRId64
           ", lag %" PRId64 " entries\n", (double)(now - a->last_line) / 1000.0, a->nb,
           a->nb == 1 ? "" : "es", events, results, lag);
    a->last_line = now;
}

/* Every REPORT_MS: rates and lag to stdout (batches that moved) and to
 * P:{B}:archive for `allocctl top`. */
static int report(archiver *a, int force)
{
    int64_t now = clock_mono_ms(), dt = now - a->last_report;
    if (!force && dt < REPORT_MS) return AR_OK;
    a->last_report = now;
    for (size_t i = 0; i < a->nb; i++) {
        arch_batch *b = &a->b[i];
        if (measure_lag(a, b) != AR_OK) return AR_REDIS;
        int64_t moved = b->events - b->reported_events;
        b->rate = dt > 0 ? (double)moved * 1000.0 / (double)dt : 0;
        b->reported_events = b->events;
        redisReply *r = redisCommand(a->x->c,
            "HSET %s rate %.0f lag_entries %lld lag_ms %lld updated_at %lld consumer %s group %s",
            b->progress, b->rate, (long long)b->lag_entries, (long long)b->lag_ms,
            (long long)clock_wall_ms(), a->consumer, a->group);
        if (!r) return AR_REDIS;
        freeReplyObject(r);
        if ((moved || force) && !a->quiet) {
            printf("archive %s: events %" PRId64 " (%.0f/s), results %" PRId64 ", lag %" PRId64
                   " entries, %.1f s\n", b->id, b->events, b->rate, b->results, b->lag_entries,
                   (double)b->lag_ms / 1000.0);
            a->last_line = now;
        }
    }
    heartbeat(a, now);
    fflush(stdout);
    return AR_OK;
}

/* ---------------------------------------------------------- the loop -- */

/* After a Redis error: a new connection (the old one may be mid-reply),
 * and every batch reads its pending entries again. */
static int redis_reconnect(archiver *a)
{
    if (a->x->c) redisFree(a->x->c);
    a->x->c = NULL;
    for (size_t i = 0; i < a->nb; i++) {
        a->b[i].read_pending = 1;
        a->b[i].scanning = 0;
    }
    /* the message once per 10 s, not at every attempt of an outage */
    char msg[256] = "";
    a->x->quiet = msg;
    int rc = ctx_connect(a->x) == EX_OK ? AR_OK : AR_REDIS;
    a->x->quiet = NULL;
    int64_t now = clock_mono_ms();
    if (rc != AR_OK && now - a->last_redis_msg > 10000) {
        errmsg(a->x, "%s; retrying", msg);
        a->last_redis_msg = now;
    }
    return rc;
}

/* One round: a chunk of each batch's log, or a page of its results when
 * its log is drained. Returns how many batches moved, or AR_*. */
static int round_robin(archiver *a, int *all_done)
{
    int rc = list_batches(a), moved = 0;
    *all_done = 1;
    for (size_t i = 0; rc >= AR_OK && i < a->nb; i++) {
        arch_batch *b = &a->b[i];
        int no_log = 0;
        if (b->read_pending && (rc = ensure_group(a, b, &no_log)) != AR_OK) break;
        if (no_log) b->log_idle = 1;
        rc = no_log ? flight_land(a) : log_step(a, b);
        if (rc == 0) rc = results_step(a, b);
        if (rc > 0) moved++;
        if (!caught_up(b)) *all_done = 0;
    }
    if (rc >= AR_OK) rc = report(a, 0);
    return rc < AR_OK ? rc : moved;
}

static int archive_loop(archiver *a)
{
    int64_t wait = 100;
    for (;;) {
        if (stop_requested(a)) return flight_land(a) == AR_PG ? EX_DB : EX_OK;
        int done = 0, rc = a->x->c ? round_robin(a, &done) : AR_REDIS;
        if (rc == AR_FATAL) return EX_INPUT;
        if (rc == AR_PG) return stop_requested(a) ? EX_OK : EX_DB;
        if (rc == AR_REDIS) {
            if (!a->outage_since) a->outage_since = clock_mono_ms();
            if (!a->follow && clock_mono_ms() - a->outage_since > RETRY_NOFOLLOW_MS) return EX_REDIS;
            nap(a, wait);
            if (wait < 2000) wait *= 2;
            redis_reconnect(a);
            continue;
        }
        a->outage_since = 0;
        wait = 100;
        if (!a->follow && done) return report(a, 1) == AR_OK ? EX_OK : EX_REDIS;
        if (rc == 0) nap(a, 100);
    }
}

static const char HELP_ARCHIVE[] =
"Usage: allocctl archive --pg CONNINFO [B...] [--follow] [--group G] [--consumer C]\n"
"                        [--chunk N] [--results-interval-ms MS] [--claim-idle-ms MS]\n"
"                        [--heartbeat-ms MS] [--quiet]\n"
"\n"
"Copies each batch's event log (P:{B}:log) into the PostgreSQL table alloc_events and\n"
"its final results (P:{B}:results; `waiting` is not final) into alloc_results,\n"
"creating the schema on the first run (docs/ARCHIVE.md). Without B, every batch of\n"
"P:batches (re-read every second with --follow).\n"
"\n"
"The log is read through the Redis consumer group G (config archive_group, else\n"
"\"archive\") as consumer C (\"archiver\"); each chunk of at most N entries (5000)\n"
"and about 20,000 events is one PostgreSQL transaction (a COPY), and its entries\n"
"are XACKed only after it committed, so a crash or a rerun never loses or\n"
"duplicates a row. Results are copied by HSCAN passes, again at most every MS\n"
"(5000) while the batch changes, each offering PostgreSQL only the results it does\n"
"not have (their ids are read once, then kept). Entries another\n"
"consumer of G left pending for --claim-idle-ms (60000) are taken over (XAUTOCLAIM).\n"
"\n"
"Without --follow it stops once every batch is caught up; with --follow it runs until\n"
"SIGINT/SIGTERM, riding out Redis and PostgreSQL restarts. Progress (events/s, lag in\n"
"entries and seconds) is printed every second and kept in P:{B}:archive (allocctl top);\n"
"with --follow, a heartbeat line every MS (10000; 0 = none) while idle.\n"
"\n"
"CONNINFO is a libpq connection string or URI (\"host=/run/postgresql dbname=shop\",\n"
"\"postgresql://archiver@db/shop\"); a password belongs in ~/.pgpass or PGPASSFILE.\n"
"Exit 0 caught up (or stopped), 3 Redis failed, 5 PostgreSQL failed.\n";

static int archive_opts(ctx *x, archiver *a, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *chunk = NULL, *interval = NULL, *claim = NULL, *beat = NULL;
    size_t npos = 0;
    const opt spec[] = { GLOBAL_OPTS(x), { "pg", 0, &a->conninfo, NULL },
        { "follow", 'f', NULL, &a->follow }, { "group", 0, &a->group, NULL },
        { "consumer", 0, &a->consumer, NULL }, { "chunk", 0, &chunk, NULL },
        { "results-interval-ms", 0, &interval, NULL }, { "claim-idle-ms", 0, &claim, NULL },
        { "heartbeat-ms", 0, &beat, NULL },
        { "quiet", 'q', NULL, &a->quiet } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? -1 : rc;
    a->chunk = CHUNK_DEFAULT;
    a->interval_ms = 5000;
    a->claim_idle_ms = 60000;
    a->heartbeat_ms = 10000;
    if (opt_int(x, "chunk", chunk, 1, 100000, &a->chunk) < 0 ||
        opt_int(x, "heartbeat-ms", beat, 0, 86400000, &a->heartbeat_ms) < 0 ||
        opt_int(x, "results-interval-ms", interval, 0, 86400000, &a->interval_ms) < 0 ||
        opt_int(x, "claim-idle-ms", claim, 0, 86400000, &a->claim_idle_ms) < 0)
        return EX_USAGE;
    if (!a->conninfo) { errmsg(x, "--pg CONNINFO is required (try --help)"); return EX_USAGE; }
    for (size_t i = 0; i < npos; i++)
        if (!batch_id_valid(pos[i])) { errmsg(x, "bad batch id '%s'", pos[i]); return EX_USAGE; }
    a->nnamed = npos;
    a->named = malloc((npos ? npos : 1) * sizeof *a->named);
    if (!a->named) return EX_REDIS;
    memcpy(a->named, pos, npos * sizeof *pos);
    return EX_OK;
}

int cmd_archive(ctx *x, int argc, char **argv, int at)
{
    archiver a;
    memset(&a, 0, sizeof a);
    a.x = x;
    int rc = archive_opts(x, &a, argc, argv, at);
    if (rc) { free(a.named); return rc < 0 ? show_help(HELP_ARCHIVE) : rc; }
    /* with --follow a Redis that is not up yet is waited for, like a lost one */
    if ((rc = ctx_config(x)) != EX_OK || ((rc = ctx_connect(x)) != EX_OK && !a.follow)) {
        free(a.named);
        return rc;
    }
    if (!a.group) a.group = *x->cfg.archive_group ? x->cfg.archive_group : ARCHIVE_GROUP_DEFAULT;
    if (!a.consumer) a.consumer = ARCHIVE_CONSUMER_DEFAULT;
    if (x->cfg.log_maxlen > 0 && strcmp(x->cfg.archive_group, a.group))
        errmsg(x, "warning: log_maxlen = %lld trims the log and archive_group is not \"%s\": "
               "allocd may trim entries before they are archived (docs/ARCHIVE.md)",
               (long long)x->cfg.log_maxlen, a.group);
    sigemptyset(&a.stop);
    sigaddset(&a.stop, SIGINT);
    sigaddset(&a.stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &a.stop, NULL);
    a.last_line = clock_mono_ms();
    rc = EX_OK;
    if (archive_pg_open(&a.pg, a.conninfo) < 0 && !a.follow) {
        errmsg(x, "%s", a.pg.err);
        rc = EX_DB;
    }
    if (rc == EX_OK) rc = archive_loop(&a);
    if (a.fl.active) freeReplyObject(a.fl.reply);    /* left pending: the next run reads it */
    archive_buf_free(&a.buf[0]);
    archive_buf_free(&a.buf[1]);
    archive_pg_close(&a.pg);
    for (size_t i = 0; i < a.nb; i++) archive_seen_free(a.b[i].seen);
    free(a.b);
    free(a.named);
    return rc;
}
