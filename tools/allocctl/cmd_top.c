/* cmd_top.c -- `allocctl top`: a live dashboard of every batch in
 * P:batches (full screen on a terminal, one plain snapshot otherwise). */
#include "allocctl/cmd_top.h"

#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base/clock.h"
#include "allocctl/archive_log.h"
#include "allocctl/ctl_sync.h"

/* The only global: SIGINT/SIGTERM/SIGHUP ask the dashboard to stop, so it
 * can restore the terminal on its way out. */
static volatile sig_atomic_t g_top_stop;

static void top_on_signal(int sig)
{
    (void)sig;
    g_top_stop = 1;
}

#define TOP_ERR_MAX 256
#define BAR_WIDTH 20
#define TOP_LATENCY_FRESH_MS 20000
#define TOP_WIDE 170              /* columns the full layout needs */

typedef struct top_row {
    char batch[BATCH_ID_MAX + 1], kind[8], state[16], owner[72];
    int64_t queue, processed, free_units, capacity, dead, invalid;
    int64_t waiting, wait_served;   /* the waitlist: length now, served so far */
    int64_t p50_us, p99_us;   /* stats.decision_p50_us/p99_us; < 0 when unknown or stale */
    double rate;              /* requests/s; < 0 when unknown */
    char archive[40];         /* P:{B}:archive: events/s and lag, or "-" */
} top_row;

typedef struct top_frame {
    top_row *rows;
    size_t n;
    int64_t at;
} top_frame;

static void copy_field(char *dst, size_t cap, const char *src, const char *dflt)
{
    snprintf(dst, cap, "%s", src ? src : dflt);
}

/* The archiver's progress (HMGET rate lag_entries lag_ms updated_at of
 * P:{B}:archive): "1200/s lag 35 0.4s", "stale" when it has not written
 * for 10 s, "-" when no archiver ever ran. */
static void top_archive(top_row *row, const redisReply *h)
{
    snprintf(row->archive, sizeof row->archive, "-");
    if (h->type != REDIS_REPLY_ARRAY || h->elements != 4 || h->element[3]->type != REDIS_REPLY_STRING) return;
    int64_t at = ctl_reply_int(h->element[3]);
    if (clock_wall_ms() - at > 10000) { snprintf(row->archive, sizeof row->archive, "stale"); return; }
    snprintf(row->archive, sizeof row->archive, "%" PRId64 "/s lag %" PRId64 " %.1fs",
             ctl_reply_int(h->element[0]), ctl_reply_int(h->element[1]),
             (double)ctl_reply_int(h->element[2]) / 1000.0);
}

static void top_fill(top_row *row, const char *batch, redisReply **r)
{
    memset(row, 0, sizeof *row);
    copy_field(row->batch, sizeof row->batch, batch, "");
    copy_field(row->kind, sizeof row->kind, r[1]->type == REDIS_REPLY_STRING ? r[1]->str : NULL, "?");
    copy_field(row->state, sizeof row->state, hfield(r[0], "state"), "unserved");
    copy_field(row->owner, sizeof row->owner, hfield(r[0], "owner"), "-");
    row->processed = hfield_int(r[0], "processed", 0);
    row->free_units = hfield_int(r[0], "free_units", -1);
    row->dead = hfield_int(r[0], "dead", 0);
    row->invalid = hfield_int(r[0], "invalid", 0);
    row->waiting = hfield_int(r[0], "waiting", 0);
    row->wait_served = hfield_int(r[0], "wait_served", 0);
    row->p50_us = hfield_int(r[0], "decision_p50_us", -1);
    row->p99_us = hfield_int(r[0], "decision_p99_us", -1);
    /* The percentiles cover the last ~10-20 s of decisions and are written
     * with each chunk: once a batch goes idle they stay as they were. Show
     * them only while fresh, and never a 0 that means "no samples". */
    int64_t updated = hfield_int(r[0], "updated_at", 0);
    if (clock_wall_ms() - updated > TOP_LATENCY_FRESH_MS || row->p99_us <= 0)
        row->p50_us = row->p99_us = -1;
    row->queue = r[2]->integer;
    for (size_t i = 0; i < r[3]->elements; i++) row->capacity += ctl_reply_int(r[3]->element[i]);
    row->rate = -1;
    top_archive(row, r[4]);
}

