/* batch_keys.c -- see batch_keys.h. */
#include "worker/batch_keys.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int batch_id_valid(const char *b)
{
    size_t n = strlen(b);
    if (n < 1 || n > BATCH_ID_MAX) return 0;
    return strspn(b, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static int make(char *dst, const char *prefix, const char *batch, const char *name)
{
    int n = snprintf(dst, BATCH_KEY_MAX, "%s:{%s}:%s", prefix, batch, name);
    return n > 0 && n < BATCH_KEY_MAX ? 0 : -EINVAL;
}

int batch_keys_init(batch_keys *k, const char *prefix, const char *batch)
{
    if (!batch_id_valid(batch)) return -EINVAL;
    struct { char *dst; const char *name; } all[] = {
        { k->meta, "meta" }, { k->capacity, "capacity" }, { k->attrs, "attrs" },
        { k->queue, "queue" }, { k->ctl, "ctl" }, { k->results, "results" },
        { k->holders, "holders" }, { k->free, "free" }, { k->stats, "stats" },
        { k->log, "log" }, { k->dead, "dead" }, { k->participants, "participants" },
        { k->orders_ended, "orders_ended" }, { k->internal, "internal" },
        { k->early, "early" }, { k->lease, "lease" }, { k->waitlist, "waitlist" },
        { k->slots, "slots" }, { k->groups, "groups" }, { k->profiles, "profiles" },
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (make(all[i].dst, prefix, batch, all[i].name) < 0) return -EINVAL;
    return 0;
}
