/* log.h -- leveled logging to stderr.
 *
 * When stderr is the journal (systemd's $JOURNAL_STREAM names it) each line
 * starts with the syslog priority as `<N>` so journald files it at the right
 * level; anywhere else (a terminal, a file, a pipe) each line starts with a
 * local timestamp and the level instead. A message that
 * repeats the previous one word for word within the rate-limit window is
 * counted instead of printed, and the count is reported when a different
 * message comes or the window ends, so a flapping Redis cannot flood the log.
 * The level is process-wide state, like the config.
 */
#ifndef ALLOCD_LOG_H
#define ALLOCD_LOG_H

/* syslog(3) priorities, named so they do not clash with <syslog.h>. */
enum {
    ALOG_ERR = 3, ALOG_WARNING = 4, ALOG_NOTICE = 5, ALOG_INFO = 6, ALOG_DEBUG = 7
};

/* style: -1 = decide from $JOURNAL_STREAM, 0 = journald prefixes, 1 = timestamps */
void log_init(int level, int style);
/* 1 when stderr is the stream $JOURNAL_STREAM names. */
int log_to_journal(void);
void log_set_level(int level);
int log_get_level(void);
/* "error", "warning", "notice", "info", "debug" -> level, or -1 */
int log_level_parse(const char *name);
const char *log_level_name(int level);

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Flush a pending "repeated N times" line (at exit). */
void log_flush(void);
/* The repeat-suppression window, 5000 ms by default; 0 turns suppression
 * off. Exists so tests need not sleep for five seconds. */
void log_set_repeat_window(int ms);

#define log_err(...)     log_msg(ALOG_ERR, __VA_ARGS__)
#define log_warn(...)    log_msg(ALOG_WARNING, __VA_ARGS__)
#define log_notice(...)  log_msg(ALOG_NOTICE, __VA_ARGS__)
#define log_info(...)    log_msg(ALOG_INFO, __VA_ARGS__)
#define log_debug(...)   log_msg(ALOG_DEBUG, __VA_ARGS__)

#endif
