/* ctl_items.c -- see ctl_items.h. Part of libctl.a, allocctl's
 * library in tools/allocctl/; the daemon does not link it.
 *
 * Operators write these files by hand or export them from a spreadsheet,
 * so every message says where the problem is (FILE:LINE) and what would
 * be accepted instead. JSON errors come from jansson with its line; for
 * errors in well-formed JSON (a bad capacity, say) a small scanner finds
 * the line where each top-level element starts.
 */
#include "allocctl/ctl_items.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "allocctl/ctl_util.h"
#include "base/textfile.h"
#include "core/numtext.h"

#define CSV_MAX_COLS 64

static int fail(char *err, size_t errlen, const char *name, int line,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(char *err, size_t errlen, const char *name, int line,
                const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) snprintf(err, errlen, "%s:%d: %s", name, line, msg);
    else snprintf(err, errlen, "%s: %s", name, msg);
    return -1;
}

void ctl_items_free(ctl_items *items)
{
    for (size_t i = 0; i < items->n; i++) {
        free(items->v[i].id);
        free(items->v[i].attrs);
    }
    free(items->v);
    memset(items, 0, sizeof *items);
}

/* ---- checks shared by both formats ---------------------------------- */

/* Ids, column names and cells become JSON strings written as they are (the
 * _nocheck calls): bytes that are not UTF-8 would make the attrs written
 * to Redis invalid JSON, so they are refused here (found by fuzz_items). */
static int utf8_ok(const char *s, size_t n)
{
    json_t *t = json_stringn(s, n);
    json_decref(t);
    return t != NULL;
}

static const char *id_problem(const char *id, size_t n)
{
    if (n < 1 || n > CTL_ITEM_ID_MAX) return "item id must be 1 to 64 characters";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f)
            return "item id must not contain control characters";
    if (!utf8_ok(id, n)) return "item id is not valid UTF-8";
    return NULL;
}

static int find_item(const ctl_items *items, const char *id, size_t n)
{
    for (size_t i = 0; i < items->n; i++)
        if (strlen(items->v[i].id) == n && memcmp(items->v[i].id, id, n) == 0)
            return (int)i;
    return -1;
}

/* Adds an item; attrs (a jansson object or NULL) is dumped, not kept.
 * Returns 0 or -1 with err. Duplicate lookup is linear: files have
 * thousands of items at most, and this runs once. */
static int add_item(ctl_items *items, const char *name, int line, const char *id,
                    size_t idlen, int64_t capacity, json_t *attrs,
                    char *err, size_t errlen)
{
    const char *why = id_problem(id, idlen);
    if (why) return fail(err, errlen, name, line, "%s (got %zu)", why, idlen);
    int dup = find_item(items, id, idlen);
    if (dup >= 0)
        return fail(err, errlen, name, line, "item '%.*s' already defined on line %d",
                    (int)idlen, id, items->v[dup].line);
    if (capacity < 0 || capacity > CTL_CAPACITY_MAX)
        return fail(err, errlen, name, line, "capacity of '%.*s' must be 0..%lld",
                    (int)idlen, id, CTL_CAPACITY_MAX);
    if (items->n == items->cap) {
        size_t cap = items->cap ? items->cap * 2 : 64;
        ctl_item *v = realloc(items->v, cap * sizeof *v);
        if (!v) return fail(err, errlen, name, line, "out of memory");
        items->v = v;
        items->cap = cap;
    }
    ctl_item *it = &items->v[items->n];
    it->id = strndup(id, idlen);
    it->attrs = attrs && json_object_size(attrs)
        ? json_dumps(attrs, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    it->capacity = capacity;
    it->line = line;
    if (!it->id || (attrs && json_object_size(attrs) && !it->attrs)) {
        free(it->id);
        free(it->attrs);
        return fail(err, errlen, name, line, "out of memory");
    }
    items->n++;
    return 0;
}

/* ---- cells ------------------------------------------------------------ */

/* JSON's number grammar, so "007" or "1." stay strings. */
static int is_json_number(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n) return 0;
    if (s[i] == '0') i++;
    else if (s[i] >= '1' && s[i] <= '9') while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    else return 0;
    if (i < n && s[i] == '.') {
        size_t start = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == start) return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t start = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == start) return 0;
    }
    return i == n;
}

