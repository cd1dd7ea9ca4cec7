/* test_install.c -- `make install` puts every file where it belongs,
 * `make uninstall` takes them away again (keeping the edited config), and
 * the installed systemd units (allocd.service, allocd@.service) pass
 * `systemd-analyze verify` and rate at most 2.0 in `systemd-analyze
 * security`; PREFIX=/usr puts the config (0640) under /etc and the binary
 * looks there; `make deb` builds a package lintian finds no error in and
 * dpkg installs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "itest.h"

static int exists(const char *dir, const char *rel)
{
    char p[1024];
    snprintf(p, sizeof p, "%s%s", dir, rel);
    struct stat st;
    return stat(p, &st) == 0;
}

static void test_install_and_uninstall(void **state)
{
    char dir[400];
    assert_int_equal(proc_temp_dir(dir, sizeof dir, "allocd-install"), 0);
    assert_int_equal(itest_sh("make -s install BUILD=%s DESTDIR=%s >/dev/null", harness_build_dir(), dir), 0);
    const char *files[] = {
        "/usr/local/bin/allocd", "/usr/local/etc/allocd/allocd.conf",
        "/usr/local/lib/systemd/system/allocd.service",
        "/usr/local/lib/systemd/system/allocd-archive.service",
        "/usr/local/share/man/man8/allocd.8", "/usr/local/share/man/man5/allocd.conf.5",
        "/usr/local/share/doc/allocd/README.md", "/usr/local/share/doc/allocd/PROTOCOL.md",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!exists(dir, files[i])) fail_msg("not installed: %s", files[i]);
    /* the config may name a password file or hold a URL password: 0640 */
    assert_int_equal(itest_sh("test \"$(stat -c %%a %s/usr/local/etc/allocd/allocd.conf)\" = 640", dir), 0);
    if (access("tools/allocctl/main.c", F_OK) == 0) {
        assert_true(exists(dir, "/usr/local/bin/allocctl"));
        if (access("man/allocctl.1", F_OK) == 0) assert_true(exists(dir, "/usr/local/share/man/man1/allocctl.1"));
    }
    /* a second install keeps the operator's config */
    assert_int_equal(itest_sh("echo '# edited' >> %s/usr/local/etc/allocd/allocd.conf", dir), 0);
    assert_int_equal(itest_sh("make -s install BUILD=%s DESTDIR=%s >/dev/null", harness_build_dir(), dir), 0);
    assert_int_equal(itest_sh("grep -q edited %s/usr/local/etc/allocd/allocd.conf", dir), 0);
    assert_true(exists(dir, "/usr/local/etc/allocd/allocd.conf.new"));
    assert_int_equal(itest_sh("make -s uninstall BUILD=%s DESTDIR=%s >/dev/null", harness_build_dir(), dir), 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (i != 1 && exists(dir, files[i])) fail_msg("not uninstalled: %s", files[i]);
    assert_true(exists(dir, "/usr/local/etc/allocd/allocd.conf"));
    itest_sh("rm -rf %s", dir);
}

