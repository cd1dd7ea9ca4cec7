# lib.sh -- shared by the redis-cli examples (sourced, not run).
#
# ALLOCD_REDIS: redis://[user:password@]host:port (default redis://127.0.0.1:6379),
#               rediss://... or unix:///path/to/redis.sock
# ALLOCD_PREFIX: key prefix (default alloc)
# ALLOCD_REDIS_USER, ALLOCD_REDIS_PASSWORD: the ACL login (docs/DEPLOYMENT.md,
#               "Lock it down"); the password reaches redis-cli through
#               REDISCLI_AUTH, never its command line (visible in ps)

ALLOCD_REDIS=${ALLOCD_REDIS:-redis://127.0.0.1:6379}
ALLOCD_PREFIX=${ALLOCD_PREFIX:-alloc}

# rcli ARGS...: redis-cli on the configured server. Output is redis-cli's raw
# format (it is not a terminal): one reply element per line, nil = empty line.
# -e: an error reply (NOPERM from an ACL, WRONGTYPE, ...) fails the command
# instead of passing for a value.
rcli() {
    if [ -n "${ALLOCD_REDIS_USER:-}" ]; then set -- --user "$ALLOCD_REDIS_USER" "$@"; fi
    if [ -n "${ALLOCD_REDIS_PASSWORD:-}" ]; then
        REDISCLI_AUTH=$ALLOCD_REDIS_PASSWORD; export REDISCLI_AUTH
    fi
    case "$ALLOCD_REDIS" in
        unix://*) redis-cli -e -s "${ALLOCD_REDIS#unix://}" "$@" ;;
        *@*)      redis-cli -e --no-auth-warning -u "$ALLOCD_REDIS" "$@" ;;
        *)        redis-cli -e -u "$ALLOCD_REDIS" "$@" ;;
    esac
}

# key BATCH NAME -> P:{B}:NAME (the {B} hash tag keeps a batch in one cluster slot)
key() { printf '%s:{%s}:%s' "$ALLOCD_PREFIX" "$1" "$2"; }

# redis-cli reads "inline" commands from stdin; inside "..." a backslash and a
# double quote must be escaped. JSON on one line never needs anything else.
cli_quote() { printf '"%s"' "$(printf '%s' "$1" | tr '\n' ' ' | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

# json_str JSON FIELD: a top-level string field, still JSON-escaped ("" if absent)
json_str() { printf '%s' "$1" | sed -n 's/.*"'"$2"'":"\(\([^"\\]\|\\.\)*\)".*/\1/p'; }
# json_num JSON FIELD: a top-level integer field ("" if absent)
json_num() { printf '%s' "$1" | sed -n 's/.*"'"$2"'":\(-\{0,1\}[0-9][0-9]*\).*/\1/p'; }
# json_list JSON FIELD: a top-level array of strings as a,b,c
json_list() { printf '%s' "$1" | sed -n 's/.*"'"$2"'":\[\([^]]*\)\].*/\1/p' | tr -d '"'; }

# sleep_ms N: GNU and busybox sleep take fractions of a second
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

new_id() { cat /proc/sys/kernel/random/uuid 2>/dev/null || uuidgen; }

# What to show the user for every outcome the contract defines.
reason_message() {
    case "$1" in
        sold_out)        echo "Sorry, that item is sold out (or fewer units are left than you asked for)." ;;
        room_full)       echo "That room has no free bed left. Pick another room." ;;
        no_room)         echo "No room matching your choices has enough free beds." ;;
        limit)           echo "You already hold the most units one person may have." ;;
        already_holding) echo "You already have a bed (or you are already in that room)." ;;
        member_busy)     echo "Someone in your group already has a bed; they must release it first." ;;
        not_holding)     echo "You do not hold a bed, so there is nothing to switch or release." ;;
        unknown_item)    echo "That item or room does not exist in this sale." ;;
        unknown_order)   echo "We cannot find that order for your account." ;;
        expired)         echo "Your reservation expired before it was confirmed; the units went back on sale." ;;
        not_open)        echo "The sale has not opened yet. Please come back at the opening time." ;;
        closed)          echo "The sale is closed." ;;
        paused)          echo "The sale is paused for a moment. Please try again shortly." ;;
        throttled)       echo "Too many attempts in a short time. Please wait a few seconds and try again." ;;
        wrong_kind)      echo "This action is not available for this sale." ;;
        group_too_large) echo "Your group is larger than a room allows." ;;
        no_invitation)   echo "There is no invitation from that student for you (it may have been withdrawn or declined)." ;;
        not_in_group)    echo "You are not in a group yet: invite someone, or accept an invitation." ;;
        conflict)        echo "Your group's preferences were changed meanwhile; reload them and try again." ;;
        *)               echo "Your request was refused ($1)." ;;
    esac
}

