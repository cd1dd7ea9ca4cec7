#!/bin/sh
# poll.sh BATCH ID [ORDINAL] [TIMEOUT_SECONDS] -- wait for a result, showing
# the live position (ahead = ORDINAL - 1 - dequeued_now), with backoff.
#
# Prints the same lines as the Python and Node examples:
#   position id=ID ahead=N state=S -- ...      (whenever it changes)
#   waiting id=ID -- <text>     (a `waiting` result: a swap offer or a waitlist place)
#   result id=ID status=S [reason=R] [op=..] [item=..] [qty=..] [order=..] [expires_at=..] [wait_pos=..] [wait_no=..] [seq=..] [rank=..]
#   message: <text for the user>
#   beat id=ID percent=P -- you beat P% of N participants     (grants)
# A `waiting` result (a swap offer, contract 9.3, or a waitlist place of a
# request sent with "wait":true, 9.5) is not final: it is replaced exactly
# once, so poll.sh keeps polling it.
# Exit: 0 with a result, 3 when the timeout (default 30 s) ran out first: the
# request is still queued or waiting -- poll again later with the same id,
# never push a new id for it. 1 on a Redis error.
#
# poll.sh --explain RESULT_JSON... prints, without Redis, what the user is shown.
set -u
. "$(dirname "$0")/lib.sh"
if [ "${1:-}" = --explain ]; then
    # No Redis: what the user would be shown for each result JSON given.
    shift
    for raw in "$@"; do explain_result "$raw" ""; done
    exit 0
fi
[ $# -ge 2 ] || { echo "usage: $0 BATCH ID [ORDINAL] [TIMEOUT_SECONDS] | $0 --explain RESULT_JSON..." >&2; exit 2; }
batch=$1 id=$2 ordinal=${3:-} timeout_ms=$(( ${4:-30} * 1000 ))
results=$(key "$batch" results) stats=$(key "$batch" stats)
delay=50 waited=0 shown="" qid=$(cli_quote "$id")
# redis-cli reading commands from a pipe exits 0 even when it cannot connect:
# ask once up front, so an unreachable Redis is exit 1, not a wait for ever
[ "$(rcli PING 2>&1)" = PONG ] || { echo "error: redis: cannot reach $ALLOCD_REDIS" >&2; exit 1; }
while :; do
    # one redis-cli, one round trip: the result (an empty line while there is
    # none), then stats.dequeued and stats.state
    reply=$(printf 'HGET %s %s\nHMGET %s dequeued state\n' "$results" "$qid" "$stats" | rcli) ||
        { echo "error: redis-cli failed" >&2; exit 1; }
    { IFS= read -r raw; IFS= read -r dequeued; IFS= read -r state; } <<EOF
$reply
EOF
    case "$raw" in
        '') ;;
        *'"status":"waiting"'*)
            # a swap offer or a waitlist place: replaced exactly once by the
            # final result; keep polling
            wop=$(json_str "$raw" op)
            if [ "$shown" != waiting ]; then
                shown=waiting
                echo "waiting id=$id -- $(waiting_message "$wop" "$(json_num "$raw" wait_pos)")"
            fi
            if [ "$waited" -ge "$timeout_ms" ]; then
                echo "pending id=$id -- $(waiting_pending "$wop"); check again later with the same id"
                exit 3
            fi
            sleep_ms "$delay"; waited=$((waited + delay))
            delay=$((delay * 3 / 2)); [ "$delay" -gt 2000 ] && delay=2000
            continue ;;
        *) break ;;
    esac
    dequeued=${dequeued:-0} state=${state:-waiting}
    ahead="?"
    if [ -n "$ordinal" ]; then
        ahead=$((ordinal - 1 - dequeued)); [ "$ahead" -lt 0 ] && ahead=0
        if [ "$ahead/$state" != "$shown" ]; then
            shown="$ahead/$state"
            case "$state" in
                paused)  text="the sale is paused; you keep your place in line ($ahead ahead of you)" ;;
                waiting) text="the sale has not opened yet; you are in line" ;;
                *) if [ "$ahead" -eq 0 ]; then text="you are next: your request is being decided"
                   elif [ "$ahead" -eq 1 ]; then text="1 request ahead of you"
                   else text="$ahead requests ahead of you"; fi ;;
            esac
            echo "position id=$id ahead=$ahead state=$state -- $text"
        fi
    fi
    if [ "$waited" -ge "$timeout_ms" ]; then
        echo "pending id=$id ahead=$ahead state=$state -- still in line; check again later with the same id"
        exit 3
    fi
    sleep_ms "$delay"
    waited=$((waited + delay))
    delay=$((delay * 3 / 2)); [ "$delay" -gt 2000 ] && delay=2000     # backoff, 50 ms .. 2 s
done

# remaining reservation time by the Redis server's clock, never the client's
now_ms=""
case "$raw" in
    *'"expires_at":'*) t=$(rcli TIME); now_ms=$(( $(echo "$t" | sed -n 1p) * 1000 + $(echo "$t" | sed -n 2p) / 1000 )) ;;
esac
explain_result "$raw" "$now_ms"
rank=$r_rank
if [ "$r_status" = granted ] && [ -n "$rank" ]; then
    participants=$(rcli HGET "$stats" participants)
    if [ "${participants:-0}" -gt 0 ]; then
        pct=$(( 100 * (participants - rank) / participants ))
        [ "$pct" -lt 0 ] && pct=0
        echo "beat id=$id percent=$pct -- you beat $pct% of $participants participants"
    fi
fi
exit 0
