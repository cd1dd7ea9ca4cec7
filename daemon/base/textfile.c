/* textfile.c -- see textfile.h. */
#include "base/textfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

char *textfile_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) { free(buf); buf = NULL; break; }
        buf = bigger;
        cap *= 2;
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf) { errno = ENOMEM; return NULL; }
    if (failed) { free(buf); errno = EIO; return NULL; }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}
