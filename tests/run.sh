#!/bin/sh
# Runs the cmocka test binaries and prints one closing line:
#   "tests: N passed, N failed, N skipped"
# A skipped test (cmocka's skip()) is counted apart, never as passed, so a
# suite that skips is visible in its last line.
# Usage: tests/run.sh [unit|integration]   (default: both, unit first)
#
# Each binary runs with a TMPDIR of its own and a marker in its environment
# (ALLOCD_TEST_RUN) that every process it starts inherits. When the binary
# has exited -- passed, failed or crashed -- any process still carrying the
# marker and anything left in its TMPDIR is a survivor: it is listed, killed
# or removed, and counted as a failure of that binary. A test that leaves a
# redis-server or an allocd running would otherwise disturb the tests after
# it (a stale instance taking leases) and is how a suite becomes flaky.
BUILD=${BUILD:-build}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}     # seconds one binary may take
kinds=${1:-"unit integration"}
passed=0; failed=0; skipped=0; broken=""; leftovers=""; times=""
scratch=$(mktemp -d "${TMPDIR:-/tmp}/allocd-tests-XXXXXX") || exit 1
run_id="run-$$-$(date +%s)"

# The pids of live processes whose environment holds ALLOCD_TEST_RUN=$1
# (one grep over every environ file; -z: entries are NUL-separated).
marked_pids() {
    grep -lzxF "ALLOCD_TEST_RUN=$1" /proc/[0-9]*/environ 2>/dev/null |
        sed 's|^/proc/\([0-9]*\)/environ$|\1|' | grep -vx "$$"
}

# Lists, kills and removes what the binary $1 left behind; non-zero if any.
check_left() {
    name=$1; marker=$2; tmp=$3; found=0
    for pid in $(marked_pids "$marker"); do
        cmd=$({ tr '\0' ' ' < /proc/"$pid"/cmdline; } 2>/dev/null)
        [ -n "$cmd" ] || continue          # exited meanwhile, or a zombie
        echo "left behind by $name: process $pid: $cmd"
        kill -9 "$pid" 2>/dev/null
        found=1
    done
    for f in $(ls -A "$tmp" 2>/dev/null); do
        echo "left behind by $name: $tmp/$f"
        found=1
    done
    rm -rf "$tmp"
    return $found
}

# A binary whose source is gone (a test removed or renamed since this
# build dir was made) is not part of the suite any more. test_X comes from
# tests/*/test_X.c, test_fuzz_replay_X from tests/fuzz/fuzz_X.c (mk/fuzz.mk).
tests_dir=$(dirname "$0")
[ -f "$tests_dir/run.sh" ] || { echo "tests/run.sh: run it as a script (sh tests/run.sh), not sourced" >&2; exit 2; }
has_source() {
    case "$1" in
    test_fuzz_replay_*) [ -f "$tests_dir/fuzz/fuzz_${1#test_fuzz_replay_}.c" ];;
    *) ls "$tests_dir"/*/"$1.c" >/dev/null 2>&1;;
    esac
}

# Runs binary $1 ($2/$3) to $scratch/$3.out, its exit code in .rc, its
# seconds in .secs.
run_one() {
    t=$1; kind=$2; name=$3
    tmp="$scratch/$name"; mkdir -p "$tmp"
    started=$(date +%s)
    # a hung binary is stopped (timeout: 124) instead of stalling the suite
    ALLOCD_TEST_RUN="$run_id/$kind/$name" TMPDIR="$tmp" timeout -k 10 "$TEST_TIMEOUT" "$t" \
        > "$scratch/$name.out" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] && echo "$name: stopped after $TEST_TIMEOUT s" >> "$scratch/$name.out"
    echo "$rc" > "$scratch/$name.rc"
    echo $(( $(date +%s) - started )) > "$scratch/$name.secs"
}

# Prints what binary $2/$1 said and counts it.
account() {
    name=$1; kind=$2
    cat "$scratch/$name.out"
    rc=$(cat "$scratch/$name.rc"); secs=$(cat "$scratch/$name.secs")
    echo "--- $kind/$name: $secs s"
    times="$times$secs $kind/$name
"
    out="$scratch/$name.out"
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -n1)
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
    if [ "$rc" -ne 0 ] && [ -z "$f" ]; then
        failed=$((failed + 1)); broken="$broken $name(rc=$rc)"
    fi
    if ! check_left "$name" "$run_id/$kind/$name" "$scratch/$name"; then
        failed=$((failed + 1)); leftovers="$leftovers $name"
    fi
}

# Binaries that mostly wait -- for Sentinel's timers, a 10 s Redis outage,
# the example programs' polls, leases to expire, phases to open -- run
# beside the others, one after another in a lane of their own, and are
# reported at the end of their kind: the suite's 10-minute budget. Alone,
# each keeps the two cores at most 13% busy (test_examples 75%: Python's
# and Node's start-ups), and none asserts a time tighter than seconds.
# RUN_BESIDE="" runs everything one at a time.
RUN_BESIDE=${RUN_BESIDE-"test_sentinel test_outage test_examples test_lottery test_web test_rules test_multi
                         test_daemon_ops test_slots test_bands"}
# Binaries that rebuild the tree under test (test_install relinks every
# binary for another PREFIX, then back) run first, before the lane starts:
# beside them a test would exec an allocd the linker is writing (refused:
# the harness's child exits 127, the test sees an empty log) or one built
# for the other PREFIX.
RUN_ALONE=${RUN_ALONE-"test_install"}

for kind in $kinds; do
    alone=""
    for name in $RUN_ALONE; do
        [ -x "$BUILD/tests/$kind/$name" ] && has_source "$name" || continue
        alone="$alone $name"
        echo "=== $kind/$name (alone, before the lane)"
        run_one "$BUILD/tests/$kind/$name" "$kind" "$name"
        account "$name" "$kind"
    done
    lane=""
    for name in $RUN_BESIDE; do
        [ -x "$BUILD/tests/$kind/$name" ] && has_source "$name" && lane="$lane $name"
    done
    lane_pid=""
    if [ -n "$lane" ]; then
        echo "=== started beside the others, one after another, reported at the end:$lane"
        ( for name in $lane; do run_one "$BUILD/tests/$kind/$name" "$kind" "$name"; done ) & lane_pid=$!
    fi
    for t in "$BUILD"/tests/$kind/test_*; do
        [ -x "$t" ] || continue
        case "$t" in *.o|*.d) continue;; esac
        name=$(basename "$t")
        if ! has_source "$name"; then
            echo "=== $kind/$name: skipped, its source is gone (a stale binary in $BUILD)"
            continue
        fi
        case " $lane $alone " in *" $name "*) continue;; esac
        echo "=== $kind/$name"
        run_one "$t" "$kind" "$name"
        account "$name" "$kind"
    done
    [ -n "$lane_pid" ] && wait "$lane_pid"
    for name in $lane; do
        echo "=== $kind/$name (ran beside the others)"
        account "$name" "$kind"
    done
done
rm -rf "$scratch"
# the slowest binaries, so the suite's 10-minute budget stays visible
echo "slowest:"; printf '%s' "$times" | sort -rn | head -n 8 | sed 's/^\([0-9]*\) \(.*\)/  \2: \1 s/'
[ -n "$broken" ] && echo "crashed or exited non-zero:$broken"
[ -n "$leftovers" ] && echo "left processes or files behind:$leftovers"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
