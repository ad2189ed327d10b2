// lmq-gateway web console: a single-page application with hash routes.
// No framework and no build step. Everything shown comes from the gateway's
// HTTP API and the console API under /ui/api/; text from the server is only
// ever put into the page as text (never as HTML).
'use strict';

const POLL_MS = 2000;
const AUTH_KEY = 'lmq-console-auth';
const $ = (sel, root) => (root || document).querySelector(sel);

// h builds an element: h('td', {class: 'x', onclick: f}, 'text', child...).
function h(tag, attrs, ...kids) {
  const el = tag === 'svg' || tag === 'path' || tag === 'line' || tag === 'text' || tag === 'polyline'
    ? document.createElementNS('http://www.w3.org/2000/svg', tag)
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

// ---- API access ---------------------------------------------------------

class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function authHeader() {
  return sessionStorage.getItem(AUTH_KEY) || '';
}

// api calls the gateway; it throws APIError with the server's error text.
async function api(method, path, body, headers) {
  const hdr = Object.assign({}, headers || {});
  const auth = authHeader();
  if (auth) hdr['Authorization'] = auth;
  if (body !== undefined && typeof body !== 'string' && !(body instanceof Blob)) {
    body = JSON.stringify(body);
    hdr['Content-Type'] = hdr['Content-Type'] || 'application/json';
  }
  let resp;
  try {
    resp = await fetch(path, { method, body, headers: hdr, cache: 'no-store', credentials: 'same-origin' });
  } catch (e) {
    throw new APIError(0, 'the gateway does not answer: ' + e.message);
  }
  if (resp.status === 401) {
    showLogin('The gateway asks for credentials.');
    throw new APIError(401, 'missing or wrong credentials');
  }
  const text = await resp.text();
  if (!resp.ok) {
    let msg = text.trim();
    try { msg = JSON.parse(text).error || msg; } catch (e) { /* plain text */ }
    throw new APIError(resp.status, msg || resp.statusText);
  }
  const ct = resp.headers.get('Content-Type') || '';
  if (ct.startsWith('application/json') && text) return JSON.parse(text);
  return { status: resp.status, text, headers: resp.headers };
}

const q = encodeURIComponent;

// ---- login --------------------------------------------------------------

function showLogin(why) {
  const box = $('#login');
  if (!box.hidden) return;
  box.hidden = false;
  $('#login-error').textContent = authHeader() ? 'Those credentials were refused.' : (why || '');
  $('#login-token').focus();
}

function setupLogin() {
  $('#login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const tok = $('#login-token').value.trim();
    const user = $('#login-user').value;
    const pass = $('#login-pass').value;
    let auth = '';
    if (tok) auth = 'Bearer ' + tok;
    else if (user) auth = 'Basic ' + btoa(unescape(encodeURIComponent(user + ':' + pass)));
    if (!auth) { $('#login-error').textContent = 'Enter a token, or a user and password.'; return; }
    sessionStorage.setItem(AUTH_KEY, auth);
    $('#login').hidden = true;
    $('#signout').hidden = false;
    route();
  });
  $('#signout').hidden = !authHeader();
  $('#signout').addEventListener('click', () => {
    sessionStorage.removeItem(AUTH_KEY);
    $('#signout').hidden = true;
    showLogin('Signed out.');
  });
}

// ---- formatting ---------------------------------------------------------

function fmtInt(n) { return n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US'); }
function fmtRate(r) { return r ? (r >= 10 ? r.toFixed(0) : r.toFixed(1)) + '/s' : '0'; }
function fmtBytes(b) {
  if (b === null || b === undefined || b < 0) return '?';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : b) + ' ' + u[i];
}
function fmtAge(s) { return fmtDuration(s); }

// fmtDuration shows seconds as a person reads them: "4.2 s", "3 min 20 s",
// "2 h 5 min", "3 d 4 h" (two units at most).
function fmtDuration(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return '–';
  s = Math.abs(s);
  if (s < 10) return s.toFixed(1).replace(/\.0$/, '') + ' s';
  if (s < 60) return Math.floor(s) + ' s';
  const two = (big, bigU, small, smallU) => big + ' ' + bigU + (small ? ' ' + small + ' ' + smallU : '');
  if (s < 3600) { const m = Math.floor(s / 60); return two(m, 'min', m < 10 ? Math.floor(s % 60) : 0, 's'); }
  if (s < 86400) return two(Math.floor(s / 3600), 'h', Math.floor((s % 3600) / 60), 'min');
  return two(Math.floor(s / 86400), 'd', Math.floor((s % 86400) / 3600), 'h');
}

