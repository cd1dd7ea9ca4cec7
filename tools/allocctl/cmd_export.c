/* cmd_export.c -- `allocctl export B --what results|holders|log --format
 * csv|jsonl`: a batch for a spreadsheet or a loader, straight from Redis.
 *
 * Streams: one page of HSCAN (results, holders) or XRANGE (log) at a time,
 * written out before the next is read, so memory stays the same for ten
 * results or ten million (docs/PERFORMANCE.md has the figure). CSV is RFC
 * 4180 with a header line; every CSV row ends with the whole record as JSON
 * so nothing a future field adds is lost. JSON Lines carry the record as
 * allocd wrote it (results), or as {"user":..,"holding":..} and
 * {"id":..,<fields>} for holders and log entries.
 *
 * HSCAN may return a field twice when the hash is resized during the scan,
 * which only happens while the batch is live: export a closed batch for an
 * exact file (docs/ARCHIVE.md).
 */
#include "allocctl/cmd_archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/archive_log.h"
#include "allocctl/ctl_queue.h"

typedef struct exporter {
    ctx *x;
    FILE *out;
    int csv;
} exporter;

/* ---- CSV ---- */

static void csv_cell(FILE *o, const char *s, size_t n, int first)
{
    if (!first) fputc(',', o);
    if (!s) return;
    int plain = 1;
    for (size_t i = 0; plain && i < n; i++)
        plain = s[i] != ',' && s[i] != '"' && s[i] != '\r' && s[i] != '\n';
    if (plain) { fwrite(s, 1, n, o); return; }
    fputc('"', o);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') fputc('"', o);
        fputc(s[i], o);
    }
    fputc('"', o);
}

/* A JSON value as a cell: strings bare, numbers as text, else nothing. */
static void csv_json(FILE *o, const json_t *v)
{
    char num[40];
    if (json_is_string(v)) csv_cell(o, json_string_value(v), json_string_length(v), 0);
    else if (json_is_integer(v)) {
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        csv_cell(o, num, strlen(num), 0);
    } else if (json_is_true(v)) csv_cell(o, "true", 4, 0);
    else if (json_is_false(v)) csv_cell(o, "false", 5, 0);
    else fputc(',', o);
}

static void csv_fields(FILE *o, const json_t *obj, const char *const *cols, size_t n)
{
    for (size_t i = 0; i < n; i++) csv_json(o, json_object_get(obj, cols[i]));
}

static void csv_whole(FILE *o, const char *raw, size_t len)
{
    csv_cell(o, raw, len, 0);
    fputc('\n', o);
}

/* ---- results ---- */

static const char *const RESULT_COLS[] = { "user", "op", "status", "reason", "item", "order", "qty",
                                           "seq", "rank", "at", "expires_at" };
#define N_RESULT_COLS (sizeof RESULT_COLS / sizeof *RESULT_COLS)

static void put_result(exporter *e, const redisReply *k, const redisReply *v)
{
    if (!e->csv) {
        if (v->len && v->str[0] == '{' && !memchr(v->str, '\n', v->len)) {
            fwrite(v->str, 1, v->len, e->out);
            fputc('\n', e->out);
            return;
        }
        json_t *w = json_pack("{s:s%, s:s%}", "id", k->str, k->len, "raw", v->str, v->len);
        if (w) json_dumpf(w, e->out, JSON_COMPACT);
        fputc('\n', e->out);
        json_decref(w);
        return;
    }
    json_t *r = json_loadb(v->str, v->len, 0, NULL);
    csv_cell(e->out, k->str, k->len, 1);
    csv_fields(e->out, r, RESULT_COLS, N_RESULT_COLS);
    csv_whole(e->out, v->str, v->len);
    json_decref(r);
}

/* ---- holders ---- */

static void put_holder(exporter *e, const redisReply *k, const redisReply *v)
{
    json_t *h = json_loadb(v->str, v->len, 0, NULL);
    if (!e->csv) {
        json_t *w = h ? json_pack("{s:s%, s:O}", "user", k->str, k->len, "holding", h)
                      : json_pack("{s:s%, s:s%}", "user", k->str, k->len, "raw", v->str, v->len);
        if (w) json_dumpf(w, e->out, JSON_COMPACT);
        fputc('\n', e->out);
        json_decref(w);
        json_decref(h);
        return;
    }
    /* one row per order (stock), or one per user (rooms) */
    json_t *orders = json_object_get(h, "orders");
    static const char *const ORDER_COLS[] = { "item", "order", "qty", "state", "expires_at" };
    size_t i, rows = 0;
    json_t *o;
    json_array_foreach(orders, i, o) {
        csv_cell(e->out, k->str, k->len, 1);
        csv_fields(e->out, o, ORDER_COLS, 5);
        fputs(",,", e->out);
        csv_whole(e->out, v->str, v->len);
        rows++;
    }
    if (!rows) {
        static const char *const ROOM_COLS[] = { "item", "order", "qty", "state", "expires_at", "since", "req" };
        csv_cell(e->out, k->str, k->len, 1);
        csv_fields(e->out, h, ROOM_COLS, 7);
        csv_whole(e->out, v->str, v->len);
    }
    json_decref(h);
}

