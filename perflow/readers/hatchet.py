"""Hatchet's JSON forms: the graph literal and ``GraphFrame.to_json``.

* **Graph literal** (``GraphFrame.to_literal()``, ``GraphFrame.from_literal``,
  :func:`perflow.writers.hatchet.write_literal`): a list of root nodes
  ``{"frame": {"name", "type", ...}, "metrics": {"time (inc)", "time", ...},
  "children": [...]}``; Hatchet adds ``"name"``, ``"attributes"`` and the
  node id ``metrics["_hatchet_nid"]``. A node id met again is the same node
  reached by a second path (a DAG): it is kept once, under the first parent
  met, and the dropped edges are counted in ``attrs["dropped_edges"]``.
  perflow's own literal form (``{"name", "kind", "metrics": {"time_exc":
  [per-process values]}, "children"}``, :func:`perflow.pag.literal.to_literal`)
  is read as well.
* **GraphFrame JSON** (``GraphFrame.to_json()``/``to_dict()``, read back by
  ``GraphFrame.from_json``): ``{"graph": [{nid: {"data": frame, "children":
  [nid, ...]}}, ...], "dataframe_indices": [...], "dataframe": [row, ...],
  "exclusive_metrics": [...], "inclusive_metrics": [...]}``; rows carry
  ``rank``/``thread`` when the dataframe was indexed by them.

``time`` becomes ``time_exc`` and ``time (inc)`` ``time_inc``; every other
numeric metric keeps its name (``mode`` from the file's inclusive/exclusive
lists where it has them). Neither form records a time unit: times are taken
as seconds unless ``time_unit=`` says otherwise (``attrs["time_unit_source"]``
says which). When the graph is not a tree, ``time_inc`` is re-derived from
``time_exc`` on the tree that is kept (Hatchet's is kept as
``time_inc_hatchet``). Both forms are turned into perflow's literal and built
by :func:`perflow.pag.literal.from_literal`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import FormatError, PAGError
from ..pag.literal import HATCHET_NAMES, from_literal
from ..pag.pag import PAG, MetricInfo
from ._common import TIME_UNITS, checked_profile, clean_text, head_bytes, load_json, reader_errors

FORMAT = "hatchet"
DESCRIPTION = "Hatchet JSON: a graph literal (to_literal) or a GraphFrame's to_json"

_SKIP_METRICS = {"_hatchet_nid", "nid", "node", "rank", "thread", "depth", "line", "end_line"}


def detect(path: Path) -> bool:
    """A JSON list of nodes with ``frame`` or ``name`` and ``metrics``, or an object with ``graph`` and ``dataframe``."""
    if not path.is_file():
        return False
    head = head_bytes(path, 1 << 14)
    h = head.lstrip()
    if h[:1] == b"[":
        # a literal: the first node's keys are near the start (chrome's arrays hold events with "ph")
        first = h[:2048]
        return b'"metrics"' in first and (b'"frame"' in first or b'"children"' in first) and b'"ph"' not in first
    if h[:1] == b"{":
        return (b'"graph"' in head and b'"dataframe"' in head) or (
            b'"frame"' in h[:512] and b'"metrics"' in head and b'"ph"' not in head
        )
    return False


def _number(x: Any) -> bool:
    """A metric value (NaN and infinities included: the value checks refuse them, they are not skipped)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def _from_graph_literal(roots: list[Any], path: Path) -> tuple[list[dict[str, Any]], int, set[str]]:
    """Hatchet's literal -> perflow's literal (metric renaming, node ids, repeated nodes dropped)."""
    seen: set[Any] = set()
    dropped = 0
    names: set[str] = set()
    out: list[dict[str, Any]] = []
    stack: list[tuple[Any, list[dict[str, Any]], str]] = [(r, out, f"[{i}]") for i, r in enumerate(roots)][::-1]
    while stack:
        node, siblings, where = stack.pop()
        if not isinstance(node, Mapping):
            raise FormatError(path, f"literal node {where} is a {type(node).__name__}, expected an object")
        metrics = node.get("metrics") or {}
        if not isinstance(metrics, Mapping):
            raise FormatError(path, f"literal node {where}: 'metrics' is not an object")
        nid = metrics.get("_hatchet_nid")
        if nid is not None:
            if nid in seen:  # the same node reached again (a DAG): kept once, under its first parent
                dropped += 1
                continue
            seen.add(nid)
        if "frame" not in node:  # perflow's own literal form
            new = {k: v for k, v in node.items() if k != "children"}
        else:
            frame = node["frame"]
            if not isinstance(frame, Mapping):
                raise FormatError(path, f"literal node {where}: 'frame' is not an object")
            name = frame.get("name") or node.get("name")
            if name is None and frame.get("file") is not None:
                name = f"{frame.get('file')}:{frame.get('line')}"
            kept = {}
            for k, v in metrics.items():
                if k in _SKIP_METRICS or not _number(v):
                    continue
                kept[HATCHET_NAMES.get(k, k)] = v
                names.add(k)
            new = {
                "name": clean_text(str(name)) if name is not None else name,
                "metrics": kept,
                "kind": frame.get("type"),
            }
            if frame.get("file") is not None:
                new["file"] = str(frame["file"])
            line = frame.get("line")
            if isinstance(line, int) or (isinstance(line, str) and line.isdigit()):
                new["line"] = int(line)
        siblings.append(new)
        children = node.get("children") or []
        if not isinstance(children, list):
            raise FormatError(path, f"literal node {where}: 'children' is not a list")
        kids: list[dict[str, Any]] = []
        new["children"] = kids
        for i, c in reversed(list(enumerate(children))):
            stack.append((c, kids, f"{where}.children[{i}]"))
    return out, dropped, names


