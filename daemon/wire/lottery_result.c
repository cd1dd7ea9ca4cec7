/* lottery_result.c -- see lottery_result.h. */
#include "wire/lottery_result.h"

#include <string.h>
#include <jansson.h>

void lottery_result_from_json(lottery_result *out, const json_t *j)
{
    memset(out, 0, sizeof *out);
    out->has = 1;
    if (!json_is_object(j)) return;
    out->seq = json_integer_value(json_object_get(j, "seq"));
    out->draw = json_integer_value(json_object_get(j, "draw"));
    out->rank = json_integer_value(json_object_get(j, "rank"));
    const json_t *pts = json_object_get(j, "points");
    out->has_points = json_is_integer(pts);
    out->points = json_integer_value(pts);
    out->has_other_points = pts && !out->has_points;
    const char *op = json_string_value(json_object_get(j, "op"));
    out->late = json_object_get(j, "wait_no") != NULL || (op && !strcmp(op, "swap"));
}

void lottery_result_parse(lottery_result *out, const char *s, size_t len)
{
    json_t *j = json_loadb(s, len, 0, NULL);
    lottery_result_from_json(out, j);
    json_decref(j);
}
