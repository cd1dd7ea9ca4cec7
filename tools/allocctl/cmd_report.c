/* cmd_report.c -- `allocctl report B [--html FILE] [--pg CONNINFO]`: what
 * happened in a round, for the people who ran it: a text summary on stdout
 * and, with --html, a self-contained page (report_html.c). The batch is
 * read from Redis, or from the PostgreSQL archive with --pg (a purged
 * batch); the figures are computed once (report_calc.c) for both. */
#include "allocctl/cmd_report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "allocctl/cmd_archive.h"
#include "allocctl/report_data.h"

static const char HELP_REPORT[] =
"Usage: allocctl report B [--html FILE] [--pg CONNINFO] [--requests FILE]\n"
"\n"
"What happened in batch B, for the office that ran the round: results by status,\n"
"rejections by reason, requests and grants over time, fill by building (rooms) or\n"
"units granted and the time each item sold out (stock), placement by priority band\n"
"(profile points, contract 11.3; said when there are none), the first-choice rate,\n"
"groups placed whole, waitlist outcomes, and the lottery's commitment, seed and\n"
"verification (the replay of `allocctl lottery verify`, from Redis).\n"
"\n"
"  --html FILE      also write a self-contained HTML page (inline SVG charts, no\n"
"                   script, nothing fetched from elsewhere)\n"
"  --pg CONNINFO    read the PostgreSQL archive (alloc_batches, alloc_results,\n"
"                   alloc_events; docs/ARCHIVE.md) instead of Redis: for a purged batch\n"
"  --requests FILE  the requests as pushed, one JSON per line: results do not carry\n"
"                   prefs, so auto's first-choice rate needs them\n"
"\n"
"Exit: 0 written, 1 no such batch, 2 usage, 3 Redis, 4 --html/--requests file, 5 PostgreSQL.\n";

static int report_run(ctx *x, const char *batch, const char *html, const char *pg, const char *requests)
{
    int rc = ctx_batch(x, batch);
    if (rc == EX_OK && !pg) rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    report_in in;
    rc = pg ? report_load_pg(x, pg, &in) : report_load_redis(x, &in);
    if (rc == EX_OK && requests) rc = report_load_requests(x, requests, &in);
    if (rc != EX_OK) { report_in_free(&in); return rc; }
    report_sum s;
    report_calc(&in, &s);
    report_text(stdout, batch, &in, &s);
    if (html) {
        FILE *f = fopen(html, "w");
        int bad = !f || report_html(f, batch, &in, &s) < 0;
        if (f && fclose(f) != 0) bad = 1;
        if (bad) { errmsg(x, "--html %s: %s", html, strerror(errno)); rc = EX_INPUT; }
        else printf("page: %s\n", html);
    }
    report_sum_free(&s);
    report_in_free(&in);
    return rc;
}

int cmd_report(ctx *x, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *b, *html = NULL, *pg = NULL, *requests = NULL;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "html", 0, &html, NULL }, { "pg", 0, &pg, NULL },
                         { "requests", 0, &requests, NULL } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_REPORT) : rc;
    rc = one_batch(x, npos, pos, &b);
    return rc ? rc : report_run(x, b, html, pg, requests);
}
