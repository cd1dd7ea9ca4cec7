/* test_archive.c -- the archive into PostgreSQL end to end: the real
 * allocd on a private redis-server, the real allocctl, and a private
 * PostgreSQL started by the test (tools/proc: proc_pg_start).
 *
 * What it holds the archive to (docs/ARCHIVE.md): every log entry becomes
 * exactly one alloc_events row and every final result one alloc_results
 * row, also across a rerun, kill -9 of the archiver and a PostgreSQL
 * restart during --follow; reconcile finds nothing on an honest copy and
 * names a hand-altered row or Redis field; trimming with an archive never
 * drops an entry the archive has not committed; export and purge do what
 * they say. The long forms (minutes of kills, a million results) are
 * tests/archive/archive_long.c (make archive-long).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <libpq-fe.h>

#include "archive_fixture.h"

/* ------------------------------------------------------------ tests -- */

/* Every ```sql block of docs/ARCHIVE.md runs against an archived batch. */
static void run_doc_sql(afix *f, const char *batch, const char *sold_out_item)
{
    FILE *d = fopen("docs/ARCHIVE.md", "r");
    assert_non_null(d);
    char line[1024], sql[8192];
    size_t len = 0;
    int in = 0, blocks = 0;
    while (fgets(line, sizeof line, d)) {
        if (!in && !strncmp(line, "```sql", 6)) { in = 1; len = 0; continue; }
        if (!in) continue;
        if (strncmp(line, "```", 3)) {
            char *at = strstr(line, "'flash-1'");
            if (at) {   /* the example batch -> ours */
                char rest[1024];
                snprintf(rest, sizeof rest, "%s", at + 9);
                snprintf(at, sizeof line - (size_t)(at - line), "'%s'%s", batch, rest);
            }
            len += (size_t)snprintf(sql + len, sizeof sql - len, "%s", line);
            continue;
        }
        in = 0;
        blocks++;
        PGresult *r = PQexec(f->db, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) fail_msg("docs/ARCHIVE.md query failed: %s\n%s", PQerrorMessage(f->db), sql);
        if (strstr(sql, "sold_out_at")) {   /* sold_out_item sold out, and is named */
            int found = 0;
            for (int i = 0; i < PQntuples(r); i++) found |= !strcmp(PQgetvalue(r, i, 0), sold_out_item);
            if (!found) fail_msg("the sold-out query of docs/ARCHIVE.md misses %s", sold_out_item);
        }
        PQclear(r);
    }
    fclose(d);
    assert_true(blocks >= 6);
}

