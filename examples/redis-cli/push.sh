#!/bin/sh
# push.sh BATCH JSON -- push one request with the queue-position transaction.
#
#   MULTI
#   RPUSH P:{B}:queue <json>
#   HGET  P:{B}:stats dequeued
#   EXEC                      -> L, D      ordinal = L + D
#
# The three commands must travel on ONE connection inside MULTI, so they are
# fed to a single redis-cli through stdin (one redis-cli per command would not
# group anything). Prints: pushed id=ID batch=BATCH ordinal=N
#
#   id=$(cat /proc/sys/kernel/random/uuid)      # once per user action; reuse it on retry
#   sh push.sh sale1 "{\"id\":\"$id\",\"user\":\"u1\",\"op\":\"buy\",\"item\":\"sku1\"}"
set -u
. "$(dirname "$0")/lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 BATCH JSON" >&2; exit 2; }
batch=$1 json=$2
id=$(json_str "$json" id)
out=$(printf 'MULTI\nRPUSH %s %s\nHGET %s dequeued\nEXEC\n' \
        "$(key "$batch" queue)" "$(cli_quote "$json")" "$(key "$batch" stats)" | rcli) ||
    { echo "error: redis-cli failed: $out" >&2; exit 1; }
# raw output: OK, QUEUED, QUEUED, then the EXEC replies: L and D (empty when nil)
len=$(printf '%s\n' "$out" | sed -n 4p)
deq=$(printf '%s\n' "$out" | sed -n 5p)
case "$len" in
    ''|*[!0-9]*) echo "error: unexpected reply from Redis: $out" >&2; exit 1 ;;
esac
echo "pushed id=$id batch=$batch ordinal=$((len + ${deq:-0}))"
