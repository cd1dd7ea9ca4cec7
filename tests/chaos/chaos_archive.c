/* chaos_archive.c -- see chaos_archive.h. */
#include "chaos_archive.h"
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void spawn_follower(chaos_archive *a)
{
    char *argv[] = { (char *)harness_allocctl_bin(), "-c", a->conf, "archive", "--pg", a->pg.conninfo,
                     "--follow", "--quiet", "--results-interval-ms", "1000", NULL };
    a->pid = proc_spawn(argv, a->log);
    if (a->pid < 0) a->pid = 0;
    else a->starts++;
}

int chaos_archive_start(chaos_archive *a, const char *redis_url, const char *dir)
{
    memset(a, 0, sizeof *a);
    if (proc_pg_start(&a->pg, "chaos-pg") < 0) return -1;
    snprintf(a->conf, sizeof a->conf, "%s/archive.conf", dir);
    snprintf(a->log, sizeof a->log, "%s/archive.log", dir);
    FILE *f = fopen(a->conf, "w");
    if (!f) return -1;
    fprintf(f, "redis = \"%s\";\nprefix = \"alloc\";\nredis_timeout_ms = 2000;\nconnect_timeout_ms = 1000;\n",
            redis_url);
    fclose(f);
    spawn_follower(a);
    return a->pid > 0 ? 0 : -1;
}

void chaos_archive_kill(chaos_archive *a)
{
    if (a->pid > 0) {
        proc_reap(a->pid, SIGKILL);
        a->kills++;
    }
    spawn_follower(a);
}

/* Runs allocctl with args, its output into out; returns the exit status. */
static int run(chaos_archive *a, const char *const *args, char *out, size_t len)
{
    char cmd[2048];
    int n = snprintf(cmd, sizeof cmd, "'%s' -c '%s'", harness_allocctl_bin(), a->conf);
    for (int i = 0; args[i] && n > 0 && (size_t)n < sizeof cmd; i++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " '%s'", args[i]);
    if (n <= 0 || (size_t)n + 8 >= sizeof cmd) return -1;
    snprintf(cmd + n, sizeof cmd - (size_t)n, " 2>&1");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t got = 0;
    if (out && len) {
        got = fread(out, 1, len - 1, p);
        out[got] = '\0';
    }
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {}
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int chaos_archive_check(chaos_archive *a, const char *const *batches, size_t n, char *msg, size_t len)
{
    proc_stop(&a->pid, 10000);
    int failed = 0;
    msg[0] = '\0';
    char out[8192];
    const char *archive[] = { "archive", "--pg", a->pg.conninfo, "--quiet", NULL };
    int rc = run(a, archive, out, sizeof out);
    if (rc != 0) {
        snprintf(msg, len, "allocctl archive exited %d: %.300s", rc, out);
        return (int)n;
    }
    for (size_t i = 0; i < n; i++) {
        const char *reconcile[] = { "reconcile", "--pg", a->pg.conninfo, batches[i], NULL };
        rc = run(a, reconcile, out, sizeof out);
        if (rc != 0 && !failed++)
            snprintf(msg, len, "reconcile %s exited %d: %.300s", batches[i], rc, out);
    }
    return failed;
}

void chaos_archive_stop(chaos_archive *a)
{
    if (a->pid > 0) proc_reap(a->pid, SIGKILL);
    a->pid = 0;
    proc_pg_stop(&a->pg);
}
