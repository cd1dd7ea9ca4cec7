/* fuzz_replay.h -- main() for a fuzz target built without libFuzzer.
 *
 * Why: the fuzz targets' checks should guard every `make test`, not only
 * the nights someone runs `make fuzz`. Built without -DFUZZ_LIBFUZZER, a
 * target becomes a cmocka test (build/tests/unit/test_fuzz_replay_NAME, so
 * tests/run.sh picks it up) that feeds every file of
 * tests/fuzz/corpus/NAME/ and tests/fuzz/regressions/NAME/ to
 * LLVMFuzzerTestOneInput. A failed check aborts; the file being replayed is
 * printed first. Arguments, when given, replace the directories (files or
 * directories), e.g. to replay one crash file:
 *   build/tests/unit/test_fuzz_replay_request crash-1234
 */
#ifndef ALLOCD_FUZZ_REPLAY_H
#define ALLOCD_FUZZ_REPLAY_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

static const char *replay_target;
static char **replay_args;
static int replay_nargs;
static char replay_current[1024];

static void replay_on_abort(int sig)
{
    static const char msg[] = "fuzz replay: failed on input ";
    if (write(2, msg, sizeof msg - 1) < 0 || write(2, replay_current, strlen(replay_current)) < 0 ||
        write(2, "\n", 1) < 0) {}
    signal(sig, SIG_DFL);
    raise(sig);
}

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap * 2);
            if (!b) break;
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return 0;
    snprintf(replay_current, sizeof replay_current, "%s", path);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 1;
}

static int replay_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir (sorted, so failures repeat in order). */
static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) return 0;
    if (!S_ISDIR(st.st_mode)) return replay_file(path);
    DIR *d = opendir(path);
    if (!d) return 0;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.txt")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) break;
            names = p;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n], len, "%s/%s", path, e->d_name);
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, replay_cmp);
    int files = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat fs;
        if (stat(names[i], &fs) == 0 && S_ISREG(fs.st_mode)) files += replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return files;
}

static void test_replay(void **state)
{
    signal(SIGABRT, replay_on_abort);
    int files = 0;
    if (replay_nargs > 0) {
        for (int i = 0; i < replay_nargs; i++) files += replay_path(replay_args[i]);
    } else {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", replay_target);
        int corpus = replay_path(dir);
        if (corpus == 0) fail_msg("no seed corpus in %s (run from the repository root)", dir);
        snprintf(dir, sizeof dir, "tests/fuzz/regressions/%s", replay_target);
        files = corpus + replay_path(dir);
    }
    printf("fuzz replay %s: %d inputs passed every check\n", replay_target, files);
    assert_true(files > 0);
}

#define FUZZ_REPLAY_MAIN(name)                                               \
    int main(int argc, char **argv)                                          \
    {                                                                        \
        replay_target = name;                                                \
        replay_args = argv + 1;                                              \
        replay_nargs = argc - 1;                                             \
        const struct CMUnitTest tests[] = { cmocka_unit_test(test_replay) }; \
        return cmocka_run_group_tests(tests, NULL, NULL);                    \
    }

#endif
