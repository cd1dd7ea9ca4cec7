/* argbuf.h -- Redis commands written as RESP as they are built.
 *
 * An apply carries thousands of arguments, and hiredis's argv formatting
 * costs a snprintf per argument; instead the arguments are appended here
 * as RESP bulk strings ("$len\r\n...\r\n") into one buffer that is reused
 * from chunk to chunk. A single command (argbuf_command) has its header
 * written into ARGBUF_HEADROOM free bytes at the front once the count is
 * known. A value written with jsonw (a result, a holder) goes through the
 * small `data` scratch buffer.
 *
 * The buffer can also hold a pipeline of several commands (the apply's
 * MULTI/EXEC): argbuf_cmd_begin() reserves a gap for the command's
 * "*<count>\r\n" header, and argbuf_cmd_end() writes the header right-aligned
 * into it once the count is known (RESP forbids leading zeros, so a
 * fixed-width placeholder cannot be patched in place). The bytes of the gap
 * before the header are never sent: each command is handed to redis_conn
 * as its own slice.
 */
#ifndef ALLOCD_ARGBUF_H
#define ALLOCD_ARGBUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/jsonw.h"
#include "redis/redis_conn.h"

#define ARGBUF_HEADROOM REDIS_CONN_RESP_HEADROOM

#define ARGBUF_CMD_GAP 24   /* "*" + 20 digits + "\r\n", rounded up */

typedef struct argbuf {
    jsonw resp;         /* headroom, then the bulk strings */
    jsonw data;         /* scratch: one value being written with jsonw */
    size_t n;           /* arguments written */
    /* pipeline mode: the commands completed so far, as offsets into resp */
    size_t cmd_gap;     /* offset of the open command's header gap */
    size_t cmd_n0;      /* n when the open command began */
    size_t *cmd_start, *cmd_len;
    size_t ncmds, cap_cmds;
} argbuf;

void argbuf_init(argbuf *a);
void argbuf_reset(argbuf *a);
void argbuf_free(argbuf *a);
void argbuf_ext(argbuf *a, const char *s, size_t len);
/* Inline, so that a literal's length is known when compiled (jsonw.h). */
static inline void argbuf_str(argbuf *a, const char *s) { argbuf_ext(a, s, strlen(s)); }
/* A value written with jsonw into a->data: argbuf_begin, write, argbuf_end. */
size_t argbuf_begin(argbuf *a);
void argbuf_end(argbuf *a, size_t start);
void argbuf_int(argbuf *a, int64_t v);
void argbuf_u64(argbuf *a, uint64_t v);
int argbuf_failed(const argbuf *a);
/* The complete command "*n\r\n..." (header written into the headroom). */
const char *argbuf_command(argbuf *a, size_t *len);
/* Pipeline mode: one command = begin, its arguments, end. cancel drops the
 * open command (e.g. an HSET that got no field). */
void argbuf_cmd_begin(argbuf *a);
void argbuf_cmd_end(argbuf *a);
void argbuf_cmd_cancel(argbuf *a);
/* Pipeline mode: appends a whole command already in RESP ("*n\r\n..."),
 * e.g. one kept from another argbuf, with no command open. */
void argbuf_cmd_raw(argbuf *a, const char *cmd, size_t len);
static inline size_t argbuf_cmd_nargs(const argbuf *a) { return a->n - a->cmd_n0; }
/* The completed commands as slices (pointers valid until the next append).
 * A NUL follows the last one: hiredis 0.14 reads one byte past a command of
 * a single argument (EXEC) when it looks for SUBSCRIBE. */
size_t argbuf_slices(argbuf *a, redis_slice *out, size_t max);

#endif
