"""Exchange with LLNL Hatchet (optional dependency: ``pip install perflow[hatchet]``).

* :func:`to_hatchet` gives a ``hatchet.GraphFrame`` whose graph is the PAG's
  calling-context tree (frames ``{"name", "type"}``, ``type`` = vertex kind)
  and whose dataframe has one row per (node, rank) -- and thread, when a
  process has several -- for *every* node, zeros where the PAG has no value,
  as Hatchet's own readers produce it (``tree()``, ``filter``, ``squash`` and
  arithmetic rely on that), with a ``name`` column and one column per metric;
  ``time_exc`` is named ``time`` and ``time_inc`` ``time (inc)`` as in
  Hatchet's readers, in seconds (``metadata["perflow.time_unit"]``).
* :func:`write_literal` writes Hatchet's graph literal as JSON (no Hatchet
  needed): ``GraphFrame.from_literal(json.load(f))`` and ``perflow.read``
  read it back.
* :func:`from_hatchet` reads a GraphFrame back. Times (``time``, ``time
  (inc)``) are converted to seconds from ``time_unit``, which is detected
  from the reader that made the GraphFrame when not given (see
  :func:`detect_time_unit`). A Hatchet graph may be a DAG or have cycles
  (cProfile's caller graph, recursion): every Hatchet node becomes exactly
  one vertex, under the first parent a depth-first walk from the roots meets;
  the other edges into it (a second caller, a recursive call) are dropped and
  counted in ``attrs["dropped_edges"]``, so every node's metrics are counted
  once. The inclusive time is then re-derived from the exclusive time on the
  resulting tree (Hatchet's is kept as ``time_inc_hatchet``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._json import json_default
from ..errors import PAGError
from ..kinds import VertexKind, classify_region
from ..pag.literal import complete_time_metrics, to_literal
from ..pag.pag import PAG, MetricInfo

__all__ = ["to_hatchet", "from_hatchet", "write_literal", "detect_time_unit", "TIME_UNITS"]

log = logging.getLogger(__name__)

_TO = {"time_exc": "time", "time_inc": "time (inc)"}
_FROM = {v: k for k, v in _TO.items()}
#: Seconds per unit of the time units :func:`from_hatchet` accepts.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: Most rows :func:`to_hatchet` writes (Hatchet's dataframe is dense: nodes x locations).
MAX_ROWS = 20_000_000
_HPCTOOLKIT_TYPES = {"PF", "Pr", "L", "S", "C", "CALLSITE", "LOOP", "STATEMENT"}


def _require() -> Any:
    try:
        import hatchet
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("llnl-hatchet is not installed; install it with `pip install perflow[hatchet]`") from exc
    return hatchet


def to_hatchet(pag: PAG) -> Any:
    """The PAG's top-down view as a ``hatchet.GraphFrame`` (a dense dataframe: every node on every rank)."""
    ht = _require()
    from hatchet.frame import Frame
    from hatchet.graph import Graph
    from hatchet.node import Node

    vt = pag.vertex_table
    names = vt["name"].astype(str).tolist()
    kinds = vt["kind"].astype(str).tolist()
    parent = vt["parent"].to_numpy()
    depth = vt["depth"].to_numpy()
    nodes = [
        Node(Frame({"name": names[i], "type": kinds[i]}), None, hnid=i, depth=int(depth[i])) for i in range(len(vt))
    ]
    roots = []
    for i, p in enumerate(parent.tolist()):
        if p < 0:
            roots.append(nodes[i])
        else:
            nodes[i].parents.append(nodes[p])
            nodes[p].children.append(nodes[i])
    graph = Graph(roots)
    graph.enumerate_traverse()
    locs = pag.locations
    threaded = bool(len(locs)) and int(locs.groupby("process")["thread"].nunique().max()) > 1
    n, L = len(vt), max(len(locs), 1)
    if n * L > MAX_ROWS:
        raise PAGError(
            f"a Hatchet dataframe of this PAG would have {n} nodes x {L} locations = {n * L} rows "
            f"(more than {MAX_ROWS}); restrict it first (pag.vertices...subgraph) or use to_dataframe"
        )
    # every (vertex, location): Hatchet looks rows up by (node, rank[, thread]) and fails on missing ones
    lp = locs["process"].to_numpy() if len(locs) else np.zeros(1, np.int64)
    lt = locs["thread"].to_numpy() if len(locs) else np.zeros(1, np.int64)
    full = pd.MultiIndex.from_arrays(
        [np.repeat(np.arange(n), L), np.tile(lp, n), np.tile(lt, n)], names=["vertex", "process", "thread"]
    )
    dense = pag.metrics.reindex(full, fill_value=0.0).fillna(0.0).reset_index()
    df = dense.rename(columns={"process": "rank", **_TO})
    v = df["vertex"].to_numpy()
    df.insert(0, "node", np.asarray(nodes, dtype=object)[v])
    df.insert(1, "name", np.asarray(names, dtype=object)[v])
    index = ["node", "rank"] + (["thread"] if threaded else [])
    df = df.drop(columns=["vertex"] + ([] if threaded else ["thread"])).set_index(index).sort_index()
    exc = [_TO.get(c, c) for c, i in pag.metric_info.items() if i.mode != "inclusive"]
    inc = [_TO.get(c, c) for c, i in pag.metric_info.items() if i.mode == "inclusive"]
    meta = {k: v for k, v in pag.attrs.items() if isinstance(v, str | int | float | bool)}
    meta["perflow.time_unit"] = "s"
    return ht.GraphFrame(graph, df, exc_metrics=exc, inc_metrics=inc, default_metric="time", metadata=meta)


