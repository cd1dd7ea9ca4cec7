#!/usr/bin/env node
// allocd example: wait for a request's result and say what it means.
//
// Used as a module by producer.mjs, and as a command on its own: a front end
// that only knows a request id (and, ideally, the ordinal the producer got)
// polls the result here.
//
//   ALLOCD_REDIS=unix:///run/redis.sock node poller.mjs sale1 r-900 --ordinal 10900
//   node poller.mjs --explain '{"id":"r-1","status":"rejected","reason":"sold_out"}'
//
// Prints the same lines as the Python example:
//   position id=r-900 ahead=149 state=open -- 149 requests ahead of you
//   result id=r-900 status=granted op=buy item=sku1 qty=1 order=... seq=10900 rank=4087
//   message: Got it! 1 x sku1 is yours (order ...).
//   beat id=r-900 percent=79 -- you beat 79% of 20000 participants
// A `waiting` result -- a swap offer (contract 9.3) or a waitlist place of a
// request sent with "wait":true (9.5) -- is not final: it is shown once as
//   waiting id=t-9 -- You are on the waitlist (place 3). Keep this page open: ...
// and polled until its final result replaces it (exactly once).
// Exit status: 0 with a result (whatever its status), 3 when --timeout ran
// out first (still queued: poll again later with the same id), 1 on a Redis
// error, 2 on bad usage.
//
// Needs the npm package `redis` (node-redis v5): npm ci. See docs/INTEGRATION.md.
import { createClient } from 'redis';
import { pathToFileURL } from 'node:url';

export const DEFAULT_URL = 'redis://127.0.0.1:6379';

// What to show the user for every outcome the contract defines.
export const REASON_MESSAGES = {
  sold_out: 'Sorry, that item is sold out (or fewer units are left than you asked for).',
  room_full: 'That room has no free bed left. Pick another room.',
  no_room: 'No room matching your choices has enough free beds.',
  limit: 'You already hold the most units one person may have.',
  already_holding: 'You already have a bed (or you are already in that room).',
  member_busy: 'Someone in your group already has a bed; they must release it first.',
  not_holding: 'You do not hold a bed, so there is nothing to switch or release.',
  unknown_item: 'That item or room does not exist in this sale.',
  unknown_order: 'We cannot find that order for your account.',
  expired: 'Your reservation expired before it was confirmed; the units went back on sale.',
  not_open: 'The sale has not opened yet. Please come back at the opening time.',
  closed: 'The sale is closed.',
  paused: 'The sale is paused for a moment. Please try again shortly.',
  throttled: 'Too many attempts in a short time. Please wait a few seconds and try again.',
  wrong_kind: 'This action is not available for this sale.',
  group_too_large: 'Your group is larger than a room allows.',
  no_invitation: 'There is no invitation from that student for you (it may have been withdrawn or declined).',
  not_in_group: 'You are not in a group yet: invite someone, or accept an invitation.',
  conflict: "Your group's preferences were changed meanwhile; reload them and try again.",
};

// Groups formed by consent and swaps: what a `done` of each op means.
export const DONE_MESSAGES = {
  invite: (g) => `Invitation sent (group ${g}).`,
  accept: (g) => `You joined group ${g}; your other invitations were declined.`,
  decline: (g) => `You declined the invitation to group ${g}.`,
  leave: (g) => `You left group ${g}.`,
  prefs: (g) => `Your group's preferences are saved (group ${g}).`,
};

// redis://[user:password@]host:port, rediss://..., or unix:///path/to/redis.sock;
// $ALLOCD_REDIS_USER and $ALLOCD_REDIS_PASSWORD give the ACL login (see
// docs/DEPLOYMENT.md, "Lock it down"), so the password need not be in the URL.
export async function connect(url = process.env.ALLOCD_REDIS || DEFAULT_URL) {
  // node-redis retries the first connection for ever by default: give up at
  // once when Redis cannot be reached at all (exit 1, as documented), and
  // only after a connection was up keep reconnecting with a backoff.
  let wasReady = false;
  const reconnectStrategy = (retries, cause) =>
    wasReady ? Math.min(100 * 2 ** retries, 3000) : (cause || new Error('cannot connect'));
  const opts = url.startsWith('unix://')
    ? { socket: { path: url.slice('unix://'.length), connectTimeout: 5000, reconnectStrategy } }
    : { url, socket: { connectTimeout: 5000, reconnectStrategy } };
  if (process.env.ALLOCD_REDIS_USER) opts.username = process.env.ALLOCD_REDIS_USER;
  if (process.env.ALLOCD_REDIS_PASSWORD) opts.password = process.env.ALLOCD_REDIS_PASSWORD;
  const client = createClient(opts);
  client.on('ready', () => { wasReady = true; });
  // Without a listener an 'error' event would crash the process; after the
  // first connection node-redis reconnects by itself, commands fail meanwhile.
  client.on('error', (err) => console.error(`redis: ${err.message}`));
  await client.connect();
  return client;
}

export async function disconnect(client) {
  if (typeof client.close === 'function') await client.close(); // node-redis v5
  else await client.quit();                                     // v4
}

