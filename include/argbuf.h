/* argbuf.h -- the argument vector of one big Redis command, built cheaply.
 *
 * An apply call carries thousands of arguments: ids and engine strings that
 * already live in memory until the reply (referenced, not copied), and JSON
 * documents and numbers written into one growing buffer (referenced by
 * offset, because the buffer moves as it grows, and resolved to pointers
 * only when the command is sent). Section counts are written as
 * placeholders and patched when the section is complete. The buffers are
 * reused from chunk to chunk, so steady state allocates nothing.
 */
#ifndef ALLOCD_ARGBUF_H
#define ALLOCD_ARGBUF_H

#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"

/* Arguments of one apply call. Values are either pointers to memory that
 * lives until the reply (request ids, engine strings) or slices of `data`,
 * resolved to pointers only when the call is sent because `data` grows. */
typedef struct arg_ref {
    const char *ext;
    size_t off, len;
} arg_ref;

typedef struct argbuf {
    arg_ref *refs;
    size_t n, cap;
    jsonw data;
    const char **argv;
    size_t *lens;
    size_t argv_cap;
    int failed;
} argbuf;

void args_reset(argbuf *a);
void args_free(argbuf *a);
/* A value that stays valid until the command's reply (not copied). */
void arg_ext(argbuf *a, const char *s, size_t len);
void arg_str(argbuf *a, const char *s);
/* A value written into the buffer: arg_begin, write with jsonw_*, arg_end. */
size_t arg_begin(argbuf *a);
void arg_end(argbuf *a, size_t start);
void arg_int(argbuf *a, int64_t v);
void arg_u64(argbuf *a, uint64_t v);
/* A count placeholder, patched by arg_count_end. */
size_t arg_count_begin(argbuf *a);
void arg_count_end(argbuf *a, size_t at, size_t count);
/* Fills argv/lens from the references; 0 or -ENOMEM. */
int args_resolve(argbuf *a);

#endif
