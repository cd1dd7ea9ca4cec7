/* archive_long.c -- the long forms of the archive tests (make archive-long),
 * too slow for `make test`:
 *
 *   kills    allocd serves a stream of requests for --seconds while the
 *            archiver (--follow) is killed with SIGKILL at random moments
 *            (50-800 ms apart) and restarted, and PostgreSQL is restarted
 *            every 10 s; in the end every log entry and final result is in
 *            the database exactly once and reconcile exits 0.
 *   export   --results results (1,000,000) written to a batch, exported as
 *            CSV and as JSON Lines; the peak RSS of allocctl (wait4's
 *            ru_maxrss) must stay under 64 MB, and is printed next to the
 *            figure for a tenth as many results: the same, as a stream is.
 *   rate     events/s of `allocctl archive` into PostgreSQL for a log of
 *            --events events (200,000) written directly (docs/ARCHIVE.md),
 *            in the event format (one entry per event) and then in the
 *            chunk format (512 events an entry, the daemon's default).
 *   sale     one run: allocd decides a sale of --events units (200,000)
 *            to as many buyers, prepushed, with its default configuration;
 *            then `allocctl archive` copies its log. Prints allocd's grants/s
 *            (from the results' first to last `at`) beside the archive's
 *            events/s (from its start until every event is in; the results
 *            pass after that is timed apart); the target is archive events/s
 *            >= grants/s. Then an archiver with --follow: its first pass
 *            over the results (every row in the database already: their
 *            ids read first, then skipped) and, the batch having changed,
 *            its second (skipped too).
 *
 * Usage: archive_long [--seconds N] [--results N] [--events N]
 *                     [--only kills|export|rate|sale] [--chunk N]   (the archiver's;
 *                     without it, its default)
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "archive_fixture.h"

static int g_seconds = 60, g_results = 1000000, g_events = 200000;
/* g_chunk: the archiver's --chunk, or NULL for its default (the argument
 * lists below end early at a NULL) */
static const char *g_only, *g_chunk;

static int wanted(const char *name)
{
    return !g_only || !strcmp(g_only, name);
}

static void test_kills(void **state)
{
    afix *f = *state;
    if (!wanted("kills")) skip();
    afix_stock_batch(f, "L1", 100000, 5);
    afix_start_allocd(f, NULL);
    unsigned seed = (unsigned)getpid();
    int64_t end = harness_now_ms() + (int64_t)g_seconds * 1000, next_pg = harness_now_ms() + 10000;
    int kills = 0, pg_restarts = 0, pushed = 0;
    pid_t ar = 0;
    while (harness_now_ms() < end) {
        if (!ar) ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, "--follow", "--chunk",
                                     "200", "--results-interval-ms", "500", "--quiet", NULL);
        afix_stock_traffic_from(f, "L1", 300, pushed);
        pushed += 300;
        harness_sleep_ms(50 + (int)(rand_r(&seed) % 750));
        proc_reap(ar, SIGKILL);
        ar = 0;
        kills++;
        if (harness_now_ms() > next_pg) {
            assert_int_equal(proc_pg_restart(&f->pg), 0);
            pg_restarts++;
            next_pg = harness_now_ms() + 10000;
        }
    }
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "L1", "--quiet"));
    afix_assert_log_archived(f, "L1");
    afix_assert_results_archived(f, "L1");
    free(AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "L1"));
    print_message("kills: %d requests, %d kills of the archiver, %d PostgreSQL restarts, "
                  "%lld events and %lld results exactly once\n", pushed, kills, pg_restarts,
                  afix_pg_int(f, "SELECT count(*) FROM alloc_events"),
                  afix_pg_int(f, "SELECT count(*) FROM alloc_results"));
}

