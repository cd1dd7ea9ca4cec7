/* assert.h -- the core's assertions: stop the process before a broken
 * invariant is written anywhere.
 *
 * An assertion states something the code makes true; when it is false the
 * state in memory is corrupt (units given twice, a bed shared past its
 * beds), and stopping is the only safe thing left: the shell has not yet
 * written that state, and a restart reloads the last good one.
 *
 *   ALLOC_ASSERT(cond)        always on, in release builds too. For O(1)
 *                             checks on paths that change state; they cost
 *                             a compare and a predicted branch.
 *   ALLOC_DEBUG_ASSERT(cond)  only when ALLOCD_DEBUG is set (`make asan`):
 *                             for checks that walk a structure. Otherwise
 *                             cond is not evaluated (but still compiled,
 *                             so it cannot rot).
 *   ALLOC_PANIC(msg)          stops naming msg (a string that need not be
 *                             a literal: a description of what broke).
 *
 * Neither depends on NDEBUG: a build with -DNDEBUG still checks, it only
 * loses the message. The core may not do I/O (tools/check-layers.sh), so
 * the message is printed by the C library's own assertion failure routine,
 * the one assert() calls; where that is not known to exist (a libc other
 * than glibc, or NDEBUG hiding its declaration) the process just aborts.
 */
#ifndef ALLOCD_CORE_ASSERT_H
#define ALLOCD_CORE_ASSERT_H

#include <assert.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define ALLOC_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define ALLOC_LIKELY(x) (!!(x))
#endif

#if defined(__GLIBC__) && !defined(NDEBUG)
#define ALLOC_PANIC(msg) __assert_fail((msg), __FILE__, __LINE__, __func__)
#else
#define ALLOC_PANIC(msg) abort()
#endif

#define ALLOC_ASSERT(cond) \
    (ALLOC_LIKELY(cond) ? (void)0 : ALLOC_PANIC("invariant: " #cond))

/* ALLOC_DEBUG is 1 or 0, for `if (ALLOC_DEBUG)`: debug-only code that is
 * still compiled (and type-checked) in release builds, then dropped. */
#if defined(ALLOCD_DEBUG) && ALLOCD_DEBUG
#define ALLOC_DEBUG 1
#define ALLOC_DEBUG_ASSERT(cond) ALLOC_ASSERT(cond)
#else
#define ALLOC_DEBUG 0
#define ALLOC_DEBUG_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