static void test_stock_archive_and_reconcile(void **state)
{
    afix *f = *state;
    afix_stock_batch(f, "s1", 40, 3);
    itest_cmd(f->c, "HSET alloc:{s1}:capacity sku-3 5");     /* sells out */
    afix_start_allocd(f, NULL);
    afix_stock_traffic(f, "s1", 300);
    char *out = AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "s1");
    assert_non_null(strstr(out, "archive s1: events"));
    free(out);
    afix_assert_log_archived(f, "s1");
    afix_assert_results_archived(f, "s1");
    /* the typed columns are what PostgreSQL itself reads from the result */
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 's1' AND req_id LIKE 'r-%' AND ("
        "user_id IS DISTINCT FROM result->>'user' OR op IS DISTINCT FROM result->>'op' "
        "OR status <> coalesce(result->>'status', '') OR reason IS DISTINCT FROM result->>'reason' "
        "OR item IS DISTINCT FROM result->>'item' OR order_id IS DISTINCT FROM result->>'order' "
        "OR qty IS DISTINCT FROM (result->>'qty')::bigint OR seq IS DISTINCT FROM (result->>'seq')::bigint "
        "OR rank IS DISTINCT FROM (result->>'rank')::bigint OR at_ms IS DISTINCT FROM (result->>'at')::bigint "
        "OR at IS DISTINCT FROM to_timestamp((result->>'at')::bigint / 1000.0))"), 0);
    assert_true(afix_pg_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 's1' AND req_id LIKE 'r-%' "
                                "AND status = 'granted' AND order_id IS NOT NULL AND qty > 0 AND at IS NOT NULL") > 0);
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_batches WHERE batch = 's1' AND kind = 'stock' "
                                    "AND capacity->>'sku-3' = '5' AND stats->>'processed' IS NOT NULL"), 1);
    /* sku-3 (5 units, ~100 buyers) sold out, whatever cancels gave back later */
    assert_true(afix_pg_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 's1' AND reason = 'sold_out'") > 0);
    run_doc_sql(f, "s1", "sku-3");
    long long rows = afix_pg_int(f, "SELECT count(*) FROM alloc_events");
    /* a rerun adds nothing */
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "s1"));
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_events"), rows);
    out = AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "s1");
    assert_non_null(strstr(out, "OK"));
    free(out);

    /* a hand-altered result row is named */
    afix_pg_exec(f, "UPDATE alloc_results SET result = jsonb_set(result, '{status}', '\"rejected\"') "
                    "WHERE batch = 's1' AND req_id = 'r-5'");
    out = AFIX_CTL(f, 1, "reconcile", "--pg", f->pg.conninfo, "s1");
    assert_non_null(strstr(out, "r-5"));
    free(out);
    afix_pg_exec(f, "DELETE FROM alloc_results WHERE batch = 's1' AND req_id = 'r-5'");
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "s1"));
    free(AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "s1"));

    /* a hand-altered Redis field is named */
    char *held = harness_str(f->c, "HGET alloc:{s1}:free sku-1");
    assert_non_null(held);
    itest_cmd(f->c, "HSET alloc:{s1}:free sku-1 %lld", atoll(held) + 1);
    out = AFIX_CTL(f, 1, "reconcile", "--pg", f->pg.conninfo, "s1");
    assert_non_null(strstr(out, "sku-1"));
    free(out);
    itest_cmd(f->c, "HSET alloc:{s1}:free sku-1 %s", held);
    free(held);
    free(AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "s1"));

    /* results no daemon writes, archived by a rerun: not JSON, JSON but not an object, typed
     * fields that are not what their columns take */
    itest_cmd(f->c, "HSET alloc:{s1}:results odd-1 %s odd-2 %s odd-3 %s", "not json", "123",
              "{\"status\":\"granted\",\"qty\":\"7\",\"seq\":1.5,\"at\":999999999999999999}");
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "s1"));
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 's1' AND ("
        "(req_id = 'odd-1' AND status = '' AND user_id IS NULL AND result = to_jsonb('not json'::text)) "
        "OR (req_id = 'odd-2' AND status = '' AND at_ms IS NULL AND result = '123'::jsonb) "
        "OR (req_id = 'odd-3' AND status = 'granted' AND qty = 7 AND seq IS NULL "
        "AND at_ms = 999999999999999999 AND at IS NULL))"), 3);
}

static void test_room_archive_and_reconcile(void **state)
{
    afix *f = *state;
    afix_room_batch(f, "h1", 12, 2);
    afix_start_allocd(f, NULL);
    afix_room_traffic(f, "h1", 60);
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "h1"));
    afix_assert_log_archived(f, "h1");
    afix_assert_results_archived(f, "h1");
    char *out = AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "h1");
    free(out);
    /* a grant's room changed by hand in the database */
    afix_pg_exec(f, "UPDATE alloc_events SET fields = jsonb_set(fields, '{item}', '\"R999\"') "
                    "WHERE (batch, id_ms, id_seq) = (SELECT batch, id_ms, id_seq FROM alloc_events "
                    "WHERE batch = 'h1' AND type = 'grant' ORDER BY id_ms, id_seq LIMIT 1)");
    out = AFIX_CTL(f, 1, "reconcile", "--pg", f->pg.conninfo, "h1");
    assert_non_null(strstr(out, "R999"));
    free(out);
}

/* kill -9 of a following archiver at random moments while allocd writes,
 * and a PostgreSQL restart: every entry exactly once in the end. */
