"""Checks of a saved PAG's tables on load: a damaged or hand-edited table is a FormatError naming it and the row.

A saved PAG (:mod:`perflow.pag.persist`) is a folder of Parquet tables that
anyone can edit. Loaded unchecked, a parent cycle, a parent or vertex id out
of range, a wrong depth or an interval that ends before it starts load fine
and fail later inside an analysis with a ``TypeError`` or ``IndexError`` (or
give a wrong answer). :func:`check_tables` refuses them at load time:

* ``vertices``: ``parent`` in ``-1..n-1``, never the vertex itself, and
  acyclic (every chain of parents ends at a root); ``depth``, when stored,
  the number of ancestors;
* ``metrics``: ``vertex`` an existing vertex, ``process``/``thread`` >= 0;
* ``intervals``: ``vertex`` an existing vertex (or -1), ``parent`` an
  existing interval (or -1), ``(process, thread)`` a location of the trace,
  ``enter``/``leave`` finite with ``leave >= enter``;
* ``messages``, ``collectives``, ``locks``, ``io``, ``rma``: every
  ``*_interval``/``interval`` column an existing interval (or -1), their
  locations existing ones, ``bytes``/``sent``/``received`` >= 0, times
  finite and ``begin <= end``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import FormatError
from ..units import show

__all__ = ["check_tables", "check_parents"]


def _fail(where: Path, row: int, message: str) -> None:
    raise FormatError(where, f"row {row}: {message}", where=None)


def _ints(df: pd.DataFrame, col: str, where: Path) -> np.ndarray:
    s = df[col]
    if s.dtype.kind not in "iu":
        raise FormatError(where, f"column {col!r} must hold integers, holds {s.dtype}")
    return s.to_numpy(dtype=np.int64)


def check_parents(parent: np.ndarray, where: Path, depth: np.ndarray | None = None) -> np.ndarray:
    """The depth of every vertex of a parent array; a parent out of range, a cycle or a wrong depth is refused."""
    n = len(parent)
    bad = (parent < -1) | (parent >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        _fail(where, i, f"parent {int(parent[i])} is not a vertex (ids are 0..{n - 1}, -1 for a root)")
    own = parent == np.arange(n)
    if own.any():
        i = int(np.flatnonzero(own)[0])
        _fail(where, i, "the vertex is its own parent")
    # pointer doubling: after ceil(log2 n)+1 rounds every chain of parents has ended, unless it is a cycle
    jump = parent.copy()
    dist = (parent >= 0).astype(np.int64)
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2))))) + 1):
        live = jump >= 0
        if not live.any():
            break
        dist[live] += dist[jump[live]]
        jump[live] = jump[jump[live]]
    if (jump >= 0).any():
        v = int(np.flatnonzero(jump >= 0)[0])
        for _ in range(n):  # walk into the cycle
            v = int(parent[v])
        cycle = [v]
        u = int(parent[v])
        while u != v and len(cycle) < 8:
            cycle.append(u)
            u = int(parent[u])
        _fail(where, v, f"the parents form a cycle ({' -> '.join(map(str, cycle))} -> {v} ...)")
    if depth is not None:
        wrong = depth != dist
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            _fail(where, i, f"depth {int(depth[i])}, but the vertex has {int(dist[i])} ancestors")
    return dist


def _refs(df: pd.DataFrame, cols: tuple[str, ...], n: int, what: str, where: Path) -> None:
    for c in cols:
        if c not in df.columns:
            continue
        a = _ints(df, c, where)
        bad = (a < -1) | (a >= n)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _fail(where, i, f"{c} {int(a[i])} is not {what} (ids are 0..{n - 1}, -1 for none)")


def _locations(df: pd.DataFrame, pairs: tuple[tuple[str, str], ...], known: np.ndarray | None, where: Path) -> None:
    for pc, tc in pairs:
        if pc not in df.columns or tc not in df.columns:
            continue
        p, t = _ints(df, pc, where), _ints(df, tc, where)
        neg = (p < 0) | (t < 0)
        if known is not None and len(p):
            key = p * (1 << 32) + t
            neg |= ~np.isin(key, known)
        if neg.any():
            i = int(np.flatnonzero(neg)[0])
            _fail(where, i, f"({pc} {int(p[i])}, {tc} {int(t[i])}) is not a location of the trace")


def _times(df: pd.DataFrame, pairs: tuple[tuple[str, str], ...], where: Path) -> None:
    for a, b in pairs:
        if a not in df.columns or b not in df.columns:
            continue
        s = df[a].to_numpy(dtype=np.float64)
        e = df[b].to_numpy(dtype=np.float64)
        bad = ~np.isfinite(s) | ~np.isfinite(e)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _fail(where, i, f"{a} {show(s[i])} or {b} {show(e[i])} is not a finite time")
        back = e < s
        if back.any():
            i = int(np.flatnonzero(back)[0])
            _fail(where, i, f"{b} {show(e[i])} is before {a} {show(s[i])}")


def _nonneg(df: pd.DataFrame, cols: tuple[str, ...], where: Path) -> None:
    for c in cols:
        if c in df.columns and len(df):
            a = df[c].to_numpy()
            if a.dtype.kind in "iuf" and (a < 0).any():
                i = int(np.flatnonzero(a < 0)[0])
                _fail(where, i, f"{c} {show(a[i])} is negative")


def check_tables(frames: Mapping[str, pd.DataFrame], files: Mapping[str, Path], manifest: Mapping[str, Any]) -> None:
    """Refuse the tables of a saved PAG that do not fit together (see the module docstring)."""
    vt = frames["vertices"]
    vwhere = files["vertices"]
    n = len(vt)
    if "parent" not in vt.columns:
        raise FormatError(vwhere, "needs an integer column 'parent'")
    depth = _ints(vt, "depth", vwhere) if "depth" in vt.columns else None
    check_parents(_ints(vt, "parent", vwhere), vwhere, depth)
    m, mwhere = frames["metrics"], files["metrics"]
    if "vertex" in m.columns:
        mv = _ints(m, "vertex", mwhere)
        bad = (mv < 0) | (mv >= n)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _fail(mwhere, i, f"vertex {int(mv[i])} is not a vertex (ids are 0..{n - 1}, the vertices table)")
    _nonneg(m, ("process", "thread"), mwhere)
    if "intervals" not in frames:
        return
    loc = manifest.get("locations")
    known = None
    if isinstance(loc, Mapping) and "process" in loc and "thread" in loc and len(loc["process"]):
        # an empty location table declares nothing (traces saved before locations were kept)
        known = np.asarray(loc["process"], dtype=np.int64) * (1 << 32) + np.asarray(loc["thread"], dtype=np.int64)
    iv, iwhere = frames["intervals"], files["intervals"]
    niv = len(iv)
    if "vertex" in iv.columns:
        v = _ints(iv, "vertex", iwhere)
        bad = (v < -1) | (v >= n)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            _fail(iwhere, i, f"vertex {int(v[i])} is not a vertex (ids are 0..{n - 1})")
    _refs(iv, ("parent",), niv, "an interval", iwhere)
    if "parent" in iv.columns and niv:
        par = _ints(iv, "parent", iwhere)
        own = par == np.arange(niv)
        if own.any():
            _fail(iwhere, int(np.flatnonzero(own)[0]), "the interval is its own parent")
    _locations(iv, (("process", "thread"),), known, iwhere)
    _times(iv, (("enter", "leave"),), iwhere)
    for name in ("messages", "collectives", "locks", "io", "rma"):
        df = frames.get(name)
        if df is None or not len(df):
            continue
        where = files[name]
        _refs(df, tuple(c for c in df.columns if c == "interval" or c.endswith("_interval")), niv, "an interval", where)
        _locations(
            df, (("process", "thread"), ("send_process", "send_thread"), ("recv_process", "recv_thread")), known, where
        )
        _nonneg(df, ("bytes", "sent", "received"), where)
        _times(df, (("begin", "end"), ("send_time", "recv_time")) if name != "messages" else (("begin", "end"),), where)
        for c in ("send_time", "recv_time", "time", "acquire", "release"):
            if c in df.columns:
                a = df[c].to_numpy(dtype=np.float64)
                if not np.isfinite(a).all():
                    _fail(where, int(np.flatnonzero(~np.isfinite(a))[0]), f"{c} is not a finite time")