// exactTime is a time in the browser's zone, to the second: the title of
// every human time.
function exactTime(d) {
  const p = (n) => String(n).padStart(2, '0');
  const off = -d.getTimezoneOffset();
  const zone = 'UTC' + (off === 0 ? '' : (off > 0 ? '+' : '−') + p(Math.floor(Math.abs(off) / 60)) + ':' + p(Math.abs(off) % 60));
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())} ${zone}`;
}

// relTime says when d is from now: "3 min ago", "in 20 s", "now".
function relTime(d) {
  const s = (d.getTime() - Date.now()) / 1000;
  if (Math.abs(s) < 1) return 'now';
  return s < 0 ? fmtDuration(-s) + ' ago' : 'in ' + fmtDuration(s);
}

// timeEl is a <time> showing when (a Date or RFC 3339 text) as relTime,
// after prefix, with the exact time on hover; refreshTimes keeps it current.
function timeEl(when, prefix) {
  const d = when instanceof Date ? when : new Date(when);
  if (Number.isNaN(d.getTime())) return h('span', {}, (prefix || '') + String(when));
  return h('time', { datetime: d.toISOString(), title: exactTime(d), 'data-rel': prefix || '' }, (prefix || '') + relTime(d));
}

// ageEl shows an age in seconds ("3 min 20 s") with the exact time it
// started on hover (what, e.g. 'pushed', before it).
function ageEl(age, what) {
  if (age === null || age === undefined) return h('span', {}, '–');
  const at = new Date(Date.now() - age * 1000);
  return h('span', { class: 'age', title: (what ? what + ' ' : '') + exactTime(at) }, fmtDuration(age));
}

// refreshTimes brings every relative time on the page up to date (the page
// redraws some parts only every few polls).
function refreshTimes() {
  for (const el of document.querySelectorAll('time[data-rel]')) el.textContent = el.dataset.rel + relTime(new Date(el.getAttribute('datetime')));
}
function b64bytes(s) {
  const bin = atob(s || '');
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// renderBody shows a body by its content type: JSON pretty-printed, text as
// text, anything else (or text that is not UTF-8) as a hex dump.
function renderBody(bytes, ctype) {
  const ct = (ctype || '').toLowerCase();
  const texty = ct.startsWith('text/') || ct.includes('json') || ct.includes('xml') ||
    ct.includes('javascript') || ct.includes('x-www-form-urlencoded') || ct.includes('yaml');
  if (texty) {
    let text = null;
    try { text = new TextDecoder('utf-8', { fatal: true }).decode(bytes); } catch (e) { text = null; }
    if (text !== null) {
      if (ct.includes('json')) {
        try { return h('pre', { 'data-kind': 'json' }, JSON.stringify(JSON.parse(text), null, 2)); } catch (e) { /* cut or invalid */ }
      }
      return h('pre', { 'data-kind': 'text' }, text);
    }
  }
  return h('pre', { 'data-kind': 'hex' }, hexdump(bytes));
}

function hexdump(bytes) {
  const lines = [];
  const n = Math.min(bytes.length, 4096);
  for (let off = 0; off < n; off += 16) {
    const chunk = bytes.slice(off, Math.min(off + 16, n));
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const asc = Array.from(chunk, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(off.toString(16).padStart(6, '0') + '  ' + hex.padEnd(48) + ' ' + asc);
  }
  if (bytes.length > n) lines.push('… ' + (bytes.length - n) + ' more bytes');
  return lines.join('\n') || '(empty)';
}

// ---- routing and polling ------------------------------------------------

let current = null; // the page shown: {refresh(), stop()}
let timer = null;

function route() {
  if (current && current.stop) current.stop();
  clearTimeout(timer);
  current = null;
  const hash = location.hash || '#/queues';
  const main = $('#main');
  main.replaceChildren();
  let page = 'queues';
  if (hash.startsWith('#/queue/')) {
    page = 'queues';
    let name = hash.slice('#/queue/'.length);
    try { name = decodeURIComponent(name); } catch (e) { /* shown as typed */ }
    current = queuePage(main, name);
  } else if (hash.startsWith('#/defaults')) {
    page = 'defaults';
    current = defaultsPage(main);
  } else if (hash.startsWith('#/cluster')) {
    page = 'cluster';
    current = clusterPage(main);
  } else if (hash.startsWith('#/clients')) {
    page = 'clients';
    current = clientsPage(main);
  } else {
    current = queuesPage(main);
  }
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  poll(current);
}

// poll refreshes the page now and every POLL_MS while it is shown (and the
// tab is visible), one request at a time.
async function poll(page) {
  if (page !== current) return;
  if (!document.hidden && $('#login').hidden) {
    try {
      await page.refresh();
      refreshTimes();
      setStatus('');
    } catch (e) {
      if (e.status !== 401) setStatus(e.message);
    }
  }
  if (page === current && page.live !== false) timer = setTimeout(() => poll(page), POLL_MS);
}

function setStatus(msg) { $('#status').textContent = msg; }

// ---- Queues page --------------------------------------------------------

const COLUMNS = [
  ['name', 'Queue'], ['waiting', 'Waiting'], ['in_flight', 'In flight'], ['delayed', 'Delayed'],
  ['dead_letters', 'Dead letters'], ['push_rate', 'Push rate'], ['pull_rate', 'Pull rate'],
  ['oldest_age', 'Oldest waiting'], ['bytes', 'Bytes'],
];

function queuesPage(main) {
  const st = JSON.parse(sessionStorage.getItem('lmq-console-list') || '{}');
  const state = Object.assign({ re: '', sort: 'name', desc: false, offset: 0, limit: 50 }, st);
  const save = () => sessionStorage.setItem('lmq-console-list', JSON.stringify(state));
  const filter = h('input', { id: 'filter', type: 'search', value: state.re, placeholder: 'RE2, e.g. ^jobs/', 'aria-describedby': 'filter-error', autocomplete: 'off', spellcheck: 'false' });
  const filterErr = h('p', { id: 'filter-error', class: 'error', role: 'alert' });
  const limit = h('select', { id: 'limit' }, [25, 50, 100, 250, 500].map((n) => h('option', { value: n, selected: n === state.limit }, n)));
  const summary = h('span', { id: 'summary', class: 'muted' });
  const prev = h('button', { type: 'button', class: 'secondary', id: 'prev' }, '← Previous');
  const next = h('button', { type: 'button', class: 'secondary', id: 'next' }, 'Next →');
  const headRow = h('tr');
  const tbody = h('tbody');
  const table = h('table', { id: 'queues' }, h('caption', { class: 'muted caption' }, 'Rates are this gateway\'s pushes and pulls over the last interval; sizes come from JetStream.'), h('thead', {}, headRow), tbody);
  const rates = ratesCard();
  main.append(
    h('h1', {}, 'Queues'),
    rates.el,
    h('div', { class: 'row' },
      h('div', { class: 'field grow' }, h('label', { for: 'filter' }, 'Filter by regular expression'), filter),
      h('div', { class: 'field' }, h('label', { for: 'limit' }, 'Rows per page'), limit)),
    filterErr,
    h('div', { class: 'pager' }, prev, next, summary),
    h('div', { class: 'table-wrap' }, table));
  findDeliveryBox(main);

  function drawHead() {
    headRow.replaceChildren(...COLUMNS.map(([key, label]) => {
      const sortable = key !== 'oldest_age';
      const sorted = state.sort === key;
      const th = h('th', { scope: 'col', 'aria-sort': sorted ? (state.desc ? 'descending' : 'ascending') : (sortable ? 'none' : null) },
        sortable ? h('button', { type: 'button', class: 'th-btn', 'data-sort': key, onclick: () => {
          if (state.sort === key) state.desc = !state.desc; else { state.sort = key; state.desc = key !== 'name'; }
          state.offset = 0; save(); drawHead(); page.refresh().catch((e) => setStatus(e.message));
        } }, label + (sorted ? (state.desc ? ' ▼' : ' ▲') : '')) : label);
      return th;
    }));
  }
  drawHead();

  let debounce = null;
  filter.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { state.re = filter.value; state.offset = 0; save(); page.refresh().catch((e) => setStatus(e.message)); }, 300);
  });
  limit.addEventListener('change', () => { state.limit = Number(limit.value); state.offset = 0; save(); page.refresh().catch((e) => setStatus(e.message)); });
  prev.addEventListener('click', () => { state.offset = Math.max(0, state.offset - state.limit); save(); page.refresh().catch((e) => setStatus(e.message)); });
  next.addEventListener('click', () => { state.offset += state.limit; save(); page.refresh().catch((e) => setStatus(e.message)); });

  let seq = 0;
  const page = {
    async refresh() {
      const my = ++seq;
      rates.refresh().catch((e) => setStatus(e.message));
      const params = new URLSearchParams({ sort: state.sort, desc: state.desc ? '1' : '0', offset: state.offset, limit: state.limit });
      if (state.re) params.set('re', state.re);
      let data;
      try {
        data = await api('GET', 'api/queues?' + params);
      } catch (e) {
        if (my !== seq) return;
        if (e.status === 400) {
          filterErr.textContent = e.message;
          filter.setAttribute('aria-invalid', 'true');
          return;
        }
        throw e;
      }
      if (my !== seq) return; // a newer request was sent meanwhile
      filterErr.textContent = '';
      filter.removeAttribute('aria-invalid');
      if (data.offset >= data.matched && data.matched > 0) { state.offset = Math.max(0, data.matched - state.limit); save(); return page.refresh(); }
      const first = data.matched ? data.offset + 1 : 0;
      const last = data.offset + data.rows.length;
      summary.textContent = `${fmtInt(first)}–${fmtInt(last)} of ${fmtInt(data.matched)}` + (state.re ? ` matching (${fmtInt(data.total)} queues)` : ' queues');
      prev.disabled = data.offset === 0;
      next.disabled = last >= data.matched;
      tbody.replaceChildren(...data.rows.map((r) => h('tr', { 'data-queue': r.name },
        h('th', { scope: 'row', class: 'left', class: 'plain' }, h('a', { href: '#/queue/' + q(r.name) }, r.name),
          r.paused && h('span', { class: 'badge paused', 'data-paused': '', title: 'Paused: pulls get none of its messages' }, 'paused')),
        h('td', { 'data-col': 'waiting' }, fmtInt(r.waiting)),
        h('td', { 'data-col': 'in_flight' }, fmtInt(r.in_flight)),
        h('td', { 'data-col': 'delayed' }, fmtInt(r.delayed)),
        h('td', { 'data-col': 'dead_letters' }, fmtInt(r.dead_letters)),
        h('td', { 'data-col': 'push_rate' }, fmtRate(r.push_rate)),
        h('td', { 'data-col': 'pull_rate' }, fmtRate(r.pull_rate)),
        h('td', { 'data-col': 'oldest_age' }, ageEl(r.oldest_age, 'pushed')),
        h('td', { 'data-col': 'bytes' }, fmtBytes(r.bytes)))));
      // For measurements (e2e TestConsoleManyQueues): when the first rows showed.
      if (!performance.getEntriesByName('lmq-queues-rendered').length) performance.mark('lmq-queues-rendered');
      if (!data.rows.length) tbody.append(h('tr', {}, h('td', { colspan: COLUMNS.length, class: 'left muted' }, data.total ? 'No queue matches.' : 'No queues yet: a push, pull or property update creates one.')));
    },
  };
  return page;
}

// ---- Queue page ---------------------------------------------------------

const PROP_KEYS = [
  ['accum', 'Accumulation window (s)', 'number'], ['retry', 'Retries', 'number'],
  ['timeout', 'Timeout (s)', 'number'], ['ttl', 'Time to live (s)', 'number'],
  ['dead_letter', 'Keep dead letters', 'bool'],
  ['release_on_disconnect', 'Release on RPC disconnect', 'bool'],
  ['priority', 'Default priority (0–9)', 'number'],
  // Queue control.
  ['paused', 'Paused', 'bool'], ['max_inflight', 'Max in flight (0 = no limit)', 'number'],
  ['dead_letter_queue', 'Dead-letter queue ("" = none)', 'text'],
  ['hooks', 'Hooks (JSON)', 'json'],
];

// propInput is the form field of one property: a true/false choice, or a
// text input (numbers, names, JSON).
function propInput(id, key, kind) {
  if (kind === 'bool') return h('select', { id, name: key }, h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
  return h('input', { id, name: key, inputmode: kind === 'number' ? 'decimal' : null, size: kind === 'number' ? 8 : 16,
    autocomplete: 'off', spellcheck: 'false', 'data-kind': kind, 'aria-describedby': 'props-error' });
}

// propShown is how an effective value shows in its field.
function propShown(v, kind) {
  if (kind === 'bool') return v ? 'true' : 'false';
  if (v === undefined || v === null) return '';
  return kind === 'json' ? JSON.stringify(v) : String(v);
}

// propChange reads a field against the effective value: undefined when it
// did not change (only changes are sent), else the value to send; a value
// that does not parse is sent as typed (the API says what is wrong).
function propChange(raw, cur, kind) {
  if (raw === propShown(cur, kind)) return undefined;
  if (kind === 'bool') return raw === 'true';
  if (kind === 'text') return raw;
  const t = raw.trim();
  if (t === '' || t === propShown(cur, kind)) return undefined;
  if (kind === 'json') { try { return JSON.parse(t); } catch (e) { return t; } }
  const n = Number(t);
  return Number.isNaN(n) ? t : n;
}

function queuePage(main, name) {
  const qp = q(name);
  const stat = (key, label) => h('div', { class: 'stat' }, h('div', { class: 'v', 'data-stat': key }, '–'), h('div', { class: 'k' }, label));
  const chart = h('div', { id: 'chart' });
  const propsBody = h('tbody');
  const origin = h('p', { id: 'origin', class: 'muted' });
  const propErr = h('p', { id: 'props-error', class: 'error', role: 'alert' });
  const propOk = h('p', { class: 'ok', role: 'status' });
  const inputs = {};
  const form = h('form', { id: 'props-form' },
    h('div', { class: 'row' }, PROP_KEYS.map(([key, label, kind]) => {
      const id = 'prop-' + key;
      inputs[key] = propInput(id, key, kind);
      return h('div', { class: 'field' }, h('label', { for: id }, label), inputs[key]);
    })),
    h('div', { class: 'row' },
      h('button', { type: 'submit', id: 'props-save' }, 'Save properties'),
      h('button', { type: 'button', class: 'secondary', id: 'props-reset', onclick: resetProps }, 'Reset to defaults')),
    propErr, propOk);
  form.addEventListener('submit', saveProps);

  const peekList = h('div', { id: 'peek' });
  const pushBody = h('textarea', { id: 'push-body', 'aria-describedby': 'push-result' }, '{"hello": "world"}');
  const pushType = h('input', { id: 'push-type', value: 'application/json', autocomplete: 'off' });
  const pushResult = h('p', { id: 'push-result', role: 'status' });
  const deadInfo = h('div', { id: 'dead' });
  const deadErr = h('p', { class: 'error', role: 'alert' });
  const deadList = h('div', { id: 'dead-list' });
  const respawnN = h('input', { id: 'respawn-n', value: '1', inputmode: 'numeric', size: 4 });
  const delArea = h('span', { class: 'confirm' });
  // Queue control: pause/resume and purge.
  const pausedBadge = h('span', { class: 'badge paused', id: 'paused-badge', hidden: true }, 'paused');
  const pauseBtn = h('button', { type: 'button', class: 'secondary', id: 'queue-pause', onclick: togglePause }, 'Pause');
  const purgeArea = h('span', { class: 'confirm' });
  const controlMsg = h('p', { id: 'control-result', role: 'status' });

  main.append(
    h('p', {}, h('a', { href: '#/queues' }, '← Queues')),
    h('h1', {}, name, ' ', pausedBadge),
    h('div', { class: 'stats' }, stat('waiting', 'waiting'), stat('in_flight', 'in flight'), stat('delayed', 'delayed'),
      stat('dead_letters', 'dead letters'), stat('accumulating', 'accumulating parts'), stat('bytes', 'stored')),
    h('h2', {}, 'Rates'), h('div', { class: 'legend' }, h('span', { class: 'push' }, '━ pushes/s'), h('span', { class: 'pull' }, '╍ pulls/s'), h('span', { class: 'muted', id: 'chart-span' })), chart,
    h('div', { class: 'grid2' },
      h('section', { 'aria-labelledby': 'props-title' }, h('h2', { id: 'props-title' }, 'Properties'),
        h('div', { class: 'table-wrap' }, h('table', { id: 'props' }, h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Property'), h('th', { scope: 'col', class: 'left' }, 'Effective value'), h('th', { scope: 'col', class: 'left' }, 'From'))), propsBody)),
        origin, h('h2', {}, 'Edit'), form),
      h('section', { 'aria-labelledby': 'push-title' }, h('h2', { id: 'push-title' }, 'Push a test message'),
        h('div', { class: 'field' }, h('label', { for: 'push-type' }, 'Content type'), pushType),
        h('div', { class: 'field' }, h('label', { for: 'push-body' }, 'Body'), pushBody),
        h('button', { type: 'button', id: 'push', onclick: push }, 'Push'), pushResult,
        h('h2', {}, 'Control'),
        h('p', { class: 'muted' }, 'Pause holds the queue\'s messages back from pulls (pushes are still stored; deliveries in flight can still be answered). Purge removes every waiting and delayed message; the queue, its properties and its dead letters stay.'),
        h('div', { class: 'row' }, pauseBtn, purgeArea), controlMsg,
        h('h2', {}, 'Delete'),
        h('p', { class: 'muted' }, 'Deletes the queue with all its messages and dead letters.'), delArea)),
    h('section', { id: 'dead-section', 'aria-labelledby': 'dead-title', hidden: true }, h('h2', { id: 'dead-title' }, 'Dead letters'), deadInfo,
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'secondary', id: 'dead-head', onclick: showHead }, 'Inspect oldest'),
        h('div', { class: 'field' }, h('label', { for: 'respawn-n' }, 'How many'), respawnN),
        h('button', { type: 'button', id: 'respawn', onclick: respawn }, 'Respawn'),
        h('button', { type: 'button', class: 'danger', id: 'dead-delete', onclick: () => confirmThen(deadDelArea, 'Delete all dead letters?', deleteDead) }, 'Delete all…')),
      deadErr, h('span', { class: 'confirm', id: 'dead-confirm' }), h('div', { id: 'dead-head-view' }), deadList),
    h('section', { 'aria-labelledby': 'peek-title' }, h('h2', { id: 'peek-title' }, 'Next waiting messages'),
      h('p', { class: 'muted' }, 'In the order they will be delivered: highest priority first, each priority in queue order, a message group\'s later messages after its current one. A look without taking them: nothing is delivered or changed (but for a message you delete).'),
      h('button', { type: 'button', class: 'secondary', id: 'peek-refresh', onclick: () => peek().catch((e) => setStatus(e.message)) }, 'Refresh'), peekList));
  inFlightSection(main, name);
  const deadDelArea = $('#dead-confirm', main);
  resetDelete();
  resetPurge();

  function resetPurge() {
    purgeArea.replaceChildren(h('button', { type: 'button', class: 'danger', id: 'queue-purge', onclick: () => confirmThen(purgeArea, `Remove every waiting message of "${name}"?`, purgeQueue, resetPurge, 'Yes, purge') }, 'Purge…'));
  }

  async function togglePause() {
    controlMsg.className = '';
    const paused = !(info && info.props.paused);
    try {
      await api('PATCH', '/props/' + qp, { paused });
    } catch (e) { controlMsg.className = 'error'; controlMsg.textContent = e.message; return; }
    controlMsg.className = 'ok';
    controlMsg.textContent = paused ? 'Paused.' : 'Resumed.';
    await load();
  }

  async function purgeQueue() {
    controlMsg.className = '';
    try {
      await api('DELETE', '/queues/' + qp + '/messages');
    } catch (e) { controlMsg.className = 'error'; controlMsg.textContent = e.message; return; }
    controlMsg.className = 'ok';
    controlMsg.textContent = 'Purged.';
    await Promise.all([load(), peek()]);
  }

  function resetDelete() {
    delArea.replaceChildren(h('button', { type: 'button', class: 'danger', id: 'queue-delete', onclick: () => confirmThen(delArea, `Delete queue "${name}" and all its messages?`, deleteQueue, resetDelete) }, 'Delete queue…'));
  }

  let info = null;
  let editing = false; // inputs keep what the user types until saved
  for (const el of Object.values(inputs)) { el.addEventListener('input', () => { editing = true; }); el.addEventListener('change', () => { editing = true; }); }

  async function load() {
    try {
      info = await api('GET', 'api/queue?name=' + qp);
    } catch (e) {
      if (e.status === 404) {
        main.replaceChildren(h('p', {}, h('a', { href: '#/queues' }, '← Queues')), h('h1', {}, name), h('p', { class: 'muted', id: 'gone' }, 'This queue does not exist (any more).'));
        page.live = false;
        return;
      }
      throw e;
    }
    for (const k of ['waiting', 'in_flight', 'delayed', 'dead_letters', 'accumulating']) $(`[data-stat="${k}"]`, main).textContent = fmtInt(info[k]);
    $('[data-stat="bytes"]', main).textContent = fmtBytes(info.bytes);
    pausedBadge.hidden = !info.props.paused;
    pauseBtn.textContent = info.props.paused ? 'Resume' : 'Pause';
    drawChart(chart, info);
    const from = { own: 'this queue', default: info.default ? `default entry ${info.default.index}` : 'default list', system: 'system default' };
    propsBody.replaceChildren(...Object.keys(info.props).sort().map((k) => h('tr', { 'data-prop': k },
      h('th', { scope: 'row', class: 'plain' }, k),
      h('td', { class: 'left', 'data-col': 'value' }, JSON.stringify(info.props[k])),
      h('td', { class: 'left' }, from[info.sources[k]] || info.sources[k]))));
    origin.textContent = info.default
      ? `Default entry ${info.default.index} applies: ${JSON.stringify(info.default.regexp)} → ${JSON.stringify(info.default.props)}`
      : 'No default-list entry matches this name.';
    if (!editing) {
      for (const [key, , kind] of PROP_KEYS) inputs[key].value = propShown(info.props[key], kind);
    }
    deadInfo.replaceChildren(h('p', {}, `${fmtInt(info.dead_letters)} dead letter(s)` + (info.props.dead_letter ? '' : ' — this queue does not keep dead letters (property dead_letter).')));
    showDeadSection($('#dead-section', main), info);
  }

  async function saveProps(ev) {
    ev.preventDefault();
    propErr.textContent = ''; propOk.textContent = '';
    for (const el of Object.values(inputs)) el.removeAttribute('aria-invalid');
    const patch = {};
    for (const [key, , kind] of PROP_KEYS) {
      const v = propChange(inputs[key].value, info ? info.props[key] : undefined, kind);
      if (v !== undefined) patch[key] = v;
    }
    try {
      if (Object.keys(patch).length) await api('PATCH', '/props/' + qp, patch);
    } catch (e) {
      propErr.textContent = e.message;
      for (const key of Object.keys(patch)) if (e.message.includes(key)) inputs[key].setAttribute('aria-invalid', 'true');
      return;
    }
    editing = false;
    propOk.textContent = Object.keys(patch).length ? 'Saved.' : 'Nothing changed.';
    await load();
  }

  async function resetProps() {
    propErr.textContent = ''; propOk.textContent = '';
    try { await api('DELETE', '/props/' + qp); } catch (e) { propErr.textContent = e.message; return; }
    editing = false;
    propOk.textContent = 'Reset to the defaults.';
    await load();
  }

  async function push() {
    pushResult.className = '';
    try {
      const r = await api('POST', '/messages/' + qp, pushBody.value, { 'Content-Type': pushType.value || 'application/octet-stream' });
      pushResult.className = 'ok';
      pushResult.textContent = 'Pushed (accumulation: ' + (r.accum || 'no') + ').';
      await Promise.all([load(), peek()]);
    } catch (e) {
      pushResult.className = 'error';
      pushResult.textContent = e.message;
    }
  }

  async function deleteQueue() {
    try { await api('DELETE', '/queues/' + qp); } catch (e) { setStatus(e.message); resetDelete(); return; }
    location.hash = '#/queues';
  }

  async function showHead() {
    deadErr.textContent = '';
    const view = $('#dead-head-view', main);
    const hdr = {};
    const auth = authHeader();
    if (auth) hdr.Authorization = auth;
    const resp = await fetch('/queues/' + qp + '/dead/head', { headers: hdr, cache: 'no-store' });
    if (resp.status === 204) { view.replaceChildren(h('p', { class: 'muted' }, 'No dead letters.')); return; }
    if (!resp.ok) { deadErr.textContent = (await resp.text()).trim(); return; }
    const bytes = new Uint8Array(await resp.arrayBuffer());
    const ct = resp.headers.get('content-type') || '';
    view.replaceChildren(h('div', { class: 'msg' },
      h('div', { class: 'meta' }, h('span', {}, 'content-type: ' + ct), h('span', {}, 'deliveries: ' + resp.headers.get('x-lmq-deliveries')), h('span', {}, resp.headers.get('x-lmq-dead-at') ? timeEl(resp.headers.get('x-lmq-dead-at'), 'died ') : 'died: ?'), h('span', {}, fmtBytes(bytes.length))),
      renderBody(bytes, ct)));
  }

  async function respawn() {
    deadErr.textContent = '';
    try {
      const r = await api('POST', '/queues/' + qp + '/dead/respawn?n=' + q(respawnN.value.trim()));
      setStatus(`Respawned ${r.respawned}.`);
      $('#dead-head-view', main).replaceChildren();
      await Promise.all([load(), peek()]);
      await peekDead();
    } catch (e) { deadErr.textContent = e.message; }
  }

  async function deleteDead() {
    deadErr.textContent = '';
    try {
      const r = await api('DELETE', '/queues/' + qp + '/dead');
      setStatus(`Deleted ${r.deleted} dead letter(s).`);
      $('#dead-head-view', main).replaceChildren();
      await load();
      await peekDead();
    } catch (e) { deadErr.textContent = e.message; }
  }

  let peekSeq = 0;
  async function peek() {
    const my = ++peekSeq;
    let data;
    try { data = await api('GET', 'api/peek?n=10&name=' + qp); } catch (e) {
      if (e.status === 404) { peekList.replaceChildren(); return; }
      throw e;
    }
    if (my !== peekSeq) return;
    if (!data.messages.length) { peekList.replaceChildren(h('p', { class: 'muted' }, 'No message is waiting.')); return; }
    peekList.replaceChildren(...data.messages.map((m) => renderMessage(m, deleteMessage, moveMessage)));
  }

  // deleteMessage removes one waiting message (after renderMessage's
  // confirmation); one handed out or gone meanwhile is not found.
  async function deleteMessage(seq) {
    try {
      await api('DELETE', '/queues/' + qp + '/messages/' + seq);
      setStatus(`Deleted message #${seq}.`);
    } catch (e) {
      setStatus(e.status === 404 ? `Message #${seq} is no longer waiting (handed out, or deleted already).` : e.message);
    }
    await Promise.all([load(), peek()]);
  }

  // moveMessage moves one waiting message to the queue target (made when
  // it does not exist); one handed out or gone meanwhile is not found.
  async function moveMessage(seq, target) {
    try {
      await api('POST', '/queues/' + qp + '/messages/' + seq + '/move?to=' + encodeURIComponent(target));
      setStatus(`Moved message #${seq} to ${target}.`);
    } catch (e) {
      setStatus(e.status === 404 ? `Message #${seq} is no longer waiting (handed out, or deleted already).` : e.message);
    }
    await Promise.all([load(), peek()]);
  }

  let deadSeq = 0;
  let deadShown = -1; // the dead-letter count the list was read at
  async function peekDead() {
    const my = ++deadSeq;
    if (!info || !info.dead_letters) { deadList.replaceChildren(); deadShown = 0; return; }
    let data;
    try { data = await api('GET', 'api/peek?dead=1&n=10&name=' + qp); } catch (e) {
      if (e.status === 404) { deadList.replaceChildren(); return; }
      throw e;
    }
    if (my !== deadSeq) return;
    deadShown = info.dead_letters;
    deadList.replaceChildren(h('h3', {}, info.dead_letters > data.messages.length ? `The oldest ${data.messages.length}` : 'All of them'),
      ...data.messages.map((m) => renderMessage(m)));
  }

  let n = 0;
  const page = {
    async refresh() {
      await load();
      if (page.live === false) return;
      if (n++ % 5 === 0) await peek(); // the peeks are heavier: every 10 s, or on demand
      if (info && info.dead_letters !== deadShown) await peekDead();
    },
  };
  return page;
}

