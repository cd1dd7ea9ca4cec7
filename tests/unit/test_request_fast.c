/* test_request_fast.c -- the fast path of request_parse() against the
 * jansson path (request_parse_slow()), byte for byte.
 *
 * Why: request.c reads the common flat requests with a hand-written
 * scanner and gives up to jansson on anything else. Both readers hand the
 * raw field values they found to the one validator (request_fields.c), so
 * the contract checks exist once; what can still differ is what the two
 * readers find in the same bytes (a number, an escape, a repeated key,
 * where the document ends). The promise is that nobody can tell which
 * path ran: the same outcome, the same error text, the same fields. This
 * test holds that promise over
 *   - every case of tests/data/requests.txt,
 *   - every file of tests/fuzz/corpus/request/, tests/fuzz/regressions/request/
 *     and tests/data/bad/,
 *   - generated variants of typical requests: whitespace of every kind at
 *     every position, every truncation, every single-byte replacement and
 *     deletion, key orders, repeated keys, every field with a long list of
 *     values (escapes, unicode, big, negative and real numbers, literals,
 *     nested values), long lists, long strings, the size limit, and a few
 *     thousand random mutations,
 * always in both grammars (queue and ctl). It also checks that the fast
 * path really is taken for the shapes it is meant for, so the comparison
 * cannot pass by both sides being jansson.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <cmocka.h>

#include "wire/request.h"

#define MAX_BYTES 4096

static long compared, fast_taken, mismatches;

static void print_input(const char *raw, size_t len)
{
    fputc('\'', stderr);
    for (size_t i = 0; i < len && i < 400; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') fputc(c, stderr);
        else fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "%s' (%zu bytes)", len > 400 ? "..." : "", len);
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The first difference between two parses, or NULL. */
static const char *difference(const request *f, const request *s)
{
    const engine_request *a = &f->r, *b = &s->r;
    if (f->outcome != s->outcome) return "outcome";
    if (strcmp(f->error, s->error)) return "error";
    if (!same_str(f->op_name, s->op_name)) return "op_name";
    if (a->op != b->op) return "op";
    if (!same_str(a->id, b->id)) return "id";
    if (!same_str(a->user, b->user)) return "user";
    if (a->seq != b->seq) return "seq";
    if (!same_str(a->item, b->item)) return "item";
    if (a->qty != b->qty) return "qty";
    if (a->order != b->order) return "order";
    if (!a->prefs != !b->prefs) return "prefs pointer";
    if (a->n_prefs != b->n_prefs) return "n_prefs";
    for (size_t i = 0; i < a->n_prefs; i++)
        if (!same_str(a->prefs[i], b->prefs[i])) return "prefs[i]";
    if (!a->members != !b->members) return "members pointer";
    if (a->n_members != b->n_members) return "n_members";
    for (size_t i = 0; i < a->n_members; i++)
        if (!same_str(a->members[i], b->members[i])) return "members[i]";
    if (!a->filter != !b->filter) return "filter pointer";
    if (a->n_filter != b->n_filter) return "n_filter";
    for (size_t i = 0; i < a->n_filter; i++)
        if (!same_str(a->filter[i].key, b->filter[i].key) ||
            !same_str(a->filter[i].value, b->filter[i].value)) return "filter[i]";
    if (a->has_filter != b->has_filter) return "has_filter";
    if (a->wait != b->wait) return "wait";
    return NULL;
}

/* Parses raw both ways in one grammar and compares. Returns 1 when the
 * fast path did the work (no jansson document, while jansson parsed one). */
