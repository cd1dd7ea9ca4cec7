/* campus_write.c -- the campus as the files of a round (campus.h): what
 * `allocctl batch create` and `allocctl profiles load` read, and the
 * requests in the order the round sends them, one JSON per line, each
 * exactly as a producer pushes it (contract sections 3, 9 and 11).
 *
 * The request streams are cut where the round must wait for allocd: the
 * pool must be drawn before groups can be formed (every request before
 * the opening is in the draw, and an accept drawn before its invitation
 * would find none), groups are placed in their leaders' draw order, and
 * withdrawals and trades come from students who hold a bed by then. */
#include "campus.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/splitmix64.h"

typedef struct out {
    const char *dir;
    char path[600];
    FILE *f;
} out;

static int out_open(out *o, const char *name)
{
    snprintf(o->path, sizeof o->path, "%s/%s", o->dir, name);
    o->f = fopen(o->path, "w");
    if (!o->f) fprintf(stderr, "alloccampus: %s: %s\n", o->path, strerror(errno));
    return o->f ? 0 : -1;
}

static int out_close(out *o)
{
    int bad = ferror(o->f);
    if (fclose(o->f) != 0 || bad) {
        fprintf(stderr, "alloccampus: %s: cannot write it\n", o->path);
        return -1;
    }
    return 0;
}

/* One JSON per line; takes the reference. */
static void emit(out *o, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s) fprintf(o->f, "%s\n", s);
    free(s);
    json_decref(j);
}

static json_t *req(const char *prefix, const campus_student *s, const char *op)
{
    char id[32];
    snprintf(id, sizeof id, "%s-%s", prefix, s->id);
    return json_pack("{s:s,s:s,s:s}", "id", id, "user", s->id, "op", op);
}

static json_t *room_list(const campus *c, const int *rooms, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_string(c->r[rooms[i]].id));
    return a;
}

static json_t *filter_of(int filter, int cap)
{
    if (filter == FILTER_TYPE) return json_pack("{s:s}", "type", campus_room_type(cap));
    return filter == FILTER_ANY ? json_object() : NULL;
}

static json_t *room_attrs(const campus_room *r)
{
    json_t *a = json_pack("{s:s,s:i,s:s}", "building", campus_building_name[r->building], "floor", r->floor,
                          "type", campus_room_type(r->cap));
    const campus_rules *k = &r->rules;
    if (k->only_gender) json_object_set_new(a, "only_gender", json_sprintf("%c", k->only_gender));
    if (k->same_gender) json_object_set_new(a, "same_gender", json_true());
    if (k->year_mask) {
        json_t *years = json_array();
        for (int y = 1; y <= 4; y++)
            if (k->year_mask & (1 << y)) json_array_append_new(years, json_integer(y));
        json_object_set_new(a, "only_year", json_array_size(years) == 1 ? json_incref(json_array_get(years, 0)) : years);
        if (json_array_size(years) == 1) json_decref(years);
    }
    if (k->llc) json_object_set_new(a, "only_llc", json_string(campus_llc_name[k->llc]));
    if (k->access) {
        json_object_set_new(a, "only_access", json_string("yes"));
        json_object_set_new(a, "accessible", json_true());
    }
    if (r->ra) json_object_set_new(a, "ra", json_true());
    return a;
}

static int write_rooms(const campus *c, out *o)
{
    if (out_open(o, "rooms.json") < 0) return -1;
    fputs("[\n", o->f);
    for (int i = 0; i < c->n_rooms; i++) {
        json_t *j = json_pack("{s:s,s:i,s:o}", "id", c->r[i].id, "capacity", c->r[i].cap, "attrs",
                              room_attrs(&c->r[i]));
        char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fprintf(o->f, "%s%s\n", s ? s : "null", i + 1 < c->n_rooms ? "," : "");
        free(s);
        json_decref(j);
    }
    fputs("]\n", o->f);
    return out_close(o);
}