/* n results in the format allocd writes, HSET in pipelined pages. */
static void fill_results(afix *f, const char *b, int n)
{
    for (int i = 0; i < n; i += 1000) {
        int m = n - i < 1000 ? n - i : 1000;
        for (int j = i; j < i + m; j++)
            redisAppendCommand(f->c, "HSET alloc:{%s}:results r-%d {\"id\":\"r-%d\",\"user\":\"u-%d\","
                               "\"op\":\"buy\",\"status\":\"granted\",\"item\":\"sku-%d\",\"qty\":1,"
                               "\"order\":\"%llu\",\"rank\":%d,\"seq\":%d,\"at\":1763800000123}",
                               b, j, j, j, j % 50, 250000000000000000ULL + (unsigned long long)j, j + 1, j + 1);
        for (int j = 0; j < m; j++) {
            redisReply *r = NULL;
            assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK);
            freeReplyObject(r);
        }
    }
}

/* Runs allocctl export; returns its peak RSS in KB (ru_maxrss). */
static long export_rss(afix *f, const char *b, const char *format, long long *lines)
{
    char out[400], cmd[1200];
    snprintf(out, sizeof out, "%s/export.%s", f->redis.dir, format);
    const char *bin = harness_allocctl_bin();
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, bin, "-c", f->conf, "export", b, "--what", "results", "--format", format,
              "--out", out, (char *)NULL);
        _exit(127);
    }
    int st;
    struct rusage ru;
    assert_int_equal(wait4(pid, &st, 0, &ru), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(cmd, sizeof cmd, "wc -l < %s", out);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_int_equal(fscanf(p, "%lld", lines), 1);
    pclose(p);
    unlink(out);
    return ru.ru_maxrss;
}

static void test_export_memory(void **state)
{
    afix *f = *state;
    if (!wanted("export")) skip();
    int small = g_results / 10;
    fill_results(f, "X1", small);
    long long lines;
    long rss_small = export_rss(f, "X1", "csv", &lines);
    assert_int_equal(lines, small + 1);
    fill_results(f, "X2", g_results);
    int64_t t0 = harness_now_ms();
    long rss_csv = export_rss(f, "X2", "csv", &lines);
    int64_t t1 = harness_now_ms();
    assert_int_equal(lines, g_results + 1);
    long rss_jsonl = export_rss(f, "X2", "jsonl", &lines);
    assert_int_equal(lines, g_results);
    print_message("export: peak RSS %ld KB for %d results (csv), %ld KB (csv) and %ld KB (jsonl) "
                  "for %d results; csv of %d results in %.1f s\n", rss_small, small, rss_csv, rss_jsonl,
                  g_results, g_results, (double)(t1 - t0) / 1000.0);
    assert_true(rss_csv < 64 * 1024 && rss_jsonl < 64 * 1024);
}

/* XADDs n events to alloc:{b}:log, one entry each (per_entry 1, the
 * event format) or per_entry to an entry (the chunk format). */
static void write_log(afix *f, const char *b, int n, int per_entry)
{
    size_t cap = (size_t)per_entry * 96 + 16;
    char *ev = malloc(cap);
    assert_non_null(ev);
    int pending = 0;
    for (int i = 0; i < n; i += per_entry) {
        int m = n - i < per_entry ? n - i : per_entry;
        if (per_entry == 1) {
            redisAppendCommand(f->c, "XADD alloc:{%s}:log * type grant user u-%d item sku-%d qty 1 "
                               "order %llu req r-%d at 1763800000123", b, i, i % 50,
                               250000000000000000ULL + (unsigned long long)i, i);
        } else {
            size_t len = 0;
            ev[len++] = '[';
            for (int j = i; j < i + m; j++)
                len += (size_t)snprintf(ev + len, cap - len, "%s[\"grant\",\"u-%d\",\"sku-%d\",1,\"%llu\",\"r-%d\","
                                        "1763800000123]", j > i ? "," : "", j, j % 50,
                                        250000000000000000ULL + (unsigned long long)j, j);
            snprintf(ev + len, cap - len, "]");
            redisAppendCommand(f->c, "XADD alloc:{%s}:log * format chunk n %d events %s", b, m, ev);
        }
        if (++pending == 1000 || i + per_entry >= n) {
            for (; pending > 0; pending--) {
                redisReply *r = NULL;
                assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK);
                assert_int_equal(r->type, REDIS_REPLY_STRING);
                freeReplyObject(r);
            }
        }
    }
    free(ev);
}

