"""The data of the page's linked panes (metric tree x call tree x system tree), as Cube and hpcviewer show it.

One JSON object, embedded in the page, holds everything the panes' script needs:

* ``vertices``: the call paths shown (the largest ``max_vertices`` by inclusive time, with their
  ancestors; the smaller children of a call path are folded into one ``(N more call paths)``
  line, so that every value still adds up), with name, parent, file, line, kind, category and
  function (name and file: what the bottom-up and flat views group by);
* ``locations``: the system tree's leaves (process, thread, name, type: cpu or gpu, host);
* ``metrics``: the metric tree. ``time`` splits into the breakdown's categories (computation,
  point-to-point, collective, synchronisation, other MPI, I/O, GPU, idle) and each category into
  the wait states found at its calls (Late Sender, Wait at N x N, ...: ``amount`` per call path
  and location from the wait-state instances); then ``visits`` and the PAG's other exclusive
  metrics. Each node has its *own* part (a category's time without its waits); a node's value
  is its own part plus its children's, as in Cube. ``combine`` says how a metric aggregates:
  ``sum``, or ``min``/``max`` for minima and maxima (Score-P's ``min_time``/``max_time``),
  which are never summed;
* ``blob``: every own part as a (call path x location) matrix of the rows that are not zero:
  int32 call-path indices, a float32 scale per row and int16 values (``value = q * scale /
  32767``, 5 significant digits of the row's largest value), zlib-compressed and base64-encoded;
* ``sources``: the lines around each call path's ``file:line`` when the file is readable.

The script rebuilds each matrix once, sums subtrees for inclusive values and groups call paths
by function for the bottom-up and flat views; nothing else is computed in the browser.
"""

from __future__ import annotations

import base64
import logging
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, grouped
from perflow.sdk.profile import ancestors_mask, categories, metric_combine, tree_index
from perflow.sdk.trace import wait_label

__all__ = ["panes_data", "CATEGORY_LABELS"]

log = logging.getLogger(__name__)

CATEGORY_LABELS = {
    "computation": "computation",
    "p2p": "point-to-point",
    "collective": "collective",
    "sync": "synchronisation",
    "mpi": "other MPI",
    "io": "I/O",
    "gpu": "GPU",
    "idle": "idle",
    "wait": "waiting",
}


def _kept(pag: PAG, score: np.ndarray, max_vertices: int) -> np.ndarray:
    """The call paths shown: the ``max_vertices`` largest by ``score`` (non-zero ones), with their ancestors."""
    n = pag.n_vertices
    order = np.argsort(-np.abs(score), kind="stable")
    top = order[: max(1, max_vertices)]
    top = top[np.abs(score[top]) > 0] if (np.abs(score) > 0).any() else order[: min(n, max_vertices)]
    return ancestors_mask(pag.vertex_table["parent"].to_numpy(), top, include_self=True)


