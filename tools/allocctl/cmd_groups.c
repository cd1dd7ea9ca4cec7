/* cmd_groups.c -- groups and swap offers as allocctl shows them (see
 * cmd_groups.h). Everything is read from Redis: P:{B}:groups (group id ->
 * {"leader","members","invited","prefs","filter","version"}) and the
 * swap_offers of the holders entries. Offers *to* a user are kept in the
 * offerers' entries, so a room batch's holders are scanned for them
 * (HSCAN), which is fine for an operator's look-up; swaps are for rooms
 * only (contract 9.3), so not when the user's own entry is a stock
 * holder's. */
#include "allocctl/cmd_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/print.h"
#include "base/clock.h"

static int has_name(json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) return 1;
    return 0;
}

static void print_names(const char *label, json_t *arr)
{
    printf("  %-9s", label);
    size_t i;
    json_t *v;
    if (!json_array_size(arr)) printf(" -");
    json_array_foreach(arr, i, v) printf("%s%s", i ? ", " : " ", json_string_value(v));
    printf("\n");
}

static void print_group(const char *id, json_t *g)
{
    printf("group %s: leader %s, version %lld\n", id, json_string_value(json_object_get(g, "leader")),
           (long long)json_integer_value(json_object_get(g, "version")));
    print_names("members", json_object_get(g, "members"));
    print_names("invited", json_object_get(g, "invited"));
    print_names("prefs", json_object_get(g, "prefs"));
    char *f = json_dumps(json_object_get(g, "filter"), JSON_COMPACT | JSON_SORT_KEYS);
    printf("  %-9s %s\n", "filter", f ? f : "{}");
    free(f);
}

int groups_batch_show(ctx *x, const char *batch)
{
    int rc = ctx_batch(x, batch);
    if (rc) return rc;
    if ((rc = ctx_connect(x))) return rc;
    redisAppendCommand(x->c, "HGETALL %s", x->k.meta);
    redisAppendCommand(x->c, "HGETALL %s", x->k.groups);
    redisAppendCommand(x->c, "HMGET %s lottery_commit lottery_seed lottery_users", x->k.stats);
    redisReply *r[3];
    if (replies(x, 3, r) < 0) return EX_REDIS;
    if (r[0]->elements == 0) {
        errmsg(x, "no batch %s (%s is empty)", batch, x->k.meta);
        free_replies(r, 3);
        return EX_NOT;
    }
    printf("batch %s\n", batch);
    int64_t now = clock_wall_ms();
    for (size_t i = 0; i + 1 < r[0]->elements; i += 2)
        print_field("  ", 14, r[0]->element[i]->str, r[0]->element[i + 1]->str, now);
    const redisReply *const *l = (const redisReply *const *)r[2]->element;
    print_lottery("  ", l[0]->type == REDIS_REPLY_STRING ? l[0]->str : NULL,
                  l[1]->type == REDIS_REPLY_STRING ? l[1]->str : NULL,
                  l[2]->type == REDIS_REPLY_STRING ? l[2]->str : NULL);
    const char *mode = hfield(r[0], "groups");
    printf("groups (%s): %zu\n", mode ? mode : "formed", r[1]->elements / 2);
    for (size_t i = 0; i + 1 < r[1]->elements; i += 2) {
        json_t *g = json_loads(r[1]->element[i + 1]->str, 0, NULL);
        if (json_is_object(g)) print_group(r[1]->element[i]->str, g);
        else printf("group %s: malformed: %s\n", r[1]->element[i]->str, r[1]->element[i + 1]->str);
        json_decref(g);
    }
    free_replies(r, 3);
    return EX_OK;
}

/* U's group and pending invitations, from HGETALL P:{B}:groups. */
static int user_groups(const redisReply *g, const char *user)
{
    int found = 0;
    for (size_t i = 0; i + 1 < g->elements; i += 2) {
        json_t *doc = json_loads(g->element[i + 1]->str, 0, NULL);
        if (has_name(json_object_get(doc, "members"), user)) { print_group(g->element[i]->str, doc); found = 1; }
        if (has_name(json_object_get(doc, "invited"), user)) {
            printf("invitation to group %s (leader %s): accept with --op accept --from %s\n", g->element[i]->str,
                   json_string_value(json_object_get(doc, "leader")), json_string_value(json_object_get(doc, "leader")));
            found = 1;
        }
        json_decref(doc);
    }
    return found;
}

/* The offers U made, kept in U's own holders entry; *stock: the entry is
 * a stock holder's ({"units":...}). */
static int offers_by(const redisReply *holder, int *stock)
{
    int found = 0;
    json_t *mine = holder->type == REDIS_REPLY_STRING ? json_loads(holder->str, 0, NULL) : NULL;
    *stock = json_object_get(mine, "units") != NULL;
    size_t k;
    json_t *o;
    json_array_foreach(json_object_get(mine, "swap_offers"), k, o) {
        printf("swap offer to %s (request %s), waiting\n", json_string_value(json_object_get(o, "with")),
               json_string_value(json_object_get(o, "req")));
        found = 1;
    }
    json_decref(mine);
    return found;
}

/* Offers to `user` in one HSCAN page of holders; prints them. */
static int offers_to(const redisReply *page, const char *user)
{
    int n = 0;
    for (size_t i = 0; i + 1 < page->elements; i += 2) {
        if (!strstr(page->element[i + 1]->str, "swap_offers")) continue;
        json_t *h = json_loads(page->element[i + 1]->str, 0, NULL);
        size_t k;
        json_t *o;
        json_array_foreach(json_object_get(h, "swap_offers"), k, o)
            if (!strcmp(json_string_value(json_object_get(o, "with")) ?: "", user)) {
                printf("swap offer from %s (request %s), waiting for %s's answer\n", page->element[i]->str,
                       json_string_value(json_object_get(o, "req")), user);
                n++;
            }
        json_decref(h);
    }
    return n;
}

/* The offers to U, in the offerers' entries: every page of holders. */
static int offers_to_user(ctx *x, const char *user)
{
    int found = 0;
    char cursor[32] = "0";
    do {
        redisReply *p = rcmd(x, "HSCAN %s %s COUNT 1000", x->k.holders, cursor);
        if (!p) return -1;
        if (p->type != REDIS_REPLY_ARRAY || p->elements != 2) { freeReplyObject(p); return -1; }
        snprintf(cursor, sizeof cursor, "%s", p->element[0]->str);
        found |= offers_to(p->element[1], user) > 0;
        freeReplyObject(p);
    } while (strcmp(cursor, "0"));
    return found;
}

int groups_user_status(ctx *x, const char *user, const redisReply *holder)
{
    redisReply *g = rcmd(x, "HGETALL %s", x->k.groups);
    if (!g) return -1;
    int found = user_groups(g, user);
    freeReplyObject(g);
    int stock;
    found |= offers_by(holder, &stock);
    /* swaps are for rooms only: U holding units, the batch sells stock and
     * has no offers to U to look for. (Told by U's entry, not by meta kind:
     * the front end's ACL role reads holders, not meta.) */
    int to = stock ? 0 : offers_to_user(x, user);
    if (to < 0) return -1;
    return found || to;
}
