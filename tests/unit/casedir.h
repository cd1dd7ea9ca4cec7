/* casedir.h -- every case file of a data directory, sorted by name: the
 * data-driven tests (engine scenarios, apply_txn, the log replay) read all
 * of them, however many there are, or fail. A fixed array that stopped at
 * 64 or 256 files once left the cases past it untested without a word.
 *
 * Header-only (static functions), so the core's unit tests, which link
 * libcore.a and libc alone, can use it too.
 */
#ifndef ALLOCD_TESTS_CASEDIR_H
#define ALLOCD_TESTS_CASEDIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int casedir__by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void casedir_free(char **paths, size_t n)
{
    for (size_t i = 0; paths && i < n; i++) free(paths[i]);
    free(paths);
}

/* The paths "dir/NAME" of the files whose names end in suffix, sorted;
 * *n is their number. NULL (after saying why on stderr) when the
 * directory cannot be read, memory runs out or no file matches. */
static char **casedir_list(const char *dir, const char *suffix, size_t *n)
{
    DIR *d = opendir(dir);
    char **paths = NULL;
    size_t cap = 0, slen = strlen(suffix);
    *n = 0;
    if (!d) { fprintf(stderr, "casedir: cannot open %s\n", dir); return NULL; }
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len <= slen || strcmp(de->d_name + len - slen, suffix)) continue;
        if (*n == cap) {
            char **np = realloc(paths, (cap = cap ? cap * 2 : 32) * sizeof *np);
            if (!np) goto fail;
            paths = np;
        }
        if (!(paths[*n] = malloc(strlen(dir) + len + 2))) goto fail;
        sprintf(paths[(*n)++], "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (*n == 0) {
        fprintf(stderr, "casedir: no *%s file in %s\n", suffix, dir);
        free(paths);
        return NULL;
    }
    qsort(paths, *n, sizeof *paths, casedir__by_name);
    return paths;
fail:
    fprintf(stderr, "casedir: out of memory listing %s\n", dir);
    closedir(d);
    casedir_free(paths, *n);
    *n = 0;
    return NULL;
}

#endif