static void test_installed_unit_and_config(void **state)
{
    char dir[400];
    assert_int_equal(proc_temp_dir(dir, sizeof dir, "allocd-unit"), 0);
    assert_int_equal(itest_sh("make -s install BUILD=%s PREFIX=%s/usr SYSCONFDIR=%s/etc >/dev/null", harness_build_dir(), dir, dir), 0);
    assert_int_equal(itest_sh("%s/usr/bin/allocd -c %s/etc/allocd/allocd.conf --check-config >/dev/null", dir, dir), 0);
    /* the config (0640) reaches the dynamic user as a credential */
    assert_int_equal(itest_sh("grep -q 'LoadCredential=allocd.conf:%s/etc/allocd/allocd.conf' %s/usr/lib/systemd/system/allocd.service",
                        dir, dir), 0);
    assert_int_equal(itest_sh("grep -q 'ExecStart=%s/usr/bin/allocd -c ${CREDENTIALS_DIRECTORY}/allocd.conf$' "
                              "%s/usr/lib/systemd/system/allocd.service", dir, dir), 0);
    assert_int_equal(itest_sh("grep -q 'LimitNOFILE=' %s/usr/lib/systemd/system/allocd.service", dir), 0);
    assert_int_equal(itest_sh("grep -q 'LoadCredential=allocd.conf:%s/etc/allocd/%%i.conf' %s/usr/lib/systemd/system/allocd@.service",
                        dir, dir), 0);
    assert_int_equal(itest_sh("test \"$(stat -c %%a %s/etc/allocd/allocd.conf)\" = 640", dir), 0);
    /* the default config path compiled in follows SYSCONFDIR */
    assert_int_equal(itest_sh("%s/usr/bin/allocd --help | grep -q '%s/etc/allocd/allocd.conf'", dir, dir), 0);
    if (itest_sh("command -v systemd-analyze >/dev/null") != 0) {
        itest_sh("rm -rf %s", dir);
        itest_sh("make -s all BUILD=%s >/dev/null", harness_build_dir());
        skip();
    }
    /* the template, as instance web with its own config */
    assert_int_equal(itest_sh("cp %s/etc/allocd/allocd.conf %s/etc/allocd/web.conf && "
                              "ln -s allocd@.service %s/usr/lib/systemd/system/allocd@web.service", dir, dir, dir), 0);
    assert_int_equal(itest_sh("test -z \"$(systemd-analyze verify --man=no %s/usr/lib/systemd/system/allocd@web.service 2>&1)\"", dir), 0);
    /* verify prints nothing and exits 0 for a clean unit */
    assert_int_equal(itest_sh("test -z \"$(systemd-analyze verify --man=no %s/usr/lib/systemd/system/allocd.service 2>&1)\"", dir), 0);
    /* --threshold=20: exit non-zero when the exposure is above 2.0 */
    int rc = itest_sh("systemd-analyze security --offline=yes --threshold=20 %s/usr/lib/systemd/system/allocd.service "
                "| tail -n1", dir);
    assert_int_equal(rc, 0);
    assert_int_equal(itest_sh("systemd-analyze security --offline=yes --threshold=20 %s/usr/lib/systemd/system/allocd.service "
                        ">/dev/null 2>&1", dir), 0);
    /* the real-time drop-in (DEPLOYMENT.md) is installed as an example and,
     * put in place, keeps the unit clean and under the same threshold; a
     * bad line added to it is reported, so verify did read it */
    assert_int_equal(itest_sh("mkdir -p %s/usr/lib/systemd/system/allocd.service.d && "
                              "cp %s/usr/share/doc/allocd/examples/allocd-realtime.conf %s/usr/lib/systemd/system/allocd.service.d/",
                              dir, dir, dir), 0);
    /* what it sets: verify and the exposure score would pass an empty one */
    assert_int_equal(itest_sh("f=%s/usr/lib/systemd/system/allocd.service.d/allocd-realtime.conf && "
                              "grep -qx '\\[Service\\]' $f && grep -qx 'CPUSchedulingPolicy=fifo' $f && "
                              "grep -qx 'CPUSchedulingPriority=10' $f && grep -qx 'CPUSchedulingResetOnFork=yes' $f",
                              dir), 0);
    assert_int_equal(itest_sh("test -z \"$(systemd-analyze verify --man=no %s/usr/lib/systemd/system/allocd.service 2>&1)\"", dir), 0);
    assert_int_equal(itest_sh("systemd-analyze security --offline=yes --threshold=20 %s/usr/lib/systemd/system/allocd.service "
                        ">/dev/null 2>&1", dir), 0);
    assert_int_equal(itest_sh("echo CPUSchedulingPolicy=bogus >> %s/usr/lib/systemd/system/allocd.service.d/allocd-realtime.conf && "
                              "systemd-analyze verify --man=no %s/usr/lib/systemd/system/allocd.service 2>&1 "
                              "| grep -q 'allocd-realtime.conf'", dir, dir), 0);
    assert_int_equal(itest_sh("rm -r %s/usr/lib/systemd/system/allocd.service.d", dir), 0);
    /* the archive's unit: as clean and as tight (docs/ARCHIVE.md) */
    assert_int_equal(itest_sh("grep -q 'LoadCredential=allocd.conf:%s/etc/allocd/allocd.conf' "
                              "%s/usr/lib/systemd/system/allocd-archive.service", dir, dir), 0);
    assert_int_equal(itest_sh("grep -q 'ExecStart=%s/usr/bin/allocctl -c ${CREDENTIALS_DIRECTORY}/allocd.conf archive --follow' "
                              "%s/usr/lib/systemd/system/allocd-archive.service", dir, dir), 0);
    assert_int_equal(itest_sh("test -z \"$(systemd-analyze verify --man=no %s/usr/lib/systemd/system/allocd-archive.service 2>&1)\"", dir), 0);
    assert_int_equal(itest_sh("systemd-analyze security --offline=yes --threshold=20 %s/usr/lib/systemd/system/allocd-archive.service "
                        ">/dev/null 2>&1", dir), 0);
    itest_sh("rm -rf %s", dir);
    /* put back the build's own default config path */
    assert_int_equal(itest_sh("make -s all BUILD=%s >/dev/null", harness_build_dir()), 0);
}