// ---- Deliveries in flight ---------------------------------------------------

// fmtLeft shows a time left in seconds.
function fmtLeft(s) {
  if (s <= 0) return 'due';
  if (s < 60) return s.toFixed(0) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
  return (s / 3600).toFixed(1) + ' h';
}

// deliveryRow is one row of the in-flight table: the delivery's fields and,
// with act, Nack and Extend buttons (act(d, 'nack' | 'ext')).
function deliveryRow(d, act, shownAt) {
  const left = h('td', { 'data-col': 'left', 'data-deadline': String(shownAt + d.time_left * 1000) }, fmtLeft(d.time_left));
  return h('tr', { 'data-delivery': d.id },
    h('td', { class: 'left mono', 'data-col': 'id' }, d.id),
    h('td', { class: 'left mono', 'data-col': 'gateway' }, d.gateway),
    h('td', { class: 'left', 'data-col': 'client' }, d.client_kind + (d.client_addr ? ' ' + d.client_addr : '')),
    h('td', { class: 'left', 'data-col': 'delivered', title: d.delivered_at }, new Date(d.delivered_at).toLocaleTimeString()),
    left,
    h('td', { 'data-col': 'receives' }, fmtInt(d.receives)),
    h('td', { 'data-col': 'priority' }, String(d.priority)),
    h('td', { class: 'left', 'data-col': 'group' }, d.group || ''),
    act ? h('td', { class: 'left' },
      h('button', { type: 'button', class: 'secondary', 'data-nack': d.id, 'aria-label': `Nack delivery ${d.id}`, onclick: () => act(d, 'nack') }, 'Nack'), ' ',
      h('button', { type: 'button', class: 'secondary', 'data-ext': d.id, 'aria-label': `Extend delivery ${d.id}`, onclick: () => act(d, 'ext') }, 'Extend')) : null);
}

