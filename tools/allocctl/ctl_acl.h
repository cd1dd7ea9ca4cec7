/* ctl_acl.h -- the Redis ACL roles of an allocd deployment, as rules
 * (ctl_acl.c); `allocctl acl` prints them, the ACL test applies them.
 *
 * A role is the least one party needs for one prefix: `producer`,
 * `frontend`, `operator`, `daemon` (and `sentinel`, for the Sentinels' own
 * ACL). Each command is granted only on the keys it needs, with Redis 7
 * selectors and %R~/%W~ key permissions, so a user holding several roles is
 * the plain union of their rules.
 */
#ifndef ALLOCD_CTL_ACL_H
#define ALLOCD_CTL_ACL_H

#include <stddef.h>

#include "allocctl/ctl_util.h"

#define CTL_ACL_MAX_INSTANCES 16

typedef struct ctl_acl_opts {
    const char *prefix;
    int cluster;             /* client roles may discover a Redis Cluster */
    const char *instances[CTL_ACL_MAX_INSTANCES]; /* daemon instance names; */
    size_t ninstances;       /* none: any P:instance:<name> */
} ctl_acl_opts;

/* 1 when name is a role. */
int ctl_acl_role_known(const char *name);
/* The role names, NULL-terminated, the four defaults first. */
extern const char *const ctl_acl_roles[];
#define CTL_ACL_DEFAULT_ROLES 4

/* The rules (after `reset`) of a user holding every role of `roles`
 * ("producer" or "producer+frontend"), one ACL argument per element:
 * "on", "#<sha256>" when password is not NULL, "-@all", "+multi",
 * "(+rpush %W~P:{*}:queue)", ... Returns 0, or -1 for an unknown role. */
int ctl_acl_rules(const ctl_acl_opts *o, const char *roles, const char *password,
                  ctl_args *out);

#endif
