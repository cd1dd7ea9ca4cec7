/* engine_groups.c -- groups formed by consent (contract 9.2).
 *
 * With meta groups=formed a group exists only through its members' own
 * requests: `invite` (creating the group, the sender leading, if the
 * sender has none), `accept` (joining; every other invitation of that
 * user is declined), `decline`, `leave` (the next member by joining order
 * leads; the last one out dissolves the group), `prefs` (shared
 * preferences, replaced only by someone who read the current version:
 * `conflict` otherwise, which is the old timestamp check without a lock)
 * and `group`, which places exactly the members who accepted. Each is one
 * engine decision in queue order, so members racing each other within a
 * chunk or across chunks are simply ordered by the queue.
 *
 * Records: a group keeps its members and invitations as user ids (the
 * engine's interned strings, which never move), in joining / inviting
 * order. Per user, the group it is in and the groups that invited it, so
 * accept and leave never scan all groups. Everything a decision allocates
 * is allocated before it changes anything (the engine's rule): out of
 * memory leaves no half-made group behind.
 */
#include "core/engine_groups.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "core/vec.h"
#include "engine_groups_int.h"
#include "engine_rooms_int.h"
#include "engine_state.h"

#define GROUP_NONE UINT32_MAX
#define INVITED_MAX 256          /* pending invitations of one group */

typedef struct grp {
    char *id;
    const char **members;
    uint32_t n_members, cap_members;
    const char **invited;
    uint32_t n_invited, cap_invited;
    char **prefs;
    uint32_t n_prefs;
    engine_kv *filter;
    uint32_t n_filter;
    uint8_t has_filter, alive, dirty;
    int64_t version;
} grp;

typedef struct guser {
    uint32_t group;              /* GROUP_NONE when in none */
    uint32_t n_inv, cap_inv;
    uint32_t *inv;               /* groups that invited the user */
} guser;

typedef struct engine_groups {
    grp *g;
    size_t n, cap;
    strmap map;                  /* group id -> index */
    guser *u;                    /* by engine user index */
    size_t n_u;
    uint32_t *dirty;
    size_t n_dirty, cap_dirty;
    /* the member lists the results of this chunk name (a copy each: the
     * group may change later in the chunk, before they are written);
     * freed by the drain */
    const char ***seated;
    size_t n_seated, cap_seated;
} engine_groups;

static const char *group_key(const void *ctx, uint32_t i)
{
    return ((const engine_groups *)ctx)->g[i].id;
}

static int grow32(void **p, uint32_t *cap, size_t need, size_t elem)
{
    size_t c = *cap;
    int rc = vec_reserve(p, &c, need, elem);
    *cap = (uint32_t)c;
    return rc;
}

static engine_groups *groups_of(engine *e)
{
    if (e->groups) return e->groups;
    engine_groups *gs = calloc(1, sizeof *gs);
    if (!gs) return NULL;
    strmap_init(&gs->map, (uint64_t)(uintptr_t)gs ^ 0x9e3779b97f4a7c15ULL, group_key, gs);
    e->groups = gs;
    return gs;
}

/* The per-user record of user index ui, the table grown to the engine's
 * users (NULL when out of memory). */
static guser *guser_of(engine *e, engine_groups *gs, uint32_t ui)
{
    if (ui >= gs->n_u) {
        size_t n = e->n_users > (size_t)ui + 1 ? e->n_users : (size_t)ui + 1;
        guser *u = realloc(gs->u, n * sizeof *u);
        if (!u) return NULL;
        for (size_t i = gs->n_u; i < n; i++) u[i] = (guser){ .group = GROUP_NONE };
        gs->u = u;
        gs->n_u = n;
    }
    return &gs->u[ui];
}

static uint32_t group_of_user(const engine *e, uint32_t ui)
{
    const engine_groups *gs = e->groups;
    return gs && ui < gs->n_u ? gs->u[ui].group : GROUP_NONE;
}

const char *engine__groups_user_group(const engine *e, uint32_t ui)
{
    uint32_t g = group_of_user(e, ui);
    return g == GROUP_NONE ? NULL : e->groups->g[g].id;
}

size_t engine__groups_members(const engine *e, uint32_t ui, const char *const **members)
{
    uint32_t g = group_of_user(e, ui);
    if (g == GROUP_NONE) return 0;
    *members = e->groups->g[g].members;
    return e->groups->g[g].n_members;
}