static int check_one(const char *raw, size_t len, size_t max_bytes, int admin)
{
    request f, s;
    request_parse(&f, raw, len, max_bytes, admin);
    request_parse_slow(&s, raw, len, max_bytes, admin);
    const char *d = difference(&f, &s);
    compared++;
    if (d) {
        if (mismatches++ < 20) {
            fprintf(stderr, "fast and jansson paths differ in %s (%s grammar) on ", d, admin ? "ctl" : "queue");
            print_input(raw, len);
            fprintf(stderr, "\n  fast:    outcome %d '%s'\n  jansson: outcome %d '%s'\n",
                    f.outcome, f.error, s.outcome, s.error);
        }
    }
    int fast = f.doc == NULL && s.doc != NULL;
    /* A request the fast path took keeps its strings in the struct or in one
     * malloc; one it gave up on looks exactly like the jansson one. */
    if (f.doc) assert_null(f.heap);
    request_clear(&f);
    request_clear(&s);
    fast_taken += fast;
    return fast;
}

/* Both grammars, at MAX_BYTES. Returns how many of the two took the fast path. */
static int check(const char *raw, size_t len)
{
    return check_one(raw, len, MAX_BYTES, 0) + check_one(raw, len, MAX_BYTES, 1);
}

static int check_str(const char *raw) { return check(raw, strlen(raw)); }

/* ------------------------------------------------------------ sources -- */

static void test_request_table(void **state)
{
    FILE *f = fopen("tests/data/requests.txt", "r");
    assert_non_null(f);
    char line[8192];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *p = line;
        for (int i = 0; i < 3; i++) {
            char *bar = strstr(p, " | ");
            assert_non_null(bar);
            p = bar + 3;
        }
        size_t n = strlen(p);
        if (n && p[n - 1] == '\n') p[--n] = '\0';
        check(p, n);
        cases++;
    }
    fclose(f);
    assert_true(cases >= 60);
    assert_int_equal(mismatches, 0);
}

static int check_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t cap = 1 << 16, n = 0, got;
        char *buf = malloc(cap);
        assert_non_null(buf);
        while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
            n += got;
            if (n == cap) {
                cap *= 2;
                buf = realloc(buf, cap);
                assert_non_null(buf);
            }
        }
        fclose(f);
        check(buf, n);
        /* and with a limit that lets big files through too */
        check_one(buf, n, n, 0);
        free(buf);
        files++;
    }
    closedir(d);
    return files;
}

static void test_corpus_files(void **state)
{
    int files = check_dir("tests/fuzz/corpus/request");
    files += check_dir("tests/fuzz/regressions/request");
    files += check_dir("tests/data/bad");
    assert_true(files >= 400);
    assert_int_equal(mismatches, 0);
}

/* -------------------------------------------------------- generation -- */

/* Typical requests, the shapes the fast path exists for. */
static const char *const bases[] = {
    "{\"id\":\"r-123456\",\"user\":\"u-98765\",\"op\":\"buy\",\"item\":\"sku-17\",\"qty\":1}",
    "{\"id\":\"r-1\",\"user\":\"alice\",\"op\":\"buy\",\"item\":\"sku2\"}",
    "{\"id\":\"r-2\",\"user\":\"alice\",\"op\":\"confirm\",\"order\":\"1209845770283447512\"}",
    "{\"id\":\"r-3\",\"user\":\"alice\",\"op\":\"cancel\",\"order\":42}",
    "{\"id\":\"r-4\",\"user\":\"s1001\",\"op\":\"choose\",\"room\":\"R101\"}",
    "{\"id\":\"r-5\",\"user\":\"s1001\",\"op\":\"switch\",\"room\":\"R102\"}",
    "{\"id\":\"r-6\",\"user\":\"s1001\",\"op\":\"auto\",\"prefs\":[\"R101\",\"R102\",\"R205\"]}",
    "{\"id\":\"r-7\",\"user\":\"s1001\",\"op\":\"group\",\"members\":[\"s1001\",\"s1002\"],\"prefs\":[\"R1\"]}",
    "{\"id\":\"r-8\",\"user\":\"s1001\",\"op\":\"release\"}",
    "{\"id\":\"c-1\",\"op\":\"pause\"}",
    "{\"id\":\"c-2\",\"op\":\"set_capacity\",\"item\":\"R101\",\"capacity\":4}",
    " { \"id\" : \"r-9\" , \"user\" : \"bob\" , \"op\" : \"buy\" , \"item\" : \"x\" , \"qty\" : 2 , \"x\" : [ ] } \n",
};
#define N_BASES (sizeof bases / sizeof bases[0])

