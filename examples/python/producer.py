#!/usr/bin/python3
"""allocd example: push a request with its queue position, then wait for it.

    export ALLOCD_REDIS=unix:///run/redis/redis.sock   # or redis://host:6379 (default 127.0.0.1)
    /usr/bin/python3 producer.py buy sale1 --user u1 --item sku1 --qty 2
    /usr/bin/python3 producer.py buy sale1 --user u9 --item sku1 --wait     # waitlist when sold out
    /usr/bin/python3 producer.py confirm sale1 --user u1 --order 1209845770283447512
    /usr/bin/python3 producer.py cancel sale1 --user u1 --order 1209845770283447512
    /usr/bin/python3 producer.py choose dorm25 --user s1 --room R101
    /usr/bin/python3 producer.py auto dorm25 --user s2 --prefs R101,R102 --filter building=7 --filter floor:=3
    /usr/bin/python3 producer.py invite dorm25 --user s3 --to s4,s5        # groups formed by consent
    /usr/bin/python3 producer.py accept dorm25 --user s4 --from s3
    /usr/bin/python3 producer.py prefs dorm25 --user s4 --prefs R201,R202 --version 0
    /usr/bin/python3 producer.py group dorm25 --user s3                   # (groups=listed: --members s3,s4)
    /usr/bin/python3 producer.py swap dorm25 --user s1 --with s2          # waits for s2's swap
    /usr/bin/python3 producer.py switch dorm25 --user s1 --room R102
    /usr/bin/python3 producer.py release dorm25 --user s1
    /usr/bin/python3 producer.py raw sale1 '{"id":"x1","user":"u1","op":"fly"}'

buy, choose, auto and group take --wait ("wait":true, contract 9.5): instead of
sold_out / room_full / no_room the request joins the waitlist; its `waiting`
result is replaced once by the final one, and this waits for that too.
Every command takes --id (default: a new UUID). Re-running a command with the
same --id is safe: allocd applies an id once and the same result comes back.
Prints `pushed id=... ordinal=N ahead=K`, then what poller.py prints.

Needs redis-py (Debian: apt-get install python3-redis). See docs/INTEGRATION.md.
"""
import argparse
import json
import sys
import time
import uuid

import redis

from poller import key, wait_and_report, with_redis


def new_request_id():
    """One id per user action. Create it when the user clicks, keep it with the
    action (session, form token, job row) and reuse it for every retry."""
    return str(uuid.uuid4())


def push(r, batch, request, attempts=3):
    """RPUSH with the position transaction; returns the request's ordinal.

    MULTI; RPUSH P:{B}:queue <json>; HGET P:{B}:stats dequeued; EXEC
    ordinal = L + D. The HGET must be inside the same MULTI: read separately,
    allocd may dequeue in between and the ordinal would be wrong.

    On a connection error we cannot know whether the push happened, so we push
    the *same* JSON (same id) again: a duplicate is not applied twice.
    """
    body = json.dumps(request, separators=(",", ":"))
    for attempt in range(1, attempts + 1):
        try:
            pipe = r.pipeline(transaction=True)          # MULTI ... EXEC
            pipe.rpush(key(batch, "queue"), body)
            pipe.hget(key(batch, "stats"), "dequeued")
            length, dequeued = pipe.execute()
            return length + int(dequeued or 0)
        except (redis.ConnectionError, redis.TimeoutError):
            if attempt == attempts:
                raise
            time.sleep(0.2 * attempt)


def parse_filter(pairs):
    """ATTR=VALUE compares with the string "VALUE"; ATTR:=JSON with a JSON value
    (floor:=3 matches {"floor":3}, floor=3 matches {"floor":"3"})."""
    out = {}
    for kv in pairs:
        k, v = kv.split("=", 1)
        if k.endswith(":"):
            out[k[:-1]] = json.loads(v)
        else:
            out[k] = v
    return out


def build_request(a):
    req = {"id": a.id or new_request_id(), "user": a.user, "op": a.op}
    if getattr(a, "wait", False):
        req["wait"] = True                        # join the waitlist instead of a refusal
    if a.op == "buy":
        req["item"] = a.item
        if a.qty != 1:
            req["qty"] = a.qty
    elif a.op in ("confirm", "cancel"):
        req["order"] = a.order                    # the decimal string from the buy result
    elif a.op in ("choose", "switch"):
        req["room"] = a.room
    elif a.op in ("auto", "group", "prefs"):
        if a.prefs is not None:
            req["prefs"] = [p for p in a.prefs.split(",") if p]
        if a.filter:
            req["filter"] = parse_filter(a.filter)
        if a.op == "group" and a.members:          # groups=listed only
            req["members"] = [m for m in a.members.split(",") if m]
        if a.op == "prefs":
            req["version"] = a.version             # the version you read
    elif a.op == "invite":
        req["to"] = [u for u in a.to.split(",") if u]
    elif a.op in ("accept", "decline"):
        req["from"] = getattr(a, "from")
    elif a.op == "swap":
        req["with"] = a.with_
    return req


def main(argv=None):
    ap = argparse.ArgumentParser(description="Push an allocd request and wait for its result.")
    sub = ap.add_subparsers(dest="op", required=True)

    def cmd(name, **kw):
        p = sub.add_parser(name)
        p.add_argument("batch")
        if name != "raw":
            p.add_argument("--user", required=True)
            p.add_argument("--id", help="request id (default: a new UUID); reuse it to retry")
        p.add_argument("--timeout", type=float, default=30.0)
        p.add_argument("--no-wait", action="store_true", help="only push and print the ordinal")
        if name in ("buy", "choose", "auto", "group"):
            p.add_argument("--wait", action="store_true",
                           help="join the waitlist instead of sold_out / room_full / no_room")
        return p

    cmd("buy").add_argument("--item", required=True)
    sub.choices["buy"].add_argument("--qty", type=int, default=1)
    for name in ("confirm", "cancel"):
        cmd(name).add_argument("--order", required=True)
    for name in ("choose", "switch"):
        cmd(name).add_argument("--room", required=True)
    for name in ("auto", "group", "prefs"):
        p = cmd(name)
        p.add_argument("--prefs", help="comma-separated room ids, in order of preference")
        p.add_argument("--filter", action="append", metavar="ATTR=VALUE",
                       help="attrs filter; ATTR:=JSON for numbers/booleans; repeatable")
        if name == "group":
            p.add_argument("--members", help="groups=listed: comma-separated user ids, including --user")
        if name == "prefs":
            p.add_argument("--version", type=int, required=True, help="the group's version you read")
    cmd("release")
    cmd("leave")
    cmd("invite").add_argument("--to", required=True, help="comma-separated user ids")
    for name in ("accept", "decline"):
        cmd(name).add_argument("--from", required=True, help="a member of the inviting group")
    cmd("swap").add_argument("--with", dest="with_", required=True, help="the student to swap beds with")
    cmd("raw").add_argument("json", help="a request object as JSON, pushed as it is")
    a = ap.parse_args(argv)

    if a.op == "raw":
        req = json.loads(a.json)
    else:
        req = build_request(a)
    req_id = str(req.get("id"))

    def push_and_wait(r):
        ordinal = push(r, a.batch, req)
        print("pushed id=%s batch=%s ordinal=%d" % (req_id, a.batch, ordinal), flush=True)
        if a.no_wait:
            return 0
        return wait_and_report(r, a.batch, req_id, ordinal, a.timeout,
                               out=lambda s: print(s, flush=True))

    return with_redis(push_and_wait)


if __name__ == "__main__":
    sys.exit(main())
