/* main.c -- allocctl, the operator's and integrator's command line for
 * allocd: global options, the help text and the dispatch to a command.
 *
 * Everything allocd does is observable in Redis (docs/PROTOCOL.md); this
 * tool is the one place that knows the key layout, the request grammar and
 * the queue-position formula so operators and scripts do not have to
 * re-derive them with redis-cli: create batches from CSV/JSON files, push
 * requests the way a producer must (with the position transaction), look at
 * results, positions and holdings, requeue dead requests safely, prove a
 * batch consistent by replaying its event log, and watch all batches live.
 *
 * Each command family is a file of its own (cmd_*.c); what they share --
 * config, connection, prefix, where messages go, option parsing -- is the
 * ctx of context.h, which main() fills and frees. Plain synchronous
 * hiredis (ctl_sync.h) with connect and command deadlines; Redis location
 * and prefix come from the allocd config loader, so allocctl finds the
 * same Redis as the daemon. Exit codes are part of the interface (see
 * usage() and docs/ALLOCCTL.md).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "allocctl/cmd_acl.h"
#include "allocctl/cmd_archive.h"
#include "allocctl/cmd_batch.h"
#include "allocctl/cmd_dead.h"
#include "allocctl/cmd_lottery.h"
#include "allocctl/cmd_profiles.h"
#include "allocctl/cmd_push.h"
#include "allocctl/cmd_report.h"
#include "allocctl/cmd_staff.h"
#include "allocctl/cmd_status.h"
#include "allocctl/cmd_top.h"
#include "allocctl/cmd_verify.h"
#include "allocctl/context.h"

static const char USAGE[] =
"Usage: allocctl [-c FILE] [--redis URL] [--prefix P] COMMAND [ARGS] [--help]\n"
"\n"
"The operator's tool for allocd batches in Redis.\n"
"\n"
"Commands:\n"
"  batch create B --kind stock|room --from FILE [...]   define a batch and make it live\n"
"  batch list                  the batches in P:batches, with kind, state, queue\n"
"  batch rm B                  stop serving B (SREM only: its keys are kept)\n"
"  batch show B                the batch's meta and its groups formed by consent\n"
"  push B --user U --op OP ... push a request with the queue-position transaction\n"
"  status B [--id ID | --user U]   batch stats, a request's result or position, a holding\n"
"  wait B --id ID [--timeout S]    block until a request has its result\n"
"  dead B [--requeue ...]      list dead requests, or push them back to the queue\n"
"  verify B                    replay the event log and compare with holders and free\n"
"  lottery verify B            replay the opening lottery's draw and compare with what was served\n"
"  profiles load B --from FILE | show B --user U   the users' profiles (eligibility, points)\n"
"  assign B --user U --item X [--check] | unassign B --user U   staff placements, any state\n"
"  top [--interval MS]         live dashboard of all batches (one snapshot if not a tty)\n"
"  acl [--format setuser|aclfile] ...   the Redis ACL users of each role, to apply\n"
"  archive --pg CONNINFO [B...] [--follow]   copy logs and results into PostgreSQL\n"
"  reconcile --pg CONNINFO B   compare the database's copy with Redis\n"
"  export B --what results|holders|log [--format jsonl|csv]   stream a batch out (default jsonl)\n"
"  purge B [--force]           remove a closed, fully archived batch's keys\n"
"  report B [--html FILE] [--pg CONNINFO]   after the round: a summary, and a page with charts\n"
"\n"
"Options (also accepted after the command):\n"
"  -c, --config FILE   allocd config file to take `redis` and `prefix` from\n"
"                      (default: %s, if present; $ALLOCD_CONFIG changes it)\n"
"      --redis URL     redis://[user:password@]host:port, unix:///path or\n"
"                      sentinel://host:port[,host:port...]/master (overrides the file)\n"
"      --prefix P      key prefix (default alloc)\n"
"      --redis-user U  Redis ACL user (overrides redis_user of the file)\n"
"      --redis-password-file F   the password from file F (overrides the file's\n"
"                      redis_password_file; $ALLOCD_REDIS_PASSWORD overrides both)\n"
"\n"
"Exit codes:\n"
"  0  success\n"
"  1  not as expected: verify/reconcile found differences, wait timed out, unknown id, purge refused...\n"
"  2  usage error (bad command line)\n"
"  3  Redis unreachable, or a Redis error\n"
"  4  bad input file (items file, config file)\n"
"  5  PostgreSQL unreachable, or a PostgreSQL error (archive, reconcile)\n"
"\n"
"`allocctl COMMAND --help` describes each command; docs/ALLOCCTL.md has examples.\n";

static int usage(FILE *out, int rc)
{
    fprintf(out, USAGE, config_default_path());
    return rc;
}

/* Global options before the command; returns the command's index. */
static int global_opts(ctx *x, int argc, char **argv, int *at)
{
    const opt spec[] = { GLOBAL_OPTS(x) };
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *val;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return -1;
        if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) return -2;
        const opt *o = find_opt(spec, sizeof spec / sizeof *spec, argv[i], &val);
        if (!o) { errmsg(x, "unknown option '%s' (try --help)", argv[i]); return EX_USAGE; }
        if (!val && i + 1 >= argc) { errmsg(x, "option '%s' needs a value", argv[i]); return EX_USAGE; }
        *o->value = val ? val : argv[++i];
    }
    *at = i;
    return EX_OK;
}

int main(int argc, char **argv)
{
    ctx x;
    memset(&x, 0, sizeof x);
    /* A Redis that goes away must give exit 3 (or a reconnect in top), not
     * a silent death by SIGPIPE on the next write to its socket. */
    signal(SIGPIPE, SIG_IGN);
    int at = 0, rc = global_opts(&x, argc, argv, &at);
    if (rc == -1) return usage(stdout, EX_OK);
    if (rc == -2) { printf("allocctl %s\n", ALLOCD_VERSION); return EX_OK; }
    if (rc) return rc;
    if (at >= argc) return usage(stderr, EX_USAGE);
    const char *cmd = argv[at];
    x.cmd = cmd;
    static const struct { const char *name; int (*run)(ctx *, int, char **, int); } CMDS[] = {
        { "batch", cmd_batch }, { "push", cmd_push }, { "status", cmd_status },
        { "wait", cmd_wait }, { "dead", cmd_dead }, { "verify", cmd_verify }, { "top", cmd_top },
        { "lottery", cmd_lottery }, { "profiles", cmd_profiles },
        { "assign", cmd_assign }, { "unassign", cmd_unassign },
        { "acl", cmd_acl },
        { "archive", cmd_archive }, { "reconcile", cmd_reconcile },
        { "export", cmd_export }, { "purge", cmd_purge }, { "report", cmd_report },
    };
    rc = -1;
    for (size_t i = 0; i < sizeof CMDS / sizeof *CMDS; i++)
        if (!strcmp(cmd, CMDS[i].name)) rc = CMDS[i].run(&x, argc, argv, at + 1);
    if (rc == -1 && !strcmp(cmd, "help")) rc = usage(stdout, EX_OK);
    if (rc == -1) {
        x.cmd = NULL;
        errmsg(&x, "unknown command '%s' (try --help)", cmd);
        rc = EX_USAGE;
    }
    ctx_free(&x);
    return rc;
}

