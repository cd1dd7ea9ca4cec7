#!/bin/sh
# Runs the cmocka test binaries and prints one closing line:
#   "tests: N passed, N failed"
# Usage: tests/run.sh [unit|integration]   (default: both, unit first)
BUILD=${BUILD:-build}
kinds=${1:-"unit integration"}
passed=0; failed=0; broken=""
for kind in $kinds; do
    for t in "$BUILD"/tests/$kind/test_*; do
        [ -x "$t" ] || continue
        case "$t" in *.o|*.d) continue;; esac
        name=$(basename "$t")
        echo "=== $kind/$name"
        out=$("$t" 2>&1); rc=$?
        echo "$out"
        p=$(echo "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n1)
        f=$(echo "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n1)
        passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
        if [ "$rc" -ne 0 ] && [ -z "$f" ]; then
            failed=$((failed + 1)); broken="$broken $name(rc=$rc)"
        fi
    done
done
[ -n "$broken" ] && echo "crashed or exited non-zero:$broken"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
