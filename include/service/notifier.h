/* notifier.h -- the systemd notify protocol, spoken directly (no libsystemd).
 *
 * When $NOTIFY_SOCKET is set (Type=notify units), allocd sends datagrams to
 * it: READY=1 once the config is valid and the loop runs, STATUS=... when
 * what it serves or the state of Redis changes, WATCHDOG=1 from a loop timer
 * at half of $WATCHDOG_USEC (so a stuck loop gets the daemon restarted),
 * RELOADING=1 / READY=1 around SIGHUP and STOPPING=1 when draining. Without
 * $NOTIFY_SOCKET every call is a no-op.
 */
#ifndef ALLOCD_NOTIFIER_H
#define ALLOCD_NOTIFIER_H

#include <stdint.h>
#include <uv.h>

typedef struct notifier {
    int fd;                     /* -1 when not under systemd */
    char path[108];
    size_t path_len;            /* abstract sockets start with '\0' */
    uint64_t watchdog_usec;     /* 0 = no watchdog */
    uv_timer_t watchdog;
    int watchdog_started;
    char last_status[256];
} notifier;

/* Reads the environment. Returns 0 (also when not under systemd) or a
 * negative errno when $NOTIFY_SOCKET is set but unusable. */
int notifier_init(notifier *n, uv_loop_t *loop);
int notifier_active(const notifier *n);
/* Sends one datagram of newline-separated assignments; returns 0 or -errno. */
int notifier_send(notifier *n, const char *text);
/* Sends STATUS=text only when it differs from the last one. */
void notifier_status(notifier *n, const char *text);
/* Starts WATCHDOG=1 pings at half the interval systemd asked for. */
void notifier_watchdog_start(notifier *n);
/* Stops the watchdog and closes the timer and the socket. */
void notifier_close(notifier *n);

#endif
