/* ctl_acl.c -- the Redis ACL roles (see ctl_acl.h), as data.
 *
 * Each role is a list of keyless commands (granted at the user's root) and
 * of grants: commands plus the key patterns they may touch, each grant one
 * Redis 7 selector `(+cmd ... %R~pattern ...)`. A command in a selector may
 * touch only that selector's keys, so `RPUSH` on the queue does not also
 * allow `RPUSH` on `results`. %R~ is read, %W~ is write, ~ both (Redis
 * checks each key of a command against the flags of its key spec: RPUSH
 * needs write, HGET read, EVAL and BLMOVE both).
 *
 * Patterns are exact for one prefix: the prefix alphabet [A-Za-z0-9_.:-]
 * has no glob characters and no braces, so `P:{*}:queue` can only match a
 * batch key of prefix P: another prefix Q would have to start with `P:{`.
 * `P:batches` and `P:instances` are literal. The registry key of an
 * instance, `P:instance:<name>`, is matched exactly when the instance
 * names are given (--instance), else as `P:instance:[^{]*` (never a batch
 * key of a prefix `P:instance`, but its `batches` key would match: give the
 * names when such a prefix exists). Hash tags are part of the key names,
 * so the same patterns hold in a Redis Cluster.
 *
 * `$P` in a pattern is the prefix, `$I` the instance-name part. Why each
 * command is there is said next to it; docs/DEPLOYMENT.md lists them.
 */
#include "allocctl/ctl_acl.h"

#include <stdio.h>
#include <string.h>

#include "core/sha256.h"

typedef struct acl_grant {
    const char *cmds;       /* "+rpush +hget" */
    const char *keys;       /* "%W~$P:{*}:queue %R~$P:{*}:stats" */
} acl_grant;

#define MAX_GRANTS 12

typedef struct acl_role {
    const char *name;
    const char *keyless;    /* commands without keys, at the user's root */
    const char *cluster;    /* added with --cluster (topology discovery) */
    acl_grant grants[MAX_GRANTS];
} acl_role;

#define CLIENT_CLUSTER "+cluster|slots +cluster|shards +cluster|nodes +asking"