static void mark(engine_groups *gs, uint32_t g)
{
    if (gs->g[g].dirty) return;
    ALLOC_ASSERT(gs->n_dirty < gs->cap_dirty);
    gs->g[g].dirty = 1;
    gs->dirty[gs->n_dirty++] = g;
}

static int find_name(const char *const *v, uint32_t n, const char *s)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == s || strcmp(v[i], s) == 0) return (int)i;
    return -1;
}

static void remove_at(const char **v, uint32_t *n, uint32_t i)
{
    memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof *v);
    (*n)--;
}

static void inv_remove(guser *u, uint32_t g)
{
    for (uint32_t i = 0; i < u->n_inv; i++)
        if (u->inv[i] == g) {
            memmove(&u->inv[i], &u->inv[i + 1], (u->n_inv - i - 1) * sizeof *u->inv);
            u->n_inv--;
            return;
        }
}

/* ------------------------------------------------------------ new group */

/* A group of one, user ui leading (its guser must exist). */
static uint32_t group_new(engine *e, engine_groups *gs, uint32_t ui, const char *id)
{
    if (gs->n >= STRMAP_NONE - 1 || vec_reserve((void **)&gs->g, &gs->cap, gs->n + 1, sizeof *gs->g) < 0)
        return GROUP_NONE;
    grp *g = &gs->g[gs->n];
    memset(g, 0, sizeof *g);
    g->id = strdup(id);
    if (!g->id || grow32((void **)&g->members, &g->cap_members, 1, sizeof *g->members) < 0 ||
        strmap_insert(&gs->map, g->id, (uint32_t)gs->n) < 0) {
        free(g->id);
        free(g->members);
        return GROUP_NONE;
    }
    g->members[g->n_members++] = e->users[ui].id;
    g->alive = 1;
    gs->u[ui].group = (uint32_t)gs->n;
    return (uint32_t)gs->n++;
}

/* ------------------------------------------------------------ decisions */

static void done_group(engine_result *out, const grp *g)
{
    out->status = STATUS_DONE;
    out->group = g->id;
}

/* Room for the decision's marks: n dirty groups, n dirty users. */
static int reserve(engine *e, engine_groups *gs, size_t n)
{
    if (vec_reserve((void **)&gs->dirty, &gs->cap_dirty, gs->n_dirty + n, sizeof *gs->dirty) < 0 ||
        engine__reserve_users(e, n) < 0)
        return -ENOMEM;
    return 0;
}

static engine_reason oom(engine *e)
{
    engine__out_of_memory(e);
    return REASON_NONE;
}

static engine_reason decide_invite(engine *e, engine_groups *gs, uint32_t ui, const engine_request *r,
                                   engine_result *out)
{
    /* every invitee's record first: touch_user may grow the users */
    uint32_t *to = calloc(r->n_to ? r->n_to : 1, sizeof *to);
    if (!to) return oom(e);
    for (size_t i = 0; i < r->n_to; i++) {
        to[i] = engine__user_touch(e, r->to[i]);
        if (to[i] == STRMAP_NONE || !guser_of(e, gs, to[i])) { free(to); return oom(e); }
    }
    uint32_t gi = gs->u[ui].group;
    size_t pending = gi == GROUP_NONE ? 0 : gs->g[gi].n_invited;
    if (pending + r->n_to > INVITED_MAX) { free(to); return REASON_LIMIT; }
    if (reserve(e, gs, 1) < 0) { free(to); return oom(e); }
    if (gi == GROUP_NONE) {
        /* its id is "g" and the seq of the request that made it: unique in
         * the batch, the same after a restart */
        char id[48];
        snprintf(id, sizeof id, "g%" PRId64, r->seq);
        for (int k = 2; strmap_find(&gs->map, id) != STRMAP_NONE; k++)
            snprintf(id, sizeof id, "g%" PRId64 "-%d", r->seq, k);
        if ((gi = group_new(e, gs, ui, id)) == GROUP_NONE) { free(to); return oom(e); }
        engine__dirty_user(e, ui);     /* a bed held now shows the group (reserved above) */
    }
    grp *g = &gs->g[gi];
    if (grow32((void **)&g->invited, &g->cap_invited, g->n_invited + r->n_to, sizeof *g->invited) < 0) {
        free(to);
        return oom(e);
    }
    for (size_t i = 0; i < r->n_to; i++) {
        guser *t = &gs->u[to[i]];
        const char *tid = e->users[to[i]].id;
        if (to[i] == ui || t->group == gi || find_name(g->invited, g->n_invited, tid) >= 0) continue;
        if (grow32((void **)&t->inv, &t->cap_inv, t->n_inv + 1, sizeof *t->inv) < 0) { free(to); return oom(e); }
        g->invited[g->n_invited++] = tid;
        t->inv[t->n_inv++] = gi;
    }
    free(to);
    mark(gs, gi);
    done_group(out, g);
    return REASON_NONE;
}

