"""Which vertices a rendered top-down tree shows, in which order (shared by the tree passes).

Selection is vectorised over the whole tree (depth limit, threshold, expand,
collapse, ancestors of kept vertices); only the kept vertices are then walked
in Python to emit lines, DOT statements or HTML elements.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, VertexSet
from perflow.sdk.profile import ancestors_mask, descendants_mask, tree_index
from perflow.sdk.render import aggregate_label, as_frame, guess_unit, numeric, require_columns

__all__ = ["TreeView", "tree_view", "LEVELS", "level_of"]

#: Magnitude levels (fraction of the largest value): ANSI SGR code and HTML colour.
LEVELS = (
    (0.9, "1;31", "#c00000"),
    (0.7, "31", "#e0441b"),
    (0.5, "33", "#b8860b"),
    (0.3, "32", "#2e8b2e"),
    (0.1, "36", "#1f8fa0"),
    (0.0, "34", "#3050c0"),
)


def level_of(ratio: float) -> int:
    """Index into :data:`LEVELS` for a value that is ``ratio`` of the largest one."""
    for i, (lo, _, _) in enumerate(LEVELS):
        if ratio >= lo:
            return i
    return len(LEVELS) - 1


@dataclass
class TreeView:
    """The vertices to draw: ids, names, values, children in display order, hidden-descendant counts."""

    n: int
    parent: np.ndarray  # over all vertices
    name: np.ndarray  # object array of str
    value: np.ndarray  # float64
    file: np.ndarray
    line: np.ndarray
    shown: np.ndarray  # bool
    collapsed: np.ndarray  # bool: shown, children hidden by `collapse`
    hidden: np.ndarray  # number of descendants hidden below each collapsed vertex
    children: dict[int, list[int]]
    roots: list[int]
    vmax: float
    unit: str
    metric: str
    aggregate: str = ""  # how values aggregate over processes ("sum over 8 processes"), "" when not known

    @property
    def header(self) -> str:
        """``time_inc (sum over 8 processes)``: what the values are."""
        return f"{self.metric} ({self.aggregate})" if self.aggregate else self.metric

    def walk(self) -> Iterator[tuple[int, int, list[bool]]]:
        """Depth-first pre-order over shown vertices: (vertex, depth, is-last flags of the path)."""
        stack: list[tuple[int, int, list[bool]]] = [
            (r, 0, [i == len(self.roots) - 1]) for i, r in enumerate(self.roots)
        ][::-1]
        while stack:
            v, d, last = stack.pop()
            yield v, d, last
            kids = self.children.get(v, [])
            for i in range(len(kids) - 1, -1, -1):
                stack.append((kids[i], d + 1, [*last, i == len(kids) - 1]))

    def ratio(self, v: int) -> float:
        """``|value| / max |value|`` of a vertex (0 when everything is 0)."""
        return abs(float(self.value[v])) / self.vmax if self.vmax > 0 else 0.0

    def location(self, v: int) -> str:
        """``"file:line"``, ``"file"`` or ``""``."""
        f = str(self.file[v]) if self.file is not None else ""
        ln = int(self.line[v]) if self.line is not None else -1
        return f"{f}:{ln}" if f and ln >= 0 else f


def _match(patterns: Sequence[str | int] | None, names: np.ndarray, paths: np.ndarray) -> np.ndarray:
    mask = np.zeros(len(names), dtype=bool)
    for p in patterns or []:
        if isinstance(p, int | np.integer):
            if 0 <= int(p) < len(names):
                mask[int(p)] = True
            continue
        rx = re.compile(fnmatch.translate(str(p)))
        target = paths if "/" in str(p) else names
        mask |= np.array([rx.match(s) is not None for s in target], dtype=bool)
    return mask


def _from_frame(df: pd.DataFrame, metric: str, who: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """parent, name, value and file/line arrays (re-indexed 0..n-1) from a table with vertex/parent columns."""
    require_columns(df, ["parent"], who)
    require_columns(df, ["name"], who)
    require_columns(df, [metric], who, setting="metric")
    ids = df["vertex"].to_numpy(dtype=np.int64) if "vertex" in df.columns else np.arange(len(df))
    lut = pd.Series(np.arange(len(ids)), index=ids)
    if lut.index.has_duplicates:
        raise PassError(f"{who}: the table lists a vertex more than once")
    par = df["parent"].to_numpy(dtype=np.int64)
    mapped = lut.reindex(par).to_numpy(dtype=np.float64, na_value=-1).astype(np.int64)
    extra = {
        "file": df["file"].astype(str).to_numpy() if "file" in df.columns else None,
        "line": df["line"].to_numpy(dtype=np.int64) if "line" in df.columns else None,
    }
    return mapped, df["name"].astype(str).to_numpy().astype(object), numeric(df, metric, who), extra


def tree_view(
    data: Any,
    pag: PAG | None,
    *,
    metric: str,
    agg: str,
    depth: int | None,
    threshold: float,
    expand: Sequence[str | int] | None,
    collapse: Sequence[str | int] | None,
    sort: bool,
    who: str,
) -> TreeView:
    """Select and order the vertices of a tree rendering (see :func:`perflow.passes.tree.tree_text` for the settings)."""
    base: np.ndarray | None = None
    over = ""
    if isinstance(data, pd.DataFrame) and "vertex" in data.columns and "parent" not in data.columns:
        if pag is None:
            raise PassError(f"{who}: a table of vertices without a 'parent' column needs the PAG as second input")
        data = VertexSet(pag, data["vertex"].to_numpy(dtype=np.int64))
    if isinstance(data, VertexSet):
        pag = data.pag
        base = ancestors_mask(pag.vertex_table["parent"].to_numpy(), data.ids, include_self=True)
        data = pag
    if isinstance(data, PAG):
        vt = data.vertex_table
        try:
            value = data.aggregate(metric, agg).to_numpy(dtype=np.float64)
        except Exception as exc:  # MetricError / PAGError with a clear message
            raise PassError(f"{who}: {exc}") from None
        parent = vt["parent"].to_numpy(dtype=np.int64)
        names = vt["name"].astype(str).to_numpy().astype(object)
        files, lines = vt["file"].astype(str).to_numpy(), vt["line"].to_numpy(dtype=np.int64)
        info = data.metric_info.get(metric)
        unit = info.unit if info is not None and info.unit in ("s", "bytes") else guess_unit(metric)
        paths = data.call_paths().to_numpy().astype(str)
        over = aggregate_label(agg, len(data.processes), len(data.locations))
    elif isinstance(data, pd.DataFrame | pd.Series):
        parent, names, value, extra = _from_frame(as_frame(data, who), metric, who)
        files, lines = extra["file"], extra["line"]
        unit = guess_unit(metric)
        paths = None
    else:
        raise PassError(f"{who}: expected a PAG, a VertexSet or a DataFrame, got a {type(data).__name__}")
    n = len(parent)
    tix = tree_index(parent)
    if paths is None:
        paths = names.astype(object).copy()
        by_depth = np.argsort(tix.depth, kind="stable")
        bounds = np.searchsorted(tix.depth[by_depth], np.arange(int(tix.depth.max(initial=0)) + 2))
        for d in range(1, len(bounds) - 1):
            lv = by_depth[bounds[d] : bounds[d + 1]]
            paths[lv] = paths[parent[lv]] + "/" + names[lv]
    base = np.ones(n, dtype=bool) if base is None else base
    absval = np.abs(np.nan_to_num(value))
    vmax = float(absval[base].max()) if base.any() else 0.0
    ok = np.ones(n, dtype=bool)
    if depth is not None:
        ok &= tix.depth <= int(depth)
    if threshold > 0:
        ok &= absval >= threshold * vmax
    exp = _match(expand, names.astype(str), paths)
    if exp.any():
        ok |= descendants_mask(tix, np.flatnonzero(exp), include_self=True)
    ok &= base
    shown = ok | (ancestors_mask(parent, np.flatnonzero(ok)) & base) if ok.any() else ok
    col = _match(collapse, names.astype(str), paths) & shown & ~exp
    if col.any():
        shown &= ~descendants_mask(tix, np.flatnonzero(col))
    hidden = np.where(col, tix.size - 1, 0)
    ids = np.flatnonzero(shown)
    # children lists in display order
    kids = ids[parent[ids] >= 0]
    key = -absval[kids] if sort else np.zeros(len(kids))
    o = np.lexsort((kids, key, parent[kids]))
    kids = kids[o]
    p = parent[kids]
    children: dict[int, list[int]] = {}
    if len(kids):
        cuts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
        for s, e in zip(cuts, np.r_[cuts[1:], len(kids)]):
            children[int(p[s])] = kids[s:e].tolist()
    roots = ids[parent[ids] < 0]
    roots = roots[np.lexsort((roots, -absval[roots] if sort else np.zeros(len(roots))))].tolist()
    return TreeView(
        n=n,
        parent=parent,
        name=names,
        value=value,
        file=files,
        line=lines,
        shown=shown,
        collapsed=col,
        hidden=hidden,
        children=children,
        roots=roots,
        vmax=vmax,
        unit=unit,
        metric=metric,
        aggregate=over,
    )