static void test_follow_kills_and_pg_restart(void **state)
{
    afix *f = *state;
    afix_stock_batch(f, "k1", 5000, 2);
    afix_stock_batch(f, "k0", 0, 1);        /* nothing to give: results, but never a log */
    afix_start_allocd(f, NULL);
    itest_cmd(f->c, "RPUSH alloc:{k0}:queue {\"id\":\"z1\",\"user\":\"u\",\"op\":\"buy\",\"item\":\"sku-1\"}");
    afix_wait_processed(f, "k0", 1);
    unsigned seed = (unsigned)getpid();
    for (int round = 0; round < 6; round++) {
        pid_t ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, "--follow",
                                  "--chunk", "50", "--results-interval-ms", "0", NULL);
        afix_stock_traffic_from(f, "k1", 150, round * 150);
        harness_sleep_ms(20 + (int)(rand_r(&seed) % 300));
        if (round == 3) assert_int_equal(proc_pg_restart(&f->pg), 0);
        proc_reap(ar, SIGKILL);
    }
    /* an archiver under another name dies with entries pending: they are
     * taken over (XAUTOCLAIM) by the next one */
    long long orphans = 0;
    for (int tries = 0; tries < 20 && orphans == 0; tries++) {
        afix_stock_traffic_from(f, "k1", 60, 1100 + tries * 60);
        long long before = proc_int(f->c, "HGET alloc:{k1}:archive events");
        pid_t other = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, "--follow", "--consumer",
                                     "other", "--chunk", "1", NULL);
        /* killed once it is archiving: mid-chunk, more often than not */
        for (int i = 0; i < 1000 && proc_int(f->c, "HGET alloc:{k1}:archive events") <= before; i++)
            harness_sleep_ms(2);
        proc_reap(other, SIGKILL);
        redisReply *p = redisCommand(f->c, "XPENDING alloc:{k1}:log archive");
        orphans = p && p->type == REDIS_REPLY_ARRAY ? p->element[0]->integer : 0;
        if (p) freeReplyObject(p);
    }
    assert_true(orphans > 0);
    pid_t ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, "--follow", "--claim-idle-ms", "0", NULL);
    harness_sleep_ms(300);
    assert_int_equal(proc_pg_restart(&f->pg), 0);   /* while it follows */
    afix_stock_traffic_from(f, "k1", 100, 900);
    /* and Redis restarts under it (and under allocd) */
    redisFree(f->c);
    assert_int_equal(harness_redis_restart(&f->redis), 0);
    f->c = harness_redis_connect(&f->redis);
    assert_non_null(f->c);
    afix_stock_traffic_from(f, "k1", 100, 1000);
    assert_true(proc_alive(&ar));
    afix_wait_archived(f, "k1", 20000);
    /* the archiver reports its lag about once a second: `top` (not a tty:
     * one snapshot) shows none once a report after the last chunk is in;
     * polled, so a loaded machine's late report is waited for */
    char *top = NULL;
    for (int64_t end = harness_now_ms() + 15000; ; harness_sleep_ms(200)) {
        free(top);
        top = AFIX_CTL(f, 0, "top");
        if (strstr(top, "/s lag 0 0.0s") || harness_now_ms() > end) break;
    }
    assert_non_null(strstr(top, "ARCHIVE"));
    assert_non_null(strstr(top, "/s lag 0 0.0s"));
    free(top);
    assert_int_equal(proc_stop(&ar, 10000), 0);
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "k1"));
    afix_assert_log_archived(f, "k1");
    afix_assert_results_archived(f, "k1");
    free(AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "k1"));
    assert_int_equal(proc_int(f->c, "EXISTS alloc:{k0}:log"), 0);
    redisReply *p = redisCommand(f->c, "XPENDING alloc:{k1}:log archive");
    assert_non_null(p);
    assert_int_equal(p->element[0]->integer, 0);     /* nothing left pending, for anyone */
    freeReplyObject(p);
    afix_assert_results_archived(f, "k0");
}

static long long xinfo_added(afix *f, const char *b)
{
    redisReply *r = redisCommand(f->c, "XINFO STREAM alloc:{%s}:log", b);
    long long v = -1;
    for (size_t i = 0; r && i + 1 < r->elements; i += 2)
        if (!strcmp(r->element[i]->str, "entries-added")) v = r->element[i + 1]->integer;
    if (r) freeReplyObject(r);
    return v;
}

/* log_maxlen with archive_group: nothing is trimmed before the archive has
 * its group, nothing it has not acknowledged ever is (a killed archiver's
 * pending entries included), and what it has is trimmed. In the event
 * format, so that stream entries and rows count alike. */
static void test_trim_waits_for_the_archive(void **state)
{
    afix *f = *state;
    char q[200];
    afix_conf(f, "archive_group = \"archive\";");
    afix_stock_batch(f, "t1", 300, 3);
    afix_start_allocd(f, "log_maxlen = 20;\narchive_group = \"archive\";\nlog_format = \"event\";");
    afix_stock_traffic_from(f, "t1", 300, 0);
    long long xlen = proc_int(f->c, "XLEN alloc:{t1}:log");
    assert_true(xlen > 100);
    assert_int_equal(xlen, xinfo_added(f, "t1"));        /* no group yet: nothing trimmed */

    /* a following archiver killed with entries pending */
    pid_t ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, "--follow", "--chunk", "7", NULL);
    afix_stock_traffic_from(f, "t1", 300, 300);
    /* killed once it has archived (a kill before it started would make the
     * check below hold trivially) */
    for (int i = 0; i < 5000 && proc_int(f->c, "HGET alloc:{t1}:archive events") <= 0; i++)
        harness_sleep_ms(2);
    proc_reap(ar, SIGKILL);
    afix_stock_traffic_from(f, "t1", 300, 600);
    long long pending = proc_int(f->c, "XLEN alloc:{t1}:log");
    snprintf(q, sizeof q, "SELECT count(*) FROM alloc_events WHERE batch = 't1'");
    long long in_db = afix_pg_int(f, q);
    assert_true(in_db > 0);
    /* whatever the database lacks is still in the log */
    assert_true(pending >= xinfo_added(f, "t1") - in_db);

    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "t1"));
    afix_stock_traffic_from(f, "t1", 200, 900);      /* now allocd may trim */
    long long added = xinfo_added(f, "t1");
    xlen = proc_int(f->c, "XLEN alloc:{t1}:log");
    assert_true(xlen < added);
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "t1"));
    assert_int_equal(afix_pg_int(f, q), added);
    char *out = AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, "t1");
    free(out);
    afix_assert_results_archived(f, "t1");
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void close_batch(afix *f, const char *b)
{
    itest_cmd(f->c, "RPUSH alloc:{%s}:ctl {\"id\":\"c-close\",\"op\":\"close\"}", b);
    char *st = NULL;
    for (int i = 0; i < 500; i++) {
        free(st);
        st = harness_str(f->c, "HGET alloc:{%s}:stats state", b);
        if (st && !strcmp(st, "closed")) break;
        harness_sleep_ms(20);
    }
    assert_string_equal(st, "closed");
    free(st);
}

