/* archive_pg.c -- see archive_pg.h. The schema is documented in
 * docs/ARCHIVE.md; keep the two in step. */
#include "allocctl/archive_pg.h"

#include "allocctl/archive_results.h"
#include "allocctl/archive_seen.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A text that is an integer of at most 18 digits, else NULL: stream fields
 * are strings and a hand-written or future entry must not make the whole
 * chunk fail a cast. */
#define INTOF(x) "(CASE WHEN (" x ") ~ '^-?[0-9]{1,18}$' THEN (" x ")::bigint END)"

/* Created once, under an advisory lock so two archivers starting together
 * do not race on the catalog. alloc_events has few indexes on purpose:
 * each B-tree costs the archive about as much as the row itself, and the
 * archive must keep up with a sale's grants (docs/ARCHIVE.md): B-trees by
 * user and by order took more than half of the copy's time in a profile
 * of a 200,000-grant sale, so only the primary key is left, and a user's
 * or an order's story is found through alloc_results (indexed by both),
 * then among one batch's rows. The log is in time order, so a BRIN index
 * serves ranges of `at` for almost nothing; results (alloc_results) are
 * fewer and keep their indexes. */
static const char SCHEMA[] =
"SELECT pg_advisory_xact_lock(7355608);\n"
"CREATE TABLE IF NOT EXISTS alloc_events (\n"
"  batch         text    NOT NULL,\n"
"  stream_id     text    NOT NULL,\n"
"  id_ms         bigint  NOT NULL,\n"
"  id_seq        bigint  NOT NULL,\n"
"  ev_idx        integer NOT NULL DEFAULT 0,\n"
"  type          text    NOT NULL,\n"
"  user_id       text,\n"
"  item          text,\n"
"  qty           bigint,\n"
"  order_id      text,\n"
"  req           text,\n"
"  at_ms         bigint,\n"
"  at            timestamptz,\n"
"  expires_at_ms bigint,\n"
"  state         text,\n"
"  fields        jsonb   NOT NULL,\n"
"  archived_at   timestamptz NOT NULL DEFAULT now(),\n"
"  PRIMARY KEY (batch, id_ms, id_seq, ev_idx)\n"
");\n"
"CREATE INDEX IF NOT EXISTS alloc_events_at    ON alloc_events USING brin (at);\n"
"CREATE TABLE IF NOT EXISTS alloc_results (\n"
"  batch         text    NOT NULL,\n"
"  req_id        text    NOT NULL,\n"
"  user_id       text,\n"
"  op            text,\n"
"  status        text    NOT NULL,\n"
"  reason        text,\n"
"  item          text,\n"
"  order_id      text,\n"
"  qty           bigint,\n"
"  seq           bigint,\n"
"  rank          bigint,\n"
"  at_ms         bigint,\n"
"  at            timestamptz,\n"
"  result        jsonb   NOT NULL,\n"
"  archived_at   timestamptz NOT NULL DEFAULT now(),\n"
"  PRIMARY KEY (batch, req_id)\n"
");\n"
"CREATE INDEX IF NOT EXISTS alloc_results_user   ON alloc_results (batch, user_id);\n"
"CREATE INDEX IF NOT EXISTS alloc_results_order  ON alloc_results (order_id) WHERE order_id IS NOT NULL;\n"
"CREATE INDEX IF NOT EXISTS alloc_results_item   ON alloc_results (batch, item, status);\n"
"CREATE INDEX IF NOT EXISTS alloc_results_status ON alloc_results (batch, status, reason);\n"
"CREATE INDEX IF NOT EXISTS alloc_results_at     ON alloc_results (at);\n"
"CREATE TABLE IF NOT EXISTS alloc_batches (\n"
"  batch         text    PRIMARY KEY,\n"
"  kind          text,\n"
"  meta          jsonb   NOT NULL,\n"
"  capacity      jsonb   NOT NULL,\n"
"  stats         jsonb   NOT NULL,\n"
"  updated_at    timestamptz NOT NULL DEFAULT now()\n"
");\n"
/* What `allocctl report` needs once a batch is purged (docs/ARCHIVE.md):
 * each item's attrs (fill by building) and the opening lottery's pool and
 * progress (the draw's replay). Rows keyed so that a pass sent again
 * changes nothing. */