def _from_graphframe_json(d: Mapping[str, Any], path: Path) -> tuple[list[dict[str, Any]], int, set[str]]:
    """``GraphFrame.to_json()`` -> perflow's literal with per-(rank, thread) metric values."""
    graphs = d["graph"]
    if not isinstance(graphs, list):
        raise FormatError(path, "'graph' is not a list of graphs")
    data: dict[str, Any] = {}
    order: list[str] = []
    for g in graphs:
        if not isinstance(g, Mapping):
            raise FormatError(path, "a graph in 'graph' is not an object of nodes")
        for k, v in g.items():
            if not isinstance(v, Mapping) or not isinstance(v.get("data", {}), Mapping):
                raise FormatError(path, f"graph node {k!r} is not an object with 'data' and 'children'")
            if str(k) not in data:
                order.append(str(k))
            data[str(k)] = v
    rows = d.get("dataframe") or []
    if not isinstance(rows, list):
        raise FormatError(path, "'dataframe' is not a list of rows")
    cells: dict[str, dict[str, dict[Any, float]]] = {}
    names: set[str] = set()
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or "node" not in row:
            raise FormatError(path, f"dataframe row {i} has no 'node'", where=f"dataframe[{i}]")
        key = (int(row.get("rank", 0) or 0), int(row.get("thread", 0) or 0))
        per = cells.setdefault(str(row["node"]), {})
        for m, x in row.items():
            if m in _SKIP_METRICS or not _number(x):
                continue
            names.add(m)
            col = per.setdefault(HATCHET_NAMES.get(m, m), {})
            col[key] = col.get(key, 0.0) + float(x)
    children_of = {k: [str(c) for c in (v.get("children") or [])] for k, v in data.items()}
    is_child = {c for cs in children_of.values() for c in cs}
    roots = [k for k in order if k not in is_child] or order[:1]
    placed: set[str] = set()
    dropped = 0
    out: list[dict[str, Any]] = []
    stack: list[tuple[str, list[dict[str, Any]]]] = [(r, out) for r in reversed(roots)]
    while stack:
        nid, siblings = stack.pop()
        if nid in placed:
            dropped += 1
            continue
        if nid not in data:
            raise FormatError(path, f"graph node {nid!r} is a child but is not defined")
        placed.add(nid)
        frame = data[nid].get("data") or {}
        name = frame.get("name")
        if name is None:
            name = f"{frame.get('file')}:{frame.get('line')}" if frame.get("file") is not None else f"node {nid}"
        node: dict[str, Any] = {"name": clean_text(str(name)), "kind": frame.get("type"), "metrics": cells.get(nid, {})}
        if frame.get("file") is not None:
            node["file"] = str(frame["file"])
        if isinstance(frame.get("line"), int):
            node["line"] = frame["line"]
        node["children"] = []
        siblings.append(node)
        stack.extend((c, node["children"]) for c in reversed(children_of[nid]))
    return out, dropped, names


