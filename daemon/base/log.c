/* log.c -- leveled logging to stderr, with repeat suppression.
 *
 * allocd runs under systemd, where stderr goes to journald: there each line
 * starts with `<N>` (the syslog priority) so journald files it at the right
 * level without a timestamp of ours (journald adds its own). On a terminal a
 * human reads it, so the line starts with a local timestamp and the level name.
 *
 * When Redis flaps, the same error would otherwise be logged on every retry.
 * So a message identical to the previous one (same level, same text) within
 * the window is counted instead of printed; the count comes out as
 * "previous message repeated N times" just before the next different
 * message, at log_flush, or before the same message once the window is over
 * (which then starts a new window). The worst case is two lines per window.
 *
 * The state below is the one process-wide piece the daemon keeps besides the
 * config; the daemon is single-threaded (libuv loop), so no locking.
 */
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_MSG_MAX 2000            /* bytes of message text kept per line */
#define LOG_DEFAULT_WINDOW_MS 5000

static struct {
    int level;                      /* highest priority number printed */
    int style;                      /* -1 = not decided yet, 0 = <N>, 1 = tty */
    int window_ms;                  /* repeat-suppression window, 0 = off */
    int have_last;                  /* last[] holds the last printed message */
    int last_level;
    char last[LOG_MSG_MAX + 1];
    long long last_ms;              /* when last[] was printed (monotonic) */
    unsigned long repeats;          /* identical messages swallowed since */
} g_log = { ALOG_INFO, -1, LOG_DEFAULT_WINDOW_MS, 0, 0, "", 0, 0 };

static const char *const LEVEL_NAMES[] = {
    [ALOG_ERR] = "error", [ALOG_WARNING] = "warning", [ALOG_NOTICE] = "notice",
    [ALOG_INFO] = "info", [ALOG_DEBUG] = "debug",
};

/* Upper case for the terminal, padded so messages line up. */
static const char *const LEVEL_TAGS[] = {
    [ALOG_ERR] = "ERROR  ", [ALOG_WARNING] = "WARNING", [ALOG_NOTICE] = "NOTICE ",
    [ALOG_INFO] = "INFO   ", [ALOG_DEBUG] = "DEBUG  ",
};

/* Levels outside error..debug are pulled into range rather than rejected:
 * a logging call must never fail. */
static int clamp_level(int level)
{
    if (level < ALOG_ERR) return ALOG_ERR;
    if (level > ALOG_DEBUG) return ALOG_DEBUG;
    return level;
}

static long long monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* systemd sets JOURNAL_STREAM to "device:inode" of the stream it connected
 * to the journal; stderr is that stream only if they match (a child whose
 * stderr was redirected inherits the variable but not the stream). */
int log_to_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0) return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static int resolve_style(void)
{
    if (g_log.style < 0) g_log.style = log_to_journal() ? 0 : 1;
    return g_log.style;
}

void log_init(int level, int style)
{
    log_set_level(level);
    g_log.style = style < 0 ? -1 : (style ? 1 : 0);
    resolve_style();
    /* A fresh start forgets the previous message; callers that care about a
     * pending count call log_flush first. */
    g_log.have_last = 0;
    g_log.repeats = 0;
}

void log_set_level(int level) { g_log.level = clamp_level(level); }

int log_get_level(void) { return g_log.level; }

void log_set_repeat_window(int ms) { g_log.window_ms = ms > 0 ? ms : 0; }

int log_level_parse(const char *name)
{
    if (!name) return -1;
    /* Case-insensitive: "INFO" in a config file is an obvious intent. */
    for (int l = ALOG_ERR; l <= ALOG_DEBUG; l++)
        if (strcasecmp(name, LEVEL_NAMES[l]) == 0) return l;
    return -1;
}

const char *log_level_name(int level)
{
    if (level < ALOG_ERR || level > ALOG_DEBUG) return "unknown";
    return LEVEL_NAMES[level];
}

/* One write(2) per line, so lines from several processes sharing the
 * journal stream never interleave mid-line. Errors are ignored: there is
 * nowhere left to report them. */
static void write_all(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        buf += n;
        len -= (size_t)n;
    }
}

static size_t format_prefix(char *buf, size_t cap, int level)
{
    if (resolve_style() == 0) return (size_t)snprintf(buf, cap, "<%d>", level);
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
    n += (size_t)snprintf(buf + n, cap - n, ".%03ld %s ", ts.tv_nsec / 1000000,
                          LEVEL_TAGS[level]);
    return n;
}

static void emit(int level, const char *msg)
{
    char line[LOG_MSG_MAX + 64];
    size_t n = format_prefix(line, sizeof line, level);
    size_t len = strlen(msg);
    memcpy(line + n, msg, len);   /* msg <= LOG_MSG_MAX, prefix < 64 */
    line[n + len] = '\n';
    write_all(line, n + len + 1);
}

static void flush_repeats(void)
{
    if (g_log.repeats == 0) return;
    char msg[64];
    snprintf(msg, sizeof msg, "previous message repeated %lu times", g_log.repeats);
    g_log.repeats = 0;
    emit(g_log.last_level, msg);
}

void log_flush(void) { flush_repeats(); }

/* A cut at byte 2000 may split a UTF-8 sequence; drop its incomplete tail
 * so the journal never receives an invalid character. */
static size_t utf8_trim(const char *s, size_t len)
{
    size_t k = 0;
    while (k < len && k < 3 && ((unsigned char)s[len - 1 - k] & 0xC0) == 0x80) k++;
    if (k == len) return len;
    unsigned char lead = (unsigned char)s[len - 1 - k];
    if (lead < 0xC0) return len;          /* ASCII: nothing cut */
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    return k + 1 < need ? len - 1 - k : len;
}

/* A newline inside a message would start a journal line without a <N>
 * prefix, so control characters (except tab) become spaces. */
static void sanitize(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\t') *s = ' ';
}

static void format_message(char *buf, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void format_message(char *buf, const char *fmt, va_list ap)
{
    int n = vsnprintf(buf, LOG_MSG_MAX + 1, fmt, ap);
    if (n < 0) {
        snprintf(buf, LOG_MSG_MAX + 1, "(unformattable log message)");
        return;
    }
    if ((size_t)n > LOG_MSG_MAX) buf[utf8_trim(buf, LOG_MSG_MAX)] = '\0';
    sanitize(buf);
}

static int is_repeat(int level, const char *msg)
{
    return g_log.window_ms > 0 && g_log.have_last && g_log.last_level == level &&
           strcmp(g_log.last, msg) == 0;
}

void log_msg(int level, const char *fmt, ...)
{
    level = clamp_level(level);
    if (level > g_log.level) return;   /* filtered lines do not reset repeats */
    char msg[LOG_MSG_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    format_message(msg, fmt, ap);
    va_end(ap);

    long long now = monotonic_ms();
    if (is_repeat(level, msg) && now - g_log.last_ms < g_log.window_ms) {
        g_log.repeats++;
        return;
    }
    flush_repeats();
    emit(level, msg);
    memcpy(g_log.last, msg, strlen(msg) + 1);
    g_log.last_level = level;
    g_log.last_ms = now;
    g_log.have_last = 1;
}