static int write_profiles(const campus *c, out *o)
{
    if (out_open(o, "profiles.csv") < 0) return -1;
    fputs("user,gender,year,llc,access,points\n", o->f);
    for (int i = 0; i < c->n_students; i++) {
        const campus_student *s = &c->s[i];
        fprintf(o->f, "%s,%c,%d,%s,%s,%d\n", s->id, s->gender, s->year, campus_llc_name[s->llc],
                s->access ? "yes" : "", s->points);
    }
    return out_close(o);
}

static int write_staff(const campus *c, out *o)
{
    if (out_open(o, "staff.jsonl") < 0) return -1;
    for (int k = 0; k < c->n_staff; k++) {
        const campus_staff *a = &c->staff[k];
        json_t *j = json_pack("{s:s,s:s,s:s,s:s}", "id", a->id, "op", "assign", "user", c->s[a->student].id,
                              "item", c->r[a->room].id);
        if (a->check) json_object_set_new(j, "check", json_true());
        emit(o, j);
    }
    return out_close(o);
}

static void early_single(const campus *c, const campus_student *s, out *o)
{
    if (s->choose >= 0) {
        json_t *j = req("ch", s, "choose");
        json_object_set_new(j, "room", json_string(c->r[s->choose].id));
        emit(o, j);
    }
    json_t *j = req("au", s, "auto");
    json_object_set_new(j, "prefs", room_list(c, s->prefs, s->n_prefs));
    json_t *f = filter_of(s->filter, 1);
    if (f) json_object_set_new(j, "filter", f);
    emit(o, j);
}

static json_t *group_prefs(const campus *c, const campus_group *g, const campus_student *by, const char *id,
                           int reorder, int version)
{
    json_t *j = req(id, by, "prefs");
    int p[CAMPUS_PREFS];
    for (int i = 0; i < g->n_prefs; i++) p[i] = g->prefs[reorder ? g->n_prefs - 1 - i : i];
    json_object_set_new(j, "prefs", room_list(c, p, g->n_prefs));
    json_t *f = filter_of(g->filter, g->n);
    if (f) json_object_set_new(j, "filter", f);
    json_object_set_new(j, "version", json_integer(version));
    return j;
}

static void early_leader(const campus *c, const campus_group *g, out *o)
{
    const campus_student *lead = &c->s[g->m[0]];
    json_t *j = req("in", lead, "invite"), *to = json_array();
    for (int k = 1; k < g->n; k++) json_array_append_new(to, json_string(c->s[g->m[k]].id));
    if (g->decliner >= 0) json_array_append_new(to, json_string(c->s[g->decliner].id));
    json_object_set_new(j, "to", to);
    emit(o, j);
    emit(o, group_prefs(c, g, lead, "pr", 0, 0));
}

/* Everyone's requests before the opening, student by student in a
 * random order of arrival (which the draw makes irrelevant). */
static int write_early(const campus *c, out *o, uint64_t *rng)
{
    if (out_open(o, "early.jsonl") < 0) return -1;
    int *who = malloc((size_t)c->n_students * sizeof *who), n = 0;
    if (!who) return out_close(o), -1;
    for (int i = 0; i < c->n_students; i++) {
        const campus_student *s = &c->s[i];
        if (s->role == ROLE_SINGLE || (s->role == ROLE_GROUP && c->g[s->group].m[0] == i)) who[n++] = i;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(splitmix64_next(rng) % (uint64_t)(i + 1)), t = who[i];
        who[i] = who[j];
        who[j] = t;
    }
    for (int k = 0; k < n; k++) {
        const campus_student *s = &c->s[who[k]];
        if (s->role == ROLE_SINGLE) early_single(c, s, o);
        else early_leader(c, &c->g[s->group], o);
    }
    free(who);
    return out_close(o);
}

/* After the draw: the invited answer, then some groups change their
 * preferences (one stale edit is refused `conflict`). */
