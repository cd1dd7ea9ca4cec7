#!/bin/sh
# netns.sh -- the network of the partition tests, made of what this kernel
# has: network namespaces, veth pairs, ifb devices and tc's clsact qdisc
# with u32 filters and the mirred action (no netem, no iptables here).
#
# One run is three namespaces named RUN-r (Redis, and the relays), RUN-a
# and RUN-b (one allocd each). Each allocd namespace has a veth pair to the
# Redis namespace on a private link-local /30; the test talks to no other
# address. Interface names live inside the namespaces, so two runs never
# collide; only the namespace names must differ, and RUN carries the pid of
# the test that made it (alpt<pid>x<n>).
#
#   netns.sh up RUN              make the three namespaces and the links
#   netns.sh cut RUN a|b DIR     drop one direction or both, silently:
#                                DIR = both, to-redis or from-redis
#   netns.sh heal RUN a|b        remove the drops, bring the link up
#   netns.sh link RUN a|b up|down   the allocd side's link (a down link
#                                fails at once: "network unreachable")
#   netns.sh down RUN            remove the namespaces (their devices go
#                                with them; processes left inside keep
#                                the namespace alive until they exit)
#   netns.sh probe RUN           exit 0 when this kernel has what the
#                                rest needs (tried in RUN-r, then removed)
#   netns.sh sweep               remove every alpt<pid>... namespace whose
#                                test process is gone (a run killed by
#                                SIGKILL leaves them; the next run cleans)
#
# A silent drop is a u32 filter matching every packet whose mirred action
# redirects it to an ifb device that stays down: the packet vanishes
# without an error, the way a cable pulled somewhere along the path looks
# to both ends. Egress of the Redis side's veth is the Redis -> allocd
# direction, its ingress the allocd -> Redis direction.
#
# Addresses: a is 169.254.10.2, Redis is 169.254.10.1 on its side;
# b is 169.254.10.6, Redis is 169.254.10.5.
set -u

die() { echo "netns.sh: $*" >&2; exit 1; }

side_addr() { case "$1" in a) echo 1 2;; b) echo 5 6;; *) die "side must be a or b, not '$1'";; esac; }

up() {
    run=$1; hub=$run-r
    ip netns add "$hub" || die "ip netns add $hub failed"
    ip -n "$hub" link set lo up || exit 1
    for side in a b; do
        set -- $(side_addr $side)
        ns=$run-$side
        ip netns add "$ns" || die "ip netns add $ns failed"
        ip -n "$ns" link set lo up || exit 1
        ip -n "$hub" link add "v$side" type veth peer name eth0 netns "$ns" || die "veth for $side failed"
        ip -n "$hub" addr add "169.254.10.$1/30" dev "v$side" || exit 1
        ip -n "$ns" addr add "169.254.10.$2/30" dev eth0 || exit 1
        ip -n "$hub" link set "v$side" up || exit 1
        ip -n "$ns" link set eth0 up || exit 1
        ip -n "$hub" link add "drop$side" type ifb || die "no ifb device (modprobe ifb)"
        tc -n "$hub" qdisc add dev "v$side" clsact || die "no clsact qdisc"
    done
}

drop() {   # hub side direction (egress|ingress)
    tc -n "$1" filter add dev "v$2" "$3" prio 1 protocol all u32 match u32 0 0 \
        action mirred egress redirect dev "drop$2" || die "tc filter ($3) failed"
}

cut() {
    run=$1; side=$2; dir=$3; hub=$run-r
    side_addr "$side" >/dev/null
    heal_filters "$hub" "$side"
    case "$dir" in
    both) drop "$hub" "$side" egress; drop "$hub" "$side" ingress;;
    to-redis) drop "$hub" "$side" ingress;;
    from-redis) drop "$hub" "$side" egress;;
    *) die "direction must be both, to-redis or from-redis, not '$dir'";;
    esac
}

heal_filters() {
    tc -n "$1" filter del dev "v$2" egress 2>/dev/null
    tc -n "$1" filter del dev "v$2" ingress 2>/dev/null
    return 0
}

heal() {
    side_addr "$2" >/dev/null
    heal_filters "$1-r" "$2"
    ip -n "$1-$2" link set eth0 up
}

down() {
    for ns in "$1-a" "$1-b" "$1-r"; do
        ip netns del "$ns" 2>/dev/null
    done
    return 0
}

probe() {
    ns=$1-r
    ip netns add "$ns" 2>/dev/null || { echo "cannot make a network namespace"; exit 1; }
    ok=1
    ip -n "$ns" link add d0 type ifb 2>/dev/null || { echo "no ifb device"; ok=0; }
    ip -n "$ns" link add v0 type veth peer name v1 2>/dev/null || { echo "no veth device"; ok=0; }
    [ $ok = 1 ] && { tc -n "$ns" qdisc add dev v0 clsact 2>/dev/null || { echo "no clsact qdisc"; ok=0; }; }
    [ $ok = 1 ] && { tc -n "$ns" filter add dev v0 egress prio 1 protocol all u32 match u32 0 0 \
        action mirred egress redirect dev d0 2>/dev/null || { echo "no u32 filter or mirred action"; ok=0; }; }
    ip netns del "$ns" 2>/dev/null
    [ $ok = 1 ]
}

# alpt<pid>x<n>-<r|a|b>: remove it when no process <pid> runs any more.
sweep() {
    for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(alpt[0-9][0-9]*x[0-9][0-9]*-[rab]\).*/\1/p'); do
        pid=$(echo "$ns" | sed 's/^alpt\([0-9]*\)x.*/\1/')
        if [ ! -d "/proc/$pid" ]; then
            echo "netns.sh: removing $ns, left by a run that is gone (pid $pid)" >&2
            ip netns del "$ns" 2>/dev/null
        fi
    done
    return 0
}

cmd=${1:-}
[ $# -ge 1 ] && shift
case "$cmd" in
up) [ $# -eq 1 ] || die "usage: up RUN"; up "$1";;
cut) [ $# -eq 3 ] || die "usage: cut RUN a|b both|to-redis|from-redis"; cut "$@";;
heal) [ $# -eq 2 ] || die "usage: heal RUN a|b"; heal "$@";;
link) [ $# -eq 3 ] || die "usage: link RUN a|b up|down"; side_addr "$2" >/dev/null
      ip -n "$1-$2" link set eth0 "$3";;
down) [ $# -eq 1 ] || die "usage: down RUN"; down "$1";;
probe) [ $# -eq 1 ] || die "usage: probe RUN"; probe "$1";;
sweep) sweep;;
*) die "usage: netns.sh up|cut|heal|link|down|sweep ...";;
esac
