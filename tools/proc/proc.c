/* proc.c -- see proc.h. */
#include "proc/proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <grp.h>
#include <malloc.h>
#include <pwd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

/* ------------------------------------------------------------- clock -- */

/* The clocks are base/clock's; these names keep the bench's and the
 * harness's call sites short. */
int64_t proc_wall_us(void) { return clock_wall_us(); }
int64_t proc_mono_us(void) { return clock_mono_us(); }
int64_t proc_now_ms(void) { return clock_wall_ms(); }
void proc_sleep_us(int64_t us) { clock_sleep_us(us); }
void proc_sleep_ms(int ms) { clock_sleep_ms(ms); }

/* ---------------------------------------------------------- tracking -- */

/* Everything started here is remembered, so that nothing outlives the
 * program: at exit whatever is still running is killed and every temp dir
 * removed (tests/run.sh counts a survivor as a failure). */
#define PROC_MAX_TRACKED 256
static pid_t tracked_pids[PROC_MAX_TRACKED];
static char *tracked_dirs[PROC_MAX_TRACKED];
static const char *keep_env;

static int keep_dirs(void)
{
    return keep_env && getenv(keep_env);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (remove(path) < 0 && errno != ENOENT)
        fprintf(stderr, "%s: could not remove %s: %s\n", program_invocation_short_name, path, strerror(errno));
    return 0;
}

static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void cleanup_at_exit(void)
{
    for (int i = 0; i < PROC_MAX_TRACKED; i++) {
        if (tracked_pids[i] <= 0) continue;
        kill(tracked_pids[i], SIGKILL);
        waitpid(tracked_pids[i], NULL, 0);
        tracked_pids[i] = 0;
    }
    for (int i = 0; i < PROC_MAX_TRACKED; i++) {
        if (!tracked_dirs[i]) continue;
        if (!keep_dirs()) remove_tree(tracked_dirs[i]);
        free(tracked_dirs[i]);
        tracked_dirs[i] = NULL;
    }
}

static void track_init(void)
{
    static int registered;
    if (!registered) { atexit(cleanup_at_exit); registered = 1; }
}

static void track_pid(pid_t pid)
{
    track_init();
    for (int i = 0; i < PROC_MAX_TRACKED; i++)
        if (tracked_pids[i] <= 0) { tracked_pids[i] = pid; return; }
    fprintf(stderr, "%s: more than %d live children\n", program_invocation_short_name, PROC_MAX_TRACKED);
}

static void untrack_pid(pid_t pid)
{
    for (int i = 0; i < PROC_MAX_TRACKED; i++)
        if (tracked_pids[i] == pid) tracked_pids[i] = 0;
}

void proc_track_dir(const char *dir)
{
    track_init();
    for (int i = 0; i < PROC_MAX_TRACKED; i++)
        if (tracked_dirs[i] && !strcmp(tracked_dirs[i], dir)) return;
    for (int i = 0; i < PROC_MAX_TRACKED; i++)
        if (!tracked_dirs[i]) { tracked_dirs[i] = strdup(dir); return; }
    fprintf(stderr, "%s: more than %d temp dirs\n", program_invocation_short_name, PROC_MAX_TRACKED);
}

static void untrack_dir(const char *dir)
{
    for (int i = 0; i < PROC_MAX_TRACKED; i++)
        if (tracked_dirs[i] && !strcmp(tracked_dirs[i], dir)) { free(tracked_dirs[i]); tracked_dirs[i] = NULL; }
}

void proc_keep_dirs_env(const char *name)
{
    keep_env = name;
}

/* ---------------------------------------------------------- children -- */

/* uid (gid) != -1: the child becomes that user before it opens the log
 * and execs (PostgreSQL as root, see proc_pg_start). */
static pid_t spawn_as(char *const argv[], const char *log_path, uid_t uid, gid_t gid)
{
    pid_t parent = getpid();
    /* A heap full of freed small chunks (a bench's replies) is consolidated
     * by a later malloc; after fork every page that walk writes faults
     * (copy on write), which kept archive_long busy on a whole core for
     * seconds while it measured the archiver it had spawned. Consolidate
     * before the fork instead. */
    malloc_trim(0);
    pid_t pid = fork();
    if (pid > 0) { track_pid(pid); return pid; }
    if (pid < 0) return -1;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);    /* the parent died before prctl */
    if (uid != (uid_t)-1) {
        if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0) _exit(126);
        prctl(PR_SET_PDEATHSIG, SIGKILL);   /* setuid clears it */
        if (getppid() != parent) _exit(127);
    }
    int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
    execvp(argv[0], argv);
    _exit(127);
}

