#!/bin/sh
# admin.sh BATCH pause|resume|close            -- operator commands
# admin.sh BATCH set_capacity ITEM CAPACITY
#
# Pushes {"id":...,"op":...} onto P:{B}:ctl (served before the queue) and waits
# for its result in P:{B}:results, like a request. Prints
#   result id=ctl-... status=done|rejected [reason=...] ...
set -u
. "$(dirname "$0")/lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 BATCH pause|resume|close|set_capacity [ITEM CAPACITY]" >&2; exit 2; }
batch=$1 op=$2 id="ctl-$(new_id)"
case "$op" in
    pause|resume|close) json="{\"id\":\"$id\",\"op\":\"$op\"}" ;;
    set_capacity)
        [ $# -eq 4 ] || { echo "usage: $0 BATCH set_capacity ITEM CAPACITY" >&2; exit 2; }
        json="{\"id\":\"$id\",\"op\":\"set_capacity\",\"item\":\"$3\",\"capacity\":$4}" ;;
    *) echo "$0: unknown admin op $op" >&2; exit 2 ;;
esac
rcli RPUSH "$(key "$batch" ctl)" "$json" >/dev/null || exit 1
results=$(key "$batch" results) delay=50 waited=0
while :; do
    raw=$(rcli HGET "$results" "$id") || exit 1
    [ -n "$raw" ] && break
    [ "$waited" -ge 10000 ] && { echo "pending id=$id -- no answer in 10 s: is allocd serving $batch?"; exit 3; }
    sleep_ms "$delay"; waited=$((waited + delay)); delay=$((delay * 2)); [ "$delay" -gt 1000 ] && delay=1000
done
line="result id=$id status=$(json_str "$raw" status)"
r=$(json_str "$raw" reason); [ -n "$r" ] && line="$line reason=$r"
line="$line op=$op"
i=$(json_str "$raw" item); [ -n "$i" ] && line="$line item=$i"
c=$(json_num "$raw" capacity); [ -n "$c" ] && line="$line capacity=$c"
echo "$line"
