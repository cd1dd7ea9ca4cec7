/* metrics.c -- see metrics.h. */
#include "service/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

static void printf_out(jsonw *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void printf_out(jsonw *out, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) jsonw_raw(out, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void metrics_header(jsonw *out, const char *name, const char *type, const char *help)
{
    printf_out(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The exposition format's label value escapes: backslash, double quote and
 * line feed. Anything else is copied; a value cut for room stays escaped
 * whole (an escape is never split). */
const char *metrics_label_escape(const char *v, char *buf, size_t len)
{
    size_t o = 0;
    for (; *v && len; v++) {
        const char *esc = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
        size_t n = esc ? 2 : 1;
        if (o + n >= len) break;
        if (esc) { buf[o++] = esc[0]; buf[o++] = esc[1]; }
        else buf[o++] = *v;
    }
    if (len) buf[o] = '\0';
    return buf;
}

void metrics_value(jsonw *out, const char *name, const char *labels, double v)
{
    if (labels && *labels) printf_out(out, "%s{%s} %.17g\n", name, labels, v);
    else printf_out(out, "%s %.17g\n", name, v);
}

void metrics_hist_render(jsonw *out, const char *name, const char *labels,
                         const metrics_hist *h)
{
    const char *sep = labels && *labels ? "," : "";
    uint64_t cum = 0;
    for (size_t i = 0; i < METRICS_BUCKETS; i++) {
        cum += h->buckets[i];
        printf_out(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels ? labels : "", sep,
                   metrics_bucket_bounds[i], (unsigned long long)cum);
    }
    printf_out(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels ? labels : "", sep,
               (unsigned long long)h->count);
    printf_out(out, "%s_sum{%s} %.17g\n%s_count{%s} %llu\n", name, labels ? labels : "", h->sum,
               name, labels ? labels : "", (unsigned long long)h->count);
}

/* ---- the HTTP side ---- */

#define REQUEST_MAX 8192

typedef struct metrics_conn {
    uv_tcp_t tcp;
    metrics_server *srv;
    struct metrics_conn *next, *prev;
    char req[REQUEST_MAX];
    size_t len;
    jsonw resp;
    uv_write_t wr;
    int responded;
} metrics_conn;

struct metrics_server {
    uv_tcp_t listener;
    metrics_render_fn render;
    void *data;
    metrics_conn *conns;
    int closing;
};

static void conn_closed(uv_handle_t *h)
{
    metrics_conn *c = h->data;
    jsonw_free(&c->resp);
    free(c);
}

static void conn_close(metrics_conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp)) return;
    if (c->prev) c->prev->next = c->next; else c->srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void on_written(uv_write_t *wr, int status)
{
    conn_close(wr->data);
}

static void respond(metrics_conn *c, int code, const char *reason, const char *ctype, jsonw *body)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     code, reason, ctype, body ? body->len : 0);
    jsonw_raw(&c->resp, head, (size_t)n);
    if (body && body->len) jsonw_raw(&c->resp, body->buf, body->len);
    if (c->resp.failed) { conn_close(c); return; }
    uv_buf_t buf = uv_buf_init(c->resp.buf, (unsigned)c->resp.len);
    c->wr.data = c;
    c->responded = 1;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &buf, 1, on_written) < 0) conn_close(c);
}

static void handle_request(metrics_conn *c)
{
    int is_metrics = !strncmp(c->req, "GET /metrics ", 13) || !strncmp(c->req, "GET /metrics?", 13);
    if (!is_metrics) {
        jsonw body;
        jsonw_init(&body);
        jsonw_raw(&body, "not found: try GET /metrics\n", 28);
        respond(c, 404, "Not Found", "text/plain; charset=utf-8", &body);
        jsonw_free(&body);
        return;
    }
    jsonw body;
    jsonw_init(&body);
    c->srv->render(&body, c->srv->data);
    respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", &body);
    jsonw_free(&body);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    metrics_conn *c = h->data;
    buf->base = c->req + c->len;
    buf->len = REQUEST_MAX - 1 - c->len;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    metrics_conn *c = s->data;
    if (nread < 0) { conn_close(c); return; }
    if (c->responded) return;
    c->len += (size_t)nread;
    c->req[c->len] = '\0';
    if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
        uv_read_stop(s);
        handle_request(c);
    } else if (c->len >= REQUEST_MAX - 1) {
        conn_close(c);
    }
}

static void on_connection(uv_stream_t *l, int status)
{
    metrics_server *m = l->data;
    if (status < 0 || m->closing) return;
    metrics_conn *c = calloc(1, sizeof *c);
    if (!c) return;
    c->srv = m;
    jsonw_init(&c->resp);
    uv_tcp_init(l->loop, &c->tcp);
    c->tcp.data = c;
    c->next = m->conns;
    if (m->conns) m->conns->prev = c;
    m->conns = c;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        conn_close(c);
}

static void listener_closed(uv_handle_t *h)
{
    free(h->data);
}

int metrics_server_start(metrics_server **out, uv_loop_t *loop, const char *host,
                         int port, metrics_render_fn render, void *data)
{
    struct sockaddr_storage addr;
    int rc = strchr(host, ':') ? uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr)
                               : uv_ip4_addr(host, port, (struct sockaddr_in *)&addr);
    if (rc < 0) return rc;
    metrics_server *m = calloc(1, sizeof *m);
    if (!m) return UV_ENOMEM;
    m->render = render;
    m->data = data;
    uv_tcp_init(loop, &m->listener);
    m->listener.data = m;
    rc = uv_tcp_bind(&m->listener, (struct sockaddr *)&addr, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&m->listener, 16, on_connection);
    if (rc < 0) {
        m->closing = 1;
        uv_close((uv_handle_t *)&m->listener, listener_closed);
        return rc;
    }
    *out = m;
    return 0;
}

void metrics_server_close(metrics_server *m)
{
    m->closing = 1;
    while (m->conns) conn_close(m->conns);
    uv_close((uv_handle_t *)&m->listener, listener_closed);
}