pid_t proc_spawn(char *const argv[], const char *log_path)
{
    return spawn_as(argv, log_path, (uid_t)-1, (gid_t)-1);
}

/* The child's end: stdout and stderr into the pipe, then argv. */
static void exec_into(char *const argv[], int fds[2], pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);    /* the parent died before prctl */
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execvp(argv[0], argv);
    _exit(127);
}

/* Everything the child writes until it closes its end. NULL without memory. */
static char *read_all(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while (buf && (got = read(fd, buf + len, cap - len - 1)) != 0) {
        if (got < 0) { if (errno == EINTR) continue; break; }
        len += (size_t)got;
        if (cap - len < 2) {
            char *more = realloc(buf, cap *= 2);
            if (!more) { free(buf); buf = NULL; }
            buf = more;
        }
    }
    if (buf) buf[len] = '\0';
    return buf;
}

int proc_run_capture(char *const argv[], char **out)
{
    *out = NULL;
    int fds[2];
    if (pipe(fds) < 0) return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) exec_into(argv, fds, parent);
    close(fds[1]);
    if (pid < 0) { close(fds[0]); return -1; }
    track_pid(pid);
    *out = read_all(fds[0]);
    close(fds[0]);
    int st, w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}
    untrack_pid(pid);
    if (w < 0 || !*out) { free(*out); *out = NULL; return -1; }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void proc_reap(pid_t pid, int sig)
{
    if (pid <= 0) return;
    if (sig) kill(pid, sig);
    waitpid(pid, NULL, 0);
    untrack_pid(pid);
}

int proc_exited(pid_t pid, int *status)
{
    if (pid <= 0) return 0;
    int st;
    if (waitpid(pid, &st, WNOHANG) != pid) return 0;
    untrack_pid(pid);
    if (status) *status = st;
    return 1;
}

int proc_alive(pid_t *pid)
{
    if (*pid <= 0) return 0;
    if (proc_exited(*pid, NULL)) { *pid = 0; return 0; }
    return 1;
}

int proc_stop(pid_t *pid, int timeout_ms)
{
    return proc_stop_signal(pid, SIGTERM, timeout_ms);
}

int proc_stop_signal(pid_t *pid, int sig, int timeout_ms)
{
    pid_t p = *pid;
    *pid = 0;
    if (p <= 0) return -1;
    kill(p, sig);
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        int st;
        if (proc_exited(p, &st))
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        proc_sleep_ms(10);
    }
    proc_reap(p, SIGKILL);
    return -1;
}

/* ----------------------------------------------------- /proc/PID -- */

long proc_status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t fl = strlen(field);
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':') { kb = strtol(line + fl + 1, NULL, 10); break; }
    fclose(f);
    return kb;
}

int proc_stat_usage(pid_t pid, unsigned long long *faults, unsigned long long *ticks)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may contain spaces */
    if (!p) return -1;
    unsigned long long minflt, majflt, ut, st;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %llu %*u %llu %*u %llu %llu", &minflt, &majflt, &ut, &st) != 4)
        return -1;
    *faults = minflt + majflt;
    *ticks = ut + st;
    return 0;
}

int proc_is_asan(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, fp)) found = strstr(line, "libasan") != NULL;
    fclose(fp);
    return found;
}

/* --------------------------------------------------------- temp dirs -- */

int proc_temp_dir(char *dir, size_t len, const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(dir, len, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (n < 0 || (size_t)n >= len || !mkdtemp(dir)) {
        if (len) dir[0] = '\0';
        return -1;
    }
    proc_track_dir(dir);
    return 0;
}

void proc_remove_dir(const char *dir)
{
    if (!dir || !dir[0] || keep_dirs()) return;
    remove_tree(dir);
    untrack_dir(dir);
}

/* ------------------------------------------------------- redis-server -- */

redisContext *proc_redis_connect(const proc_redis *r)
{
    redisContext *c = redisConnectUnix(r->sock);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    return c;
}

/* Until it answers PING, it exits, or timeout_ms. */
static int redis_wait(proc_redis *r, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        redisContext *c = proc_redis_connect(r);
        if (c) {
            redisReply *rep = redisCommand(c, "PING");
            int ok = rep && rep->type == REDIS_REPLY_STATUS;
            if (rep) freeReplyObject(rep);
            redisFree(c);
            if (ok) return 0;
        }
        if (proc_exited(r->pid, NULL)) { r->pid = 0; return -1; }
        proc_sleep_ms(20);
    }
    return -1;
}