# json_unescape: the common JSON escapes of a string value, for display
json_unescape() { sed 's/\\\\/\x01/g; s/\\"/"/g; s/\\n/ /g; s/\\t/ /g; s/\x01/\\/g'; }

# json_fields JSON: the result fields this example shows, one "name=value" a
# line, from one sed process (strings keep their JSON escapes; members is a,b,c).
# `t` jumps when any substitution since the last `t` succeeded, so the flag
# the s///p lines set is cleared (`t clear`) before `t members` tests its own.
JSON_FIELDS_SED='h
s/.*"id":"\(\([^"\\]\|\\.\)*\)".*/id=\1/p
g
s/.*"status":"\([^"]*\)".*/status=\1/p
g
s/.*"reason":"\([^"]*\)".*/reason=\1/p
g
s/.*"op":"\(\([^"\\]\|\\.\)*\)".*/op=\1/p
g
s/.*"item":"\(\([^"\\]\|\\.\)*\)".*/item=\1/p
g
s/.*"order":"\([0-9]*\)".*/order=\1/p
g
s/.*"detail":"\(\([^"\\]\|\\.\)*\)".*/detail=\1/p
g
s/.*"qty":\([0-9]*\).*/qty=\1/p
g
s/.*"expires_at":\([0-9]*\).*/expires_at=\1/p
g
s/.*"capacity":\([0-9]*\).*/capacity=\1/p
g
s/.*"group":"\(\([^"\\]\|\\.\)*\)".*/group=\1/p
g
s/.*"version":\([0-9]*\).*/version=\1/p
g
s/.*"wait_pos":\([0-9]*\).*/wait_pos=\1/p
g
s/.*"wait_no":\([0-9]*\).*/wait_no=\1/p
g
s/.*"seq":\([0-9]*\).*/seq=\1/p
g
s/.*"rank":\([0-9]*\).*/rank=\1/p
t clear
:clear
g
s/.*"members":\[\([^]]*\)\].*/members=\1/
t members
b
:members
s/"//g
p'
json_fields() { printf '%s\n' "$1" | sed -n "$JSON_FIELDS_SED"; }

# waiting_message OP WAIT_POS: the text for a `waiting` result, which is
# replaced exactly once by the final result. Two kinds (contract 9.3, 9.5):
# a swap offer (op swap) waits for the other student's answer; any other op
# (buy, choose, auto, group sent with "wait":true) holds a waitlist place,
# WAIT_POS being its place when it joined (empty if the result lacks it).
waiting_message() {
    if [ "$1" = swap ]; then
        echo "Your swap offer waits for the other student's answer."
    elif [ -n "$2" ]; then
        echo "You are on the waitlist (place $2). Keep this page open: your final result replaces this one."
    else
        echo "You are on the waitlist. Keep this page open: your final result replaces this one."
    fi
}

# waiting_pending OP: poll.sh's words when its timeout ran out on a `waiting` result
waiting_pending() {
    if [ "$1" = swap ]; then echo "still waiting for the answer"; else echo "still on the waitlist"; fi
}

# line_field NAME VALUE: appends " NAME=VALUE" to explain_result's line,
# unless VALUE is empty (the field is absent from the result)
line_field() { [ -n "$2" ] && _line="$_line $1=$2"; return 0; }