/* make deb (make install PREFIX=/usr): lintian finds no error, dpkg
 * installs it (into a scratch root), the config is a conffile of mode 0640
 * under /etc (not /usr/etc) and the binary looks for it there. */
static void test_deb(void **state)
{
    if (itest_sh("command -v dpkg-deb >/dev/null") != 0) skip();
    char dir[400];
    assert_int_equal(proc_temp_dir(dir, sizeof dir, "allocd-deb"), 0);
    /* lintian leaves files in $TMPDIR: give it one that goes with dir */
    int rc = itest_sh("mkdir -p %s/tmp && TMPDIR=%s/tmp make -s deb BUILD=%s > %s/deb.log 2>&1", dir, dir, harness_build_dir(), dir);
    if (rc != 0) itest_sh("cat %s/deb.log >&2", dir);
    assert_int_equal(rc, 0);
    if (itest_sh("command -v lintian >/dev/null") == 0)
        assert_int_equal(itest_sh("! grep -q '^E:' %s/deb.log", dir), 0);
    else
        fprintf(stderr, "note: lintian not installed (make deb-deps): package not linted\n");
    assert_int_equal(itest_sh("mkdir -p %s/root/var/lib/dpkg/info %s/root/var/lib/dpkg/updates && "
                              "touch %s/root/var/lib/dpkg/status && "
                              "dpkg --root=%s/root --force-depends --force-script-chrootless -i %s/deb/allocd_*.deb >/dev/null 2>&1",
                              dir, dir, dir, dir, harness_build_dir()), 0);
    assert_int_equal(itest_sh("test \"$(stat -c %%a %s/root/etc/allocd/allocd.conf)\" = 640", dir), 0);
    assert_int_equal(itest_sh("grep -qx allocd.conf %s/root/var/lib/dpkg/info/allocd.conffiles || "
                              "grep -qx /etc/allocd/allocd.conf %s/root/var/lib/dpkg/info/allocd.conffiles", dir, dir), 0);
    assert_int_equal(itest_sh("test -f %s/root/lib/systemd/system/allocd@.service", dir), 0);
    assert_int_equal(itest_sh("test ! -e %s/root/usr/etc", dir), 0);
    assert_int_equal(itest_sh("grep -q 'LoadCredential=allocd.conf:/etc/allocd/allocd.conf' %s/root/lib/systemd/system/allocd.service && "
                              "grep -q 'ExecStart=/usr/bin/allocd ' %s/root/lib/systemd/system/allocd.service", dir, dir), 0);
    assert_int_equal(itest_sh("%s/root/usr/bin/allocd --help | grep -q ' /etc/allocd/allocd.conf'", dir), 0);
    itest_sh("rm -rf %s", dir);
    assert_int_equal(itest_sh("make -s all BUILD=%s >/dev/null", harness_build_dir()), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_install_and_uninstall),
        cmocka_unit_test(test_installed_unit_and_config),
        cmocka_unit_test(test_deb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
