#!/bin/sh
# valgrind.sh -- allocd under valgrind through a full start-serve-drain cycle
# (`make valgrind`).
#
# Why: allocd runs for weeks; a leak per request or per reconnect would
# grow without bound, and use of freed or uninitialised memory may corrupt
# a decision long before it crashes. ASan runs the unit and integration
# tests (`make asan`); this runs the real binary, unmodified, through the
# paths a production day has: both batch kinds, reservations that expire,
# admin commands, duplicates, garbage for the dead list, a Redis restart
# (reconnect and reload), and a SIGTERM drain. It passes when allocd exits
# 0 after SIGTERM, valgrind reports 0 errors, and nothing is definitely or
# indirectly lost ("All heap blocks were freed" is the best case).
#
#   BUILD=build sh tests/chaos/valgrind.sh        (VALGRIND_REQUESTS=N, KEEP=1)
set -u
BUILD=${BUILD:-build}
ALLOCD=${ALLOCD_BIN:-$BUILD/allocd}
N=${VALGRIND_REQUESTS:-6000}
command -v valgrind >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
[ -x "$ALLOCD" ] || { echo "valgrind.sh: $ALLOCD not built (make $ALLOCD)"; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/allocd-valgrind-XXXXXX")
sock=$dir/redis.sock
rpid=; vpid=
cleanup() {
    [ -n "$vpid" ] && kill -KILL "$vpid" 2>/dev/null
    [ -n "$rpid" ] && kill -TERM "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
die() { echo "valgrind.sh: FAILED: $*"; [ -f "$dir/allocd.log" ] && tail -n 20 "$dir/allocd.log"; exit 1; }

start_redis() {
    redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --dir "$dir" --save '' \
        --appendonly yes --appendfsync everysec --daemonize no --logfile "$dir/redis.log" &
    rpid=$!
    i=0
    until redis-cli -s "$sock" ping >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -gt 200 ] && die "redis-server did not start"; sleep 0.05
    done
}
rc() { redis-cli -s "$sock" "$@"; }

# RESP for redis-cli --pipe: RPUSH key value (ASCII values only).
resp() { printf '*3\r\n$5\r\nRPUSH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n' "${#1}" "$1" "${#2}" "$2"; }

# Requests n..m of both kinds, with duplicates, garbage and admin commands.
gen() {
    i=$1
    while [ "$i" -le "$2" ]; do
        u=$((i % 97)); r=$((i % 40 + 1)); s=$((i % 13))
        case $s in
        0|1|2) resp 'alloc:{vs}:queue' "{\"id\":\"s$i\",\"user\":\"u$u\",\"op\":\"buy\",\"item\":\"sku$((i % 3))\",\"qty\":$((i % 2 + 1))}" ;;
        3) resp 'alloc:{vs}:queue' "{\"id\":\"s$i\",\"user\":\"u$u\",\"op\":\"confirm\",\"order\":\"$((i * 7919))\"}" ;;
        4) resp 'alloc:{vs}:queue' "{\"id\":\"s$((i - 4))\",\"user\":\"u$u\",\"op\":\"cancel\",\"order\":\"1\"}" ;;
        5) resp 'alloc:{vr}:queue' "{\"id\":\"r$i\",\"user\":\"s$u\",\"op\":\"choose\",\"room\":\"R$r\"}" ;;
        6) resp 'alloc:{vr}:queue' "{\"id\":\"r$i\",\"user\":\"s$u\",\"op\":\"auto\",\"prefs\":[\"R$r\",\"R9\"],\"filter\":{\"floor\":$((i % 3))}}" ;;
        7) resp 'alloc:{vr}:queue' "{\"id\":\"r$i\",\"user\":\"s$u\",\"op\":\"group\",\"members\":[\"s$u\",\"s$(((u + 1) % 97))\"],\"prefs\":[\"R$r\"]}" ;;
        8) resp 'alloc:{vr}:queue' "{\"id\":\"r$i\",\"user\":\"s$u\",\"op\":\"switch\",\"room\":\"R$(((r + 3) % 40 + 1))\"}" ;;
        9) resp 'alloc:{vr}:queue' "{\"id\":\"r$i\",\"user\":\"s$u\",\"op\":\"release\"}" ;;
        10) resp 'alloc:{vr}:queue' "not json $i"; resp 'alloc:{vs}:queue' "{\"id\":\"s$i\",\"user\":\"u$u\",\"op\":\"steal\"}" ;;
        11) resp 'alloc:{vr}:queue' "{\"id\":\"r$((i - 6))\",\"user\":\"s$u\",\"op\":\"release\"}" ;;
        12) if [ $((i % 260)) -eq 12 ]; then
                resp 'alloc:{vr}:ctl' "{\"id\":\"c$i\",\"op\":\"set_capacity\",\"item\":\"R$r\",\"capacity\":$((i % 4 + 1))}"
                resp 'alloc:{vs}:ctl' "{\"id\":\"cp$i\",\"op\":\"pause\"}"
                resp 'alloc:{vs}:ctl' "{\"id\":\"cr$i\",\"op\":\"resume\"}"
            else
                resp 'alloc:{vs}:queue' "{\"id\":\"s$i\",\"user\":\"u$u\",\"op\":\"buy\",\"item\":\"sku0\"}"
            fi ;;
        esac
        i=$((i + 1))
    done
}

