#!/usr/bin/env node
// allocd example: push a request with its queue position, then wait for it.
//
//   export ALLOCD_REDIS=unix:///run/redis/redis.sock   # or redis://host:6379 (default 127.0.0.1)
//   node producer.mjs buy sale1 --user u1 --item sku1 --qty 2
//   node producer.mjs buy sale1 --user u9 --item sku1 --wait    # waitlist when sold out
//   node producer.mjs confirm sale1 --user u1 --order 1209845770283447512
//   node producer.mjs cancel sale1 --user u1 --order 1209845770283447512
//   node producer.mjs choose dorm25 --user s1 --room R101
//   node producer.mjs auto dorm25 --user s2 --prefs R101,R102 --filter building=7 --filter floor:=3
//   node producer.mjs invite dorm25 --user s3 --to s4,s5     # groups formed by consent
//   node producer.mjs accept dorm25 --user s4 --from s3
//   node producer.mjs prefs dorm25 --user s4 --prefs R201,R202 --version 0
//   node producer.mjs group dorm25 --user s3                 # (groups=listed: --members s3,s4)
//   node producer.mjs swap dorm25 --user s1 --with s2        # waits for s2's swap
//   node producer.mjs switch dorm25 --user s1 --room R102
//   node producer.mjs release dorm25 --user s1
//   node producer.mjs raw sale1 '{"id":"x1","user":"u1","op":"fly"}'
//
// buy, choose, auto and group take --wait ("wait":true, contract 9.5): instead
// of sold_out / room_full / no_room the request joins the waitlist; its
// `waiting` result is replaced once by the final one, and this waits for it.
// Every command takes --id (default: a new UUID). Re-running a command with
// the same --id is safe: allocd applies an id once and the same result comes
// back. Also --timeout SECONDS (default 30) and --no-wait.
// Prints `pushed id=... ordinal=N`, then what poller.mjs prints.
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { key, parseArgs, waitAndReport, withRedis } from './poller.mjs';

// One id per user action. Create it when the user clicks, keep it with the
// action (session, form token, job row) and reuse it for every retry.
export function newRequestId() {
  return randomUUID();
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// RPUSH with the position transaction; resolves to the request's ordinal.
//   MULTI; RPUSH P:{B}:queue <json>; HGET P:{B}:stats dequeued; EXEC
//   ordinal = L + D
// The HGET must be inside the same MULTI: read separately, allocd may dequeue
// in between and the ordinal would be wrong. On a connection error we cannot
// know whether the push happened, so we push the *same* JSON (same id) again:
// a duplicate is not applied twice.
export async function push(client, batch, request, attempts = 3) {
  const body = JSON.stringify(request);
  for (let attempt = 1; ; attempt++) {
    try {
      const [length, dequeued] = await client
        .multi()
        .rPush(key(batch, 'queue'), body)
        .hGet(key(batch, 'stats'), 'dequeued')
        .exec();
      return Number(length) + Number(dequeued || 0);
    } catch (e) {
      // Redis *errors* (WRONGTYPE, ...) will not heal by retrying; lost connections may.
      const transient = /ECONNRESET|ECONNREFUSED|EPIPE|closed|Socket|timeout/i.test(`${e.name} ${e.message}`);
      if (!transient || attempt >= attempts) throw e;
      await sleep(200 * attempt);
    }
  }
}

// ATTR=VALUE compares with the string "VALUE"; ATTR:=JSON with a JSON value
// (floor:=3 matches {"floor":3}, floor=3 matches {"floor":"3"}).
export function parseFilter(pairs) {
  const out = {};
  for (const kv of pairs) {
    const eq = kv.indexOf('=');
    if (eq < 0) throw new Error(`--filter ${kv}: expected ATTR=VALUE`);
    const k = kv.slice(0, eq);
    const v = kv.slice(eq + 1);
    if (k.endsWith(':')) out[k.slice(0, -1)] = JSON.parse(v);
    else out[k] = v;
  }
  return out;
}

const list = (s) => (s ?? '').split(',').filter(Boolean);

export function buildRequest(op, opt) {
  const need = (name) => {
    if (opt[name] == null) throw new Error(`${op} needs --${name}`);
    return opt[name];
  };
  const req = { id: opt.id || newRequestId(), user: need('user'), op };
  if (opt.wait) {
    if (!['buy', 'choose', 'auto', 'group'].includes(op)) throw new Error(`${op} takes no --wait`);
    req.wait = true; // join the waitlist instead of a refusal
  }
  switch (op) {
    case 'buy':
      req.item = need('item');
      if (opt.qty != null && Number(opt.qty) !== 1) req.qty = Number(opt.qty);
      break;
    case 'confirm':
    case 'cancel':
      req.order = need('order'); // the decimal string from the buy result: keep it a string
      break;
    case 'choose':
    case 'switch':
      req.room = need('room');
      break;
    case 'auto':
    case 'group':
    case 'prefs':
      if (opt.prefs != null) req.prefs = list(opt.prefs);
      if (opt.filter) req.filter = parseFilter(opt.filter);
      if (op === 'group' && opt.members != null) req.members = list(opt.members); // groups=listed only
      if (op === 'prefs') req.version = Number(need('version')); // the version you read
      break;
    case 'invite':
      req.to = list(need('to'));
      break;
    case 'accept':
    case 'decline':
      req.from = need('from');
      break;
    case 'swap':
      req.with = need('with');
      break;
    case 'release':
    case 'leave':
      break;
    default:
      throw new Error(`unknown command ${op}`);
  }
  return req;
}

async function main() {
  let op, batch, req, opt;
  try {
    const args = parseArgs(process.argv.slice(2), ['no-wait', 'wait']);
    [op, batch] = args.pos;
    opt = args.opt;
    if (!op || !batch) throw new Error('expected COMMAND BATCH');
    if (op === 'raw') {
      if (args.pos.length !== 3) throw new Error('raw needs a JSON argument');
      req = JSON.parse(args.pos[2]);
    } else {
      req = buildRequest(op, opt);
    }
  } catch (e) {
    console.error('usage: node producer.mjs buy|confirm|cancel|choose|auto|group|switch|release|invite|accept|'
      + 'decline|leave|prefs|swap|raw BATCH [options]');
    console.error(`  (${e.message})`);
    return 2;
  }
  const id = String(req.id);
  return withRedis(async (client) => {
    const ordinal = await push(client, batch, req);
    console.log(`pushed id=${id} batch=${batch} ordinal=${ordinal}`);
    if (opt['no-wait']) return 0;
    return waitAndReport(client, batch, id, { ordinal, timeoutMs: 1000 * Number(opt.timeout ?? 30) });
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main();
}
