/* request_fields.c -- the contract of a request, checked in one place (see
 * request_fields.h).
 *
 * Why it exists: request.c reads requests in two ways (a fast scanner and
 * jansson). When each reader checked the fields itself, every check and
 * every message was written twice and held together only by a test. Now
 * the readers only report what they found under each key, and this file
 * alone says what is valid: the tables below (which fields each op needs,
 * how each field is checked, where its value goes) and the messages
 * clients see in `detail`, which are part of the contract and must not
 * change.
 *
 * The checks follow the order a producer would debug them in: id, op, the
 * fields every request of the grammar needs (user), then the op's own
 * fields in table order, then the rules across fields. The first problem
 * found is the one reported, so `detail` names one concrete thing to fix.
 * A failed check leaves what was already stored in q->r (id, user, ...) in
 * place; an `invalid` result shows the id and user.
 */
#include "wire/request_fields.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QTY_MAX 1000000          /* units in one buy */
#define CAPACITY_MAX 2000000000LL
#define VERSION_MAX 9007199254740991LL  /* 2^53 - 1: exact in every JSON reader */

/* How a field's value is checked. The check also fixes the C type of the
 * field's slot in engine_request (field_spec.at), asserted below. */
typedef enum {
    CHECK_BY_VALIDATE = 0, /* id, op: request_validate() reads them itself */
    CHECK_NAME,   /* 1 to 64 characters, no control characters: const char * */
    CHECK_INT,    /* an integer in [lo, hi], dflt when absent: int64_t */
    CHECK_ORDER,  /* a positive integer or 1 to 20 digits: r.order */
    CHECK_NAMES,  /* an array of at most REQUEST_MAX_LIST names:
                     const char *const * and a size_t count (count_at) */
    CHECK_FILTER, /* an object of at most REQUEST_MAX_LIST keys: r.filter */
    CHECK_BOOL    /* true or false: int, 0 when absent */
} value_check;

typedef struct field_spec {
    const char *name;        /* the JSON key, also the name in messages */
    size_t name_len;
    value_check check;
    size_t at;               /* offset of the value's slot in engine_request */
    size_t count_at;         /* CHECK_NAMES: offset of the count's slot */
    long long lo, hi, dflt;  /* CHECK_INT */
} field_spec;

#define KEY(s) s, sizeof s - 1
#define AT(member) offsetof(engine_request, member)

/* One row per field: a field means the same in every op that has it
 * (`room` and `item` both land in r.item, `qty` and `capacity` in r.qty).
 * Order and filter have one field each and fixed slots. */
static const field_spec field_specs[FIELD_COUNT] = {
    [FIELD_ID]       = { KEY("id"), CHECK_BY_VALIDATE },
    [FIELD_USER]     = { KEY("user"), CHECK_NAME, AT(user) },
    [FIELD_OP]       = { KEY("op"), CHECK_BY_VALIDATE },
    [FIELD_ITEM]     = { KEY("item"), CHECK_NAME, AT(item) },
    [FIELD_QTY]      = { KEY("qty"), CHECK_INT, AT(qty), .lo = 1, .hi = QTY_MAX, .dflt = 1 },
    [FIELD_ORDER]    = { KEY("order"), CHECK_ORDER },
    [FIELD_ROOM]     = { KEY("room"), CHECK_NAME, AT(item) },
    [FIELD_PREFS]    = { KEY("prefs"), CHECK_NAMES, AT(prefs), AT(n_prefs) },
    [FIELD_MEMBERS]  = { KEY("members"), CHECK_NAMES, AT(members), AT(n_members) },
    [FIELD_CAPACITY] = { KEY("capacity"), CHECK_INT, AT(qty), .lo = 0, .hi = CAPACITY_MAX },
    [FIELD_FILTER]   = { KEY("filter"), CHECK_FILTER },
    [FIELD_TO]       = { KEY("to"), CHECK_NAMES, AT(to), AT(n_to) },
    [FIELD_FROM]     = { KEY("from"), CHECK_NAME, AT(peer) },
    [FIELD_VERSION]  = { KEY("version"), CHECK_INT, AT(version), .lo = 0, .hi = VERSION_MAX },
    [FIELD_WITH]     = { KEY("with"), CHECK_NAME, AT(peer) },
    [FIELD_WAIT]     = { KEY("wait"), CHECK_BOOL, AT(wait) },
    [FIELD_CHECK]    = { KEY("check"), CHECK_BOOL, AT(check) },
};