// P:{B}:name -- the {B} hash tag keeps a batch in one cluster slot.
export function key(batch, name, prefix = process.env.ALLOCD_PREFIX || 'alloc') {
  return `${prefix}:{${batch}}:${name}`;
}

// Now, by the Redis server's clock: never trust the client's clock.
export async function serverMs(client) {
  const t = await client.time(); // v5: ['seconds', 'microseconds']; v4: a Date
  if (t instanceof Date) return t.getTime();
  return Number(t[0]) * 1000 + Math.floor(Number(t[1]) / 1000);
}

// "You beat X%" = 100 * (participants - rank) / participants, kept in 0..100.
export function beatPercent(rank, participants) {
  if (!participants || rank == null) return null;
  return Math.max(0, Math.min(100, Math.floor((100 * (participants - rank)) / participants)));
}

// A `waiting` result is replaced exactly once, by the final result. Two
// kinds: a swap offer (op swap, contract 9.3) waits for the other student's
// answer; a buy, choose, auto or group sent with "wait":true holds a
// waitlist place (contract 9.5), wait_pos being its place when it joined.
export function waitingMessage(res) {
  if (res.op === 'swap') return "Your swap offer waits for the other student's answer.";
  const place = res.wait_pos !== undefined ? ` (place ${res.wait_pos})` : '';
  return `You are on the waitlist${place}. Keep this page open: your final result replaces this one.`;
}

// The words of the "pending" line when the timeout ran out on `waiting`.
export function waitingPending(res) {
  return res.op === 'swap' ? 'still waiting for the answer' : 'still on the waitlist';
}

// One sentence for the end user, for every status and reason.
export function userMessage(res, nowMs = null) {
  const { status, op } = res;
  const qty = res.qty ?? 1;
  if (status === 'granted') {
    if (op === 'buy') {
      if (res.expires_at != null) {
        const left = nowMs == null ? '' : ` (${Math.max(0, Math.floor((res.expires_at - nowMs) / 1000))} s left)`;
        return `Reserved: ${qty} x ${res.item} (order ${res.order}). Confirm before it expires${left}.`;
      }
      return `Got it! ${qty} x ${res.item} is yours (order ${res.order}).`;
    }
    if (op === 'group') return `Your group (${(res.members || []).join(', ')}) has beds in room ${res.item}.`;
    if (op === 'switch') return `Moved: your bed is now in room ${res.item}.`;
    if (op === 'swap') return `Swapped: your bed is now in room ${res.item}.`;
    return `Your bed is in room ${res.item}.`;
  }
  if (status === 'done') {
    if (op === 'confirm') return `Order ${res.order} is confirmed. Thank you!`;
    if (op === 'cancel') return `Order ${res.order} is cancelled; the units went back on sale.`;
    if (op === 'release') return `You gave back your bed in room ${res.item}.`;
    if (DONE_MESSAGES[op]) return DONE_MESSAGES[op](res.group);
    return 'Done.';
  }
  if (status === 'waiting') return waitingMessage(res);
  if (status === 'rejected') {
    return REASON_MESSAGES[res.reason] ?? `Your request was refused (${res.reason}).`;
  }
  if (status === 'invalid') {
    // A bug in *our* back end, not the user's fault: log the detail
    // (report() prints it as a "developer:" line), show a generic text.
    return 'Something went wrong on our side. Please try again later.';
  }
  return `Unknown status ${JSON.stringify(status)}.`;
}

// The machine-readable line: result id=... status=... key=value ...
export function formatResult(res) {
  const out = ['result', `id=${res.id}`, `status=${res.status}`];
  for (const k of ['reason', 'op', 'item', 'qty', 'order', 'expires_at', 'capacity', 'group', 'version',
    'wait_pos', 'wait_no', 'seq', 'rank']) {
    if (res[k] !== undefined) out.push(`${k}=${res[k]}`);
  }
  if (res.members) out.push(`members=${res.members.join(',')}`);
  if (res.detail !== undefined) out.push(`detail=${JSON.stringify(res.detail)}`);
  return out.join(' ');
}

