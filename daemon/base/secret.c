/* secret.c -- see secret.h: credentials for Redis from a file or the
 * environment, so the config file (often world-readable, often in version
 * control) and the command line (visible in ps) need not carry a password.
 *
 * systemd's LoadCredential=NAME:/path copies a root-only file to
 * $CREDENTIALS_DIRECTORY/NAME, readable by the service alone; a relative
 * redis_password_file is looked up there, so one config works with it.
 */
#include "base/secret.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int secret_read_file(const char *path, char *out, size_t cap, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    size_t n = fread(out, 1, cap, f);
    int bad = ferror(f);
    fclose(f);
    const char *why = NULL;
    char too_long[48];
    snprintf(too_long, sizeof too_long, "too long (at most %zu bytes)", cap - 1);
    if (bad) why = "cannot read";
    else if (n == cap) why = too_long;
    if (!why) {
        if (n && out[n - 1] == '\n') n--;
        if (n && out[n - 1] == '\r') n--;
        out[n] = '\0';
        if (n == 0) why = "is empty";
        else if (strlen(out) != n) why = "holds a NUL byte";
        else if (strpbrk(out, "\r\n")) why = "holds more than one line";
    }
    if (!why) return 0;
    memset(out, 0, cap);
    snprintf(err, errlen, "%s: %s", path, why);
    return -1;
}

int secret_path(const char *name, const char *setting, char *out, size_t cap, char *err, size_t errlen)
{
    int n;
    if (setting[0] == '/') n = snprintf(out, cap, "%s", setting);
    else {
        const char *dir = getenv("CREDENTIALS_DIRECTORY");
        if (!dir || !*dir) {
            snprintf(err, errlen, "%s '%s' is relative: that names a systemd "
                     "credential (LoadCredential=), but $CREDENTIALS_DIRECTORY is not set; "
                     "write an absolute path", name, setting);
            return -1;
        }
        n = snprintf(out, cap, "%s/%s", dir, setting);
    }
    if (n < 0 || (size_t)n >= cap) {
        snprintf(err, errlen, "%s: path too long", name);
        return -1;
    }
    return 0;
}

int secret_apply(redis_target *t, const char *user, const char *password_file,
                 char *err, size_t errlen)
{
    if (user && *user) {
        if (strlen(user) >= sizeof t->user) {
            snprintf(err, errlen, "redis_user is too long");
            return -1;
        }
        snprintf(t->user, sizeof t->user, "%s", user);
    }
    const char *env = getenv(SECRET_ENV);
    if (env && *env) {
        if (strlen(env) >= sizeof t->password) {
            snprintf(err, errlen, "$%s is too long for a password", SECRET_ENV);
            return -1;
        }
        snprintf(t->password, sizeof t->password, "%s", env);
        return 0;
    }
    if (!password_file || !*password_file) return 0;
    if (t->password[0]) {
        snprintf(err, errlen, "redis_password_file is set and the redis URL carries a password "
                 "too: keep only the file");
        return -1;
    }
    char path[4096], why[4200];
    if (secret_path("redis_password_file", password_file, path, sizeof path, err, errlen) < 0) return -1;
    if (secret_read_file(path, t->password, sizeof t->password, why, sizeof why) < 0) {
        snprintf(err, errlen, "redis_password_file: %s", why);
        return -1;
    }
    return 0;
}