# explain_result RAW NOW_MS: prints the result line, the user message and, for
# `invalid`, a line for developers. NOW_MS (Redis TIME, may be empty) gives
# the seconds left on a reservation. Sets r_status, r_rank, ... for the caller.
explain_result() {
    _now=$2
    r_id="" r_status="" r_reason="" r_op="" r_item="" r_order="" r_detail="" r_qty=""
    r_exp="" r_capacity="" r_seq="" r_rank="" r_members="" r_group="" r_version=""
    r_wait_pos="" r_wait_no=""
    while IFS= read -r _l; do
        case "$_l" in
            id=*)         r_id=${_l#id=} ;;
            status=*)     r_status=${_l#status=} ;;
            reason=*)     r_reason=${_l#reason=} ;;
            op=*)         r_op=${_l#op=} ;;
            item=*)       r_item=${_l#item=} ;;
            order=*)      r_order=${_l#order=} ;;
            detail=*)     r_detail=${_l#detail=} ;;
            qty=*)        r_qty=${_l#qty=} ;;
            expires_at=*) r_exp=${_l#expires_at=} ;;
            capacity=*)   r_capacity=${_l#capacity=} ;;
            seq=*)        r_seq=${_l#seq=} ;;
            rank=*)       r_rank=${_l#rank=} ;;
            members=*)    r_members=${_l#members=} ;;
            group=*)      r_group=${_l#group=} ;;
            version=*)    r_version=${_l#version=} ;;
            wait_pos=*)   r_wait_pos=${_l#wait_pos=} ;;
            wait_no=*)    r_wait_no=${_l#wait_no=} ;;
        esac
    done <<EOF
$(json_fields "$1")
EOF
    _line="result id=$r_id status=$r_status"
    line_field reason "$r_reason"; line_field op "$r_op"; line_field item "$r_item"
    line_field qty "$r_qty"; line_field order "$r_order"; line_field expires_at "$r_exp"
    line_field capacity "$r_capacity"; line_field group "$r_group"
    line_field version "$r_version"; line_field wait_pos "$r_wait_pos"; line_field wait_no "$r_wait_no"
    line_field seq "$r_seq"; line_field rank "$r_rank"
    line_field members "$r_members"
    [ -n "$r_detail" ] && _line="$_line detail=\"$r_detail\""
    echo "$_line"
    case "$r_status/$r_op" in
        granted/buy)
            if [ -n "$r_exp" ]; then
                _left=""
                if [ -n "$_now" ]; then
                    _s=$(( (r_exp - _now) / 1000 )); [ "$_s" -lt 0 ] && _s=0
                    _left=" ($_s s left)"
                fi
                _msg="Reserved: ${r_qty:-1} x $r_item (order $r_order). Confirm before it expires$_left."
            else
                _msg="Got it! ${r_qty:-1} x $r_item is yours (order $r_order)."
            fi ;;
        granted/group)   _msg="Your group ($(echo "$r_members" | sed 's/,/, /g')) has beds in room $r_item." ;;
        granted/switch)  _msg="Moved: your bed is now in room $r_item." ;;
        granted/swap)    _msg="Swapped: your bed is now in room $r_item." ;;
        granted/*)       _msg="Your bed is in room $r_item." ;;
        done/confirm)    _msg="Order $r_order is confirmed. Thank you!" ;;
        done/cancel)     _msg="Order $r_order is cancelled; the units went back on sale." ;;
        done/release)    _msg="You gave back your bed in room $r_item." ;;
        done/invite)     _msg="Invitation sent (group $r_group)." ;;
        done/accept)     _msg="You joined group $r_group; your other invitations were declined." ;;
        done/decline)    _msg="You declined the invitation to group $r_group." ;;
        done/leave)      _msg="You left group $r_group." ;;
        done/prefs)      _msg="Your group's preferences are saved (group $r_group)." ;;
        done/*)          _msg="Done." ;;
        waiting/*)       _msg=$(waiting_message "$r_op" "$r_wait_pos") ;;
        rejected/*)      _msg=$(reason_message "$r_reason") ;;
        invalid/*)       _msg="Something went wrong on our side. Please try again later." ;;
        *)               _msg="Unknown status \"$r_status\"." ;;
    esac
    echo "message: $_msg"
    [ "$r_status" = invalid ] &&
        echo "developer: allocd refused the request as $r_reason: $(printf '%s' "$r_detail" | json_unescape) -- fix the producer, do not retry as is"
    return 0
}
