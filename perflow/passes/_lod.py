"""Level of detail for the interactive timeline: the summary pyramid, the instances kept, and the page's JavaScript.

The interactive timeline (:mod:`perflow.passes.html_timeline`) embeds binned
summaries at several zoom levels and the longest instances; the ``CustomJS``
callbacks here pick the level and the instances in view after each pan or zoom.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perflow.sdk import PAG

from ._binned import TimelineData, share_pixels

__all__ = ["SUB", "IDLE", "TIME_JS", "LOD_JS", "pyramid", "complete_instances", "longest"]

#: Band height of a row in summary pixels (the top one a gap between rows).
SUB = 6
IDLE = "#ffffff00"

TIME_JS = """
const a = Math.abs(value);
if (a >= 1 || a === 0) return value.toPrecision(4) + ' s';
if (a >= 1e-3) return (value * 1e3).toPrecision(4) + ' ms';
if (a >= 1e-6) return (value * 1e6).toPrecision(4) + ' us';
return (value * 1e9).toPrecision(4) + ' ns';
"""

# The level-of-detail callback: after each pan or zoom, choose the summary level and the tiles in view,
# and the instances, wait states, path segments and messages in view (few enough to draw).
LOD_JS = """
const x0 = xr.start, x1 = xr.end, w = x1 - x0;
const span = meta.t1 - meta.t0;
let level = Math.ceil(Math.log2(span / Math.max(w, 1e-300)));
level = Math.max(0, Math.min(meta.levels - 1, level));
const td = tiles.data, out = {image: [], x: [], y: [], dw: [], dh: []};
for (let i = 0; i < td.level.length; i++) {
  if (td.level[i] !== level) continue;
  if (td.x[i] + td.dw[i] < x0 || td.x[i] > x1) continue;
  out.image.push(td.image[i]); out.x.push(td.x[i]); out.y.push(td.y[i]);
  out.dw.push(td.dw[i]); out.dh.push(td.dh[i]);
}
tile_view.data = out;
function pick(store, cols, lo, hi, cap, minw) {
  const d = store.data, n = d[lo].length, idx = [];
  for (let i = 0; i < n; i++) {
    const a = d[lo][i], b = d[hi][i];
    if (b > x0 && a < x1 && (b - a) >= minw) { idx.push(i); if (idx.length > cap) return null; }
  }
  const res = {};
  for (const c of cols) { const src = d[c]; res[c] = idx.map((i) => src[i]); }
  return res;
}
const inst = pick(store, ['left', 'right', 'row', 'cat', 'vertex', 'dur', 'fill'], 'left', 'right', meta.max_shown, 0);
if (inst !== null) inst.vid = inst.vertex;
inst_view.data = inst === null ? {left: [], right: [], row: [], cat: [], vertex: [], vid: [], dur: [], fill: []} : inst;
let shown = inst === null ? 0 : inst.left.length;
if (waits !== null) {
  const ws = pick(waits, ['left', 'right', 'row'], 'left', 'right', meta.max_overlay, 0);
  wait_view.data = ws === null ? {left: [], right: [], row: []} : ws;
  wait_binned.visible = ws === null;
}
if (path !== null) {
  const ps = pick(path, ['x0', 'y0', 'x1', 'y1'], 'x0', 'x1', meta.max_overlay, 0);
  path_view.data = ps === null ? {x0: [], y0: [], x1: [], y1: []} : ps;
  path_binned.visible = ps === null;
}
if (msgs !== null) {
  const ms = pick(msgs, ['x0', 'y0', 'x1', 'y1'], 'x0', 'x1', meta.max_overlay, 0);
  msg_view.data = ms === null ? {x0: [], y0: [], x1: [], y1: []} : ms;
}
const digits = Math.min(12, Math.max(3, Math.ceil(-Math.log10(Math.max(w, 1e-12))) + 3));
status.text = 'window ' + x0.toFixed(digits) + ' s \u2013 ' + x1.toFixed(digits) + ' s \u00b7 summary level ' + level +
  ' of ' + (meta.levels - 1) + ' \u00b7 ' + (shown ? shown + ' instances drawn' : 'instances: zoom in to draw them');
status.tags = [x0, x1, level, shown];
"""


def pyramid(
    td: TimelineData, t0: float, t1: float, levels: int, tile_bins: int
) -> tuple[dict[str, list[Any]], np.ndarray]:
    """Summary tiles of every level (category index per pixel, uint8) and the finest level's shares."""
    finest = tile_bins * 2 ** (levels - 1)
    shares = td.shares(t0, t1, finest)  # (rows, finest, categories): computed once; coarser levels are means
    n_rows, n_cats = td.n_rows, len(td.names)
    tiles: dict[str, list[Any]] = {"image": [], "x": [], "y": [], "dw": [], "dh": [], "level": []}
    for k in range(levels):
        s_k = shares.reshape(n_rows, tile_bins * 2**k, 2 ** (levels - 1 - k), n_cats).mean(axis=2)
        px = share_pixels(s_k, SUB - 1).reshape(n_rows, SUB - 1, -1)
        px = np.concatenate([np.full((n_rows, 1, px.shape[2]), n_cats, np.int16), px], axis=1)
        px = px.reshape(n_rows * SUB, -1).astype(np.uint8)
        dw = (t1 - t0) / 2**k
        for i in range(2**k):
            tile = np.ascontiguousarray(px[:, i * tile_bins : (i + 1) * tile_bins])
            if not (tile < n_cats).any():
                continue  # nothing happens in this tile
            tiles["image"].append(tile)
            tiles["x"].append(t0 + i * dw)
            tiles["y"].append(-0.5)
            tiles["dw"].append(dw)
            tiles["dh"].append(float(n_rows))
            tiles["level"].append(k)
    return tiles, shares


def complete_instances(pag: PAG, kept: np.ndarray) -> np.ndarray:
    """Whether each kept instance's whole subtree is kept too (then drawing it hides nothing).

    An instance whose subtree is incomplete is drawn as an outline only (it still answers hover);
    the summary beneath shows what its missing descendants do.
    """
    iv = pag.trace.intervals  # type: ignore[union-attr]
    n = len(iv)
    ok = np.zeros(n, dtype=bool)
    ok[kept] = True
    parent = iv["parent"].to_numpy()
    depth = pag.vertex_table["depth"].to_numpy()[iv["vertex"].to_numpy()]
    for d in range(int(depth.max()) if n else 0, 0, -1):
        bad = (depth == d) & ~ok & (parent >= 0)
        ok[parent[bad]] = False
    return ok[kept]


def longest(start: np.ndarray, end: np.ndarray, cap: int) -> np.ndarray:
    """Positions of at most ``cap`` spans, the longest first, returned in start order."""
    if len(start) <= cap:
        return np.argsort(start, kind="stable")
    keep = np.argpartition(-(end - start), cap - 1)[:cap]
    return keep[np.argsort(start[keep], kind="stable")]
