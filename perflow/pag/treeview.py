"""The top-down tree as text, and which vertices a rendered tree shows in which order.

:meth:`perflow.PAG.tree` and the ``tree_text`` pass print the calling-context tree with metrics,
like Hatchet's ``GraphFrame.tree()``; ``tree_dot`` and ``tree_html`` draw the same selection.
Selection is vectorised over the whole tree (depth limit, threshold, expand, collapse, ancestors
of kept vertices); only the kept vertices are then walked in Python to emit lines, DOT statements
or HTML elements.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import PassError
from ..units import aggregate_label, format_value, guess_unit
from .pag import PAG
from .sets import VertexSet
from .stats import grouped
from .tabular import as_frame, numeric, require_columns
from .tree import ancestors_mask, descendants_mask, tree_index

__all__ = [
    "TreeView",
    "tree_view",
    "tree_lines",
    "TreeText",
    "LEVELS",
    "level_of",
    "metric_values",
    "format_tree_value",
    "repeated_siblings",
]

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


def metric_values(pag: PAG, metric: str, agg: str, process: int | None, who: str) -> np.ndarray:
    """A metric per vertex: aggregated over processes with ``agg``, or on one ``process`` (its threads summed)."""
    try:
        if process is None:
            return pag.aggregate(metric, agg).to_numpy(dtype=np.float64)
        g = grouped(pag, metric, "process")
        hit = np.flatnonzero(g.process == int(process))
        if not len(hit):
            have = ", ".join(map(str, g.process[:10].tolist()))
            raise PassError(
                f"{who}: no process {process} in the PAG (processes: {have}{', ...' if len(g.process) > 10 else ''})"
            )
        out = np.zeros(pag.n_vertices)
        m = g.group == hit[0]
        out[g.vertex[m]] = g.value[m]
        return out
    except PassError:
        raise
    except Exception as exc:  # MetricError / PAGError with a clear message
        raise PassError(f"{who}: {exc}") from None


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
    process: int | None = None,
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
        value = metric_values(data, metric, agg, process, who)
        parent = vt["parent"].to_numpy(dtype=np.int64)
        names = vt["name"].astype(str).to_numpy().astype(object)
        files, lines = vt["file"].astype(str).to_numpy(), vt["line"].to_numpy(dtype=np.int64)
        info = data.metric_info.get(metric)
        unit = info.unit if info is not None and info.unit in ("s", "bytes") else guess_unit(metric)
        paths = data.call_paths().to_numpy().astype(str)
        over = (
            aggregate_label(agg, len(data.processes), len(data.locations)) if process is None else f"process {process}"
        )
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


class TreeText(str):
    """The text of a tree: a ``str`` that shows as the tree itself at a Python prompt (``pag.tree()``)."""

    def __repr__(self) -> str:
        return str(self)


def repeated_siblings(tv: TreeView) -> set[int]:
    """Shown vertices whose name repeats among their siblings (two call sites of one function)."""
    out: set[int] = set()
    for kids in [tv.roots, *tv.children.values()]:
        seen: dict[str, list[int]] = {}
        for k in kids:
            seen.setdefault(str(tv.name[k]), []).append(k)
        out.update(k for ks in seen.values() if len(ks) > 1 for k in ks)
    return out


def format_tree_value(x: float, unit: str, units: bool, precision: int) -> str:
    """A tree's value: with its unit (``12.3 ms``), or plain with ``precision`` decimals."""
    if units and unit:
        return format_value(x, unit, digits=precision)
    return f"{x:.{precision}f}"


def tree_lines(
    tv: TreeView,
    *,
    columns: Sequence[tuple[str, np.ndarray, str]] = (),
    show_file: bool = False,
    color: bool = False,
    units: bool = True,
    precision: int = 3,
    ascii: bool = False,  # noqa: A002
    max_lines: int = 2000,
    header: bool = True,
) -> tuple[list[str], list[str]]:
    """The tree's lines, plain and (with ``color``) with ANSI colours: ``<values> <name> [file:line]``.

    ``columns`` are further metrics shown before the first one's value, as ``(name, values per
    vertex, unit)``; values are right-aligned in columns, so several metrics read as a table.
    """
    tee, elbow, pipe, blank = (
        ("|- ", "`- ", "|  ", "   ") if ascii else ("\u251c\u2500 ", "\u2514\u2500 ", "\u2502  ", "   ")
    )
    total = int(tv.shown.sum())
    repeated = repeated_siblings(tv)  # call sites of one function under one parent: told apart by file:line
    walked = []
    for count, (v, d, last) in enumerate(tv.walk()):
        if count >= max_lines:
            break
        walked.append((v, d, last))
    cols = [(tv.metric, tv.value, tv.unit), *columns]
    cells = [
        [format_tree_value(float(vals[v]), unit, units, precision) for v, _, _ in walked] for _, vals, unit in cols
    ]
    widths = [
        max([len(c) for c in col] + ([len(name)] if len(cols) > 1 else [0])) for (name, _, _), col in zip(cols, cells)
    ]
    plain: list[str] = []
    colored: list[str] = []
    for i, (v, d, last) in enumerate(walked):
        prefix = "" if d == 0 else "".join(blank if lst else pipe for lst in last[1:-1]) + (elbow if last[-1] else tee)
        vals = [cells[k][i].rjust(widths[k]) if len(cols) > 1 else cells[k][i] for k in range(len(cols))]
        tail = f" [+{int(tv.hidden[v])}]" if tv.collapsed[v] and tv.hidden[v] else ""
        loc = tv.location(v) if show_file or v in repeated else ""
        rest = f" {tv.name[v]}{tail}" + (f" {loc}" if loc else "")
        lead = "  ".join(vals[1:]) + ("  " if len(vals) > 1 else "")
        if len(cols) > 1:  # a table: the values in columns, the tree drawn after them
            plain.append(f"{vals[0]}  {lead}{prefix}{rest.lstrip()}")
        else:
            plain.append(prefix + vals[0] + rest)
        if color:
            code = LEVELS[level_of(tv.ratio(v))][1]
            if len(cols) > 1:
                colored.append(f"\x1b[{code}m{vals[0]}\x1b[0m  {lead}{prefix}{rest.lstrip()}")
            else:
                colored.append(f"{prefix}\x1b[{code}m{vals[0]}\x1b[0m{rest}")
    if total > len(walked):
        plain.append(f"... {total - len(walked)} more vertices")
        colored.append(plain[-1])
    if header and plain and (tv.aggregate or len(cols) > 1):
        if len(cols) > 1:
            head = "  ".join(name.rjust(w) for (name, _, _), w in zip(cols, widths)) + "  call path"
            label = f"({tv.aggregate})" if tv.aggregate else ""
            plain[:0] = [f"{head}  {label}".rstrip()]
            colored[:0] = [plain[0]]
        else:
            plain.insert(0, tv.header)
            colored.insert(0, tv.header)
    return plain, colored