"CREATE TABLE IF NOT EXISTS alloc_items (\n"
"  batch         text    NOT NULL,\n"
"  item          text    NOT NULL,\n"
"  capacity      bigint,\n"
"  attrs         jsonb,\n"
"  updated_at    timestamptz NOT NULL DEFAULT now(),\n"
"  PRIMARY KEY (batch, item)\n"
");\n"
"CREATE TABLE IF NOT EXISTS alloc_lottery (\n"
"  batch         text    PRIMARY KEY,\n"
"  early_served  bigint  NOT NULL,\n"
"  lottery_done  boolean NOT NULL,\n"
"  pool_entries  bigint  NOT NULL,\n"
"  updated_at    timestamptz NOT NULL DEFAULT now()\n"
");\n"
"CREATE TABLE IF NOT EXISTS alloc_lottery_pool (\n"
"  batch         text    NOT NULL,\n"
"  pos           bigint  NOT NULL,\n"
"  entry         text    NOT NULL,\n"
"  PRIMARY KEY (batch, pos)\n"
");\n";

/* A chunk of the log arrives by COPY (archive_log_entry_copy writes its
 * rows): straight into alloc_events, PostgreSQL's fastest way in, when
 * none of its rows is there yet -- the common case. A chunk sent again
 * (after a crash between the commit and the XACK) fails that COPY on the
 * primary key; it is then copied into this table of the session and moved
 * with INSERT ... ON CONFLICT DO NOTHING, which keeps the rows that are
 * new. Either way one transaction per chunk. Emptied at each commit. */
static const char STAGE[] =
"CREATE TEMP TABLE IF NOT EXISTS alloc_events_stage (\n"
"  batch text, stream_id text, id_ms bigint, id_seq bigint, ev_idx integer, type text,\n"
"  user_id text, item text, qty bigint, order_id text, req text, at_ms bigint,\n"
"  at timestamptz, expires_at_ms bigint, state text, fields jsonb\n"
") ON COMMIT DELETE ROWS";

static const char STAGE_TO_EVENTS[] =
"INSERT INTO alloc_events (batch, stream_id, id_ms, id_seq, ev_idx, type, user_id, item, qty,\n"
"  order_id, req, at_ms, at, expires_at_ms, state, fields)\n"
"SELECT batch, stream_id, id_ms, id_seq, ev_idx, type, user_id, item, qty, order_id, req,\n"
"  at_ms, at, expires_at_ms, state, fields FROM alloc_events_stage\n"
"ON CONFLICT DO NOTHING";

/* A page of results arrives by COPY (archive_results_copy writes its rows)
 * straight into alloc_results: it holds only the results the database does
 * not have as far as the run knows (archive_seen.h). When a row is there
 * all the same (another archiver on the batch), the page goes into this
 * table of the session, and one INSERT ... ON CONFLICT DO NOTHING moves
 * the rows that are new, in one transaction, as a chunk of the log does. */
static const char STAGE_RESULTS[] =
"CREATE TEMP TABLE IF NOT EXISTS alloc_results_stage (\n"
"  batch text, req_id text, user_id text, op text, status text, reason text, item text,\n"
"  order_id text, qty bigint, seq bigint, rank bigint, at_ms bigint, at timestamptz, result jsonb\n"
") ON COMMIT DELETE ROWS";

static const char STAGE_TO_RESULTS[] =
"INSERT INTO alloc_results (batch, req_id, user_id, op, status, reason, item, order_id, qty,\n"
"  seq, rank, at_ms, at, result)\n"
"SELECT batch, req_id, user_id, op, status, reason, item, order_id, qty, seq, rank, at_ms, at,\n"
"  result FROM alloc_results_stage\n"
"ON CONFLICT DO NOTHING";

static void set_err(archive_pg *p, const char *what)
{
    const char *m = p->conn ? PQerrorMessage(p->conn) : "out of memory";
    snprintf(p->err, sizeof p->err, "%s%s%s", what, *what ? ": " : "", m);
    for (char *c = p->err; *c; c++) if (*c == '\n') *c = ' ';
    size_t n = strlen(p->err);
    while (n && p->err[n - 1] == ' ') p->err[--n] = '\0';
}

