/* sim_stream.c -- a Redis 7.0 stream for the simulator's model (see
 * sim_stream.h): entries, macro nodes sized as listpacks, consumer groups.
 *
 * The node rules are t_stream.c's: an XADD goes into the tail node unless
 * that node's listpack size plus the new entry's field and value lengths
 * reach stream-node-max-bytes, or it holds stream-node-max-entries entries
 * (deleted ones count); a new node starts with a master entry (count,
 * deleted, the field names, a 0); an entry whose field names are the
 * master's stores only its values. streamTrim removes whole nodes from the
 * head while it may (MAXLEN: what is left stays at or above the limit;
 * MINID: the node's last id is below), stops at LIMIT, and with `~` stops
 * at the first node it cannot remove whole; exact trimming then marks
 * entries of that node deleted, which keeps their bytes.
 */
#include "sim/sim_stream.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE_MAX_BYTES 4096      /* stream-node-max-bytes */
#define NODE_MAX_ENTRIES 100     /* stream-node-max-entries */
#define LP_HDR 6
#define LP_EOF 1

typedef struct xnode {
    uint64_t serial;
    xid master, last;         /* last: of any entry packed in it, deleted too */
    size_t nmaster;
    char **mf;                /* the master entry's field names */
    size_t *mfl;
    size_t bytes;             /* lpBytes() of its listpack */
    int64_t live, deleted;
} xnode;

struct xstream {
    xentry *e;                /* the entries not deleted, by id */
    size_t n, cap;
    xnode *nodes;             /* by id */
    size_t nn, capn;
    uint64_t next_serial;
    xid last;
    xgroup *g;
    size_t ng;
};

static void *xalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

static char *xdupn(const char *p, size_t n)
{
    char *d = xalloc(n + 1);
    memcpy(d, p, n);
    return d;
}

/* ------------------------------------------------------------- listpack -- */

/* listpack.c's lpStringToInt64: a string stored as an integer. */
static int lp_string_int(const char *p, size_t n, int64_t *v)
{
    if (n == 0 || n >= 21) return 0;
    if (n == 1 && p[0] == '0') { *v = 0; return 1; }
    size_t i = 0;
    int neg = p[0] == '-';
    if (neg && ++i == n) return 0;
    if (p[i] < '1' || p[i] > '9') return 0;
    uint64_t u = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' || u > (ULLONG_MAX - (uint64_t)(p[i] - '0')) / 10) return 0;
        u = u * 10 + (uint64_t)(p[i] - '0');
    }
    if (neg ? u > (uint64_t)LLONG_MAX + 1 : u > (uint64_t)LLONG_MAX) return 0;
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    return 1;
}

static size_t lp_backlen(size_t l)
{
    return l <= 127 ? 1 : l < 16383 ? 2 : l < 2097151 ? 3 : l < 268435455 ? 4 : 5;
}

static size_t lp_int(int64_t v)
{
    size_t enc = v >= 0 && v <= 127 ? 1 : v >= -4096 && v <= 4095 ? 2 : v >= -32768 && v <= 32767 ? 3
               : v >= -8388608 && v <= 8388607 ? 4 : v >= INT32_MIN && v <= INT32_MAX ? 5 : 9;
    return enc + lp_backlen(enc);
}

static size_t lp_str(const char *p, size_t n)
{
    int64_t v;
    if (lp_string_int(p, n, &v)) return lp_int(v);
    size_t enc = n < 64 ? 1 + n : n < 4096 ? 2 + n : 5 + n;
    return enc + lp_backlen(enc);
}

/* ----------------------------------------------------------------- ids -- */

int xid_cmp(xid a, xid b)
{
    if (a.ms != b.ms) return a.ms < b.ms ? -1 : 1;
    return a.seq < b.seq ? -1 : a.seq > b.seq;
}

static int parse_u64(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 20) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - (uint64_t)(p[i] - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return 0;
}