/* Runs allocctl archive B to the end; its wall time in ms, CPU in *cpu. */
static int64_t run_archive(afix *f, const char *b, double *cpu)
{
    const char *bin = harness_allocctl_bin();
    int64_t t0 = harness_now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, bin, "-c", f->conf, "archive", "--pg", f->pg.conninfo, b, "--quiet",
              g_chunk ? "--chunk" : (char *)NULL, g_chunk, (char *)NULL);
        _exit(127);
    }
    int st;
    struct rusage ru;
    assert_int_equal(wait4(pid, &st, 0, &ru), pid);
    int64_t ms = harness_now_ms() - t0;
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    return ms ? ms : 1;
}

static void rate_of(afix *f, const char *b, int per_entry, const char *format)
{
    write_log(f, b, g_events, per_entry);
    double cpu;
    int64_t ms = run_archive(f, b, &cpu);
    char q[160];
    snprintf(q, sizeof q, "SELECT count(*) FROM alloc_events WHERE batch = '%s'", b);
    assert_int_equal(afix_pg_int(f, q), g_events);
    print_message("rate: %d events (%s format) archived in %.2f s: %.0f events/s into PostgreSQL "
                  "(chunk %s); allocctl CPU %.2f s (%.1f us/event), the rest is PostgreSQL and Redis\n",
                  g_events, format, (double)ms / 1000.0, (double)g_events * 1000.0 / (double)ms, g_chunk ? g_chunk : "default",
                  cpu, cpu * 1e6 / g_events);
}

static void test_archive_rate(void **state)
{
    afix *f = *state;
    if (!wanted("rate")) skip();
    rate_of(f, "R1", 1, "event");
    rate_of(f, "R2", 512, "chunk");
}