void *ctl_cell_json(const char *s, size_t n)
{
    if (n == 4 && memcmp(s, "true", 4) == 0) return json_true();
    if (n == 5 && memcmp(s, "false", 5) == 0) return json_false();
    if (is_json_number(s, n)) {
        json_error_t e;
        json_t *v = json_loadb(s, n, JSON_DECODE_ANY, &e);
        if (v) return v;     /* an integer too big for jansson stays a string */
    }
    return json_stringn_nocheck(s, n);
}

/* ---- CSV ----------------------------------------------------------------- */

typedef ctl_csv_cell cell;

typedef struct row {
    cell c[CSV_MAX_COLS];
    size_t n;
} row;

static void row_clear(row *r)
{
    for (size_t i = 0; i < r->n; i++) free(r->c[i].s);
    r->n = 0;
}

static size_t trim_end(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    return n;
}

/* Reads one cell starting at *p (line ends at end). Returns 0 or an error
 * message. Quoted cells may contain commas and "" for a quote, but not
 * line breaks. */
static const char *read_cell(const char **p, const char *end, cell *c)
{
    const char *s = *p;
    c->s = NULL;
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    if (s < end && *s == '"') {
        c->s = malloc((size_t)(end - s) + 1);
        if (!c->s) return "out of memory";
        c->n = 0;
        c->quoted = 1;
        for (s++;; s++) {
            if (s >= end) return "unterminated quoted field";
            if (*s == '"' && s + 1 < end && s[1] == '"') { c->s[c->n++] = '"'; s++; }
            else if (*s == '"') break;
            else c->s[c->n++] = *s;
        }
        c->s[c->n] = '\0';
        for (s++; s < end && (*s == ' ' || *s == '\t'); s++) {}
        if (s < end && *s != ',') return "text after a closing quote";
    } else {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *stop = comma ? comma : end;
        if (memchr(s, '"', (size_t)(stop - s))) return "a quote inside an unquoted field";
        c->n = trim_end(s, (size_t)(stop - s));
        c->s = strndup(s, c->n);
        c->quoted = 0;
        if (!c->s) return "out of memory";
        s = stop;
    }
    *p = s;
    return NULL;
}

static const char *split_row(const char *line, size_t len, row *r)
{
    const char *p = line, *end = line + len;
    for (;;) {
        if (r->n == CSV_MAX_COLS) return "too many columns (at most 64)";
        const char *why = read_cell(&p, end, &r->c[r->n]);
        r->n++;                   /* counted even on error: row_clear frees it */
        if (why) return why;
        if (p >= end) return NULL;
        p++;                      /* the comma */
    }
}

static int parse_header(const cell *h, size_t n, const char *name, char *err, size_t errlen)
{
    if (n < 2 || strcmp(h[0].s, "id") || strcmp(h[1].s, "capacity"))
        return fail(err, errlen, name, 1, "the header line must start with id,capacity");
    for (size_t i = 2; i < n; i++) {
        if (h[i].n == 0) return fail(err, errlen, name, 1, "column %zu has no name", i + 1);
        if (!utf8_ok(h[i].s, h[i].n))
            return fail(err, errlen, name, 1, "the name of column %zu is not valid UTF-8", i + 1);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(h[i].s, h[j].s))
                return fail(err, errlen, name, 1, "column '%s' appears twice", h[i].s);
    }
    return 0;
}

static int parse_capacity_text(const char *s, int64_t *out)
{
    uint64_t v;
    if (numtext_parse_u64(s, &v) < 0 || v > (uint64_t)CTL_CAPACITY_MAX) return -1;
    *out = (int64_t)v;
    return 0;
}

typedef struct items_csv { ctl_items *items; const char *name; } items_csv;

