/* argbuf.c -- see argbuf.h. */
#include "redis/argbuf.h"

#include <errno.h>

#include <stdlib.h>
#include <string.h>

#include "core/assert.h"
#include "core/numtext.h"

void argbuf_init(argbuf *a)
{
    memset(a, 0, sizeof *a);    /* the pipeline's command table too */
    jsonw_init(&a->resp);
    jsonw_init(&a->data);
    argbuf_reset(a);
}

void argbuf_reset(argbuf *a)
{
    static const char room[ARGBUF_HEADROOM];
    jsonw_reset(&a->resp);
    jsonw_raw(&a->resp, room, sizeof room);
    a->n = 0;
    a->ncmds = 0;
    a->cmd_n0 = 0;
}

void argbuf_free(argbuf *a)
{
    jsonw_free(&a->resp);
    jsonw_free(&a->data);
    free(a->cmd_start);
    free(a->cmd_len);
    a->cmd_start = a->cmd_len = NULL;
    a->n = a->ncmds = a->cap_cmds = 0;
}

/* "$<len>\r\n<bytes>\r\n" written in place: one room check per argument
 * (an apply has a dozen arguments per request). */
void argbuf_ext(argbuf *a, const char *s, size_t len)
{
    a->n++;
    char *o = jsonw_room(&a->resp, len + NUMTEXT_MAX + 5);
    if (!o) return;             /* failed is sticky: argbuf_failed() */
    char *p = o;
    *p++ = '$';
    p += numtext_u64(p, len);
    *p++ = '\r';
    *p++ = '\n';
    if (len) memcpy(p, s, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    jsonw_commit(&a->resp, (size_t)(p - o));
}

size_t argbuf_begin(argbuf *a)
{
    jsonw_reset(&a->data);
    return 0;
}

void argbuf_end(argbuf *a, size_t start)
{
    if (a->data.failed) a->resp.failed = 1;
    argbuf_ext(a, a->data.buf ? a->data.buf + start : "", a->data.len - start);
}

void argbuf_int(argbuf *a, int64_t v)
{
    char buf[24];
    size_t n = 0;
    if (v < 0) { buf[n++] = '-'; n += numtext_u64(buf + n, (uint64_t)0 - (uint64_t)v); }
    else n = numtext_u64(buf, (uint64_t)v);
    argbuf_ext(a, buf, n);
}

void argbuf_u64(argbuf *a, uint64_t v)
{
    char buf[24];
    argbuf_ext(a, buf, numtext_u64(buf, v));
}

int argbuf_failed(const argbuf *a)
{
    return a->resp.failed;
}

const char *argbuf_command(argbuf *a, size_t *len)
{
    char head[32];
    size_t n = 0;
    head[n++] = '*';
    n += numtext_u64(head + n, a->n);
    head[n++] = '\r';
    head[n++] = '\n';
    char *start = a->resp.buf + ARGBUF_HEADROOM - n;
    memcpy(start, head, n);
    *len = a->resp.len - (ARGBUF_HEADROOM - n);
    return start;
}

void argbuf_cmd_begin(argbuf *a)
{
    static const char gap[ARGBUF_CMD_GAP];
    a->cmd_gap = a->resp.len;
    jsonw_raw(&a->resp, gap, sizeof gap);
    a->cmd_n0 = a->n;
}

void argbuf_cmd_cancel(argbuf *a)
{
    if (a->cmd_gap <= a->resp.len) a->resp.len = a->cmd_gap;
    a->n = a->cmd_n0;
}

/* Room for one more command in the offsets. 0, or -ENOMEM (failed set). */
static int cmds_fit(argbuf *a)
{
    if (a->ncmds < a->cap_cmds) return 0;
    size_t cap = a->cap_cmds ? 2 * a->cap_cmds : 64;
    size_t *s = realloc(a->cmd_start, cap * sizeof *s);
    if (s) a->cmd_start = s;
    size_t *l = s ? realloc(a->cmd_len, cap * sizeof *l) : NULL;
    if (l) a->cmd_len = l;
    if (!s || !l) { a->resp.failed = 1; return -ENOMEM; }
    a->cap_cmds = cap;
    return 0;
}

void argbuf_cmd_raw(argbuf *a, const char *cmd, size_t len)
{
    ALLOC_ASSERT(a->cmd_n0 == a->n);   /* no command open */
    if (a->resp.failed || cmds_fit(a) < 0) return;
    size_t start = a->resp.len;
    jsonw_raw(&a->resp, cmd, len);
    if (a->resp.failed) return;
    a->cmd_start[a->ncmds] = start;
    a->cmd_len[a->ncmds] = len;
    a->ncmds++;
}

void argbuf_cmd_end(argbuf *a)
{
    if (a->resp.failed || cmds_fit(a) < 0) return;
    char head[ARGBUF_CMD_GAP];
    size_t n = 0;
    head[n++] = '*';
    n += numtext_u64(head + n, a->n - a->cmd_n0);
    head[n++] = '\r';
    head[n++] = '\n';
    size_t start = a->cmd_gap + ARGBUF_CMD_GAP - n;
    memcpy(a->resp.buf + start, head, n);
    a->cmd_start[a->ncmds] = start;
    a->cmd_len[a->ncmds] = a->resp.len - start;
    a->ncmds++;
    a->cmd_n0 = a->n;
}

size_t argbuf_slices(argbuf *a, redis_slice *out, size_t max)
{
    jsonw_raw(&a->resp, "", 1);       /* the NUL, not counted */
    a->resp.len--;
    size_t n = a->ncmds < max ? a->ncmds : max;
    for (size_t i = 0; i < n; i++) {
        out[i].buf = a->resp.buf + a->cmd_start[i];
        out[i].len = a->cmd_len[i];
    }
    return n;
}