def read(path: Path | str, *, time_unit: str | None = None, **options: Any) -> PAG:
    """Read a Hatchet graph literal or GraphFrame JSON file.

    Parameters
    ----------
    path : path-like
        The ``.json`` file.
    time_unit : {"s", "ms", "us", "ns"}, optional
        Unit of ``time`` and ``time (inc)`` (default: seconds, which is what
        perflow writes; Hatchet keeps each tool's own unit).

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the Hatchet JSON reader takes time_unit only (got {', '.join(options)})")
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise ValueError(f"unknown time_unit {time_unit!r}; use one of s, ms, us, ns")
    path = Path(path)
    with reader_errors(path, "Hatchet JSON"):
        doc = load_json(path, path.read_bytes())
        if isinstance(doc, Mapping) and "graph" in doc and "dataframe" in doc:
            lit, dropped, names = _from_graphframe_json(doc, path)
            inc = set(doc.get("inclusive_metrics") or [])
            form = "graphframe-json"
        elif isinstance(doc, list) or (isinstance(doc, Mapping) and ("frame" in doc or "name" in doc)):
            lit, dropped, names = _from_graph_literal(doc if isinstance(doc, list) else [doc], path)
            inc = {n for n in names if n.endswith("(inc)")}
            form = "graph-literal"
        else:
            raise FormatError(path, "not a Hatchet graph literal (a list of nodes) nor a GraphFrame JSON object")
        if not lit:
            raise FormatError(path, "the graph has no nodes")
        attrs: dict[str, Any] = {"source": str(path), "nprocs": 1, "hatchet_form": form}
        unit = time_unit or "s"
        attrs["time_unit"] = unit
        attrs["time_unit_source"] = "given" if time_unit else "assumed: Hatchet JSON does not record a unit"
        try:
            pag = from_literal(lit, attrs=attrs)
        except PAGError as exc:
            raise FormatError(path, str(exc)) from None
    return _finish(pag, unit, dropped, inc)


def _finish(pag: PAG, unit: str, dropped: int, inc: set[str]) -> PAG:
    """Scale the times to seconds, set metric modes, re-derive time_inc for a graph that was not a tree."""

    scale = TIME_UNITS[unit]
    m = pag.metrics
    cols: dict[str, Any] = {}
    for c in ("time_inc", "time_exc"):
        if c in m.columns and scale != 1.0:
            cols[c] = m[c].to_numpy() * scale
    info = dict(pag.metric_info)
    for name in pag.metric_names:
        if name not in ("time_inc", "time_exc", "visits"):
            mode = "inclusive" if name in inc or name.endswith("(inc)") else "exclusive"
            info[name] = MetricInfo(name, info[name].unit if name in info else "", mode, f"Hatchet metric {name!r}")
    nprocs = int(len(pag.processes)) or 1
    if dropped:
        pag.attrs["dropped_edges"] = dropped
        pag.attrs["approximation"] = (
            f"the Hatchet graph is not a tree: {dropped} edges into nodes met before were dropped; "
            "each node appears once, under its first parent"
        )
    metrics = pag.metrics.assign(**cols) if cols else pag.metrics
    if dropped and "time_exc" in metrics.columns and "time_inc" in metrics.columns:
        metrics = metrics.rename(columns={"time_inc": "time_inc_hatchet"})
        info["time_inc_hatchet"] = MetricInfo("time_inc_hatchet", "s", "inclusive", "Hatchet's inclusive time")
        info.pop("time_inc", None)
    attrs = {**pag.attrs, "nprocs": nprocs}
    out = PAG.from_frames(pag.vertex_table, metrics.reset_index(), metric_info=info, attrs=attrs)
    return checked_profile(out, attrs.get("source"))
