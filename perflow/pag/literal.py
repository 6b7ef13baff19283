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

from .._arrays import in_sorted, unique
from ..errors import PAGError
from ..kinds import VertexKind, classify_region
from .pag import PAG

__all__ = ["from_literal", "to_literal", "complete_time_metrics", "HATCHET_NAMES"]

#: Hatchet's metric names -> perflow's (the literal form and the Hatchet reader both map them)
HATCHET_NAMES = {"time (inc)": "time_inc", "time": "time_exc"}


def _bad_value(where: str, v: Any) -> PAGError:
    return PAGError(f"{where}: metric value {v!r} is not a number, list or dict")


class _Cells:
    """One metric's cells (vertex, process, thread, value), collected per node and converted once at the end."""

    __slots__ = ("vertex", "count", "keyed", "values", "where")

    def __init__(self) -> None:
        self.vertex: list[int] = []
        self.count: list[int] = []
        self.keyed: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # node -> (process, thread) of a dict value
        self.values: list[Any] = []  # every value, flat (numbers or whatever the literal held)
        self.where: list[str] = []

    def add(self, vid: int, v: Any, where: str) -> None:
        t = type(v)
        if t is list or t is tuple:  # the usual form: one value per process
            self.values.extend(v)
            n = len(v)
        elif t is dict or isinstance(v, Mapping):
            keys = [k if isinstance(k, tuple) else (k, 0) for k in v]
            try:
                proc = np.array([int(k[0]) for k in keys], dtype=np.int64)
                thr = np.array([int(k[1]) for k in keys], dtype=np.int64)
            except (TypeError, ValueError, IndexError):
                raise _bad_value(where, v) from None
            if len(set(zip(proc.tolist(), thr.tolist()))) < len(keys):
                raise PAGError(f"{where}: metric value {v!r} gives one (process, thread) twice")
            self.keyed[len(self.count)] = (proc, thr)
            self.values.extend(v.values())
            n = len(keys)
        elif isinstance(v, Sequence | np.ndarray) and not isinstance(v, str):
            vals = np.asarray(v).ravel()
            self.values.extend(vals.tolist())
            n = len(vals)
        else:
            self.values.append(v)
            n = 1
        self.vertex.append(vid)
        self.count.append(n)
        self.where.append(where)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(vertex, process, thread, value) of every cell."""
        count = np.asarray(self.count, dtype=np.int64)
        total = int(count.sum())
        vertex = np.repeat(np.asarray(self.vertex, dtype=np.int64), count)
        offset = np.cumsum(count) - count
        proc = np.arange(total, dtype=np.int64) - np.repeat(offset, count)  # a list's position is its process
        thr = np.zeros(total, dtype=np.int64)
        for i, (p, t) in self.keyed.items():  # dicts keyed by process (and thread)
            a = int(offset[i])
            proc[a : a + len(p)] = p
            thr[a : a + len(t)] = t
        try:
            value = np.array(self.values, dtype=np.float64) if self.values else np.zeros(0)
            if value.shape != (total,):
                raise ValueError
        except (TypeError, ValueError):
            for i, (a, n) in enumerate(zip(offset.tolist(), self.count)):  # name the node that holds the bad value
                chunk = self.values[a : a + n]
                try:
                    if np.array(chunk, dtype=np.float64).shape != (n,):
                        raise ValueError
                except (TypeError, ValueError):
                    raise _bad_value(self.where[i], chunk if n != 1 else chunk[0]) from None
            raise
        return vertex, proc, thr, value


_KINDS: dict[str, str] = {k.value: k.value for k in VertexKind}


def _kind(name: str, hint: Any) -> str:
    if hint:
        got = _KINDS.get(hint) if isinstance(hint, str) else None
        if got is not None:
            return got
        try:
            return VertexKind(hint).value
        except ValueError:
            return classify_region(name, str(hint)).value
    return classify_region(name).value


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
    cells: dict[str, _Cells] = {}
    stack: list[tuple[Any, int, str]] = [(r, -1, f"[{i}]") for i, r in enumerate(roots)][::-1]
    while stack:
        node, parent, where = stack.pop()
        if not isinstance(node, Mapping):
            raise PAGError(f"literal node {where} is a {type(node).__name__}, expected a dict")
        frame = node.get("frame", {})
        name = node.get("name", frame.get("name"))
        if name is None:
            raise PAGError(f"literal node {where} has no name")
        kind = _kind(str(name), node.get("kind", node.get("type", frame.get("type"))))
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
            key = HATCHET_NAMES.get(m, m) if hatchet else m
            c = cells.get(key)
            if c is None:
                c = cells[key] = _Cells()
            c.add(vid, v, f"node {where} ({name}), metric {m!r}")
        children = node.get("children") or []
        for i, c in reversed(list(enumerate(children))):
            stack.append((c, vid, f"{where}.children[{i}]"))
    vt = pd.DataFrame(rows)
    metric_rows = _pivot(cells)
    pag = PAG.from_frames(vt, metric_rows, attrs={"source": "literal", **dict(attrs or {})})
    return complete_time_metrics(pag)


def _pivot(cells: dict[str, _Cells]) -> pd.DataFrame:
    """One row per (vertex, process, thread) with a column per metric (0.0 where a metric has no cell)."""
    if not cells:
        return pd.DataFrame({"vertex": [], "process": [], "thread": []}, dtype=np.int64)
    arrs = {m: c.arrays() for m, c in cells.items()}
    first = next(iter(arrs.values()))
    if all(all(np.array_equal(a, b) for a, b in zip(x[:3], first[:3])) for x in arrs.values()):
        # every metric has the same cells (the usual literal): the columns line up as they are; a node holds
        # each metric once and a list or dict names each (process, thread) once, so the cells are distinct
        return pd.DataFrame(
            {"vertex": first[0], "process": first[1], "thread": first[2], **{m: x[3] for m, x in arrs.items()}}
        )
    frames = [
        pd.DataFrame({"vertex": x[0], "process": x[1], "thread": x[2], m: x[3]}).set_index(
            ["vertex", "process", "thread"]
        )
        for m, x in arrs.items()
    ]
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
    was spent) gets one. Linear in the metric rows: each row's parent row is
    found by arithmetic where the parent has rows on every location (else by a
    binary search), one weighted ``bincount`` per tree level adds the
    children up.
    """
    names = pag.metric_names
    has_inc, has_exc = "time_inc" in names, "time_exc" in names
    if has_inc == has_exc:
        return pag
    parent_rows, missing = _parent_rows(pag)
    if has_exc and missing:
        pag = _with_ancestor_rows(pag)
        parent_rows, _ = _parent_rows(pag)
    m = pag._metrics
    n = len(m)
    v = np.asarray(m.index.codes[0], dtype=np.int64)
    sel = np.flatnonzero(parent_rows >= 0)
    if has_exc:
        inc = m["time_exc"].to_numpy(dtype=np.float64).copy()
        depth = pag._vertices["depth"].to_numpy().astype(np.int64)[v[sel]]
        order = np.argsort(-depth, kind="stable")
        rows, depth = sel[order], depth[order]
        cuts = np.flatnonzero(np.diff(depth)) + 1
        for level in np.split(rows, cuts):  # deepest first: a level's inclusive times are final when it is added
            inc += np.bincount(parent_rows[level], weights=inc[level], minlength=n)
        return pag.with_metrics(time_inc=inc)
    inc = m["time_inc"].to_numpy(dtype=np.float64)
    child = np.bincount(parent_rows[sel], weights=inc[sel], minlength=n) if n else np.zeros(0)
    return pag.with_metrics(time_exc=inc - child)


