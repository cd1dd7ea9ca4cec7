/* giveups.c -- see giveups.h. */
#include "service/giveups.h"

#include <stdlib.h>
#include <string.h>

#define COOLDOWN_MAX_MS (3600LL * 1000)
/* An own entry is forgotten this long after its cooldown ended, so a
 * batch that serves well again starts from the first cooldown. */
#define FORGET_AFTER_MS (3600LL * 1000)

void giveups_init(giveups *g)
{
    memset(g, 0, sizeof *g);
}

static void entries_free(giveup_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) { free(e[i].instance); free(e[i].batch); }
    free(e);
}

void giveups_free(giveups *g)
{
    entries_free(g->own, g->n_own);
    entries_free(g->peers, g->n_peers);
    giveups_init(g);
}

static void own_expire(giveups *g, int64_t now_ms)
{
    for (size_t i = 0; i < g->n_own;) {
        if (now_ms - g->own[i].until_ms > FORGET_AFTER_MS) {
            free(g->own[i].batch);
            g->own[i] = g->own[--g->n_own];
        } else {
            i++;
        }
    }
}

int64_t giveups_add(giveups *g, const char *batch, int64_t now_ms, int64_t base_ms)
{
    own_expire(g, now_ms);
    giveup_entry *e = NULL;
    for (size_t i = 0; i < g->n_own; i++)
        if (!strcmp(g->own[i].batch, batch)) e = &g->own[i];
    if (!e) {
        giveup_entry *n = realloc(g->own, (g->n_own + 1) * sizeof *n);
        if (!n) return -1;
        g->own = n;
        e = &g->own[g->n_own];
        memset(e, 0, sizeof *e);
        if (!(e->batch = strdup(batch))) return -1;
        g->n_own++;
    }
    int64_t cooldown = base_ms;
    for (int i = 0; i < e->count && cooldown < COOLDOWN_MAX_MS; i++) cooldown *= 2;
    if (cooldown > COOLDOWN_MAX_MS) cooldown = COOLDOWN_MAX_MS;
    e->count++;
    e->until_ms = now_ms + cooldown;
    return cooldown;
}

void giveups_json(const giveups *g, jsonw *w, int64_t now_ms)
{
    jsonw_arr_begin(w);
    for (size_t i = 0; i < g->n_own; i++)
        if (g->own[i].until_ms > now_ms) jsonw_str(w, g->own[i].batch);
    jsonw_arr_end(w);
}

void giveups_peers_clear(giveups *g)
{
    entries_free(g->peers, g->n_peers);
    g->peers = NULL;
    g->n_peers = 0;
}

/* A peer's list holds for as long as its heartbeat counts as fresh. */
void giveups_peer(giveups *g, const char *instance, json_t *gave_up, int64_t now_ms, int64_t ttl_ms)
{
    if (!json_is_array(gave_up)) return;
    size_t i;
    json_t *v;
    json_array_foreach(gave_up, i, v) {
        if (!json_is_string(v)) continue;
        giveup_entry *n = realloc(g->peers, (g->n_peers + 1) * sizeof *n);
        if (!n) return;
        g->peers = n;
        giveup_entry *e = &g->peers[g->n_peers];
        e->instance = strdup(instance);
        e->batch = strdup(json_string_value(v));
        e->until_ms = now_ms + ttl_ms;
        e->count = 1;
        if (!e->instance || !e->batch) { free(e->instance); free(e->batch); return; }
        g->n_peers++;
    }
}

int giveups_excluded(const giveups *g, const char *self_instance, const char *instance,
                     const char *batch, int64_t now_ms)
{
    if (!instance || !strcmp(instance, self_instance)) {
        for (size_t i = 0; i < g->n_own; i++)
            if (!strcmp(g->own[i].batch, batch)) return g->own[i].until_ms > now_ms;
        return 0;
    }
    for (size_t i = 0; i < g->n_peers; i++)
        if (!strcmp(g->peers[i].batch, batch) && !strcmp(g->peers[i].instance, instance))
            return g->peers[i].until_ms > now_ms;
    return 0;
}