int xid_parse(const char *p, size_t n, int max_seq, xid *out)
{
    if (n == 1 && p[0] == '-') { *out = (xid){ 0, 0 }; return 0; }
    if (n == 1 && p[0] == '+') { *out = (xid){ UINT64_MAX, UINT64_MAX }; return 0; }
    const char *dash = memchr(p, '-', n);
    if (!dash) {
        out->seq = max_seq ? UINT64_MAX : 0;
        return parse_u64(p, n, &out->ms);
    }
    if (parse_u64(p, (size_t)(dash - p), &out->ms) < 0) return -1;
    return parse_u64(dash + 1, n - (size_t)(dash - p) - 1, &out->seq);
}

/* -------------------------------------------------------------- stream -- */

xstream *xs_new(void) { return xalloc(sizeof(xstream)); }

static void entry_free(xentry *e)
{
    for (size_t j = 0; j < e->nf; j++) free(e->f[j]);
    free(e->f);
    free(e->fl);
}

static void node_free(xnode *d)
{
    for (size_t j = 0; j < d->nmaster; j++) free(d->mf[j]);
    free(d->mf);
    free(d->mfl);
}

static void group_free(xgroup *g)
{
    free(g->pel);
    free(g->consumers);
}

void xs_free(xstream *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) entry_free(&s->e[i]);
    for (size_t i = 0; i < s->nn; i++) node_free(&s->nodes[i]);
    for (size_t i = 0; i < s->ng; i++) group_free(&s->g[i]);
    free(s->e);
    free(s->nodes);
    free(s->g);
    free(s);
}

static void copy_strings(size_t n, char *const *f, const size_t *fl, char ***of, size_t **ofl)
{
    *of = xalloc(n * sizeof **of);
    *ofl = xalloc(n * sizeof **ofl);
    for (size_t j = 0; j < n; j++) { (*of)[j] = xdupn(f[j], fl[j]); (*ofl)[j] = fl[j]; }
}

xstream *xs_copy(const xstream *s)
{
    xstream *c = xs_new();
    *c = *s;
    c->e = xalloc(s->n * sizeof *c->e);
    c->cap = s->n;
    for (size_t i = 0; i < s->n; i++) {
        c->e[i] = s->e[i];
        copy_strings(s->e[i].nf, s->e[i].f, s->e[i].fl, &c->e[i].f, &c->e[i].fl);
    }
    c->nodes = xalloc(s->nn * sizeof *c->nodes);
    c->capn = s->nn;
    for (size_t i = 0; i < s->nn; i++) {
        c->nodes[i] = s->nodes[i];
        copy_strings(s->nodes[i].nmaster, s->nodes[i].mf, s->nodes[i].mfl, &c->nodes[i].mf, &c->nodes[i].mfl);
    }
    c->g = xalloc(s->ng * sizeof *c->g);
    for (size_t i = 0; i < s->ng; i++) {
        c->g[i] = s->g[i];
        c->g[i].pel = xalloc(s->g[i].npel * sizeof *c->g[i].pel);
        c->g[i].cappel = s->g[i].npel;
        if (s->g[i].npel) memcpy(c->g[i].pel, s->g[i].pel, s->g[i].npel * sizeof *c->g[i].pel);
        c->g[i].consumers = xalloc(s->g[i].ncons * sizeof *c->g[i].consumers);
        if (s->g[i].ncons) memcpy(c->g[i].consumers, s->g[i].consumers, s->g[i].ncons * sizeof *c->g[i].consumers);
    }
    return c;
}

size_t xs_len(const xstream *s) { return s->n; }
const xentry *xs_at(const xstream *s, size_t i) { return i < s->n ? &s->e[i] : NULL; }
xid xs_last_id(const xstream *s) { return s->last; }