/* The slots' types, as the checks write them. */
#define SLOT_IS(member, type) \
    _Static_assert(_Generic(((engine_request *)0)->member, type: 1, default: 0), \
                   "engine_request." #member " must be " #type)
SLOT_IS(user, const char *);
SLOT_IS(item, const char *);
SLOT_IS(qty, int64_t);
SLOT_IS(prefs, const char *const *);
SLOT_IS(n_prefs, size_t);
SLOT_IS(members, const char *const *);
SLOT_IS(n_members, size_t);
SLOT_IS(to, const char *const *);
SLOT_IS(n_to, size_t);
SLOT_IS(peer, const char *);
SLOT_IS(version, int64_t);
SLOT_IS(wait, int);
SLOT_IS(check, int);

/* Whether an op has a field. Zero (END) ends a list. */
typedef enum { END = 0, OPTIONAL, REQUIRED } field_presence;

typedef struct field_use {
    request_field field;
    field_presence presence;
} field_use;

typedef enum { GRAMMAR_NONE = 0, GRAMMAR_QUEUE, GRAMMAR_CTL } grammar_id;

#define OP_MAX_FIELDS 4

typedef struct op_rule {
    grammar_id grammar;                /* the list the op may be pushed to */
    field_use fields[OP_MAX_FIELDS];   /* checked in this order */
    int (*across)(request *q);         /* a rule across fields, checked
                                          after them; NULL when none */
} op_rule;

static int prefs_or_filter(request *q);
static int members_include_user_once(request *q);
static int to_not_empty(request *q);
static int with_another_user(request *q);

/* Every op of the contract. An op the engine knows and this table does
 * not (GRAMMAR_NONE) is refused in both lists. */
static const op_rule op_rules[] = {
    [OP_BUY]          = { GRAMMAR_QUEUE, { { FIELD_ITEM, REQUIRED }, { FIELD_QTY, OPTIONAL },
                                           { FIELD_WAIT, OPTIONAL } } },
    [OP_CONFIRM]      = { GRAMMAR_QUEUE, { { FIELD_ORDER, REQUIRED } } },
    [OP_CANCEL]       = { GRAMMAR_QUEUE, { { FIELD_ORDER, REQUIRED } } },
    [OP_CHOOSE]       = { GRAMMAR_QUEUE, { { FIELD_ROOM, REQUIRED }, { FIELD_WAIT, OPTIONAL } } },
    [OP_SWITCH]       = { GRAMMAR_QUEUE, { { FIELD_ROOM, REQUIRED } } },
    [OP_AUTO]         = { GRAMMAR_QUEUE, { { FIELD_PREFS, OPTIONAL }, { FIELD_FILTER, OPTIONAL },
                                           { FIELD_WAIT, OPTIONAL } },
                          prefs_or_filter },
    [OP_GROUP]        = { GRAMMAR_QUEUE, { { FIELD_PREFS, OPTIONAL }, { FIELD_FILTER, OPTIONAL },
                                           { FIELD_MEMBERS, OPTIONAL }, { FIELD_WAIT, OPTIONAL } },
                          members_include_user_once },
    [OP_RELEASE]      = { GRAMMAR_QUEUE, { { 0 } } },
    [OP_PAUSE]        = { GRAMMAR_CTL, { { 0 } } },
    [OP_RESUME]       = { GRAMMAR_CTL, { { 0 } } },
    [OP_CLOSE]        = { GRAMMAR_CTL, { { 0 } } },
    [OP_SET_CAPACITY] = { GRAMMAR_CTL, { { FIELD_ITEM, REQUIRED }, { FIELD_CAPACITY, REQUIRED } } },
    [OP_INVITE]       = { GRAMMAR_QUEUE, { { FIELD_TO, REQUIRED } }, to_not_empty },
    [OP_ACCEPT]       = { GRAMMAR_QUEUE, { { FIELD_FROM, REQUIRED } } },
    [OP_DECLINE]      = { GRAMMAR_QUEUE, { { FIELD_FROM, REQUIRED } } },
    [OP_LEAVE]        = { GRAMMAR_QUEUE, { { 0 } } },
    [OP_PREFS]        = { GRAMMAR_QUEUE, { { FIELD_PREFS, OPTIONAL }, { FIELD_FILTER, OPTIONAL },
                                           { FIELD_VERSION, REQUIRED } } },
    [OP_SWAP]         = { GRAMMAR_QUEUE, { { FIELD_WITH, REQUIRED } }, with_another_user },
    /* staff placements (contract 11.5): admin commands naming a user */
    [OP_ASSIGN]       = { GRAMMAR_CTL, { { FIELD_USER, REQUIRED }, { FIELD_ITEM, REQUIRED },
                                         { FIELD_QTY, OPTIONAL }, { FIELD_CHECK, OPTIONAL } } },
    [OP_UNASSIGN]     = { GRAMMAR_CTL, { { FIELD_USER, REQUIRED }, { FIELD_ORDER, OPTIONAL } } },
};

typedef struct grammar_rule {
    grammar_id grammar;
    field_use common[2];   /* fields of every request of the list, checked
                              before the op is looked up */
    const char *foreign;   /* the refusal of an op of the other list:
                              "op '<op>' <foreign>" */
} grammar_rule;

/* [0]: the queue, [1]: the ctl list (request_validate's `admin`). The queue
 * checks `user` even for an admin op, before refusing it: that order is
 * what clients have always seen. */
static const grammar_rule grammar_rules[2] = {
    { GRAMMAR_QUEUE, { { FIELD_USER, REQUIRED } }, "is an admin command: push it to the ctl list" },
    { GRAMMAR_CTL, { { 0 } }, "is not an admin command (pause, resume, close, set_capacity)" },
};

/* Where an absent optional list points: never NULL, so a reader of the
 * request can tell "no prefs given" from "prefs not read". */
static const char *const no_names[1];

void request_fail(request *q, request_outcome o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->error, sizeof q->error, fmt, ap);
    va_end(ap);
    q->outcome = o;
}