static int csv_header(void *data, const cell *h, size_t n, char *err, size_t errlen)
{
    return parse_header(h, n, ((items_csv *)data)->name, err, errlen);
}

static int csv_item(void *data, int line, const cell *h, size_t nh, const cell *c,
                    size_t n, char *err, size_t errlen)
{
    items_csv *ic = data;
    const char *name = ic->name;
    if (n != nh)
        return fail(err, errlen, name, line, "expected %zu fields like the header, got %zu", nh, n);
    int64_t cap;
    if (parse_capacity_text(c[1].s, &cap) < 0)
        return fail(err, errlen, name, line, "capacity '%s' is not an integer 0..%lld",
                    c[1].s, CTL_CAPACITY_MAX);
    json_t *attrs = json_object();
    if (!attrs) return fail(err, errlen, name, line, "out of memory");
    for (size_t i = 2; i < n; i++) {
        if (c[i].n == 0 && !c[i].quoted) continue;
        if (!utf8_ok(c[i].s, c[i].n)) {
            json_decref(attrs);
            return fail(err, errlen, name, line, "field %zu ('%s') is not valid UTF-8", i + 1, h[i].s);
        }
        json_t *v = c[i].quoted ? json_stringn_nocheck(c[i].s, c[i].n) : ctl_cell_json(c[i].s, c[i].n);
        json_object_set_new_nocheck(attrs, h[i].s, v);
    }
    int rc = add_item(ic->items, name, line, c[0].s, c[0].n, cap, attrs, err, errlen);
    json_decref(attrs);
    return rc;
}

/* One physical line (without its end): header, blank, or a row. */
static int csv_line(const ctl_csv_reader *rd, void *data, const char *name, int line,
                    const char *s, size_t n, row *header, char *err, size_t errlen)
{
    if (n > 0 && s[n - 1] == '\r') n--;
    if (trim_end(s, n) == 0) return line == 1 ? rd->header(data, header->c, 0, err, errlen) : 0;
    row r = { .n = 0 };
    const char *why = split_row(s, n, line == 1 ? header : &r);
    int rc;
    if (why) rc = fail(err, errlen, name, line, "%s", why);
    else if (line == 1) rc = rd->header(data, header->c, header->n, err, errlen);
    else rc = rd->row(data, line, header->c, header->n, r.c, r.n, err, errlen);
    row_clear(&r);
    return rc;
}

int ctl_csv_read(const char *name, const char *text, size_t len, const ctl_csv_reader *rd,
                 void *data, char *err, size_t errlen)
{
    row header = { .n = 0 };
    int rc = 0, line = 1;
    const char *p = text, *end = text + len;
    if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) p += 3;   /* a BOM */
    while (rc == 0 && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        if (memchr(p, '\0', (size_t)(stop - p)))
            rc = fail(err, errlen, name, line, "NUL byte in the file");
        else
            rc = csv_line(rd, data, name, line, p, (size_t)(stop - p), &header, err, errlen);
        p = stop + 1;
        line++;
    }
    row_clear(&header);
    return rc;
}

static int parse_csv(ctl_items *items, const char *name, const char *text,
                     size_t len, char *err, size_t errlen)
{
    static const ctl_csv_reader rd = { csv_header, csv_item };
    items_csv ic = { items, name };
    int rc = ctl_csv_read(name, text, len, &rd, &ic, err, errlen);
    if (rc == 0 && items->n == 0) rc = fail(err, errlen, name, 0, "no items");
    return rc;
}

/* ---- JSON -------------------------------------------------------------- */

/* Line of each top-level element (array values or object keys), in order.
 * The text is already known to be valid JSON. */