static void test_export(void **state)
{
    afix *f = *state;
    afix_stock_batch(f, "e1", 30, 3);
    afix_start_allocd(f, NULL);
    afix_stock_traffic(f, "e1", 200);
    long long results = proc_int(f->c, "HLEN alloc:{e1}:results");
    long long holders = proc_int(f->c, "HLEN alloc:{e1}:holders");
    long long events = itest_log_len(f->c, "e1");
    char *out = AFIX_CTL(f, 0, "export", "e1", "--what", "results");
    assert_int_equal(count_lines(out), results);
    assert_non_null(strstr(out, "{\"id\":\"r-0\",\"user\":\"u-0\",\"op\":\"buy\",\"status\":\"granted\""));
    free(out);
    out = AFIX_CTL(f, 0, "export", "e1", "--what", "results", "--format", "csv");
    assert_int_equal(count_lines(out), results + 1);
    assert_memory_equal(out, "id,user,op,status,reason,item,order,qty,seq,rank,at,expires_at,result\n", 70);
    assert_non_null(strstr(out, "\nr-0,u-0,buy,granted,,sku-1,"));
    assert_non_null(strstr(out, ",\"{\"\"id\"\":\"\"r-0\"\""));     /* the JSON cell, quoted */
    free(out);
    out = AFIX_CTL(f, 0, "export", "e1", "--what", "holders");
    assert_int_equal(count_lines(out), holders);
    assert_non_null(strstr(out, "{\"user\":\"u-"));
    free(out);
    out = AFIX_CTL(f, 0, "export", "e1", "--what", "log", "--format", "csv");
    assert_int_equal(count_lines(out), events + 1);
    assert_non_null(strstr(out, ",grant,u-0,sku-1,1,"));
    free(out);
    out = AFIX_CTL(f, 0, "export", "e1", "--what", "log");
    assert_int_equal(count_lines(out), events);
    free(out);
    free(AFIX_CTL(f, 2, "export", "e1", "--what", "everything"));

    /* an entry of a type this version does not write (waitlists, groups):
     * archived with every field, not dropped */
    itest_cmd(f->c, "XADD alloc:{e1}:log * type wait user u-9 item sku-1 req r-w wait_pos 3 at 1763800000000");
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "e1"));
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_events WHERE batch = 'e1' AND type = 'wait' "
                                    "AND user_id = 'u-9' AND req = 'r-w' AND fields->>'wait_pos' = '3' "
                                    "AND at = to_timestamp(1763800000)"), 1);
    afix_assert_log_archived(f, "e1");
}

static long long batch_keys_left(afix *f, const char *b)
{
    redisReply *r = redisCommand(f->c, "KEYS alloc:{%s}:*", b);
    long long n = r ? (long long)r->elements : -1;
    if (r) freeReplyObject(r);
    return n;
}