const char *request_field_name(request_field f)
{
    return field_specs[f].name;
}

static int is_field(request_field f, const char *key, size_t n)
{
    return field_specs[f].name_len == n && !memcmp(field_specs[f].name, key, n);
}

/* Runs for every key of every request on the fast path, so it dispatches
 * on the length first (a jump table) and compares at most a few names,
 * which the compiler turns into fixed-size compares against the table's
 * constants. The grouping by length is the one thing here not taken from
 * the table: tests/unit/test_request.c checks that every field's name
 * finds it. */
int request_field_lookup(const char *key, size_t n)
{
#define IS(f) if (is_field(f, key, n)) return f
    switch (n) {
    case 2: IS(FIELD_ID); IS(FIELD_OP); IS(FIELD_TO); break;
    case 3: IS(FIELD_QTY); break;
    case 4: IS(FIELD_USER); IS(FIELD_ITEM); IS(FIELD_ROOM); IS(FIELD_FROM); IS(FIELD_WITH);
        IS(FIELD_WAIT); break;
    case 5: IS(FIELD_ORDER); IS(FIELD_PREFS); IS(FIELD_CHECK); break;
    case 6: IS(FIELD_FILTER); break;
    case 7: IS(FIELD_MEMBERS); IS(FIELD_VERSION); break;
    case 8: IS(FIELD_CAPACITY); break;
    }
#undef IS
    return -1;
}

/* 1 to 64 printable ASCII characters: safe as a hash field and in logs. */
static int valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > ENGINE_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e) return 0;
    return 1;
}

/* 1 to 64 characters (code points; jansson already checked UTF-8, the fast
 * path reads ASCII only), no control characters, so at most
 * ENGINE_ID_MAX * 4 bytes. Printable ASCII, nearly every byte of every
 * name, takes one compare; the rest is sorted out after it. */
static int valid_name(const char *s)
{
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((unsigned char)(*p - 0x20) >= 0x5f) {  /* not 0x20..0x7e */
            if (*p < 0x20 || *p == 0x7f) return 0;
            if ((*p & 0xc0) == 0x80) continue;     /* inside a character */
        }
        chars++;
    }
    return chars >= 1 && chars <= ENGINE_ID_MAX;
}

static void *slot(request *q, size_t at)
{
    return (char *)&q->r + at;
}

/* -------------------------------------------------------------- checks -- */

static int check_name(request *q, const raw_value *v, const field_spec *spec)
{
    const char **to = slot(q, spec->at);
    /* Already there: request_validate() read the user early (for the
     * invalid result) and stores only a valid name. Saves checking the
     * same string twice on every request. */
    if (v->kind == RAW_STRING && *to == v->u.str) return 0;
    if (v->kind != RAW_STRING) {
        request_fail(q, REQUEST_INVALID, "'%s' must be a string", spec->name);
        return -1;
    }
    if (!valid_name(v->u.str)) {
        request_fail(q, REQUEST_INVALID, "'%s' must be 1 to %d characters without control characters",
                     spec->name, ENGINE_ID_MAX);
        return -1;
    }
    *to = v->u.str;
    return 0;
}

