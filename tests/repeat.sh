#!/bin/sh
# Runs the whole suite N times on a fresh build and prints a table of every
# test that ever failed, with how often and the first assertion it failed
# on. Usage: tests/repeat.sh N   (make test-repeat N=10)
#
# The build is made from nothing in $REPEAT_BUILD (default build/repeat; a
# variable of its own, so that a BUILD set for other targets is never
# wiped), so a stale object cannot hide or cause a failure. Each run's
# whole output is kept in $REPEAT_BUILD/repeat-K.log.
N=${1:-10}
BUILD=${REPEAT_BUILD:-build/repeat}
rm -rf "$BUILD"
mkdir -p "$BUILD"
make --no-print-directory BUILD="$BUILD" tests-build >"$BUILD/build.log" 2>&1 ||
    { cat "$BUILD/build.log"; echo "test-repeat: the build failed"; exit 1; }
table="$BUILD/failures.txt"; : > "$table"
green=0
for k in $(seq 1 "$N"); do
    log="$BUILD/repeat-$k.log"
    start=$(date +%s)
    if BUILD="$BUILD" sh tests/run.sh >"$log" 2>&1; then green=$((green + 1)); fi
    # binary/test for each failed test; binary(crash) for a binary that
    # died without cmocka's summary; binary(leftover) for survivors
    awk -v run="$k" '
        /^=== / { bin = substr($2, index($2, "/") + 1) }
        /^\[ RUN      \] / { test = $4 }
        /^\[  ERROR   \] --- / && !((bin "/" test) in why) { sub(/^\[  ERROR   \] --- /, ""); why[bin "/" test] = $0 }
        /^\[  FAILED  \] test_/ { if (!seen[bin "/" $4]++) print run "\t" bin "/" $4 "\t" why[bin "/" $4] }
        /^crashed or exited non-zero:/ { for (i = 5; i <= NF; i++) print run "\t" $i "\t(crash)" }
        /^left processes or files behind:/ { for (i = 6; i <= NF; i++) print run "\t" $i "(leftover)\t" }
    ' "$log" >> "$table"
    echo "run $k/$N: $(tail -n1 "$log") ($(( $(date +%s) - start )) s)"
done
echo
echo "$green of $N runs passed"
if [ -s "$table" ]; then
    printf '%-60s %8s  %s\n' "test" "failed" "first failure"
    cut -f2 "$table" | sort | uniq -c | sort -rn | while read -r count name; do
        first=$(awk -F'\t' -v n="$name" '$2 == n { print "run " $1 ": " $3; exit }' "$table")
        printf '%-60s %5s/%-3s %s\n' "$name" "$count" "$N" "$first"
    done
else
    echo "no test failed in any run"
fi
[ "$green" -eq "$N" ]
