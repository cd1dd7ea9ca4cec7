/* archive_pg.c -- see archive_pg.h. The schema is documented in
 * docs/ARCHIVE.md; keep the two in step. */
#include "allocctl/archive_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A text that is an integer of at most 18 digits, else NULL: stream fields
 * are strings and a hand-written or future entry must not make the whole
 * chunk fail a cast. */
#define INTOF(x) "(CASE WHEN (" x ") ~ '^-?[0-9]{1,18}$' THEN (" x ")::bigint END)"
#define TSOF(x)  "to_timestamp(" INTOF(x) " / 1000.0)"

/* Created once, under an advisory lock so two archivers starting together
 * do not race on the catalog. */
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
"CREATE INDEX IF NOT EXISTS alloc_events_user  ON alloc_events (batch, user_id);\n"
"CREATE INDEX IF NOT EXISTS alloc_events_order ON alloc_events (order_id) WHERE order_id IS NOT NULL;\n"
"CREATE INDEX IF NOT EXISTS alloc_events_item  ON alloc_events (batch, item, type);\n"
"CREATE INDEX IF NOT EXISTS alloc_events_req   ON alloc_events (batch, req);\n"
"CREATE INDEX IF NOT EXISTS alloc_events_at    ON alloc_events (at);\n"
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
");\n";

static const char PUT_EVENTS[] =
"INSERT INTO alloc_events (batch, stream_id, id_ms, id_seq, ev_idx, type, user_id, item, qty,\n"
"  order_id, req, at_ms, at, expires_at_ms, state, fields)\n"
"SELECT $1, e->>'id', split_part(e->>'id', '-', 1)::bigint, split_part(e->>'id', '-', 2)::bigint,\n"
"  (e->>'i')::integer, coalesce(e->'f'->>'type', ''), nullif(e->'f'->>'user', ''),\n"
"  nullif(e->'f'->>'item', ''), " INTOF("e->'f'->>'qty'") ", nullif(e->'f'->>'order', ''),\n"
"  nullif(e->'f'->>'req', ''), " INTOF("e->'f'->>'at'") ", " TSOF("e->'f'->>'at'") ",\n"
"  " INTOF("e->'f'->>'expires_at'") ", nullif(e->'f'->>'state', ''), e->'f'\n"
"FROM jsonb_array_elements($2::jsonb) AS e\n"
"ON CONFLICT DO NOTHING";

/* r->>'x' is NULL when a result is not an object (kept as it was read). */
static const char PUT_RESULTS[] =
"INSERT INTO alloc_results (batch, req_id, user_id, op, status, reason, item, order_id, qty,\n"
"  seq, rank, at_ms, at, result)\n"
"SELECT $1, e->>'k', e->'r'->>'user', e->'r'->>'op', coalesce(e->'r'->>'status', ''),\n"
"  e->'r'->>'reason', e->'r'->>'item', e->'r'->>'order', " INTOF("e->'r'->>'qty'") ",\n"
"  " INTOF("e->'r'->>'seq'") ", " INTOF("e->'r'->>'rank'") ", " INTOF("e->'r'->>'at'") ",\n"
"  " TSOF("e->'r'->>'at'") ", e->'r'\n"
"FROM jsonb_array_elements($2::jsonb) AS e\n"
"WHERE (e->'r'->>'status') IS DISTINCT FROM 'waiting'\n"
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
    return 0;
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

int archive_pg_put_events(archive_pg *p, const char *batch, const char *json_rows, int64_t *inserted)
{
    return put(p, PUT_EVENTS, batch, json_rows, inserted);
}

int archive_pg_put_results(archive_pg *p, const char *batch, const char *json_rows, int64_t *inserted)
{
    return put(p, PUT_RESULTS, batch, json_rows, inserted);
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