static void test_purge_needs_closed_and_archived(void **state)
{
    afix *f = *state;
    afix_stock_batch(f, "p1", 30, 3);
    afix_start_allocd(f, NULL);
    afix_stock_traffic(f, "p1", 200);
    char *out = AFIX_CTL(f, 1, "purge", "p1");
    assert_non_null(strstr(out, "not closed"));
    assert_non_null(strstr(out, "never archived"));
    free(out);
    close_batch(f, "p1");
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "p1"));
    /* a request answered after the archive ran: its result is not in the database yet */
    itest_cmd(f->c, "RPUSH alloc:{p1}:queue {\"id\":\"late\",\"user\":\"u-1\",\"op\":\"buy\",\"item\":\"sku-1\"}");
    char *late = harness_wait_hget(f->c, "alloc:{p1}:results", "late", 10000);
    assert_non_null(late);
    free(late);
    out = AFIX_CTL(f, 1, "purge", "p1");
    assert_non_null(strstr(out, "results pass began before"));
    free(out);
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, "p1"));
    assert_true(batch_keys_left(f, "p1") > 5);
    out = AFIX_CTL(f, 0, "purge", "p1");
    assert_non_null(strstr(out, "purge p1: removed"));
    free(out);
    assert_int_equal(batch_keys_left(f, "p1"), 0);
    assert_int_equal(proc_int(f->c, "SISMEMBER alloc:batches p1"), 0);
    /* the database keeps it */
    assert_true(afix_pg_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 'p1'") > 200);
}

/* The status of request id once it is no longer `waiting` (10 s at most). */
static char *final_status(afix *f, const char *b, const char *id)
{
    for (int i = 0; i < 1000; i++) {
        char *res = harness_str(f->c, "HGET alloc:{%s}:results %s", b, id);
        json_t *j = res ? json_loads(res, 0, NULL) : NULL;
        free(res);
        const char *st = json_string_value(json_object_get(j, "status"));
        char *out = st && strcmp(st, "waiting") ? strdup(st) : NULL;
        json_decref(j);
        if (out) return out;
        harness_sleep_ms(10);
    }
    fail_msg("%s is still waiting", id);
    return NULL;
}

static void push_cancel(afix *f, const char *b, const char *id)
{
    char *res = harness_str(f->c, "HGET alloc:{%s}:results %s", b, id);
    json_t *j = json_loads(res, 0, NULL);
    itest_cmd(f->c, "RPUSH alloc:{%s}:queue {\"id\":\"c-%s\",\"user\":\"%s\",\"op\":\"cancel\",\"order\":\"%s\"}",
              b, id, itest_jstr(j, "user"), itest_jstr(j, "order"));
    json_decref(j);
    free(res);
}

/* Sum of n over the log's chunk entries, and how many of them have n >= 3. */
static long long chunk_events(afix *f, const char *b, long long *multi)
{
    redisReply *x = redisCommand(f->c, "XRANGE alloc:{%s}:log - +", b);
    assert_non_null(x);
    long long sum = 0;
    *multi = 0;
    for (size_t i = 0; i < x->elements; i++) {
        redisReply *kv = x->element[i]->element[1];
        assert_string_equal(kv->element[0]->str, "format");
        assert_string_equal(kv->element[1]->str, "chunk");
        assert_string_equal(kv->element[2]->str, "n");
        long long n = atoll(kv->element[3]->str);
        sum += n;
        *multi += n >= 3;
    }
    freeReplyObject(x);
    return sum;
}

/* The chunk-log waitlist case's batch: its SQL below names it too. */
#define CW "cw"

/* Batch cw with log_format = "chunk": eight ask for the two units of
 * sku-1 (two granted, six wait), r-9 waits for a sku-3 that never comes;
 * two cancels and the expiries serve the waitlist. Ends with allocd
 * stopped, the batch at rest. */
static void cw_serve(afix *f)
{
    const char *b = CW;
    itest_batch(f->c, b, "kind stock per_user 1 hold_ms 800", "sku-1 2 sku-2 1 sku-3 0", NULL);
    afix_start_allocd(f, "log_format = \"chunk\";");
    /* r-0, r-1 get sku-1; r-2..r-7 wait for it; u-2 then takes sku-2 (its
     * limit); r-9 waits for sku-3, which never comes */
    for (int i = 0; i < 8; i++)
        itest_cmd(f->c, "RPUSH alloc:{%s}:queue {\"id\":\"r-%d\",\"user\":\"u-%d\",\"op\":\"buy\",\"item\":\"sku-1\",\"wait\":true}",
                  b, i, i);
    itest_cmd(f->c, "RPUSH alloc:{%s}:queue {\"id\":\"r-8\",\"user\":\"u-2\",\"op\":\"buy\",\"item\":\"sku-2\"}", b);
    itest_cmd(f->c, "RPUSH alloc:{%s}:queue {\"id\":\"r-9\",\"user\":\"u-9\",\"op\":\"buy\",\"item\":\"sku-3\",\"wait\":true}", b);
    afix_wait_processed(f, b, 10);
    /* two cancels: u-2 is refused at serve time (limit), r-3 and r-4 served */
    push_cancel(f, b, "r-0");
    push_cancel(f, b, "r-1");
    char *st = final_status(f, b, "r-2");
    assert_string_equal(st, "rejected");
    free(st);
    /* nobody confirms: the expiries serve r-5 (and r-6) */
    st = final_status(f, b, "r-5");
    assert_string_equal(st, "granted");
    free(st);
    assert_int_equal(harness_allocd_stop(&f->allocd), 0);     /* the batch at rest */
}

