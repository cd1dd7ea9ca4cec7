#!/bin/sh
# daemon-commands.sh -- every Redis command allocd can send, found in its
# sources (run from the repository root): argv literals of arg_str/cmd_open,
# the first string of an argv initializer, "CMD %s" formats, EVAL/EVALSHA
# and the redis.call()s of the Lua scripts (scripts run with the caller's
# ACL). Prints one lowercase word per line, sorted; words that are not
# commands (RIGHT, PX, MOVED, ...) are dropped by the test, which asks the
# server (COMMAND INFO). A multi-word literal like "CLUSTER SLOTS" gives
# "cluster|slots". test_acl checks that the daemon role allows each.
set -e
dir=${1:-daemon}
{
    grep -rhoE '(arg_str|cmd_open)\([a-z_>.-]+, "[A-Z]+"' "$dir" | sed -E 's/.*"([A-Z]+)"/\1/'
    grep -rhoE '\{ "[A-Z]+", "[A-Z]+"' "$dir" | sed -E 's/\{ "([A-Z]+)", "([A-Z]+)"/\1|\2/'
    grep -rhoE '\{ "[A-Z]+"( \}|,)' "$dir" | sed -E 's/\{ "([A-Z]+)".*/\1/'
    grep -rhoE '"[A-Z]+( [A-Z]+)?( %s|")' "$dir" | grep -E ' %s|^"[A-Z]+ [A-Z]+"$' |
        sed -E 's/"([A-Z]+)( ([A-Z]+))?.*/\1|\3/; s/\|$//'
    grep -rhoE 'av\[0\] = "[A-Z]+"' "$dir" | sed -E 's/.*"([A-Z]+)"/\1/'
    grep -rhoE "redis\.call\('[A-Z]+'" "$dir" | sed -E "s/.*'([A-Z]+)'/\1/"
} | tr 'A-Z' 'a-z' | sort -u
