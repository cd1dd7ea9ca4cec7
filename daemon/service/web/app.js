/* allocd dashboard: reads the JSON API every 2 s and renders it. Read-only:
 * it sends nothing but GETs. Plain JavaScript, no build step, no outside
 * scripts. Everything from the server goes through esc() (dead entries,
 * user ids and attrs hold arbitrary input).
 *
 *   #/                     every batch, every instance  (/api/overview)
 *   #/batch/B              one batch                     (/api/batch)
 *   #/rooms/B[/BUILDING]   beds by building and floor    (/api/rooms, /api/room)
 *   #/round/B[?offset=N]   groups, lottery, slots, swaps (/api/round)
 *
 * Times are shown as local time and "in 3 min" / "2 h ago", never as epoch
 * milliseconds. Token: a URL like /#token=T (the fragment never reaches the
 * server or its logs) or the login form puts it in sessionStorage; it is
 * sent as "Authorization: Bearer T". */
'use strict';

const REFRESH_MS = 2000;
let timer = null;
const ui = { room: null, dead: {} };   /* the room opened, dead entries expanded */

function esc(v) {
  return String(v === null || v === undefined ? '' : v).replace(/[&<>"']/g,
    c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function num(v) { return v === null || v === undefined ? '-' : Number(v).toLocaleString('en'); }
function dur(ms) {
  if (ms === null || ms === undefined) return '-';
  ms = Math.abs(ms);
  if (ms < 1000) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  if (s < 3600) { const m = Math.floor(s / 60), r = Math.floor(s % 60); return m + ' min' + (m < 10 && r ? ' ' + r + ' s' : ''); }
  if (s < 172800) return (s / 3600).toFixed(s < 36000 ? 1 : 0) + ' h';
  return (s / 86400).toFixed(0) + ' days';
}
/* "in 3 min" or "2 h ago" */
function rel(at, now) {
  if (!at) return '-';
  const d = at - now;
  return Math.abs(d) < 1000 ? 'now' : d > 0 ? 'in ' + dur(d) : dur(d) + ' ago';
}
/* local time, with the date when not today, and the relative time */
function when(at, now) {
  if (!at) return '-';
  const t = new Date(at), today = new Date(now);
  const time = t.toLocaleTimeString('en-GB');
  const day = t.toDateString() === today.toDateString() ? '' :
    t.toLocaleDateString('en-GB', { day: 'numeric', month: 'short', year: 'numeric' }) + ' ';
  return `<time datetime="${t.toISOString()}" title="${esc(t.toString())}">${day}${time}</time> <small>(${rel(at, now)})</small>`;
}
function us(v) { return v === null || v === undefined ? '-' : (v >= 1000 ? (v / 1000).toFixed(1) + ' ms' : v + ' µs'); }
function rate(v) { return v === null || v === undefined ? '-' : v.toFixed(v < 10 ? 1 : 0) + '/s'; }
/* a chart's time label: seconds too when the chart spans under 10 min */
function hm(ms, span) {
  const o = { hour: '2-digit', minute: '2-digit' };
  if (span < 600000) o.second = '2-digit';
  return new Date(ms).toLocaleTimeString('en-GB', o);
}
/* a countdown: 1:02:03, 2:03 */
function clock(ms) {
  const t = Math.max(0, Math.floor(ms / 1000)), h = Math.floor(t / 3600), m = Math.floor(t / 60) % 60, sec = t % 60;
  const two = v => String(v).padStart(2, '0');
  return h ? `${h}:${two(m)}:${two(sec)}` : `${m}:${two(sec)}`;
}
function plural(n, one, many) { return `${num(n)} ${n === 1 ? one : many}`; }

function takeTokenFromUrl() {
  const m = location.hash.match(/[#?&]token=([^&]+)/);
  if (!m) return;
  sessionStorage.setItem('allocd-token', decodeURIComponent(m[1]));
  const rest = location.hash.replace(/[?&]?#?token=[^&]+/, '').replace(/^#?$/, '#/');
  history.replaceState(null, '', location.pathname + (rest.startsWith('#') ? rest : '#' + rest));
}

async function api(path) {
  const headers = {};
  const tok = sessionStorage.getItem('allocd-token');
  if (tok) headers.Authorization = 'Bearer ' + tok;
  const r = await fetch(path, { headers, cache: 'no-store' });
  if (r.status === 401) { const e = new Error('token required'); e.auth = true; throw e; }
  if (!r.ok && r.status !== 404) throw new Error('HTTP ' + r.status);
  return r.json();
}

function stateTag(s) { return `<span class="state state-${esc(s)}">${esc(s || '?')}</span>`; }
function bar(used, total, title) {
  if (!total) return '-';
  const pct = Math.max(0, Math.min(100, 100 * used / total));
  return `<span class="bar" title="${esc(title)}"><span style="width:${pct.toFixed(1)}%"></span></span> ${pct.toFixed(0)}%`;
}
function progress(b) {
  const used = b.capacity - (b.free_units || 0);
  return bar(used, b.capacity, `${num(used)} of ${num(b.capacity)} given`);
}

/* requests/s over the watcher's history (10 s bins): an SVG line with a
 * y axis (requests/s, 0 to a round peak) and an x axis (local time) */
function chart(points, w, h, small) {
  if (!points || points.length < 2) return '<span class="empty">collecting…</span>';
  const peak = Math.max(...points.map(p => p[1]));
  const top = niceMax(peak);
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const L = small ? 30 : 48, B = small ? 12 : 22, T = 6, R = 8;
  const x = t => L + (t - t0) / Math.max(1, t1 - t0) * (w - L - R);
  const y = v => T + (h - T - B) * (1 - v / top);
  const line = points.map(p => x(p[0]).toFixed(1) + ',' + y(p[1]).toFixed(1)).join(' ');
  const fs = small ? 9 : 11;
  let axes = `<line x1="${L}" y1="${T}" x2="${L}" y2="${h - B}" class="axis"/><line x1="${L}" y1="${h - B}" x2="${w - R}" y2="${h - B}" class="axis"/>`;
  for (const v of small ? [0, top] : [0, top / 2, top]) {
    axes += `<text x="${L - 3}" y="${y(v) + fs / 3}" text-anchor="end" font-size="${fs}">${fmtRate(v)}</text>`;
    if (!small && v) axes += `<line x1="${L}" y1="${y(v)}" x2="${w - R}" y2="${y(v)}" class="grid"/>`;
  }
  const ticks = small ? [t0, t1] : [t0, t0 + (t1 - t0) / 2, t1];
  ticks.forEach((t, i) => {
    const anchor = i === 0 ? 'start' : i === ticks.length - 1 ? 'end' : 'middle';
    axes += `<text x="${x(t)}" y="${h - 2}" text-anchor="${anchor}" font-size="${fs}">${hm(t, t1 - t0)}</text>`;
  });
  const span = dur(t1 - t0);
  return `<svg class="chart" width="${w}" height="${h}" role="img" aria-label="requests per second, last ${span}, peak ${peak.toFixed(1)}/s">` +
    `<title>requests/s over the last ${span} (${hm(t0, t1 - t0)} to ${hm(t1, t1 - t0)}); peak ${peak.toFixed(1)}/s</title>${axes}` +
    `<polyline fill="none" stroke="#2f7de1" stroke-width="1.5" points="${line}"/></svg>`;
}
function niceMax(v) {
  if (v <= 1) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}
function fmtRate(v) { return (v >= 1000 ? (v / 1000).toFixed(v % 1000 ? 1 : 0) + 'k' : String(+v.toFixed(1))) + '/s'; }

/* stats.rejected is the batch's (every instance, ever); the breakdown by
 * reason is what this instance decided since it took the batch: said so
 * when the two differ */
function rejects(b) {
  const total = num(b.rejected);
  if (!b.rejects) return total;
  const parts = Object.entries(b.rejects).map(([k, v]) => `${esc(k)} ${num(v)}`);
  if (!parts.length) return total;
  const sum = Object.values(b.rejects).reduce((a, v) => a + v, 0);
  if (sum === b.rejected) return `${total} <small>(${parts.join(', ')})</small>`;
  return `${total} <small title="by reason: decided by this instance since it took the batch">(this instance: ${parts.join(', ')}; ${num(sum)} of ${total})</small>`;
}

function batchRow(b, now) {
  const stale = b.seen_at ? now - b.seen_at > 5000 : true;
  const age = b.oldest_queued_age_ms;
  const id = encodeURIComponent(b.id);
  return `<tr data-batch="${esc(b.id)}">
    <td><a href="#/batch/${id}">${esc(b.id)}</a>${b.kind === 'room' ? ` <small><a href="#/rooms/${id}">rooms</a> · <a href="#/round/${id}">round</a></small>` : ''}</td>
    <td>${esc(b.kind)}</td><td>${stateTag(b.state)}${stale ? ' <span class="warn">stale</span>' : ''}</td>
    <td class="mono">${b.owner ? esc(b.owner) : '<span class="warn">none</span>'}</td>
    <td class="num queued">${num(b.queued)}</td>
    <td class="num ${age > 10000 ? 'warn' : ''}">${age ? dur(age) : '-'}</td>
    <td class="num">${rate(b.rate_1m)}</td><td>${chart(b.chart, 170, 40, true)}</td>
    <td>${progress(b)}</td><td class="num">${rejects(b)}</td>
    <td class="num">${num(b.waiting)}</td>
    <td class="num ${b.dead ? 'warn' : ''}">${num(b.dead)}</td>
    <td class="num latency">${us(b.decision_p50_us)} / ${us(b.decision_p99_us)}</td></tr>`;
}

function instanceRow(i, now) {
  return `<tr data-instance="${esc(i.name)}"><td class="mono">${esc(i.name)}</td>
    <td>${i.up ? 'up' : '<span class="warn">gone</span>'}</td><td>${esc(i.state)}</td>
    <td>${esc(i.version)}</td><td class="num">${esc(i.pid)}</td>
    <td class="num">${i.heartbeat_at ? rel(i.heartbeat_at, now) : '-'}</td>
    <td class="leases">${(i.leases || []).map(b => `<a href="#/batch/${encodeURIComponent(b)}">${esc(b)}</a>`).join(', ') || '<span class="empty">none</span>'}</td></tr>`;
}

function renderOverview(d) {
  const now = d.now;
  const rows = d.batches.map(b => batchRow(b, now)).join('');
  const inst = d.instances.map(i => instanceRow(i, now)).join('');
  return `<h2>Batches (${d.batches.length})</h2>
  <p class="note">Figures of each batch as Redis holds them (every instance); "-" latency: no decision in the last 20 s.</p>
  <table id="batches"><thead><tr><th>batch</th><th>kind</th><th>state</th><th>owner</th>
    <th>queued</th><th>oldest queued</th><th>req/s (1 min)</th><th>req/s over time</th>
    <th>given</th><th>rejected</th><th>waitlist</th><th>dead</th><th>latency p50 / p99</th></tr></thead>
  <tbody>${rows || '<tr><td colspan="13" class="empty">no batches in P:batches</td></tr>'}</tbody></table>
  <h2>Instances (${d.instances.length})</h2>
  <table id="instances"><thead><tr><th>instance</th><th>up</th><th>state</th><th>version</th><th>pid</th>
    <th>heartbeat</th><th>leases</th></tr></thead>
  <tbody>${inst || '<tr><td colspan="7" class="empty">no heartbeats</td></tr>'}</tbody></table>`;
}

function kv(pairs, id) {
  return `<dl class="kv"${id ? ` id="${id}"` : ''}>` + pairs.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join('') + '</dl>';
}

function nav(b, here) {
  const id = encodeURIComponent(b.id);
  const links = [['batch', `#/batch/${id}`, 'batch']];
  if (b.kind === 'room') links.push(['rooms', `#/rooms/${id}`, 'rooms'], ['round', `#/round/${id}`, 'groups, lottery, slots, swaps']);
  return `<p class="nav"><a href="#/">all batches</a> · ` +
    links.map(([k, h, t]) => k === here ? `<b>${t}</b>` : `<a href="${h}">${t}</a>`).join(' · ') + '</p>';
}

/* meta fields that are times (ms since the epoch) */
const TIME_FIELDS = new Set(['opens_at', 'closes_at', 'at', 'since', 'expires_at', 'updated_at', 'retry_at', 'joined_at']);
const MS_FIELDS = new Set(['hold_ms', 'wait_ms', 'rate_window_ms', 'penalty_ms']);
function fieldValue(k, v, now) {
  if (TIME_FIELDS.has(k) && /^\d{12,}$/.test(String(v))) return when(Number(v), now);
  if (TIME_FIELDS.has(k) && String(v) === '0') return '<span class="empty">none</span>';
  if (MS_FIELDS.has(k) && /^\d+$/.test(String(v))) return Number(v) ? dur(Number(v)) : '0';
  return `<span class="mono">${esc(v)}</span>`;
}

/* One row per event: a chunk-format entry (contract 11.1) holds n events
 * [type, user, item, qty, order, req, at, ...]. */
function logEvents(entries) {
  const out = [];
  for (const e of entries) {
    if (e.format === 'chunk') {
      let evs = [];
      try { evs = JSON.parse(e.events || '[]'); } catch (x) { evs = []; }
      for (const v of evs) {
        const extra = v.find((x, i) => i > 6 && x && typeof x === 'object') || {};
        out.push({ id: e.id, type: v[0], user: v[1], item: v[2], qty: v[3], order: v[4], req: v[5], at: v[6],
                   expires_at: typeof v[7] === 'number' ? v[7] : 0, ...extra });
      }
    } else out.push(e);
  }
  return out;
}

function logTable(log, now) {
  if (log === null) return '<p class="empty">loading…</p>';
  const evs = logEvents(log);
  if (!evs.length) return '<p class="empty">no events yet</p>';
  const skip = new Set(['id', 'type', 'event', 'at', 'format', 'n']);
  return `<table id="log"><thead><tr><th>at</th><th>event</th><th>user</th><th>item</th><th>other fields</th></tr></thead><tbody>` +
    evs.slice(0, 40).map(e => `<tr><td>${e.at ? when(Number(e.at), now) : '-'}</td><td>${esc(e.type || e.event || '')}</td>
      <td class="mono">${esc(e.user || '')}</td><td class="mono">${esc(e.item || '')}</td><td class="mono">${
      Object.entries(e).filter(([k, v]) => !skip.has(k) && k !== 'user' && k !== 'item' && v !== '' && v !== 0 && v !== '0')
        .map(([k, v]) => TIME_FIELDS.has(k) ? esc(k) + '=' + when(Number(v), now) : esc(k + '=' + (typeof v === 'object' ? JSON.stringify(v) : v))).join(' ')}</td></tr>`).join('') +
    '</tbody></table>';
}

function deadTable(d, b, now) {
  if (d.dead_recent === null) return '<p class="empty">loading…</p>';
  if (!d.dead_recent.length) return '<p class="empty">no dead entries</p>';
  return `<table id="dead"><thead><tr><th>at</th><th>error</th><th>raw</th></tr></thead><tbody>` +
    d.dead_recent.map(e => {
      const key = `${b.id}/${e.index}/${e.at}`, whole = ui.dead[key];
      const raw = whole !== undefined ? whole : e.raw;
      const more = e.raw_cut && whole === undefined ?
        ` <button class="expand" data-key="${esc(key)}" data-batch="${esc(b.id)}" data-index="${e.index}" data-at="${e.at || ''}">show all ${num(e.raw_bytes)} bytes</button>` : '';
      return `<tr><td>${e.at ? when(e.at, now) : '-'}</td><td>${esc(e.error)}</td><td class="mono raw">${esc(raw)}${e.raw_cut && whole === undefined ? '…' : ''}${more}</td></tr>`;
    }).join('') + '</tbody></table>';
}

function renderBatch(d) {
  if (d.error) return `<p class="warn">${esc(d.error)}</p><p><a href="#/">all batches</a></p>`;
  const b = d.batch, now = d.now;
  const byStatus = d.results_by_status ? Object.entries(d.results_by_status).map(([k, v]) => `${esc(k)} ${num(v)}`).join(', ') : null;
  const batch = kv([
    ['state', stateTag(b.state)], ['kind', esc(b.kind)],
    ['owner (lease)', b.owner ? `<span class="mono">${esc(b.owner)}</span>, renewed within ${dur(b.lease_ttl_ms)}` : '<span class="warn">none</span>'],
    ['queued', num(b.queued) + (b.ctl_queued ? `, ${num(b.ctl_queued)} admin commands` : '')],
    ['oldest queued', b.oldest_queued_age_ms ? dur(b.oldest_queued_age_ms) : '-'],
    ['requests/s', `${rate(b.rate_1m)} (1 min), ${rate(b.rate_5m)} (5 min)`],
    ['given', progress(b) + ` (${num(b.capacity - (b.free_units || 0))} of ${num(b.capacity)}, ${num(b.free_units)} free)`],
    ['dequeued / processed', `${num(b.dequeued)} / ${num(b.processed)}`],
    ['granted / done / rejected / invalid', `${num(b.granted)} / ${num(b.done)} / ${rejects(b)} / ${num(b.invalid)}`],
    ['participants', num(b.participants)], ['waitlist', `${num(b.waiting)} waiting, ${num(b.wait_served)} served`],
    ...(b.kind === 'room' ? [['swap offers open', num(b.swap_offers || 0)]] : []),
    ['dead', num(b.dead)], ['latency p50 / p99 (last 20 s)', `${us(b.decision_p50_us)} / ${us(b.decision_p99_us)}`],
    ['stats written', b.updated_at ? when(b.updated_at, now) : '-']], 'batch-figures');
  const inst = kv([
    ['instance', `<span class="mono">${esc(d.instance)}</span>`],
    ['results decided here', byStatus ? byStatus : '<span class="empty">none: the batch is served elsewhere</span>'],
    ['lease changes seen', num(b.lease_changes)]], 'instance-figures');
  const meta = kv(Object.entries(d.meta || {}).map(([k, v]) => [k, fieldValue(k, v, now)]));
  const span = b.chart && b.chart.length > 1 ? dur(b.chart[b.chart.length - 1][0] - b.chart[0][0]) : '-';
  return `${nav(b, 'batch')}<h2 id="title">Batch ${esc(b.id)}</h2>
    <div class="cols"><div><h3>The batch (Redis: every instance, since it began)</h3>${batch}</div>
    <div><h3>This instance (since it took the batch)</h3>${inst}
    <h3>Requests/s over the last ${span}</h3>${chart(b.chart, 560, 180, false)}</div></div>
    <h2>Recent events (event log)</h2>${logTable(d.log, now)}
    <h2>Dead entries (latest ${d.dead_recent ? d.dead_recent.length : 0} of ${num(b.dead)})</h2>${deadTable(d, b, now)}
    <h2>Definition (meta)</h2>${meta}`;
}

/* ---- rooms ---- */

/* contract 11.2: only_X (a value or a list) and same_X */
function rules(r) {
  const out = Object.entries(r || {}).map(([k, v]) => {
    if (k.startsWith('only_')) return `only ${esc(k.slice(5))} = ${esc(Array.isArray(v) ? v.join(' or ') : v)}`;
    if (k.startsWith('same_')) return v === true || v === 'true' ? `same ${esc(k.slice(5))}` : `same ${esc(k.slice(5))}: ${esc(v)}`;
    return esc(k + '=' + v);
  });
  return out.length ? out.map(t => `<span class="rule">${t}</span>`).join(' ') : '<span class="empty">anyone</span>';
}
function beds(r) {
  let s = '';
  for (let i = 0; i < r.beds && i < 12; i++) s += i < r.taken ? '<i class="bed taken"></i>' : '<i class="bed"></i>';
  return s + (r.beds > 12 ? ' …' : '');
}
function fillCells(t) {
  return `<td class="num">${num(t.rooms)}</td><td class="num">${num(t.beds)}</td><td class="num">${num(t.taken)}</td>
    <td class="num free">${num(t.free)}</td><td>${bar(t.taken, t.beds, `${num(t.taken)} of ${num(t.beds)} beds taken`)}</td>`;
}

function renderRooms(d, building, room) {
  if (d.error) return `<p class="warn">${esc(d.error)}</p><p><a href="#/">all batches</a></p>`;
  const b = d.batch, id = encodeURIComponent(b.id);
  const head = `${nav(b, 'rooms')}<h2 id="title">Rooms of ${esc(b.id)}${building ? ', building ' + esc(building) : ''}</h2>`;
  if (d.loading) return head + '<p class="empty">loading the round from Redis…</p>';
  const t = d.total;
  let html = head + `<p class="summary">${num(t.rooms)} rooms, ${num(t.beds)} beds: <b>${num(t.taken)} taken</b>, <b>${num(t.free)} free</b> ${bar(t.taken, t.beds, '')}
    <small>(read from Redis ${d.now - d.round_seen_at < 1000 ? 'just now' : rel(d.round_seen_at, d.now)})</small></p>`;
  html += `<table id="buildings"><thead><tr><th>building</th><th>rooms</th><th>beds</th><th>taken</th><th>free</th><th>taken</th><th>free beds by floor</th></tr></thead><tbody>` +
    d.buildings.map(g => `<tr data-building="${esc(g.building)}"${g.building === building ? ' class="sel"' : ''}>
      <td><a href="#/rooms/${id}/${encodeURIComponent(g.building)}">${esc(g.building)}</a></td>${fillCells(g)}
      <td>${g.floors.map(f => `<span class="chip${f.free ? '' : ' full'}" title="floor ${esc(f.floor)}: ${num(f.taken)} of ${num(f.beds)} beds taken">floor ${esc(f.floor)}: ${num(f.free)} free</span>`).join(' ')}</td></tr>`).join('') +
    '</tbody></table>';
  if (!building) return html + '<p class="note">Pick a building to see its rooms, their rules and who holds each bed.</p>';
  html += `<h2>Rooms of building ${esc(building)} (${num((d.rooms || []).length)})</h2>
    <table id="rooms"><thead><tr><th>floor</th><th>room</th><th>beds</th><th>taken</th><th>free</th><th>beds</th><th>who may hold it (11.2)</th><th>other attributes</th></tr></thead><tbody>` +
    (d.rooms || []).map(r => `<tr data-room="${esc(r.room)}" class="room${r.room === (room && room.room) ? ' sel' : ''}${r.free ? '' : ' full'}">
      <td>${esc(r.floor)}</td><td><a href="#" class="open-room" data-room="${esc(r.room)}">${esc(r.room)}</a></td>
      <td class="num">${num(r.beds)}</td><td class="num">${num(r.taken)}</td><td class="num">${num(r.free)}</td><td>${beds(r)}</td>
      <td class="rules">${rules(r.rules)}</td><td class="mono">${esc(Object.entries(r.attrs || {}).map(([k, v]) => k + '=' + v).join(' '))}</td></tr>`).join('') +
    '</tbody></table>';
  return html;
}

function renderRoomPanel(d) {
  if (!d) return '';
  if (d.loading) return '<aside id="room-panel"><p class="empty">loading…</p></aside>';
  if (d.error || !d.room) return `<aside id="room-panel"><p class="warn">${esc(d.error || 'no room')}</p></aside>`;
  const r = d.room, now = d.now;
  const rows = r.holders.slice().sort((a, b) => a.user.localeCompare(b.user, 'en', { numeric: true })).map(h => {
    const order = (h.orders && h.orders[0]) || h;
    const held = order.state === 'held' || (order.expires_at && order.state !== 'confirmed');
    return `<tr data-holder="${esc(h.user)}"><td class="mono">${esc(h.user)}</td><td>${h.since ? when(h.since, now) : '-'}</td>
      <td class="mono">${esc(h.req || '')}</td><td class="mono">${esc(h.group || '')}</td>
      <td>${held ? 'held until ' + when(order.expires_at, now) : (order.state ? esc(order.state) : 'final')}${h.by ? ' (by ' + esc(h.by) + ')' : ''}</td></tr>`;
  }).join('');
  return `<aside id="room-panel"><h3>Room ${esc(r.room)} <small>building ${esc(r.building)}, floor ${esc(r.floor)}</small>
    <button class="close-room">close</button></h3>
    <p>${num(r.taken)} of ${num(r.beds)} beds taken, ${num(r.free)} free. ${rules(r.rules)}</p>
    <table id="holders"><thead><tr><th>holder</th><th>since</th><th>request</th><th>group</th><th>bed</th></tr></thead>
    <tbody>${rows || '<tr><td colspan="5" class="empty">nobody holds a bed here</td></tr>'}</tbody></table></aside>`;
}

/* ---- groups, lottery, slots, swaps ---- */

/* The watcher's replay of the draw (service/watch_lottery.h): the pool,
 * the seed and every served request's result against the replayed order. */
function verifyText(v, now) {
  const at = v.checked_at ? `, checked ${when(v.checked_at, now)}` : '';
  switch (v.state) {
  case 'match': return `<span class="ok">✓ MATCH: the ${num(v.served)} served of ${num(v.pool)} pool requests follow the replayed draw</span>${at}`;
  case 'mismatch': return `<span class="warn">✗ MISMATCH: ${num(v.differences)} difference${v.differences === 1 ? '' : 's'}; the first: ${esc(v.first || '')}</span>${at}`;
  case 'serving': return `<span class="empty">the draw is being served (${num(v.served)} so far): checked when it is over</span>`;
  case 'error': return `<span class="warn">could not be checked: ${esc(v.first || '')}</span>`;
  case 'not revealed': return '<span class="empty">not revealed yet: the replay needs the seed</span>';
  default: return '<span class="empty">being checked…</span>';
  }
}

function renderLottery(l, now) {
  if (l.early !== 'shuffle') return `<p class="empty">No opening lottery (early = ${esc(l.early)}): requests before the opening are refused.</p>` +
    kv([['opens', l.opens_at ? when(l.opens_at, now) : 'at once']], 'lottery');
  const check = l.commit_matches_seed === null ? '<span class="empty">the seed is revealed at the draw</span>' :
    l.commit_matches_seed ? '<span class="ok">✓ SHA-256(seed) equals the commitment</span>' :
    '<span class="warn">✗ SHA-256(seed) differs from the commitment</span>';
  /* ticks each second between refreshes, on the server's clock (skew:
   * this browser's clock minus the server's) */
  const countdown = l.opens_at > now ? `<b class="countdown" data-until="${l.opens_at}" data-skew="${Date.now() - now}">opens in ${clock(l.opens_at - now)}</b>` : 'opened';
  return kv([
    ['opens', `${when(l.opens_at, now)} · ${countdown}`],
    ['draw', `users, not requests${l.draw_by === 'points' ? ', by points then drawn order' : ''}`],
    ['tickets (users) / requests kept', `${num(l.tickets)} / ${num(l.early_kept)}`],
    ['commitment', l.commit ? `<span class="mono">${esc(l.commit)}</span>` : '<span class="empty">none yet: written with the first early request</span>'],
    ['seed', l.seed ? `<span class="mono">${esc(l.seed)}</span>` : '<span class="empty">secret until the draw</span>'],
    ['seed matches commitment', check],
    ['the whole draw (lottery verify)', `<span id="lottery-verify">${verifyText(l.verify || {}, now)}</span> · replay it yourself with <code>${esc(l.verify_command)}</code>`]], 'lottery');
}

function renderSlots(s, now) {
  if (!s.users) return '<p class="empty">No selection slots: every user uses the batch\'s opening.</p>';
  const rows = s.next.map(([at, n]) => `<tr><td>${when(at, now)}</td><td class="num">${num(n)}</td></tr>`).join('');
  return kv([['users with a slot', num(s.users)], ['may be served now', `${num(s.open)} (${(100 * s.open / s.users).toFixed(0)}%)`],
    ['first slot', when(s.first, now)], ['last slot', when(s.last, now)]], 'slots') +
    (rows ? `<table id="next-slots"><thead><tr><th>next slots</th><th>users</th></tr></thead><tbody>${rows}</tbody></table>` : '');
}

function renderGroups(g, id) {
  const rows = g.list.map(x => `<tr data-group="${esc(x.id)}"><td class="mono">${esc(x.id)}</td><td class="mono">${esc(x.leader)}</td>
    <td class="mono">${esc((x.members || []).join(', '))}</td>
    <td class="mono">${(x.invited || []).length ? esc(x.invited.join(', ')) : '<span class="empty">none</span>'}</td>
    <td class="mono">${esc((x.prefs || []).join(', '))}${x.filter && Object.keys(x.filter).length ? ' <small>filter ' + esc(JSON.stringify(x.filter)) + '</small>' : ''}</td>
    <td class="num">${num(x.version)}</td></tr>`).join('');
  const pages = g.total > g.page ? `<p class="pager">groups ${num(g.offset + 1)}-${num(Math.min(g.total, g.offset + g.page))} of ${num(g.total)}
    ${g.offset > 0 ? `<a href="#/round/${id}?offset=${Math.max(0, g.offset - g.page)}">previous</a>` : ''}
    ${g.offset + g.page < g.total ? `<a href="#/round/${id}?offset=${g.offset + g.page}">next</a>` : ''}</p>` : '';
  return `<p>${plural(g.total, 'group', 'groups')}, ${plural(g.members, 'member', 'members')}, ${plural(g.invited, 'invitation', 'invitations')} pending.</p>${pages}
    <table id="groups"><thead><tr><th>group</th><th>leader</th><th>members</th><th>invited (pending)</th><th>shared preferences</th><th>version</th></tr></thead>
    <tbody>${rows || '<tr><td colspan="6" class="empty">no groups</td></tr>'}</tbody></table>`;
}

function renderSwaps(s) {
  const rows = s.list.map(x => `<tr><td class="mono">${esc(x.user)}</td><td class="mono">${esc(x.room)}</td><td>⇄</td>
    <td class="mono">${esc(x.with)}</td><td class="mono">${esc(x.with_room || '-')}</td><td class="mono">${esc(x.req)}</td></tr>`).join('');
  return `<p>${plural(s.total, 'open offer', 'open offers')}${s.total > s.list.length ? `, the first ${s.list.length} listed` : ''}.</p>
    <table id="swaps"><thead><tr><th>offer by</th><th>holds</th><th></th><th>to</th><th>who holds</th><th>request</th></tr></thead>
    <tbody>${rows || '<tr><td colspan="6" class="empty">no open swap offers</td></tr>'}</tbody></table>`;
}

function renderRound(d) {
  if (d.error) return `<p class="warn">${esc(d.error)}</p><p><a href="#/">all batches</a></p>`;
  const b = d.batch, now = d.now, id = encodeURIComponent(b.id);
  let html = `${nav(b, 'round')}<h2 id="title">Round of ${esc(b.id)}</h2>
    <div class="cols"><div><h3>Opening lottery</h3>${renderLottery(d.lottery, now)}</div>`;
  if (d.loading) return html + '</div><p class="empty">loading the round from Redis…</p>';
  html += `<div><h3>Selection slots</h3>${renderSlots(d.slots, now)}</div></div>
    <h2>Groups</h2>${renderGroups(d.groups, id)}<h2>Open swap offers</h2>${renderSwaps(d.swaps)}`;
  return html;
}

/* ---- the loop ---- */

function route() {
  const h = location.hash;
  let m;
  if ((m = h.match(/^#\/batch\/([^?&/]+)/))) return { view: 'batch', id: m[1] };
  if ((m = h.match(/^#\/rooms\/([^?&/]+)(?:\/([^?&]+))?/))) return { view: 'rooms', id: m[1], building: m[2] ? decodeURIComponent(m[2]) : null };
  if ((m = h.match(/^#\/round\/([^?&/]+)(?:\?offset=(\d+))?/))) return { view: 'round', id: m[1], offset: m[2] || 0 };
  return { view: 'overview' };
}

async function load(r) {
  if (r.view === 'batch') return [await api('api/batch?id=' + r.id), d => renderBatch(d)];
  if (r.view === 'round') return [await api(`api/round?id=${r.id}&offset=${r.offset}`), d => renderRound(d)];
  if (r.view === 'rooms') {
    const d = await api('api/rooms?id=' + r.id + (r.building ? '&building=' + encodeURIComponent(r.building) : ''));
    const room = ui.room ? await api(`api/room?id=${r.id}&room=${encodeURIComponent(ui.room)}`) : null;
    return [d, x => renderRooms(x, r.building, room && room.room) + renderRoomPanel(room)];
  }
  return [await api('api/overview'), d => renderOverview(d)];
}

async function refresh() {
  clearTimeout(timer);
  const main = document.getElementById('main'), status = document.getElementById('status');
  try {
    const [d, render] = await load(route());
    document.getElementById('login').hidden = true;
    main.innerHTML = render(d);
    if (d.instance) document.getElementById('who').textContent = `${d.instance} · allocd ${d.version}`;
    status.textContent = (d.redis === false ? 'Redis unreachable · ' : '') + 'updated ' + new Date().toLocaleTimeString('en-GB');
    status.className = 'status' + (d.redis === false ? ' bad' : '');
  } catch (e) {
    status.textContent = e.message;
    status.className = 'status bad';
    if (e.auth) { document.getElementById('login').hidden = false; main.innerHTML = ''; return; }
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

document.getElementById('main').addEventListener('click', async ev => {
  const t = ev.target.closest('.open-room, .close-room, button.expand');
  if (!t) return;
  ev.preventDefault();
  if (t.classList.contains('open-room')) ui.room = t.dataset.room;
  else if (t.classList.contains('close-room')) ui.room = null;
  else {
    const d = await api(`api/dead?id=${encodeURIComponent(t.dataset.batch)}&index=${t.dataset.index}&at=${t.dataset.at}`);
    ui.dead[t.dataset.key] = d.entry ? d.entry.raw : '(no longer among the latest)';
  }
  refresh();
});
document.getElementById('login').addEventListener('submit', ev => {
  ev.preventDefault();
  sessionStorage.setItem('allocd-token', document.getElementById('token').value);
  refresh();
});
window.addEventListener('hashchange', () => { takeTokenFromUrl(); ui.room = null; refresh(); });
setInterval(() => document.querySelectorAll('.countdown[data-until]').forEach(el => {
  const left = Number(el.dataset.until) - (Date.now() - Number(el.dataset.skew));
  el.textContent = left > 0 ? 'opens in ' + clock(left) : 'opening now';
}), 1000);
takeTokenFromUrl();
/* a room opened by a link (#/rooms/B/BUILDING?room=R) */
{ const m = location.hash.match(/[?&]room=([^&]+)/); if (m) ui.room = decodeURIComponent(m[1]); }
refresh();