def write_literal(pag: PAG, path: str | os.PathLike[str]) -> Path:
    """Write the PAG's top-down view as Hatchet's graph literal (JSON), metrics summed over processes.

    The file is :func:`perflow.pag.literal.to_literal` with ``hatchet=True``:
    a list of root nodes ``{"frame": {"name", "type"}, "metrics": {"time
    (inc)", "time", ...}, "children": [...]}``, times in seconds. Hatchet's
    ``GraphFrame.from_literal`` and :func:`perflow.read` read it.

    Returns
    -------
    Path
        The file written.
    """
    import json

    out = Path(path)
    out.write_text(json.dumps(to_literal(pag, hatchet=True), default=json_default), encoding="utf-8")
    return out


def detect_time_unit(gf: Any) -> tuple[str, str]:
    """The time unit of a GraphFrame's ``time`` columns and how it was found: ``("us", "HPCToolkit database")``.

    Hatchet's readers rename each tool's time metric to ``time`` without
    converting it, so the unit follows from the reader, recognised by the
    columns and frames it leaves: perflow's own export says so in its
    metadata; HPCToolkit's classic databases (``nid`` and a ``type`` column of
    PF/Pr/L/S/C scopes; CPUTIME in microseconds) and TAU profiles (``end_line``
    and TAU's ``Calls``/``Subrs`` columns; microseconds) are in microseconds;
    cProfile (``numcalls``, ``nativecalls``) is in seconds; Caliper .cali
    files read natively (run metadata with ``cali.caliper.version``) are in
    seconds from Caliper 2 on, microseconds before (perflow's Caliper reader
    applies the same rule); Caliper json-split (``nid`` without HPCToolkit's
    ``type``) in microseconds. Anything else is taken as seconds, and the
    reason says it was assumed.
    """
    meta = dict(getattr(gf, "metadata", {}) or {})
    if meta.get("perflow.time_unit") in TIME_UNITS:
        return str(meta["perflow.time_unit"]), "perflow's Hatchet export"
    cols = set(map(str, gf.dataframe.columns)) | set(map(str, gf.dataframe.index.names))
    if {"nid", "type"} <= cols:
        types = set(gf.dataframe["type"].astype(str).unique()) if "type" in gf.dataframe.columns else set()
        if types and types <= _HPCTOOLKIT_TYPES:
            return "us", "HPCToolkit database (CPUTIME in microseconds)"
    if "end_line" in cols and ({"Calls", "Subrs"} & cols):
        return "us", "TAU profile (microseconds)"
    if {"numcalls", "nativecalls"} <= cols:
        return "s", "cProfile (seconds)"
    version = str(meta.get("cali.caliper.version", ""))
    if version:  # Hatchet's native Caliper reader: the file's own values (Caliper 1 wrote microseconds)
        if version[:1] in ("0", "1"):
            return "us", f"Caliper .cali file (version {version}: microseconds)"
        return "s", f"Caliper .cali file (version {version}: seconds)"
    if "nid" in cols and "type" not in cols:
        return "us", "Caliper json-split (microseconds, as cali-query writes them)"
    return "s", "assumed: the GraphFrame does not say which tool wrote it; pass time_unit= to be sure"


