/* ctl_filter.h -- `allocctl push --filter k=v,...` typed like the batch's
 * room attributes (P:{B}:attrs), so building=7 matches {"building":"7"} and
 * {"building":7} alike; a value in double quotes is always a string. */
#ifndef ALLOCD_CTL_FILTER_H
#define ALLOCD_CTL_FILTER_H

#include <stddef.h>
#include <jansson.h>

/* attrs: the HGETALL reply of P:{B}:attrs parsed into an object of room ->
 * attributes (may be NULL: no rooms known, values typed like CSV cells).
 * Returns the filter object, or NULL with a message in err (malformed, an
 * attribute no room has, a value that cannot have the attribute's type). */
json_t *ctl_filter_build(const char *spec, const json_t *attrs, char *err, size_t errlen);

#endif
