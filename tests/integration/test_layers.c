/* test_layers.c -- tools/check-layers.sh refuses what it is there to
 * refuse: run on a small tree of its own (a copy of the script beside a
 * daemon/ of a few files), it passes a clean tree, names file:line for a
 * core file that includes hiredis or a wire file that includes the worker,
 * and fails a libcore.a that calls time(). Without this the purity check
 * could stop working and every build would still pass. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"

typedef struct tree {
    char dir[400];
    char out[480];
} tree;

static void write_file(const tree *t, const char *path, const char *text)
{
    char full[800];
    snprintf(full, sizeof full, "%s/%s", t->dir, path);
    FILE *f = fopen(full, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The script's exit status on the tree (args: "" or "--lib <archive>"). */
static int check(const tree *t, const char *args)
{
    return itest_sh("cd %s && TMPDIR=%s sh tools/check-layers.sh %s > %s 2>&1",
                    t->dir, t->dir, args, t->out);
}

static int output_has(const tree *t, const char *needle)
{
    return itest_sh("grep -qF '%s' %s", needle, t->out) == 0;
}

static void tree_init(tree *t)
{
    assert_int_equal(proc_temp_dir(t->dir, sizeof t->dir, "layers"), 0);
    snprintf(t->out, sizeof t->out, "%s/out.txt", t->dir);
    assert_int_equal(itest_sh("mkdir -p %s/tools %s/daemon/core %s/daemon/wire %s/include/core && "
                              "cp tools/check-layers.sh %s/tools/", t->dir, t->dir, t->dir, t->dir, t->dir), 0);
    write_file(t, "daemon/core/ok.c", "#include \"core/ok.h\"\n#include <string.h>\n"
                                      "int ok_len(const char *s);\nint ok_len(const char *s) { return (int)strlen(s); }\n");
    write_file(t, "include/core/ok.h", "#include <stddef.h>\n");
    write_file(t, "daemon/wire/w.c", "#include \"core/ok.h\"\n#include <jansson.h>\n");
}

static void test_includes(void **state)
{
    tree t;
    tree_init(&t);
    assert_int_equal(check(&t, ""), 0);
    write_file(&t, "daemon/core/bad.c", "#include <string.h>\n#include <hiredis/hiredis.h>\n");
    assert_int_equal(check(&t, ""), 1);
    assert_true(output_has(&t, "daemon/core/bad.c:2: the core may include only the core"));
    itest_sh("rm %s/daemon/core/bad.c", t.dir);
    write_file(&t, "daemon/wire/up.c", "#include \"worker/batch_worker.h\"\n");
    assert_int_equal(check(&t, ""), 1);
    assert_true(output_has(&t, "daemon/wire/up.c:1: wire may not include \"worker/batch_worker.h\""));
    proc_remove_dir(t.dir);
}

static void test_libcore_calls(void **state)
{
    tree t;
    tree_init(&t);
    assert_int_equal(itest_sh("cd %s && cc -c daemon/core/ok.c -Iinclude -o ok.o && ar rcs pure.a ok.o", t.dir), 0);
    assert_int_equal(check(&t, "--lib pure.a"), 0);
    write_file(&t, "clock.c", "#include <time.h>\nlong now(void);\nlong now(void) { return (long)time(NULL); }\n");
    assert_int_equal(itest_sh("cd %s && cc -c clock.c -o clock.o && ar rcs clock.a ok.o clock.o", t.dir), 0);
    assert_int_equal(check(&t, "--lib clock.a"), 1);
    assert_true(output_has(&t, "clock.a calls time"));
    proc_remove_dir(t.dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_includes),
        cmocka_unit_test(test_libcore_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
