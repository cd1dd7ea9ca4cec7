/* print.c -- see print.h. */
#include "allocctl/print.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/ctl_util.h"
#include "base/clock.h"

/* A string member for printing, "?" when missing. */
static const char *jget(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "?";
}

static void print_value(const char *key, json_t *v)
{
    char when[40];
    if (json_is_string(v)) { printf("%-12s %s\n", key, json_string_value(v)); return; }
    if (json_is_integer(v) && (!strcmp(key, "at") || !strcmp(key, "expires_at") ||
                               !strcmp(key, "since"))) {
        printf("%-12s %s (%" JSON_INTEGER_FORMAT ")\n", key,
               ctl_iso_ms(json_integer_value(v), when, sizeof when), json_integer_value(v));
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    printf("%-12s %s\n", key, s ? s : "?");
    free(s);
}

void print_result(const char *text, size_t len, int64_t participants, int raw)
{
    json_error_t je;
    json_t *doc = raw ? NULL : json_loadb(text, len, 0, &je);
    if (!json_is_object(doc)) {
        printf("%.*s\n", (int)len, text);
        json_decref(doc);
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach(doc, k, v) print_value(k, v);
    json_t *rank = json_object_get(doc, "rank");
    if (json_is_integer(rank) && participants > 0) {
        int64_t rk = json_integer_value(rank);
        printf("you beat %" PRId64 "%% (rank %" PRId64 " of %" PRId64 " participants)\n",
               100 * (participants - rk) / participants, rk, participants);
    }
    json_decref(doc);
}

void print_holder(const char *user, const char *text, size_t len, int raw)
{
    json_error_t je;
    json_t *doc = raw ? NULL : json_loadb(text, len, 0, &je);
    char when[40];
    if (!json_is_object(doc)) printf("%.*s\n", (int)len, text);
    else if (json_is_string(json_object_get(doc, "item"))) {
        printf("%s holds a bed in %s since %s (request %s)\n", user, jget(doc, "item"),
               ctl_iso_ms(json_integer_value(json_object_get(doc, "since")), when, sizeof when),
               jget(doc, "req"));
        json_t *exp = json_object_get(doc, "expires_at");   /* a held bed (contract 9.4) */
        if (json_is_string(json_object_get(doc, "order")))
            printf("  order %s: %s%s%s\n", jget(doc, "order"), jget(doc, "state"),
                   exp ? ", held until " : "",
                   exp ? ctl_when_ms(json_integer_value(exp), clock_wall_ms(), when, sizeof when) : "");
    } else {
        printf("%s holds %" JSON_INTEGER_FORMAT " units\n", user,
               json_integer_value(json_object_get(doc, "units")));
        size_t i;
        json_t *o;
        json_array_foreach(json_object_get(doc, "orders"), i, o) {
            json_t *exp = json_object_get(o, "expires_at");
            printf("  order %s: %" JSON_INTEGER_FORMAT " x %s, %s%s%s\n", jget(o, "order"),
                   json_integer_value(json_object_get(o, "qty")), jget(o, "item"), jget(o, "state"),
                   exp ? " until " : "",
                   exp ? ctl_when_ms(json_integer_value(exp), clock_wall_ms(), when, sizeof when) : "");
        }
    }
    json_decref(doc);
}

void print_dead(int64_t index, const redisReply *e, size_t max_raw)
{
    json_error_t je;
    json_t *doc = json_loadb(e->str, e->len, JSON_ALLOW_NUL, &je);
    char when[40];
    json_t *raw = json_object_get(doc, "raw");
    char *raw_s = raw ? json_dumps(raw, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    const char *shown = json_is_object(doc) ? (raw_s ? raw_s : "?") : e->str;
    size_t len = json_is_object(doc) ? strlen(shown) : e->len;
    /* A 64 KB request would bury the list: its head is enough to know it. */
    int cut = max_raw && len > max_raw;
    if (!json_is_object(doc))
        printf("[%" PRId64 "] not a dead entry: %.*s", index, (int)(cut ? max_raw : len), shown);
    else
        printf("[%" PRId64 "] at=%s error=\"%s\"%s raw=%.*s", index,
               ctl_iso_ms(json_integer_value(json_object_get(doc, "at")), when, sizeof when),
               jget(doc, "error"),
               json_object_get(doc, "raw_base64") ? " (binary: requeued from raw_base64)" : "",
               (int)(cut ? max_raw : len), shown);
    if (cut) printf("... (%zu bytes in all; --full shows all)", len);
    printf("\n");
    free(raw_s);
    json_decref(doc);
}

static int is_time_field(const char *key)
{
    static const char *const T[] = { "opens_at", "closes_at", "updated_at", "since", "at", "expires_at" };
    for (size_t i = 0; i < sizeof T / sizeof *T; i++)
        if (!strcmp(key, T[i])) return 1;
    return 0;
}

void print_field(const char *indent, int width, const char *key, const char *value, int64_t now)
{
    int64_t ms;
    char when[64];
    if (value && is_time_field(key) && ctl_parse_time_ms(value, &ms) == 0 && !strchr(value, 'T')) {
        if (ms == 0 && !strcmp(key, "closes_at")) printf("%s%-*s never (0)\n", indent, width, key);
        else printf("%s%-*s %s [%s]\n", indent, width, key, ctl_when_ms(ms, now, when, sizeof when), value);
        return;
    }
    printf("%s%-*s %s\n", indent, width, key, value ? value : "-");
}

void print_lottery(const char *indent, const char *commit, const char *seed, const char *users)
{
    if (!commit) {
        printf("%s%-14s none (no early request was kept for an opening draw)\n", indent, "lottery");
        return;
    }
    printf("%s%-14s commitment sha256 %s\n", indent, "lottery", commit);
    if (seed)
        printf("%s%-14s seed %s (revealed; %s users drawn: `allocctl lottery verify` "
               "replays it)\n", indent, "", seed, users ? users : "?");
    else
        printf("%s%-14s seed not revealed yet (it is, once the draw is made at opens_at)\n", indent, "");
}

void print_diff(size_t *count, size_t max_shown, const char *fmt, ...)
{
    if (++*count > max_shown) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("DIFF ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}