/* One frame: every batch of P:batches, sorted, in one pipeline. */
static int top_gather(ctx *x, top_frame *f)
{
    redisReply *m = rcmd(x, "SMEMBERS %s", x->batches_key);
    if (!m) return -1;
    sort_strings(m);
    const char **names = calloc(m->elements + 1, sizeof *names);
    size_t n = 0;
    for (size_t i = 0; names && i < m->elements; i++) {
        batch_keys k;
        if (batch_keys_init(&k, x->cfg.prefix, m->element[i]->str) < 0) continue;
        redisAppendCommand(x->c, "HGETALL %s", k.stats);
        redisAppendCommand(x->c, "HGET %s kind", k.meta);
        redisAppendCommand(x->c, "LLEN %s", k.queue);
        redisAppendCommand(x->c, "HVALS %s", k.capacity);
        char progress[BATCH_KEY_MAX + 16];
        archive_progress_key(progress, sizeof progress, x->cfg.prefix, m->element[i]->str);
        redisAppendCommand(x->c, "HMGET %s rate lag_entries lag_ms updated_at", progress);
        names[n++] = m->element[i]->str;
    }
    redisReply **r = calloc(n * 5 + 1, sizeof *r);
    f->rows = calloc(n + 1, sizeof *f->rows);
    int rc = names && r && f->rows && replies(x, n * 5, r) == 0 ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) top_fill(&f->rows[i], names[i], r + 5 * i);
    f->n = rc == 0 ? n : 0;
    f->at = clock_wall_ms();
    if (r && rc == 0) free_replies(r, n * 5);
    free(r);
    free(names);
    freeReplyObject(m);
    return rc;
}

static void top_rates(top_frame *f, const top_frame *prev)
{
    double secs = (double)(f->at - prev->at) / 1000.0;
    for (size_t i = 0; i < f->n && secs > 0; i++)
        for (size_t j = 0; j < prev->n; j++)
            if (!strcmp(f->rows[i].batch, prev->rows[j].batch)) {
                f->rows[i].rate = (double)(f->rows[i].processed - prev->rows[j].processed) / secs;
                break;
            }
}

static void progress(char *buf, size_t len, const top_row *r)
{
    if (r->capacity <= 0 || r->free_units < 0) { snprintf(buf, len, "%-*s", BAR_WIDTH + 16, "-"); return; }
    int64_t given = r->capacity - r->free_units;
    int fill = (int)(given * BAR_WIDTH / r->capacity);
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    snprintf(buf, len, "[%s] %3d%% %" PRId64 "/%" PRId64, bar,
             (int)(given * 100 / r->capacity), given, r->capacity);
}

/* Microseconds as a short millisecond figure ("0.25", "12"), or "-". */
static void ms_text(char *buf, size_t len, int64_t us)
{
    if (us < 0) snprintf(buf, len, "-");
    else if (us < 10000) snprintf(buf, len, "%.2f", (double)us / 1000.0);
    else snprintf(buf, len, "%" PRId64, us / 1000);
}

