/* ctl_filter.c -- see ctl_filter.h. allocd compares a filter value with
 * the room's attribute as JSON, type included: typing "7" by its look (as
 * a CSV cell) sent the number 7 where the attribute was the string "7", a
 * filter that silently matched nothing. */
#include "allocctl/ctl_filter.h"

#include <stdio.h>
#include <string.h>

#include "allocctl/ctl_items.h"

/* The type of attribute `key` in the rooms: the first room that has it. */
static const json_t *attr_sample(const json_t *attrs, const char *key)
{
    const char *room;
    json_t *a;
    json_object_foreach((json_t *)attrs, room, a) {
        const json_t *v = json_object_get(a, key);
        if (v) return v;
    }
    return NULL;
}

static json_t *typed_value(const char *key, const char *v, size_t n, const json_t *attrs,
                           char *err, size_t errlen)
{
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') return json_stringn(v + 1, n - 2);
    if (!attrs) return ctl_cell_json(v, n);
    const json_t *sample = attr_sample(attrs, key);
    if (!sample) {
        snprintf(err, errlen, "no room of this batch has the attribute '%s': the filter would match nothing", key);
        return NULL;
    }
    if (json_is_string(sample)) return json_stringn(v, n);
    json_t *typed = ctl_cell_json(v, n);
    if ((json_is_number(sample) && json_is_number(typed)) ||
        (json_is_boolean(sample) && json_is_boolean(typed)))
        return typed;
    json_decref(typed);
    snprintf(err, errlen, "attribute '%s' is a %s in the batch's rooms; '%.*s' is not",
             key, json_is_number(sample) ? "number" : json_is_boolean(sample) ? "boolean" : "JSON value",
             (int)n, v);
    return NULL;
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