def _walk(gf: Any) -> tuple[list[dict[str, Any]], dict[int, int], int]:
    """One vertex per Hatchet node, under the first parent a depth-first walk from the roots meets."""
    rows: list[dict[str, Any]] = []
    vid_of: dict[int, int] = {}  # id(hatchet node) -> vertex
    dropped = 0
    stack = [(r, -1) for r in reversed(list(gf.graph.roots))]
    while stack:
        node, par = stack.pop()
        if id(node) in vid_of:  # a second caller, or a recursive call back up the path
            dropped += 1
            continue
        fr = node.frame
        get = fr.get if hasattr(fr, "get") else (lambda k, d=None: d)
        name = get("name")
        if name is None:  # a statement frame (HPCToolkit): its file:line, as perflow's readers name it
            name = f"{get('file')}:{get('line')}" if get("file") is not None else str(fr)
        name = str(name)
        hint = get("type")
        try:
            kind = VertexKind(hint).value if hint else classify_region(name).value
        except ValueError:
            kind = classify_region(name, str(hint)).value
        line = str(get("line", "") or "")
        vid_of[id(node)] = len(rows)
        rows.append(
            {
                "name": name,
                "kind": kind,
                "parent": par,
                "file": str(get("file", "") or ""),
                "line": int(line) if line.lstrip("-").isdigit() else -1,
            }
        )
        stack.extend((c, vid_of[id(node)]) for c in reversed(list(node.children)))
    return rows, vid_of, dropped


def from_hatchet(gf: Any, *, time_unit: str | None = None) -> PAG:
    """A PAG from a ``hatchet.GraphFrame`` (metrics per rank and thread when the dataframe has them).

    Parameters
    ----------
    gf : hatchet.GraphFrame
    time_unit : {"s", "ms", "us", "ns"}, optional
        Unit of the ``time`` and ``time (inc)`` columns (default: detected, see
        :func:`detect_time_unit`); perflow's times are seconds.

    Returns
    -------
    PAG
        ``attrs`` records ``time_unit`` and ``time_unit_source`` (how the unit
        was found) and, for a graph that is not a tree, ``dropped_edges``.
    """
    _require()
    if time_unit is None:
        time_unit, how = detect_time_unit(gf)
        if how.startswith("assumed"):
            log.warning("from_hatchet: time unit %s %s", time_unit, how)
    else:
        how = "given"
    if time_unit not in TIME_UNITS:
        raise PAGError(f"from_hatchet: time_unit must be one of {', '.join(TIME_UNITS)}, not {time_unit!r}")
    rows, vid_of, dropped = _walk(gf)
    df = gf.dataframe.reset_index()
    if "node" not in df.columns:
        raise PAGError("the GraphFrame's dataframe has no 'node' index level")
    vid = np.array([vid_of.get(id(nd), -1) for nd in df["node"].tolist()], dtype=np.int64)
    keep = vid >= 0
    proc = df["rank"].to_numpy(dtype=np.int64) if "rank" in df.columns else np.zeros(len(df), dtype=np.int64)
    thr = df["thread"].to_numpy(dtype=np.int64) if "thread" in df.columns else np.zeros(len(df), dtype=np.int64)
    skip = {"node", "rank", "thread", "nid", "line", "end_line", "depth"}
    metric_cols = [
        c
        for c in df.columns
        if c not in skip and pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
    ]
    metrics = pd.DataFrame({"vertex": vid[keep], "process": proc[keep], "thread": thr[keep]})
    scale = TIME_UNITS[time_unit]
    tree_like = dropped == 0
    for c in metric_cols:
        x = df[c].to_numpy(dtype=np.float64)[keep]
        name = _FROM.get(c, c)
        if c in _FROM:
            x = x * scale
        if c == "time (inc)" and not tree_like and "time" in metric_cols:
            name = "time_inc_hatchet"  # the graph's inclusive time does not partition the tree: re-derived below
        metrics[name] = x
    attrs: dict[str, Any] = {"source": "hatchet", **dict(getattr(gf, "metadata", {}) or {})}
    attrs.update(time_unit=time_unit, time_unit_source=how)
    if not tree_like:
        attrs["dropped_edges"] = dropped
        attrs["approximation"] = (
            f"the Hatchet graph is not a tree: {dropped} edges into nodes met before (second callers, "
            "recursive calls) were dropped; each node appears once, under its first caller"
        )
    if (~keep).any():
        attrs["unreachable_rows"] = int((~keep).sum())

    info = {"time_inc_hatchet": MetricInfo("time_inc_hatchet", "s", "inclusive", "Hatchet's inclusive time")}
    pag = PAG.from_frames(pd.DataFrame(rows), metrics, metric_info=info, attrs=attrs, duplicates="sum")
    return complete_time_metrics(pag)