static void top_line(char *buf, size_t len, const top_row *r, int wide)
{
    char rate[32], prog[96], p50[32], p99[32], wait[48];
    if (r->rate < 0) snprintf(rate, sizeof rate, "-");
    else snprintf(rate, sizeof rate, "%.1f", r->rate);
    ms_text(p50, sizeof p50, r->p50_us);
    ms_text(p99, sizeof p99, r->p99_us);
    snprintf(wait, sizeof wait, "%" PRId64 "/%" PRId64, r->waiting, r->wait_served);
    if (wide) {
        progress(prog, sizeof prog, r);
        snprintf(buf, len, "%-20s %-5s %-8s %8" PRId64 " %9s  %-38s %6" PRId64 " %7" PRId64
                 " %13s %5s %5s  %-22s %s", r->batch, r->kind, r->state, r->queue, rate, prog, r->dead,
                 r->invalid, wait, p50, p99, r->archive, r->owner);
        return;
    }
    /* a narrow terminal: no bar, no kind, invalid or archive; the waitlist
     * as its length only; long names are cut with a '~' so the numbers
     * stay in their columns */
    if (r->capacity > 0 && r->free_units >= 0)
        snprintf(prog, sizeof prog, "%3d%%", (int)((r->capacity - r->free_units) * 100 / r->capacity));
    else snprintf(prog, sizeof prog, "   -");
    char name[16];
    size_t nl = strlen(r->batch);
    memcpy(name, r->batch, nl > 14 ? 14 : nl + 1);
    if (nl > 14) { name[13] = '~'; name[14] = '\0'; }
    snprintf(buf, len, "%-14s %-8s %7" PRId64 " %7s %4s %5" PRId64 " %5" PRId64 " %5s %5s  %s", name, r->state,
             r->queue, rate, prog, r->dead, r->waiting, p50, p99, r->owner);
}

static int term_cols(void)
{
    struct winsize ws;
    return ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 1000;
}

/* Writes one frame; live = in place with ANSI escapes, else plain text. */
static void top_render(const ctx *x, const top_frame *f, const char *err, int interval, int live)
{
    char line[512], when[40];
    /* not a terminal: $COLUMNS if set (as ps and ls do), else unlimited */
    const char *env = getenv("COLUMNS");
    int cols = live ? term_cols() : env && atoi(env) > 0 ? atoi(env) : (int)sizeof line - 1;
    if (cols > (int)sizeof line - 1) cols = (int)sizeof line - 1;
    int wide = cols >= TOP_WIDE;
    const char *eol = live ? "\x1b[K\n" : "\n";
    if (live) fputs("\x1b[H", stdout);
    snprintf(line, sizeof line, "allocctl top  %s  %s  every %d ms%s", x->batches_key,
             ctl_iso_ms(f->at ? f->at : clock_wall_ms(), when, sizeof when), interval, live ? "  (q quits)" : "");
    printf("%.*s%s", cols, line, eol);
    if (err && *err) printf("%.*s%s", cols, err, eol);
    if (wide)
        snprintf(line, sizeof line, "%-20s %-5s %-8s %8s %9s  %-38s %6s %7s %13s %5s %5s  %-22s %s", "BATCH",
                 "KIND", "STATE", "QUEUE", "REQ/S", "GIVEN", "DEAD", "INVALID", "WAIT/SERVED", "P50", "P99",
                 "ARCHIVE", "OWNER");
    else
        snprintf(line, sizeof line, "%-14s %-8s %7s %7s %4s %5s %5s %5s %5s  %s", "BATCH", "STATE",
                 "QUEUE", "REQ/S", "GIVE", "DEAD", "WAIT", "P50", "P99", "OWNER");
    printf("%.*s%s", cols, line, eol);
    for (size_t i = 0; i < f->n; i++) {
        top_line(line, sizeof line, &f->rows[i], wide);
        printf("%.*s%s", cols, line, eol);
    }
    if (f->n == 0) printf("(no batches in %s)%s", x->batches_key, eol);
    if (live) fputs("\x1b[J", stdout);
    fflush(stdout);
}

typedef struct term_state {
    struct termios saved;
    int raw;                  /* stdin was switched to non-canonical mode */
} term_state;

static void term_enter(term_state *t)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = top_on_signal;      /* no SA_RESTART: poll() must wake */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    t->raw = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0;
    if (t->raw) {
        struct termios raw = t->saved;
        raw.c_lflag &= (tcflag_t)~(ICANON | ECHO);   /* keys at once, no echo; ISIG stays */
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    fputs("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J", stdout);
    fflush(stdout);
}

