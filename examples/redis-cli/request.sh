#!/bin/sh
# request.sh BATCH JSON [TIMEOUT_SECONDS] -- the whole producer flow: push with
# the position transaction (push.sh), then wait for the result (poll.sh).
#
#   export ALLOCD_REDIS=unix:///run/redis/redis.sock
#   id=$(cat /proc/sys/kernel/random/uuid)
#   sh request.sh sale1 "{\"id\":\"$id\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\",\"qty\":2}"
#   sh request.sh sale1 "{\"id\":\"$(cat /proc/sys/kernel/random/uuid)\",\"user\":\"u1\",\"op\":\"confirm\",\"order\":\"1209845770283447512\"}"
#
# Running it again with the same JSON (same id) is safe: the same result comes back.
set -u
here=$(dirname "$0")
[ $# -ge 2 ] || { echo "usage: $0 BATCH JSON [TIMEOUT_SECONDS]" >&2; exit 2; }
pushed=$(sh "$here/push.sh" "$1" "$2") || exit $?
echo "$pushed"
id=$(printf '%s' "$pushed" | sed -n 's/^pushed id=\(.*\) batch=.* ordinal=.*/\1/p')
ordinal=${pushed##*ordinal=}
exec sh "$here/poll.sh" "$1" "$id" "$ordinal" "${3:-30}"
