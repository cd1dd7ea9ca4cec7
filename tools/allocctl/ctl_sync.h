/* ctl_sync.h -- a synchronous (blocking) Redis connection for allocctl,
 * from the same redis_target the daemon uses.
 *
 * The daemon talks to Redis through its own libuv adapter (redis_conn);
 * operator tools run one command after another and want nothing more than
 * hiredis's blocking API -- but with deadlines (a tool must never hang on a
 * dead host) and with AUTH from the URL, exactly as the daemon does it.
 */
#ifndef ALLOCD_CTL_SYNC_H
#define ALLOCD_CTL_SYNC_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "base/redis_url.h"

/* Connects within connect_ms, sends AUTH when the target has a password
 * (AUTH user password with an ACL user, else AUTH password) and sets the
 * per-command timeout to cmd_ms. Returns the context, or NULL with a
 * message naming the server (never the password) in err. */
redisContext *ctl_connect(const redis_target *t, int connect_ms, int cmd_ms,
                          char *err, size_t errlen);

/* A reply's text for error messages: the error string of an error reply,
 * the context's error when r is NULL, else NULL (not an error). */
const char *ctl_reply_error(const redisContext *c, const redisReply *r);

/* An integer reply, or a string reply holding an integer (HGET of a
 * counter), in *v: 0; -1 for anything else, nil and NULL included. */
int ctl_reply_to_int(const redisReply *r, int64_t *v);
/* The same, 0 for anything else (a counter not yet set). */
int64_t ctl_reply_int(const redisReply *r);

#endif
