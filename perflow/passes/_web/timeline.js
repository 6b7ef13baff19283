// perflow's interactive timeline: level of detail, colour per category or per function, a process
// filter, overlays that can be switched off, one tooltip, time axis in human units.
// The Bokeh document (perflow/passes/html_timeline.py) holds empty views; this script decodes the
// page's compressed data once, then fills the views for the window in view after every pan or zoom.
(function () {
  'use strict';
  function unitFor(span) {
    const a = Math.abs(span);
    if (a >= 1) return [1, 's'];
    if (a >= 1e-3) return [1e-3, 'ms'];
    if (a >= 1e-6) return [1e-6, 'us'];
    return [1e-9, 'ns'];
  }
  function fmtTime(x, span) {
    const [s, sym] = unitFor(span === undefined ? x : span);
    const v = x / s;
    const digits = span === undefined ? 4 : Math.max(0, Math.min(9, Math.ceil(-Math.log10(Math.abs(span / s) || 1)) + 3));
    return (span === undefined ? parseFloat(v.toPrecision(4)).toString() : v.toFixed(digits)) + ' ' + sym;
  }
  // the axis: ticks in the unit of their spacing, with as many decimals as the spacing needs
  window.pfTickFormat = function (tick, index, ticks) {
    const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : Math.abs(tick) || 1;
    const [s, sym] = unitFor(step);
    const dec = Math.max(0, Math.ceil(-Math.log10(step / s) + 1e-9));
    return (tick / s).toFixed(Math.min(dec, 9)) + ' ' + sym;
  };
  window.pfFmtTime = fmtTime;

  function bytes(b64) { // base64 to bytes (Uint8Array.from with a function is several times slower)
    const s = atob(b64), out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  async function inflate(b64) {
    let bin;
    try { // the browser's own base64 decoder, through a data: URL; else by hand
      bin = new Uint8Array(await (await fetch('data:application/octet-stream;base64,' + b64)).arrayBuffer());
    } catch (e) { bin = bytes(b64); }
    if (typeof DecompressionStream === 'undefined') throw new Error('this browser cannot decompress the timeline (no DecompressionStream)');
    return new Response(new Blob([bin]).stream().pipeThrough(new DecompressionStream('deflate'))).arrayBuffer();
  }
  const TYPES = { u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, i32: Int32Array, f32: Float32Array, f64: Float64Array };
  function arrays(buf, layout) {
    const out = {};
    for (const [name, [off, n, t]] of Object.entries(layout)) {
      const T = TYPES[t];
      out[name] = new T(buf.slice(off, off + n * T.BYTES_PER_ELEMENT));
    }
    return out;
  }
  // times: per group (instances of one depth, or one overlay) deltas in ticks from the previous start
  function starts(delta, groups, t0, tick) {
    const out = new Float64Array(delta.length);
    let i = 0;
    for (const n of groups) {
      let acc = 0;
      for (let k = 0; k < n; k++, i++) { acc += delta[i]; out[i] = t0 + acc * tick; }
    }
    return out;
  }

  // the data is decoded as soon as the script runs, while Bokeh builds its document
  const blobEl = document.getElementById('pf-timeline-blob');
  const started = performance.now();
  const pending = blobEl ? inflate(blobEl.textContent.trim()) : Promise.reject(new Error('no timeline data in the page'));
  pending.catch(() => {});
  let regionTiles = null; // the summary coloured per function: decoded the first time it is asked for
  function loadRegionTiles() {
    if (!regionTiles) {
      const el = document.getElementById('pf-timeline-blob-region');
      regionTiles = el ? inflate(el.textContent.trim()) : Promise.reject(new Error('no per-function summary in the page'));
    }
    return regionTiles;
  }

  window.pfTimelineInit = function (a) {
    const meta = a.meta, status = document.getElementById('pf-timeline-status');
    const T = { ready: false, color: 'kind', rows: null, pos: null, show: { waits: true, path: true, messages: true }, timings: {} };
    window.pfTimeline = T;
    const t0 = performance.now();
    T.timings.init = t0;
    pending.then((buf) => {
      T.timings.inflate = performance.now() - started;
      const ta = performance.now();
      const A = arrays(buf, meta.layout);
      const tick = meta.tick;
      T.inst = {
        left: starts(A.inst_start, meta.inst_groups, meta.t0, tick), dur: Float64Array.from(A.inst_dur, (d) => d * tick),
        row: A.inst_row, cat: A.inst_cat, fn: A.inst_fn, vertex: A.inst_vertex, fill: A.inst_fill,
      };
      const ov = (p) => (A[p + '_start'] ? { left: starts(A[p + '_start'], [A[p + '_start'].length], meta.t0, tick), dur: Float64Array.from(A[p + '_dur'], (d) => d * tick), y0: A[p + '_y0'], y1: A[p + '_y1'] || A[p + '_y0'] } : null);
      T.waits = ov('wait'); T.path = ov('path'); T.msgs = ov('msg');
      T.tiles = { kind: tilesOf(buf, meta.tiles_kind), region: [] };
      T.waitAlpha = A.wait_alpha || null;
      T.pathBinned = meta.path_binned;
      T.timings.arrays = performance.now() - ta;
      setRows(null);
      T.ready = true;
      const t1 = performance.now();
      lod();
      T.timings.lod = performance.now() - t1;
      document.getElementById('pf-timeline').dataset.ready = '1';
    }).catch((err) => { if (status) status.textContent = 'the timeline could not be shown: ' + err.message; });

    function tilesOf(buf, list) {
      return list.map(([level, i, off]) => ({ level, i, img: new Uint8Array(buf.slice(off, off + meta.tile_rows * meta.tile_bins)) }));
    }
    function setRows(rows) { // the process filter: which rows are shown, top to bottom
      const n = meta.n_rows;
      T.rows = rows && rows.length ? rows : Array.from({ length: n }, (_, i) => i);
      T.pos = new Int32Array(n).fill(-1);
      T.rows.forEach((r, i) => { T.pos[r] = i; });
      const nv = T.rows.length;
      a.yr.start = nv - 0.5; a.yr.end = -0.5;
      const step = Math.max(1, Math.ceil(nv / 40));
      const ticks = [], labels = {};
      for (let i = 0; i < nv; i += step) { ticks.push(i); labels[i] = meta.labels[T.rows[i]]; }
      a.yaxis.ticker.ticks = ticks;
      a.yaxis.major_label_overrides = labels;
      a.plot.frame_height = Math.max(160, Math.min(820, 22 * nv + 20));
    }
    function bandImage(img, width) { // a tile's rows (each a band of sub pixels) for the rows shown
      const sub = meta.sub, nv = T.rows.length;
      if (nv === meta.n_rows) return img;
      const out = new Uint8Array(nv * sub * width);
      T.rows.forEach((r, i) => out.set(img.subarray(r * sub * width, (r + 1) * sub * width), i * sub * width));
      return out;
    }
    function lod() {
      if (!T.ready) return;
      const x0 = a.xr.start, x1 = a.xr.end, w = x1 - x0, span = meta.t1 - meta.t0, nv = T.rows.length;
      let level = Math.ceil(Math.log2(span / Math.max(w, 1e-300)));
      level = Math.max(0, Math.min(meta.levels - 1, level));
      const dw = span / 2 ** level, sub = meta.sub;
      const img = { image: [], x: [], y: [], dw: [], dh: [] };
      for (const t of T.tiles[T.color]) {
        if (t.level !== level) continue;
        const tx = meta.t0 + t.i * dw;
        if (tx + dw < x0 || tx > x1) continue;
        const band = bandImage(t.img, meta.tile_bins);
        img.image.push(window.pfNdarray(band, [nv * sub, meta.tile_bins]));
        img.x.push(tx); img.y.push(-0.5); img.dw.push(dw); img.dh.push(nv);
      }
      a.tile_view.data = img;
      // instances in view, at most max_shown (else the summary alone)
      const I = T.inst, idx = [];
      let over = false;
      for (let i = 0; i < I.left.length; i++) {
        const l = I.left[i];
        if (l < x1 && l + I.dur[i] > x0 && T.pos[I.row[i]] >= 0) { idx.push(i); if (idx.length > meta.max_shown) { over = true; break; } }
      }
      const col = T.color === 'kind' ? I.cat : I.fn;
      a.inst_view.data = over ? { left: [], right: [], row: [], c: [], vertex: [], dur: [], fill: [] } : {
        left: idx.map((i) => I.left[i]), right: idx.map((i) => I.left[i] + I.dur[i]), row: idx.map((i) => T.pos[I.row[i]]),
        c: idx.map((i) => col[i]), vertex: idx.map((i) => I.vertex[i]), dur: idx.map((i) => I.dur[i]), fill: idx.map((i) => I.fill[i] / 255),
      };
      const shown = over ? 0 : idx.length;
      function pick(o, cap) {
        if (!o) return null;
        const k = [];
        for (let i = 0; i < o.left.length; i++) {
          if (o.left[i] < x1 && o.left[i] + o.dur[i] > x0 && (T.pos[o.y0[i]] >= 0 || T.pos[o.y1[i]] >= 0)) { k.push(i); if (k.length > cap) return null; }
        }
        return k;
      }
      if (T.waits) {
        const k = pick(T.waits, meta.max_overlay);
        a.wait_view.data = k === null ? { left: [], right: [], row: [] } : { left: k.map((i) => T.waits.left[i]), right: k.map((i) => T.waits.left[i] + T.waits.dur[i]), row: k.map((i) => T.pos[T.waits.y0[i]]) };
        a.wait_glyph.visible = T.show.waits;
        a.wait_binned.visible = T.show.waits && k === null;
        if (T.waitAlpha && a.wait_binned.visible) {
          const fin = meta.wait_bins;
          a.wait_binned.data_source.data = { image: [window.pfNdarray(bandImage(T.waitAlpha, fin), [nv * sub, fin])], x: [meta.t0], y: [-0.5], dw: [span], dh: [nv] };
        }
      }
      if (T.path) {
        const k = pick(T.path, meta.max_overlay);
        const vis = (r) => T.pos[r] >= 0;
        a.path_view.data = k === null ? { x0: [], y0: [], x1: [], y1: [] } : (() => {
          const kk = k.filter((i) => vis(T.path.y0[i]) && vis(T.path.y1[i]));
          return { x0: kk.map((i) => T.path.left[i]), x1: kk.map((i) => T.path.left[i] + T.path.dur[i]), y0: kk.map((i) => T.pos[T.path.y0[i]]), y1: kk.map((i) => T.pos[T.path.y1[i]]) };
        })();
        a.path_glyph.visible = T.show.path;
        a.path_binned.visible = T.show.path && k === null;
        const pb = T.pathBinned, keep = pb.row.map((r, i) => (vis(r) ? i : -1)).filter((i) => i >= 0);
        a.path_binned.data_source.data = { x0: keep.map((i) => pb.x0[i]), x1: keep.map((i) => pb.x1[i]), y0: keep.map((i) => T.pos[pb.row[i]]), y1: keep.map((i) => T.pos[pb.row[i]]) };
      }
      if (T.msgs) {
        const k = pick(T.msgs, meta.max_overlay);
        a.msg_view.data = k === null ? { x0: [], y0: [], x1: [], y1: [] } : (() => {
          const kk = k.filter((i) => T.pos[T.msgs.y0[i]] >= 0 && T.pos[T.msgs.y1[i]] >= 0);
          return { x0: kk.map((i) => T.msgs.left[i]), x1: kk.map((i) => T.msgs.left[i] + T.msgs.dur[i]), y0: kk.map((i) => T.pos[T.msgs.y0[i]]), y1: kk.map((i) => T.pos[T.msgs.y1[i]]) };
        })();
        a.msg_glyph.visible = T.show.messages;
      }
      const what = nv === meta.n_rows ? `${nv} rows` : `${nv} of ${meta.n_rows} rows`;
      if (status) {
        status.textContent = `window ${fmtTime(x0, w)} \u2013 ${fmtTime(x1, w)} (${fmtTime(w)}) \u00b7 ${what} \u00b7 summary level ${level} of ${meta.levels - 1} \u00b7 ` +
          (shown ? `${shown} instances drawn` : 'instances: zoom in to draw them');
        Object.assign(status.dataset, { x0, x1, level, shown });
      }
    }
    // ------------------------------------------------------------------ one tooltip for everything
    const tip = document.getElementById('pf-timeline-tip');
    let mouse = [0, 0];
    window.addEventListener('mousemove', (e) => { mouse = [e.clientX, e.clientY]; }, { passive: true });
    T.hover = function (x, y) {
      if (!T.ready || !tip) return;
      const pos = Math.round(y);
      if (pos < 0 || pos >= T.rows.length) { tip.style.display = 'none'; return; }
      const row = T.rows[pos], d = a.inst_view.data;
      let best = -1;
      for (let i = 0; i < d.left.length; i++) if (d.row[i] === pos && d.left[i] <= x && x <= d.right[i]) best = i; // the last drawn: the innermost
      let html = '';
      const wv = a.wait_view.data;
      for (let i = 0; T.show.waits && wv && i < wv.left.length; i++) {
        if (wv.row[i] === pos && wv.left[i] <= x && x <= wv.right[i]) { html += `<div class="w">wait state: ${fmtTime(wv.right[i] - wv.left[i])}</div>`; break; }
      }
      if (best >= 0) {
        const v = d.vertex[best];
        html = `<b>${esc(meta.vertex_names[v] || '')}</b><div>${esc(meta.call_paths[v] || '')}</div>` +
          `<div>${esc(meta.labels[row])} \u00b7 start ${fmtTime(d.left[best], d.dur[best])} \u00b7 duration ${fmtTime(d.dur[best])}</div>` + html;
      } else {
        const names = T.color === 'kind' ? meta.kind_names : meta.region_names;
        const c = sampleCategory(x, row);
        html = `<div>${esc(meta.labels[row])} \u00b7 ${fmtTime(x, a.xr.end - a.xr.start)}</div>` + (c >= 0 && c < names.length ? `<div>mostly: ${esc(names[c])}</div>` : '') + html;
      }
      tip.innerHTML = html;
      tip.style.display = 'block';
      tip.style.left = (mouse[0] + 14) + 'px';
      tip.style.top = (mouse[1] + 14) + 'px';
    };
    T.leave = () => { if (tip) tip.style.display = 'none'; };
    function sampleCategory(x, row) {
      const span = meta.t1 - meta.t0, level = Math.max(0, Math.min(meta.levels - 1, Math.ceil(Math.log2(span / Math.max(a.xr.end - a.xr.start, 1e-300)))));
      const dw = span / 2 ** level, i = Math.floor((x - meta.t0) / dw);
      const t = T.tiles[T.color].find((q) => q.level === level && q.i === i);
      if (!t) return -1;
      const col = Math.min(meta.tile_bins - 1, Math.max(0, Math.floor(((x - meta.t0) - i * dw) / dw * meta.tile_bins)));
      const counts = new Map();
      for (let s = 1; s < meta.sub; s++) { const c = t.img[(row * meta.sub + s) * meta.tile_bins + col]; if (c !== 255) counts.set(c, (counts.get(c) || 0) + 1); }
      let best = -1, n = 0;
      for (const [c, k] of counts) if (k > n) { best = c; n = k; }
      return best;
    }
    const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
    // ------------------------------------------------------------------ controls
    T.lod = lod;
    T.zoom = (t0, t1) => { a.xr.start = Math.max(t0, meta.t0 - 0.02 * (meta.t1 - meta.t0)); a.xr.end = Math.min(t1, meta.t1 + 0.02 * (meta.t1 - meta.t0)); };
    T.setColor = (c) => {
      if (c === 'region' && !T.tiles.region.length) { // decode the per-function summary once, then colour
        return loadRegionTiles().then((buf) => { T.tiles.region = tilesOf(buf, meta.tiles_region); T.setColor(c); });
      }
      T.color = c;
      a.mapper.palette = c === 'kind' ? meta.kind_palette : meta.region_palette;
      a.strip_kind.forEach((r) => { r.visible = c === 'kind'; });
      a.strip_region.forEach((r) => { r.visible = c === 'region'; });
      document.querySelectorAll('.pf-tl-legend [data-color]').forEach((e) => { e.style.display = e.dataset.color === c ? '' : 'none'; });
      lod();
      return Promise.resolve();
    };
    T.filter = (text) => { // "0-3, 7": processes; empty: all
      const want = new Set();
      for (const part of String(text || '').split(/[\s,]+/).filter(Boolean)) {
        const m = part.match(/^(\d+)(?:-(\d+))?$/);
        if (!m) return false;
        const lo = +m[1], hi = m[2] === undefined ? lo : +m[2];
        for (let p = lo; p <= hi; p++) want.add(p);
      }
      const rows = want.size ? meta.row_process.map((p, r) => (want.has(p) ? r : -1)).filter((r) => r >= 0) : null;
      if (want.size && !rows.length) return false;
      setRows(rows); lod();
      return true;
    };
    T.highlight = (text) => { const box = document.getElementById('pf-tl-procs'); if (box) box.value = text; T.filter(text); };
    T.overlay = (name, on) => { T.show[name] = on; lod(); };
    const box = document.getElementById('pf-tl-procs');
    if (box) box.addEventListener('change', () => { box.classList.toggle('pf-bad', !T.filter(box.value)); });
    document.querySelectorAll('input[name="pf-tl-color"]').forEach((r) => r.addEventListener('change', () => T.setColor(r.value)));
    document.querySelectorAll('input[data-overlay]').forEach((c) => c.addEventListener('change', () => T.overlay(c.dataset.overlay, c.checked)));
  };
  // Bokeh takes typed arrays for images when wrapped as 2-d ndarrays
  window.pfNdarray = function (arr, shape) {
    try { return Bokeh.require('core/util/ndarray').ndarray(arr, { shape }); } catch (e) { const out = []; for (let r = 0; r < shape[0]; r++) out.push(Array.from(arr.subarray(r * shape[1], (r + 1) * shape[1]))); return out; }
  };
})();