static void test_typical_requests_take_the_fast_path(void **state)
{
    for (size_t i = 0; i < N_BASES; i++) {
        /* queue grammar for queue ops, ctl grammar for admin ones, and both
         * paths in the other grammar too (an invalid result, still fast) */
        assert_int_equal(check_str(bases[i]), 2);
    }
    /* the typical request leaves nothing to free and no document */
    request q;
    request_parse(&q, bases[0], strlen(bases[0]), MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_OK);
    assert_null(q.doc);
    assert_null(q.heap);
    assert_null(q.lists);
    assert_string_equal(q.r.id, "r-123456");
    assert_string_equal(q.r.item, "sku-17");
    assert_true(q.r.id >= q.inline_buf.bytes && q.r.id < q.inline_buf.bytes + sizeof q.inline_buf.bytes);
    request_clear(&q);
    assert_null(q.r.id);
    assert_int_equal(q.outcome, REQUEST_OK); /* zeroed */
    assert_int_equal(mismatches, 0);
}

static void test_whitespace_everywhere(void **state)
{
    static const char *const ws[] = { " ", "\t", "\n", "\r", " \r\n\t ", "\f", "\v", "\xc2\xa0" };
    char buf[1024];
    for (size_t b = 0; b < N_BASES; b++) {
        size_t n = strlen(bases[b]);
        for (size_t w = 0; w < sizeof ws / sizeof ws[0]; w++) {
            size_t wn = strlen(ws[w]);
            for (size_t at = 0; at <= n; at++) {
                memcpy(buf, bases[b], at);
                memcpy(buf + at, ws[w], wn);
                memcpy(buf + at + wn, bases[b] + at, n - at);
                check(buf, n + wn);
            }
        }
    }
    assert_int_equal(mismatches, 0);
}

static void test_truncation_and_single_byte_changes(void **state)
{
    static const char bytes[] = { '\0', '"', '\\', ',', ':', '{', '}', '[', ']', ' ', '\x7f',
                                  '\x80', '\xff', '\x01', '0', '1', '9', '-', '+', '.', 'e',
                                  'E', 'a', 't', 'n', '/', 'u' };
    char buf[1024];
    for (size_t b = 0; b < N_BASES; b++) {
        size_t n = strlen(bases[b]);
        for (size_t cut = 0; cut <= n; cut++) check(bases[b], cut);
        for (size_t at = 0; at < n; at++) {
            memcpy(buf, bases[b], n);
            for (size_t k = 0; k < sizeof bytes; k++) {
                buf[at] = bytes[k];
                check(buf, n);
            }
            /* deletion */
            memcpy(buf, bases[b], at);
            memcpy(buf + at, bases[b] + at + 1, n - at - 1);
            check(buf, n - 1);
            /* duplication of one byte */
            memcpy(buf, bases[b], at + 1);
            memcpy(buf + at + 1, bases[b] + at, n - at);
            check(buf, n + 1);
        }
    }
    assert_int_equal(mismatches, 0);
}