/* The group of `from` that invited user ui, or GROUP_NONE. */
static uint32_t invitation(const engine *e, const engine_groups *gs, uint32_t ui, const char *from)
{
    uint32_t fi = find_user(e, from);
    if (fi == STRMAP_NONE) return GROUP_NONE;
    uint32_t gi = group_of_user(e, fi);
    if (gi == GROUP_NONE) return GROUP_NONE;
    const grp *g = &gs->g[gi];
    return find_name(g->invited, g->n_invited, e->users[ui].id) >= 0 ? gi : GROUP_NONE;
}

static engine_reason decide_accept(engine *e, engine_groups *gs, uint32_t ui, const engine_request *r,
                                   engine_result *out)
{
    guser *u = &gs->u[ui];
    uint32_t gi = invitation(e, gs, ui, r->peer);
    if (gi == GROUP_NONE) return REASON_NO_INVITATION;
    if (u->group != GROUP_NONE) return REASON_MEMBER_BUSY;
    grp *g = &gs->g[gi];
    if ((int64_t)g->n_members + 1 > e->meta.max_group) return REASON_GROUP_TOO_LARGE;
    if (reserve(e, gs, u->n_inv + 1) < 0 ||
        grow32((void **)&g->members, &g->cap_members, g->n_members + 1, sizeof *g->members) < 0)
        return oom(e);
    const char *uid = e->users[ui].id;
    /* every invitation of this user ends: the accepted one and the rest */
    for (uint32_t k = 0; k < u->n_inv; k++) {
        grp *o = &gs->g[u->inv[k]];
        int at = find_name(o->invited, o->n_invited, uid);
        ALLOC_ASSERT(at >= 0);
        remove_at(o->invited, &o->n_invited, (uint32_t)at);
        mark(gs, u->inv[k]);
    }
    u->n_inv = 0;
    g->members[g->n_members++] = uid;
    u->group = gi;
    ALLOC_ASSERT((int64_t)g->n_members <= e->meta.max_group);
    engine__dirty_user(e, ui);
    done_group(out, g);
    return REASON_NONE;
}

static engine_reason decide_decline(engine *e, engine_groups *gs, uint32_t ui, const engine_request *r,
                                    engine_result *out)
{
    uint32_t gi = invitation(e, gs, ui, r->peer);
    if (gi == GROUP_NONE) return REASON_NO_INVITATION;
    if (reserve(e, gs, 1) < 0) return oom(e);
    grp *g = &gs->g[gi];
    remove_at(g->invited, &g->n_invited, (uint32_t)find_name(g->invited, g->n_invited, e->users[ui].id));
    inv_remove(&gs->u[ui], gi);
    mark(gs, gi);
    done_group(out, g);
    return REASON_NONE;
}

/* The last member out dissolves the group: its invitations end too. */
static void dissolve(engine *e, engine_groups *gs, uint32_t gi)
{
    grp *g = &gs->g[gi];
    for (uint32_t i = 0; i < g->n_invited; i++) {
        uint32_t ti = find_user(e, g->invited[i]);
        ALLOC_ASSERT(ti != STRMAP_NONE && ti < gs->n_u);
        inv_remove(&gs->u[ti], gi);
    }
    g->n_invited = 0;
    g->alive = 0;
}

