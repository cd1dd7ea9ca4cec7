/* ctl_util.c -- see ctl_util.h. Part of libctl.a, allocctl's
 * library in tools/allocctl/; the daemon does not link it. */
#include "allocctl/ctl_util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocctl/ctl_sync.h"
#include "core/numtext.h"

/* ---- times ------------------------------------------------------------- */

/* ":SS[.fff]" at *p, advancing it. */
static int parse_seconds(const char **p, int *sec, int *ms)
{
    const char *s = *p;
    *sec = *ms = 0;
    if (*s != ':') return 0;
    if (!isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[2])) return -1;
    *sec = (s[1] - '0') * 10 + (s[2] - '0');
    s += 3;
    if (*s == '.') {
        int digits = 0;
        for (s++; isdigit((unsigned char)*s); s++, digits++)
            if (digits < 3) *ms = *ms * 10 + (*s - '0');
        if (digits == 0) return -1;
        for (; digits < 3; digits++) *ms *= 10;
    }
    *p = s;
    return 0;
}

/* "Z", "+HH:MM" or "+HHMM" -> seconds east of UTC. */
static int parse_zone(const char *p, int64_t *off)
{
    if (p[0] == 'Z' && p[1] == '\0') { *off = 0; return 0; }
    if ((*p != '+' && *p != '-') || !isdigit((unsigned char)p[1])) return -1;
    int hh, mm, n = 0;
    if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 &&
        sscanf(p + 1, "%2d%2d%n", &hh, &mm, &n) != 2) return -1;
    if (p[1 + n] != '\0' || hh > 23 || mm > 59) return -1;
    *off = (int64_t)(hh * 60 + mm) * 60 * (*p == '+' ? 1 : -1);
    return 0;
}

int ctl_parse_time_ms(const char *s, int64_t *out)
{
    if (*s && strspn(s, "0123456789") == strlen(s)) return numtext_parse_i64(s, out);
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int used = 0, sec, ms;
    int64_t off;
    if (sscanf(s, "%4d-%2d-%2d%*1[T ]%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &used) != 5 || used == 0) return -1;
    const char *p = s + used;
    if (parse_seconds(&p, &sec, &ms) < 0 || parse_zone(p, &off) < 0) return -1;
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || sec > 60) return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_sec = sec;
    int64_t t = (int64_t)timegm(&tm) - off;
    if (t < 0) return -1;
    *out = t * 1000 + ms;
    return 0;
}

const char *ctl_iso_ms(int64_t ms, char *buf, size_t len)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03dZ", (int)(ms % 1000));
    return buf;
}

const char *ctl_span_ms(int64_t d, char *buf, size_t len)
{
    if (d < 0) d = -d;
    static const struct { int64_t ms; const char *unit; } U[] = {
        { 86400000, "d" }, { 3600000, "h" }, { 60000, "min" }, { 1000, "s" },
    };
    for (size_t i = 0; i < sizeof U / sizeof *U; i++)
        if (d >= U[i].ms || i + 1 == sizeof U / sizeof *U) {
            snprintf(buf, len, "%" PRId64 " %s", d / U[i].ms, U[i].unit);
            break;
        }
    return buf;
}

const char *ctl_when_ms(int64_t ms, int64_t now, char *buf, size_t len)
{
    char iso[40], span[32];
    ctl_iso_ms(ms, iso, sizeof iso);
    size_t n = strlen(iso);
    if (n > 5 && !strcmp(iso + n - 5, ".000Z")) strcpy(iso + n - 5, "Z");
    ctl_span_ms(ms - now, span, sizeof span);
    if (ms > now) snprintf(buf, len, "%s (in %s)", iso, span);
    else if (ms < now) snprintf(buf, len, "%s (%s ago)", iso, span);
    else snprintf(buf, len, "%s (now)", iso);
    return buf;
}

/* ---- argument vectors ------------------------------------------------- */

void ctl_args_addn(ctl_args *a, const char *s, size_t n)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        char **v = realloc(a->v, cap * sizeof *v);
        if (v) a->v = v;
        size_t *l = v ? realloc(a->len, cap * sizeof *l) : NULL;
        if (l) a->len = l;
        if (!v || !l) { a->failed = 1; return; }
        a->cap = cap;
    }
    char *copy = malloc(n + 1);
    if (!copy) { a->failed = 1; return; }
    memcpy(copy, s, n);
    copy[n] = '\0';
    a->v[a->n] = copy;
    a->len[a->n++] = n;
}

void ctl_args_add(ctl_args *a, const char *s)
{
    ctl_args_addn(a, s, strlen(s));
}

void ctl_args_addi(ctl_args *a, int64_t v)
{
    char buf[NUMTEXT_MAX];
    ctl_args_addn(a, buf, numtext_i64(buf, v));
}

void ctl_args_reset(ctl_args *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->v[i]);
    a->n = 0;
}

void ctl_args_free(ctl_args *a)
{
    ctl_args_reset(a);
    free(a->v);
    free(a->len);
    memset(a, 0, sizeof *a);
}

/* ---- flat key/value replies ------------------------------------------ */

const redisReply *ctl_reply_field(const redisReply *flat, const char *name)
{
    for (size_t i = 0; flat && flat->type == REDIS_REPLY_ARRAY && i + 1 < flat->elements; i += 2)
        if (flat->element[i]->type == REDIS_REPLY_STRING && !strcmp(flat->element[i]->str, name))
            return flat->element[i + 1];
    return NULL;
}

int64_t ctl_reply_field_int(const redisReply *flat, const char *name, int64_t dflt)
{
    int64_t n;
    return ctl_reply_to_int(ctl_reply_field(flat, name), &n) == 0 ? n : dflt;
}