static void quiet_notices(void *arg, const char *msg) { (void)arg; (void)msg; }

PGresult *archive_pg_query(archive_pg *p, const char *sql, int n, const char *const *params)
{
    if (!p->conn) { snprintf(p->err, sizeof p->err, "not connected"); return NULL; }
    PGresult *r = PQexecParams(p->conn, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return r;
    set_err(p, "postgresql");
    PQclear(r);
    return NULL;
}

int archive_pg_lost(const archive_pg *p)
{
    return !p->conn || PQstatus(p->conn) != CONNECTION_OK;
}

int archive_pg_open(archive_pg *p, const char *conninfo)
{
    p->conninfo = conninfo;
    if (p->conn && PQstatus(p->conn) == CONNECTION_OK) return 0;
    if (p->conn) PQfinish(p->conn);
    p->conn = PQconnectdb(conninfo);
    if (!p->conn || PQstatus(p->conn) != CONNECTION_OK) {
        set_err(p, "postgresql connect");
        return -1;
    }
    PQsetNoticeProcessor(p->conn, quiet_notices, NULL);
    /* the schema in one transaction: a simple query with several
     * statements is one implicit transaction */
    PGresult *r = PQexec(p->conn, SCHEMA);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    PQclear(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        set_err(p, "postgresql schema");
        return -1;
    }
    r = archive_pg_query(p, STAGE, 0, NULL);
    PQclear(r);
    if (r) r = archive_pg_query(p, STAGE_RESULTS, 0, NULL);
    PQclear(r);
    return r ? 0 : -1;
}

void archive_pg_close(archive_pg *p)
{
    if (p->conn) PQfinish(p->conn);
    p->conn = NULL;
}

static int put(archive_pg *p, const char *sql, const char *batch, const char *rows, int64_t *inserted)
{
    const char *params[2] = { batch, rows };
    PGresult *r = archive_pg_query(p, sql, 2, params);
    if (!r) return -1;
    if (inserted) *inserted = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return 0;
}

int archive_pg_put_batch(archive_pg *p, const char *batch, const char *meta, const char *capacity,
                         const char *stats)
{
    const char *params[4] = { batch, meta, capacity, stats };
    PGresult *r = archive_pg_query(p,
        "INSERT INTO alloc_batches (batch, kind, meta, capacity, stats) "
        "VALUES ($1, $2::jsonb->>'kind', $2::jsonb, $3::jsonb, $4::jsonb) "
        "ON CONFLICT (batch) DO UPDATE SET kind = EXCLUDED.kind, meta = EXCLUDED.meta, "
        "capacity = EXCLUDED.capacity, stats = EXCLUDED.stats, updated_at = now()", 4, params);
    if (!r) return -1;
    PQclear(r);
    return 0;
}

/* Runs sql (no parameters); 0, or -1 with err set. */
static int exec(archive_pg *p, const char *sql, int64_t *tuples)
{
    PGresult *r = archive_pg_query(p, sql, 0, NULL);
    if (!r) return -1;
    if (tuples) *tuples = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return 0;
}

#define EVENT_COLUMNS "batch, stream_id, id_ms, id_seq, ev_idx, type, user_id, item, qty, " \
    "order_id, req, at_ms, at, expires_at_ms, state, fields"

/* The two COPY statements, written out whole: a table name spliced in
 * would read as a Redis command to tests/data/acl/sent-commands.sh. */
static const char COPY_EVENTS[] = "COPY alloc_events (" EVENT_COLUMNS ") FROM STDIN (FORMAT binary)";
static const char COPY_STAGE[] = "COPY alloc_events_stage (" EVENT_COLUMNS ") FROM STDIN (FORMAT binary)";
static const char COPY_RESULTS[] = "COPY alloc_results (" ARCHIVE_RESULT_COLUMNS ") FROM STDIN (FORMAT binary)";
static const char COPY_RESULTS_STAGE[] =
    "COPY alloc_results_stage (" ARCHIVE_RESULT_COLUMNS ") FROM STDIN (FORMAT binary)";

/* Runs sql, a COPY ... FROM STDIN, with the rows of copy; 0, -1 with err
 * set, or -2 when a row is there already (unique_violation). */
static int copy_in(archive_pg *p, const char *sql, const char *copy, size_t len, int64_t *rows)
{
    PGresult *r = PQexec(p->conn, sql);
    int ok = r && PQresultStatus(r) == PGRES_COPY_IN;
    PQclear(r);
    if (!ok) { set_err(p, "postgresql copy"); return -1; }
    const size_t piece = 1 << 20;
    for (size_t at = 0; ok && at < len; at += piece)
        ok = PQputCopyData(p->conn, copy + at, (int)(len - at < piece ? len - at : piece)) == 1;
    ok = PQputCopyEnd(p->conn, ok ? NULL : "archive: sending failed") == 1 && ok;
    /* the COPY's own result, then the NULL that ends it */
    int dup = 0;
    while ((r = PQgetResult(p->conn)) != NULL) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            dup = ok && state && !strcmp(state, "23505");
            ok = 0;
        } else if (rows) *rows = strtoll(PQcmdTuples(r), NULL, 10);
        PQclear(r);
    }
    if (!ok) set_err(p, "postgresql copy");
    return ok ? 0 : dup ? -2 : -1;
}