drained() {
    for b in vs vr; do
        [ "$(rc llen "alloc:{$b}:queue")" = 0 ] || return 1
        [ "$(rc llen "alloc:{$b}:processing")" = 0 ] || return 1
        [ "$(rc llen "alloc:{$b}:ctl")" = 0 ] || return 1
        d=$(rc hget "alloc:{$b}:stats" dequeued); p=$(rc hget "alloc:{$b}:stats" processed)
        x=$(rc hget "alloc:{$b}:stats" dead); u=$(rc hget "alloc:{$b}:stats" duplicates)
        [ -n "$d" ] && [ "$d" = $((${p:-0} + ${x:-0} + ${u:-0})) ] || return 1
    done
}

wait_drained() {
    i=0
    until drained; do
        i=$((i + 1)); [ $i -gt 1200 ] && die "allocd did not drain within 120 s"
        kill -0 "$vpid" 2>/dev/null || die "allocd died under valgrind"
        sleep 0.1
    done
}

start_redis
rc hset 'alloc:{vs}:meta' kind stock per_user 4 hold_ms 300 >/dev/null
rc hset 'alloc:{vs}:capacity' sku0 400 sku1 300 sku2 50 >/dev/null
rc hset 'alloc:{vr}:meta' kind room max_group 3 >/dev/null
i=1
while [ $i -le 40 ]; do
    rc hset 'alloc:{vr}:capacity' "R$i" $((i % 4 + 1)) >/dev/null
    rc hset 'alloc:{vr}:attrs' "R$i" "{\"floor\":$((i % 3)),\"building\":\"$((i % 2))\"}" >/dev/null
    i=$((i + 1))
done
rc sadd alloc:batches vs vr >/dev/null
cat > "$dir/allocd.conf" <<CONF
redis = "unix://$sock";
prefix = "alloc";
instance = "valgrind";
chunk = 64;
backoff_min_ms = 50;
backoff_max_ms = 500;
CONF

valgrind --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
    --log-file="$dir/valgrind.log" "$ALLOCD" -c "$dir/allocd.conf" > "$dir/allocd.log" 2>&1 &
vpid=$!

half=$((N / 2))
start=$(date +%s)
gen 1 "$half" | redis-cli -s "$sock" --pipe >/dev/null || die "push failed"
wait_drained
echo "valgrind.sh: first $half requests served; restarting Redis"
kill -TERM "$rpid"; wait "$rpid" 2>/dev/null
start_redis
gen $((half + 1)) "$N" | redis-cli -s "$sock" --pipe >/dev/null || die "push failed"
wait_drained
sleep 1   # reservations expire (hold_ms 300) and are written
wait_drained
served=$(( $(rc hlen 'alloc:{vs}:results') + $(rc hlen 'alloc:{vr}:results') ))
dead=$(( $(rc llen 'alloc:{vs}:dead') + $(rc llen 'alloc:{vr}:dead') ))
echo "valgrind.sh: $N generated lines served in $(( $(date +%s) - start )) s: $served results, $dead dead; SIGTERM"
kill -TERM "$vpid"
wait "$vpid"; status=$?
vpid=
grep -E 'ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|still reachable|All heap blocks|in use at exit' "$dir/valgrind.log" | sed 's/^==[0-9]*== /  /'
[ "$status" -eq 0 ] || die "allocd exited $status after SIGTERM (9 = valgrind found errors); see $dir/valgrind.log"
grep -q 'ERROR SUMMARY: 0 errors' "$dir/valgrind.log" || die "valgrind reported errors"
if ! grep -q 'All heap blocks were freed -- no leaks are possible' "$dir/valgrind.log"; then
    grep -q 'definitely lost: 0 bytes' "$dir/valgrind.log" && grep -q 'indirectly lost: 0 bytes' "$dir/valgrind.log" ||
        { KEEP=1; die "leaks; see $dir/valgrind.log"; }
fi
grep -q 'all batches drained' "$dir/allocd.log" || die "allocd did not log its drain"
echo "valgrind.sh: PASSED (exit 0, 0 errors, no leaks)"