static void term_leave(term_state *t)
{
    fputs("\x1b[?25h\x1b[?1049l", stdout);
    fflush(stdout);
    if (t->raw) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

/* Waits up to ms for a key; returns 1 when the user asked to quit. */
static int top_wait_key(int ms, int *stdin_open)
{
    struct pollfd p = { STDIN_FILENO, POLLIN, 0 };
    int n = poll(&p, *stdin_open ? 1 : 0, ms);
    if (n <= 0 || !(p.revents & (POLLIN | POLLHUP))) return 0;
    char buf[64];
    ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
    if (got <= 0) { *stdin_open = 0; return 0; }
    return memchr(buf, 'q', (size_t)got) || memchr(buf, 'Q', (size_t)got);
}

/* Gathers one frame, reconnecting first if the last one lost Redis. */
static void top_refresh(ctx *x, top_frame *f, char *err)
{
    memset(f, 0, sizeof *f);
    if (x->c && x->c->err) { redisFree(x->c); x->c = NULL; }
    if (!x->c) {
        x->c = ctl_connect(&x->cfg.redis, x->cfg.connect_timeout_ms, x->cfg.redis_timeout_ms,
                           err, TOP_ERR_MAX);
        if (!x->c) return;
    }
    err[0] = '\0';
    if (top_gather(x, f) < 0 && !err[0]) snprintf(err, TOP_ERR_MAX, "Redis error");
}

static int top_live(ctx *x, int interval)
{
    term_state t;
    char err[TOP_ERR_MAX] = "";
    top_frame prev = { 0 }, cur;
    int stdin_open = 1;
    x->quiet = err;
    term_enter(&t);
    while (!g_top_stop) {
        top_refresh(x, &cur, err);
        top_rates(&cur, &prev);
        top_render(x, &cur, err, interval, 1);
        free(prev.rows);
        prev = cur;
        if (top_wait_key(interval, &stdin_open)) break;
    }
    free(prev.rows);
    term_leave(&t);
    x->quiet = NULL;
    return EX_OK;
}

static int top_run(ctx *x, const char *interval_opt)
{
    int64_t interval = 1000;
    int rc = ctx_config(x);
    if (rc != EX_OK) return rc;
    if (opt_int(x, "interval", interval_opt, 50, 3600000, &interval) < 0) return EX_USAGE;
    rc = ctx_connect(x);
    if (rc != EX_OK) return rc;
    if (isatty(STDOUT_FILENO)) return top_live(x, (int)interval);
    top_frame f = { 0 };
    if (top_gather(x, &f) < 0) { free(f.rows); return EX_REDIS; }
    top_render(x, &f, NULL, (int)interval, 0);
    free(f.rows);
    return EX_OK;
}

static const char HELP_TOP[] =
"Usage: allocctl top [--interval MS]\n"
"\n"
"A live view of every batch in P:batches, refreshed every MS (default 1000): state,\n"
"queue length, requests/s, units or beds given, dead and invalid counts, the\n"
"waitlist (requests waiting now / served from it so far), the archive's progress,\n"
"owner. q or Ctrl-C quits. When stdout is not a terminal, prints one snapshot and\n"
"exits ($COLUMNS sets its width). Narrower than 170 columns, a compact layout keeps\n"
"the state, queue, rate, share given, dead, waiting, latency and owner.\n"
"P50/P99 (ms) are stats.decision_p50_us/p99_us (`-` once a batch has been idle 20 s:\n"
"they are written with each chunk and would stay frozen): from a chunk taken off the\n"
"queue to its results written, over the last 10-20 s (- before any chunk).\n";

int cmd_top(ctx *x, int argc, char **argv, int at)
{
    const char *pos[MAX_POS], *interval = NULL;
    size_t npos;
    const opt spec[] = { GLOBAL_OPTS(x), { "interval", 0, &interval, NULL } };
    int rc = parse_opts(x, argc, argv, at, spec, sizeof spec / sizeof *spec, pos, &npos);
    if (rc) return rc < 0 ? show_help(HELP_TOP) : rc;
    if (npos) { errmsg(x, "unexpected argument '%s'", pos[0]); return EX_USAGE; }
    return top_run(x, interval);
}