static engine_reason decide_leave(engine *e, engine_groups *gs, uint32_t ui, engine_result *out)
{
    uint32_t gi = gs->u[ui].group;
    if (gi == GROUP_NONE) return REASON_NOT_IN_GROUP;
    if (reserve(e, gs, 1) < 0) return oom(e);
    grp *g = &gs->g[gi];
    int at = find_name(g->members, g->n_members, e->users[ui].id);
    ALLOC_ASSERT(at >= 0);
    remove_at(g->members, &g->n_members, (uint32_t)at);  /* members[0] leads next */
    gs->u[ui].group = GROUP_NONE;
    if (g->n_members == 0) dissolve(e, gs, gi);
    engine__dirty_user(e, ui);
    mark(gs, gi);
    done_group(out, g);
    return REASON_NONE;
}

static void free_prefs(grp *g)
{
    for (uint32_t i = 0; i < g->n_prefs; i++) free(g->prefs[i]);
    free(g->prefs);
    for (uint32_t i = 0; i < g->n_filter; i++) {
        free((char *)g->filter[i].key);
        free((char *)g->filter[i].value);
    }
    free(g->filter);
    g->prefs = NULL;
    g->filter = NULL;
    g->n_prefs = g->n_filter = 0;
    g->has_filter = 0;
}

/* Copies prefs and filter into g (replacing what it had). 0 or -ENOMEM,
 * g unchanged then. */
static int set_prefs(grp *g, const char *const *prefs, size_t n_prefs, const engine_kv *filter,
                     size_t n_filter, int has_filter)
{
    grp t = { 0 };
    t.prefs = calloc(n_prefs ? n_prefs : 1, sizeof *t.prefs);
    t.filter = calloc(n_filter ? n_filter : 1, sizeof *t.filter);
    int ok = t.prefs && t.filter;
    for (size_t i = 0; ok && i < n_prefs; i++, t.n_prefs++) ok = (t.prefs[i] = strdup(prefs[i])) != NULL;
    for (size_t i = 0; ok && i < n_filter; i++, t.n_filter++) {
        t.filter[i].key = strdup(filter[i].key);
        t.filter[i].value = strdup(filter[i].value);
        ok = t.filter[i].key && t.filter[i].value;
    }
    if (!ok) { free_prefs(&t); return -ENOMEM; }
    free_prefs(g);
    g->prefs = t.prefs;
    g->n_prefs = t.n_prefs;
    g->filter = t.filter;
    g->n_filter = t.n_filter;
    g->has_filter = (uint8_t)(has_filter != 0);
    return 0;
}

static engine_reason decide_prefs(engine *e, engine_groups *gs, uint32_t ui, const engine_request *r,
                                  engine_result *out)
{
    uint32_t gi = gs->u[ui].group;
    if (gi == GROUP_NONE) return REASON_NOT_IN_GROUP;
    grp *g = &gs->g[gi];
    if (r->version != g->version) {
        out->group = g->id;
        out->version = g->version;
        out->has_version = 1;
        return REASON_CONFLICT;
    }
    if (reserve(e, gs, 1) < 0 || set_prefs(g, r->prefs, r->n_prefs, r->filter, r->n_filter, r->has_filter) < 0)
        return oom(e);
    g->version++;
    mark(gs, gi);
    done_group(out, g);
    out->version = g->version;
    out->has_version = 1;
    return REASON_NONE;
}

/* `group` of a formed group: exactly its members, in one room or none;
 * the request's prefs and filter when given, else the stored ones. */
static engine_reason decide_formed_group(engine *e, engine_groups *gs, uint32_t ui, const engine_request *r,
                                         int64_t now, engine_result *out)
{
    uint32_t gi = gs->u[ui].group;
    if (gi == GROUP_NONE) return REASON_NOT_IN_GROUP;
    grp *g = &gs->g[gi];
    /* the result's copy of the members, made before anything is seated */
    const char **seated = malloc((g->n_members ? g->n_members : 1) * sizeof *seated);
    if (!seated || vec_reserve((void **)&gs->seated, &gs->cap_seated, gs->n_seated + 1, sizeof *gs->seated) < 0) {
        free(seated);
        return oom(e);
    }
    memcpy(seated, g->members, g->n_members * sizeof *seated);
    gs->seated[gs->n_seated++] = seated;
    engine_request q = *r;
    q.members = g->members;
    q.n_members = g->n_members;
    if (!r->n_prefs && !r->has_filter) {
        q.prefs = (const char *const *)g->prefs;
        q.n_prefs = g->n_prefs;
        q.pref_hashes = NULL;   /* the request's, not the group's prefs */
        q.filter = g->filter;
        q.n_filter = g->n_filter;
        q.has_filter = g->has_filter;
    }
    engine_reason why = engine__rooms_group(e, &q, now, out);
    if (out->status == STATUS_GRANTED) {
        out->members = seated;
        out->n_members = g->n_members;
    }
    out->group = g->id;
    return why;
}