def _fold(parent: np.ndarray, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Where each vertex's values go: itself when kept, else a ``(N more)`` line under its nearest kept ancestor.

    Returns the target index of every vertex (in the shown order: kept vertices first, then one
    folded line per ancestor with folded children), the new parent array and the folded counts.
    """
    n = len(parent)
    anchor = np.full(n, -1, dtype=np.int64)  # nearest kept ancestor-or-self, one tree level at a time
    depth = _depths(parent)
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max(initial=0)) + 2))
    for d in range(len(bounds) - 1):
        lv = by_depth[bounds[d] : bounds[d + 1]]
        up = np.where(parent[lv] >= 0, anchor[np.maximum(parent[lv], 0)], -1)
        anchor[lv] = np.where(kept[lv], lv, up)
    kept_ids = np.flatnonzero(kept)
    index = np.full(n, -1, dtype=np.int64)
    index[kept_ids] = np.arange(len(kept_ids))
    new_parent = [int(index[parent[v]]) if parent[v] >= 0 else -1 for v in kept_ids]
    folded = np.flatnonzero(~kept)
    # a folded vertex goes to the (N more) line of the kept ancestor of its parent (-1: a root line)
    owner = np.where(parent[folded] >= 0, anchor[np.maximum(parent[folded], 0)], -1)
    owner = np.where(parent[folded] >= 0, owner, -1)
    target = index.copy()
    counts: list[int] = []
    if len(folded):
        # only the top folded vertex of each folded subtree counts as a call path of the line
        top_folded = folded[(parent[folded] < 0) | kept[np.maximum(parent[folded], 0)]]
        owners, inverse = np.unique(owner, return_inverse=True)
        line = len(kept_ids) + np.arange(len(owners))
        target[folded] = line[inverse]
        new_parent += [int(index[o]) if o >= 0 else -1 for o in owners]
        tops = np.where(parent[top_folded] >= 0, anchor[np.maximum(parent[top_folded], 0)], -1)
        counts = [int((tops == o).sum()) for o in owners]
    return target, np.asarray(new_parent, dtype=np.int64), counts


def _depths(parent: np.ndarray) -> np.ndarray:

    return tree_index(parent).depth


def _location_index(pag: PAG, process: np.ndarray, thread: np.ndarray) -> np.ndarray:
    loc = pag.locations
    key = pd.MultiIndex.from_arrays([loc["process"].to_numpy(), loc["thread"].to_numpy()])
    return key.get_indexer(pd.MultiIndex.from_arrays([process, thread]))


class _Blob:
    """Own parts as quantised (call path x location) rows, appended to one buffer."""

    def __init__(self, n_loc: int):
        self.n_loc = n_loc
        self.chunks: list[bytes] = []
        self.size = 0
        self.cells = 0

    def add(
        self, target: np.ndarray, loc: np.ndarray, value: np.ndarray, n_targets: int, combine: str
    ) -> dict[str, int]:
        ok = (target >= 0) & (loc >= 0) & np.isfinite(value)
        t, lo, x = target[ok], loc[ok], value[ok]
        mat = np.zeros((n_targets, self.n_loc))
        if combine == "min":
            mat[:] = np.inf
            np.minimum.at(mat, (t, lo), x)
            mat[~np.isfinite(mat)] = 0.0
        elif combine == "max":
            mat[:] = -np.inf
            np.maximum.at(mat, (t, lo), x)
            mat[~np.isfinite(mat)] = 0.0
        else:
            np.add.at(mat, (t, lo), x)
        rows = np.flatnonzero(np.any(mat != 0, axis=1))
        sub = mat[rows]
        scale = np.abs(sub).max(axis=1) if len(rows) else np.zeros(0)
        q = np.zeros(sub.shape, dtype=np.int16)
        if len(rows):
            q = np.round(sub / np.where(scale > 0, scale, 1)[:, None] * 32767).astype(np.int16)
        start = self.size
        for arr in (rows.astype(np.int32), (scale / 32767).astype(np.float32), q):
            b = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
            self.chunks.append(b)
            self.size += len(b)
        self.cells += q.size
        return {"offset": start, "rows": int(len(rows))}

    def encoded(self) -> str:
        return base64.b64encode(zlib.compress(b"".join(self.chunks), 6)).decode()


def _sources(pag: PAG, vids: np.ndarray, context: int, budget: int) -> dict[str, Any]:
    """``"file:line" -> {"path", "first", "lines"}`` for the call paths whose source file is readable."""
    vt = pag.vertex_table
    roots = [Path.cwd()]
    src = str(pag.attrs.get("source", "") or "")
    if src:
        p = Path(src)
        roots += [p if p.is_dir() else p.parent, (p if p.is_dir() else p.parent).parent]
    out: dict[str, Any] = {}
    cache: dict[str, list[str] | None] = {}
    used = 0
    for v in vids:
        f, ln = str(vt["file"].iat[v] or ""), int(vt["line"].iat[v])
        key = f"{f}:{ln}"
        if not f or ln < 1 or key in out:
            continue
        if f not in cache:
            cache[f] = None
            cands = [Path(f)] if Path(f).is_absolute() else [r / f for r in roots]
            for c in cands:
                try:
                    if c.is_file() and c.stat().st_size < 4_000_000:
                        cache[f] = c.read_text(encoding="utf-8", errors="replace").splitlines()
                        out.setdefault("__paths__", {})[f] = str(c)
                        break
                except OSError:
                    continue
        lines = cache[f]
        if lines is None or ln > len(lines):
            continue
        a, b = max(1, ln - context), min(len(lines), ln + context)
        chunk = [s[:200] for s in lines[a - 1 : b]]
        used += sum(len(s) for s in chunk)
        if used > budget:
            break
        out[key] = {"first": a, "lines": chunk}
    return out


def _wait_rows(pag: PAG, waits: pd.DataFrame | None) -> pd.DataFrame | None:
    if waits is None or not len(waits) or not {"process", "thread", "kind", "amount", "vertex"} <= set(waits.columns):
        return None
    w = waits[["process", "thread", "kind", "amount", "vertex"]]
    v = w["vertex"].to_numpy()
    ok = (v >= 0) & (v < pag.n_vertices)
    return w if ok.all() else w[ok]


def panes_data(
    pag: PAG,
    waits: pd.DataFrame | None = None,
    *,
    max_vertices: int = 2000,
    max_cells: int = 2_000_000,
    source_context: int = 6,
    source_budget: int = 300_000,
) -> dict[str, Any]:
    """The panes' data (see the module docstring).

    Parameters
    ----------
    pag : PAG
    waits : DataFrame, optional
        Wait-state instances (``process``, ``thread``, ``kind``, ``amount``, ``vertex``): the
        wait states of the metric tree.
    max_vertices : int
        Call paths shown (the others are folded into ``(N more call paths)`` lines).
    max_cells : int
        At most this many (call path x location) values are embedded; fewer call paths are
        shown when there are more.
    source_context : int
        Lines shown before and after a call path's line in the source pane.
    source_budget : int
        At most this many characters of source.
    """
    n_loc = max(len(pag.locations), 1)
    if "time_inc" in pag.metric_names:
        score = pag.aggregate("time_inc", "sum").to_numpy(dtype=np.float64)
    else:
        score = np.zeros(pag.n_vertices)
    cap = max(1, min(max_vertices, max_cells // (3 * n_loc)))
    kept = _kept(pag, score, cap)
    parent = pag.vertex_table["parent"].to_numpy(dtype=np.int64)
    target, new_parent, folded_counts = _fold(parent, kept)
    kept_ids = np.flatnonzero(kept)
    n_t = len(new_parent)
    blob = _Blob(n_loc)
    metrics: list[dict[str, Any]] = []

    def node(mid: str, label: str, par: int, unit: str, combine: str = "sum", desc: str = "") -> int:
        metrics.append(
            {"id": mid, "label": label, "parent": par, "unit": unit, "combine": combine, "desc": desc, "part": None}
        )
        return len(metrics) - 1

    names = pag.metric_names
    if "time_exc" in names:
        g = grouped(pag, "time_exc", "location")
        cat = categories(pag)
        vcat = cat[g.vertex]
        own = g.value.copy()
        w = _wait_rows(pag, waits)
        wait_parts: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if w is not None:
            wl = _location_index(pag, w["process"].to_numpy(), w["thread"].to_numpy())
            wv = w["vertex"].to_numpy(dtype=np.int64)
            wa = w["amount"].to_numpy(dtype=np.float64)
            # the waits leave their call's own time: per (vertex, location), never below zero
            span = (
                int(max(n_loc, int(g.group.max()) + 1 if len(g.group) else 0)) + 2
            )  # (vertex, location) as one integer
            key_rows = pd.Index(g.vertex.astype(np.int64) * span + (g.group.astype(np.int64) + 1))
            pos = key_rows.get_indexer(wv * span + (wl.astype(np.int64) + 1))
            taken = np.zeros(len(own))
            np.add.at(taken, pos[pos >= 0], wa[pos >= 0])
            own = own - np.minimum(taken, np.maximum(own, 0))
            # per (category of the call, kind): integer codes, not a grouping of millions of strings
            ccode, cnames = pd.factorize(cat)
            kcode, knames = pd.factorize(w["kind"], use_na_sentinel=False)
            key = ccode[wv].astype(np.int64) * len(knames) + kcode
            order = np.argsort(key, kind="stable")
            uniq, first = np.unique(key[order], return_index=True)
            groups = {
                (str(cnames[u // len(knames)]), str(knames[u % len(knames)])): order[a:b]
                for u, a, b in zip(uniq.tolist(), first.tolist(), [*first[1:].tolist(), len(order)])
            }
            for ck in sorted(groups):  # as a grouping by the names would list them
                idx = groups[ck]
                wait_parts[ck] = (wv[idx], wl[idx], wa[idx])
        root = node(
            "time", "time", -1, "s", desc="exclusive time of every call path (a node is its own part plus its children)"
        )
        present = [c for c in CATEGORY_LABELS if c in set(vcat) or any(k[0] == c for k in wait_parts)]
        for c in present:
            i = node(f"time/{c}", CATEGORY_LABELS[c], root, "s", desc=f"time in {CATEGORY_LABELS[c]} calls")
            m = vcat == c
            metrics[i]["part"] = blob.add(target[g.vertex[m]], g.group[m], own[m], n_t, "sum")
            for (cc, k), (wv_, wl_, wa_) in sorted(wait_parts.items(), key=lambda kv: -float(kv[1][2].sum())):
                if cc != c:
                    continue
                j = node(f"time/{c}/{k}", wait_label(k), i, "s", desc=f"{wait_label(k)}: waiting time at the calls")
                metrics[j]["part"] = blob.add(target[wv_], wl_, wa_, n_t, "sum")
    for mname in names:
        info = pag.metric_info.get(mname)
        if mname in ("time_exc", "time_inc") or (info is not None and info.mode == "inclusive"):
            continue
        comb = metric_combine(mname, info)
        unit = info.unit if info is not None else ""
        i = node(mname, mname, -1, unit, comb, info.description if info is not None else "")
        gm = grouped(pag, mname, "location")
        metrics[i]["part"] = blob.add(target[gm.vertex], gm.group, gm.value, n_t, comb)
    if not metrics and "time_inc" in names:  # only inclusive time: shown as it is
        i = node("time_inc", "time_inc", -1, "s", desc="inclusive time")
        metrics[i]["inclusive"] = True
        gi = grouped(pag, "time_inc", "location")
        keep = kept[gi.vertex]
        metrics[i]["part"] = blob.add(target[gi.vertex[keep]], gi.group[keep], gi.value[keep], n_t, "max")
    vt = pag.vertex_table
    cats = categories(pag)
    fn_key = pd.MultiIndex.from_arrays(
        [vt["name"].astype(str).to_numpy()[kept_ids], vt["file"].astype(str).to_numpy()[kept_ids]]
    )
    codes, fn_names = pd.factorize(fn_key)  # a function: a name in a file (two call paths of it are one function)
    n_fold = n_t - len(kept_ids)
    loc = pag.locations
    tl = getattr(getattr(pag, "trace", None), "locations", None)
    lname = [
        f"rank {p}" + (f" thread {t}" if loc["thread"].max() > 0 else "") for p, t in zip(loc["process"], loc["thread"])
    ]
    ltype = ["cpu"] * len(loc)
    host = [""] * len(loc)
    if isinstance(tl, pd.DataFrame) and {"process", "thread"} <= set(tl.columns):
        ix = _location_index(pag, tl["process"].to_numpy(), tl["thread"].to_numpy())
        for j, i in enumerate(ix):
            if i < 0:
                continue
            if "type" in tl:
                ltype[i] = str(tl["type"].iat[j])
            name = str(tl["name"].iat[j]) if "name" in tl and isinstance(tl["name"].iat[j], str) else ""
            if name and ltype[i] != "cpu":  # a GPU stream by its name ("GPU 0 stream 7"), under its rank
                lname[i] = f"rank {int(loc['process'].iat[i])}: {name}"
            if "host" in tl and isinstance(tl["host"].iat[j], str):
                host[i] = str(tl["host"].iat[j])
    data = {
        "vertices": {
            "id": [*kept_ids.tolist(), *([-1] * n_fold)],
            "name": [
                *vt["name"].astype(str).to_numpy()[kept_ids].tolist(),
                *[f"({c} more call path{'s' if c != 1 else ''})" for c in folded_counts],
            ],
            "parent": new_parent.tolist(),
            "file": [*vt["file"].astype(str).to_numpy()[kept_ids].tolist(), *([""] * n_fold)],
            "line": [*vt["line"].to_numpy(dtype=np.int64)[kept_ids].tolist(), *([-1] * n_fold)],
            "kind": [*vt["kind"].astype(str).to_numpy()[kept_ids].tolist(), *(["other"] * n_fold)],
            "category": [*cats[kept_ids].tolist(), *(["computation"] * n_fold)],
            "fn": [*codes.tolist(), *([len(fn_names)] * n_fold)],
        },
        "functions": [*[str(k[0]) for k in fn_names], "(smaller call paths)"],
        "locations": {
            "process": loc["process"].astype(int).tolist(),
            "thread": loc["thread"].astype(int).tolist(),
            "name": lname,
            "type": ltype,
            "host": host,
        },
        "metrics": metrics,
        "n_locations": n_loc,
        "blob": blob.encoded(),
        "sources": _sources(pag, kept_ids, source_context, source_budget),
        "folded": int((~kept).sum()),
    }
    log.debug("panes: %d call paths (%d folded), %d locations, %d cells", n_t, data["folded"], n_loc, blob.cells)
    return data
