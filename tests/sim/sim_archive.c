/* sim_archive.c -- the log's copy and the archiver (see sim_archive.h). */
#include "sim/sim_archive.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

typedef struct acked { uint64_t ms, seq; } acked;

struct sim_archive {
    char key[200], group[72];
    int archiver;
    sima_entry *e;            /* every entry written, in order */
    size_t n, cap;
    size_t checked;           /* entries known trimmed and checked */
    acked *ack;               /* ids the archive acknowledged, sorted when used */
    size_t nack, capack;
    int ack_sorted;
    simr_client *c;
    int created;              /* the group was created (as far as the archiver knows) */
    int reread;               /* it crashed between read and ack: read its pending first */
    uint64_t epoch;           /* bumped by a restore: acks scheduled before it are dropped */
    int stopped;              /* the run is over: its events do nothing */
    sima_counts counts;
};

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) abort();
    return p;
}

static int id_parse(const char *s, uint64_t *ms, uint64_t *seq)
{
    char *end;
    *ms = strtoull(s, &end, 10);
    if (*end != '-') return -1;
    *seq = strtoull(end + 1, &end, 10);
    return *end ? -1 : 0;
}

static int id_cmp(uint64_t am, uint64_t as, uint64_t bm, uint64_t bs)
{
    if (am != bm) return am < bm ? -1 : 1;
    return as < bs ? -1 : as > bs;
}

sim_archive *sima_new(const char *log_key, const char *group, int archiver)
{
    sim_archive *a = xcalloc(1, sizeof *a);
    snprintf(a->key, sizeof a->key, "%s", log_key);
    snprintf(a->group, sizeof a->group, "%s", group);
    a->archiver = archiver;
    return a;
}

static void entry_free(sima_entry *e)
{
    for (size_t j = 0; j < e->nf; j++) free(e->f[j]);
    free(e->f);
    free(e->fl);
}

void sima_free(sim_archive *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->n; i++) entry_free(&a->e[i]);
    free(a->e);
    free(a->ack);
    simr_client_free(a->c);
    free(a);
}

void sima_added(sim_archive *a, const char *key, size_t klen, const char *id, size_t nf, const char *const *f,
                const size_t *fl)
{
    if (klen != strlen(a->key) || memcmp(key, a->key, klen)) return;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 256;
        a->e = realloc(a->e, a->cap * sizeof *a->e);
        if (!a->e) abort();
    }
    sima_entry *e = &a->e[a->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->id, sizeof e->id, "%s", id);
    id_parse(id, &e->ms, &e->seq);
    e->nf = nf;
    e->f = xcalloc(nf, sizeof *e->f);
    e->fl = xcalloc(nf, sizeof *e->fl);
    for (size_t j = 0; j < nf; j++) {
        e->f[j] = strndup(f[j], fl[j]);
        if (!e->f[j]) abort();
        e->fl[j] = fl[j];
    }
}

size_t sima_count(const sim_archive *a) { return a->n; }
const sima_entry *sima_at(const sim_archive *a, size_t i) { return i < a->n ? &a->e[i] : NULL; }
const sima_counts *sima_counts_get(const sim_archive *a) { return &a->counts; }

void sima_restored(sim_archive *a, simr *s)
{
    uint64_t ms = 0, seq = 0;
    simr_stream_bounds(s, a->key, NULL, NULL, &ms, &seq, NULL);
    while (a->n && id_cmp(a->e[a->n - 1].ms, a->e[a->n - 1].seq, ms, seq) > 0) entry_free(&a->e[--a->n]);
    /* ids past the restored log may be given again to other entries */
    size_t k = 0;
    for (size_t i = 0; i < a->nack; i++)
        if (id_cmp(a->ack[i].ms, a->ack[i].seq, ms, seq) <= 0) a->ack[k++] = a->ack[i];
    a->nack = k;
    if (a->checked > a->n) a->checked = a->n;
    a->epoch++;
    a->created = 0;   /* the copy may predate the group: XGROUP CREATE answers BUSYGROUP if not */
}

/* ------------------------------------------------------------ archiver -- */

static redisReply *cmd(sim_archive *a, int argc, const char **argv)
{
    size_t lens[16];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    return simr_exec(sim_w->redis, a->c, argc, argv, lens, sim_server_ms());
}

typedef struct ack_job { sim_archive *a; uint64_t epoch; size_t n; char (*ids)[48]; } ack_job;