const xentry *xs_find(const xstream *s, xid id)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = xid_cmp(s->e[mid].id, id);
        if (!c) return &s->e[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* A new tail node for an entry of id with these field names. */
static xnode *node_new(xstream *s, xid id, size_t nfields, const char *const *f, const size_t *fl)
{
    if (s->nn == s->capn) {
        s->capn = s->capn ? s->capn * 2 : 8;
        s->nodes = realloc(s->nodes, s->capn * sizeof *s->nodes);
        if (!s->nodes) abort();
    }
    xnode *d = &s->nodes[s->nn++];
    memset(d, 0, sizeof *d);
    d->serial = ++s->next_serial;
    d->master = id;
    d->nmaster = nfields;
    d->mf = xalloc(nfields * sizeof *d->mf);
    d->mfl = xalloc(nfields * sizeof *d->mfl);
    /* count, deleted, num-fields, the names, the master's 0 */
    d->bytes = LP_HDR + LP_EOF + lp_int(1) + lp_int(0) + lp_int((int64_t)nfields) + lp_int(0);
    for (size_t j = 0; j < nfields; j++) {
        d->mf[j] = xdupn(f[2 * j], fl[2 * j]);
        d->mfl[j] = fl[2 * j];
        d->bytes += lp_str(f[2 * j], fl[2 * j]);
    }
    return d;
}

static int same_fields(const xnode *d, size_t nfields, const char *const *f, const size_t *fl)
{
    if (d->nmaster != nfields) return 0;
    for (size_t j = 0; j < nfields; j++)
        if (d->mfl[j] != fl[2 * j] || memcmp(d->mf[j], f[2 * j], fl[2 * j])) return 0;
    return 1;
}

const xentry *xs_add(xstream *s, uint64_t now_ms, size_t nf, const char *const *f, const size_t *fl)
{
    xid id = now_ms > s->last.ms ? (xid){ now_ms, 0 } : (xid){ s->last.ms, s->last.seq + 1 };
    return xs_add_id(s, id, nf, f, fl);
}

const xentry *xs_add_id(xstream *s, xid id, size_t nf, const char *const *f, const size_t *fl)
{
    if (xid_cmp(id, s->last) <= 0) return NULL;
    size_t nfields = nf / 2, tot = 0;
    for (size_t j = 0; j < nf; j++) tot += fl[j];
    xnode *d = s->nn ? &s->nodes[s->nn - 1] : NULL;
    if (d && (d->bytes + tot >= NODE_MAX_BYTES || d->live + d->deleted >= NODE_MAX_ENTRIES)) d = NULL;
    int same = 1;
    if (!d) d = node_new(s, id, nfields, f, fl);
    else same = same_fields(d, nfields, f, fl);
    /* flags, ms and seq deltas, [num-fields], [fields] values, lp-count */
    int64_t lp_count = (int64_t)nfields + 3 + (same ? 0 : (int64_t)nfields + 1);
    size_t bytes = lp_int(same ? 2 : 0) + lp_int((int64_t)(id.ms - d->master.ms)) +
                   lp_int((int64_t)(id.seq - d->master.seq)) + lp_int(lp_count);
    if (!same) bytes += lp_int((int64_t)nfields);
    for (size_t j = 0; j < nf; j++)
        if (!same || j % 2) bytes += lp_str(f[j], fl[j]);
    d->bytes += bytes;
    d->live++;
    d->last = id;
    s->last = id;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->e = realloc(s->e, s->cap * sizeof *s->e);
        if (!s->e) abort();
    }
    xentry *e = &s->e[s->n++];
    memset(e, 0, sizeof *e);
    e->id = id;
    snprintf(e->text, sizeof e->text, "%llu-%llu", (unsigned long long)id.ms, (unsigned long long)id.seq);
    copy_strings(nf, (char *const *)f, fl, &e->f, &e->fl);
    e->nf = nf;
    e->node = d->serial;
    return e;
}

/* Removes the first k entries of the stream (they are the head's). */
static void drop_entries(xstream *s, size_t k)
{
    for (size_t i = 0; i < k; i++) entry_free(&s->e[i]);
    memmove(s->e, s->e + k, (s->n - k) * sizeof *s->e);
    s->n -= k;
}

