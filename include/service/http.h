/* http.h -- allocd's HTTP listener: libmicrohttpd driven by the libuv loop.
 *
 * One listener serves /metrics, the dashboard and its JSON (service/web.c
 * routes). Every handler answers at once from memory, on the loop thread:
 * nothing here blocks and nothing waits for Redis. Connections are capped
 * and idle ones closed; when a token is set every path but the static
 * dashboard files requires `Authorization: Bearer <token>`.
 */
#ifndef ALLOCD_HTTP_H
#define ALLOCD_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "core/jsonw.h"

typedef struct http_server http_server;

typedef struct http_request {
    const char *method;
    const char *path;         /* without the query */
    int authorized;           /* no token configured, or the right one sent */
    void *conn;               /* for http_query */
} http_request;

/* The decoded value of a query argument, or NULL. */
const char *http_query(const http_request *req, const char *name);

typedef struct http_response {
    int status;               /* 200 unless the handler sets it */
    const char *content_type;
    jsonw body;               /* owned; or static_body for embedded files */
    const char *static_body;
    size_t static_len;
    const char *cache_control;
} http_response;

typedef void (*http_handler_fn)(const http_request *req, http_response *resp, void *data);

typedef struct http_options {
    const char *host;         /* numeric address */
    int port;
    const char *token;        /* "" or NULL: no authentication */
    int max_connections;
    int timeout_ms;           /* an idle connection is closed after this */
} http_options;

/* Listens. Returns 0, or -1 with a message in err (nothing left open). */
int http_server_start(http_server **out, uv_loop_t *loop, const http_options *opt,
                      http_handler_fn handler, void *data, char *err, size_t errlen);
/* Closes the listener and every connection; frees asynchronously. */
void http_server_close(http_server *s);

/* Constant-time comparison of an Authorization header with the token. */
int http_bearer_ok(const char *header, const char *token);

#endif
