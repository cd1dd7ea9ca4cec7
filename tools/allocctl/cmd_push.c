/* cmd_push.c -- `allocctl push`: builds a request from options (or takes
 * --json verbatim), checks it as allocd would, and pushes it with the
 * queue-position transaction (or to the ctl queue with --ctl). */
#include "allocctl/cmd_push.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "base/random.h"
#include "allocctl/ctl_filter.h"
#include "allocctl/ctl_items.h"
#include "allocctl/ctl_queue.h"
#include "allocctl/ctl_sync.h"
#include "allocctl/cmd_status.h"
#include "wire/request.h"

static void random_id(char *buf, size_t len, const char *prefix)
{
    snprintf(buf, len, "%s%016" PRIx64, prefix, random_u64());
}

typedef struct push_opts {
    const char *user, *op, *id, *item, *qty, *room, *order, *prefs, *members, *filter;
    const char *json, *capacity;
    const char *to, *from, *with, *version;   /* invite, accept/decline, swap, prefs */
    const char *timeout;      /* --wait's limit */
    int ctl, force, wait, waitlist;
    json_t *attrs;            /* the batch's rooms, for --filter's types */
} push_opts;

/* "a,b,c" -> ["a","b","c"] */
static json_t *split_list(const char *s)
{
    json_t *arr = json_array();
    while (arr && *s) {
        size_t n = strcspn(s, ",");
        if (n) json_array_append_new(arr, json_stringn(s, n));
        s += n + (s[n] == ',');
    }
    return arr;
}

static int set_int_field(const ctx *x, json_t *o, const char *name, const char *v)
{
    int64_t n;
    if (!v) return 0;
    if (opt_int(x, name, v, INT64_MIN / 2, INT64_MAX / 2, &n) < 0) return -1;
    json_object_set_new(o, name, json_integer(n));
    return 0;
}

