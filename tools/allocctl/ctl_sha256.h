/* ctl_sha256.h -- SHA-256 as lowercase hex (ctl_sha256.c). */
#ifndef ALLOCD_CTL_SHA256_H
#define ALLOCD_CTL_SHA256_H

#include <stddef.h>

/* out: 64 hex digits and a NUL. */
void ctl_sha256_hex(const void *data, size_t len, char out[65]);

#endif