static int *element_lines(const char *t, size_t len, size_t want)
{
    int *lines = calloc(want ? want : 1, sizeof *lines);
    if (!lines) return NULL;
    int line = 1, depth = 0, in_str = 0, expect = 0;
    size_t k = 0;
    for (size_t i = 0; i < len && k < want; i++) {
        char ch = t[i];
        if (ch == '\n') line++;
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = 0;
            continue;
        }
        if (depth == 1 && expect && ch != ' ' && ch != '\t' && ch != '\r' &&
            ch != '\n' && ch != ',' && ch != ']' && ch != '}') {
            lines[k++] = line;
            expect = 0;
        }
        if (ch == '"') in_str = 1;
        else if (ch == '{' || ch == '[') { depth++; if (depth == 1) expect = 1; }
        else if (ch == '}' || ch == ']') depth--;
        else if (ch == ',' && depth == 1) expect = 1;
    }
    return lines;
}

static int json_capacity(json_t *v, int64_t *out)
{
    if (!json_is_integer(v)) return -1;
    *out = json_integer_value(v);
    return *out >= 0 && *out <= CTL_CAPACITY_MAX ? 0 : -1;
}

static int json_object_form(ctl_items *items, const char *name, json_t *doc,
                            const int *lines, char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    size_t k = 0;
    json_object_foreach(doc, key, v) {
        int line = lines[k++];
        int64_t cap;
        if (json_capacity(v, &cap) < 0)
            return fail(err, errlen, name, line, "capacity of '%s' must be an integer 0..%lld",
                        key, CTL_CAPACITY_MAX);
        if (add_item(items, name, line, key, strlen(key), cap, NULL, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int json_array_elem(ctl_items *items, const char *name, json_t *o, int line,
                           char *err, size_t errlen)
{
    if (!json_is_object(o))
        return fail(err, errlen, name, line, "each element must be an object "
                    "{\"id\":...,\"capacity\":...,\"attrs\":{...}}");
    json_t *id = json_object_get(o, "id"), *attrs = json_object_get(o, "attrs");
    int64_t cap;
    if (!json_is_string(id)) return fail(err, errlen, name, line, "\"id\" must be a string");
    if (json_capacity(json_object_get(o, "capacity"), &cap) < 0)
        return fail(err, errlen, name, line, "\"capacity\" of '%s' must be an integer 0..%lld",
                    json_string_value(id), CTL_CAPACITY_MAX);
    if (attrs && !json_is_object(attrs))
        return fail(err, errlen, name, line, "\"attrs\" of '%s' must be an object",
                    json_string_value(id));
    return add_item(items, name, line, json_string_value(id), json_string_length(id),
                    cap, attrs, err, errlen);
}

static int parse_json(ctl_items *items, const char *name, const char *text,
                      size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc) return fail(err, errlen, name, je.line, "%s", je.text);
    size_t n = json_is_array(doc) ? json_array_size(doc) : json_object_size(doc);
    int *lines = element_lines(text, len, n);
    int rc = lines ? 0 : fail(err, errlen, name, 0, "out of memory");
    if (rc == 0 && json_is_object(doc))
        rc = json_object_form(items, name, doc, lines, err, errlen);
    for (size_t i = 0; rc == 0 && json_is_array(doc) && i < n; i++)
        rc = json_array_elem(items, name, json_array_get(doc, i), lines[i], err, errlen);
    if (rc == 0 && items->n == 0) rc = fail(err, errlen, name, 0, "no items");
    free(lines);
    json_decref(doc);
    return rc;
}

/* ---- entry points ---------------------------------------------------- */

int ctl_items_parse(ctl_items *out, const char *name, const char *text,
                    size_t len, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t i = 0;
    while (i < len && strchr(" \t\r\n", text[i]) && text[i]) i++;
    int json = i < len && (text[i] == '{' || text[i] == '[');
    int rc = json ? parse_json(out, name, text, len, err, errlen)
                  : parse_csv(out, name, text, len, err, errlen);
    if (rc < 0) ctl_items_free(out);
    return rc;
}

int ctl_items_load(ctl_items *out, const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    memset(out, 0, sizeof *out);
    char *text = textfile_read(path, &len);
    if (!text) return fail(err, errlen, path, 0, "cannot read: %s", strerror(errno));
    int rc = ctl_items_parse(out, path, text, len, err, errlen);
    free(text);
    return rc;
}