/* Through the shell, which splits r->extra into arguments. */
static int redis_spawn(proc_redis *r)
{
    char cmd[2048];
    int n = snprintf(cmd, sizeof cmd,
                     "exec redis-server --port 0 --unixsocket '%s' --unixsocketperm 700 "
                     "--dir '%s' --save '' --daemonize no --logfile '%s/redis.log' %s",
                     r->sock, r->dir, r->dir, r->extra);
    if (n < 0 || (size_t)n >= sizeof cmd) return -1;
    char *argv[] = { "sh", "-c", cmd, NULL };
    r->pid = proc_spawn(argv, NULL);
    if (r->pid < 0) { r->pid = 0; return -1; }
    if (redis_wait(r, 10000) < 0) {
        fprintf(stderr, "%s: redis-server did not start (see %s/redis.log)\n",
                program_invocation_short_name, r->dir);
        proc_reap(r->pid, SIGKILL);
        r->pid = 0;
        return -1;
    }
    return 0;
}

int proc_redis_start(proc_redis *r, const char *prefix, const char *extra)
{
    memset(r, 0, sizeof *r);
    if (proc_temp_dir(r->dir, sizeof r->dir, prefix) < 0) return -1;
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    snprintf(r->url, sizeof r->url, "unix://%s", r->sock);
    snprintf(r->extra, sizeof r->extra, "%s", extra ? extra : "");
    return redis_spawn(r);
}

int proc_redis_restart(proc_redis *r)
{
    proc_reap(r->pid, SIGTERM);
    r->pid = 0;
    return redis_spawn(r);
}

int proc_redis_restart_empty(proc_redis *r)
{
    char path[300];
    proc_reap(r->pid, SIGTERM);
    r->pid = 0;
    snprintf(path, sizeof path, "%s/appendonlydir", r->dir);
    remove_tree(path);
    snprintf(path, sizeof path, "%s/dump.rdb", r->dir);
    unlink(path);
    return redis_spawn(r);
}

void proc_redis_kill(proc_redis *r)
{
    proc_reap(r->pid, SIGKILL);
    r->pid = 0;
    unlink(r->sock);
}

void proc_redis_stop(proc_redis *r)
{
    proc_reap(r->pid, SIGTERM);
    r->pid = 0;
    proc_remove_dir(r->dir);
}

static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int proc_cluster_port(int start)
{
    for (int p = start; p < 29000; p++)
        if (port_free(p) && port_free(p + 10000)) return p;
    return -1;
}

/* -------------------------------------------------------- postgresql -- */

/* The newest /usr/lib/postgresql/N/bin holding initdb, or $ALLOCD_PG_BIN. */
static int pg_find_bin(char *out, size_t len)
{
    const char *env = getenv("ALLOCD_PG_BIN");
    if (env && *env) { snprintf(out, len, "%s", env); return 0; }
    DIR *d = opendir("/usr/lib/postgresql");
    long best = -1;
    for (struct dirent *e; d && (e = readdir(d));) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        char path[512];
        snprintf(path, sizeof path, "/usr/lib/postgresql/%s/bin/initdb", e->d_name);
        if (*end == '\0' && v > best && access(path, X_OK) == 0) best = v;
    }
    if (d) closedir(d);
    if (best < 0) return -1;
    snprintf(out, len, "/usr/lib/postgresql/%ld/bin", best);
    return 0;
}

/* Who runs the server: ourselves, or (as root) postgres, else nobody. */
static void pg_pick_user(proc_pg *p)
{
    p->uid = (uid_t)-1;
    p->gid = (gid_t)-1;
    if (geteuid() != 0) return;
    const struct passwd *pw = getpwnam("postgres");
    if (!pw) pw = getpwnam("nobody");
    if (pw) { p->uid = pw->pw_uid; p->gid = pw->pw_gid; }
}

/* Whether every ancestor of path lets others through (o+x). */
static int path_open_to_others(const char *path)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *slash; (slash = strrchr(buf, '/')) != NULL; *slash = '\0') {
        struct stat st;
        if (stat(buf[0] ? buf : "/", &st) < 0 || !(st.st_mode & S_IXOTH)) return 0;
        if (slash == buf) break;
    }
    return 1;
}

/* Until postmaster.pid says "ready" (line 8), the postmaster exits, or
 * timeout_ms. */
static int pg_wait_ready(proc_pg *p, int timeout_ms)
{
    char pidfile[320];
    snprintf(pidfile, sizeof pidfile, "%s/data/postmaster.pid", p->dir);
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        FILE *f = fopen(pidfile, "r");
        if (f) {
            char line[256];
            int n = 0, ready = 0;
            while (fgets(line, sizeof line, f))
                if (++n == 8 && !strncmp(line, "ready", 5)) ready = 1;
            fclose(f);
            if (ready) return 0;
        }
        if (proc_exited(p->pid, NULL)) { p->pid = 0; return -1; }
        proc_sleep_ms(20);
    }
    return -1;
}