/* min and max of the results' `at` (ms), over the whole hash */
static void results_span(afix *f, const char *b, long long *first, long long *last)
{
    char cursor[32] = "0";
    *first = -1;
    *last = -1;
    do {
        redisReply *r = redisCommand(f->c, "HSCAN alloc:{%s}:results %s COUNT 5000", b, cursor);
        assert_true(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 1; i < r->element[1]->elements; i += 2) {
            const char *at = strstr(r->element[1]->element[i]->str, "\"at\":");
            long long v = at ? atoll(at + 5) : -1;
            if (v > 0 && (*first < 0 || v < *first)) *first = v;
            if (v > *last) *last = v;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0"));
}

/* The sale: allocd drains --events prepushed buys of one unit each. */
static double sale_grants_per_s(afix *f, const char *b)
{
    itest_cmd(f->c, "HSET alloc:{%s}:meta kind stock per_user 1", b);
    itest_cmd(f->c, "HSET alloc:{%s}:capacity sku-1 %d", b, g_events);
    itest_cmd(f->c, "SADD alloc:batches %s", b);
    for (int i = 0; i < g_events; i += 1000) {
        for (int j = i; j < i + 1000 && j < g_events; j++)
            redisAppendCommand(f->c, "RPUSH alloc:{%s}:queue {\"id\":\"r-%d\",\"user\":\"u-%d\",\"op\":\"buy\","
                               "\"item\":\"sku-1\"}", b, j, j);
        for (int j = i; j < i + 1000 && j < g_events; j++) {
            redisReply *r = NULL;
            assert_int_equal(redisGetReply(f->c, (void **)&r), REDIS_OK);
            freeReplyObject(r);
        }
    }
    afix_start_allocd(f, HARNESS_HEAP_DEFAULT); /* the default configuration: the chunk log, the reserve */
    afix_wait_processed(f, b, g_events);
    assert_int_equal(proc_int(f->c, "HGET alloc:{%s}:stats granted", b), g_events);
    long long first, last;
    results_span(f, b, &first, &last);
    assert_true(first > 0 && last >= first);
    return (double)g_events * 1000.0 / (double)(last > first ? last - first : 1);
}

/* Waits until P:{B}:archive's results_passes exceeds after (60 s at most);
 * the time it took, in ms. */
static int64_t pass_ms(afix *f, const char *b, long long after)
{
    int64_t t0 = harness_now_ms();
    for (int i = 0; i < 12000 && proc_int(f->c, "HGET alloc:{%s}:archive results_passes", b) <= after; i++)
        harness_sleep_ms(5);
    assert_true(proc_int(f->c, "HGET alloc:{%s}:archive results_passes", b) > after);
    return harness_now_ms() - t0;
}

/* A following archiver over the sale's results, all archived already: its
 * first pass (the database's ids read, then every field skipped), then the
 * next after the batch changed (skipped again). */
static void sale_passes(afix *f, const char *b)
{
    itest_cmd(f->c, "DEL alloc:{%s}:archive", b);
    pid_t ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, b, "--follow", "--quiet",
                              "--results-interval-ms", "0", NULL);
    int64_t first = pass_ms(f, b, 0);
    itest_cmd(f->c, "HINCRBY alloc:{%s}:stats updated_at 1", b);
    int64_t second = pass_ms(f, b, 1);
    proc_reap(ar, SIGTERM);
    print_message("sale: a following archiver's passes over the %d results: the first %.2f s "
                  "(all in the database), the next %.2f s (the batch changed)\n", g_events,
                  (double)first / 1000.0, (double)second / 1000.0);
}

static void test_sale(void **state)
{
    afix *f = *state;
    if (!wanted("sale")) skip();
    const char *b = "S1";
    double grants = sale_grants_per_s(f, b);
    long long events = itest_log_len(f->c, b);
    assert_int_equal(events, g_events);
    /* the heap's walk (75 - 300 ms after the results were read) before the
     * clock starts, not in spawn_as's fork (tools/proc/proc.c) */
    malloc_trim(0);
    pid_t ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, b, "--quiet", g_chunk ? "--chunk" : NULL, g_chunk, NULL);
    int64_t t0 = harness_now_ms(), t_events = 0;
    int st = 0, exited = 0;
    while (!(exited = proc_exited(ar, &st))) {
        if (!t_events && proc_int(f->c, "HGET alloc:{%s}:archive events", b) >= events)
            t_events = harness_now_ms();
        harness_sleep_ms(5);
    }
    int64_t t_end = harness_now_ms();
    if (!t_events) t_events = t_end;
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(afix_assert_log_archived(f, b), events);
    double archived = (double)events * 1000.0 / (double)(t_events > t0 ? t_events - t0 : 1);
    print_message("sale: allocd granted %lld units at %.0f grants/s; the archive copied its %lld events "
                  "at %.0f events/s (%.2f s), then the %d results in %.2f s; archive/allocd %.2fx "
                  "(target >= 1): %s\n", events, grants, events, archived, (double)(t_events - t0) / 1000.0,
                  g_events, (double)(t_end - t_events) / 1000.0, archived / grants,
                  archived >= grants ? "MET" : "NOT MET");
    sale_passes(f, b);
}

/* The fixture only for the parts asked for (--only): a skipped part
 * starts no server. */
static int setup_kills(void **state)  { *state = NULL; return wanted("kills") ? afix_setup(state) : 0; }
static int setup_export(void **state) { *state = NULL; return wanted("export") ? afix_setup(state) : 0; }
static int setup_rate(void **state)   { *state = NULL; return wanted("rate") ? afix_setup(state) : 0; }
static int setup_sale(void **state)   { *state = NULL; return wanted("sale") ? afix_setup(state) : 0; }

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds")) g_seconds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--results")) g_results = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--events")) g_events = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--only")) g_only = argv[i + 1];
        else if (!strcmp(argv[i], "--chunk")) g_chunk = argv[i + 1];
        else { fprintf(stderr, "usage: %s [--seconds N] [--results N] [--events N] [--only kills|export|rate|sale] [--chunk N]\n", argv[0]); return 2; }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kills, setup_kills, afix_teardown),
        cmocka_unit_test_setup_teardown(test_export_memory, setup_export, afix_teardown),
        cmocka_unit_test_setup_teardown(test_archive_rate, setup_rate, afix_teardown),
        cmocka_unit_test_setup_teardown(test_sale, setup_sale, afix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
