/* ctl_slots.c -- see ctl_slots.h. Part of libctl.a. */
#include "allocctl/ctl_slots.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numtext.h"

static int fail(char *err, size_t errlen, size_t line, const char *msg, const char *what)
{
    snprintf(err, errlen, "%zu: %s%s%s%s", line, msg, what ? " '" : "", what ? what : "",
             what ? "'" : "");
    return -1;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

/* A user id as the daemon takes it: 1 to 64 bytes, printable, no comma. */
static int user_ok(const char *u)
{
    size_t n = strlen(u);
    if (n < 1 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)u[i] < 0x20 || u[i] == 0x7f || u[i] == '"') return 0;
    return 1;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const slots_user *)a)->user, ((const slots_user *)b)->user);
}

/* One data line into p (room reserved). */
static int parse_line(char *s, size_t line, slots_plan *p, char *err, size_t errlen)
{
    char *comma = strchr(s, ',');
    if (!comma) return fail(err, errlen, line, "expected `user,value`, got", s);
    *comma = '\0';
    char *u = trim(s), *v = trim(comma + 1);
    if (strchr(v, ',')) return fail(err, errlen, line, "more than two columns", NULL);
    if (!user_ok(u)) return fail(err, errlen, line, "not a user id (1 to 64 printable characters):", u);
    int64_t value;
    if (numtext_parse_i64(v, &value) < 0) return fail(err, errlen, line, "not an integer:", v);
    char *copy = strdup(u);
    if (!copy) return fail(err, errlen, line, "out of memory", NULL);
    p->users[p->n++] = (slots_user){ copy, value, line, 0 };
    return 0;
}

int slots_parse(const char *text, size_t len, slots_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    char *buf = malloc(len + 1);
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    p->users = calloc(lines, sizeof *p->users);
    if (!buf || !p->users) { free(buf); slots_free(p); return fail(err, errlen, 0, "out of memory", NULL); }
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (memchr(text, '\0', len)) { free(buf); slots_free(p); return fail(err, errlen, 1, "a NUL byte: not a text file", NULL); }
    int header = 0, rc = 0;
    size_t line = 0;
    for (char *s = buf, *next; s && rc == 0; s = next) {
        line++;
        next = strchr(s, '\n');
        if (next) *next++ = '\0';
        char *t = trim(s);
        if (!*t || *t == '#') continue;
        if (!header) {   /* user,<number|points|anything> */
            char *c = strchr(t, ',');
            if (!c || strncmp(trim(t), "user", 4) != 0)
                rc = fail(err, errlen, line, "the header must be `user,number` or `user,points`, got", t);
            header = 1;
            continue;
        }
        rc = parse_line(t, line, p, err, errlen);
    }
    free(buf);
    if (rc == 0 && !header) rc = fail(err, errlen, line, "no header and no users", NULL);
    if (rc == 0 && p->n == 0) rc = fail(err, errlen, line, "no users after the header", NULL);
    if (rc == 0) {   /* a user twice would get two slots: refused */
        slots_user *tmp = malloc(p->n * sizeof *tmp);
        if (!tmp) rc = fail(err, errlen, 0, "out of memory", NULL);
        else {
            memcpy(tmp, p->users, p->n * sizeof *tmp);
            qsort(tmp, p->n, sizeof *tmp, by_name);
            for (size_t i = 1; i < p->n && rc == 0; i++)
                if (!strcmp(tmp[i].user, tmp[i - 1].user))
                    rc = fail(err, errlen, tmp[i].line > tmp[i - 1].line ? tmp[i].line : tmp[i - 1].line,
                              "user listed twice:", tmp[i].user);
            free(tmp);
        }
    }
    if (rc) slots_free(p);
    return rc;
}

/* Ties keep the file's order: qsort is not stable, the line number is. */
static int by_line(const slots_user *x, const slots_user *y)
{
    return x->line < y->line ? -1 : x->line > y->line;
}

static int by_number(const void *a, const void *b)   /* lowest lottery number first */
{
    const slots_user *x = a, *y = b;
    return x->value != y->value ? (x->value < y->value ? -1 : 1) : by_line(x, y);
}

static int by_points(const void *a, const void *b)   /* most points first */
{
    const slots_user *x = a, *y = b;
    return x->value != y->value ? (x->value > y->value ? -1 : 1) : by_line(x, y);
}

void slots_schedule(slots_plan *p, slots_order order, int64_t start, int64_t every,
                    int64_t per_slot)
{
    qsort(p->users, p->n, sizeof *p->users, order == SLOTS_BY_POINTS ? by_points : by_number);
    for (size_t i = 0; i < p->n; i++)
        p->users[i].at = start + (int64_t)(i / (size_t)per_slot) * every;
}

int slots_parse_duration(const char *s, int64_t *ms)
{
    if (!s || !isdigit((unsigned char)*s)) return -1;
    char *end;
    long long v = strtoll(s, &end, 10);
    int64_t mult = 1;
    if (!strcmp(end, "") || !strcmp(end, "ms")) mult = 1;
    else if (!strcmp(end, "s")) mult = 1000;
    else if (!strcmp(end, "m")) mult = 60000;
    else if (!strcmp(end, "h")) mult = 3600000;
    else return -1;
    if (v <= 0 || v > INT64_MAX / mult) return -1;
    *ms = v * mult;
    return 0;
}

void slots_free(slots_plan *p)
{
    for (size_t i = 0; p->users && i < p->n; i++) free(p->users[i].user);
    free(p->users);
    p->users = NULL;
    p->n = 0;
}
