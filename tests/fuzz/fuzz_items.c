/* fuzz_items.c -- fuzz target over allocctl's item loaders (CSV and JSON,
 * tools/allocctl/ctl_items.h), what `allocctl batch create` reads from an
 * operator's file.
 *
 * Checks, for every input: the parser returns 0 or -1; -1 comes with a
 * message that names the file ("NAME:LINE: ..." or "NAME: ..."); 0 gives
 * items that keep the promises of ctl_items.h -- ids of 1 to 64 characters
 * without control characters, no id twice, capacities 0..2000000000,
 * attributes (when present) a JSON object -- and frees cleanly (ASan in
 * `make fuzz`). Built with libFuzzer or as test_fuzz_replay_items over
 * tests/fuzz/corpus/items/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/ctl_items.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_items: check failed: %s: ", #cond);        \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

static int id_ok(const char *s)
{
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) return 0;
        if ((*p & 0xc0) != 0x80) chars++;
    }
    return chars >= 1 && chars <= CTL_ITEM_ID_MAX;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    ctl_items items;
    memset(&items, 0, sizeof items);
    char err[512] = "";
    int rc = ctl_items_parse(&items, "items.in", (const char *)data, size, err, sizeof err);
    CHECK(rc == 0 || rc == -1, "returned %d", rc);
    if (rc == -1) {
        CHECK(!strncmp(err, "items.in:", 9), "error without the file's name: '%s'", err);
    } else {
        for (size_t i = 0; i < items.n; i++) {
            const ctl_item *it = &items.v[i];
            CHECK(it->id && id_ok(it->id), "item %zu id '%s'", i, it->id ? it->id : "(null)");
            CHECK(it->capacity >= 0 && it->capacity <= CTL_CAPACITY_MAX, "capacity %lld", (long long)it->capacity);
            for (size_t j = 0; j < i; j++) CHECK(strcmp(items.v[j].id, it->id), "id '%s' twice", it->id);
            if (it->attrs) {
                json_t *a = json_loads(it->attrs, 0, NULL);
                CHECK(json_is_object(a), "attrs '%s' is not an object", it->attrs);
                json_decref(a);
            }
        }
    }
    ctl_items_free(&items);
    return 0;
}

#ifndef FUZZ_LIBFUZZER
#include "fuzz_replay.h"
FUZZ_REPLAY_MAIN("items")
#endif