static int pg_spawn(proc_pg *p)
{
    char postgres[320], data[300], log[300];
    snprintf(postgres, sizeof postgres, "%s/postgres", p->bin);
    snprintf(data, sizeof data, "%s/data", p->dir);
    snprintf(log, sizeof log, "%s/postgres.log", p->dir);
    /* fsync off: a test's database dies with it. shared_buffers is
     * PostgreSQL's own default, 128 MB: with 32 MB a 200,000-event archive
     * outgrew it and the bench measured evictions, not the copy. */
    char *argv[] = { postgres, "-D", data, "-k", p->dir, "-c", "listen_addresses=",
                     "-c", "fsync=off", "-c", "full_page_writes=off",
                     "-c", "max_connections=40", "-c", "shared_buffers=128MB", NULL };
    p->pid = spawn_as(argv, log, p->uid, p->gid);
    if (p->pid < 0) { p->pid = 0; return -1; }
    if (pg_wait_ready(p, 30000) < 0) {
        fprintf(stderr, "%s: postgres did not start (see %s)\n", program_invocation_short_name, log);
        proc_reap(p->pid, SIGKILL);
        p->pid = 0;
        return -1;
    }
    return 0;
}

int proc_pg_start(proc_pg *p, const char *prefix)
{
    memset(p, 0, sizeof *p);
    if (pg_find_bin(p->bin, sizeof p->bin) < 0) {
        fprintf(stderr, "%s: no PostgreSQL server found (apt-get install postgresql)\n",
                program_invocation_short_name);
        return -1;
    }
    pg_pick_user(p);
    const char *tmp = getenv("TMPDIR");
    if (p->uid != (uid_t)-1 && tmp && *tmp && !path_open_to_others(tmp)) {
        snprintf(p->dir, sizeof p->dir, "/tmp/%s-XXXXXX", prefix);
        if (!mkdtemp(p->dir)) return -1;
        proc_track_dir(p->dir);
    } else if (proc_temp_dir(p->dir, sizeof p->dir, prefix) < 0) {
        return -1;
    }
    if (p->uid != (uid_t)-1 && (chown(p->dir, p->uid, p->gid) < 0 || chmod(p->dir, 0755) < 0))
        return -1;
    char initdb[320], data[300], log[300];
    snprintf(initdb, sizeof initdb, "%s/initdb", p->bin);
    snprintf(data, sizeof data, "%s/data", p->dir);
    snprintf(log, sizeof log, "%s/initdb.log", p->dir);
    char *argv[] = { initdb, "-D", data, "-U", "alloc", "--auth=trust", "--no-sync",
                     "-E", "UTF8", "--locale=C", NULL };
    pid_t pid = spawn_as(argv, log, p->uid, p->gid);
    int st = -1;
    if (pid > 0 && waitpid(pid, &st, 0) == pid) untrack_pid(pid);
    if (pid <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s: initdb failed (see %s)\n", program_invocation_short_name, log);
        return -1;
    }
    snprintf(p->conninfo, sizeof p->conninfo, "host=%s port=5432 dbname=postgres user=alloc", p->dir);
    return pg_spawn(p);
}

/* SIGINT: PostgreSQL's fast shutdown (ends sessions, checkpoints, exits). */
static void pg_shutdown(proc_pg *p)
{
    proc_stop_signal(&p->pid, SIGINT, 30000);
}

int proc_pg_restart(proc_pg *p)
{
    pg_shutdown(p);
    return pg_spawn(p);
}

void proc_pg_kill(proc_pg *p)
{
    proc_reap(p->pid, SIGKILL);
    p->pid = 0;
}

void proc_pg_stop(proc_pg *p)
{
    pg_shutdown(p);
    proc_remove_dir(p->dir);
}

/* ----------------------------------------------------- redis replies -- */

long long proc_reply_int(redisReply *r)
{
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER) v = r->integer;
    else if (r && r->type == REDIS_REPLY_STRING) v = strtoll(r->str, NULL, 10);
    else if (r && r->type == REDIS_REPLY_NIL) v = 0;
    if (r) freeReplyObject(r);
    return v;
}

long long proc_vint(redisContext *c, const char *fmt, va_list ap)
{
    return proc_reply_int(redisvCommand(c, fmt, ap));
}

long long proc_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    long long v = proc_vint(c, fmt, ap);
    va_end(ap);
    return v;
}
