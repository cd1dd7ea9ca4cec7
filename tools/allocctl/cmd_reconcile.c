/* cmd_reconcile.c -- `allocctl reconcile --pg CONNINFO B`: the check a shop
 * runs against payments and a housing office against its records: does the
 * database hold what Redis holds?
 *
 * 1. A snapshot of the batch in one MULTI (capacity, holders, free, stats,
 *    the log's first and last id and entries-added), as verify takes it
 *    (ctl_snapshot).
 * 2. The database's events of B up to that last id, streamed in order
 *    (single-row mode: constant memory), are merged with the log entries
 *    still in Redis: an entry missing on either side, or with other fields,
 *    is a difference; then the events are replayed (ctl_replay) and the
 *    rebuilt holders and free compared with the snapshot. This works when
 *    the log was trimmed too: the database is then the only full record.
 * 3. alloc_results against P:{B}:results, a page of HSCAN at a time: each
 *    final result must be a row with the same JSON (compared as jsonb by
 *    the server), and the counts must agree.
 * Every difference is printed as "DIFF ..."; exit 1 on any.
 */
#include "allocctl/cmd_archive.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/archive_log.h"
#include "allocctl/archive_pg.h"
#include "allocctl/ctl_queue.h"
#include "allocctl/ctl_replay.h"
#include "allocctl/ctl_snapshot.h"
#include "allocctl/ctl_sync.h"
#include "allocctl/print.h"

#define MAX_SHOWN 200

typedef struct recon {
    ctx *x;
    archive_pg pg;
    size_t diffs;
    ctl_replay *rp;
    /* the Redis side of the merge: a page of XRANGE */
    redisReply *page;
    size_t at;
    char next[80];
    int redis_done;
    const char *last_id;     /* the snapshot's last log id */
    const char *first_id;    /* and its first: older events were trimmed */
    /* the Redis entry the database's events are being compared with: its
     * events as archive rows (several for a chunk-format entry) */
    json_t *cur_rows;
    char cur_id[80];
    size_t cur_seen;
    char db_id[80];          /* the database entry whose events are being read */
} recon;


static void on_finding(void *ud, replay_kind kind, const char *msg)
{
    print_diff(&((recon *)ud)->diffs, MAX_SHOWN, "replay of the database's events: %s", msg);
}

/* ---- the merge of database events with the log still in Redis ---- */

/* The next Redis entry (NULL at the end); pages of XRANGE up to last_id. */
static const redisReply *redis_peek(recon *r)
{
    if (r->page && r->at < r->page->elements) return r->page->element[r->at];
    if (r->redis_done || !r->last_id) return NULL;
    if (r->page) freeReplyObject(r->page);
    r->page = rcmd(r->x, "XRANGE %s %s %s COUNT %d", r->x->k.log, r->next, r->last_id, CTL_QUEUE_PAGE);
    r->at = 0;
    if (!r->page || r->page->elements == 0) { r->redis_done = 1; return NULL; }
    const redisReply *lastr = r->page->element[r->page->elements - 1];
    snprintf(r->next, sizeof r->next, "(%s", archive_log_entry_id(lastr));
    if (r->page->elements < CTL_QUEUE_PAGE) r->redis_done = 1;
    return r->page->element[0];
}

/* Orders two stream ids (ms-seq) numerically. */
static int id_cmp(const char *a, const char *b)
{
    unsigned long long am = strtoull(a, NULL, 10), bm = strtoull(b, NULL, 10);
    if (am != bm) return am < bm ? -1 : 1;
    const char *ad = strchr(a, '-'), *bd = strchr(b, '-');
    unsigned long long as = ad ? strtoull(ad + 1, NULL, 10) : 0, bs = bd ? strtoull(bd + 1, NULL, 10) : 0;
    return as == bs ? 0 : as < bs ? -1 : 1;
}

/* The Redis entry matched last: any of its events the database lacks. */
static void close_entry(recon *r)
{
    size_t n = json_array_size(r->cur_rows);
    if (r->cur_rows && r->cur_seen < n)
        print_diff(&r->diffs, MAX_SHOWN, "log entry %s has %zu events, alloc_events %zu", r->cur_id, n, r->cur_seen);
    json_decref(r->cur_rows);
    r->cur_rows = NULL;
}

/* A database event that starts a stream entry: the Redis entries before
 * it are missing from the database; the one with its id becomes current. */