static const acl_role ROLES[] = {
    /* Pushes requests with the queue-position transaction of the contract
     * (section 6): MULTI; RPUSH queue; HGET stats dequeued; EXEC. PING for
     * pools' health checks (no data). `allocctl push` first checks that
     * the batch is live (SISMEMBER batches, EXISTS meta: whether it exists,
     * nothing of its contents). Nothing else can be read but stats, and
     * nothing written but the queue. */
    { "producer", "+multi +exec +discard +ping", CLIENT_CLUSTER, {
        { "+rpush", "%W~$P:{*}:queue" },
        { "+hget", "%R~$P:{*}:stats" },
        { "+sismember", "%R~$P:batches" },
        { "+exists", "%R~$P:{*}:meta" },
    } },
    /* Reads what a user may see: results, stats (position, "you beat X%"),
     * holders, groups, slots, free, and why a room is refused (contract
     * 11.2: the rooms' attrs and the profiles). Hash reads only, no writes
     * at all; TIME for a reservation's countdown by the server's clock. */
    { "frontend", "+multi +exec +discard +ping +time", CLIENT_CLUSTER, {
        { "+hget +hmget +hgetall +hexists +hlen +hscan",
          "%R~$P:{*}:results %R~$P:{*}:stats %R~$P:{*}:holders %R~$P:{*}:groups "
          "%R~$P:{*}:slots %R~$P:{*}:free %R~$P:{*}:attrs %R~$P:{*}:profiles" },
    } },
    /* allocctl. SCAN is keyless in Redis (it lists key names of every
     * prefix, never values); UNWATCH ends batch create's WATCH. */
    { "operator", "+multi +exec +discard +ping +unwatch +scan", CLIENT_CLUSTER, {
        /* status, verify, top, batch list, dead list, export, reconcile:
         * read every key of the prefix */
        { "+watch +exists +type +pttl +hget +hmget +hgetall +hexists +hlen +hkeys +hvals "
          "+hscan +llen +lrange +lindex +smembers +sismember +scard +sscan +xlen +xrange "
          "+xrevrange +xinfo|stream +xinfo|groups +xinfo|consumers +xpending",
          "%R~$P:{*}:* %R~$P:batches %R~$P:instances" },
        /* batch create, slots, profiles load: the definition keys only */
        { "+hset +hdel", "%W~$P:{*}:meta %W~$P:{*}:capacity %W~$P:{*}:attrs %W~$P:{*}:slots "
                      "%W~$P:{*}:profiles" },
        /* batch create/rm: the live list */
        { "+sadd +srem", "%W~$P:batches" },
        /* admin commands (ctl), push and requeue (queue) */
        { "+rpush", "%W~$P:{*}:ctl %W~$P:{*}:queue" },
        /* dead --requeue: one script (ctl_queue.c) over dead, queue and
         * stats; EVAL needs read and write on every key it names, but each
         * command inside is checked again, and there is no write command
         * on stats */
        { "+eval", "~$P:{*}:dead ~$P:{*}:queue ~$P:{*}:stats" },
        { "+lindex +lset +lrem", "~$P:{*}:dead" },
        /* archive: a consumer group on the log (never XADD or XTRIM) */
        { "+xgroup|create +xgroup|createconsumer +xgroup|setid +xgroup|destroy "
          "+xgroup|delconsumer +xreadgroup +xack +xautoclaim +xclaim", "~$P:{*}:log" },
        /* archive progress */
        { "+hset +hget +hgetall +hdel +hincrby +get +set +del",
          "~$P:{*}:archive ~$P:{*}:archive:*" },
        /* purge, batch create --replace: delete a batch's keys; purge
         * empties large keys a page at a time first (HDEL, SREM, LPOP,
         * XTRIM) so no single command blocks Redis -- no more power than
         * DEL, which the role has anyway */
        { "+del +unlink +hdel +srem +lpop +xtrim", "%W~$P:{*}:*" },
    } },
    /* allocd: exactly what it sends (grep daemon/ for command strings and
     * the redis.call()s of worker/scripts.c: scripts run with the caller's
     * ACL). It owns every batch key; it cannot reach another prefix or run
     * a server command (FLUSHALL, CONFIG, KEYS, DEBUG, ...). */
    { "daemon",
      /* transactions; CLIENT SETNAME at connect; CLUSTER SLOTS (cluster =
       * auto asks it even of a plain Redis) and ASKING for migrations;
       * SCRIPT LOAD for its scripts; WAIT for wait_replicas; UNWATCH,
       * CLIENT ID and CLIENT INFO for the profiles' WATCH
       * (worker/profiles_watch.h) */
      "+multi +exec +unwatch +client|setname +client|id +client|info +cluster|slots +asking "
      "+script|load +wait", NULL, {
        { "+watch +eval +evalsha "
          "+get +set +del +exists +type +pexpire +pttl +incrby "             /* lease, order ids */
          "+hget +hset +hdel +hmget +hgetall +hvals +hscan +hincrby "       /* hashes; the watcher */
          "+lrange +llen +ltrim +rpush +lpush +blmove "                     /* queue, ctl, dead */
          "+smembers "                                                     /* participants upgrade */
          "+xadd +xtrim +xlen +xrevrange +xinfo|groups +xpending",          /* log, archive-aware trim */
          "~$P:{*}:*" },
        { "+smembers", "%R~$P:batches" },
        { "+hgetall +hset", "~$P:instances" },
        { "+set +del", "%W~$P:instance:$I" },
    } },
    /* allocd on a Sentinel (the Sentinel's own ACL, not the data
     * servers'): ask for the master, follow +switch-master. */
    { "sentinel",
      "+ping +client|setname +sentinel|master +sentinel|get-master-addr-by-name +sentinel|sentinels "
      "+subscribe +unsubscribe &+switch-master", NULL, { { NULL, NULL } } },
};
#define NROLES (sizeof ROLES / sizeof ROLES[0])

