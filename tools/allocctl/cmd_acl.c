/* cmd_acl.c -- `allocctl acl`: prints the Redis ACL users of a deployment
 * (the roles of ctl_acl.c) as `ACL SETUSER` lines or as an aclfile.
 *
 * It prints and never applies: the operator reviews the rules and applies
 * them with an admin login (docs/DEPLOYMENT.md, "Lock it down"). Passwords
 * are read from files (one per user, the same format allocd reads for
 * redis_password_file) and printed only as SHA-256 (`#hex`), so neither
 * the terminal, a shell history nor the aclfile holds one in clear. Notes
 * go to stderr so that stdout can be piped into redis-cli as it is.
 */
#include "allocctl/cmd_acl.h"

#include <stdio.h>
#include <string.h>

#include "allocctl/ctl_acl.h"
#include "base/secret.h"

#define MAX_USERS 8

static const char HELP[] =
"Usage: allocctl acl [--prefix P] [--format setuser|aclfile] [--user-prefix UP]\n"
"                    [--user NAME=ROLE[+ROLE...]]... [--password-dir DIR]\n"
"                    [--instance NAME]... [--cluster]\n"
"\n"
"Prints the Redis 7 ACL users that let each party do its part and nothing else,\n"
"for one prefix (from -c/--prefix, as for every command):\n"
"  producer   RPUSH P:{B}:queue and the queue-position transaction (HGET stats)\n"
"  frontend   read results, stats, holders, groups, slots, free\n"
"  operator   what allocctl needs: batches, admin commands, dead, archive, purge\n"
"  daemon     what allocd sends: its keys, its scripts, the registry\n"
"  sentinel   (for the Sentinels' own ACL) what allocd asks a Sentinel\n"
"\n"
"  --format F        setuser (default): ACL SETUSER lines for redis-cli;\n"
"                    aclfile: a file for `aclfile` in redis.conf (ends with\n"
"                    `user default reset off`: add your admin user to it)\n"
"  --user-prefix UP  names of the default users: UPproducer, UPfrontend,\n"
"                    UPoperator, UPdaemon (default: P-)\n"
"  --user NAME=ROLES one user with the union of some roles, e.g.\n"
"                    web=producer+frontend (repeatable; replaces the defaults)\n"
"  --password-dir D  each user's password from the file D/NAME, printed as\n"
"                    #<sha256>; without it the users have no password yet\n"
"  --instance NAME   allocd's instance names, for exact registry keys\n"
"                    (repeatable; default: any P:instance:<name>)\n"
"  --cluster         client roles may also read the Cluster topology\n"
"                    (CLUSTER SLOTS/SHARDS/NODES, ASKING)\n"
"\n"
"Apply (redis-cli reads the lines from stdin, the admin password from REDISCLI_AUTH):\n"
"  allocctl acl --password-dir /etc/allocd/acl |\n"
"    REDISCLI_AUTH=\"$(cat /root/redis-admin)\" redis-cli --user admin\n"
"docs/DEPLOYMENT.md (\"Lock it down\") explains every rule.\n";

typedef struct acl_cli {
    const char *format, *user_prefix, *password_dir;
    int cluster;
    const char *users[MAX_USERS];
    size_t nusers;
    ctl_acl_opts o;
} acl_cli;

static int parse(ctx *x, acl_cli *a, int argc, char **argv, int at)
{
    const char *user = NULL, *inst = NULL;
    const opt spec[] = { GLOBAL_OPTS(x), { "format", 0, &a->format, NULL },
                         { "user-prefix", 0, &a->user_prefix, NULL }, { "user", 0, &user, NULL },
                         { "password-dir", 0, &a->password_dir, NULL },
                         { "instance", 0, &inst, NULL }, { "cluster", 0, NULL, &a->cluster } };
    /* by hand rather than parse_opts: --user and --instance repeat */
    for (int i = at; i < argc; i++) {
        const char *val;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return -1;
        const opt *o = argv[i][0] == '-' ? find_opt(spec, sizeof spec / sizeof *spec, argv[i], &val) : NULL;
        if (!o) { errmsg(x, "unexpected argument '%s' (try --help)", argv[i]); return EX_USAGE; }
        if (o->flag) {
            if (val) { errmsg(x, "option '%s' takes no value", argv[i]); return EX_USAGE; }
            *o->flag = 1;
            continue;
        }
        if (!val && i + 1 >= argc) { errmsg(x, "option '%s' needs a value", argv[i]); return EX_USAGE; }
        *o->value = val ? val : argv[++i];
        if (user) {
            if (a->nusers == MAX_USERS) { errmsg(x, "at most %d --user", MAX_USERS); return EX_USAGE; }
            a->users[a->nusers++] = user;
            user = NULL;
        }
        if (inst) {
            if (a->o.ninstances == CTL_ACL_MAX_INSTANCES) {
                errmsg(x, "at most %d --instance", CTL_ACL_MAX_INSTANCES);
                return EX_USAGE;
            }
            a->o.instances[a->o.ninstances++] = inst;
            inst = NULL;
        }
    }
    if (!a->format) a->format = "setuser";
    if (strcmp(a->format, "setuser") && strcmp(a->format, "aclfile")) {
        errmsg(x, "--format must be setuser or aclfile (got '%s')", a->format);
        return EX_USAGE;
    }
    return EX_OK;
}

