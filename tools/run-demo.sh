#!/bin/sh
# make run: a private Redis (unless conf/allocd.conf names one), allocd in the
# foreground, a demo flash sale, and a line of progress per second.
# Ctrl-C stops everything this script started, calmly: Redis and allocd run
# in sessions of their own (setsid), so the terminal's SIGINT reaches only
# this script, which sends allocd one SIGTERM (it drains: finishes the chunk
# in flight), waits for it, and only then stops Redis. Once the queue is
# drained the demo says what happened. DEMO_SECONDS=N stops by itself. The
# private Redis keeps nothing on disk: stopping says the demo's data is gone.
set -u
BUILD=${BUILD:-build}
CONF=${CONF:-conf/allocd.conf}
RUN=${RUN:-$(pwd)/run}
BATCH=demo
mkdir -p "$RUN"
allocd_pid="" redis_pid=""
cleanup() {
    trap - INT TERM EXIT
    if [ -n "$allocd_pid" ] && kill -0 "$allocd_pid" 2>/dev/null; then
        echo "demo: stopping allocd (SIGTERM: it finishes what it has taken, then exits)"
        kill -TERM "$allocd_pid" 2>/dev/null
        wait "$allocd_pid" 2>/dev/null
    fi
    if [ -n "$redis_pid" ]; then
        kill -TERM "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null
        echo "demo: stopped the private Redis; it kept its data in memory only, so the demo batch"
        echo "demo:   is gone (name a Redis of your own in $CONF, line \`redis\`, to keep data)"
    else
        echo "demo: the demo batch stays in the Redis named in $CONF (keys alloc:{$BATCH}:*)"
    fi
    echo "demo: stopped"
    exit 0
}
trap cleanup INT TERM EXIT

if grep -Eq '^[[:space:]]*redis[[:space:]]*=' "$CONF"; then
    url=$(sed -n 's/^[[:space:]]*redis[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$CONF" | head -n1)
    echo "demo: using the Redis named in $CONF: $url"
    case "$url" in
        unix://*) CLI="redis-cli -s ${url#unix://}" ;;
        *) hp=${url#redis://}; hp=${hp#*@}; CLI="redis-cli -h ${hp%:*} -p ${hp##*:}" ;;
    esac
    REDIS_ARG=""
else
    SOCK=$RUN/redis.sock
    setsid redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --dir "$RUN" \
        --save '' --appendonly no --logfile "$RUN/redis.log" --daemonize no &
    redis_pid=$!
    CLI="redis-cli -s $SOCK"
    for i in $(seq 50); do $CLI ping >/dev/null 2>&1 && break; sleep 0.1; done
    echo "demo: private Redis on $SOCK (log: $RUN/redis.log)"
    REDIS_ARG="--redis unix://$SOCK"
fi

# A flash sale: 10 items of 100 units, at most 2 units per buyer.
$CLI del "alloc:{$BATCH}:meta" "alloc:{$BATCH}:capacity" "alloc:{$BATCH}:queue" \
    "alloc:{$BATCH}:results" "alloc:{$BATCH}:holders" "alloc:{$BATCH}:free" \
    "alloc:{$BATCH}:stats" "alloc:{$BATCH}:log" "alloc:{$BATCH}:dead" \
    "alloc:{$BATCH}:participants" "alloc:{$BATCH}:orders_ended" \
    "alloc:{$BATCH}:internal" "alloc:{$BATCH}:early" >/dev/null
$CLI hset "alloc:{$BATCH}:meta" kind stock per_user 2 >/dev/null
for i in 0 1 2 3 4 5 6 7 8 9; do $CLI hset "alloc:{$BATCH}:capacity" "sku$i" 100 >/dev/null; done
$CLI sadd alloc:batches "$BATCH" >/dev/null

setsid "$BUILD/allocd" -c "$CONF" $REDIS_ARG &
allocd_pid=$!

echo "demo: pushing 5000 buy requests from 3000 buyers onto alloc:{$BATCH}:queue"
awk 'BEGIN { for (i = 0; i < 5000; i++)
    printf "RPUSH alloc:{demo}:queue \"{\\\"id\\\":\\\"d%d\\\",\\\"user\\\":\\\"u%d\\\",\\\"op\\\":\\\"buy\\\",\\\"item\\\":\\\"sku%d\\\",\\\"qty\\\":%d}\"\n",
        i, (i * 7) % 3000, i % 10, 1 + i % 2 }' | $CLI >/dev/null

echo "demo: one result:   HGET alloc:{demo}:results d0"
$CLI hget "alloc:{$BATCH}:results" d0
# What happened, in words: every request answered, why the rejected were.
explain() {
    granted=$1 rejected=$2 free=$3 participants=$4
    echo "demo: all 5000 requests are answered, from $participants distinct buyers:"
    echo "demo:   $granted granted; $(( 1000 - free )) of the 1000 units are given$( [ "$free" -eq 0 ] && echo ': sold out')"
    echo "demo:   $rejected rejected, by reason:"
    $CLI hvals "alloc:{$BATCH}:results" | sed -n 's/.*"reason":"\([a-z_]*\)".*/\1/p' | sort | uniq -c |
        while read -r n why; do
            case $why in
                sold_out) what="the item had no units left" ;;
                limit)    what="the buyer already held per_user = 2 units" ;;
                *)        what="see docs/INTEGRATION.md" ;;
            esac
            echo "demo:     $n $why ($what)"
        done
    echo "demo: look closer: $BUILD/allocctl top (live view), $BUILD/allocctl status $BATCH --id d0,"
    echo "demo:   $BUILD/allocctl verify $BATCH; with metrics_listen set in $CONF, its URL shows a dashboard."
    echo "demo: allocd keeps running; Ctrl-C stops it (it drains first)$( [ -n "$redis_pid" ] && echo ' and the private Redis, whose data goes with it')."
}

start=$(date +%s) explained=""
while :; do
    s=$($CLI hmget "alloc:{$BATCH}:stats" dequeued processed granted rejected free_units participants state | tr '\n' ' ')
    set -- $s
    [ -z "$explained" ] && echo "demo: dequeued=${1:-0} processed=${2:-0} granted=${3:-0} rejected=${4:-0} free_units=${5:-?} participants=${6:-0} state=${7:-?}  (Ctrl-C stops)"
    if [ -z "$explained" ] && [ "${2:-0}" -ge 5000 ]; then
        explain "${3:-0}" "${4:-0}" "${5:-0}" "${6:-0}"
        explained=1
    fi
    [ -n "${DEMO_SECONDS:-}" ] && [ $(( $(date +%s) - start )) -ge "$DEMO_SECONDS" ] && break
    sleep 1
done