const char *const ctl_acl_roles[] = { "producer", "frontend", "operator", "daemon", "sentinel", NULL };

static const acl_role *find_role(const char *name, size_t n)
{
    for (size_t i = 0; i < NROLES; i++)
        if (strlen(ROLES[i].name) == n && !strncmp(ROLES[i].name, name, n)) return &ROLES[i];
    return NULL;
}

int ctl_acl_role_known(const char *name)
{
    return find_role(name, strlen(name)) != NULL;
}

static int has_word(const ctl_args *out, const char *w, size_t n)
{
    for (size_t i = 0; i < out->n; i++)
        if (out->len[i] == n && !memcmp(out->v[i], w, n)) return 1;
    return 0;
}

/* Appends each space-separated word of s to out, once (roles share some). */
static void add_words(ctl_args *out, const char *s)
{
    while (s && *s) {
        size_t n = strcspn(s, " ");
        if (n && !has_word(out, s, n)) ctl_args_addn(out, s, n);
        s += n + strspn(s + n, " ");
    }
}

/* Appends one pattern word with $P and $I expanded into buf. */
static void expand_key(const ctl_acl_opts *o, const char *w, size_t n, char *buf, size_t cap,
                       size_t *len, const char *inst)
{
    for (size_t i = 0; i < n && *len + 1 < cap; i++) {
        const char *rep = NULL;
        if (w[i] == '$' && i + 1 < n && w[i + 1] == 'P') rep = o->prefix;
        if (w[i] == '$' && i + 1 < n && w[i + 1] == 'I') rep = inst;
        if (rep) {
            *len += (size_t)snprintf(buf + *len, cap - *len, "%s", rep);
            if (*len >= cap) *len = cap - 1;
            i++;
        } else buf[(*len)++] = w[i];
    }
    buf[*len] = '\0';
}

/* "(+cmds pattern...)" for one grant; a $I pattern repeats per instance. */
static void add_selector(const ctl_acl_opts *o, const acl_grant *g, ctl_args *out)
{
    char buf[2048];
    size_t len = (size_t)snprintf(buf, sizeof buf, "(%s", g->cmds);
    for (const char *s = g->keys; *s;) {
        size_t n = strcspn(s, " ");
        int per_instance = memmem(s, n, "$I", 2) != NULL;
        size_t reps = per_instance && o->ninstances ? o->ninstances : 1;
        for (size_t r = 0; r < reps; r++) {
            const char *inst = o->ninstances ? o->instances[r] : "[^{]*";
            if (len + 2 < sizeof buf) buf[len++] = ' ';
            expand_key(o, s, n, buf, sizeof buf, &len, inst);
        }
        s += n + strspn(s + n, " ");
    }
    if (len + 2 < sizeof buf) { buf[len++] = ')'; buf[len] = '\0'; }
    ctl_args_add(out, buf);
}

int ctl_acl_rules(const ctl_acl_opts *o, const char *roles, const char *password,
                  ctl_args *out)
{
    const acl_role *list[NROLES];
    size_t n = 0;
    for (const char *s = roles; *s;) {
        size_t len = strcspn(s, "+,");
        const acl_role *r = find_role(s, len);
        if (!r || n == NROLES) return -1;
        list[n++] = r;
        s += len + (s[len] != '\0');
    }
    if (n == 0) return -1;
    ctl_args_add(out, "on");
    if (password) {
        char hex[65];
        sha256_hex(password, strlen(password), hex);
        char rule[67];
        snprintf(rule, sizeof rule, "#%s", hex);
        ctl_args_add(out, rule);
    }
    ctl_args_add(out, "resetchannels");
    ctl_args_add(out, "-@all");
    for (size_t i = 0; i < n; i++) {
        add_words(out, list[i]->keyless);
        if (o->cluster) add_words(out, list[i]->cluster);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < MAX_GRANTS && list[i]->grants[g].cmds; g++)
            add_selector(o, &list[i]->grants[g], out);
    return 0;
}
