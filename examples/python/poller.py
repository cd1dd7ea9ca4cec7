#!/usr/bin/python3
"""allocd example: wait for a request's result and say what it means.

Used as a module by producer.py, and as a command on its own: a front end
that only knows a request id (and, ideally, the ordinal the producer got)
polls the result here.

    ALLOCD_REDIS=unix:///run/redis.sock /usr/bin/python3 poller.py sale1 r-900 --ordinal 10900
    /usr/bin/python3 poller.py --explain '{"id":"r-1","status":"rejected","reason":"sold_out"}'

Prints, for machines and humans:
    position id=r-900 ahead=149 state=open -- 149 requests ahead of you
    result id=r-900 status=granted item=sku1 qty=1 order=... seq=10900 rank=4087
    message: Got it! 1 x sku1 is yours (order ...).
    beat id=r-900 percent=79 -- you beat 79% of 20000 participants
A `waiting` result -- a swap offer (contract 9.3) or a waitlist place of a
request sent with "wait":true (9.5) -- is not final: it is shown once as
    waiting id=t-9 -- You are on the waitlist (place 3). Keep this page open: ...
and polled until its final result replaces it (exactly once).
Exit status: 0 with a result (whatever its status), 3 when --timeout ran out
first (the request is still queued: poll again later with the same id;
never push a new id for it), 1 on a Redis error, 2 on bad usage.

Needs redis-py (Debian: apt-get install python3-redis). See docs/INTEGRATION.md.
"""
import argparse
import json
import os
import random
import sys
import time

import redis

DEFAULT_URL = "redis://127.0.0.1:6379"

# What to show the user for every outcome the contract defines.
REASON_MESSAGES = {
    "sold_out": "Sorry, that item is sold out (or fewer units are left than you asked for).",
    "room_full": "That room has no free bed left. Pick another room.",
    "no_room": "No room matching your choices has enough free beds.",
    "limit": "You already hold the most units one person may have.",
    "already_holding": "You already have a bed (or you are already in that room).",
    "member_busy": "Someone in your group already has a bed; they must release it first.",
    "not_holding": "You do not hold a bed, so there is nothing to switch or release.",
    "unknown_item": "That item or room does not exist in this sale.",
    "unknown_order": "We cannot find that order for your account.",
    "expired": "Your reservation expired before it was confirmed; the units went back on sale.",
    "not_open": "The sale has not opened yet. Please come back at the opening time.",
    "closed": "The sale is closed.",
    "paused": "The sale is paused for a moment. Please try again shortly.",
    "throttled": "Too many attempts in a short time. Please wait a few seconds and try again.",
    "wrong_kind": "This action is not available for this sale.",
    "group_too_large": "Your group is larger than a room allows.",
    "no_invitation": "There is no invitation from that student for you (it may have been withdrawn or declined).",
    "not_in_group": "You are not in a group yet: invite someone, or accept an invitation.",
    "conflict": "Your group's preferences were changed meanwhile; reload them and try again.",
}

# Groups formed by consent and swaps: what a `done` of each op means.
DONE_MESSAGES = {
    "invite": "Invitation sent (group %s).",
    "accept": "You joined group %s; your other invitations were declined.",
    "decline": "You declined the invitation to group %s.",
    "leave": "You left group %s.",
    "prefs": "Your group's preferences are saved (group %s).",
}


def redis_url():
    return os.environ.get("ALLOCD_REDIS", DEFAULT_URL)


def connect(url=None):
    """redis://[user:password@]host:port, rediss://..., or unix:///path/to/redis.sock.

    $ALLOCD_REDIS_USER and $ALLOCD_REDIS_PASSWORD give the ACL login (see
    docs/DEPLOYMENT.md, "Lock it down"), so the password need not be in the URL."""
    url = url or redis_url()
    kw = dict(decode_responses=True, socket_timeout=5, socket_connect_timeout=5,
              health_check_interval=30)
    if os.environ.get("ALLOCD_REDIS_USER"):
        kw["username"] = os.environ["ALLOCD_REDIS_USER"]
    if os.environ.get("ALLOCD_REDIS_PASSWORD"):
        kw["password"] = os.environ["ALLOCD_REDIS_PASSWORD"]
    if url.startswith("unix://"):
        return redis.Redis(unix_socket_path=url[len("unix://"):], **kw)
    return redis.Redis.from_url(url, **kw)


