/* argbuf.h -- one big Redis command, written as RESP as it is built.
 *
 * An apply call carries thousands of arguments. hiredis's argv formatting
 * costs a snprintf per argument and redis_conn_eval copies every argument
 * again for a possible NOSCRIPT retry; instead the arguments are appended
 * here as RESP bulk strings ("$len\r\n...\r\n") into one buffer that is
 * reused from chunk to chunk, behind ARGBUF_HEADROOM free bytes where the
 * command header goes once the count is known. A value written with jsonw
 * (a result, a holder) goes through the small `data` scratch buffer.
 * Section counts are written as 10-digit placeholders and patched when the
 * section is complete (the scripts read them with tonumber).
 */
#ifndef ALLOCD_ARGBUF_H
#define ALLOCD_ARGBUF_H

#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"
#include "redis_conn.h"

#define ARGBUF_HEADROOM REDIS_CONN_RESP_HEADROOM

typedef struct argbuf {
    jsonw resp;         /* headroom, then the bulk strings */
    jsonw data;         /* scratch: one value being written with jsonw */
    size_t n;           /* arguments written */
} argbuf;

void args_init(argbuf *a);
void args_reset(argbuf *a);
void args_free(argbuf *a);
void arg_ext(argbuf *a, const char *s, size_t len);
void arg_str(argbuf *a, const char *s);
/* A value written with jsonw into a->data: arg_begin, write, arg_end. */
size_t arg_begin(argbuf *a);
void arg_end(argbuf *a, size_t start);
void arg_int(argbuf *a, int64_t v);
void arg_u64(argbuf *a, uint64_t v);
/* A count placeholder, patched by arg_count_end. */
size_t arg_count_begin(argbuf *a);
void arg_count_end(argbuf *a, size_t at, size_t count);
int args_failed(const argbuf *a);
/* The complete command "*n\r\n..." (header written into the headroom). */
const char *args_command(argbuf *a, size_t *len);
/* For redis_conn_eval_resp: the bulk strings after the headroom. */
static inline char *args_buf(argbuf *a) { return a->resp.buf; }
static inline size_t args_tail_len(const argbuf *a) { return a->resp.len - ARGBUF_HEADROOM; }

#endif