engine_reason engine__groups_decide(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out)
{
    if (e->meta.groups == GROUPS_LISTED) {
        /* version 1: the back end collected consent; no formed groups */
        if (r->op != OP_GROUP) return REASON_WRONG_KIND;
        return r->n_members ? engine__rooms_group(e, r, now, out) : REASON_NOT_IN_GROUP;
    }
    engine_groups *gs = groups_of(e);
    if (!gs || !guser_of(e, gs, ui)) return oom(e);
    switch (r->op) {
    case OP_INVITE: return decide_invite(e, gs, ui, r, out);
    case OP_ACCEPT: return decide_accept(e, gs, ui, r, out);
    case OP_DECLINE: return decide_decline(e, gs, ui, r, out);
    case OP_LEAVE: return decide_leave(e, gs, ui, out);
    case OP_PREFS: return decide_prefs(e, gs, ui, r, out);
    case OP_GROUP: return decide_formed_group(e, gs, ui, r, now, out);
    default: ALLOC_PANIC("invariant: not a group op");
    }
    return REASON_NONE;
}

/* ------------------------------------------------------------ views */

static void view(const engine_groups *gs, uint32_t gi, engine_group_view *v)
{
    const grp *g = &gs->g[gi];
    *v = (engine_group_view){
        .id = g->id, .alive = g->alive, .members = g->members, .n_members = g->n_members,
        .invited = g->invited, .n_invited = g->n_invited,
        .prefs = (const char *const *)g->prefs, .n_prefs = g->n_prefs,
        .filter = g->filter, .n_filter = g->n_filter, .has_filter = g->has_filter,
        .version = g->version,
    };
}

size_t engine_dirty_group_count(const engine *e) { return e->groups ? e->groups->n_dirty : 0; }

void engine_dirty_group_at(const engine *e, size_t i, engine_group_view *v)
{
    ALLOC_ASSERT(e->groups && i < e->groups->n_dirty);
    view(e->groups, e->groups->dirty[i], v);
}

size_t engine_group_count(const engine *e) { return e->groups ? e->groups->n : 0; }

void engine_group_view_at(const engine *e, size_t i, engine_group_view *v)
{
    ALLOC_ASSERT(e->groups && i < e->groups->n);
    view(e->groups, (uint32_t)i, v);
}

void engine__groups_drain_clear(engine *e)
{
    engine_groups *gs = e->groups;
    if (!gs) return;
    for (size_t i = 0; i < gs->n_dirty; i++) gs->g[gs->dirty[i]].dirty = 0;
    gs->n_dirty = 0;
    for (size_t i = 0; i < gs->n_seated; i++) free((void *)gs->seated[i]);
    gs->n_seated = 0;
}

void engine__groups_free(engine *e)
{
    engine_groups *gs = e->groups;
    if (!gs) return;
    for (size_t i = 0; i < gs->n; i++) {
        free(gs->g[i].id);
        free(gs->g[i].members);
        free(gs->g[i].invited);
        free_prefs(&gs->g[i]);
    }
    for (size_t i = 0; i < gs->n_u; i++) free(gs->u[i].inv);
    free(gs->g);
    free(gs->u);
    free(gs->dirty);
    for (size_t i = 0; i < gs->n_seated; i++) free((void *)gs->seated[i]);
    free(gs->seated);
    strmap_free(&gs->map);
    free(gs);
    e->groups = NULL;
}

/* ------------------------------------------------------------ loading */