static void test_trailing_bytes_and_size_limit(void **state)
{
#define TAIL(s) { s, sizeof s - 1 }
    static const struct { const char *s; size_t n; } tails[] = {
        TAIL(""), TAIL(" "), TAIL("\n"), TAIL("\r\n"), TAIL("x"), TAIL("}"), TAIL("{}"), TAIL(","),
        TAIL("\0"), TAIL(" \0"), TAIL("null"), TAIL("1"), TAIL("\"\""), TAIL("//"),
        TAIL("\xef\xbb\xbf"), TAIL("\f"),
    };
#undef TAIL
    char buf[1024];
    for (size_t b = 0; b < N_BASES; b++) {
        size_t n = strlen(bases[b]);
        for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
            size_t tn = tails[t].n;
            memcpy(buf, bases[b], n);
            memcpy(buf + n, tails[t].s, tn);
            check(buf, n + tn);
            /* leading too (a BOM, garbage, whitespace) */
            memcpy(buf, tails[t].s, tn);
            memcpy(buf + tn, bases[b], n);
            check(buf, n + tn);
        }
        size_t limits[] = { 0, n - 1, n, n + 1 };
        for (size_t l = 0; l < 4; l++)
            for (int admin = 0; admin < 2; admin++) check_one(bases[b], n, limits[l], admin);
    }
    assert_int_equal(mismatches, 0);
}

/* Values for every field: every kind of JSON the fast path must either
 * read exactly as jansson does or give up on. */
static const char *const values[] = {
    "\"x\"", "\"\"", "\"sku-17\"", "\"R101\"", "\"u1\"", "\"r1\"", "\"s1001\"", "\"s1002\"",
    "\"buy\"", "\"auto\"", "\"group\"", "\"pause\"", "\"set_capacity\"", "\"BUY\"", "\"steal\"",
    "\"1\"", "\"42\"", "\"0\"", "\"007\"", "\"-1\"", "\"1a\"", "\" 1\"", "\"18446744073709551615\"",
    "\"18446744073709551616\"", "\"99999999999999999999\"", "\"123456789012345678901\"",
    "\"a b\"", "\"a\x7f\"", "\"\x7f\"", "\"~\"",
    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",   /* 64 */
    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",  /* 65 */
    /* escapes */
    "\"a\\\"b\"", "\"a\\\\b\"", "\"a\\/b\"", "\"\\b\"", "\"\\f\"", "\"\\n\"", "\"\\r\"", "\"\\t\"",
    "\"\\u0041\"", "\"\\u00e9\"", "\"\\ud83d\\ude00\"", "\"\\u0000\"", "\"\\ud800\"", "\"\\x41\"",
    "\"\\u12\"", "\"b\\u0075y\"", "\"a\\u007fb\"",
    /* unicode, raw */
    "\"\xc3\xa9\"", "\"\xe6\x97\xa5\xe6\x9c\xac\"", "\"\xf0\x9f\x98\x80\"", "\"\xff\"",
    "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xc3\"",
    /* control characters, raw */
    "\"a\tb\"", "\"a\nb\"", "\"\x01\"",
    /* numbers */
    "0", "1", "2", "42", "-0", "-1", "-3", "1000000", "1000001", "2000000000", "2000000001",
    "999999999999999999", "-999999999999999999", "1000000000000000000", "-1000000000000000000",
    "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "99999999999999999999999", "01", "00", "-01", "-", "--1", "+1",
    "1.0", "1.5", "0.0", "-0.0", "1e2", "1E2", "1e+2", "1e-2", "1e999", "-1e999", "1.", ".5",
    "0x10", "1_000", "Infinity", "NaN",
    /* literals */
    "true", "false", "null", "True", "nul", "truex", "nullnull", "t",
    /* arrays */
    "[]", "[ ]", "[\"R1\"]", "[\"R1\",\"R2\"]", "[ \"R1\" , \"R2\" ]", "[\"u1\",\"u2\"]",
    "[\"u1\",\"u1\"]", "[\"u2\"]", "[\"u1\"]", "[\"\"]", "[\"u1\",\"\"]", "[1]", "[\"R1\",1]",
    "[null]", "[true]", "[[\"R1\"]]", "[{}]", "[\"R1\",]", "[,\"R1\"]", "[\"R1\" \"R2\"]", "[",
    "[\"a\\u0062\"]", "[\"\xc3\xa9\"]", "[\"a\x7f\"]",
    /* objects */
    "{}", "{\"floor\":3}", "{\"a\":{\"b\":[1,2]}}", "{\"a\":1,\"a\":2}", "{", "{\"a\"}",
    /* not JSON */
    "", "'x'", "x", "}", "]", ",", ":",
};
#define N_VALUES (sizeof values / sizeof values[0])

