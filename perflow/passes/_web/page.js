// perflow's run page: sortable and paginated tables, and the findings' links to their evidence
// (the timeline zoomed to it, the call path in the panes, the table row).
(function () {
  'use strict';
  const PAGE = 25;
  const units = { ns: 1e-9, us: 1e-6, '\u00b5s': 1e-6, ms: 1e-3, s: 1, B: 1, KiB: 1024, MiB: 1048576, GiB: 1073741824, TiB: 1099511627776, '%': 1 };
  function key(td) {
    if (td.dataset.v !== undefined) return parseFloat(td.dataset.v);
    const t = td.textContent.trim().replace(/,/g, '');
    const m = t.match(/^(-?[0-9.]+(?:e[-+]?[0-9]+)?)\s*([a-zA-Z%\u00b5]*)$/);
    if (m && (m[2] === '' || m[2] in units)) return parseFloat(m[1]) * (units[m[2]] || 1);
    return t.toLowerCase();
  }
  // ------------------------------------------------------------------ pagination
  function paginate(table, page) {
    const rows = Array.from(table.tBodies[0].rows);
    const n = rows.length, pages = Math.max(1, Math.ceil(n / PAGE));
    page = Math.max(0, Math.min(pages - 1, page));
    table.dataset.page = page;
    rows.forEach((r, i) => { r.style.display = (n <= PAGE || (i >= page * PAGE && i < (page + 1) * PAGE)) ? '' : 'none'; });
    const pager = table.parentElement.querySelector(`.pf-pager[data-for="${table.id}"]`);
    if (pager) {
      pager.querySelector('.pf-page').textContent = `rows ${page * PAGE + 1}\u2013${Math.min(n, (page + 1) * PAGE)} of ${n}`;
      pager.querySelector('.pf-prev').disabled = page === 0;
      pager.querySelector('.pf-next').disabled = page >= pages - 1;
    }
  }
  function sortBy(th) {
    const table = th.closest('table'), body = table.tBodies[0], i = th.cellIndex;
    const dir = th.dataset.dir === 'desc' ? 'asc' : 'desc';
    table.querySelectorAll('th').forEach((h) => delete h.dataset.dir);
    th.dataset.dir = dir;
    const rows = Array.from(body.rows), k = new Map(rows.map((r) => [r, key(r.cells[i])]));
    rows.sort((a, b) => {
      const x = k.get(a), y = k.get(b);
      const c = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === 'number' ? -1 : 1);
      return dir === 'asc' ? c : -c;
    });
    rows.forEach((r) => body.appendChild(r));
    if (table.classList.contains('pf-paged')) paginate(table, 0);
  }
  document.querySelectorAll('table.pf-sortable th').forEach((th) => th.addEventListener('click', () => sortBy(th)));
  document.querySelectorAll('table.pf-paged').forEach((t) => {
    const pager = t.parentElement.querySelector(`.pf-pager[data-for="${t.id}"]`);
    if (pager) {
      pager.querySelector('.pf-prev').onclick = () => paginate(t, +t.dataset.page - 1);
      pager.querySelector('.pf-next').onclick = () => paginate(t, +t.dataset.page + 1);
    }
    paginate(t, 0);
  });
  // ------------------------------------------------------------------ the evidence of a finding
  function showRow(tableId, row) {
    const t = document.getElementById(tableId);
    if (!t) return false;
    for (let d = t.closest('details'); d; d = d.parentElement && d.parentElement.closest('details')) d.open = true;
    const tr = Array.from(t.tBodies[0].rows).find((r) => r.dataset.row === String(row));
    if (!tr) { t.scrollIntoView({ block: 'start' }); return false; }
    if (t.classList.contains('pf-paged')) paginate(t, Math.floor(Array.from(t.tBodies[0].rows).indexOf(tr) / PAGE));
    t.querySelectorAll('tr.pf-hl').forEach((r) => r.classList.remove('pf-hl'));
    tr.classList.add('pf-hl');
    tr.scrollIntoView({ block: 'center' });
    return true;
  }
  function zoom(t0, t1, procs) {
    if (!window.pfTimeline) return false;
    const pad = Math.max((t1 - t0) * 2, 1e-9);
    window.pfTimeline.zoom(t0 - pad, t1 + pad);
    if (procs) window.pfTimeline.highlight(procs);
    document.getElementById('timeline').scrollIntoView({ block: 'start' });
    return true;
  }
  function callPath(v) {
    if (!window.pfPanes) return false;
    const ok = window.pfPanes.selectVertex(v);
    document.getElementById('profile').scrollIntoView({ block: 'start' });
    return ok;
  }
  document.querySelectorAll('ol.pf-findings a[data-go]').forEach((a) => {
    a.addEventListener('click', (ev) => {
      ev.preventDefault();
      const li = a.closest('li'), go = a.dataset.go;
      if (go === 'timeline') zoom(parseFloat(li.dataset.t0), parseFloat(li.dataset.t1), li.dataset.procs);
      else if (go === 'tree') callPath(parseInt(li.dataset.vertex, 10));
      else if (go === 'row') showRow(li.dataset.table, parseInt(li.dataset.row, 10));
    });
  });
  window.pfPage = { showRow, zoom, callPath, paginate };
})();