def _parent_rows(pag: PAG) -> tuple[np.ndarray, bool]:
    """The metric row of each row's parent vertex on the same location (-1: a root, or no such row), and
    whether some row's parent has no row there."""
    m = pag._metrics
    n = len(m)
    idx = m.index
    v = np.asarray(idx.codes[0], dtype=np.int64)
    parent = pag._vertices["parent"].to_numpy().astype(np.int64)
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out, False
    pv = parent[v]
    nt = len(idx.levels[2])
    loc = np.asarray(idx.codes[1], dtype=np.int64) * nt + np.asarray(idx.codes[2], dtype=np.int64)
    n_loc = len(idx.levels[1]) * nt
    count = np.bincount(v, minlength=len(parent))
    start = np.zeros(len(parent) + 1, dtype=np.int64)
    np.cumsum(count, out=start[1:])
    has = pv >= 0
    full = np.zeros(n, dtype=bool)
    full[has] = count[pv[has]] == n_loc  # the parent has a row on every location: its rows are in location order
    out[full] = start[pv[full]] + loc[full]
    rest = np.flatnonzero(has & ~full)
    if len(rest):
        key = v * n_loc + loc  # sorted: rows are ordered by (vertex, process, thread)
        q = pv[rest] * n_loc + loc[rest]
        found = in_sorted(key, q)
        out[rest[found]] = np.searchsorted(key, q[found])
    return out, bool((has & (out < 0)).any())


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
    have = np.sort(loc * n + v)
    cur, cloc = parent[v], loc
    add: list[np.ndarray] = []
    while True:
        ok = cur >= 0
        key = cloc[ok] * n + cur[ok]
        key = unique(key[~in_sorted(have, key)])  # parents without a row (usually none: one search per row)
        if add and len(key):
            key = key[~in_sorted(np.sort(np.concatenate(add)), key)]
        if not len(key):
            break
        add.append(key)
        cur, cloc = parent[key % n], key // n
    if not add:
        return pag
    new = np.sort(np.concatenate(add))
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

    inv = {v: k for k, v in HATCHET_NAMES.items()}
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
