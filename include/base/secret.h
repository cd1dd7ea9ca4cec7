/* secret.h -- the Redis password kept out of the config file: read from a
 * file (`redis_password_file`, e.g. a systemd credential) or from the
 * environment (ALLOCD_REDIS_PASSWORD), and the ACL user (`redis_user`).
 * The metrics token's file (`metrics_token_file`) is read the same way.
 *
 * Used by the config loader, so allocd and allocctl resolve credentials
 * the same way. No message ever contains a password, only where it was
 * to come from.
 */
#ifndef ALLOCD_SECRET_H
#define ALLOCD_SECRET_H

#include <stddef.h>

#include "base/redis_url.h"

#define SECRET_MAX 256           /* redis_target.password */
#define SECRET_ENV "ALLOCD_REDIS_PASSWORD"

/* Reads a password file: its bytes, without one trailing "\n" or "\r\n".
 * Refuses an empty file, a NUL or a line break inside, or more than
 * cap - 1 bytes. Returns 0, or -1 with "PATH: why" in err. */
int secret_read_file(const char *path, char *out, size_t cap, char *err, size_t errlen);

/* The path a secret file setting (`name`: redis_password_file,
 * metrics_token_file) holds: absolute as written; relative ones are
 * systemd credentials, under $CREDENTIALS_DIRECTORY (set by
 * LoadCredential=). Returns 0, or -1 with a message naming the setting. */
int secret_path(const char *name, const char *setting, char *out, size_t cap, char *err, size_t errlen);

/* Applies user and password to t, in this order of precedence: the
 * password from $ALLOCD_REDIS_PASSWORD, else from password_file (when
 * set), else the URL's; the user from `user` when set, else the URL's.
 * A password file together with a password in the URL is refused (which
 * one was meant?). Returns 0, or -1 with a message in err. */
int secret_apply(redis_target *t, const char *user, const char *password_file,
                 char *err, size_t errlen);

#endif