/* Archived: one row per event, in order, with the waitlist's extras, and
 * reconcile finds them equal. */
static void cw_assert_archived(afix *f, long long events)
{
    const char *b = CW;
    char *out = AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, b);
    free(out);
    /* one row per event, in order; as many as the n fields say */
    assert_int_equal(afix_assert_log_archived(f, b), events);
    afix_assert_results_archived(f, b);
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_events WHERE batch = '" CW "' AND type = 'wait'"), 7);
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_events WHERE batch = '" CW "' AND type = 'wait' "
                                    "AND req = 'r-9' AND fields->>'wait_no' = '7'"), 1);
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_events WHERE batch = '" CW "' AND type = 'wait_served' "
                                    "AND req = 'r-2' AND user_id = 'u-2' AND fields->>'wait_no' = '1' "
                                    "AND fields->>'status' = 'rejected' AND fields->>'reason' = 'limit'"), 1);
    assert_true(afix_pg_int(f, "SELECT count(*) FROM alloc_events WHERE batch = '" CW "' AND type = 'wait_served' "
                               "AND fields->>'status' = 'granted' AND NOT fields ? 'reason'") >= 3);
    out = AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, b);
    assert_non_null(strstr(out, "OK"));
    free(out);
}

/* The waitlist is checked: r-9 gone from P:{cw}:waitlist is named. */
static void cw_waitlist_named(afix *f)
{
    const char *b = CW;
    char *w9 = harness_str(f->c, "HGET alloc:{%s}:waitlist r-9", b);
    assert_non_null(w9);
    itest_cmd(f->c, "HDEL alloc:{%s}:waitlist r-9", b);
    char *out = AFIX_CTL(f, 1, "reconcile", "--pg", f->pg.conninfo, b);
    assert_non_null(strstr(out, "waitlist: request 'r-9'"));
    free(out);
    itest_cmd(f->c, "HSET alloc:{%s}:waitlist r-9 %s", b, w9);
    free(w9);
    free(AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, b));
}

/* One event row deleted from a multi-event entry: the entry is named;
 * from its middle, then from its start. */
static void cw_short_entry_named(afix *f)
{
    const char *b = CW;
    const char *pick = "SELECT stream_id FROM alloc_events WHERE batch = '" CW "' GROUP BY stream_id, id_ms, id_seq "
                       "HAVING count(*) >= 3 ORDER BY id_ms, id_seq LIMIT 1";
    PGresult *r = PQexec(f->db, pick);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(r), 1);
    char sid[64], sql[400], want[160];
    snprintf(sid, sizeof sid, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM alloc_events WHERE batch = '" CW "' AND stream_id = '%s'", sid);
    long long n = afix_pg_int(f, sql);
    snprintf(want, sizeof want, "DIFF log entry %s has %lld events, alloc_events %lld\n", sid, n, n - 1);
    for (int idx = 1; idx >= 0; idx--) {
        snprintf(sql, sizeof sql, "CREATE TEMP TABLE saved AS SELECT * FROM alloc_events "
                                  "WHERE batch = '" CW "' AND stream_id = '%s' AND ev_idx = %d", sid, idx);
        afix_pg_exec(f, sql);
        snprintf(sql, sizeof sql, "DELETE FROM alloc_events WHERE batch = '" CW "' AND stream_id = '%s' AND ev_idx = %d",
                 sid, idx);
        afix_pg_exec(f, sql);
        char *out = AFIX_CTL(f, 1, "reconcile", "--pg", f->pg.conninfo, b);
        if (!strstr(out, want) || strstr(out, "is not in alloc_events"))
            fail_msg("reconcile does not name %s as short of event %d:\n%s", sid, idx, out);
        free(out);
        afix_pg_exec(f, "INSERT INTO alloc_events SELECT * FROM saved");
        afix_pg_exec(f, "DROP TABLE saved");
        free(AFIX_CTL(f, 0, "reconcile", "--pg", f->pg.conninfo, b));
    }
}

/* log_format = "chunk" with a waitlist: each chunk entry becomes one row
 * per event (ev_idx 0..n-1) carrying its extras; reconcile compares them
 * event by event and checks the waitlist; a row deleted from the middle
 * or the start of a multi-event entry is named. */
static void test_chunk_log_with_waits(void **state)
{
    afix *f = *state;
    cw_serve(f);
    long long multi, events = chunk_events(f, CW, &multi);
    assert_true(multi >= 2);
    cw_assert_archived(f, events);
    cw_waitlist_named(f);
    cw_short_entry_named(f);
}

