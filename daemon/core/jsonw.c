/* jsonw.c -- see jsonw.h. */
#include "core/jsonw.h"

#include <stdlib.h>
#include <string.h>

#include "core/numtext.h"

void jsonw_init(jsonw *w)
{
    memset(w, 0, sizeof *w);
    w->first[0] = 1;
}

void jsonw_free(jsonw *w)
{
    free(w->buf);
    jsonw_init(w);
}

void jsonw_reset(jsonw *w)
{
    w->len = 0;
    w->failed = 0;
    w->depth = 0;
    w->first[0] = 1;
}

static int grow(jsonw *w, size_t extra)
{
    if (w->failed) return -1;
    if (w->len + extra <= w->cap) return 0;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + extra) cap *= 2;
    char *b = realloc(w->buf, cap);
    if (!b) { w->failed = 1; return -1; }
    w->buf = b;
    w->cap = cap;
    return 0;
}

char *jsonw_room_grow(jsonw *w, size_t n)
{
    return grow(w, n) < 0 ? NULL : w->buf + w->len;
}

static inline void put(jsonw *w, char c)
{
    if (w->len < w->cap || grow(w, 1) == 0) w->buf[w->len++] = c;
}

/* A value or key is about to be written at the current depth. */
static void sep(jsonw *w)
{
    if (!w->first[w->depth]) put(w, ',');
    w->first[w->depth] = 0;
}

static void begin(jsonw *w, char c)
{
    sep(w);
    put(w, c);
    if (w->depth + 1 < JSONW_MAX_DEPTH) w->depth++;
    else w->failed = 1;
    w->first[w->depth] = 1;
}

static void end(jsonw *w, char c)
{
    put(w, c);
    if (w->depth > 0) w->depth--;
}

void jsonw_obj_begin(jsonw *w) { begin(w, '{'); }
void jsonw_obj_end(jsonw *w) { end(w, '}'); }
void jsonw_arr_begin(jsonw *w) { begin(w, '['); }
void jsonw_arr_end(jsonw *w) { end(w, ']'); }

void jsonw_keyn(jsonw *w, const char *key, size_t n)
{
    sep(w);
    char *o = jsonw_room(w, n + 3);
    if (o) {
        o[0] = '"';
        memcpy(o + 1, key, n);
        o[n + 1] = '"';
        o[n + 2] = ':';
        jsonw_commit(w, n + 3);
    }
    w->first[w->depth] = 1; /* the value follows without a comma */
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

int utf8_valid(const char *s, size_t n, int no_nul)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (no_nul && p[i] == 0) return 0;
        size_t l = utf8_seq(p + i, n - i);
        if (!l) return 0;
        i += l;
    }
    return 1;
}

static const char hex[] = "0123456789abcdef";

void jsonw_strn(jsonw *w, const char *s, size_t n)
{
    sep(w);
    /* worst case: every byte becomes \u00XX or U+FFFD (3 bytes) */
    if (grow(w, n * 6 + 2) < 0) return;
    char *o = w->buf + w->len;
    *o++ = '"';
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') { *o++ = (char)c; i++; continue; }
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; i++; continue; }
        if (c == 0) { memcpy(o, "\xef\xbf\xbd", 3); o += 3; i++; continue; } /* NUL: U+FFFD, as invalid bytes */
        if (c < 0x20) {
            *o++ = '\\';
            switch (c) {
            case '\n': *o++ = 'n'; break;
            case '\r': *o++ = 'r'; break;
            case '\t': *o++ = 't'; break;
            default:
                *o++ = 'u'; *o++ = '0'; *o++ = '0';
                *o++ = hex[c >> 4]; *o++ = hex[c & 15];
            }
            i++;
            continue;
        }
        size_t l = utf8_seq(p + i, n - i);
        if (l) { memcpy(o, p + i, l); o += l; i += l; }
        else { memcpy(o, "\xef\xbf\xbd", 3); o += 3; i++; }
    }
    *o++ = '"';
    w->len = (size_t)(o - w->buf);
}


void jsonw_int(jsonw *w, int64_t v)
{
    sep(w);
    char *o = jsonw_room(w, NUMTEXT_MAX + 1);
    if (o) jsonw_commit(w, numtext_i64(o, v));
}

void jsonw_u64_str(jsonw *w, uint64_t v)
{
    sep(w);
    char *o = jsonw_room(w, NUMTEXT_MAX + 2);
    if (!o) return;
    size_t n = numtext_u64(o + 1, v);
    o[0] = '"';
    o[n + 1] = '"';
    jsonw_commit(w, n + 2);
}

