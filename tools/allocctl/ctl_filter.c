/* ctl_filter.c -- see ctl_filter.h. allocd compares a filter value with
 * the room's attribute as JSON, type included: typing "7" by its look (as
 * a CSV cell) sent the number 7 where the attribute was the string "7", a
 * filter that silently matched nothing. */
#include "allocctl/ctl_filter.h"

#include <stdio.h>
#include <string.h>

#include "allocctl/ctl_items.h"

/* What the rooms hold under `key`: which JSON types occur, and whether
 * one of them equals v. Every room is looked at, so the answer does not
 * depend on the order of the attrs hash (jansson's iteration order is
 * seeded per process). */
typedef struct attr_kinds {
    int any, strings, numbers, booleans;
    int string_hit, typed_hit;       /* a room's value equals the string / typed form */
} attr_kinds;

static attr_kinds attr_scan(const json_t *attrs, const char *key, const json_t *as_string, const json_t *typed)
{
    attr_kinds k = { 0 };
    const char *room;
    json_t *a;
    json_object_foreach((json_t *)attrs, room, a) {
        const json_t *v = json_object_get(a, key);
        if (!v) continue;
        k.any = 1;
        k.strings += json_is_string(v);
        k.numbers += json_is_number(v);
        k.booleans += json_is_boolean(v);
        k.string_hit |= as_string && json_equal(v, as_string);
        k.typed_hit |= typed && json_equal(v, typed);
    }
    return k;
}

/* An unquoted value takes the attribute's type. Where rooms disagree
 * (one says "7", another 7), the form some room actually holds wins, the
 * typed one first; quotes always force a string. */
static json_t *typed_value(const char *key, const char *v, size_t n, const json_t *attrs,
                           char *err, size_t errlen)
{
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') return json_stringn(v + 1, n - 2);
    if (!attrs) return ctl_cell_json(v, n);
    json_t *str = json_stringn(v, n), *typed = ctl_cell_json(v, n);
    if (typed && json_is_string(typed)) { json_decref(typed); typed = NULL; }
    attr_kinds k = attr_scan(attrs, key, str, typed);
    json_t *pick = NULL;
    if (!k.any)
        snprintf(err, errlen, "no room of this batch has the attribute '%s': the filter would match nothing", key);
    else if (typed && k.typed_hit) pick = typed;
    else if (k.string_hit || (k.strings && !k.numbers && !k.booleans)) pick = str;
    else if (typed && ((k.numbers && json_is_number(typed)) || (k.booleans && json_is_boolean(typed)))) pick = typed;
    else
        snprintf(err, errlen, "attribute '%s' is a %s in the batch's rooms; '%.*s' is not", key,
                 k.numbers ? "number" : k.booleans ? "boolean" : "JSON value", (int)n, v);
    if (pick != str) json_decref(str);
    if (pick != typed) json_decref(typed);
    return pick;
}

json_t *ctl_filter_build(const char *s, const json_t *attrs, char *err, size_t errlen)
{
    json_t *obj = json_object();
    while (obj && *s) {
        size_t n = strcspn(s, ","), k = strcspn(s, "=");
        if (k >= n || k == 0 || k >= 128) {
            snprintf(err, errlen, "--filter must be key=value[,key=value...]");
            json_decref(obj);
            return NULL;
        }
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)k, s);
        json_t *v = typed_value(key, s + k + 1, n - k - 1, attrs, err, errlen);
        if (!v) { json_decref(obj); return NULL; }
        json_object_set_new(obj, key, v);
        s += n + (s[n] == ',');
    }
    return obj;
}