static void ev_ack(void *x, void *y, uint64_t z)
{
    ack_job *j = y;
    sim_archive *a = j->a;
    for (size_t i = 0; !a->stopped && j->epoch == a->epoch && i < j->n; i++) {
        redisReply *r = cmd(a, 4, (const char *[]){ "XACK", a->key, a->group, j->ids[i] });
        if (r && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
            if (a->nack == a->capack) {
                a->capack = a->capack ? a->capack * 2 : 256;
                a->ack = realloc(a->ack, a->capack * sizeof *a->ack);
                if (!a->ack) abort();
            }
            id_parse(j->ids[i], &a->ack[a->nack].ms, &a->ack[a->nack].seq);
            a->nack++;
            a->ack_sorted = 0;
            a->counts.acked++;
        }
        if (r) freeReplyObject(r);
    }
    free(j->ids);
    free(j);
}

/* The ids of an XREADGROUP reply, acknowledged a little later (the copy
 * to the database), or never: a crash between the two. */
static const redisReply *entries_of(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->elements == 2
           ? r->element[0]->element[1] : NULL;
}

static void took(sim_archive *a, const redisReply *r)
{
    const redisReply *list = entries_of(r);
    if (!list || !list->elements) return;
    a->counts.read += list->elements;
    if (sim_w->faults_on && sim_chance(0.05)) {
        a->counts.crashes++;
        a->reread = 1;
        return;
    }
    ack_job *j = xcalloc(1, sizeof *j);
    j->a = a;
    j->epoch = a->epoch;
    j->n = list->elements;
    j->ids = xcalloc(j->n, sizeof *j->ids);
    for (size_t i = 0; i < j->n; i++) snprintf(j->ids[i], sizeof j->ids[i], "%s", list->element[i]->element[0]->str);
    sim_at(sim_w->now + (5 + sim_below(300)) * 1000000ULL, -1, ev_ack, a, j, 0);
}

static void ev_step(void *x, void *y, uint64_t z)
{
    sim_archive *a = x;
    if (a->stopped) return;
    if (!a->created) {
        redisReply *r = cmd(a, 6, (const char *[]){ "XGROUP", "CREATE", a->key, a->group, "0", "MKSTREAM" });
        a->created = r && (r->type == REDIS_REPLY_STATUS || (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "BUSYGROUP", 9)));
        if (r) freeReplyObject(r);
    } else {
        char count[24];
        snprintf(count, sizeof count, "%d", 1 + (int)sim_below(100));
        redisReply *r = cmd(a, 9, (const char *[]){ "XREADGROUP", "GROUP", a->group, "sim", "COUNT", count, "STREAMS",
                                                    a->key, a->reread ? "0" : ">" });
        if (r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOGROUP", 7)) a->created = 0;
        else {
            /* its pending entries are read again until a read of them comes
             * back empty, as allocctl archive does (cmd_archive.c) */
            const redisReply *list = entries_of(r);
            if (a->reread && (!list || !list->elements)) a->reread = 0;
            took(a, r);
        }
        if (r) freeReplyObject(r);
    }
    sim_at(sim_w->now + (50 + sim_below(450)) * 1000000ULL, -1, ev_step, a, NULL, 0);
}

void sima_stop(sim_archive *a) { a->stopped = 1; }

void sima_start(sim_archive *a, simr_client *c)
{
    a->c = c;
    if (!a->archiver) return;
    /* a while into the run: until then LOG_TRIM finds no group, trims nothing */
    sim_at(sim_w->now + sim_below(3000) * 1000000ULL, -1, ev_step, a, NULL, 0);
}

/* ------------------------------------------------------------ the check -- */

static int by_id(const void *x, const void *y)
{
    const acked *p = x, *q = y;
    return id_cmp(p->ms, p->seq, q->ms, q->seq);
}

static int was_acked(sim_archive *a, uint64_t ms, uint64_t seq)
{
    if (!a->ack_sorted) {
        if (a->nack > 1) qsort(a->ack, a->nack, sizeof *a->ack, by_id);
        a->ack_sorted = 1;
    }
    acked k = { ms, seq };
    return a->nack && bsearch(&k, a->ack, a->nack, sizeof *a->ack, by_id) != NULL;
}

void sima_check(sim_archive *a, simr *s)
{
    uint64_t fms = 0, fseq = 0;
    size_t len = 0;
    if (simr_stream_bounds(s, a->key, &fms, &fseq, NULL, NULL, &len) < 0) return;
    while (a->checked < a->n && !sim_w->failed) {
        const sima_entry *e = &a->e[a->checked];
        if (len && id_cmp(e->ms, e->seq, fms, fseq) >= 0) break;   /* still in the log */
        if (a->archiver && !was_acked(a, e->ms, e->seq))
            sim_fail("archive: log entry %s was trimmed before the archive acknowledged it", e->id);
        a->checked++;
        a->counts.trimmed++;
    }
}