static void rollback(archive_pg *p)
{
    /* keep the first error; a lost connection rolls back by itself */
    char err[sizeof p->err];
    memcpy(err, p->err, sizeof err);
    if (!archive_pg_lost(p)) PQclear(PQexec(p->conn, "ROLLBACK"));
    memcpy(p->err, err, sizeof err);
}

/* Rows through a staging table (copy_sql fills it, move_sql moves the new
 * rows on), in one transaction. 0 or -1. */
static int copy_staged(archive_pg *p, const char *copy_sql, const char *move_sql, const char *copy,
                       size_t len, int64_t *inserted)
{
    int rc = exec(p, "BEGIN", NULL);
    if (rc == 0) rc = copy_in(p, copy_sql, copy, len, NULL);
    if (rc == 0) rc = exec(p, move_sql, inserted);
    if (rc == 0) rc = exec(p, "COMMIT", NULL);
    if (rc < 0) rollback(p);
    return rc < 0 ? -1 : 0;
}

/* The COPY alone is one statement of a simple query, so it commits by
 * itself, and the server reports the commit before the COPY's result: no
 * BEGIN and COMMIT round trips. */
int archive_pg_copy_events(archive_pg *p, const char *copy, size_t len, int64_t *inserted)
{
    if (!p->conn) { snprintf(p->err, sizeof p->err, "not connected"); return -1; }
    int rc = copy_in(p, COPY_EVENTS, copy, len, inserted);
    /* a chunk of which a row is there already */
    return rc == -2 ? copy_staged(p, COPY_STAGE, STAGE_TO_EVENTS, copy, len, inserted) : rc;
}

int archive_pg_copy_results(archive_pg *p, const char *copy, size_t len, int64_t *inserted)
{
    if (!p->conn) { snprintf(p->err, sizeof p->err, "not connected"); return -1; }
    int rc = copy_in(p, COPY_RESULTS, copy, len, inserted);
    return rc == -2 ? copy_staged(p, COPY_RESULTS_STAGE, STAGE_TO_RESULTS, copy, len, inserted) : rc;
}

/* ------------------------------------------------ the chunk in flight -- */

enum { FL_NONE, FL_COPY, FL_FAILED };
#define FL_PIECE ((size_t)1 << 16)

static int fl_fail(archive_pg *p, const char *what)
{
    if (p->fl_state != FL_FAILED) set_err(p, what);
    p->fl_state = FL_FAILED;
    return -1;
}

