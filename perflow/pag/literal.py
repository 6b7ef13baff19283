"""PAGs from nested literals, and back.

A literal is a list of root nodes (or one node). A node is a dict::

    {"name": "main", "kind": "function", "file": "a.c", "line": 3,
     "metrics": {"time_exc": [1.0, 2.0, 1.5, 1.0]},   # one value per process
     "children": [...]}

Metric values may be a scalar (process 0), a list (one value per process) or
a dict keyed by process or by (process, thread). Given only ``time_exc``,
``time_inc`` is computed (and the other way round), per process and thread.

Hatchet's literal form is accepted too: ``{"frame": {"name": ..., "type":
...}, "metrics": {"time (inc)": ..., "time": ...}, "children": [...]}``;
``"time (inc)"`` becomes ``time_inc`` and ``"time"`` becomes ``time_exc``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PAGError
from ..kinds import VertexKind, classify_region
from .pag import PAG

__all__ = ["from_literal", "to_literal", "complete_time_metrics"]

_HATCHET_NAMES = {"time (inc)": "time_inc", "time": "time_exc"}


def _values(v: Any, where: str) -> list[tuple[int, int, float]]:
    if isinstance(v, Mapping):
        out = []
        for k, x in v.items():
            p, t = k if isinstance(k, tuple) else (k, 0)
            out.append((int(p), int(t), float(x)))
        return out
    if isinstance(v, Sequence | np.ndarray) and not isinstance(v, str):
        return [(p, 0, float(x)) for p, x in enumerate(v)]
    try:
        return [(0, 0, float(v))]
    except (TypeError, ValueError):
        raise PAGError(f"{where}: metric value {v!r} is not a number, list or dict") from None


def from_literal(literal: Any, *, attrs: Mapping[str, Any] | None = None) -> PAG:
    """Build a PAG from a nested literal (see the module docstring).

    Parameters
    ----------
    literal : dict or list of dict
        Root node(s).
    attrs : mapping, optional
        PAG metadata.

    Returns
    -------
    PAG
    """
    roots = [literal] if isinstance(literal, Mapping) else list(literal)
    rows: list[dict[str, Any]] = []
    cells: dict[str, list[tuple[int, int, int, float]]] = {}
    stack: list[tuple[Any, int, str]] = [(r, -1, f"[{i}]") for i, r in enumerate(roots)][::-1]
    while stack:
        node, parent, where = stack.pop()
        if not isinstance(node, Mapping):
            raise PAGError(f"literal node {where} is a {type(node).__name__}, expected a dict")
        frame = node.get("frame", {})
        name = node.get("name", frame.get("name"))
        if name is None:
            raise PAGError(f"literal node {where} has no name")
        kind_hint = node.get("kind", node.get("type", frame.get("type")))
        try:
            kind = VertexKind(kind_hint).value if kind_hint else classify_region(str(name)).value
        except ValueError:
            kind = classify_region(str(name), str(kind_hint)).value
        vid = len(rows)
        rows.append(
            {
                "name": str(name),
                "kind": kind,
                "parent": parent,
                "file": node.get("file", frame.get("file", "")),
                "line": node.get("line", frame.get("line", -1)),
                "module": node.get("module", frame.get("module", "")),
            }
        )
        hatchet = "frame" in node
        for m, v in (node.get("metrics") or {}).items():
            key = _HATCHET_NAMES.get(m, m) if hatchet else m
            for p, t, x in _values(v, f"node {where} ({name}), metric {m!r}"):
                cells.setdefault(key, []).append((vid, p, t, x))
        children = node.get("children") or []
        for i, c in reversed(list(enumerate(children))):
            stack.append((c, vid, f"{where}.children[{i}]"))
    vt = pd.DataFrame(rows)
    metric_rows = _pivot(cells)
    pag = PAG.from_frames(vt, metric_rows, attrs={"source": "literal", **dict(attrs or {})})
    return complete_time_metrics(pag)


def _pivot(cells: dict[str, list[tuple[int, int, int, float]]]) -> pd.DataFrame:
    frames = []
    for m, vals in cells.items():
        a = np.asarray(vals, dtype=np.float64).reshape(-1, 4)
        frames.append(
            pd.DataFrame(
                {
                    "vertex": a[:, 0].astype(np.int64),
                    "process": a[:, 1].astype(np.int64),
                    "thread": a[:, 2].astype(np.int64),
                    m: a[:, 3],
                }
            ).set_index(["vertex", "process", "thread"])
        )
    if not frames:
        return pd.DataFrame({"vertex": [], "process": [], "thread": []}, dtype=np.int64)
    union = frames[0].index
    for f in frames[1:]:
        union = union.union(f.index, sort=False)
    # absent cells are 0; a NaN given stays NaN (a reader's value checks refuse it)
    return pd.concat([f.reindex(union, fill_value=0.0) for f in frames], axis=1).reset_index()


def complete_time_metrics(pag: PAG) -> PAG:
    """Add ``time_inc`` from ``time_exc`` (or the reverse) when only one is present.

    Inclusive time of a vertex on a (process, thread) is its exclusive time
    plus the inclusive time of its children there; an ancestor without a
    metric row on that location (a sparse profile records only where time
    was spent) gets one.
    """
    names = pag.metric_names
    has_inc, has_exc = "time_inc" in names, "time_exc" in names
    if has_inc == has_exc:
        return pag
    if has_exc:
        pag = _with_ancestor_rows(pag)
    m = pag._metrics
    view = pag.parallel
    parent_rows = np.full(len(m), -1, dtype=np.int64)
    call = view._call_edges()
    parent_rows[call["dst"].to_numpy()] = call["src"].to_numpy()
    depth = pag._vertices["depth"].to_numpy()[view._v]
    if has_exc:
        inc = m["time_exc"].to_numpy(dtype=np.float64).copy()
        for d in range(int(depth.max(initial=0)), 0, -1):
            sel = (depth == d) & (parent_rows >= 0)
            np.add.at(inc, parent_rows[sel], inc[sel])
        return pag.with_metrics(time_inc=inc)
    inc = m["time_inc"].to_numpy(dtype=np.float64)
    child = np.zeros(len(m))
    sel = parent_rows >= 0
    np.add.at(child, parent_rows[sel], inc[sel])
    return pag.with_metrics(time_exc=inc - child)


def _with_ancestor_rows(pag: PAG) -> PAG:
    """``pag`` with a zero metric row for every ancestor of a metric row that lacks one on its location."""
    m = pag._metrics
    if not len(m):
        return pag
    idx = m.index
    v = np.asarray(idx.codes[0], dtype=np.int64)
    loc = np.asarray(idx.codes[1], dtype=np.int64) * len(idx.levels[2]) + np.asarray(idx.codes[2], dtype=np.int64)
    parent = pag._vertices["parent"].to_numpy().astype(np.int64)
    n = len(parent)
    have = np.unique(loc * n + v)
    cur, cloc = parent[v], loc
    add: list[np.ndarray] = []
    while True:
        ok = cur >= 0
        cur, cloc = cur[ok], cloc[ok]
        if not len(cur):
            break
        key = np.unique(cloc * n + cur)
        add.append(key)
        cur, cloc = parent[key % n], key // n
    if not add:
        return pag
    new = np.setdiff1d(np.unique(np.concatenate(add)), have)
    if not len(new):
        return pag
    nt = len(idx.levels[2])
    extra = pd.DataFrame(
        {
            "vertex": new % n,
            "process": idx.levels[1].to_numpy()[(new // n) // nt],
            "thread": idx.levels[2].to_numpy()[(new // n) % nt],
        }
    )
    for c in m.columns:
        extra[c] = np.zeros(len(new), dtype=m[c].dtype if m[c].dtype.kind in "fiu" else np.float64)
    rows = pd.concat([m.reset_index(), extra], ignore_index=True)
    return PAG.from_frames(
        pag._vertices, rows, metric_info=pag.metric_info, trace=pag.trace, comm=pag._comm, attrs=pag.attrs
    )


def to_literal(pag: PAG, *, hatchet: bool = False) -> list[dict[str, Any]]:
    """The top-down view as a nested literal (per-process metric lists).

    With ``hatchet=True`` the result uses Hatchet's ``frame``/``metrics`` form
    with metrics summed over processes (``time_inc`` as ``"time (inc)"``,
    ``time_exc`` as ``"time"``), which ``hatchet.GraphFrame.from_literal`` reads.
    """
    vt = pag._vertices
    names = pag.metric_names
    procs = list(pag.processes)
    per: dict[int, dict[str, Any]] = {}
    m = pag._metrics
    if hatchet:
        sums = {k: pag.aggregate(k, "sum").to_numpy() for k in names}
    else:
        v = np.asarray(m.index.codes[0])
        p = m.index.levels[1].to_numpy()[m.index.codes[1]]
        t = m.index.levels[2].to_numpy()[m.index.codes[2]]
        dense_ok = (m.index.levels[2].to_numpy() == 0).all() and procs == list(range(len(procs)))
        counts = np.bincount(v, minlength=len(vt))
        starts = np.cumsum(counts) - counts
        cols = {k: m[k].to_numpy(dtype=np.float64) for k in names}

        def values(i: int, k: str) -> Any:
            lo, hi = starts[i], starts[i] + counts[i]
            if dense_ok and counts[i] == len(procs):
                return cols[k][lo:hi].tolist()
            return {
                (int(pp), int(tt)) if tt else int(pp): float(x) for pp, tt, x in zip(p[lo:hi], t[lo:hi], cols[k][lo:hi])
            }

    inv = {v: k for k, v in _HATCHET_NAMES.items()}
    for i in range(len(vt)):
        if hatchet:
            node = {
                "frame": {"name": str(vt["name"].iat[i]), "type": str(vt["kind"].iat[i])},
                "metrics": {inv.get(k, k): float(sums[k][i]) for k in names},
            }
        else:
            node = {
                "name": str(vt["name"].iat[i]),
                "kind": str(vt["kind"].iat[i]),
                "metrics": {k: values(i, k) for k in names},
            }
            if str(vt["file"].iat[i]):
                node["file"] = str(vt["file"].iat[i])
            if int(vt["line"].iat[i]) >= 0:
                node["line"] = int(vt["line"].iat[i])
        per[i] = node
    roots = []
    for i, par in enumerate(vt["parent"].to_numpy().tolist()):
        if par < 0:
            roots.append(per[i])
        else:
            per[par].setdefault("children", []).append(per[i])
    return roots