int64_t xs_trim(xstream *s, uint64_t maxlen, const xid *minid, int approx, int64_t limit)
{
    int64_t deleted = 0;
    while (s->nn) {
        xnode *d = &s->nodes[0];
        if (!minid && s->n <= maxlen) break;
        if (limit && deleted + d->live > limit) break;
        int whole = minid ? xid_cmp(d->last, *minid) < 0 : s->n - (size_t)d->live >= maxlen;
        if (whole) {
            drop_entries(s, (size_t)d->live);
            deleted += d->live;
            node_free(d);
            memmove(s->nodes, s->nodes + 1, (s->nn - 1) * sizeof *s->nodes);
            s->nn--;
            continue;
        }
        if (approx) break;
        /* exact: entries of this node, from its first, marked deleted */
        size_t k = 0;
        while (k < s->n && s->e[k].node == d->serial &&
               (minid ? xid_cmp(s->e[k].id, *minid) < 0 : s->n - k > maxlen))
            k++;
        drop_entries(s, k);
        d->live -= (int64_t)k;
        d->deleted += (int64_t)k;
        deleted += (int64_t)k;
        break;
    }
    return deleted;
}

/* -------------------------------------------------------------- groups -- */

xgroup *xs_group(xstream *s, const char *name)
{
    for (size_t i = 0; i < s->ng; i++)
        if (!strcmp(s->g[i].name, name)) return &s->g[i];
    return NULL;
}

int xs_group_create(xstream *s, const char *name, xid last)
{
    if (xs_group(s, name)) return -1;
    s->g = realloc(s->g, (s->ng + 1) * sizeof *s->g);
    if (!s->g) abort();
    xgroup *g = &s->g[s->ng++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->last = last;
    return 0;
}

static void consumer_touch(xgroup *g, const char *name)
{
    size_t i = 0;
    while (i < g->ncons && strcmp(g->consumers[i], name) < 0) i++;
    if (i < g->ncons && !strcmp(g->consumers[i], name)) return;
    g->consumers = realloc(g->consumers, (g->ncons + 1) * sizeof *g->consumers);
    if (!g->consumers) abort();
    memmove(g->consumers + i + 1, g->consumers + i, (g->ncons - i) * sizeof *g->consumers);
    snprintf(g->consumers[i], sizeof g->consumers[i], "%s", name);
    g->ncons++;
}

size_t xs_read_new(xstream *s, xgroup *g, const char *consumer, size_t count, size_t **out)
{
    consumer_touch(g, consumer);
    size_t from = 0, k = 0;
    while (from < s->n && xid_cmp(s->e[from].id, g->last) <= 0) from++;
    *out = xalloc((s->n - from) * sizeof **out);
    for (size_t i = from; i < s->n && (!count || k < count); i++) {
        if (g->npel == g->cappel) {
            g->cappel = g->cappel ? g->cappel * 2 : 16;
            g->pel = realloc(g->pel, g->cappel * sizeof *g->pel);
            if (!g->pel) abort();
        }
        xpending *p = &g->pel[g->npel++];
        memset(p, 0, sizeof *p);
        p->id = s->e[i].id;
        snprintf(p->consumer, sizeof p->consumer, "%s", consumer);
        g->last = s->e[i].id;
        (*out)[k++] = i;
    }
    return k;
}

size_t xs_read_pending(xgroup *g, const char *consumer, xid after, size_t count, xid **out)
{
    consumer_touch(g, consumer);
    size_t k = 0;
    *out = xalloc(g->npel * sizeof **out);
    for (size_t i = 0; i < g->npel && (!count || k < count); i++) {
        if (strcmp(g->pel[i].consumer, consumer) || xid_cmp(g->pel[i].id, after) <= 0) continue;
        (*out)[k++] = g->pel[i].id;
    }
    return k;
}

int xs_ack(xgroup *g, xid id)
{
    for (size_t i = 0; i < g->npel; i++)
        if (!xid_cmp(g->pel[i].id, id)) {
            memmove(g->pel + i, g->pel + i + 1, (g->npel - i - 1) * sizeof *g->pel);
            g->npel--;
            return 1;
        }
    return 0;
}
