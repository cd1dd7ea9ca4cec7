/* http.c -- see http.h.
 *
 * Why libmicrohttpd: it is a mature HTTP/1.1 server library packaged by
 * Debian (libmicrohttpd-dev) whose "external event loop" mode fits libuv
 * without threads: with MHD_USE_EPOLL it keeps every socket in one epoll
 * fd, which we watch with a uv_poll_t; on readiness we call MHD_run (it
 * never blocks then) and after every run a uv_timer is set from
 * MHD_get_timeout, so idle connections are closed on time even when no
 * socket moves. It bounds connections (MHD_OPTION_CONNECTION_LIMIT: past
 * the cap a new connection is closed at once) and idle time
 * (MHD_OPTION_CONNECTION_TIMEOUT), parses requests strictly and handles
 * pipelining and keep-alive. libh2o's libuv build was the other candidate;
 * its embedding API is larger and less stable across versions, and HTTP/2
 * buys nothing for a scrape every few seconds.
 */
#include "service/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <microhttpd.h>

#include "base/log.h"

struct http_server {
    struct MHD_Daemon *mhd;
    uv_poll_t poll;
    uv_timer_t timer;
    int open_handles;
    http_handler_fn handler;
    void *data;
    char *token;
};

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[300];
    vsnprintf(buf, sizeof buf, fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    log_info("http: %s", buf);
}

int http_bearer_ok(const char *header, const char *token)
{
    static const char scheme[] = "Bearer ";
    if (!header || strncasecmp(header, scheme, sizeof scheme - 1)) return 0;
    const char *got = header + sizeof scheme - 1;
    size_t gl = strlen(got), tl = strlen(token);
    /* the difference of every byte is folded in, so the time taken does
     * not tell how much of a guess was right */
    unsigned diff = (unsigned)(gl ^ tl);
    for (size_t i = 0; i < tl; i++) diff |= (unsigned char)token[i] ^ (unsigned char)(i < gl ? got[i] : 0);
    return diff == 0;
}

const char *http_query(const http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result send_response(struct MHD_Connection *conn, http_response *r)
{
    struct MHD_Response *resp;
    if (r->static_body)
        resp = MHD_create_response_from_buffer(r->static_len, (void *)r->static_body,
                                               MHD_RESPMEM_PERSISTENT);
    else if (r->body.failed)
        return MHD_NO;
    else
        resp = MHD_create_response_from_buffer(r->body.len, r->body.buf ? r->body.buf : (void *)"",
                                               MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", r->content_type ? r->content_type : "text/plain; charset=utf-8");
    MHD_add_response_header(resp, "Cache-Control", r->cache_control ? r->cache_control : "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'");
    if (r->status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"allocd\"");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
    http_server *s = cls;
    /* the first call only announces the headers; answer on the second, when
     * a body (which no path here accepts) would have been read */
    if (!*con_cls) { *con_cls = s; return MHD_YES; }
    if (*upload_size) { *upload_size = 0; return MHD_YES; }
    http_request req = { method, url, 1, conn };
    if (s->token && *s->token)
        req.authorized = http_bearer_ok(
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION), s->token);
    http_response r;
    memset(&r, 0, sizeof r);
    r.status = 200;
    jsonw_init(&r.body);
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        r.status = MHD_HTTP_METHOD_NOT_ALLOWED;
        jsonw_raw(&r.body, "read-only: GET only\n", 20);
    } else {
        s->handler(&req, &r, s->data);
    }
    enum MHD_Result rc = send_response(conn, &r);
    jsonw_free(&r.body);
    return rc;
}

static void schedule(http_server *s);

static unsigned connections(http_server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return i ? i->num_connections : 0;
}

/* At the cap MHD takes its listening socket out of the epoll set and puts
 * it back at the start of a later run, not in the run that closed
 * connections: so a run that closed some is followed by another one,
 * or nothing would wake it while clients wait in the backlog. */
static void run_mhd(http_server *s)
{
    if (!s->mhd) return;
    for (int i = 0; i < 3; i++) {
        unsigned before = connections(s);
        MHD_run(s->mhd);
        if (connections(s) >= before) break;
    }
    schedule(s);
}

static void on_timer(uv_timer_t *t) { run_mhd(t->data); }

static void on_poll(uv_poll_t *p, int status, int events) { run_mhd(p->data); }

/* MHD_get_timeout: when it next needs a run with no socket activity (an
 * idle connection to close, or data it already holds to process). */
static void schedule(http_server *s)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    /* never more than a second, whatever it says: a safety net for any
     * other state change it does not signal through its epoll fd */
    if (MHD_get_timeout(s->mhd, &ms) != MHD_YES || ms > 1000) ms = 1000;
    uv_timer_start(&s->timer, on_timer, (uint64_t)ms, 0);
}

static int make_addr(struct sockaddr_storage *ss, const char *host, int port, int *v6)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *v6 = 0;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *v6 = 1;
        return 0;
    }
    return -1;
}

static void on_closed(uv_handle_t *h)
{
    http_server *s = h->data;
    if (--s->open_handles > 0) return;
    if (s->mhd) MHD_stop_daemon(s->mhd);  /* closes the sockets and the epoll fd */
    free(s->token);
    free(s);
}

int http_server_start(http_server **out, uv_loop_t *loop, const http_options *opt,
                      http_handler_fn handler, void *data, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    int v6 = 0;
    if (make_addr(&ss, opt->host, opt->port, &v6) < 0) {
        snprintf(err, errlen, "'%s' is not a numeric address", opt->host);
        return -1;
    }
    http_server *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return -1; }
    s->handler = handler;
    s->data = data;
    s->token = strdup(opt->token ? opt->token : "");
    unsigned timeout_s = (unsigned)((opt->timeout_ms + 999) / 1000);
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    s->mhd = MHD_start_daemon(flags, (uint16_t)opt->port, NULL, NULL, on_request, s,
                              MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)opt->max_connections,
                              MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                              MHD_OPTION_LISTEN_BACKLOG_SIZE, 128u,
                              MHD_OPTION_END);
    if (!s->mhd) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, or not an address of this host)",
                 opt->host, opt->port);
        free(s->token);
        free(s);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    s->open_handles = 1;
    if (!info || uv_poll_init(loop, &s->poll, info->epoll_fd) < 0) {
        snprintf(err, errlen, "cannot watch libmicrohttpd's epoll fd");
        uv_close((uv_handle_t *)&s->timer, on_closed);
        return -1;
    }
    s->poll.data = s;
    s->open_handles = 2;
    uv_poll_start(&s->poll, UV_READABLE, on_poll);
    schedule(s);
    *out = s;
    return 0;
}

void http_server_close(http_server *s)
{
    uv_poll_stop(&s->poll);
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->poll, on_closed);
    uv_close((uv_handle_t *)&s->timer, on_closed);
}