static void open_entry(recon *r, const char *id)
{
    const redisReply *e;
    close_entry(r);
    while ((e = redis_peek(r)) && id_cmp(archive_log_entry_id(e), id) < 0) {
        print_diff(&r->diffs, MAX_SHOWN, "log entry %s is not in alloc_events", archive_log_entry_id(e));
        r->at++;
    }
    e = redis_peek(r);
    if (e && !id_cmp(archive_log_entry_id(e), id)) {
        r->cur_rows = json_array();
        if (r->cur_rows && archive_log_entry_decode(e, r->cur_rows) < 0)
            print_diff(&r->diffs, MAX_SHOWN, "log entry %s cannot be decoded", id);
        snprintf(r->cur_id, sizeof r->cur_id, "%s", id);
        r->cur_seen = 0;
        r->at++;
    } else if (r->first_id && id_cmp(id, r->first_id) > 0) {
        print_diff(&r->diffs, MAX_SHOWN, "event %s of alloc_events is not in the log", id);
    }
}

/* One database event (event idx of entry id): compared with the same
 * event of the Redis entry (when the log still has it), then replayed.
 * An entry starts where the id changes, not at ev_idx 0: with its first
 * row deleted the rest must still be matched with the log entry (and it
 * named as short of an event, not as missing). */
static void db_event(recon *r, const char *id, json_t *fields, int idx, int starts_entry)
{
    if (starts_entry) open_entry(r, id);
    if (r->cur_rows && !strcmp(r->cur_id, id)) {
        json_t *rf = json_object_get(json_array_get(r->cur_rows, (size_t)idx), "f");
        r->cur_seen++;
        if (!rf) {
            print_diff(&r->diffs, MAX_SHOWN, "event %s#%d of alloc_events is not in the log entry", id, idx);
        } else if (!json_equal(rf, fields)) {
            char *a = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS), *b = json_dumps(rf, JSON_COMPACT | JSON_SORT_KEYS);
            print_diff(&r->diffs, MAX_SHOWN, "event %s: alloc_events has %s, the log %s", id, a ? a : "?", b ? b : "?");
            free(a);
            free(b);
        }
    }
    ctl_kv kv[48];
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(fields, k, v) {
        if (n < 48 && json_is_string(v))
            kv[n++] = (ctl_kv){ k, json_string_value(v), json_string_length(v) };
    }
    ctl_replay_entry(r->rp, id, kv, n);
}

/* Streams the database's events of the batch (up to last_id) through
 * db_event. Returns the number of distinct entries, or -1. */
static int64_t replay_db(recon *r)
{
    char ms[32] = "0", seq[32] = "0";
    if (r->last_id) sscanf(r->last_id, "%31[0-9]-%31[0-9]", ms, seq);
    const char *params[3] = { r->x->batch, ms, seq };
    const char *sql = "SELECT stream_id, ev_idx, fields::text FROM alloc_events WHERE batch = $1 "
                      "AND (id_ms, id_seq) <= ($2::bigint, $3::bigint) ORDER BY id_ms, id_seq, ev_idx";
    if (!PQsendQueryParams(r->pg.conn, sql, 3, NULL, params, NULL, NULL, 0) ||
        !PQsetSingleRowMode(r->pg.conn)) {
        errmsg(r->x, "postgresql: %s", PQerrorMessage(r->pg.conn));
        return -1;
    }
    int64_t entries = 0, rc = 0;
    for (PGresult *res; (res = PQgetResult(r->pg.conn)) != NULL; PQclear(res)) {
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_TUPLES_OK) continue;
        if (st != PGRES_SINGLE_TUPLE) { errmsg(r->x, "postgresql: %s", PQresultErrorMessage(res)); rc = -1; continue; }
        if (rc < 0) continue;
        const char *id = PQgetvalue(res, 0, 0);
        int idx = atoi(PQgetvalue(res, 0, 1));
        json_t *fields = json_loads(PQgetvalue(res, 0, 2), 0, NULL);
        if (!fields) { print_diff(&r->diffs, MAX_SHOWN, "event %s: fields are not JSON", id); continue; }
        int starts_entry = strcmp(id, r->db_id) != 0;
        if (starts_entry) snprintf(r->db_id, sizeof r->db_id, "%s", id);
        entries += starts_entry;
        db_event(r, id, fields, idx, starts_entry);
        json_decref(fields);
    }
    if (rc < 0) return -1;
    close_entry(r);
    for (const redisReply *e; (e = redis_peek(r)) != NULL; r->at++)
        print_diff(&r->diffs, MAX_SHOWN, "log entry %s is not in alloc_events", archive_log_entry_id(e));
    return entries;
}