/* A run without --follow ends with a results pass begun after the last
 * chunk of the log it archived. The first page of a pass (HSCAN COUNT 100
 * of 201 fields: about half of them, never all) is held in PostgreSQL, a
 * trigger waiting for the test's advisory lock; meanwhile every waiting
 * result becomes final with its grant in one MULTI, as allocd writes them.
 * The run archives those grants and must archive their results too,
 * though the held pass read half of them as waiting and its cursor is past
 * them. A page of nothing but waiting results sends nothing to
 * PostgreSQL, so one result in ten is final from the start: every page
 * has one (HSCAN returns at least 100 fields a page here; 100 without any
 * of the 21: odds of 1 in 6,000,000), and the first page is the one held. */
static void test_last_pass_after_last_drain(void **state)
{
    afix *f = *state;
    const char *b = "w1";
    const char *fmt = "{\"id\":\"w-%d\",\"user\":\"u-%d\",\"op\":\"buy\",\"status\":\"%s\",\"item\":\"sku-1\",\"at\":1}";
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, b));     /* the schema */
    afix_pg_exec(f, "CREATE FUNCTION hold_results() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NULL; END$$");
    afix_pg_exec(f, "CREATE TRIGGER hold BEFORE INSERT ON alloc_results "
                    "FOR EACH STATEMENT EXECUTE FUNCTION hold_results()");
    assert_int_equal(afix_pg_int(f, "SELECT pg_try_advisory_lock(4242)::int"), 1);
    /* w-0, w-10, ..., w-200 granted, the others waiting; values over 64
     * bytes: a hash table, which HSCAN pages */
    itest_cmd(f->c, "HSET alloc:{%s}:meta kind stock per_user 2", b);
    itest_cmd(f->c, "HSET alloc:{%s}:stats updated_at 1", b);
    char res[160];
    for (int i = 0; i <= 200; i++) {
        snprintf(res, sizeof res, fmt, i, i, i % 10 ? "waiting" : "granted");
        itest_cmd(f->c, "HSET alloc:{%s}:results w-%d %s", b, i, res);
        if (i % 10 == 0)
            itest_cmd(f->c, "XADD alloc:{%s}:log * type grant user u-%d item sku-1 qty 1 req w-%d at 1", b, i, i);
    }
    char *enc = harness_str(f->c, "OBJECT ENCODING alloc:{%s}:results", b);
    assert_string_equal(enc, "hashtable");
    free(enc);
    pid_t ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, b, "--chunk", "100",
                              "--results-interval-ms", "0", "--quiet", NULL);
    const char *held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted";
    for (int i = 0; i < 3000 && afix_pg_int(f, held) == 0; i++) harness_sleep_ms(10);
    assert_int_equal(afix_pg_int(f, held), 1);
    itest_cmd(f->c, "MULTI");
    for (int i = 1; i <= 200; i++) {
        if (i % 10 == 0) continue;
        snprintf(res, sizeof res, fmt, i, i, "granted");
        itest_cmd(f->c, "HSET alloc:{%s}:results w-%d %s", b, i, res);
        itest_cmd(f->c, "XADD alloc:{%s}:log * type grant user u-%d item sku-1 qty 1 req w-%d at 2", b, i, i);
    }
    itest_cmd(f->c, "HSET alloc:{%s}:stats updated_at 2", b);
    itest_cmd(f->c, "EXEC");
    assert_int_equal(afix_pg_int(f, "SELECT pg_advisory_unlock(4242)::int"), 1);
    int st = 0, exited = 0;
    for (int i = 0; i < 6000 && !(exited = proc_exited(ar, &st)); i++) harness_sleep_ms(10);
    if (!exited) proc_reap(ar, SIGKILL);
    assert_true(exited && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(afix_assert_log_archived(f, b), 201);
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_events AS e WHERE batch = 'w1' AND NOT EXISTS "
                                    "(SELECT 1 FROM alloc_results AS r WHERE r.batch = e.batch AND r.req_id = e.req)"), 0);
    afix_assert_results_archived(f, b);
}

/* Waits until sql reads want (10 s at most); what it read last. */
static long long pg_wait_int(afix *f, const char *sql, long long want)
{
    long long got = -1;
    for (int i = 0; i < 1000 && (got = afix_pg_int(f, sql)) != want; i++) harness_sleep_ms(10);
    return got;
}

/* Waits until the archiver has completed more than `after` results passes
 * of b (10 s at most); how many it has. */
static long long passes_after(afix *f, const char *b, long long after)
{
    long long n = -1;
    for (int i = 0; i < 1000 && (n = proc_int(f->c, "HGET alloc:{%s}:archive results_passes", b)) <= after; i++)
        harness_sleep_ms(10);
    return n;
}