def key(batch, name, prefix=None):
    """P:{B}:name -- the {B} hash tag keeps a batch in one cluster slot."""
    prefix = prefix or os.environ.get("ALLOCD_PREFIX", "alloc")
    return "%s:{%s}:%s" % (prefix, batch, name)


def server_ms(r):
    """Now, by the Redis server's clock: never trust the client's clock."""
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def beat_percent(rank, participants):
    """'You beat X%' = 100 * (participants - rank) / participants, kept in 0..100."""
    if not participants or rank is None:
        return None
    return max(0, min(100, 100 * (participants - rank) // participants))


def waiting_message(res):
    """A `waiting` result is replaced exactly once, by the final result. Two
    kinds: a swap offer (op swap, contract 9.3) waits for the other student's
    answer; a buy, choose, auto or group sent with "wait":true holds a
    waitlist place (contract 9.5), wait_pos being its place when it joined."""
    if res.get("op") == "swap":
        return "Your swap offer waits for the other student's answer."
    place = " (place %s)" % res["wait_pos"] if "wait_pos" in res else ""
    return "You are on the waitlist%s. Keep this page open: your final result replaces this one." % place


def waiting_pending(res):
    """The words of the 'pending' line when the timeout ran out on `waiting`."""
    return "still waiting for the answer" if res.get("op") == "swap" else "still on the waitlist"


def user_message(res, now_ms=None):
    """One sentence for the end user, for every status and reason."""
    status, op = res.get("status"), res.get("op")
    if status == "granted":
        if op == "buy":
            msg = "Got it! %s x %s is yours (order %s)." % (res.get("qty", 1), res.get("item"), res.get("order"))
            if "expires_at" in res:
                left = ""
                if now_ms is not None:
                    left = " (%d s left)" % max(0, (res["expires_at"] - now_ms) // 1000)
                msg = ("Reserved: %s x %s (order %s). Confirm before it expires%s."
                       % (res.get("qty", 1), res.get("item"), res.get("order"), left))
            return msg
        if op == "group":
            return "Your group (%s) has beds in room %s." % (", ".join(res.get("members", [])), res.get("item"))
        if op == "switch":
            return "Moved: your bed is now in room %s." % res.get("item")
        if op == "swap":
            return "Swapped: your bed is now in room %s." % res.get("item")
        return "Your bed is in room %s." % res.get("item")
    if status == "done":
        if op == "confirm":
            return "Order %s is confirmed. Thank you!" % res.get("order")
        if op == "cancel":
            return "Order %s is cancelled; the units went back on sale." % res.get("order")
        if op == "release":
            return "You gave back your bed in room %s." % res.get("item")
        if op in DONE_MESSAGES:
            return DONE_MESSAGES[op] % res.get("group")
        return "Done."
    if status == "waiting":
        return waiting_message(res)
    if status == "rejected":
        reason = res.get("reason", "")
        return REASON_MESSAGES.get(reason, "Your request was refused (%s)." % reason)
    if status == "invalid":
        # A bug in *our* back end, not the user's fault: log the detail
        # (report() prints it as a "developer:" line), show a generic text.
        return "Something went wrong on our side. Please try again later."
    return "Unknown status %s." % json.dumps(status)


def format_result(res):
    """The machine-readable line: result id=... status=... key=value ..."""
    out = ["result", "id=%s" % res.get("id"), "status=%s" % res.get("status")]
    for k in ("reason", "op", "item", "qty", "order", "expires_at", "capacity", "group", "version",
              "wait_pos", "wait_no", "seq", "rank"):
        if k in res:
            out.append("%s=%s" % (k, res[k]))
    if "members" in res:
        out.append("members=%s" % ",".join(res["members"]))
    if "detail" in res:
        out.append("detail=%s" % json.dumps(res["detail"]))
    return " ".join(out)


def wait_for_result(r, batch, req_id, ordinal=None, timeout=30.0,
                    min_delay=0.05, max_delay=2.0, out=print):
    """Poll P:{B}:results until req_id has a result; show the live position.

    ahead = ordinal - 1 - dequeued_now. The delay adapts to how fast the queue
    moves (about half the expected wait, between min_delay and max_delay),
    with jitter so thousands of pollers do not hit Redis in step.
    Returns the result dict, or None when `timeout` seconds ran out.
    """
    results, stats = key(batch, "results"), key(batch, "stats")
    deadline = time.monotonic() + timeout
    delay, last_shown = min_delay, None
    prev = None  # (monotonic time, dequeued) for the rate estimate
    while True:
        pipe = r.pipeline(transaction=False)
        pipe.hget(results, req_id)
        pipe.hmget(stats, "dequeued", "state")
        raw, (dequeued, state) = pipe.execute()
        if raw is not None:
            res = json.loads(raw)
            if res.get("status") != "waiting":
                return res
            # `waiting` (a swap offer or a waitlist place) is replaced
            # exactly once, by the final result: keep polling
            if last_shown != "waiting":
                last_shown = "waiting"
                out("waiting id=%s -- %s" % (req_id, user_message(res)))
            if time.monotonic() >= deadline:
                out("pending id=%s -- %s; check again later with the same id" % (req_id, waiting_pending(res)))
                return None
            delay = min(max_delay, delay * 1.5)
            time.sleep(delay * random.uniform(0.8, 1.2))
            continue
        dequeued = int(dequeued or 0)
        state = state or "waiting"
        now = time.monotonic()
        if ordinal is not None:
            ahead = max(0, ordinal - 1 - dequeued)
            if (ahead, state) != last_shown:
                last_shown = (ahead, state)
                out("position id=%s ahead=%d state=%s -- %s" % (req_id, ahead, state, position_text(ahead, state)))
            rate = None
            if prev and now > prev[0] and dequeued > prev[1]:
                rate = (dequeued - prev[1]) / (now - prev[0])
            prev = (now, dequeued)
            if rate and ahead > 0:
                delay = min(max_delay, max(min_delay, ahead / rate / 2))
            else:
                delay = min(max_delay, delay * 1.5)
        else:
            delay = min(max_delay, delay * 1.5)
        if now >= deadline:
            ahead_s = "?" if ordinal is None else str(max(0, ordinal - 1 - dequeued))
            out("pending id=%s ahead=%s state=%s -- still in line; check again later with the same id"
                % (req_id, ahead_s, state))
            return None
        time.sleep(min(delay * random.uniform(0.8, 1.2), max(0.0, deadline - now)))


def position_text(ahead, state):
    if state == "paused":
        return "the sale is paused; you keep your place in line (%d ahead of you)" % ahead
    if state == "waiting":
        return "the sale has not opened yet; you are in line"
    if ahead == 0:
        return "you are next: your request is being decided"
    return "%d request%s ahead of you" % (ahead, "" if ahead == 1 else "s")


def explain(res, now_ms=None, out=print):
    """The result line, the user message, and for `invalid` a line for developers."""
    out(format_result(res))
    out("message: " + user_message(res, now_ms))
    if res.get("status") == "invalid":
        out("developer: allocd refused the request as %s: %s -- fix the producer, do not retry as is"
            % (res.get("reason"), res.get("detail")))


def report(r, batch, res, out=print):
    """explain() with the server's clock, and for grants 'you beat X%'."""
    explain(res, server_ms(r) if "expires_at" in res else None, out)
    if res.get("status") == "granted" and "rank" in res:
        participants = int(r.hget(key(batch, "stats"), "participants") or 0)
        pct = beat_percent(res["rank"], participants)
        if pct is not None:
            out("beat id=%s percent=%d -- you beat %d%% of %d participants"
                % (res.get("id"), pct, pct, participants))


def wait_and_report(r, batch, req_id, ordinal=None, timeout=30.0, out=print):
    """wait_for_result() then report(); returns the exit status: 0 with a
    result, 3 when `timeout` seconds ran out first."""
    res = wait_for_result(r, batch, req_id, ordinal, timeout, out=out)
    if res is None:
        return 3
    report(r, batch, res, out)
    return 0


def with_redis(fn):
    """fn(r) on a new connection: its exit status, or 1 after printing the
    Redis error that stopped it."""
    try:
        return fn(connect())
    except redis.RedisError as e:
        print("error: redis: %s" % e, file=sys.stderr)
        return 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--explain"]:
        # No Redis: what the user would be shown for each result JSON given.
        for raw in argv[1:]:
            explain(json.loads(raw))
        return 0
    ap = argparse.ArgumentParser(description="Wait for an allocd result (Redis from $ALLOCD_REDIS). "
                                 "Or: --explain RESULT_JSON... to print what the user is shown.")
    ap.add_argument("batch")
    ap.add_argument("id", help="the request id the producer pushed")
    ap.add_argument("--ordinal", type=int, help="ordinal from the push, for the live position")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")
    a = ap.parse_args(argv)
    return with_redis(lambda r: wait_and_report(r, a.batch, a.id, a.ordinal, a.timeout))


if __name__ == "__main__":
    sys.exit(main())