function deliveryHead(withActions) {
  return h('thead', {}, h('tr', {}, ['Delivery id', 'Gateway', 'Client', 'Delivered at', 'Time left', 'Receives', 'Priority', 'Group']
    .map((t, i) => h('th', { scope: 'col', class: i < 4 || i === 7 ? 'left' : null }, t)),
  withActions ? h('th', { scope: 'col', class: 'left' }, 'Answer') : null));
}

// inFlightSection adds to a queue's page the table of its deliveries in
// flight on every gateway, refreshed every POLL_MS while the page is shown,
// with the time left counting down in between. Nack and Extend answer a
// delivery through the same API a client uses.
function inFlightSection(main, name) {
  const qp = q(name);
  const tbody = h('tbody');
  const note = h('p', { class: 'muted', id: 'inflight-note' });
  const msg = h('p', { id: 'inflight-result', role: 'status' });
  const section = h('section', { 'aria-labelledby': 'inflight-title' }, h('h2', { id: 'inflight-title' }, 'In flight'),
    h('p', { class: 'muted' }, 'Deliveries handed out and not yet answered, on every gateway. Nack puts the message back at once (one retry used); Extend restarts its timeout.'),
    note, msg, h('div', { class: 'table-wrap' }, h('table', { id: 'inflight' }, deliveryHead(true), tbody)));
  main.append(section);
  async function act(d, reply) {
    msg.className = '';
    try {
      await api('POST', '/messages/' + qp + '/' + q(d.id) + '?reply=' + reply);
      msg.className = 'ok';
      msg.textContent = (reply === 'nack' ? 'Nacked ' : 'Extended ') + d.id + '.';
    } catch (e) {
      msg.className = 'error';
      msg.textContent = e.status === 404 ? `Delivery ${d.id} is no longer in flight.` : e.message;
    }
    await load().catch((e) => { note.textContent = e.message; });
  }
  let seq = 0;
  async function load() {
    const my = ++seq;
    const path = '/queues/' + qp + '/deliveries';
    const hdr = {};
    const auth = authHeader();
    if (auth) hdr['Authorization'] = auth;
    const resp = await fetch(path, { headers: hdr, cache: 'no-store', credentials: 'same-origin' });
    if (my !== seq) return;
    if (!resp.ok) { note.textContent = resp.status === 404 ? '' : 'Deliveries: ' + resp.status; return; }
    const list = await resp.json();
    const shownAt = Date.now();
    const missing = resp.headers.get('Lmq-Unanswered-Gateways');
    const cut = resp.headers.get('Lmq-Truncated-Gateways');
    note.textContent = (list.length ? `${list.length} in flight.` : 'None in flight.') +
      (missing ? ` Gateway(s) ${missing} did not answer in time: their deliveries are missing.` : '') +
      (cut ? ` Gateway(s) ${cut} hold more: only their oldest 1,000 are shown.` : '');
    tbody.replaceChildren(...list.map((d) => deliveryRow(d, act, shownAt)));
  }
  const tick = () => {
    for (const td of tbody.querySelectorAll('[data-deadline]')) td.textContent = fmtLeft((Number(td.dataset.deadline) - Date.now()) / 1000);
  };
  let n = 0;
  const loop = async () => {
    if (!section.isConnected) return; // the page changed
    if (!document.hidden && n++ % 2 === 0) await load().catch((e) => { note.textContent = e.message; });
    else tick();
    setTimeout(loop, POLL_MS / 2);
  };
  loop();
}