int archive_pg_copy_start(archive_pg *p, const char *copy, size_t len)
{
    assert(p->fl_state == FL_NONE);
    p->fl_copy = copy;
    p->fl_len = len;
    p->fl_sent = 0;
    p->fl_state = FL_FAILED;
    if (!p->conn) { snprintf(p->err, sizeof p->err, "not connected"); return -1; }
    if (PQsendQuery(p->conn, COPY_EVENTS) != 1) return fl_fail(p, "postgresql copy");
    PGresult *r = PQgetResult(p->conn);
    int in = r && PQresultStatus(r) == PGRES_COPY_IN;
    PQclear(r);
    if (!in) {
        set_err(p, "postgresql copy");
        while ((r = PQgetResult(p->conn)) != NULL) PQclear(r);
        return -1;
    }
    p->fl_state = FL_COPY;
    /* libpq queues what the socket does not take and never blocks */
    if (PQsetnonblocking(p->conn, 1) != 0) return fl_fail(p, "postgresql copy");
    return archive_pg_copy_pump(p);
}

int archive_pg_copy_pump(archive_pg *p)
{
    if (p->fl_state != FL_COPY) return p->fl_state == FL_FAILED ? -1 : 0;
    for (;;) {
        int f = PQflush(p->conn);
        if (f < 0) return fl_fail(p, "postgresql copy");
        if (f > 0 || p->fl_sent == p->fl_len) return 0;   /* the socket is full, or all sent */
        size_t n = p->fl_len - p->fl_sent < FL_PIECE ? p->fl_len - p->fl_sent : FL_PIECE;
        if (PQputCopyData(p->conn, p->fl_copy + p->fl_sent, (int)n) != 1)
            return fl_fail(p, "postgresql copy");
        p->fl_sent += n;
    }
}

int archive_pg_copy_fd(archive_pg *p)
{
    if (p->fl_state != FL_COPY || !p->conn) return -1;
    if (p->fl_sent < p->fl_len || PQflush(p->conn) > 0) return PQsocket(p->conn);
    return -1;
}

/* Waits until the server can take more, reading what it sent meanwhile. */
static int fl_wait(archive_pg *p)
{
    struct pollfd pf = { PQsocket(p->conn), POLLOUT | POLLIN, 0 };
    if (poll(&pf, 1, -1) < 0 && errno != EINTR) return fl_fail(p, "postgresql copy: poll");
    if ((pf.revents & POLLIN) && PQconsumeInput(p->conn) != 1) return fl_fail(p, "postgresql copy");
    return 0;
}

int archive_pg_copy_finish(archive_pg *p, int64_t *inserted)
{
    assert(p->fl_state != FL_NONE);
    while (p->fl_state == FL_COPY && (p->fl_sent < p->fl_len || PQflush(p->conn) > 0))
        if (archive_pg_copy_pump(p) == 0 && fl_wait(p) < 0) break;
    int ok = p->fl_state == FL_COPY, dup = 0;
    if (p->conn && PQstatus(p->conn) == CONNECTION_OK && PQisnonblocking(p->conn)) {
        if (PQputCopyEnd(p->conn, ok ? NULL : "archive: sending failed") != 1) ok = 0;
        /* the COPY's own result (after its commit), then the NULL that ends
         * it; PQgetResult sends what is still queued first */
        PGresult *r;
        while ((r = PQgetResult(p->conn)) != NULL) {
            ExecStatusType st = PQresultStatus(r);
            if (st == PGRES_COMMAND_OK) {
                if (inserted) *inserted = strtoll(PQcmdTuples(r), NULL, 10);
            } else {
                const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                dup = ok && state && !strcmp(state, "23505");
                if (ok) set_err(p, "postgresql copy");
                ok = 0;
            }
            PQclear(r);
            if (st == PGRES_COPY_IN) break;   /* the end could not be sent: a lost connection */
        }
        if (PQsetnonblocking(p->conn, 0) != 0 && ok) { set_err(p, "postgresql copy"); ok = 0; }
    } else if (ok) {
        set_err(p, "postgresql copy");
        ok = 0;
    }
    if (!ok && !dup && p->conn && PQstatus(p->conn) == CONNECTION_OK && PQtransactionStatus(p->conn) != PQTRANS_IDLE) {
        /* a connection in an unknown state: drop it, the caller retries */
        PQfinish(p->conn);
        p->conn = NULL;
    }
    const char *copy = p->fl_copy;
    size_t len = p->fl_len;
    p->fl_state = FL_NONE;
    p->fl_copy = NULL;
    if (dup) return copy_staged(p, COPY_STAGE, STAGE_TO_EVENTS, copy, len, inserted);
    return ok ? 0 : -1;
}

