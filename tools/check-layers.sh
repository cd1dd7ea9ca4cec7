#!/bin/sh
# The layers of daemon/ and what each may include (docs/DESIGN.md, "Map").
# A layer's files may include the headers of the layers named for it (as
# "layer/name.h"), a private header beside them in daemon/<layer>/ (as
# "name.h", like core/engine_state.h) and, in angle brackets, the C library plus the outside
# libraries named for it. The core may include only the core and a short
# list of C library headers: no I/O, no clock, no Redis, no JSON library.
#
#   tools/check-layers.sh            check every file's includes
#   tools/check-layers.sh --lib A    also check that archive A (libcore.a)
#                                    calls nothing outside the C library's
#                                    pure functions (nm: its undefined symbols)
# Exits non-zero, naming file:line and the rule, on the first kind of breach.
cd "$(dirname "$0")/.." || exit 2

# layer: quoted-include layers allowed
layers_of() {
    case $1 in
        core)    echo "core" ;;
        wire)    echo "core wire" ;;
        base)    echo "core base" ;;
        redis)   echo "core base redis" ;;
        worker)  echo "core base wire redis worker" ;;
        service) echo "core base wire redis worker service" ;;
    esac
}
# layer: outside libraries allowed in angle brackets (a header path prefix)
libs_of() {
    case $1 in
        core)    echo "" ;;
        wire)    echo "jansson.h" ;;
        base)    echo "libconfig.h" ;;
        redis)   echo "hiredis/ uv.h" ;;
        worker)  echo "hiredis/ uv.h" ;;
        service) echo "hiredis/ uv.h jansson.h microhttpd.h" ;;
    esac
}
OUTSIDE="hiredis/ uv.h jansson.h libconfig.h cmocka.h libpq-fe.h microhttpd.h"
CORE_LIBC="assert.h ctype.h errno.h inttypes.h limits.h math.h stdalign.h stdarg.h stdbool.h stddef.h stdint.h stdio.h stdlib.h string.h"

bad=0
complain() { echo "check-layers: $1" >&2; bad=1; }

for layer in core wire base redis worker service; do
    allowed=$(layers_of $layer); libs=$(libs_of $layer)
    for f in daemon/$layer/*.c daemon/$layer/*.h include/$layer/*.h; do
        [ -f "$f" ] || continue
        grep -n '^[[:space:]]*#[[:space:]]*include' "$f" | while IFS= read -r line; do
            n=${line%%:*}; inc=${line#*:}
            case $inc in
            *'"'*)
                h=${inc#*\"}; h=${h%%\"*}; dir=${h%%/*}     # no fork per line: it ran on every make
                if [ "$dir" = "$h" ]; then     # a module's private header, beside it
                    [ -f "daemon/$layer/$h" ] ||
                        echo "$f:$n: \"$h\" names no layer (write \"layer/$h\", or keep a private header in daemon/$layer/)"
                    continue
                fi
                case " $allowed " in *" $dir "*) ;; *)
                    echo "$f:$n: $layer may not include \"$h\" (allowed: $allowed)";; esac ;;
            *'<'*)
                h=${inc#*<}; h=${h%%>*}
                case ${h%%/*} in core|wire|base|redis|worker|service|allocctl|proc)
                    echo "$f:$n: include the project's own header as \"$h\", not <$h>"; continue;; esac
                if [ $layer = core ]; then
                    case " $CORE_LIBC " in *" $h "*) ;; *)
                        echo "$f:$n: the core may include only the core and pure C library headers, not <$h>";; esac
                    continue
                fi
                for o in $OUTSIDE; do
                    case $h in "$o"*)
                        ok=0; for l in $libs; do case $h in "$l"*) ok=1;; esac; done
                        [ $ok = 1 ] || echo "$f:$n: $layer may not include <$h> (its libraries: ${libs:-none})";;
                    esac
                done ;;
            esac
        done
    done
done > "${TMPDIR:-/tmp}/check-layers.$$"
if [ -s "${TMPDIR:-/tmp}/check-layers.$$" ]; then
    sed 's/^/check-layers: /' "${TMPDIR:-/tmp}/check-layers.$$" >&2; bad=1
fi
rm -f "${TMPDIR:-/tmp}/check-layers.$$"

# The engine's files stand in layers too (docs/DESIGN.md, engine.c): a file may
# include the private header of its own module or of a lower rank only, so
# no engine file calls back up (engine_state.c, rank 0, includes none).
engine_rank() {
    case $1 in
        state) echo 0 ;; elig|hold) echo 1 ;; stock|swap) echo 2 ;; rooms|staff) echo 3 ;;
        groups) echo 4 ;; ops|slots) echo 5 ;; wait) echo 6 ;;
        check|view|load|prefetch|names) echo 7 ;; *) echo 8 ;;   # 8: engine.c
    esac
}
for f in daemon/core/engine*.c daemon/core/engine*.h; do
    [ -f "$f" ] || continue
    m=$(basename "$f" | sed 's/^engine_\{0,1\}//; s/_int\.h$//; s/\.[ch]$//'); r=$(engine_rank "${m:-engine}")
    for h in $(sed -n 's/^#include "\(engine_[a-z]*\(_int\)\{0,1\}\.h\)"/\1/p' "$f"); do
        hm=$(echo "$h" | sed 's/^engine_//; s/_int\.h$//; s/\.h$//')
        [ "$hm" = "${m:-engine}" ] && continue
        [ "$(engine_rank "$hm")" -lt "$r" ] ||
            complain "$f includes $h: an engine file includes only the layers below it (rank $(engine_rank "$hm") is not below $r)"
    done
done

# The link: what libcore.a needs from outside must be pure C library
# functions (memory, strings, numbers); sanitizer runtimes are allowed.
if [ "$1" = "--lib" ]; then
    PURE="__assert_fail __stack_chk_fail abort aligned_alloc calloc free malloc realloc
          memchr memcmp memcpy memmove memset strchr strcmp strcspn strlen strncmp strndup
          strdup strrchr strspn strstr strtod strtol strtoll strtoul strtoull snprintf
          vsnprintf qsort __errno_location __ctype_b_loc __ctype_tolower_loc
          __isoc99_sscanf __isoc23_strtol __isoc23_strtoll __isoc23_strtoul __isoc23_strtoull
          __memcpy_chk __memset_chk __snprintf_chk __vsnprintf_chk __strcpy_chk _GLOBAL_OFFSET_TABLE_
          log log2 pow sqrt floor ceil exp"
    defined=$(nm --defined-only "$2" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u)
    for sym in $(nm -u "$2" | awk '{ print $2 }' | sort -u); do
        case $sym in __asan_*|__ubsan_*|__sanitizer_*|__sancov*|__lsan_*) continue;; esac
        echo "$defined" | grep -qxF "$sym" && continue
        case " $(echo $PURE) " in *" $sym "*) continue;; esac
        complain "$2 calls $sym, which is not a pure C library function: the core must not do I/O, read a clock or use a library"
    done
fi
[ $bad = 0 ] || { echo "check-layers: failed (see docs/DESIGN.md, \"Map\")" >&2; exit 1; }