// findDeliveryBox adds a box that finds a delivery in flight by the id a
// client logged, whatever its queue and gateway (GET /deliveries/{id}).
function findDeliveryBox(main) {
  const input = h('input', { id: 'find-delivery', type: 'search', size: 38, placeholder: 'delivery id (X-Lmq-Message-Id)', autocomplete: 'off', spellcheck: 'false' });
  const out = h('div', { id: 'found-delivery', role: 'status' });
  async function find(ev) {
    ev.preventDefault();
    const id = input.value.trim();
    if (!id) return;
    try {
      const d = await api('GET', '/deliveries/' + q(id));
      out.replaceChildren(h('p', {}, 'In flight on queue ', h('a', { href: '#/queue/' + q(d.queue), id: 'found-queue' }, d.queue), '.'),
        h('div', { class: 'table-wrap' }, h('table', {}, deliveryHead(false), h('tbody', {}, deliveryRow(d, null, Date.now())))));
    } catch (e) {
      out.replaceChildren(h('p', { class: 'error' }, e.status === 404 ? 'No delivery in flight has this id (unknown, answered or timed out).' : e.message));
    }
  }
  const form = h('form', { id: 'find-delivery-form', class: 'row' },
    h('div', { class: 'field grow' }, h('label', { for: 'find-delivery' }, 'Find a delivery'), input),
    h('button', { type: 'submit', class: 'secondary' }, 'Find'));
  form.addEventListener('submit', find);
  main.append(h('section', { 'aria-labelledby': 'find-title' }, h('h2', { id: 'find-title' }, 'Find a delivery'), form, out));
}