export function positionText(ahead, state) {
  if (state === 'paused') return `the sale is paused; you keep your place in line (${ahead} ahead of you)`;
  if (state === 'waiting') return 'the sale has not opened yet; you are in line';
  if (ahead === 0) return 'you are next: your request is being decided';
  return `${ahead} request${ahead === 1 ? '' : 's'} ahead of you`;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Poll P:{B}:results until id has a result; show the live position
// (ahead = ordinal - 1 - dequeued_now). The delay adapts to how fast the
// queue moves (about half the expected wait, between minDelay and maxDelay),
// with jitter so thousands of pollers do not hit Redis in step.
// Resolves to the result object, or null when timeoutMs ran out.
export async function waitForResult(client, batch, id, {
  ordinal = null, timeoutMs = 30000, minDelay = 50, maxDelay = 2000, out = console.log,
} = {}) {
  const results = key(batch, 'results');
  const stats = key(batch, 'stats');
  const deadline = Date.now() + timeoutMs; // a local deadline only, never compared with allocd's times
  let delay = minDelay;
  let lastShown = null;
  let prev = null; // [time, dequeued] for the rate estimate
  for (;;) {
    // Two commands, one round trip (node-redis pipelines commands issued together).
    const [raw, [deq, st]] = await Promise.all([
      client.hGet(results, id),
      client.hmGet(stats, ['dequeued', 'state']),
    ]);
    if (raw != null) {
      const res = JSON.parse(raw);
      if (res.status !== 'waiting') return res;
      // `waiting` (a swap offer or a waitlist place) is replaced exactly
      // once, by the final result: keep polling
      if (lastShown !== 'waiting') {
        lastShown = 'waiting';
        out(`waiting id=${id} -- ${userMessage(res)}`);
      }
      if (Date.now() >= deadline) {
        out(`pending id=${id} -- ${waitingPending(res)}; check again later with the same id`);
        return null;
      }
      delay = Math.min(maxDelay, delay * 1.5);
      await sleep(delay * (0.8 + 0.4 * Math.random()));
      continue;
    }
    const dequeued = Number(deq || 0);
    const state = st || 'waiting';
    const now = Date.now();
    let ahead = null;
    if (ordinal != null) {
      ahead = Math.max(0, ordinal - 1 - dequeued);
      const shown = `${ahead}/${state}`;
      if (shown !== lastShown) {
        lastShown = shown;
        out(`position id=${id} ahead=${ahead} state=${state} -- ${positionText(ahead, state)}`);
      }
      const rate = prev && now > prev[0] && dequeued > prev[1]
        ? (dequeued - prev[1]) / (now - prev[0]) : null; // requests per ms
      prev = [now, dequeued];
      delay = rate && ahead > 0
        ? Math.min(maxDelay, Math.max(minDelay, ahead / rate / 2))
        : Math.min(maxDelay, delay * 1.5);
    } else {
      delay = Math.min(maxDelay, delay * 1.5);
    }
    if (now >= deadline) {
      out(`pending id=${id} ahead=${ahead ?? '?'} state=${state} -- still in line; check again later with the same id`);
      return null;
    }
    await sleep(Math.min(delay * (0.8 + 0.4 * Math.random()), Math.max(0, deadline - now)));
  }
}

// The result line, the user message, and for `invalid` a line for developers.
export function explain(res, nowMs = null, out = console.log) {
  out(formatResult(res));
  out(`message: ${userMessage(res, nowMs)}`);
  if (res.status === 'invalid') {
    out(`developer: allocd refused the request as ${res.reason}: ${res.detail} -- fix the producer, do not retry as is`);
  }
}

// explain() with the server's clock, and for grants "you beat X%".
export async function report(client, batch, res, out = console.log) {
  explain(res, res.expires_at != null ? await serverMs(client) : null, out);
  if (res.status === 'granted' && res.rank != null) {
    const participants = Number((await client.hGet(key(batch, 'stats'), 'participants')) || 0);
    const pct = beatPercent(res.rank, participants);
    if (pct != null) out(`beat id=${res.id} percent=${pct} -- you beat ${pct}% of ${participants} participants`);
  }
}

// waitForResult() then report(); resolves to the exit status: 0 with a
// result, 3 when timeoutMs ran out first.
export async function waitAndReport(client, batch, id, opts) {
  const res = await waitForResult(client, batch, id, opts);
  if (!res) return 3;
  await report(client, batch, res);
  return 0;
}

// Runs fn(client) on a new connection and closes it afterwards; resolves to
// fn's exit status, or to 1 after printing the Redis error that stopped it.
export async function withRedis(fn) {
  let client;
  try {
    client = await connect();
    return await fn(client);
  } catch (e) {
    console.error(`error: redis: ${e.message}`);
    return 1;
  } finally {
    if (client?.isOpen) await disconnect(client);
  }
}

// Tiny option parser shared with producer.mjs: positionals and --name value.
export function parseArgs(argv, flags = []) {
  const pos = [];
  const opt = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a.startsWith('--')) {
      const name = a.slice(2);
      if (flags.includes(name)) { opt[name] = true; continue; }
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      const v = argv[++i];
      if (name === 'filter') (opt.filter ??= []).push(v);
      else opt[name] = v;
    } else {
      pos.push(a);
    }
  }
  return { pos, opt };
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv[0] === '--explain') {
    // No Redis: what the user would be shown for each result JSON given.
    for (const raw of argv.slice(1)) explain(JSON.parse(raw));
    return 0;
  }
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
    if (args.pos.length !== 2) throw new Error('expected BATCH ID');
  } catch (e) {
    console.error(`usage: node poller.mjs BATCH ID [--ordinal N] [--timeout SECONDS]  (${e.message})`);
    return 2;
  }
  const [batch, id] = args.pos;
  const ordinal = args.opt.ordinal != null ? Number(args.opt.ordinal) : null;
  const timeoutMs = 1000 * Number(args.opt.timeout ?? 30);
  return withRedis((client) => waitAndReport(client, batch, id, { ordinal, timeoutMs }));
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main();
}