/* The request document from the options; NULL on a usage error. */
static json_t *build_request(const ctx *x, const push_opts *p, const char *id)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    if (p->user) json_object_set_new(o, "user", json_string(p->user));
    json_object_set_new(o, "op", json_string(p->op));
    const char *strs[][2] = { { "item", p->item }, { "room", p->room }, { "order", p->order },
                              { "from", p->from }, { "with", p->with } };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (strs[i][1]) json_object_set_new(o, strs[i][0], json_string(strs[i][1]));
    if (p->prefs) json_object_set_new(o, "prefs", split_list(p->prefs));
    if (p->members) json_object_set_new(o, "members", split_list(p->members));
    if (p->to) json_object_set_new(o, "to", split_list(p->to));
    if (p->waitlist) json_object_set_new(o, "wait", json_true());
    if (p->filter) {
        char err[300];
        json_t *f = ctl_filter_build(p->filter, p->attrs, err, sizeof err);
        if (!f) {
            errmsg(x, "%s (got --filter '%s')", err, p->filter);
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, "filter", f);
    }
    if (set_int_field(x, o, "qty", p->qty) < 0 || set_int_field(x, o, "capacity", p->capacity) < 0 ||
        set_int_field(x, o, "version", p->version) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The JSON text to push (malloc'd) and its id (in idbuf, "-" if none). */
static char *request_text(ctx *x, const push_opts *p, char *idbuf, size_t idlen)
{
    if (p->json && (p->user || p->op || p->id || p->item || p->qty || p->room || p->order ||
                    p->prefs || p->members || p->filter || p->capacity || p->to || p->from ||
                    p->with || p->version || p->waitlist)) {
        errmsg(x, "--json is pushed verbatim: it excludes --user, --op and the other fields");
        return NULL;
    }
    if (p->json) {
        json_error_t je;
        json_t *doc = json_loads(p->json, 0, &je);
        const char *id = json_string_value(json_object_get(doc, "id"));
        snprintf(idbuf, idlen, "%s", id ? id : "-");
        json_decref(doc);
        return strdup(p->json);
    }
    if (!p->op || (!p->user && !p->ctl)) {
        errmsg(x, "--op and --user (or --json) are required (try --help)");
        return NULL;
    }
    if (p->id) snprintf(idbuf, idlen, "%s", p->id);
    else random_id(idbuf, idlen, p->ctl ? "c-" : "r-");
    json_t *doc = build_request(x, p, idbuf);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) return NULL;
    request q;
    request_parse(&q, text, strlen(text), (size_t)x->cfg.max_request_bytes, p->ctl);
    int ok = q.outcome == REQUEST_OK;
    if (!ok) errmsg(x, "allocd would not accept %s: %s (use --json to push it anyway)", text, q.error);
    request_clear(&q);
    if (!ok) { free(text); return NULL; }
    return text;
}

/* A batch nobody serves (not in P:batches, or without meta) would keep the
 * request queued for ever: refuse unless --force. */
static int check_batch(ctx *x, const char *batch)
{
    redisReply *m = rcmd(x, "SISMEMBER %s %s", x->batches_key, batch);
    redisReply *e = m ? rcmd(x, "EXISTS %s", x->k.meta) : NULL;
    int rc = !m || !e ? EX_REDIS : EX_OK;
    if (rc == EX_OK && (m->integer != 1 || e->integer != 1)) {
        errmsg(x, "batch %s %s: no daemon would answer the request (--force to push anyway)", batch,
               e->integer != 1 ? "does not exist (no meta)" : "is not live (not in P:batches)");
        rc = EX_NOT;
    }
    if (m) freeReplyObject(m);
    if (e) freeReplyObject(e);
    return rc;
}

/* An id that already has a result is not applied again (a request gets
 * counted as a duplicate, an admin command is ignored): say so before the
 * push rather than after. */
static int check_id_unused(ctx *x, const char *id)
{
    /* raw, not rcmd: a producer's login (allocctl acl) may not read
     * results; then the check cannot be made, and the push goes ahead */
    redisReply *r = redisCommand(x->c, "HGET %s %s", x->k.results, id);
    if (r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOPERM", 6)) {
        fprintf(stderr, "allocctl push: note: cannot check whether id %s already has a result "
                "(this login may not read results)\n", id);
        freeReplyObject(r);
        return EX_OK;
    }
    const char *e = ctl_reply_error(x->c, r);
    if (e) {
        errmsg(x, "redis: %s", e);
        if (r) freeReplyObject(r);
        return EX_REDIS;
    }
    int used = r->type == REDIS_REPLY_STRING;
    if (used) errmsg(x, "id %s already has a result (%s): allocd would not apply it again; "
                     "use a new id (--force to push anyway)", id, r->str);
    freeReplyObject(r);
    return used ? EX_NOT : EX_OK;
}

/* P:{B}:attrs as {room: {attributes}}, or NULL when there are none. */
static json_t *load_attrs(ctx *x)
{
    redisReply *r = rcmd(x, "HGETALL %s", x->k.attrs);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0) { if (r) freeReplyObject(r); return NULL; }
    json_t *o = json_object();
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        json_error_t je;
        json_t *a = json_loadb(r->element[i + 1]->str, r->element[i + 1]->len, 0, &je);
        if (json_is_object(a)) json_object_set_new(o, r->element[i]->str, a);
        else json_decref(a);
    }
    freeReplyObject(r);
    return o;
}