/* ---- results ---- */

/* One HSCAN page against the database: rows missing or different. The
 * server compares (jsonb equality), so key order and spacing do not count. */
static const char RESULTS_CMP[] =
"SELECT p->>'k', r.result::text, p->>'raw' FROM jsonb_array_elements($2::jsonb) AS p "
"LEFT JOIN alloc_results AS r ON r.batch = $1 AND r.req_id = p->>'k' "
"WHERE r.result IS DISTINCT FROM p->'r'";

static int results_page(recon *r, const redisReply *kv, int64_t *final)
{
    json_t *rows = json_array();
    for (size_t i = 0; rows && i + 1 < kv->elements; i += 2) {
        const redisReply *k = kv->element[i], *v = kv->element[i + 1];
        json_t *res = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
        if (!res) res = json_stringn(v->str, v->len);
        const char *st = json_string_value(json_object_get(res, "status"));
        if (st && !strcmp(st, "waiting")) { json_decref(res); continue; }
        (*final)++;
        json_array_append_new(rows, json_pack("{s:s%, s:o, s:s%}", "k", k->str, k->len, "r", res,
                                              "raw", v->str, v->len));
    }
    char *text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
    json_decref(rows);
    if (!text) { errmsg(r->x, "out of memory"); return -1; }
    const char *params[2] = { r->x->batch, text };
    PGresult *res = archive_pg_query(&r->pg, RESULTS_CMP, 2, params);
    free(text);
    if (!res) { errmsg(r->x, "%s", r->pg.err); return -1; }
    for (int i = 0; i < PQntuples(res); i++) {
        if (PQgetisnull(res, i, 1))
            print_diff(&r->diffs, MAX_SHOWN, "result %s is not in alloc_results (Redis: %s)", PQgetvalue(res, i, 0), PQgetvalue(res, i, 2));
        else
            print_diff(&r->diffs, MAX_SHOWN, "result %s: alloc_results has %s, Redis %s", PQgetvalue(res, i, 0),
                 PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
    }
    PQclear(res);
    return 0;
}

/* Rows of alloc_results whose request has no final result in Redis. Only
 * looked for when the counts disagree: a page of ids at a time, HEXISTS
 * in one pipeline. */
static int results_extra(recon *r)
{
    char after[200] = "";
    for (;;) {
        const char *params[2] = { r->x->batch, after };
        PGresult *res = archive_pg_query(&r->pg, "SELECT req_id FROM alloc_results WHERE batch = $1 "
                                         "AND req_id > $2 ORDER BY req_id LIMIT 1000", 2, params);
        if (!res) { errmsg(r->x, "%s", r->pg.err); return -1; }
        int n = PQntuples(res);
        for (int i = 0; i < n; i++) redisAppendCommand(r->x->c, "HGET %s %s", r->x->k.results, PQgetvalue(res, i, 0));
        for (int i = 0; i < n; i++) {
            redisReply *h = NULL;
            if (redisGetReply(r->x->c, (void **)&h) != REDIS_OK) { PQclear(res); errmsg(r->x, "redis: connection lost"); return -1; }
            if (h->type == REDIS_REPLY_NIL) print_diff(&r->diffs, MAX_SHOWN, "result %s of alloc_results is not in Redis", PQgetvalue(res, i, 0));
            else if (h->type == REDIS_REPLY_STRING && strstr(h->str, "\"status\":\"waiting\""))
                print_diff(&r->diffs, MAX_SHOWN, "result %s is final in alloc_results but waiting in Redis", PQgetvalue(res, i, 0));
            freeReplyObject(h);
        }
        if (n) snprintf(after, sizeof after, "%s", PQgetvalue(res, n - 1, 0));
        PQclear(res);
        if (n < 1000) return 0;
    }
}

static int reconcile_results(recon *r, int64_t *final, int64_t *rows)
{
    char cursor[32] = "0";
    *final = 0;
    do {
        redisReply *h = rcmd(r->x, "HSCAN %s %s COUNT %d", r->x->k.results, cursor, CTL_QUEUE_PAGE);
        if (!h) return -1;
        snprintf(cursor, sizeof cursor, "%s", h->element[0]->str);
        int rc = h->element[1]->elements ? results_page(r, h->element[1], final) : 0;
        freeReplyObject(h);
        if (rc < 0) return -1;
    } while (strcmp(cursor, "0"));
    const char *params[1] = { r->x->batch };
    PGresult *res = archive_pg_query(&r->pg, "SELECT count(*) FROM alloc_results WHERE batch = $1", 1, params);
    if (!res) { errmsg(r->x, "%s", r->pg.err); return -1; }
    *rows = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    /* HSCAN may return a field twice: the count, not the pages, decides */
    return *rows != *final ? results_extra(r) : 0;
}

/* ---- the command ---- */

static int reconcile_run(recon *r, const redisReply *sn)
{
    const redisReply *last = sn->element[CTL_SN_LAST], *first = sn->element[CTL_SN_FIRST];
    r->last_id = last->type == REDIS_REPLY_ARRAY && last->elements ? archive_log_entry_id(last->element[0]) : NULL;
    r->first_id = first->type == REDIS_REPLY_ARRAY && first->elements ? archive_log_entry_id(first->element[0]) : NULL;
    int64_t added = ctl_reply_field_int(sn->element[CTL_SN_XINFO], "entries-added", -1);
    int64_t entries = replay_db(r);
    if (entries < 0) return EX_DB;
    if (added >= 0 && entries != added)
        print_diff(&r->diffs, MAX_SHOWN, "alloc_events has %" PRId64 " log entries of %s up to %s, the log has had %" PRId64,
             entries, r->x->batch, r->last_id ? r->last_id : "(none)", added);
    if (ctl_snapshot_finish(r->x, r->rp, sn) < 0) return EX_REDIS;
    int64_t final, rows;
    if (reconcile_results(r, &final, &rows) < 0) return r->x->c && r->x->c->err ? EX_REDIS : EX_DB;
    if (rows != final)
        print_diff(&r->diffs, MAX_SHOWN, "alloc_results has %" PRId64 " rows for %s, Redis %" PRId64 " final results", rows, r->x->batch, final);
    const ctl_replay_counts *c = ctl_replay_counts_get(r->rp);
    printf("reconcile %s: %" PRId64 " log entries (%zu in the database), %" PRId64 " final results "
           "(%" PRId64 " rows); users holding: %zu\n", r->x->batch, added, (size_t)entries, final, rows, c->users);
    if (r->diffs > MAX_SHOWN) printf("(%zu more differences not shown)\n", r->diffs - MAX_SHOWN);
    if (r->diffs) printf("FAIL: %zu difference%s\n", r->diffs, r->diffs == 1 ? "" : "s");
    else printf("OK: the database matches Redis\n");
    return r->diffs ? EX_NOT : EX_OK;
}

static const char HELP_RECONCILE[] =
"Usage: allocctl reconcile --pg CONNINFO B\n"
"\n"
"Compares the archive in PostgreSQL with Redis: every log entry up to the log's\n"
"current end must be one alloc_events row with the same fields (entries trimmed\n"
"from Redis are taken from the database alone); replaying the database's events\n"
"must rebuild P:{B}:holders and P:{B}:free exactly (and the invariants hold); and\n"
"every final result of P:{B}:results must be one alloc_results row with the same\n"
"JSON. Prints every difference (DIFF ...) and a summary. Run it after `allocctl\n"
"archive` has caught up (a live batch shows the archive's lag as differences).\n"
"Exit 0 clean, 1 differences, 3 Redis failed, 5 PostgreSQL failed.\n";

int cmd_reconcile(ctx *x, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *b, *conninfo = NULL;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "pg", 0, &conninfo, NULL } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_RECONCILE) : rc;
    if ((rc = one_batch(x, npos, pos, &b)) != EX_OK) return rc;
    if (!conninfo) { errmsg(x, "--pg CONNINFO is required (try --help)"); return EX_USAGE; }
    if ((rc = ctx_batch(x, b)) != EX_OK || (rc = ctx_connect(x)) != EX_OK) return rc;
    recon r;
    memset(&r, 0, sizeof r);
    r.x = x;
    snprintf(r.next, sizeof r.next, "-");
    if (archive_pg_open(&r.pg, conninfo) < 0) { errmsg(x, "%s", r.pg.err); return EX_DB; }
    redisReply *sn = ctl_snapshot_read(x);
    if (!sn) { archive_pg_close(&r.pg); return EX_REDIS; }
    r.rp = ctl_snapshot_replay(sn, on_finding, &r);
    rc = r.rp ? reconcile_run(&r, sn) : EX_REDIS;
    ctl_replay_free(r.rp);
    if (r.page) freeReplyObject(r.page);
    freeReplyObject(sn);
    archive_pg_close(&r.pg);
    return rc;
}