static int check_int(request *q, const raw_value *v, const field_spec *spec)
{
    if (v->kind != RAW_INT) {
        request_fail(q, REQUEST_INVALID, "'%s' must be an integer", spec->name);
        return -1;
    }
    if (v->u.i < spec->lo || v->u.i > spec->hi) {
        request_fail(q, REQUEST_INVALID, "'%s' must be between %lld and %lld", spec->name,
                     spec->lo, spec->hi);
        return -1;
    }
    *(int64_t *)slot(q, spec->at) = v->u.i;
    return 0;
}

/* An order id: a positive integer, or a string of 1 to 20 decimal digits,
 * not 0, that fits in 64 bits. A string of digits is stored even when it
 * is then refused (0, too big: strtoull's ULLONG_MAX); that is what an
 * `invalid` result has always carried. */
static int check_order(request *q, const raw_value *v)
{
    if (v->kind == RAW_INT && v->u.i > 0) {
        q->r.order = (uint64_t)v->u.i;
        return 0;
    }
    const char *s = v->kind == RAW_STRING ? v->u.str : NULL;
    size_t n = s ? strlen(s) : 0;
    int ok = n >= 1 && n <= 20 && strspn(s, "0123456789") == n;
    if (ok) {
        errno = 0;
        unsigned long long x = strtoull(s, NULL, 10);
        ok = errno == 0 && x > 0;
        q->r.order = x;
    }
    if (!ok) request_fail(q, REQUEST_INVALID, "'order' must be a string of decimal digits");
    return ok ? 0 : -1;
}

/* The reader could not store the elements or the filter's values. Only
 * the checks that keep them ask; to the others such a value is what it is,
 * an array or object, and gets their usual refusal. */
static int out_of_memory(request *q)
{
    request_fail(q, REQUEST_INVALID, "out of memory");
    return -1;
}

static int check_names(request *q, const raw_value *v, const field_spec *spec)
{
    if (v->kind == RAW_NOMEM) return out_of_memory(q);
    if (v->kind != RAW_ARRAY) {
        request_fail(q, REQUEST_INVALID, "'%s' must be an array of strings", spec->name);
        return -1;
    }
    if (v->n > REQUEST_MAX_LIST) {
        request_fail(q, REQUEST_INVALID, "'%s' has %zu entries, at most %d are allowed",
                     spec->name, v->n, REQUEST_MAX_LIST);
        return -1;
    }
    for (size_t i = 0; i < v->n; i++) {
        if (!v->u.list[i] || !valid_name(v->u.list[i])) {
            request_fail(q, REQUEST_INVALID, "'%s'[%zu] must be a string of 1 to %d characters",
                         spec->name, i, ENGINE_ID_MAX);
            return -1;
        }
    }
    *(const char *const **)slot(q, spec->at) = v->u.list;
    *(size_t *)slot(q, spec->count_at) = v->n;
    return 0;
}

static int check_filter(request *q, const raw_value *v, const field_spec *spec)
{
    if (v->kind == RAW_NOMEM) return out_of_memory(q);
    if (v->kind != RAW_OBJECT) {
        request_fail(q, REQUEST_INVALID, "'%s' must be an object", spec->name);
        return -1;
    }
    if (v->n > REQUEST_MAX_LIST) {
        request_fail(q, REQUEST_INVALID, "'%s' has too many keys", spec->name);
        return -1;
    }
    q->r.filter = v->u.filter;
    q->r.n_filter = v->n;
    q->r.has_filter = 1;
    return 0;
}

static int check_bool(request *q, const raw_value *v, const field_spec *spec)
{
    if (v->kind != RAW_BOOL) {
        request_fail(q, REQUEST_INVALID, "'%s' must be true or false", spec->name);
        return -1;
    }
    *(int *)slot(q, spec->at) = v->u.i != 0;
    return 0;
}

/* A field an op has but the request lacks: refused when required, else
 * the default (qty 1, no prefs) or nothing. */
static int absent_field(request *q, const field_spec *spec, field_presence presence)
{
    if (presence == REQUIRED) {
        request_fail(q, REQUEST_INVALID, "missing field '%s'", spec->name);
        return -1;
    }
    if (spec->check == CHECK_INT) {
        *(int64_t *)slot(q, spec->at) = spec->dflt;
    } else if (spec->check == CHECK_NAMES) {
        *(const char *const **)slot(q, spec->at) = no_names;
        *(size_t *)slot(q, spec->count_at) = 0;
    }
    return 0;
}