static int write_form(const campus *c, out *o)
{
    if (out_open(o, "form.jsonl") < 0) return -1;
    for (int i = 0; i < c->n_groups; i++) {
        const campus_group *g = &c->g[i];
        const char *lead = c->s[g->m[0]].id;
        for (int k = 1; k < g->n; k++) {
            json_t *j = req("ac", &c->s[g->m[k]], "accept");
            json_object_set_new(j, "from", json_string(lead));
            emit(o, j);
        }
        if (g->decliner >= 0) {
            json_t *j = req("de", &c->s[g->decliner], "decline");
            json_object_set_new(j, "from", json_string(lead));
            emit(o, j);
        }
    }
    for (int i = 0; i < c->n_groups; i++) {
        const campus_group *g = &c->g[i];
        if (g->update >= 1) emit(o, group_prefs(c, g, &c->s[g->m[1]], "pu", 1, 1));
        if (g->update >= 2) emit(o, group_prefs(c, g, &c->s[g->m[2]], "ps", 0, 1));
    }
    return out_close(o);
}

static int write_place(const campus *c, out *o)
{
    if (out_open(o, "place.jsonl") < 0) return -1;
    for (int i = 0; i < c->n_groups; i++) emit(o, req("gr", &c->s[c->g[i].m[0]], "group"));
    return out_close(o);
}

/* The waitlist, for those whose early request found no room: the same
 * request again with "wait": true. */
static int write_wait(const campus *c, out *o)
{
    if (out_open(o, "wait.jsonl") < 0) return -1;
    for (int i = 0; i < c->n_students; i++) {
        const campus_student *s = &c->s[i];
        if (s->role != ROLE_SINGLE || !s->wait) continue;
        json_t *j = req("wl", s, "auto");
        json_object_set_new(j, "prefs", room_list(c, s->prefs, s->n_prefs));
        json_t *f = filter_of(s->filter, 1);
        if (f) json_object_set_new(j, "filter", f);
        json_object_set_new(j, "wait", json_true());
        emit(o, j);
    }
    return out_close(o);
}

static int write_later(const campus *c, out *o)
{
    if (out_open(o, "later.jsonl") < 0) return -1;
    for (int k = 0; k < c->n_unassign; k++)
        emit(o, json_pack("{s:s,s:s,s:s}", "id", c->unassign[k].id, "op", "unassign", "user",
                          c->s[c->unassign[k].student].id));
    for (int i = 0; i < c->n_students; i++)
        if (c->s[i].role == ROLE_SINGLE && c->s[i].withdraw) emit(o, req("wd", &c->s[i], "release"));
    for (int i = 0; i < c->n_students; i++) {
        const campus_student *s = &c->s[i];
        if (s->swap_with < 0) continue;
        json_t *j = req("sw", s, "swap");
        json_object_set_new(j, "with", json_string(c->s[s->swap_with].id));
        emit(o, j);
    }
    return out_close(o);
}

static int write_summary(const campus *c, out *o)
{
    if (out_open(o, "campus.txt") < 0) return -1;
    int role[ROLE_SINGLE + 1] = { 0 }, refused = 0;
    for (int i = 0; i < c->n_students; i++) role[c->s[i].role]++;
    for (int k = 0; k < c->n_staff; k++) refused += c->staff[k].refused;
    fprintf(o->f, "students=%d\nrooms=%d\nbeds=%d\nbuildings=%d\ngroups=%d\ngroup_members=%d\nsingles=%d\n"
                  "ras=%d\naccess_staff=%d\ntransfers=%d\nstaff_commands=%d\nstaff_refused=%d\n"
                  "staff_exceptions=%d\nunassigns=%d\n",
            c->n_students, c->n_rooms, c->beds, CAMPUS_BUILDINGS, c->n_groups, role[ROLE_GROUP],
            role[ROLE_SINGLE], role[ROLE_RA], role[ROLE_ACCESS], role[ROLE_TRANSFER], c->n_staff, refused,
            c->staff_exceptions, c->n_unassign);
    return out_close(o);
}