static int export_hash(exporter *e, const char *key, void (*put)(exporter *, const redisReply *, const redisReply *))
{
    char cursor[32] = "0";
    do {
        redisReply *r = rcmd(e->x, "HSCAN %s %s COUNT %d", key, cursor, CTL_QUEUE_PAGE);
        if (!r) return EX_REDIS;
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        const redisReply *kv = r->element[1];
        for (size_t i = 0; i + 1 < kv->elements; i += 2) put(e, kv->element[i], kv->element[i + 1]);
        freeReplyObject(r);
        if (ferror(e->out)) { errmsg(e->x, "write error"); return EX_INPUT; }
    } while (strcmp(cursor, "0"));
    return EX_OK;
}

/* ---- log ---- */

static const char *const LOG_COLS[] = { "type", "user", "item", "qty", "order", "req", "at",
                                        "expires_at", "state" };
#define N_LOG_COLS (sizeof LOG_COLS / sizeof *LOG_COLS)

static void put_event(exporter *e, json_t *row)
{
    json_t *f = json_object_get(row, "f");
    const char *id = json_string_value(json_object_get(row, "id"));
    if (!e->csv) {
        json_t *w = json_pack("{s:s, s:I}", "id", id, "ev", json_integer_value(json_object_get(row, "i")));
        if (w && json_object_update(w, f) == 0) json_dumpf(w, e->out, JSON_COMPACT);
        fputc('\n', e->out);
        json_decref(w);
        return;
    }
    csv_cell(e->out, id, strlen(id), 1);
    csv_fields(e->out, f, LOG_COLS, N_LOG_COLS);
    char *all = json_dumps(f, JSON_COMPACT);
    csv_whole(e->out, all ? all : "", all ? strlen(all) : 0);
    free(all);
}

static int export_log(exporter *e)
{
    char start[80] = "-";
    for (;;) {
        redisReply *r = rcmd(e->x, "XRANGE %s %s + COUNT %d", e->x->k.log, start, CTL_QUEUE_PAGE);
        if (!r) return EX_REDIS;
        json_t *rows = json_array();
        for (size_t i = 0; rows && i < r->elements; i++) archive_log_entry_decode(r->element[i], rows);
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row) put_event(e, row);
        json_decref(rows);
        size_t n = r->elements;
        if (n) snprintf(start, sizeof start, "(%s", archive_log_entry_id(r->element[n - 1]));
        freeReplyObject(r);
        if (ferror(e->out)) { errmsg(e->x, "write error"); return EX_INPUT; }
        if (n < CTL_QUEUE_PAGE) return EX_OK;
    }
}

static const char HELP_EXPORT[] =
"Usage: allocctl export B --what results|holders|log [--format jsonl|csv] (default jsonl) [--out FILE]\n"
"\n"
"Writes a batch's results (P:{B}:results), holdings (P:{B}:holders) or event log\n"
"(P:{B}:log) to stdout (or FILE), a page at a time: memory stays constant however\n"
"large the batch. jsonl (default): one JSON object per line. csv: a header line,\n"
"the usual fields as columns, and the whole record as JSON in the last column.\n"
"  results: id,user,op,status,reason,item,order,qty,seq,rank,at,expires_at,result\n"
"  holders: user,item,order,qty,state,expires_at,since,req,holding (stock: one row\n"
"           per order)\n"
"  log:     id,type,user,item,qty,order,req,at,expires_at,state,fields\n"
"Export a closed batch for an exact file: on a live batch HSCAN may repeat a\n"
"field. Exit 0 done, 2 usage, 3 Redis failed, 4 could not write.\n";

static const char *header(const char *what)
{
    if (!strcmp(what, "results")) return "id,user,op,status,reason,item,order,qty,seq,rank,at,expires_at,result\n";
    if (!strcmp(what, "holders")) return "user,item,order,qty,state,expires_at,since,req,holding\n";
    return "id,type,user,item,qty,order,req,at,expires_at,state,fields\n";
}

int cmd_export(ctx *x, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *b, *what = NULL, *format = "jsonl", *path = NULL;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "what", 0, &what, NULL }, { "format", 0, &format, NULL },
                         { "out", 'o', &path, NULL } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_EXPORT) : rc;
    if ((rc = one_batch(x, npos, pos, &b)) != EX_OK) return rc;
    if (!what || (strcmp(what, "results") && strcmp(what, "holders") && strcmp(what, "log"))) {
        errmsg(x, "--what must be results, holders or log (try --help)");
        return EX_USAGE;
    }
    if (strcmp(format, "csv") && strcmp(format, "jsonl")) {
        errmsg(x, "--format must be csv or jsonl");
        return EX_USAGE;
    }
    if ((rc = ctx_batch(x, b)) != EX_OK || (rc = ctx_connect(x)) != EX_OK) return rc;
    exporter e = { x, path ? fopen(path, "w") : stdout, !strcmp(format, "csv") };
    if (!e.out) { errmsg(x, "%s: cannot write", path); return EX_INPUT; }
    setvbuf(e.out, NULL, _IOFBF, 1 << 16);    /* before any output: allowed */
    if (e.csv) fputs(header(what), e.out);
    rc = !strcmp(what, "results") ? export_hash(&e, x->k.results, put_result)
       : !strcmp(what, "holders") ? export_hash(&e, x->k.holders, put_holder)
       : export_log(&e);
    if (fflush(e.out) != 0 && rc == EX_OK) { errmsg(x, "write error"); rc = EX_INPUT; }
    if (path && fclose(e.out) != 0 && rc == EX_OK) { errmsg(x, "%s: write error", path); rc = EX_INPUT; }
    return rc;
}