static int check_field(request *q, const raw_value *v, request_field field, field_presence presence)
{
    const field_spec *spec = &field_specs[field];
    if (v->kind == RAW_ABSENT) return absent_field(q, spec, presence);
    switch (spec->check) {
    case CHECK_NAME: return check_name(q, v, spec);
    case CHECK_INT: return check_int(q, v, spec);
    case CHECK_ORDER: return check_order(q, v);
    case CHECK_NAMES: return check_names(q, v, spec);
    case CHECK_FILTER: return check_filter(q, v, spec);
    case CHECK_BOOL: return check_bool(q, v, spec);
    case CHECK_BY_VALIDATE: break;
    }
    return 0; /* id and op are never listed as an op's fields */
}

/* The fields of a list (up to max entries or END), in order; 0 or -1. */
static int check_fields(request *q, const request_fields *f, const field_use *uses, size_t max)
{
    for (size_t i = 0; i < max && uses[i].presence != END; i++)
        if (check_field(q, &f->v[uses[i].field], uses[i].field, uses[i].presence) < 0) return -1;
    return 0;
}

/* ------------------------------------------------- rules across fields -- */

static int prefs_or_filter(request *q)
{
    if (q->r.n_prefs == 0 && !q->r.has_filter) {
        request_fail(q, REQUEST_INVALID, "'auto' needs 'prefs' or 'filter'");
        return -1;
    }
    return 0;
}

/* No member twice, and the requester among them. Without `members` (a
 * group formed by invite/accept, contract 9.2) there is nothing to check. */
static int members_include_user_once(request *q)
{
    if (q->r.n_members == 0) return 0;
    int has_user = 0;
    for (size_t i = 0; i < q->r.n_members; i++) {
        if (strcmp(q->r.members[i], q->r.user) == 0) has_user = 1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(q->r.members[i], q->r.members[j]) == 0) {
                request_fail(q, REQUEST_INVALID, "'members' lists '%s' twice", q->r.members[i]);
                return -1;
            }
    }
    if (!has_user) {
        request_fail(q, REQUEST_INVALID, "'members' must include 'user'");
        return -1;
    }
    return 0;
}

static int to_not_empty(request *q)
{
    if (q->r.n_to == 0) {
        request_fail(q, REQUEST_INVALID, "'to' must name at least one user");
        return -1;
    }
    return 0;
}

static int with_another_user(request *q)
{
    if (strcmp(q->r.peer, q->r.user) == 0) {
        request_fail(q, REQUEST_INVALID, "'with' must name another user");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the op -- */

/* The grammar's common fields, the op's place in the grammar, its fields
 * and its rule across them. 0 when the request is valid. */
static int check_op(request *q, const request_fields *f, int admin)
{
    const grammar_rule *g = &grammar_rules[admin ? 1 : 0];
    if (check_fields(q, f, g->common, sizeof g->common / sizeof g->common[0]) < 0) return -1;
    const op_rule *rule = (size_t)q->r.op < sizeof op_rules / sizeof op_rules[0] ? &op_rules[q->r.op] : NULL;
    if (!rule || rule->grammar != g->grammar) {
        request_fail(q, REQUEST_INVALID, "op '%s' %s", q->op_name, g->foreign);
        return -1;
    }
    if (check_fields(q, f, rule->fields, OP_MAX_FIELDS) < 0) return -1;
    return rule->across ? rule->across(q) : 0;
}

void request_validate(request *q, const request_fields *f, int admin)
{
    const raw_value *id = &f->v[FIELD_ID], *user = &f->v[FIELD_USER], *op = &f->v[FIELD_OP];
    if (id->kind != RAW_STRING) {
        request_fail(q, REQUEST_DEAD, "missing or non-string 'id'");
        return;
    }
    q->r.id = id->u.str;
    /* From here on the id is readable: every problem is an `invalid`
     * result, which also names the user when there is a valid one. */
    if (user->kind == RAW_STRING && valid_name(user->u.str)) q->r.user = user->u.str;
    if (!valid_id(q->r.id)) {
        request_fail(q, REQUEST_INVALID, "'id' must be 1 to %d printable ASCII characters", ENGINE_ID_MAX);
        return;
    }
    if (f->number_overflowed) {
        request_fail(q, REQUEST_INVALID, "a number is out of range (beyond a 64-bit integer or a double)");
        return;
    }
    if (op->kind != RAW_STRING) {
        request_fail(q, REQUEST_INVALID, "missing or non-string 'op'");
        return;
    }
    q->op_name = op->u.str;
    q->r.op = engine_op_parse(q->op_name);
    if (q->r.op == OP_NONE) {
        request_fail(q, REQUEST_INVALID, "unknown op '%.40s'", q->op_name);
        return;
    }
    if (check_op(q, f, admin) == 0) q->outcome = REQUEST_OK;
}
