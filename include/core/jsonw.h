/* jsonw.h -- a small, fast JSON writer into a growable byte buffer.
 *
 * allocd writes thousands of small JSON documents per chunk (results,
 * holders, dead entries). jansson's encoder builds a tree and allocates per
 * node; this writer appends straight into one buffer that is reused from
 * chunk to chunk, so the hot path does no allocation once the buffer has
 * grown to its working size. Several documents can share one buffer: note
 * jsonw_len() before a document and slice it out afterwards.
 *
 * Strings are escaped per RFC 8259; bytes that are not valid UTF-8 are
 * replaced by U+FFFD so the output is always valid JSON. Allocation failure
 * is sticky (`failed`), checked once at the end instead of after each call.
 */
#ifndef ALLOCD_JSONW_H
#define ALLOCD_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define JSONW_MAX_DEPTH 16

typedef struct jsonw {
    char *buf;
    size_t len, cap;
    int failed;
    int depth;
    unsigned char first[JSONW_MAX_DEPTH]; /* no element written yet at this depth */
} jsonw;

void jsonw_init(jsonw *w);
void jsonw_free(jsonw *w);
void jsonw_reset(jsonw *w);              /* empty, keeps the memory */
static inline size_t jsonw_len(const jsonw *w) { return w->len; }

void jsonw_obj_begin(jsonw *w);          /* as a value (top level or array element) */
void jsonw_obj_end(jsonw *w);
void jsonw_arr_begin(jsonw *w);
void jsonw_arr_end(jsonw *w);
void jsonw_keyn(jsonw *w, const char *key, size_t n);  /* key must not need escaping */
void jsonw_strn(jsonw *w, const char *s, size_t n);
void jsonw_int(jsonw *w, int64_t v);
void jsonw_u64_str(jsonw *w, uint64_t v);   /* as a JSON string of digits */

/* Inline, so that a literal's length is known when compiled: every
 * result and holder is written with eight or more literal keys. */
static inline void jsonw_key(jsonw *w, const char *key) { jsonw_keyn(w, key, strlen(key)); }
static inline void jsonw_str(jsonw *w, const char *s) { jsonw_strn(w, s, strlen(s)); }

/* key + value shorthands */
static inline void jsonw_kstr(jsonw *w, const char *key, const char *s)
{
    jsonw_key(w, key);
    jsonw_str(w, s);
}
static inline void jsonw_kint(jsonw *w, const char *key, int64_t v)
{
    jsonw_key(w, key);
    jsonw_int(w, v);
}

/* Room for n more bytes at the end: a pointer to write up to n bytes at,
 * then jsonw_commit() what was written; NULL once allocation failed. Lets a
 * caller format straight into the buffer (argbuf's RESP headers). */
char *jsonw_room_grow(jsonw *w, size_t n);
static inline char *jsonw_room(jsonw *w, size_t n)
{
    /* the hot path: room is almost always there */
    if (!w->failed && w->len + n <= w->cap) return w->buf + w->len;
    return jsonw_room_grow(w, n);
}
static inline void jsonw_commit(jsonw *w, size_t n) { w->len += n; }

/* Appends raw bytes with no separator handling (for argument buffers).
 * Inline: allocd calls it dozens of times per request, mostly for a few
 * bytes, where the call cost more than the copy. */
static inline void jsonw_raw(jsonw *w, const char *s, size_t n)
{
    char *o = jsonw_room(w, n);
    if (!o) return;
    memcpy(o, s, n);
    jsonw_commit(w, n);
}

/* 1 when s[0..n) is valid UTF-8 (and has no NUL when no_nul). */
int utf8_valid(const char *s, size_t n, int no_nul);

#endif
