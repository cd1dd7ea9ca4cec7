/* argbuf.c -- see argbuf.h. */
#include "argbuf.h"

#include <string.h>

static size_t u64_text(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

void args_init(argbuf *a)
{
    jsonw_init(&a->resp);
    jsonw_init(&a->data);
    args_reset(a);
}

void args_reset(argbuf *a)
{
    static const char room[ARGBUF_HEADROOM];
    jsonw_reset(&a->resp);
    jsonw_raw(&a->resp, room, sizeof room);
    a->n = 0;
}

void args_free(argbuf *a)
{
    jsonw_free(&a->resp);
    jsonw_free(&a->data);
    a->n = 0;
}

void arg_ext(argbuf *a, const char *s, size_t len)
{
    char head[32];
    size_t n = 0;
    head[n++] = '$';
    n += u64_text(head + n, len);
    head[n++] = '\r';
    head[n++] = '\n';
    jsonw_raw(&a->resp, head, n);
    if (len) jsonw_raw(&a->resp, s, len);
    jsonw_raw(&a->resp, "\r\n", 2);
    a->n++;
}

void arg_str(argbuf *a, const char *s) { arg_ext(a, s, strlen(s)); }

size_t arg_begin(argbuf *a)
{
    jsonw_reset(&a->data);
    return 0;
}

void arg_end(argbuf *a, size_t start)
{
    if (a->data.failed) a->resp.failed = 1;
    arg_ext(a, a->data.buf ? a->data.buf + start : "", a->data.len - start);
}

void arg_int(argbuf *a, int64_t v)
{
    char buf[24];
    size_t n = 0;
    if (v < 0) { buf[n++] = '-'; n += u64_text(buf + n, (uint64_t)0 - (uint64_t)v); }
    else n = u64_text(buf, (uint64_t)v);
    arg_ext(a, buf, n);
}

void arg_u64(argbuf *a, uint64_t v)
{
    char buf[24];
    arg_ext(a, buf, u64_text(buf, v));
}

size_t arg_count_begin(argbuf *a)
{
    arg_ext(a, "0000000000", 10);
    return a->resp.len - 12;            /* the digits, before the "\r\n" */
}

void arg_count_end(argbuf *a, size_t at, size_t count)
{
    if (a->resp.failed || at + 10 > a->resp.len) return;
    for (int i = 9; i >= 0; i--) {
        a->resp.buf[at + (size_t)i] = (char)('0' + count % 10);
        count /= 10;
    }
}

int args_failed(const argbuf *a)
{
    return a->resp.failed;
}

const char *args_command(argbuf *a, size_t *len)
{
    char head[32];
    size_t n = 0;
    head[n++] = '*';
    n += u64_text(head + n, a->n);
    head[n++] = '\r';
    head[n++] = '\n';
    char *start = a->resp.buf + ARGBUF_HEADROOM - n;
    memcpy(start, head, n);
    *len = a->resp.len - (ARGBUF_HEADROOM - n);
    return start;
}
