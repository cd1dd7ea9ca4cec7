/* archive_seen.c -- see archive_seen.h. */
#include "allocctl/archive_seen.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/random.h"
#include "core/strmap.h"
#include "core/vec.h"

struct archive_seen {
    strmap map;             /* id -> its index in off */
    char *arena;            /* the ids, each with its NUL */
    size_t alen, acap;
    size_t *off;            /* where each id starts in arena */
    size_t n, cap;
};

static const char *key_of(const void *ctx, uint32_t idx)
{
    const archive_seen *s = ctx;
    return s->arena + s->off[idx];
}

archive_seen *archive_seen_new(void)
{
    archive_seen *s = calloc(1, sizeof *s);
    if (s) strmap_init(&s->map, random_u64(), key_of, s);
    return s;
}

void archive_seen_free(archive_seen *s)
{
    if (!s) return;
    strmap_free(&s->map);
    free(s->arena);
    free(s->off);
    free(s);
}

int archive_seen_has(const archive_seen *s, const char *id)
{
    return s && strmap_find(&s->map, id) != STRMAP_NONE;
}

size_t archive_seen_count(const archive_seen *s)
{
    return s ? s->n : 0;
}

/* Room for one more id of len bytes (and its NUL): core/vec's growth. */
static int reserve(archive_seen *s, size_t len)
{
    void *off = s->off, *arena = s->arena;
    int rc = vec_reserve(&off, &s->cap, s->n + 1, sizeof *s->off);
    s->off = off;
    if (rc == 0) rc = vec_reserve(&arena, &s->acap, s->alen + len + 1, 1);
    s->arena = arena;
    return rc < 0 ? -1 : 0;
}

int archive_seen_add(archive_seen *s, const char *id)
{
    uint32_t h = strmap_hash32(&s->map, id);
    if (strmap_find_hashed(&s->map, id, h) != STRMAP_NONE) return 0;
    size_t len = strlen(id);
    if (s->n >= STRMAP_NONE - 1 || reserve(s, len) < 0) return -1;
    memcpy(s->arena + s->alen, id, len + 1);
    s->off[s->n] = s->alen;
    if (strmap_insert_hashed(&s->map, id, (uint32_t)s->n, h) < 0) return -1;
    s->alen += len + 1;
    s->n++;
    return 0;
}
