"""Exchange with LLNL Hatchet (optional dependency: ``pip install perflow[hatchet]``).

* :func:`to_hatchet` gives a ``hatchet.GraphFrame`` whose graph is the PAG's
  calling-context tree (frames ``{"name", "type"}``, ``type`` = vertex kind)
  and whose dataframe is indexed by ``node`` and ``rank`` (and ``thread`` when
  a process has several threads), with one column per metric; ``time_exc``
  is named ``time`` and ``time_inc`` ``time (inc)`` as in Hatchet's readers.
* :func:`from_hatchet` reads a GraphFrame back: nodes become vertices (a node
  reachable from several parents, which Hatchet allows in a DAG, is copied
  under each), ``time``/``time (inc)`` become ``time_exc``/``time_inc``, and
  every other numeric column is kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import PAGError
from ..kinds import VertexKind, classify_region
from ..pag.pag import PAG

__all__ = ["to_hatchet", "from_hatchet"]

_TO = {"time_exc": "time", "time_inc": "time (inc)"}
_FROM = {v: k for k, v in _TO.items()}


def _require() -> Any:
    try:
        import hatchet
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("llnl-hatchet is not installed; install it with `pip install perflow[hatchet]`") from exc
    return hatchet


def to_hatchet(pag: PAG) -> Any:
    """The PAG's top-down view as a ``hatchet.GraphFrame``."""
    ht = _require()
    from hatchet.frame import Frame
    from hatchet.graph import Graph
    from hatchet.node import Node

    vt = pag.vertex_table
    names = vt["name"].astype(str).tolist()
    kinds = vt["kind"].astype(str).tolist()
    parent = vt["parent"].to_numpy()
    nodes: list[Any] = []
    roots = []
    for i in range(len(vt)):  # parents precede children in a PAG's vertex table? not guaranteed: two passes
        nodes.append(Node(Frame({"name": names[i], "type": kinds[i]}), None, hnid=i, depth=int(vt["depth"].iat[i])))
    for i, p in enumerate(parent.tolist()):
        if p < 0:
            roots.append(nodes[i])
        else:
            nodes[i].parents.append(nodes[p])
            nodes[p].children.append(nodes[i])
    graph = Graph(roots)
    graph.enumerate_traverse()
    m = pag.metrics.reset_index()
    threads = m.groupby("process")["thread"].nunique().max() if len(m) else 1
    df = m.rename(columns={"process": "rank", **_TO})
    df["node"] = [nodes[v] for v in df["vertex"].to_numpy()]
    df["name"] = np.asarray(names, dtype=object)[df["vertex"].to_numpy()]
    index = ["node", "rank"] + (["thread"] if threads > 1 else [])
    df = df.drop(columns=["vertex"] + ([] if threads > 1 else ["thread"])).set_index(index).sort_index()
    exc = [_TO.get(c, c) for c, i in pag.metric_info.items() if i.mode != "inclusive"]
    inc = [_TO.get(c, c) for c, i in pag.metric_info.items() if i.mode == "inclusive"]
    return ht.GraphFrame(
        graph,
        df,
        exc_metrics=exc,
        inc_metrics=inc,
        default_metric="time",
        metadata={k: v for k, v in pag.attrs.items() if isinstance(v, str | int | float | bool)},
    )


def from_hatchet(gf: Any) -> PAG:
    """A PAG from a ``hatchet.GraphFrame`` (metrics per rank and thread when the dataframe has them)."""
    _require()
    rows: list[dict[str, Any]] = []
    ids: dict[int, list[int]] = {}  # id(hatchet node) -> vertex ids (several when the graph is a DAG)
    stack = [(r, -1) for r in reversed(list(gf.graph.roots))]
    while stack:
        node, par = stack.pop()
        fr = node.frame
        name = fr.get("name") if hasattr(fr, "get") else None
        if name is None:
            name = str(fr)
        hint = fr.get("type") if hasattr(fr, "get") else None
        try:
            kind = VertexKind(hint).value if hint else classify_region(str(name)).value
        except ValueError:
            kind = classify_region(str(name), str(hint)).value
        vid = len(rows)
        rows.append(
            {
                "name": str(name),
                "kind": kind,
                "parent": par,
                "file": str(fr.get("file", "") or "") if hasattr(fr, "get") else "",
                "line": int(fr.get("line", -1) or -1)
                if hasattr(fr, "get") and str(fr.get("line", "")).lstrip("-").isdigit()
                else -1,
            }
        )
        ids.setdefault(id(node), []).append(vid)
        if len(rows) > 10_000_000:
            raise PAGError("hatchet graph expands to more than 10 million vertices")
        stack.extend((c, vid) for c in reversed(list(node.children)))
    df = gf.dataframe.reset_index()
    if "node" not in df.columns:
        raise PAGError("the GraphFrame's dataframe has no 'node' index level")
    proc = df["rank"].to_numpy(dtype=np.int64) if "rank" in df.columns else np.zeros(len(df), dtype=np.int64)
    thr = df["thread"].to_numpy(dtype=np.int64) if "thread" in df.columns else np.zeros(len(df), dtype=np.int64)
    skip = {"node", "rank", "thread", "nid", "line", "end_line", "depth"}
    metric_cols = [
        c
        for c in df.columns
        if c not in skip and pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
    ]
    vv, pp, tt, sel = [], [], [], []
    for i, node in enumerate(df["node"].tolist()):
        for v in ids.get(id(node), []):
            vv.append(v)
            pp.append(proc[i])
            tt.append(thr[i])
            sel.append(i)
    sel_a = np.asarray(sel, dtype=np.int64)
    metrics = pd.DataFrame({"vertex": vv, "process": pp, "thread": tt})
    for c in metric_cols:
        metrics[_FROM.get(c, c)] = df[c].to_numpy(dtype=np.float64)[sel_a] if len(sel_a) else np.zeros(0)
    from ..pag.literal import complete_time_metrics

    pag = PAG.from_frames(
        pd.DataFrame(rows), metrics, attrs={"source": "hatchet", **dict(getattr(gf, "metadata", {}) or {})}
    )
    return complete_time_metrics(pag)
