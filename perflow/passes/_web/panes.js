// perflow's linked panes: metric tree x call tree (top-down, bottom-up, flat) x system tree, as in Cube
// and hpcviewer. The data (see perflow/passes/_panes.py) is one JSON object in #pf-panes-data; the own
// part of every metric node is a sparse (call path x location) matrix in a compressed blob.
(function () {
  'use strict';
  const root = document.getElementById('pf-panes');
  const dataEl = document.getElementById('pf-panes-data');
  if (!root || !dataEl) return;
  const D = JSON.parse(dataEl.textContent);
  const V = D.vertices, L = D.n_locations, NV = V.name.length;
  const M = D.metrics;
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  const LEVELS = [[0.9, '#c00000'], [0.7, '#e0441b'], [0.5, '#b8860b'], [0.3, '#2e8b2e'], [0.1, '#1f8fa0'], [0, '#3050c0']];
  const colour = (r) => { for (const [lo, c] of LEVELS) if (r >= lo) return c; return LEVELS[LEVELS.length - 1][1]; };

  // ------------------------------------------------------------------ units (as perflow.units.format_value)
  function sig(x, d) { // d significant digits, never an exponent (1234.5 -> "1235")
    if (x === 0 || !isFinite(x)) return String(x);
    const r = parseFloat(x.toPrecision(Math.max(d, Math.floor(Math.log10(Math.abs(x))) + 1)));
    const e = Math.floor(Math.log10(Math.abs(r)));
    return r.toFixed(Math.max(0, d - 1 - e));
  }
  function fmt(x, unit) {
    if (x === null || x === undefined || Number.isNaN(x)) return '';
    if (unit === 's') {
      const a = Math.abs(x);
      if (a < 1e-12) return '0 s';
      for (const [s, sym] of [[1, 's'], [1e-3, 'ms'], [1e-6, 'us'], [1e-9, 'ns']]) {
        if (parseFloat((a / s).toPrecision(3)) >= 1 || sym === 'ns') return sig(x / s, 3) + ' ' + sym;
      }
    }
    if (unit === 'bytes') {
      const a = Math.abs(x);
      for (const [s, sym] of [[2 ** 40, 'TiB'], [2 ** 30, 'GiB'], [2 ** 20, 'MiB'], [2 ** 10, 'KiB']]) {
        if (parseFloat((a / s).toPrecision(3)) >= 1) return sig(x / s, 3) + ' ' + sym;
      }
      return Math.round(x) + ' B';
    }
    if (unit === 'count' && Number.isInteger(Math.round(x * 1e6) / 1e6)) return Math.round(x).toLocaleString('en-US');
    if (Number.isInteger(x)) return String(x);
    return parseFloat(x.toPrecision(4)).toString();
  }

  // ------------------------------------------------------------------ tree structure
  const children = Array.from({ length: NV }, () => []);
  const roots = [];
  V.parent.forEach((p, v) => (p >= 0 ? children[p].push(v) : roots.push(v)));
  const order = []; // pre-order, for bottom-up sums
  (function walk(list) { for (const v of list) { order.push(v); walk(children[v]); } })(roots);
  const recursive = new Uint8Array(NV); // an ancestor calls the same function: its inclusive value is counted there
  for (const v of order) {
    for (let p = V.parent[v]; p >= 0; p = V.parent[p]) if (V.fn[p] === V.fn[v]) { recursive[v] = 1; break; }
  }
  const pathOf = (v) => { const s = []; for (let u = v; u >= 0; u = V.parent[u]) s.push(V.name[u]); return s.reverse().join('/'); };
  const byId = new Map(V.id.map((id, i) => [id, i]));
  const fnVerts = D.functions.map(() => []);
  V.fn.forEach((f, v) => fnVerts[f].push(v));

  // ------------------------------------------------------------------ decoding the blob
  let parts = null; // per metric: {rows: Int32Array, vals: Float32Array} or null
  async function decode() {
    const bin = Uint8Array.from(atob(D.blob), (c) => c.charCodeAt(0));
    let buf;
    if (typeof DecompressionStream === 'undefined') throw new Error('this browser cannot decompress the embedded data (DecompressionStream)');
    buf = await new Response(new Blob([bin]).stream().pipeThrough(new DecompressionStream('deflate'))).arrayBuffer();
    return M.map((m) => {
      if (!m.part) return null;
      const r = m.part.rows, off = m.part.offset;
      const rows = new Int32Array(buf.slice(off, off + 4 * r));
      const scale = new Float32Array(buf.slice(off + 4 * r, off + 8 * r));
      const q = new Int16Array(buf.slice(off + 8 * r, off + 8 * r + 2 * r * L));
      const vals = new Float32Array(r * L);
      for (let i = 0; i < r; i++) for (let l = 0; l < L; l++) vals[i * L + l] = q[i * L + l] * scale[i];
      return { rows, vals };
    });
  }

  // ------------------------------------------------------------------ state and values
  const S = { metric: 0, agg: 'sum', mode: 'incl', view: 'top', sel: null, open: { top: new Set(), bottom: new Set(), flat: new Set() }, loc: -1 };
  let E = null, I = null; // per vertex: Float64Array(L) or null (exclusive; inclusive)
  const mchildren = M.map(() => []);
  M.forEach((m, i) => { if (m.parent >= 0) mchildren[m.parent].push(i); });
  function subtree(i) { const out = [i]; for (const c of mchildren[i]) out.push(...subtree(c)); return out; }
  const combineOf = (i) => M[i].combine || 'sum';
  const inclusiveStored = (i) => !!M[i].inclusive;

  function compute() {
    const comb = combineOf(S.metric);
    E = new Array(NV).fill(null);
    for (const k of subtree(S.metric)) {
      const p = parts[k];
      if (!p) continue;
      for (let r = 0; r < p.rows.length; r++) {
        const v = p.rows[r];
        let e = E[v];
        if (!e) { e = E[v] = new Float64Array(L); if (comb !== 'sum') e.fill(NaN); }
        for (let l = 0; l < L; l++) {
          const x = p.vals[r * L + l];
          if (comb === 'sum') e[l] += x;
          else if (x !== 0) e[l] = Number.isNaN(e[l]) ? x : (comb === 'min' ? Math.min(e[l], x) : Math.max(e[l], x));
        }
      }
    }
    I = new Array(NV).fill(null);
    if (comb !== 'sum' || inclusiveStored(S.metric)) { if (inclusiveStored(S.metric)) { I = E; E = new Array(NV).fill(null); } return; }
    for (let k = order.length - 1; k >= 0; k--) {
      const v = order[k];
      let acc = E[v] ? Float64Array.from(E[v]) : null;
      for (const c of children[v]) {
        if (!I[c]) continue;
        if (!acc) acc = new Float64Array(L);
        const ic = I[c];
        for (let l = 0; l < L; l++) acc[l] += ic[l];
      }
      I[v] = acc;
    }
  }
  function reduce(vec) {
    if (!vec) return NaN;
    const comb = combineOf(S.metric);
    if (comb !== 'sum') { let r = NaN; for (const x of vec) if (!Number.isNaN(x)) r = Number.isNaN(r) ? x : (comb === 'min' ? Math.min(r, x) : Math.max(r, x)); return r; }
    let s = 0, mx = -Infinity, mn = Infinity;
    for (let l = 0; l < L; l++) { const x = vec[l]; s += x; if (x > mx) mx = x; if (x < mn) mn = x; }
    return S.agg === 'sum' ? s : S.agg === 'mean' ? s / L : S.agg === 'max' ? mx : mn;
  }
  function addInto(acc, vec) { if (!vec) return acc; if (!acc) acc = new Float64Array(L); for (let l = 0; l < L; l++) acc[l] += vec[l]; return acc; }
  const unit = () => M[S.metric].unit;
  const aggLabel = () => (combineOf(S.metric) !== 'sum' ? `${combineOf(S.metric)} over ${L} locations` : `${S.agg} over ${L} location${L === 1 ? '' : 's'}`);

  // ------------------------------------------------------------------ metric pane
  function metricTotal(i) {
    const save = S.metric; S.metric = i; compute();
    let tot = combineOf(i) === 'sum' ? 0 : NaN;
    const src = inclusiveStored(i) ? I : E;
    for (let v = 0; v < NV; v++) {
      const e = inclusiveStored(i) ? (V.parent[v] < 0 ? src[v] : null) : src[v];
      if (!e) continue;
      if (combineOf(i) === 'sum') for (const x of e) tot += x;
      else for (const x of e) if (!Number.isNaN(x)) tot = Number.isNaN(tot) ? x : (combineOf(i) === 'min' ? Math.min(tot, x) : Math.max(tot, x));
    }
    S.metric = save;
    return tot;
  }
  let totals = null;
  const mopen = new Set(M.map((m, i) => (m.parent < 0 ? i : -1)).filter((i) => i >= 0));
  function renderMetrics() {
    const box = $('pf-metrics');
    box.textContent = '';
    const rootTotal = {};
    function row(i, depth) {
      const m = M[i];
      const r = el('div', 'pf-row pf-metric-row' + (i === S.metric ? ' pf-sel' : ''));
      r.dataset.m = m.id;
      r.style.paddingLeft = (0.3 + depth * 1.1) + 'em';
      const tog = el('span', 'pf-tog', mchildren[i].length ? (mopen.has(i) ? '\u25be' : '\u25b8') : '');
      tog.onclick = (ev) => { ev.stopPropagation(); mopen.has(i) ? mopen.delete(i) : mopen.add(i); renderMetrics(); };
      r.appendChild(tog);
      r.appendChild(el('span', 'pf-nm', m.label));
      let top = i; while (M[top].parent >= 0) top = M[top].parent;
      const pct = M[top].unit === m.unit && totals[top] > 0 && combineOf(i) === 'sum' ? ` ${(100 * totals[i] / totals[top]).toFixed(1)}%` : '';
      r.appendChild(el('span', 'pf-val', fmt(totals[i], m.unit) + pct));
      r.title = m.desc + (combineOf(i) !== 'sum' ? ` (a ${combineOf(i)}imum: never summed)` : '');
      r.onclick = () => { S.metric = i; refresh(); };
      box.appendChild(r);
      if (mopen.has(i)) for (const c of mchildren[i]) row(c, depth + 1);
    }
    M.forEach((m, i) => { if (m.parent < 0) row(i, 0); });
    void rootTotal;
  }

  // ------------------------------------------------------------------ call views
  // a node: {key, label, title, verts: origin vertices, curs: cursors (bottom-up), kids: () => nodes, v: a vertex for the source pane}
  function nodeValues(n) {
    let inc = null, exc = null;
    n.verts.forEach((o) => { exc = addInto(exc, E[o]); if (!(n.bu || n.fn) || !recursive[o]) inc = addInto(inc, I[o]); });
    if (n.single !== undefined) { inc = I[n.single]; exc = E[n.single]; }
    return { inc, exc };
  }
  function topNode(v) {
    return { key: 't' + v, label: V.name[v], title: pathOf(v) + (V.file[v] ? ` (${V.file[v]}${V.line[v] >= 0 ? ':' + V.line[v] : ''})` : ''), verts: [v], single: v, v,
      kids: () => children[v].map(topNode) };
  }
  function buNode(pairs, key, label) {
    const n = { key, label, title: '', verts: pairs.map((p) => p[0]), bu: true, v: pairs[0][0] };
    n.title = (pairs.length === 1 ? pathOf(pairs[0][1]) : `${D.functions[V.fn[pairs[0][1]]]}: ${pairs.length} call paths`);
    n.kids = () => {
      const groups = new Map();
      for (const [o, c] of pairs) {
        const p = V.parent[c];
        if (p < 0) continue;
        const f = V.fn[p];
        if (!groups.has(f)) groups.set(f, []);
        groups.get(f).push([o, p]);
      }
      return [...groups.entries()].map(([f, ps]) => buNode(ps, key + '/' + f, D.functions[f]));
    };
    return n;
  }
  function flatNode(f) {
    return { key: 'f' + f, label: D.functions[f], title: `${D.functions[f]}: ${fnVerts[f].length} call path${fnVerts[f].length === 1 ? '' : 's'}`, verts: fnVerts[f], fn: true, v: fnVerts[f][0],
      kids: () => fnVerts[f].map((v) => ({ key: 'fv' + v, label: pathOf(v), title: pathOf(v), verts: [v], single: v, v, kids: () => [] })) };
  }
  function viewRoots() {
    if (S.view === 'top') return roots.map(topNode);
    const fns = D.functions.map((_, f) => f).filter((f) => fnVerts[f].length);
    if (S.view === 'bottom') return fns.map((f) => buNode(fnVerts[f].map((v) => [v, v]), 'b' + f, D.functions[f]));
    return fns.map(flatNode);
  }
  function sortKey(n) { const { inc, exc } = nodeValues(n); const x = reduce(S.mode === 'incl' ? (inc || exc) : exc); return Number.isNaN(x) ? -Infinity : Math.abs(x); }
  function renderCalls() {
    const box = $('pf-calls');
    box.textContent = '';
    const u = unit();
    const head = el('div', 'pf-row pf-head');
    head.appendChild(el('span', 'pf-nm', S.view === 'top' ? 'call path' : S.view === 'bottom' ? 'function / its callers' : 'function / its call paths'));
    const hi = el('span', 'pf-val pf-col' + (S.mode === 'incl' ? ' pf-on' : ''), 'inclusive');
    const he = el('span', 'pf-val pf-col' + (S.mode === 'excl' ? ' pf-on' : ''), 'exclusive');
    hi.title = he.title = 'click: colour and select by this value';
    hi.onclick = () => { S.mode = 'incl'; refresh(); };
    he.onclick = () => { S.mode = 'excl'; refresh(); };
    head.append(hi, he);
    box.appendChild(head);
    const rs = viewRoots().sort((a, b) => sortKey(b) - sortKey(a));
    let vmax = 0;
    for (const n of rs) { const x = sortKey(n); if (isFinite(x) && x > vmax) vmax = x; }
    const open = S.open[S.view];
    function row(n, depth) {
      const { inc, exc } = nodeValues(n);
      const xi = reduce(inc), xe = reduce(exc);
      const r = el('div', 'pf-row pf-call-row' + (S.sel && S.sel.key === n.key ? ' pf-sel' : ''));
      r.dataset.key = n.key;
      if (n.single !== undefined) r.dataset.v = V.id[n.single];
      r.style.paddingLeft = (0.3 + depth * 1.1) + 'em';
      const kids = n.kids();
      const tog = el('span', 'pf-tog', kids.length ? (open.has(n.key) ? '\u25be' : '\u25b8') : '');
      tog.onclick = (ev) => { ev.stopPropagation(); open.has(n.key) ? open.delete(n.key) : open.add(n.key); renderCalls(); };
      r.appendChild(tog);
      const x = S.mode === 'incl' ? (Number.isNaN(xi) ? xe : xi) : xe;
      const ratio = vmax > 0 && isFinite(x) ? Math.abs(x) / vmax : 0;
      const nm = el('span', 'pf-nm', n.label);
      nm.title = n.title;
      nm.style.background = `linear-gradient(90deg, ${colour(ratio)}33 ${(100 * ratio).toFixed(1)}%, transparent ${(100 * ratio).toFixed(1)}%)`;
      r.appendChild(nm);
      const ci = el('span', 'pf-val', fmt(xi, u)), ce = el('span', 'pf-val', fmt(xe, u));
      (S.mode === 'incl' ? ci : ce).style.color = colour(ratio);
      r.append(ci, ce);
      r.onclick = () => select(n);
      box.appendChild(r);
      if (open.has(n.key)) kids.sort((a, b) => sortKey(b) - sortKey(a)).forEach((k) => row(k, depth + 1));
    }
    rs.forEach((n) => row(n, 0));
    $('pf-call-title').textContent = `${M[S.metric].label}, ${S.mode === 'incl' ? 'inclusive' : 'exclusive'} (${aggLabel()})`;
  }

  // ------------------------------------------------------------------ system pane
  function distribution() {
    if (!S.sel) return null;
    const { inc, exc } = nodeValues(S.sel);
    return S.mode === 'incl' ? (inc || exc) : exc;
  }
  function renderSystem() {
    const box = $('pf-system');
    box.textContent = '';
    const d = distribution();
    const u = unit();
    const comb = combineOf(S.metric);
    const title = $('pf-system-title');
    if (!S.sel) { title.textContent = 'select a call path'; drawDist(null); return; }
    title.textContent = `${M[S.metric].label} (${S.mode === 'incl' ? 'inclusive' : 'exclusive'}) of ${S.sel.label}`;
    const val = (ls) => { let s = comb === 'sum' ? 0 : NaN; for (const l of ls) { const x = d ? d[l] : 0; if (comb === 'sum') s += x; else if (!Number.isNaN(x)) s = Number.isNaN(s) ? x : (comb === 'min' ? Math.min(s, x) : Math.max(s, x)); } return s; };
    let mx = 0;
    if (d) for (const x of d) if (!Number.isNaN(x) && Math.abs(x) > mx) mx = Math.abs(x);
    const byHost = new Map();
    for (let l = 0; l < L; l++) {
      const h = D.locations.host[l] || '';
      if (!byHost.has(h)) byHost.set(h, new Map());
      const pm = byHost.get(h), p = D.locations.process[l];
      if (!pm.has(p)) pm.set(p, []);
      pm.get(p).push(l);
    }
    const threaded = [...byHost.values()].some((pm) => [...pm.values()].some((ls) => ls.length > 1));
    const hosts = byHost.size > 1 || (byHost.size === 1 && [...byHost.keys()][0] !== '');
    function line(label, ls, depth, cls, l) {
      const x = val(ls);
      const r = el('div', 'pf-row pf-sys-row ' + cls + (l !== undefined && l === S.loc ? ' pf-sel' : ''));
      r.style.paddingLeft = (0.3 + depth * 1.1) + 'em';
      if (l !== undefined) r.dataset.loc = l;
      const ratio = mx > 0 ? Math.abs(x) / (mx * ls.length) : 0;
      const nm = el('span', 'pf-nm', label);
      nm.style.background = `linear-gradient(90deg, ${colour(ratio)}33 ${(100 * Math.min(1, ratio)).toFixed(1)}%, transparent 0)`;
      r.appendChild(nm);
      const v = el('span', 'pf-val', fmt(x, u));
      v.style.color = colour(mx > 0 ? Math.abs(x) / mx / (ls.length || 1) : 0);
      r.appendChild(v);
      if (l !== undefined) r.onclick = () => { S.loc = l; renderSystem(); };
      box.appendChild(r);
    }
    for (const [h, pm] of byHost) {
      const hd = hosts ? 1 : 0;
      if (hosts) line(h || '(unknown host)', [...pm.values()].flat(), 0, 'pf-host');
      for (const [p, ls] of [...pm.entries()].sort((a, b) => a[0] - b[0])) {
        if (threaded && ls.length > 1) {
          line(`process ${p}`, ls, hd, 'pf-proc');
          for (const l of ls) line(D.locations.name[l] + (D.locations.type[l] === 'gpu' ? ' (GPU)' : ''), [l], hd + 1, 'pf-thread', l);
        } else {
          line(D.locations.name[ls[0]] + (D.locations.type[ls[0]] === 'gpu' ? ' (GPU)' : ''), ls, hd, 'pf-proc', ls[0]);
        }
      }
    }
    drawDist(d);
  }
  function drawDist(d) {
    const c = $('pf-dist'), info = $('pf-dist-info');
    const w = c.clientWidth || 300, h = 60;
    c.width = w; c.height = h;
    const g = c.getContext('2d');
    g.clearRect(0, 0, w, h);
    if (!d) { info.textContent = ''; return; }
    let mx = 0, mn = Infinity, s = 0, n = 0, arg = -1;
    for (let l = 0; l < L; l++) { const x = d[l]; if (Number.isNaN(x)) continue; if (x > mx) { mx = x; arg = l; } if (x < mn) mn = x; s += x; n++; }
    const bw = w / L;
    for (let l = 0; l < L; l++) {
      const x = d[l];
      if (Number.isNaN(x) || mx <= 0) continue;
      const r = x / mx;
      g.fillStyle = l === S.loc ? '#000' : colour(r);
      g.fillRect(l * bw, h - r * h, Math.max(bw - (bw > 3 ? 1 : 0), 1), r * h);
    }
    const u = unit();
    info.textContent = n ? `min ${fmt(mn, u)} \u00b7 mean ${fmt(s / n, u)} \u00b7 max ${fmt(mx, u)}${arg >= 0 ? ' on ' + D.locations.name[arg] : ''}` : 'no values';
    c.onclick = (ev) => { const l = Math.floor(ev.offsetX / bw); if (l >= 0 && l < L) { S.loc = l; renderSystem(); const r = $('pf-system').querySelector(`[data-loc="${l}"]`); if (r) r.scrollIntoView({ block: 'nearest' }); } };
  }

  // ------------------------------------------------------------------ source pane
  function renderSource() {
    const box = $('pf-source');
    box.textContent = '';
    if (!S.sel) return;
    const v = S.sel.v;
    if (v === undefined || !V.file[v]) { box.appendChild(el('p', 'pf-more', `${S.sel.label}: no file:line`)); return; }
    const key = `${V.file[v]}:${V.line[v]}`;
    const snip = D.sources[key];
    if (!snip) { box.appendChild(el('p', 'pf-more', `${key}: the source was not readable when the page was written`)); return; }
    const path = (D.sources.__paths__ || {})[V.file[v]] || V.file[v];
    box.appendChild(el('div', 'pf-src-head', `${path}:${V.line[v]}`));
    const pre = el('pre', 'pf-src');
    snip.lines.forEach((t, i) => {
      const n = snip.first + i;
      const ln = el('div', n === V.line[v] ? 'pf-src-line pf-hl' : 'pf-src-line');
      ln.appendChild(el('span', 'pf-ln', String(n)));
      ln.appendChild(document.createTextNode(t));
      pre.appendChild(ln);
    });
    box.appendChild(pre);
  }

  // ------------------------------------------------------------------ selection and refresh
  function select(n) {
    S.sel = n;
    renderCalls(); renderSystem(); renderSource();
    $('pf-selinfo').textContent = n.title;
  }
  function refresh() {
    compute();
    if (S.sel) { // keep the selection's vertices, recomputed with the new metric
      const key = S.sel.key;
      S.sel = Object.assign({}, S.sel);
      S.sel.key = key;
    }
    renderMetrics(); renderCalls(); renderSystem(); renderSource();
  }
  function selectVertex(id) {
    const v = byId.get(id);
    if (v === undefined) return false;
    S.view = 'top';
    document.querySelectorAll('#pf-panes .pf-tabs button').forEach((b) => b.classList.toggle('pf-on', b.dataset.view === 'top'));
    for (let p = V.parent[v]; p >= 0; p = V.parent[p]) S.open.top.add('t' + p);
    select(topNode(v));
    const r = $('pf-calls').querySelector(`[data-key="t${v}"]`);
    if (r) r.scrollIntoView({ block: 'center' });
    return true;
  }
  function selectMetric(id) { const i = M.findIndex((m) => m.id === id); if (i >= 0) { S.metric = i; refresh(); } return i >= 0; }

  $('pf-agg').onchange = (ev) => { S.agg = ev.target.value; refresh(); };
  document.querySelectorAll('#pf-panes .pf-tabs button').forEach((b) => {
    b.onclick = () => {
      S.view = b.dataset.view; S.sel = null;
      document.querySelectorAll('#pf-panes .pf-tabs button').forEach((x) => x.classList.toggle('pf-on', x === b));
      renderCalls(); renderSystem(); renderSource();
    };
  });
  decode().then((p) => {
    parts = p;
    totals = M.map((_, i) => metricTotal(i));
    roots.forEach((r) => { S.open.top.add('t' + r); children[r].forEach((c) => S.open.top.add('t' + c)); });
    refresh();
    const hot = order.filter((v) => V.id[v] >= 0).sort((a, b) => reduce(I[b] || E[b]) - reduce(I[a] || E[a]));
    if (roots.length) select(topNode(roots[0]));
    root.dataset.ready = '1';
    window.pfPanes = { selectVertex, selectMetric, state: S, hot };
    document.dispatchEvent(new Event('pf-panes-ready'));
  }).catch((err) => {
    $('pf-calls').textContent = 'the profile could not be shown: ' + err.message;
    root.dataset.ready = 'error';
  });
})();
