/* allocd dashboard: reads /api/overview (every batch, every instance) and
 * /api/batch?id=B (one batch with its recent log and dead entries) every
 * 2 s and renders them. Read-only: it sends nothing but GETs. Plain
 * JavaScript, no build step, no outside scripts. Everything from the
 * server goes through esc() (dead entries hold arbitrary user input).
 *
 * Token: a URL like /#token=T (the fragment never reaches the server or
 * its logs) or the login form puts it in sessionStorage; it is sent as
 * "Authorization: Bearer T". */
'use strict';

const REFRESH_MS = 2000;
let timer = null;

function esc(v) {
  return String(v === null || v === undefined ? '' : v).replace(/[&<>"']/g,
    c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function num(v) { return v === null || v === undefined ? '-' : Number(v).toLocaleString('en'); }
function dur(ms) {
  if (ms === null || ms === undefined) return '-';
  if (ms < 1000) return ms + ' ms';
  const s = ms / 1000;
  if (s < 120) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  if (s < 7200) return (s / 60).toFixed(0) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}
function us(v) { return v === null || v === undefined ? '-' : (v >= 1000 ? (v / 1000).toFixed(1) + ' ms' : v + ' µs'); }
function rate(v) { return v === null || v === undefined ? '-' : v.toFixed(v < 10 ? 1 : 0) + '/s'; }

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

function progress(b) {
  if (!b.capacity) return '-';
  const used = b.capacity - (b.free_units || 0);
  const pct = Math.max(0, Math.min(100, 100 * used / b.capacity));
  return `<span class="bar" title="${num(used)} of ${num(b.capacity)} given"><span style="width:${pct.toFixed(1)}%"></span></span> ${pct.toFixed(0)}%`;
}

/* requests/s over the watcher's history (10 s bins) as an SVG polyline */
function chart(points, w, h) {
  if (!points || points.length < 2) return '<span class="empty">collecting…</span>';
  const max = Math.max(1, ...points.map(p => p[1]));
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const xy = points.map(p => [((p[0] - t0) / Math.max(1, t1 - t0)) * (w - 2) + 1,
                              h - 1 - (p[1] / max) * (h - 2)]);
  const line = xy.map(p => p[0].toFixed(1) + ',' + p[1].toFixed(1)).join(' ');
  const span = dur(t1 - t0);
  return `<svg class="chart" width="${w}" height="${h}" role="img" aria-label="requests per second, last ${span}, peak ${max.toFixed(1)}/s">` +
    `<title>requests/s over the last ${span}; peak ${max.toFixed(1)}/s</title>` +
    `<polyline fill="none" stroke="#2f7de1" stroke-width="1.5" points="${line}"/></svg>`;
}

function rejects(b) {
  if (!b.rejects) return b.rejected === null ? '-' : num(b.rejected);
  const parts = Object.entries(b.rejects).map(([k, v]) => `${esc(k)} ${num(v)}`);
  return num(b.rejected) + (parts.length ? ` <small>(${parts.join(', ')})</small>` : '');
}

function batchRow(b, now) {
  const stale = b.seen_at ? now - b.seen_at > 5000 : true;
  const age = b.oldest_queued_age_ms;
  return `<tr data-batch="${esc(b.id)}">
    <td><a href="#/batch/${encodeURIComponent(b.id)}">${esc(b.id)}</a></td>
    <td>${esc(b.kind)}</td><td>${stateTag(b.state)}${stale ? ' <span class="warn">stale</span>' : ''}</td>
    <td class="mono">${b.owner ? esc(b.owner) : '<span class="warn">none</span>'}</td>
    <td class="num queued">${num(b.queued)}</td>
    <td class="num ${age > 10000 ? 'warn' : ''}">${age ? dur(age) : '-'}</td>
    <td class="num">${rate(b.rate_1m)}</td><td>${chart(b.chart, 140, 28)}</td>
    <td>${progress(b)}</td><td class="num">${rejects(b)}</td>
    <td class="num">${num(b.waiting)}</td>
    <td class="num ${b.dead ? 'warn' : ''}">${num(b.dead)}</td>
    <td class="num">${us(b.decision_p50_us)} / ${us(b.decision_p99_us)}</td></tr>`;
}

function instanceRow(i, now) {
  return `<tr data-instance="${esc(i.name)}"><td class="mono">${esc(i.name)}</td>
    <td>${i.up ? 'up' : '<span class="warn">gone</span>'}</td><td>${esc(i.state)}</td>
    <td>${esc(i.version)}</td><td class="num">${esc(i.pid)}</td>
    <td class="num">${i.heartbeat_at ? dur(now - i.heartbeat_at) + ' ago' : '-'}</td>
    <td class="leases">${(i.leases || []).map(b => `<a href="#/batch/${encodeURIComponent(b)}">${esc(b)}</a>`).join(', ') || '<span class="empty">none</span>'}</td></tr>`;
}

function renderOverview(d) {
  const now = d.now;
  const rows = d.batches.map(b => batchRow(b, now)).join('');
  const inst = d.instances.map(i => instanceRow(i, now)).join('');
  return `<h2>Batches (${d.batches.length})</h2>
  <table id="batches"><thead><tr><th>batch</th><th>kind</th><th>state</th><th>owner</th>
    <th>queued</th><th>oldest queued</th><th>req/s (1 min)</th><th>req/s, last 10 min</th>
    <th>given</th><th>rejected</th><th>waitlist</th><th>dead</th><th>latency p50 / p99</th></tr></thead>
  <tbody>${rows || '<tr><td colspan="13" class="empty">no batches in P:batches</td></tr>'}</tbody></table>
  <h2>Instances (${d.instances.length})</h2>
  <table id="instances"><thead><tr><th>instance</th><th>up</th><th>state</th><th>version</th><th>pid</th>
    <th>heartbeat</th><th>leases</th></tr></thead>
  <tbody>${inst || '<tr><td colspan="7" class="empty">no heartbeats</td></tr>'}</tbody></table>`;
}

function kv(pairs) {
  return '<dl class="kv">' + pairs.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join('') + '</dl>';
}

function renderBatch(d) {
  if (d.error) return `<p class="warn">${esc(d.error)}</p><p><a href="#/">all batches</a></p>`;
  const b = d.batch;
  const byStatus = d.results_by_status ? Object.entries(d.results_by_status).map(([k, v]) => `${esc(k)} ${num(v)}`).join(', ') : null;
  const info = kv([
    ['state', stateTag(b.state)], ['kind', esc(b.kind)],
    ['owner (lease)', b.owner ? `<span class="mono">${esc(b.owner)}</span>, ${dur(b.lease_ttl_ms)} left` : '<span class="warn">none</span>'],
    ['queued', num(b.queued) + (b.ctl_queued ? `, ${num(b.ctl_queued)} admin commands` : '')],
    ['oldest queued', b.oldest_queued_age_ms ? dur(b.oldest_queued_age_ms) : '-'],
    ['requests/s', `${rate(b.rate_1m)} (1 min), ${rate(b.rate_5m)} (5 min)`],
    ['given', progress(b) + ` (${num(b.capacity - (b.free_units || 0))} of ${num(b.capacity)}, ${num(b.free_units)} free)`],
    ['dequeued / processed', `${num(b.dequeued)} / ${num(b.processed)}`],
    ['granted / done / rejected / invalid', `${num(b.granted)} / ${num(b.done)} / ${rejects(b)} / ${num(b.invalid)}`],
    ['results (this instance)', byStatus ? byStatus : '<span class="empty">served elsewhere</span>'],
    ['participants', num(b.participants)], ['waitlist', `${num(b.waiting)} waiting, ${num(b.wait_served)} served`],
    ...(b.kind === 'room' ? [['swap offers open', num(b.swap_offers || 0)]] : []),
    ['dead', num(b.dead)], ['latency p50 / p99', `${us(b.decision_p50_us)} / ${us(b.decision_p99_us)}`],
    ['lease changes seen', num(b.lease_changes)]]);
  const meta = kv(Object.entries(d.meta || {}).map(([k, v]) => [k, `<span class="mono">${esc(v)}</span>`]));
  const log = d.log === null ? '<p class="empty">loading…</p>' : (d.log.length ?
    `<table id="log"><thead><tr><th>entry</th><th>event</th><th>fields</th></tr></thead><tbody>` +
    d.log.map(e => `<tr><td class="mono">${esc(e.id)}</td><td>${esc(e.type || e.event || '')}</td><td class="mono">${
      esc(Object.entries(e).filter(([k, v]) => k !== 'id' && k !== 'type' && k !== 'event' && v !== '').map(([k, v]) => k + '=' + v).join(' '))}</td></tr>`).join('') +
    '</tbody></table>' : '<p class="empty">no events yet</p>');
  const dead = d.dead_recent === null ? '<p class="empty">loading…</p>' : (d.dead_recent.length ?
    `<table id="dead"><thead><tr><th>at</th><th>error</th><th>raw</th></tr></thead><tbody>` +
    d.dead_recent.map(s => { let e; try { e = JSON.parse(s); } catch (x) { e = { raw: s }; }
      return `<tr><td>${e.at ? esc(new Date(e.at).toISOString()) : '-'}</td><td>${esc(e.error)}</td><td class="mono">${esc(e.raw)}</td></tr>`; }).join('') +
    '</tbody></table>' : '<p class="empty">no dead entries</p>');
  return `<p><a href="#/">all batches</a></p><h2 id="title">Batch ${esc(b.id)}</h2>${info}
    <h2>Requests/s over the last ${b.chart && b.chart.length > 1 ? dur(b.chart[b.chart.length - 1][0] - b.chart[0][0]) : '-'}</h2>${chart(b.chart, 640, 120)}
    <h2>Recent results (event log)</h2>${log}<h2>Dead entries (latest ${d.dead_recent ? d.dead_recent.length : 0} of ${num(b.dead)})</h2>${dead}
    <h2>Definition (meta)</h2>${meta}`;
}

async function refresh() {
  clearTimeout(timer);
  const main = document.getElementById('main'), status = document.getElementById('status');
  const m = location.hash.match(/^#\/batch\/([^?&]+)/);
  try {
    const d = m ? await api('api/batch?id=' + m[1]) : await api('api/overview');
    document.getElementById('login').hidden = true;
    main.innerHTML = m ? renderBatch(d) : renderOverview(d);
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

document.getElementById('login').addEventListener('submit', ev => {
  ev.preventDefault();
  sessionStorage.setItem('allocd-token', document.getElementById('token').value);
  refresh();
});
window.addEventListener('hashchange', () => { takeTokenFromUrl(); refresh(); });
takeTokenFromUrl();
refresh();
