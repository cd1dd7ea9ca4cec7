/* archive_copy.c -- see archive_copy.h. */
#include "allocctl/archive_copy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/vec.h"

/* core/vec's growth, from 64 kB (a chunk of the log is some 2 MB, a page
 * of results some 20 kB): its overflow checks included. */
#define BUF_FIRST 65536

void archive_buf_grow(archive_buf *b, size_t more)
{
    if (b->failed || b->len + more <= b->cap) return;
    if (more > SIZE_MAX - b->len) { b->failed = 1; return; }
    size_t need = b->len + more;
    void *p = b->p;
    if (vec_reserve(&p, &b->cap, need < BUF_FIRST ? BUF_FIRST : need, 1) < 0) { b->failed = 1; return; }
    b->p = p;
}

void archive_buf_free(archive_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Network byte order, as every integer of the format. */
static void buf_be(archive_buf *b, uint64_t v, int bytes)
{
    unsigned char o[8];
    for (int i = 0; i < bytes; i++) o[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    archive_buf_put(b, o, (size_t)bytes);
}

/* A field's length word; -1 is NULL. */
static void field_len(archive_buf *b, int32_t n) { buf_be(b, (uint32_t)n, 4); }

void archive_copy_null(archive_buf *b) { field_len(b, -1); }

void archive_copy_int8(archive_buf *b, long long v)
{
    field_len(b, 8);
    buf_be(b, (uint64_t)v, 8);
}

void archive_copy_int4(archive_buf *b, int32_t v)
{
    field_len(b, 4);
    buf_be(b, (uint32_t)v, 4);
}

/* The stream's header: signature, flags (no OIDs), no extension. */
static const char COPY_HEADER[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";

void archive_copy_begin(archive_buf *out)
{
    out->len = 0;
    archive_buf_put(out, COPY_HEADER, sizeof COPY_HEADER);
}

void archive_copy_end(archive_buf *out)
{
    buf_be(out, 0xffff, 2);   /* the trailer: a field count of -1 */
}

void archive_copy_row(archive_buf *out, int columns)
{
    buf_be(out, (uint64_t)columns, 2);
}

/* A JSON string escapes '"', '\\' and control bytes; NUL and bytes >= 0x80
 * need the UTF-8 check. A value none of whose bytes asks anything (almost
 * every value) is copied as it is. */
enum { K_JSON = 1, K_UTF = 2 };

static unsigned kinds(const char *s, size_t n)
{
    unsigned k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0 || c >= 0x80) k |= K_UTF;
        else if (c < 0x20 || c == '"' || c == '\\') k |= K_JSON;
    }
    return k;
}

/* A JSON string of s, with its quotes and escapes. */
static void buf_json_string(archive_buf *b, const char *s, size_t n)
{
    char tmp[8];
    archive_buf_put(b, "\"", 1);
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        archive_buf_put(b, s + from, i - from);
        if (c == '"') archive_buf_put(b, "\\\"", 2);
        else if (c == '\\') archive_buf_put(b, "\\\\", 2);
        else {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            archive_buf_put(b, tmp, 6);
        }
        from = i + 1;
    }
    archive_buf_put(b, s + from, n - from);
    archive_buf_put(b, "\"", 1);
}

int archive_copy_is_text(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
        if (!c || k == 9 || (k && i + k >= n)) return 0;
        if (k == 1 && c < 0xc2) return 0;
        for (size_t j = 1; j <= k; j++)
            if ((u[i + j] & 0xc0) != 0x80) return 0;
        uint32_t cp = k == 0 ? c : k == 1 ? c & 0x1f : k == 2 ? c & 0x0f : c & 0x07;
        for (size_t j = 1; j <= k; j++) cp = cp << 6 | (u[i + j] & 0x3f);
        if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        i += k + 1;
    }
    return 1;
}

void archive_copy_text(archive_buf *b, const char *s, size_t n, int empty_null)
{
    if (!s || (empty_null && !n)) { archive_copy_null(b); return; }
    if ((kinds(s, n) & K_UTF) && !archive_copy_is_text(s, n)) {
        field_len(b, 11);
        archive_buf_put(b, "(not utf-8)", 11);
        return;
    }
    field_len(b, (int32_t)n);
    archive_buf_put(b, s, n);
}

/* Whether s is an integer of at most 18 digits, and its value. */
static int int_of(const char *s, size_t n, long long *out)
{
    size_t i = s && n && s[0] == '-' ? 1 : 0, digits = 0;
    while (s && i < n && s[i] >= '0' && s[i] <= '9') { i++; digits++; }
    if (!s || i != n || digits < 1 || digits > 18) return 0;
    *out = strtoll(s, NULL, 10);
    return 1;
}

void archive_copy_int_text(archive_buf *b, const char *s, size_t n)
{
    long long x;
    if (int_of(s, n, &x)) archive_copy_int8(b, x);
    else archive_copy_null(b);
}

/* The format's timestamptz is microseconds since 2000-01-01 00:00 UTC. */
#define PG_EPOCH_MS 946684800000LL

void archive_copy_time_text(archive_buf *b, const char *s, size_t n)
{
    long long ms;
    if (!int_of(s, n, &ms) || ms < -62135596800000LL || ms > 253402300799999LL)
        archive_copy_null(b);
    else
        archive_copy_int8(b, (ms - PG_EPOCH_MS) * 1000);
}

void archive_copy_json_string(archive_buf *b, const char *s, size_t n)
{
    unsigned k = kinds(s, n);
    if (!k) {
        archive_buf_grow(b, n + 2);
        if (b->failed) return;
        b->p[b->len] = '"';
        memcpy(b->p + b->len + 1, s, n);
        b->p[b->len + 1 + n] = '"';
        b->len += n + 2;
    } else if ((k & K_UTF) && !archive_copy_is_text(s, n)) archive_buf_put(b, "\"(not utf-8)\"", 13);
    else buf_json_string(b, s, n);
}

size_t archive_copy_jsonb_begin(archive_buf *b)
{
    size_t start = b->len;
    archive_buf_put(b, "\0\0\0\0\1", 5);
    return start;
}

void archive_copy_jsonb_end(archive_buf *b, size_t start)
{
    if (b->failed) return;
    uint32_t len = (uint32_t)(b->len - start - 4);
    for (int i = 0; i < 4; i++) b->p[start + (size_t)i] = (char)(len >> (8 * (3 - i)));
}
