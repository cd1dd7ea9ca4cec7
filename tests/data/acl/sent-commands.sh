#!/bin/sh
# sent-commands.sh DIR -- every Redis command the C sources under DIR can
# send (run from the repository root; DIR is daemon or tools/allocctl):
# argv literals (argbuf_str, cmd_open, ctl_args_add), the first string of an
# argv initializer, "CMD %s" formats and the format strings of rcmd,
# redisCommand, redisAppendCommand and command_pumping (cmd_archive.c),
# EVAL/EVALSHA, and the redis.call()s
# of Lua scripts (scripts run with the caller's ACL). Prints one lowercase
# word per line, sorted; a two-word literal like "CLUSTER SLOTS" gives
# "cluster|slots". Words that are not commands (RIGHT, PX, MOVED, ...) are
# dropped by the test, which asks the server (COMMAND INFO); test_acl checks
# that the role of DIR (daemon, operator) allows every one. cmd_acl.c is
# skipped: it prints ACL rules, it does not send them.
set -e
dir=${1:-daemon}
g() { grep -rhoE --include='*.c' --exclude=cmd_acl.c "$@" "$dir" || true; }
{
    g '(argbuf_str|cmd_open|ctl_args_add)\(&?[a-z_>.-]+, "[A-Z]+"' | sed -E 's/.*"([A-Z]+)"/\1/'
    g '\{ "[A-Z]+", "[A-Z]+"' | sed -E 's/\{ "([A-Z]+)", "([A-Z]+)"/\1|\2/'
    g '\{ "[A-Z]+"( \}|,)' | sed -E 's/\{ "([A-Z]+)".*/\1/'
    g '"[A-Z]+( [A-Z]+)?( %s|")' | grep -E ' %s|^"[A-Z]+ [A-Z]+"$' |
        sed -E 's/"([A-Z]+)( ([A-Z]+))?.*/\1|\3/; s/\|$//'
    g '(rcmd|redisCommand|redisAppendCommand|command_pumping)\([a-z>-]+, "[A-Z]+' | sed -E 's/.*"([A-Z]+)/\1/'
    g 'av\[0\] = "[A-Z]+"' | sed -E 's/.*"([A-Z]+)"/\1/'
    g "redis\.call\('[A-Z]+'" | sed -E "s/.*'([A-Z]+)'/\1/"
} | tr 'A-Z' 'a-z' | sort -u
