/* archive_copy.h -- rows in PostgreSQL's COPY binary format.
 *
 * The archive sends the log's events and the final results by COPY ...
 * FROM STDIN (FORMAT binary) rather than as text or JSON for the server to
 * split: PostgreSQL then parses no integers and no times, only the jsonb
 * columns, and a value goes as it is, without escapes. This module writes
 * the format (a header, rows of length-prefixed fields in network byte
 * order, a trailer); archive_log.c and archive_results.c decide what goes
 * in each column. The rules for a value that is not what a column takes
 * are here, once: text that is not UTF-8 is marked "(not utf-8)", a number
 * that is not an integer of at most 18 digits is NULL, a time outside the
 * years 1 - 9999 is NULL, so that no hand-written or future value makes a
 * whole COPY fail.
 */
#ifndef ALLOCD_CTL_ARCHIVE_COPY_H
#define ALLOCD_CTL_ARCHIVE_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A growing byte buffer; failed is set, and stays, when memory ran out. */
typedef struct archive_buf {
    char *p;
    size_t len, cap;
    int failed;
} archive_buf;

void archive_buf_free(archive_buf *b);
/* Room for more bytes (sets failed when there is none). */
void archive_buf_grow(archive_buf *b, size_t more);

static inline void archive_buf_put(archive_buf *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        archive_buf_grow(b, n);
        if (b->failed) return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

/* The rows of one COPY go between _begin (which empties out and writes
 * the header) and _end (the trailer); each row starts with _row. */
void archive_copy_begin(archive_buf *out);
void archive_copy_end(archive_buf *out);
void archive_copy_row(archive_buf *out, int columns);

/* One field each. */
void archive_copy_null(archive_buf *out);
void archive_copy_int8(archive_buf *out, long long v);
void archive_copy_int4(archive_buf *out, int32_t v);
/* A text column: s as it is, "(not utf-8)" when it is not well-formed
 * UTF-8 without NUL; NULL when s is NULL (or empty and empty_null). */
void archive_copy_text(archive_buf *out, const char *s, size_t n, int empty_null);
/* A bigint column from a decimal text: its value when it is an integer of
 * at most 18 digits, else NULL. */
void archive_copy_int_text(archive_buf *out, const char *s, size_t n);
/* A timestamptz column from a decimal text of milliseconds since the
 * epoch: NULL when it is not an integer or falls outside the years 1 -
 * 9999. */
void archive_copy_time_text(archive_buf *out, const char *s, size_t n);
/* Whether s is well-formed UTF-8 without NUL (what text and jsonb take). */
int archive_copy_is_text(const char *s, size_t n);

/* A jsonb column: _jsonb_begin writes the length word (filled in by
 * _jsonb_end) and jsonb's version byte; the JSON text goes in between,
 * with archive_buf_put and _json_string. */
size_t archive_copy_jsonb_begin(archive_buf *out);
void archive_copy_jsonb_end(archive_buf *out, size_t start);
/* s as a JSON string, quoted and escaped; "(not utf-8)" when it is not
 * well-formed UTF-8 without NUL. */
void archive_copy_json_string(archive_buf *out, const char *s, size_t n);

#endif