static int push_request(ctx *x, const char *batch, push_opts *p)
{
    int rc = ctx_batch(x, batch);
    if (rc == EX_OK) rc = ctx_connect(x);
    if (rc == EX_OK && !p->force) rc = check_batch(x, batch);
    if (rc != EX_OK) return rc;
    if (p->wait && p->ctl) { errmsg(x, "--wait is for requests; an admin command has no result to wait for"); return EX_USAGE; }
    if (p->timeout && !p->wait) { errmsg(x, "--timeout goes with --wait"); return EX_USAGE; }
    if (p->filter && !p->json) p->attrs = load_attrs(x);
    char id[80];
    char *text = request_text(x, p, id, sizeof id);
    json_decref(p->attrs);
    p->attrs = NULL;
    if (!text) return EX_USAGE;
    if (p->id && !p->force) rc = check_id_unused(x, id);
    if (rc == EX_OK && p->ctl) {
        redisReply *r = rcmd(x, "RPUSH %s %s", x->k.ctl, text);
        if (r) printf("id=%s ctl_length=%lld\n", id, r->integer);
        else rc = EX_REDIS;
        if (r) freeReplyObject(r);
    } else if (rc == EX_OK) {
        int64_t ordinal;
        char err[300];
        if (ctl_push_ordinal(x->c, &x->k, text, strlen(text), &ordinal, err, sizeof err) < 0) {
            errmsg(x, "redis: %s", err);
            rc = EX_REDIS;
        } else printf("id=%s ordinal=%" PRId64 "\n", id, ordinal);
    }
    free(text);
    if (rc == EX_OK && p->wait) {
        double secs;
        fflush(stdout);
        rc = status_wait_timeout(x, p->timeout, &secs);
        if (rc == EX_OK) rc = status_wait_final(x, id, secs, 0);
    }
    return rc;
}

static const char HELP_PUSH[] =
"Usage: allocctl push B --user U --op OP [fields] | --json '{...}' | --ctl --op OP\n"
"\n"
"Builds the request (a random id unless --id), checks it as allocd would, pushes it with\n"
"MULTI; RPUSH P:{B}:queue; HGET P:{B}:stats dequeued; EXEC and prints `id=ID ordinal=N`\n"
"(N is the request's future `seq`).\n"
"\n"
"  --id ID  --item X  --qty N  --room R  --order O\n"
"  --prefs a,b,c  --members a,b\n"
"  --filter k=v,k2=v2  each value takes the type the attribute has in P:{B}:attrs\n"
"                   (building=7 matches \"7\" or 7 as the rooms have it; \"7\" is always a string)\n"
"  groups formed by consent and swaps (rooms): --op invite --to a,b | --op accept|decline\n"
"  --from U | --op leave | --op prefs --prefs a,b --version N | --op group | --op swap --with U\n"
"  --waitlist       \"wait\":true: join the waitlist instead of sold_out/room_full/no_room (9.5)\n"
"  --wait [--timeout S]  then wait for the request's final result and print it, as\n"
"                   `allocctl wait` does (default 30 s, 0 = no limit; exit 1 on timeout)\n"
"  --force          push even if the batch is not live (not in P:batches, or no meta)\n"
"  --json '{...}'   push these bytes verbatim (no checks; may end up dead)\n"
"  --ctl            an admin command to P:{B}:ctl (--op pause|resume|close|set_capacity,\n"
"                   --item X --capacity N); prints `id=ID ctl_length=L`\n";

int cmd_push(ctx *x, int argc, char **argv, int at)
{
    push_opts p = { 0 };
    const char *pos[MAX_POS], *b;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x),
        { "user", 0, &p.user, NULL }, { "op", 0, &p.op, NULL }, { "id", 0, &p.id, NULL },
        { "item", 0, &p.item, NULL }, { "qty", 0, &p.qty, NULL }, { "room", 0, &p.room, NULL },
        { "order", 0, &p.order, NULL }, { "prefs", 0, &p.prefs, NULL },
        { "members", 0, &p.members, NULL }, { "filter", 0, &p.filter, NULL },
        { "json", 0, &p.json, NULL }, { "capacity", 0, &p.capacity, NULL },
        { "ctl", 0, NULL, &p.ctl }, { "force", 0, NULL, &p.force },
        { "to", 0, &p.to, NULL }, { "from", 0, &p.from, NULL },
        { "with", 0, &p.with, NULL }, { "version", 0, &p.version, NULL },
        { "wait", 0, NULL, &p.wait }, { "waitlist", 0, NULL, &p.waitlist },
        { "timeout", 0, &p.timeout, NULL } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_PUSH) : rc;
    rc = one_batch(x, npos, pos, &b);
    return rc ? rc : push_request(x, b, &p);
}