// showDeadSection shows the dead-letter actions only on a queue that keeps
// dead letters (effective dead_letter) or still holds some (kept before the
// property changed). A queue that is another's dead_letter_queue receives
// them as ordinary waiting messages: it has no dead letters of its own.
function showDeadSection(section, info) {
  section.hidden = !(info.props.dead_letter || info.dead_letters > 0);
}

// renderMessage shows one peeked message or dead letter; with onDelete (a
// waiting message) also a button that deletes it, after a confirmation.
function renderMessage(m, onDelete, onMove) {
  const meta = h('div', { class: 'meta' },
    h('span', {}, '#' + m.seq), h('span', { class: 'priority', 'data-priority': String(m.priority || 0) }, 'priority ' + (m.priority || 0)),
    m.group !== undefined && h('span', { class: 'group', 'data-group': m.group }, 'group ' + m.group),
    h('span', {}, m.compound ? `compound, ${m.part_count} part(s)` : m.content_type),
    h('span', {}, m.object ? `stored in the object store, ${fmtBytes(m.size)}` : fmtBytes(m.size)),
    m.age !== undefined && h('span', {}, m.died_at ? timeEl(new Date(Date.now() - m.age * 1000), 'pushed ') : ['waiting ', ageEl(m.age, 'pushed')]),
    m.retry !== undefined && h('span', {}, 'retry ' + m.retry),
    m.delivered ? h('span', {}, 'delivered ' + m.delivered + '×') : null,
    m.expires && h('span', {}, timeEl(m.expires, 'expires ')),
    m.died_at && h('span', {}, timeEl(m.died_at, 'died ')),
    m.truncated && h('span', { class: 'warn' }, 'cut to the first 64 KiB'));
  const hdrs = m.headers ? h('div', { class: 'meta' }, Object.entries(m.headers).map(([k, v]) => h('span', {}, k + ': ' + v))) : null;
  let body;
  if (m.object) body = null;
  else if (m.compound && m.parts) {
    body = m.parts.map((p, i) => h('div', { class: 'msg' }, h('div', { class: 'meta' }, h('span', {}, `part ${i + 1}`), h('span', {}, p.content_type)),
      p.headers ? h('div', { class: 'meta' }, Object.entries(p.headers).map(([k, v]) => h('span', {}, k + ': ' + v))) : null,
      renderBody(b64bytes(p.body), p.content_type)));
  } else {
    body = [m.parts_error ? h('p', { class: 'warn' }, 'Parts do not decode: ' + m.parts_error) : null, renderBody(b64bytes(m.body), m.content_type)];
  }
  let del = null;
  if (onDelete) {
    del = h('span', { class: 'confirm' });
    const reset = () => del.replaceChildren(h('button', { type: 'button', class: 'danger', 'data-delete': m.seq,
      'aria-label': `Delete message #${m.seq}`, onclick: () => confirmThen(del, `Delete message #${m.seq}?`, () => onDelete(m.seq), reset) }, 'Delete…'));
    reset();
  }
  let mv = null;
  if (onMove) {
    mv = h('span', { class: 'confirm' });
    const reset = () => mv.replaceChildren(h('button', { type: 'button', class: 'secondary', 'data-move': m.seq,
      'aria-label': `Move message #${m.seq} to another queue`, onclick: () => askTarget(mv, m.seq, onMove, reset) }, 'Move…'));
    reset();
  }
  return h('article', { class: 'msg', 'data-seq': m.seq }, meta, del, mv, hdrs, body);
}

// askTarget replaces area by a field for the queue to move message seq to,
// with Move and Cancel buttons.
function askTarget(area, seq, onMove, back) {
  const field = h('input', { type: 'text', 'data-move-target': seq, 'aria-label': `Queue to move message #${seq} to`, placeholder: 'target queue' });
  const go = async () => {
    const target = field.value.trim();
    if (!target) { field.focus(); return; }
    await onMove(seq, target);
    back();
  };
  field.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); go(); } });
  area.replaceChildren(field,
    h('button', { type: 'button', 'data-move-confirm': seq, onclick: go }, 'Move'),
    h('button', { type: 'button', class: 'secondary', onclick: back }, 'Cancel'));
  field.focus();
}

// confirmThen replaces area by a question with Yes and Cancel buttons.
function confirmThen(area, question, yes, restore, yesLabel) {
  const prior = Array.from(area.childNodes);
  const back = () => { if (restore) restore(); else area.replaceChildren(...prior); };
  const no = h('button', { type: 'button', class: 'secondary', onclick: back }, 'Cancel');
  area.replaceChildren(h('span', { role: 'alert' }, question),
    h('button', { type: 'button', class: 'danger', 'data-confirm': 'yes', onclick: async () => { await yes(); back(); } }, yesLabel || 'Yes, delete'), no);
  no.focus();
}

// drawChart draws the push and pull rates as an inline SVG line chart.
function drawChart(box, info) {
  // Drawn at the box's own size, so that text is not stretched.
  const W = Math.max(box.clientWidth || 600, 200), H = 160, L = 44, B = 18;
  const n = Math.max(info.push.length, 2);
  const maxV = Math.max(1, ...info.push, ...info.pull);
  const x = (i) => L + (W - L - 4) * (i / (n - 1));
  const y = (v) => (H - B) - (H - B - 6) * (v / maxV);
  const line = (vals, cls) => h('polyline', { class: cls, points: vals.map((v, i) => `${x(i + n - vals.length).toFixed(1)},${y(v).toFixed(1)}`).join(' ') });
  const span = (n - 1) * info.interval;
  const spanText = span >= 60 ? `−${Math.round(span / 60)} min` : `−${Math.round(span)} s`;
  const svg = h('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
    'aria-label': `Rates over the last ${spanText.slice(1)}; now ${fmtRate(info.push.at(-1) || 0)} pushes and ${fmtRate(info.pull.at(-1) || 0)} pulls` },
  [0, 0.5, 1].map((f) => h('line', { class: 'gridline', x1: L, x2: W, y1: y(maxV * f), y2: y(maxV * f) })),
  h('text', { x: 2, y: y(maxV) + 10 }, fmtRate(maxV)), h('text', { x: 2, y: H - B }, '0'),
  h('text', { x: L, y: H - 2 }, spanText), h('text', { x: W - 30, y: H - 2 }, 'now'),
  info.push.length > 1 && line(info.push, 'push'), info.pull.length > 1 && line(info.pull, 'pull'));
  box.replaceChildren(svg);
  $('#chart-span').textContent = info.push.length > 1 ? '' : '(collecting: a point every ' + info.interval + ' s)';
}