static const char *const fields[] = {
    "id", "user", "op", "item", "qty", "order", "room", "prefs", "members", "capacity",
    "filter", "extra", "", "ID", "i\\u0064", "\xc3\xa9",
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static const char *const ops[] = {
    "buy", "confirm", "cancel", "choose", "switch", "auto", "group", "release",
    "pause", "resume", "close", "set_capacity", "steal",
};
#define N_OPS (sizeof ops / sizeof ops[0])

/* Every field with every value, in every op, placed first (so a repeated
 * id/user/op comes before the real one), last (after it), and alone with
 * just an id. */
static void test_every_field_with_every_value(void **state)
{
    char buf[2048];
    long fast_before = fast_taken;
    for (size_t o = 0; o < N_OPS; o++)
        for (size_t k = 0; k < N_FIELDS; k++)
            for (size_t v = 0; v < N_VALUES; v++) {
                int n = snprintf(buf, sizeof buf, "{\"id\":\"r1\",\"user\":\"u1\",\"op\":\"%s\",\"%s\":%s}",
                                 ops[o], fields[k], values[v]);
                check(buf, (size_t)n);
                n = snprintf(buf, sizeof buf, "{\"%s\":%s,\"id\":\"r1\",\"user\":\"u1\",\"op\":\"%s\","
                             "\"item\":\"i\",\"room\":\"R1\",\"order\":7,\"prefs\":[\"R1\"],"
                             "\"members\":[\"u1\",\"u2\"],\"capacity\":3}",
                             fields[k], values[v], ops[o]);
                check(buf, (size_t)n);
                n = snprintf(buf, sizeof buf, "{\"id\":\"r1\",\"op\":\"%s\",\"%s\":%s,\"user\":\"u1\"}",
                             ops[o], fields[k], values[v]);
                check(buf, (size_t)n);
            }
    /* the field alone next to a readable id: the dead/invalid boundary */
    for (size_t k = 0; k < N_FIELDS; k++)
        for (size_t v = 0; v < N_VALUES; v++) {
            int n = snprintf(buf, sizeof buf, "{\"%s\":%s}", fields[k], values[v]);
            check(buf, (size_t)n);
            n = snprintf(buf, sizeof buf, "{\"%s\":%s,\"id\":\"r1\"}", fields[k], values[v]);
            check(buf, (size_t)n);
        }
    /* a good share of these are plain enough for the fast path */
    assert_true(fast_taken - fast_before > 10000);
    assert_int_equal(mismatches, 0);
}

/* All orders of the keys of a group request, and each key repeated. */
static void test_key_orders_and_repeated_keys(void **state)
{
    static const char *const kv[] = {
        "\"id\":\"g1\"", "\"user\":\"u1\"", "\"op\":\"group\"", "\"members\":[\"u1\",\"u2\"]",
        "\"prefs\":[\"R1\",\"R2\"]", "\"z\":null",
    };
    enum { K = 6 };
    int perm[K] = { 0, 1, 2, 3, 4, 5 }, c[K] = { 0 };
    char buf[1024];
    long n_perm = 0;
    /* Heap's algorithm */
    for (int i = 0;;) {
        size_t n = 0;
        buf[n++] = '{';
        for (int j = 0; j < K; j++) n += (size_t)sprintf(buf + n, "%s%s", j ? "," : "", kv[perm[j]]);
        buf[n++] = '}';
        assert_int_equal(check(buf, n), 2);
        n_perm++;
        while (i < K && c[i] >= i) c[i++] = 0;
        if (i == K) break;
        int a = i % 2 ? c[i] : 0, t = perm[a];
        perm[a] = perm[i];
        perm[i] = t;
        c[i]++;
        i = 0;
    }
    assert_int_equal(n_perm, 720);
    /* each key twice: same value, other value, other type; before and after */
    static const char *const other[] = {
        "\"id\":\"g2\"", "\"user\":\"u2\"", "\"op\":\"auto\"", "\"members\":[\"u1\"]",
        "\"prefs\":[]", "\"z\":{}",
    };
    static const char *const other_type[] = {
        "\"id\":7", "\"user\":null", "\"op\":[\"group\"]", "\"members\":\"u1\"",
        "\"prefs\":3", "\"z\":[1]",
    };
    for (int k = 0; k < K; k++) {
        const char *const *extra[] = { &kv[k], &other[k], &other_type[k] };
        for (int e = 0; e < 3; e++)
            for (int where = 0; where < 2; where++) {
                size_t n = 0;
                buf[n++] = '{';
                if (!where) n += (size_t)sprintf(buf + n, "%s,", *extra[e]);
                for (int j = 0; j < K; j++) n += (size_t)sprintf(buf + n, "%s%s", j ? "," : "", kv[j]);
                if (where) n += (size_t)sprintf(buf + n, ",%s", *extra[e]);
                buf[n++] = '}';
                check(buf, n);
            }
    }
    assert_int_equal(mismatches, 0);
}

/* Lists around REQUEST_MAX_LIST, strings around ENGINE_ID_MAX, and requests
 * too big for the inline buffer (one malloc on the fast path). */
static void test_long_lists_and_strings(void **state)
{
    size_t cap = 64 * 1024;
    char *buf = malloc(cap);
    assert_non_null(buf);
    static const size_t counts[] = { 0, 1, 2, 16, 17, 40, 255, 256, 257, 300 };
    static const size_t name_lens[] = { 1, 4, 63, 64, 65 };
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (size_t l = 0; l < sizeof name_lens / sizeof name_lens[0]; l++)
            for (int list = 0; list < 2; list++) {
                size_t n = (size_t)sprintf(buf, "{\"id\":\"r1\",\"user\":\"u0\",\"op\":\"%s\",\"%s\":[",
                                           list ? "group" : "auto", list ? "members" : "prefs");
                for (size_t i = 0; i < counts[c]; i++) {
                    char name[80];
                    int k = snprintf(name, sizeof name, "u%zu", i);
                    while ((size_t)k < name_lens[l]) name[k++] = 'x';
                    name[name_lens[l]] = '\0';
                    if (i == 0 && list) strcpy(name, "u0");
                    n += (size_t)sprintf(buf + n, "%s\"%s\"", i ? "," : "", name);
                }
                n += (size_t)sprintf(buf + n, "]%s}", list ? ",\"prefs\":[\"R1\"]" : "");
                assert_true(n < cap);
                check_one(buf, n, cap, 0);
                check_one(buf, n, cap, 1);
                check_one(buf, n, MAX_BYTES, 0);
            }
    /* a fast request that does not fit inline: heap storage, freed by clear */
    size_t n = (size_t)sprintf(buf, "{\"id\":\"r1\",\"user\":\"u1\",\"op\":\"auto\",\"prefs\":[");
    for (int i = 0; i < 40; i++) n += (size_t)sprintf(buf + n, "%s\"R%03d-xxxxxxxxxx\"", i ? "," : "", i);
    n += (size_t)sprintf(buf + n, "]}");
    request q;
    request_parse(&q, buf, n, MAX_BYTES, 0);
    assert_int_equal(q.outcome, REQUEST_OK);
    assert_null(q.doc);
    assert_non_null(q.heap);
    assert_int_equal(q.r.n_prefs, 40);
    assert_string_equal(q.r.prefs[39], "R039-xxxxxxxxxx");
    request_clear(&q);
    assert_null(q.heap);
    assert_int_equal(check(buf, n), 2);
    /* long strings everywhere */
    for (size_t len = 60; len <= 70; len++) {
        char s[80];
        memset(s, 'a', len);
        s[len] = '\0';
        n = (size_t)sprintf(buf, "{\"id\":\"%s\",\"user\":\"%s\",\"op\":\"buy\",\"item\":\"%s\"}", s, s, s);
        check(buf, n);
        n = (size_t)sprintf(buf, "{\"id\":\"r1\",\"user\":\"u1\",\"op\":\"%s\"}", s);
        check(buf, n);
        n = (size_t)sprintf(buf, "{\"id\":\"r1\",\"user\":\"u1\",\"op\":\"group\",\"members\":[\"u1\",\"%s\",\"%s\"]}", s, s);
        check(buf, n);
    }
    free(buf);
    assert_int_equal(mismatches, 0);
}

/* Random edits of the typical requests: tokens inserted, ranges deleted or
 * repeated, bytes replaced. Deterministic (fixed seed). */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_random_mutations(void **state)
{
    static const char *const tokens[] = {
        "{", "}", "[", "]", ",", ":", "\"", "\\", " ", "\n", "\t", "\r", "\0", "\"id\"", "\"user\"",
        "\"op\"", "\"item\"", "\"qty\"", "\"order\"", "\"room\"", "\"prefs\"", "\"members\"",
        "\"filter\"", "\"capacity\"", "\"buy\"", "\"auto\"", "\"group\"", "\"pause\"", "null",
        "true", "false", "0", "-", "1", "99999999999999999999", "1e5", ".5", "\\u0000", "\\u00e9",
        "\xc3\xa9", "\xff", "\x7f", "\"u1\"", "[\"R1\"]", "{\"a\":1}", "\"id\":\"x\",",
    };
    enum { N_TOKENS = sizeof tokens / sizeof tokens[0] };
    char buf[4096];
    for (int iter = 0; iter < 60000; iter++) {
        const char *base = bases[next_rand() % N_BASES];
        size_t n = strlen(base);
        memcpy(buf, base, n);
        int edits = 1 + (int)(next_rand() % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = n ? next_rand() % (n + 1) : 0;
            switch (next_rand() % 4) {
            case 0: { /* insert a token */
                const char *t = tokens[next_rand() % N_TOKENS];
                size_t tn = t[0] ? strlen(t) : 1;
                if (n + tn >= sizeof buf) break;
                memmove(buf + at + tn, buf + at, n - at);
                memcpy(buf + at, t, tn);
                n += tn;
                break;
            }
            case 1: { /* delete a range */
                size_t dn = next_rand() % 6;
                if (at + dn > n) dn = n - at;
                memmove(buf + at, buf + at + dn, n - at - dn);
                n -= dn;
                break;
            }
            case 2: /* replace a byte */
                if (at < n) buf[at] = (char)(next_rand() & 0xff);
                break;
            case 3: { /* repeat a range (repeated keys, values) */
                size_t dn = 1 + next_rand() % 24;
                if (at + dn > n) dn = n - at;
                if (n + dn >= sizeof buf) break;
                memmove(buf + at + dn, buf + at, n - at);
                n += dn;
                break;
            }
            }
        }
        check(buf, n);
    }
    assert_int_equal(mismatches, 0);
}

static void test_summary(void **state)
{
    fprintf(stderr, "request fast path: %ld parses compared, %ld took the fast path, %ld differed\n",
            compared, fast_taken, mismatches);
    assert_true(compared > 100000);
    assert_true(fast_taken > 20000);
    assert_int_equal(mismatches, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_table),
        cmocka_unit_test(test_corpus_files),
        cmocka_unit_test(test_typical_requests_take_the_fast_path),
        cmocka_unit_test(test_whitespace_everywhere),
        cmocka_unit_test(test_truncation_and_single_byte_changes),
        cmocka_unit_test(test_trailing_bytes_and_size_limit),
        cmocka_unit_test(test_every_field_with_every_value),
        cmocka_unit_test(test_key_orders_and_repeated_keys),
        cmocka_unit_test(test_long_lists_and_strings),
        cmocka_unit_test(test_random_mutations),
        cmocka_unit_test(test_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