/* [{"k":item,"c":capacity text,"a":attrs text or null}, ...]: an attrs
 * value that is not JSON is kept as a JSON string. */
int archive_pg_put_items(archive_pg *p, const char *batch, const char *json_rows)
{
    return put(p,
        "INSERT INTO alloc_items (batch, item, capacity, attrs)\n"
        "SELECT $1, e->>'k', " INTOF("e->>'c'") ", e->'a' FROM jsonb_array_elements($2::jsonb) AS e\n"
        "ON CONFLICT (batch, item) DO UPDATE SET capacity = EXCLUDED.capacity, attrs = EXCLUDED.attrs,\n"
        "  updated_at = now()\n"
        /* an unchanged item leaves its row as it is (no dead tuple a pass) */
        "WHERE (alloc_items.capacity, alloc_items.attrs) IS DISTINCT FROM (EXCLUDED.capacity, EXCLUDED.attrs)",
        batch, json_rows, NULL);
}

/* One scan, its rows streamed (libpq's single-row mode): a million ids
 * never sit in one result, and no page asks the server to sort or to find
 * its place again. A set out of memory stops adding: those ids are offered
 * again. */
int archive_pg_results_ids(archive_pg *p, const char *batch, archive_seen *into)
{
    if (!p->conn) { snprintf(p->err, sizeof p->err, "not connected"); return -1; }
    const char *params[1] = { batch };
    if (PQsendQueryParams(p->conn, "SELECT req_id FROM alloc_results WHERE batch = $1", 1, NULL, params,
                          NULL, NULL, 0) != 1 || PQsetSingleRowMode(p->conn) != 1) {
        set_err(p, "postgresql");
        PGresult *r;
        while ((r = PQgetResult(p->conn)) != NULL) PQclear(r);
        return -1;
    }
    int ok = 1, full = 0;
    PGresult *r;
    while ((r = PQgetResult(p->conn)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_SINGLE_TUPLE && !full) full = archive_seen_add(into, PQgetvalue(r, 0, 0)) < 0;
        else if (st != PGRES_SINGLE_TUPLE && st != PGRES_TUPLES_OK && ok) { set_err(p, "postgresql"); ok = 0; }
        PQclear(r);
    }
    return ok ? 0 : -1;
}

int archive_pg_pool_entries(archive_pg *p, const char *batch, int64_t *n)
{
    const char *params[1] = { batch };
    PGresult *r = archive_pg_query(p, "SELECT pool_entries FROM alloc_lottery WHERE batch = $1", 1, params);
    if (!r) return -1;
    *n = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return 0;
}

int archive_pg_put_pool(archive_pg *p, const char *batch, int64_t from, const char *json_entries)
{
    char at[24];
    snprintf(at, sizeof at, "%lld", (long long)from);
    const char *params[3] = { batch, json_entries, at };
    PGresult *r = archive_pg_query(p,
        "INSERT INTO alloc_lottery_pool (batch, pos, entry)\n"
        "SELECT $1, $3::bigint + n - 1, e FROM jsonb_array_elements_text($2::jsonb) WITH ORDINALITY AS t(e, n)\n"
        "ON CONFLICT DO NOTHING", 3, params);
    if (!r) return -1;
    PQclear(r);
    return 0;
}

int archive_pg_put_lottery(archive_pg *p, const char *batch, const char *early_served, const char *done,
                           const char *entries)
{
    const char *params[4] = { batch, early_served, done, entries };
    PGresult *r = archive_pg_query(p,
        "INSERT INTO alloc_lottery (batch, early_served, lottery_done, pool_entries)\n"
        "VALUES ($1, " INTOF("$2::text") ", $3::text = '1', " INTOF("$4::text") ")\n"
        "ON CONFLICT (batch) DO UPDATE SET early_served = EXCLUDED.early_served,\n"
        "  lottery_done = EXCLUDED.lottery_done, pool_entries = EXCLUDED.pool_entries, updated_at = now()",
        4, params);
    if (!r) return -1;
    PQclear(r);
    return 0;
}
