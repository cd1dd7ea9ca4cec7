/* textfile.h -- a whole file read into memory, for the config scanner and
 * the operator's input files (allocctl's items and slots).
 */
#ifndef ALLOCD_TEXTFILE_H
#define ALLOCD_TEXTFILE_H

#include <stddef.h>

/* The file's bytes, malloc'd and NUL-terminated (the caller frees; len, if
 * not NULL, gets their count, which a NUL inside does not cut), or NULL
 * with errno set (fopen's, EIO for a read error, ENOMEM). */
char *textfile_read(const char *path, size_t *len);

#endif
