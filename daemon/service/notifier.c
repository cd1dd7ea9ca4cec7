/* notifier.c -- see notifier.h. The protocol is one datagram per message to the
 * unix socket named by $NOTIFY_SOCKET ('@' means the abstract namespace). */
#include "service/notifier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "core/numtext.h"

int notifier_init(notifier *n, uv_loop_t *loop)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
    uv_timer_init(loop, &n->watchdog);
    n->watchdog.data = n;
    const char *sock = getenv("NOTIFY_SOCKET");
    if (!sock || !*sock) return 0;
    size_t len = strlen(sock);
    if ((sock[0] != '/' && sock[0] != '@') || len >= sizeof n->path) return -EINVAL;
    memcpy(n->path, sock, len);
    if (n->path[0] == '@') n->path[0] = '\0';
    n->path_len = len;
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (n->fd < 0) return -errno;
    /* The watchdog is ours when WATCHDOG_PID is unset or names us (as
     * sd_watchdog_enabled). A value that is not a number is refused with a
     * warning rather than read as a prefix: atol/strtoull turned "5s" into
     * 5 us, and systemd would then kill a healthy daemon. */
    const char *wd = getenv("WATCHDOG_USEC"), *wd_pid = getenv("WATCHDOG_PID");
    if (!wd) return 0;
    int64_t pid;
    if (wd_pid && (numtext_parse_i64(wd_pid, &pid) < 0 || pid <= 0)) {
        log_warn("WATCHDOG_PID '%s' is not a process id: watchdog pings off", wd_pid);
        return 0;
    }
    if (wd_pid && pid != (int64_t)getpid()) return 0;
    uint64_t usec;
    if (numtext_parse_u64(wd, &usec) < 0) {
        log_warn("WATCHDOG_USEC '%s' is not a number of microseconds: watchdog pings off", wd);
        return 0;
    }
    n->watchdog_usec = usec;
    return 0;
}

int notifier_active(const notifier *n)
{
    return n->fd >= 0;
}

int notifier_send(notifier *n, const char *text)
{
    if (n->fd < 0) return 0;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, n->path, n->path_len);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n->path_len);
    if (sendto(n->fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&addr, alen) < 0) {
        log_warn("systemd notify: %s", strerror(errno));
        return -errno;
    }
    return 0;
}

void notifier_status(notifier *n, const char *text)
{
    if (n->fd < 0 || !strcmp(text, n->last_status)) return;
    snprintf(n->last_status, sizeof n->last_status, "%s", text);
    char msg[300];
    snprintf(msg, sizeof msg, "STATUS=%s", text);
    notifier_send(n, msg);
}

static void on_watchdog(uv_timer_t *t)
{
    notifier_send(t->data, "WATCHDOG=1");
}

void notifier_watchdog_start(notifier *n)
{
    if (n->fd < 0 || !n->watchdog_usec || n->watchdog_started) return;
    uint64_t ms = n->watchdog_usec / 2000;
    if (ms < 1) ms = 1;
    n->watchdog_started = 1;
    uv_timer_start(&n->watchdog, on_watchdog, 0, ms);
}

void notifier_close(notifier *n)
{
    uv_timer_stop(&n->watchdog);
    if (!uv_is_closing((uv_handle_t *)&n->watchdog)) uv_close((uv_handle_t *)&n->watchdog, NULL);
    if (n->fd >= 0) close(n->fd);
    n->fd = -1;
}