int campus_write(const campus *c, const char *dir)
{
    out o = { .dir = dir };
    uint64_t rng = c->rng;
    if (write_rooms(c, &o) < 0 || write_profiles(c, &o) < 0 || write_staff(c, &o) < 0 ||
        write_early(c, &o, &rng) < 0 || write_form(c, &o) < 0 || write_place(c, &o) < 0 ||
        write_wait(c, &o) < 0 || write_later(c, &o) < 0 || write_summary(c, &o) < 0) return -1;
    return 0;
}

static void rules_text(const campus_rules *k, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    if (k->only_gender) n += (size_t)snprintf(buf + n, len - n, " only_gender %c", k->only_gender);
    if (k->year_mask == (1 << 1)) n += (size_t)snprintf(buf + n, len - n, " only_year 1");
    if (k->year_mask == ((1 << 3) | (1 << 4))) n += (size_t)snprintf(buf + n, len - n, " only_year [3,4]");
    if (k->same_gender && n < len) snprintf(buf + n, len - n, " same_gender");
}

static void describe_buildings(const campus *c, FILE *f)
{
    static const char *const what[CAMPUS_BUILDINGS] = {
        "first-year hall", "women's hall", "men's hall", "living-learning communities: floors 2-4 only_llc",
        "upperclass apartments", "gender-inclusive; floor 1 accessible: only_access" };
    for (int b = 0; b < CAMPUS_BUILDINGS; b++) {
        int rooms = 0, beds = 0, by_cap[5] = { 0 }, ra = 0;
        const campus_rules *k = NULL;
        for (int i = 0; i < c->n_rooms; i++) {
            const campus_room *r = &c->r[i];
            if (r->building != b) continue;
            rooms++;
            beds += r->cap;
            if (r->ra) ra++;
            else by_cap[r->cap]++;
            if (!r->rules.llc && !r->rules.access) k = &r->rules;
        }
        char rules[120];
        rules_text(k ? k : &c->r[0].rules, rules, sizeof rules);
        fprintf(f, "campus:   %-8s %4d rooms %5d beds: %d singles, %d doubles, %d triples, %d quads, %d RA rooms; %s;%s\n",
                campus_building_name[b], rooms, beds, by_cap[1], by_cap[2], by_cap[3], by_cap[4], ra, what[b],
                rules[0] ? rules : " no gender rule");
    }
}

void campus_describe(const campus *c, uint64_t seed, const char *dir, FILE *f)
{
    int g[3] = { 0 }, y[5] = { 0 }, llc = 0, access = 0, role[ROLE_SINGLE + 1] = { 0 }, size[5] = { 0 };
    for (int i = 0; i < c->n_students; i++) {
        const campus_student *s = &c->s[i];
        g[s->gender == 'F' ? 0 : s->gender == 'M' ? 1 : 2]++;
        y[s->year]++;
        llc += s->llc != 0;
        access += s->access;
        role[s->role]++;
    }
    for (int i = 0; i < c->n_groups; i++) size[c->g[i].n]++;
    fprintf(f, "campus: %d students (seed %llu): %d F, %d M, %d X; years 1-4: %d, %d, %d, %d; %d in an LLC; "
               "%d with accessibility needs\n", c->n_students, (unsigned long long)seed, g[0], g[1], g[2], y[1], y[2],
            y[3], y[4], llc, access);
    fprintf(f, "campus: %d rooms, %d beds, in %d buildings:\n", c->n_rooms, c->beds, CAMPUS_BUILDINGS);
    describe_buildings(c, f);
    fprintf(f, "campus: staff place %d RAs (%d on rooms whose rules they break: staff exceptions), %d students with "
               "accessibility needs and %d transfers\n", role[ROLE_RA], c->staff_exceptions, role[ROLE_ACCESS],
            role[ROLE_TRANSFER]);
    fprintf(f, "campus: %d roommate groups (%d pairs, %d triples, %d quads: %d students); %d students ask alone\n",
            c->n_groups, size[2], size[3], size[4], role[ROLE_GROUP], role[ROLE_SINGLE]);
    fprintf(f, "campus: wrote rooms.json profiles.csv staff.jsonl early.jsonl form.jsonl place.jsonl wait.jsonl "
               "later.jsonl campus.txt into %s\n", dir);
}