/* Members and invited users are loaded users (participants already). */
int engine_load_group(engine *e, const engine_group_view *v)
{
    if (!v || !v->id || !*v->id || !v->n_members || !v->members || (v->n_invited && !v->invited) ||
        (v->n_prefs && !v->prefs) || (v->n_filter && !v->filter) || v->version < 0)
        return -EINVAL;
    engine_groups *gs = groups_of(e);
    if (!gs) return -ENOMEM;
    if (strmap_find(&gs->map, v->id) != STRMAP_NONE) return -EEXIST;
    for (size_t i = 0; i < v->n_members; i++) {
        uint32_t ui = engine__user_load(e, v->members[i]);
        if (ui == STRMAP_NONE || !guser_of(e, gs, ui)) return ui == STRMAP_NONE && v->members[i] ? -EINVAL : -ENOMEM;
        if (gs->u[ui].group != GROUP_NONE) return -EINVAL;      /* in two groups, or twice */
    }
    uint32_t lead = engine__user_load(e, v->members[0]);
    uint32_t gi = group_new(e, gs, lead, v->id);
    if (gi == GROUP_NONE) return -ENOMEM;
    grp *g = &gs->g[gi];
    if (grow32((void **)&g->members, &g->cap_members, v->n_members, sizeof *g->members) < 0 ||
        grow32((void **)&g->invited, &g->cap_invited, v->n_invited ? v->n_invited : 1, sizeof *g->invited) < 0 ||
        set_prefs(g, v->prefs, v->n_prefs, v->filter, v->n_filter, v->has_filter) < 0)
        return -ENOMEM;
    for (size_t i = 1; i < v->n_members; i++) {
        uint32_t ui = engine__user_load(e, v->members[i]);
        g->members[g->n_members++] = e->users[ui].id;
        gs->u[ui].group = gi;
    }
    for (size_t i = 0; i < v->n_invited; i++) {
        uint32_t ti = engine__user_load(e, v->invited[i]);
        if (ti == STRMAP_NONE || !guser_of(e, gs, ti)) return -ENOMEM;
        guser *t = &gs->u[ti];
        if (t->group == gi || find_name(g->invited, g->n_invited, e->users[ti].id) >= 0) continue;
        if (grow32((void **)&t->inv, &t->cap_inv, t->n_inv + 1, sizeof *t->inv) < 0) return -ENOMEM;
        g->invited[g->n_invited++] = e->users[ti].id;
        t->inv[t->n_inv++] = gi;
    }
    g->version = v->version;
    return 0;
}

/* ------------------------------------------------------------ invariants */

/* Every live group has members; each member's record points at the group
 * and each invited user's record lists it; a user's group lists the user;
 * nobody is both a member and invited. O(groups x members + users). */
const char *engine__groups_check(const engine *e)
{
    const engine_groups *gs = e->groups;
    if (!gs) return NULL;
    for (size_t gi = 0; gi < gs->n; gi++) {
        const grp *g = &gs->g[gi];
        if (!g->alive) {
            if (g->n_members || g->n_invited) return "groups: a dissolved group keeps members or invitations";
            continue;
        }
        if (!g->n_members) return "groups: a live group without members";
        for (uint32_t i = 0; i < g->n_members; i++) {
            uint32_t ui = find_user(e, g->members[i]);
            if (ui == STRMAP_NONE || group_of_user(e, ui) != gi) return "groups: a member whose record names another group";
        }
        for (uint32_t i = 0; i < g->n_invited; i++) {
            uint32_t ti = find_user(e, g->invited[i]);
            if (ti == STRMAP_NONE || ti >= gs->n_u) return "groups: an invited user without a record";
            if (group_of_user(e, ti) == gi) return "groups: a member is invited to their own group";
            const guser *t = &gs->u[ti];
            uint32_t k = 0;
            while (k < t->n_inv && t->inv[k] != gi) k++;
            if (k == t->n_inv) return "groups: an invitation missing from the user's list";
        }
    }
    for (size_t ui = 0; ui < gs->n_u; ui++) {
        uint32_t gi = gs->u[ui].group;
        if (gi != GROUP_NONE &&
            (gi >= gs->n || !gs->g[gi].alive || find_name(gs->g[gi].members, gs->g[gi].n_members, e->users[ui].id) < 0))
            return "groups: a user's group does not list the user";
        for (uint32_t k = 0; k < gs->u[ui].n_inv; k++) {
            const grp *g = &gs->g[gs->u[ui].inv[k]];
            if (!g->alive || find_name(g->invited, g->n_invited, e->users[ui].id) < 0)
                return "groups: a user's invitation the group does not list";
        }
    }
    return NULL;
}