/* An instance name goes into a glob pattern: refuse what would widen it. */
static int check_instances(ctx *x, const acl_cli *a)
{
    for (size_t i = 0; i < a->o.ninstances; i++)
        if (strpbrk(a->o.instances[i], "*?[]\\ ") || !a->o.instances[i][0]) {
            errmsg(x, "--instance '%s': a name with glob characters or spaces would match "
                   "other keys", a->o.instances[i]);
            return EX_USAGE;
        }
    return EX_OK;
}

/* A user name must stay one ACL word and one file name. */
static int name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 100) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-", s[i]))
            return 0;
    return 1;
}

/* Prints one user; returns EX_OK, EX_USAGE or EX_INPUT. */
static int print_user(ctx *x, const acl_cli *a, const char *name, const char *roles)
{
    char password[SECRET_MAX], err[600];
    const char *pw = NULL;
    if (a->password_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", a->password_dir, name);
        if (secret_read_file(path, password, sizeof password, err, sizeof err) < 0) {
            errmsg(x, "%s", err);
            return EX_INPUT;
        }
        pw = password;
    }
    ctl_args r = { 0 };
    int rc = ctl_acl_rules(&a->o, roles, pw, &r);
    memset(password, 0, sizeof password);
    if (rc < 0) {
        ctl_args_free(&r);
        errmsg(x, "user %s: unknown role in '%s' (roles: producer, frontend, operator, daemon, "
               "sentinel)", name, roles);
        return EX_USAGE;
    }
    int setuser = !strcmp(a->format, "setuser");
    printf(setuser ? "ACL SETUSER %s reset" : "user %s reset", name);
    /* redis-cli splits its input on spaces: a selector is quoted there;
     * the aclfile parser joins a selector's words itself */
    for (size_t i = 0; i < r.n; i++)
        printf(setuser && strchr(r.v[i], ' ') ? " \"%s\"" : " %s", r.v[i]);
    printf("\n");
    ctl_args_free(&r);
    return EX_OK;
}

int cmd_acl(ctx *x, int argc, char **argv, int at)
{
    acl_cli a;
    memset(&a, 0, sizeof a);
    x->cmd = "acl";
    int rc = parse(x, &a, argc, argv, at);
    if (rc == -1) return show_help(HELP);
    if (rc || (rc = check_instances(x, &a)) || (rc = ctx_config(x))) return rc;
    a.o.prefix = x->cfg.prefix;
    a.o.cluster = a.cluster;
    char up[128];
    snprintf(up, sizeof up, "%s-", x->cfg.prefix);
    if (!a.user_prefix) a.user_prefix = up;
    for (size_t i = 0; i < a.nusers; i++) {
        const char *eq = strchr(a.users[i], '=');
        if (!eq || !name_ok(a.users[i], (size_t)(eq - a.users[i])) || !eq[1]) {
            errmsg(x, "--user must be NAME=ROLE[+ROLE...] with NAME from [A-Za-z0-9_.:-] (got '%s')",
                   a.users[i]);
            return EX_USAGE;
        }
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - a.users[i]), a.users[i]);
        if ((rc = print_user(x, &a, name, eq + 1))) return rc;
    }
    for (size_t i = 0; a.nusers == 0 && i < CTL_ACL_DEFAULT_ROLES; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s", a.user_prefix, ctl_acl_roles[i]);
        if (!name_ok(name, strlen(name))) {
            errmsg(x, "--user-prefix '%s' makes a user name outside [A-Za-z0-9_.:-]", a.user_prefix);
            return EX_USAGE;
        }
        if ((rc = print_user(x, &a, name, ctl_acl_roles[i]))) return rc;
    }
    if (!strcmp(a.format, "aclfile")) {
        /* a file without `default` would give Redis an open default user */
        printf("user default reset off\n");
        fprintf(stderr, "allocctl acl: the file disables the default user; add your own "
                "admin user to it before loading it\n");
    }
    if (!a.password_dir)
        fprintf(stderr, "allocctl acl: no --password-dir: the users have no password yet "
                "(ACL SETUSER NAME >password, or rerun with --password-dir)\n");
    return EX_OK;
}