// ---- Rates over the last hours (queue list) -----------------------------

const RATES_KEY = 'lmq-console-rates-scope';
const RATES_EVERY_MS = 15000;

// ratesCard is the queue list's chart of pushes and pulls per minute over
// the last two hours, of this gateway or of the whole cluster (GET
// api/rates); it reloads every RATES_EVERY_MS at most.
function ratesCard() {
  let scope = sessionStorage.getItem(RATES_KEY) === 'this' ? 'this' : 'cluster';
  let data = null, at = 0;
  const box = h('div', { id: 'rates-chart' });
  const note = h('p', { class: 'muted', id: 'rates-note' });
  const btn = (key, label) => h('button', { type: 'button', class: 'secondary', 'data-scope': key, 'aria-pressed': String(scope === key),
    onclick: () => { scope = key; sessionStorage.setItem(RATES_KEY, key); draw(); } }, label);
  const btnThis = btn('this', 'This gateway'), btnAll = btn('cluster', 'Whole cluster');
  const el = h('section', { class: 'card', id: 'rates', 'aria-labelledby': 'rates-title' },
    h('div', { class: 'row' }, h('h2', { id: 'rates-title' }, 'Pushes and pulls per minute'),
      h('div', { class: 'seg', role: 'group', 'aria-label': 'Whose rates' }, btnThis, btnAll)),
    h('div', { class: 'legend' }, h('span', { class: 'push' }, '━ pushes/s'), h('span', { class: 'pull' }, '╍ pulls/s')),
    box, note);
  function draw() {
    btnThis.setAttribute('aria-pressed', String(scope === 'this'));
    btnAll.setAttribute('aria-pressed', String(scope === 'cluster'));
    if (!data) return;
    const hist = scope === 'this' ? data.this : data.cluster;
    drawLongChart(box, hist);
    const who = scope === 'this'
      ? 'This gateway (' + data.gateway + ')'
      : (data.shared ? `${data.gateways.length} gateway(s) heard now: ${data.gateways.join(', ')}` : 'Not shared with the other gateways: this gateway only');
    const since = new Date(hist.since);
    note.replaceChildren(who + '. Counting began ', timeEl(since.getFullYear() > 1 ? since : new Date(hist.start)),
      `; the gateway keeps the last 2 h. Longer: the Prometheus counters ${data.series.join(', ')} on /metrics.`);
  }
  return {
    el,
    async refresh() {
      if (data && Date.now() - at < RATES_EVERY_MS) return;
      at = Date.now();
      data = await api('GET', 'api/rates');
      draw();
    },
  };
}