/* A following archiver passes over the results again whenever the batch
 * changes, and offers PostgreSQL only those neither it nor the database
 * has: a trigger counts every row proposed to alloc_results (a BEFORE ROW
 * trigger fires for rows ON CONFLICT then skips too). */
static void test_later_passes_offer_only_new_results(void **state)
{
    enum { N = 300 };
    afix *f = *state;
    const char *b = "n1";
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, b));     /* the schema */
    afix_pg_exec(f, "CREATE TABLE offered (n bigint NOT NULL); INSERT INTO offered VALUES (0)");
    afix_pg_exec(f, "CREATE FUNCTION count_offered() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$BEGIN UPDATE offered SET n = n + 1; RETURN NEW; END$$");
    afix_pg_exec(f, "CREATE TRIGGER offered BEFORE INSERT ON alloc_results "
                    "FOR EACH ROW EXECUTE FUNCTION count_offered()");
    itest_cmd(f->c, "HSET alloc:{%s}:meta kind stock per_user 1", b);
    for (int i = 0; i < N; i++)
        itest_cmd(f->c, "HSET alloc:{%s}:results r-%d {\"id\":\"r-%d\",\"status\":\"rejected\","
                        "\"reason\":\"sold_out\",\"at\":1}", b, i, i);
    itest_cmd(f->c, "HSET alloc:{%s}:stats updated_at 1", b);
    pid_t ar = afix_ctl_spawn(f, "archive", "--pg", f->pg.conninfo, b, "--follow", "--chunk", "100",
                              "--results-interval-ms", "0", "--quiet", NULL);
    assert_int_equal(pg_wait_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 'n1'", N), N);
    long long passes = passes_after(f, b, 0);
    assert_true(passes >= 1);
    /* the batch changes twice: two more passes, nothing new to offer */
    itest_cmd(f->c, "HSET alloc:{%s}:stats updated_at 2", b);
    passes = passes_after(f, b, passes);
    itest_cmd(f->c, "HSET alloc:{%s}:stats updated_at 3", b);
    assert_true(passes_after(f, b, passes) > passes);
    assert_int_equal(afix_pg_int(f, "SELECT n FROM offered"), N);
    /* a new result: offered once */
    itest_cmd(f->c, "HSET alloc:{%s}:results late {\"id\":\"late\",\"status\":\"rejected\",\"at\":2}", b);
    itest_cmd(f->c, "HSET alloc:{%s}:stats updated_at 4", b);
    assert_int_equal(pg_wait_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 'n1'", N + 1), N + 1);
    assert_int_equal(afix_pg_int(f, "SELECT n FROM offered"), N + 1);
    /* a result whose row another writer put in the database meanwhile:
     * the page's COPY fails on it, and the staging table's way skips it
     * (the failed COPY's proposal rolled back with it) */
    afix_pg_exec(f, "INSERT INTO alloc_results (batch, req_id, status, result) "
                    "VALUES ('n1', 'other', 'rejected', '{\"id\":\"other\",\"status\":\"rejected\"}')");
    itest_cmd(f->c, "HSET alloc:{%s}:results other {\"id\":\"other\",\"status\":\"rejected\"}", b);
    passes = proc_int(f->c, "HGET alloc:{%s}:archive results_passes", b);
    itest_cmd(f->c, "HSET alloc:{%s}:stats updated_at 5", b);
    assert_true(passes_after(f, b, passes) > passes);
    assert_int_equal(afix_pg_int(f, "SELECT n FROM offered"), N + 3);
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 'n1'"), N + 2);
    proc_reap(ar, SIGTERM);
    afix_assert_results_archived(f, b);
    /* a new run reads what the database has first: it offers only a row
     * that went missing there */
    afix_pg_exec(f, "DELETE FROM alloc_results WHERE batch = 'n1' AND req_id = 'r-7'");
    free(AFIX_CTL(f, 0, "archive", "--pg", f->pg.conninfo, b));
    assert_int_equal(afix_pg_int(f, "SELECT n FROM offered"), N + 4);
    assert_int_equal(afix_pg_int(f, "SELECT count(*) FROM alloc_results WHERE batch = 'n1'"), N + 2);
    afix_assert_results_archived(f, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_stock_archive_and_reconcile, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_room_archive_and_reconcile, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_follow_kills_and_pg_restart, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_trim_waits_for_the_archive, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_export, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_purge_needs_closed_and_archived, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_chunk_log_with_waits, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_last_pass_after_last_drain, afix_setup, afix_teardown),
        cmocka_unit_test_setup_teardown(test_later_passes_offer_only_new_results, afix_setup, afix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