// drawLongChart draws a long history (per-minute counts) as per-second
// rates; the minute under way is left out.
function drawLongChart(box, hist) {
  const per = (v) => v / hist.step;
  const push = hist.push.slice(0, -1).map(per), pull = hist.pull.slice(0, -1).map(per);
  if (push.length < 2) {
    box.replaceChildren(h('p', { class: 'muted', 'data-collecting': '' }, 'Collecting: a point a minute.'));
    return;
  }
  const W = Math.max(box.clientWidth || 600, 200), H = 120, L = 44, B = 18;
  const n = push.length;
  const maxV = Math.max(1 / hist.step, ...push, ...pull);
  const x = (i) => L + (W - L - 4) * (i / (n - 1));
  const y = (v) => (H - B) - (H - B - 6) * (v / maxV);
  const line = (vals, cls) => h('polyline', { class: cls, points: vals.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ') });
  const start = new Date(new Date(hist.start).getTime());
  const svg = h('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'data-points': n,
    'aria-label': `Rates per minute since ${exactTime(start)}; the last minute ${fmtRate(push.at(-1))} pushes and ${fmtRate(pull.at(-1))} pulls` },
  [0, 0.5, 1].map((f) => h('line', { class: 'gridline', x1: L, x2: W, y1: y(maxV * f), y2: y(maxV * f) })),
  h('text', { x: 2, y: y(maxV) + 10 }, fmtRate(maxV)), h('text', { x: 2, y: H - B }, '0'),
  h('text', { x: L, y: H - 2 }, '−' + fmtDuration(n * hist.step)), h('text', { x: W - 60, y: H - 2 }, '−1 min'),
  line(push, 'push'), line(pull, 'pull'));
  box.replaceChildren(svg);
}

// ---- Default properties page --------------------------------------------

function defaultsPage(main) {
  const rows = h('div', { id: 'defaults' });
  const err = h('p', { id: 'defaults-error', class: 'error', role: 'alert' });
  const ok = h('p', { class: 'ok', role: 'status' });
  const testName = h('input', { id: 'test-name', autocomplete: 'off', spellcheck: 'false', placeholder: 'a queue name' });
  const testOut = h('div', { id: 'test-result', role: 'status' });
  let list = [];

  main.append(h('h1', {}, 'Default properties'),
    h('p', { class: 'muted' }, 'A queue gets the properties of the first entry whose regular expression (RE2, unanchored) matches its name, under its own properties. Changes apply when saved.'),
    rows,
    h('div', { class: 'row' },
      h('button', { type: 'button', class: 'secondary', id: 'defaults-add', onclick: () => { sync(); list.push(['', '{}']); draw(); rows.querySelector('.defaults-row:last-child input').focus(); } }, 'Add entry'),
      h('button', { type: 'button', id: 'defaults-save', onclick: save }, 'Save list'),
      h('button', { type: 'button', class: 'secondary', onclick: () => load() }, 'Discard changes')),
    err, ok,
    h('section', { class: 'card', 'aria-labelledby': 'tester-title' }, h('h2', { id: 'tester-title' }, 'Which entry matches this name?'),
      h('p', { class: 'muted' }, 'Tests the list as edited above, saved or not.'),
      h('form', { class: 'row', onsubmit: (ev) => { ev.preventDefault(); test(); } },
        h('div', { class: 'field grow' }, h('label', { for: 'test-name' }, 'Queue name'), testName),
        h('button', { type: 'submit', id: 'test' }, 'Test')), testOut));

  function sync() {
    list = Array.from(rows.querySelectorAll('.defaults-row')).map((r) => [r.querySelector('.re').value, r.querySelector('.props input').value]);
  }
  function parsed() {
    sync();
    return list.map(([re, props], i) => {
      try { return [re, JSON.parse(props)]; } catch (e) { throw new Error(`entry ${i + 1}: the properties are not JSON: ${e.message}`); }
    });
  }
  function move(i, d) { sync(); const j = i + d; if (j < 0 || j >= list.length) return; [list[i], list[j]] = [list[j], list[i]]; draw(); rows.children[j].querySelector('input').focus(); }
  function draw() {
    rows.replaceChildren(...list.map(([re, props], i) => h('div', { class: 'defaults-row', 'data-index': i + 1 },
      h('span', { class: 'muted' }, (i + 1) + '.'),
      h('div', { class: 'field' }, h('label', { for: `re-${i}` }, 'Regular expression'), h('input', { id: `re-${i}`, class: 're', value: re, spellcheck: 'false' })),
      h('div', { class: 'field props' }, h('label', { for: `props-${i}` }, 'Properties (JSON)'), h('input', { id: `props-${i}`, value: props, spellcheck: 'false' })),
      h('div', { class: 'btns' },
        h('button', { type: 'button', class: 'secondary', 'aria-label': `Move entry ${i + 1} up`, disabled: i === 0, onclick: () => move(i, -1) }, '↑'),
        h('button', { type: 'button', class: 'secondary', 'aria-label': `Move entry ${i + 1} down`, disabled: i === list.length - 1, onclick: () => move(i, 1) }, '↓'),
        h('button', { type: 'button', class: 'secondary', 'aria-label': `Remove entry ${i + 1}`, onclick: () => { sync(); list.splice(i, 1); draw(); } }, '✕')))));
    if (!list.length) rows.append(h('p', { class: 'muted' }, 'The list is empty: every queue starts from the system defaults {"accum":0,"retry":2,"timeout":30}.'));
  }
  async function load() {
    err.textContent = ''; ok.textContent = '';
    const data = await api('GET', '/props');
    list = data.map(([re, props]) => [re, JSON.stringify(props)]);
    draw();
  }
  async function save() {
    err.textContent = ''; ok.textContent = '';
    let body;
    try { body = parsed(); } catch (e) { err.textContent = e.message; return; }
    try { await api('PUT', '/props', body); } catch (e) { err.textContent = e.message; return; }
    ok.textContent = 'Saved.';
  }
  async function test() {
    testOut.replaceChildren();
    let body;
    try { body = { name: testName.value, list: parsed() }; } catch (e) { testOut.append(h('p', { class: 'error' }, e.message)); return; }
    try {
      const r = await api('POST', 'api/match', body);
      testOut.append(r.match
        ? h('p', {}, `Entry ${r.match.index} (${JSON.stringify(r.match.regexp)}) matches.`)
        : h('p', {}, 'No entry matches: the system defaults apply.'),
      h('p', {}, 'A new queue of this name would have: ', h('code', {}, JSON.stringify(r.effective))));
      for (const row of rows.querySelectorAll('.defaults-row')) row.classList.toggle('matched', !!r.match && Number(row.dataset.index) === r.match.index);
    } catch (e) { testOut.append(h('p', { class: 'error' }, e.message)); }
  }
  const page = { live: false, refresh: load };
  return page;
}

// ---- Cluster page -------------------------------------------------------

function clusterPage(main) {
  const gw = h('dl', { id: 'gateway-info', class: 'facts' });
  const nodes = h('div', { id: 'nodes' });
  const streams = h('tbody');
  main.append(h('h1', {}, 'Cluster'),
    h('section', { class: 'card', 'aria-labelledby': 'gw-title' }, h('h2', { id: 'gw-title' }, 'This gateway'), gw),
    h('section', { 'aria-labelledby': 'nodes-title' }, h('h2', { id: 'nodes-title' }, 'NATS servers'), nodes),
    h('section', { 'aria-labelledby': 'streams-title' }, h('h2', { id: 'streams-title' }, 'Streams holding queues'),
      h('div', { class: 'table-wrap' }, h('table', { id: 'streams' },
        h('thead', {}, h('tr', {}, ['Stream', 'Queues', 'Messages', 'Leader', 'Replicas', 'Health'].map((t, i) => h('th', { scope: 'col', class: i >= 3 ? 'left' : null }, t)))), streams))));
  const page = {
    async refresh() {
      const c = await api('GET', 'api/cluster');
      const others = (c.other_gateways || []).join(', ') || 'none seen';
      gw.replaceChildren(...[['Id', c.gateway.id], ['Version', c.gateway.version || '?'], ['Authentication', c.gateway.auth], ['Queues', fmtInt(c.queues)], ['Other gateways', others]]
        .flatMap(([k, v]) => [h('dt', { class: 'muted' }, k), h('dd', {}, v)]));
      const active = new Set(c.active_nodes);
      nodes.replaceChildren(c.all_nodes.length
        ? h('ul', {}, c.all_nodes.map((n) => h('li', {}, n + ' ', h('span', { class: 'badge ' + (active.has(n) ? 'ok' : 'bad') }, active.has(n) ? 'up' : 'down'))))
        : h('p', { class: 'muted' }, 'No cluster: a single server.'));
      streams.replaceChildren(...c.streams.map((s) => h('tr', {},
        h('th', { scope: 'row', class: 'plain' }, s.name), h('td', {}, fmtInt(s.queues)), h('td', {}, fmtInt(s.messages)),
        h('td', { class: 'left' }, s.leader || '(single server)'),
        h('td', { class: 'left' }, s.replicas.map((r) => r.name + (r.current ? '' : ' (lagging)')).join(', ') || '–'),
        h('td', { class: 'left' }, h('span', { class: 'badge ' + (s.healthy ? 'ok' : 'bad') }, s.healthy ? 'healthy' : 'degraded')))));
      if (!c.streams.length) streams.append(h('tr', {}, h('td', { colspan: 6, class: 'left muted' }, 'No queues yet.')));
    },
  };
  return page;
}

// ---- Clients page -------------------------------------------------------

// clientsPage shows who is pulling from this gateway now: the pulls
// waiting for a message (HTTP, RPC and SQS long polls) with their address,
// what they wait on and since when, and the RPC connections by address
// (GET /ui/api/clients).
function clientsPage(main) {
  const counts = h('dl', { id: 'client-counts', class: 'facts' });
  const pulls = h('tbody');
  const rpc = h('div', { id: 'rpc-conns' });
  const note = h('p', { id: 'clients-note', class: 'muted' });
  main.append(h('h1', {}, 'Clients'), note,
    h('section', { class: 'card', 'aria-labelledby': 'counts-title' }, h('h2', { id: 'counts-title' }, 'Pulls waiting now'), counts),
    h('section', { 'aria-labelledby': 'pulls-title' }, h('h2', { id: 'pulls-title' }, 'Waiting pulls'),
      h('div', { class: 'table-wrap' }, h('table', { id: 'pulls' },
        h('thead', {}, h('tr', {}, ['Kind', 'Address', 'Waits on', 'Since'].map((t) => h('th', { scope: 'col', class: 'left' }, t)))), pulls))),
    h('section', { 'aria-labelledby': 'rpc-title' }, h('h2', { id: 'rpc-title' }, 'RPC connections'), rpc));
  const page = {
    async refresh() {
      const c = await api('GET', 'api/clients');
      note.textContent = `This gateway (${c.gateway}) only: each gateway lists its own clients.`;
      const kinds = ['http', 'rpc', 'sqs', 'go'];
      const total = kinds.reduce((n, k) => n + (c.waiting[k] || 0), 0);
      counts.replaceChildren(...[['All', total], ['HTTP', c.waiting.http], ['RPC', c.waiting.rpc], ['SQS', c.waiting.sqs], ['Go API', c.waiting.go]]
        .flatMap(([k, v]) => [h('dt', { class: 'muted' }, k), h('dd', { 'data-kind': k.toLowerCase().replace('go api', 'go') }, fmtInt(v || 0))]));
      pulls.replaceChildren(...c.pulls.map((p) => h('tr', { 'data-kind': p.client.kind },
        h('td', { class: 'left' }, h('span', { class: 'badge' }, p.client.kind)),
        h('td', { class: 'left' }, p.client.addr || '–'),
        h('td', { class: 'left' }, p.waits),
        h('td', { class: 'left' }, timeEl(p.since)))));
      if (!c.pulls.length) pulls.append(h('tr', {}, h('td', { colspan: 4, class: 'left muted' }, 'No pull is waiting.')));
      if (c.rpc === null) {
        rpc.replaceChildren(h('p', { class: 'muted' }, 'No RPC server on this gateway.'));
      } else if (!c.rpc.length) {
        rpc.replaceChildren(h('p', { class: 'muted' }, 'No RPC connection open.'));
      } else {
        rpc.replaceChildren(h('div', { class: 'table-wrap' }, h('table', { id: 'rpc-table' },
          h('thead', {}, h('tr', {}, h('th', { scope: 'col', class: 'left' }, 'Address'), h('th', { scope: 'col' }, 'Connections'))),
          h('tbody', {}, c.rpc.map((r) => h('tr', { 'data-addr': r.addr }, h('td', { class: 'left' }, r.addr), h('td', {}, fmtInt(r.conns))))))));
      }
    },
  };
  return page;
}

// ---- start --------------------------------------------------------------

setupLogin();
window.addEventListener('hashchange', route);
document.addEventListener('visibilitychange', () => { if (!document.hidden && current) { clearTimeout(timer); poll(current); } });
route();
