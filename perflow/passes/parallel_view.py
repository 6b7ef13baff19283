"""The parallel view with highlighted paths: a figure and Graphviz DOT source.

Processes (locations) are rows, selected top-down vertices are columns in
calling-context pre-order (program order for straight-line code); a node is
a vertex on a process, coloured by a metric. Communication edges between
the drawn nodes are arrows; paths (e.g. the output of a backtracking or
critical-path analysis: sequences of (vertex, process) pairs) are thick
coloured polylines through their nodes.

>>> fig = plot_parallel_view(pag, [[("MPI_Waitall", 1), ("compute", 2)]])
>>> dot = parallel_view_dot(pag, paths, names=["compute", "MPI_Waitall"])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, ParallelVertexSet, PassError, VertexSet, pass_
from perflow.sdk.figures import Figure, new_figure, save_figure, vertex_ids, vertex_labels
from perflow.sdk.render import format_value, require_columns, write_text

__all__ = ["plot_parallel_view", "parallel_view_dot", "normalise_paths"]

PathsInput = ParallelVertexSet | pd.DataFrame | list | dict | None
EDGE_COLORS = {"p2p": "#4c72b0", "collective": "#dd8452", "call": "#999999", "thread": "#55a868"}
PATH_COLORS = ("#d62728", "#9467bd", "#2ca02c", "#e377c2", "#17becf", "#bcbd22")


def _triple(pag: PAG, item: Any, who: str) -> tuple[int, int, int]:
    if not isinstance(item, Sequence) or isinstance(item, str) or len(item) not in (2, 3):
        raise PassError(f"{who}: a path element must be (vertex, process) or (vertex, process, thread), got {item!r}")
    v = item[0]
    try:
        vid = pag.vertex(v if isinstance(v, str) else int(v)).id
    except Exception as exc:
        raise PassError(f"{who}: {exc}") from None
    return vid, int(item[1]), int(item[2]) if len(item) == 3 else 0


def _is_element(x: Any) -> bool:
    return (
        isinstance(x, tuple | list)
        and len(x) in (2, 3)
        and all(isinstance(e, int | np.integer | str) and not isinstance(e, bool) for e in x)
    )


def _one_path(pag: PAG, path: Any, who: str) -> np.ndarray:
    """One path as an array of (vertex, process, thread) rows."""
    if isinstance(path, ParallelVertexSet):
        return np.array(list(path), dtype=np.int64).reshape(-1, 3)
    if isinstance(path, pd.DataFrame):
        return normalise_paths(pag, path, who)[0][1] if len(path) else np.zeros((0, 3), np.int64)
    if not isinstance(path, Sequence) or isinstance(path, str):
        raise PassError(f"{who}: a path must be a list of (vertex, process) pairs, got a {type(path).__name__}")
    return np.array([_triple(pag, x, who) for x in path], dtype=np.int64).reshape(-1, 3)


def normalise_paths(pag: PAG, paths: PathsInput, who: str) -> list[tuple[str, np.ndarray]]:
    """Paths as ``(label, array of (vertex, process, thread) rows)``.

    Accepts a ParallelVertexSet (one path, in the set's order), a table with
    ``vertex`` and ``process`` columns (optional ``thread``; several paths told
    apart by a ``path`` column, ordered by ``step`` when present), a dict of
    label to path, a list of paths, or one path as a list of pairs.
    """
    if paths is None:
        return []
    if isinstance(paths, ParallelVertexSet):
        return [("path", _one_path(pag, paths, who))]
    if isinstance(paths, pd.DataFrame):
        require_columns(paths, ["vertex", "process"], who)
        df = paths.sort_values("step", kind="stable") if "step" in paths.columns else paths
        groups = df.groupby("path", sort=False) if "path" in df.columns else [("path", df)]
        out = []
        for key, g in groups:
            t = g["thread"].to_numpy(dtype=np.int64) if "thread" in g.columns else np.zeros(len(g), np.int64)
            arr = np.c_[g["vertex"].to_numpy(dtype=np.int64), g["process"].to_numpy(dtype=np.int64), t]
            out.append((f"path {key}" if not isinstance(key, str) else key, arr))
        return out
    if isinstance(paths, Mapping):
        return [(str(k), _one_path(pag, v, who)) for k, v in paths.items()]
    if isinstance(paths, Sequence) and not isinstance(paths, str):
        items = list(paths)
        if items and all(_is_element(x) for x in items):
            return [("path", _one_path(pag, items, who))]
        return [(f"path {i}", _one_path(pag, p, who)) for i, p in enumerate(items)]
    raise PassError(f"{who}: cannot read paths from a {type(paths).__name__}")


def _layout(
    pag: PAG,
    paths: list[tuple[str, np.ndarray]],
    vertices: VertexSet | None,
    names: Sequence[str | int] | None,
    processes: Sequence[int] | None,
    metric: str,
    k: int,
    max_processes: int,
    who: str,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Selected vertex ids (x order) and the location rows (process, thread) to draw."""
    parts = [vertex_ids(pag, names, who)]
    if vertices is not None:
        parts.append(np.asarray(vertices.ids, dtype=np.int64))
    parts += [p[:, 0] for _, p in paths]
    ids = np.unique(np.concatenate(parts)) if any(len(x) for x in parts) else np.zeros(0, np.int64)
    if not len(ids):
        try:
            ids = pag.vertices.sort_by(metric, "max").top(k).ids
        except Exception as exc:
            raise PassError(f"{who}: {exc}") from None
    ids = np.asarray(ids, dtype=np.int64)
    ids = ids[np.argsort(pag.tree_index.preorder[ids], kind="stable")]
    locs = pag.locations
    if processes is not None:
        locs = locs[locs["process"].isin(list(processes))]
    on_path = np.unique(np.concatenate([p[:, 1] for _, p in paths])) if paths else np.zeros(0, np.int64)
    procs = np.unique(locs["process"].to_numpy())
    if len(procs) > max_processes:
        keep = list(on_path[np.isin(on_path, procs)][:max_processes])
        rest = procs[~np.isin(procs, keep)]
        need = max_processes - len(keep)
        if need > 0 and len(rest):
            keep += list(rest[np.unique(np.linspace(0, len(rest) - 1, need).round().astype(int))])
        locs = locs[locs["process"].isin(keep)]
    return ids, locs.reset_index(drop=True)


def _nodes(pag: PAG, ids: np.ndarray, locs: pd.DataFrame) -> pd.DataFrame:
    """Grid nodes that have data: x, y, parallel row id."""
    xv, yl = np.meshgrid(np.arange(len(ids)), np.arange(len(locs)), indexing="ij")
    xv, yl = xv.ravel(), yl.ravel()
    rows = pag.parallel.rows(ids[xv], locs["process"].to_numpy()[yl], locs["thread"].to_numpy()[yl])
    ok = rows >= 0
    return pd.DataFrame({"x": xv[ok], "y": yl[ok], "row": rows[ok]})


def _edges(pag: PAG, nodes: pd.DataFrame, kinds: Sequence[str]) -> pd.DataFrame:
    et = pag.parallel.edge_table
    pos = pd.Series(np.arange(len(nodes)), index=nodes["row"].to_numpy())
    sel = et["src"].isin(pos.index) & et["dst"].isin(pos.index) & et["kind"].astype(str).isin(list(kinds))
    e = et[sel]
    return pd.DataFrame(
        {
            "s": pos.reindex(e["src"].to_numpy()).to_numpy(),
            "d": pos.reindex(e["dst"].to_numpy()).to_numpy(),
            "kind": e["kind"].astype(str).to_numpy(),
            "bytes": e["bytes"].to_numpy(),
            "wait": e["wait"].to_numpy(),
        }
    )


def _loc_labels(locs: pd.DataFrame) -> list[str]:
    threaded = locs["thread"].nunique() > 1 or (locs["thread"] != 0).any()
    return [f"{p}.{t}" if threaded else str(p) for p, t in zip(locs["process"], locs["thread"])]


def _path_xy(path: np.ndarray, ids: np.ndarray, locs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    xi = pd.Series(np.arange(len(ids)), index=ids).reindex(path[:, 0]).to_numpy(dtype=np.float64)
    key = pd.MultiIndex.from_arrays([locs["process"], locs["thread"]])
    yi = pd.Series(np.arange(len(locs)), index=key).reindex(pd.MultiIndex.from_arrays([path[:, 1], path[:, 2]]))
    return xi, yi.to_numpy(dtype=np.float64)


@pass_(version="1", tags=("plot",))
def plot_parallel_view(
    pag: PAG,
    paths: PathsInput = None,
    vertices: VertexSet | None = None,
    *,
    names: list[str | int] | None = None,
    processes: list[int] | None = None,
    metric: str = "time_exc",
    k: int = 8,
    max_processes: int = 32,
    edge_kinds: list[str] | None = None,
    cmap: str = "YlOrRd",
    title: str | None = None,
    width: float | None = None,
    height: float | None = None,
    path: str | None = None,
) -> Figure:
    """Figure of the parallel view: processes as rows, vertices as nodes, communication arrows, highlighted paths.

    Parameters
    ----------
    pag : PAG
        The PAG.
    paths : ParallelVertexSet or DataFrame or list or dict, optional
        Paths to highlight: sequences of (vertex, process[, thread]) with vertex
        ids or names; a table with ``vertex``, ``process`` (``thread``, ``path``,
        ``step``) columns; or a ParallelVertexSet (one path).
    vertices : VertexSet, optional
        Vertices to show (in addition to ``names`` and the vertices on the paths).
    names : list of str, optional
        More vertices to show, by name, call path or id. With no vertices at all,
        the ``k`` vertices with the largest maximum of ``metric`` are shown.
    processes : list of int, optional
        Processes to show (default: all, at most ``max_processes``).
    metric : str
        Node colour (the value of the vertex on that process and thread).
    k : int
        Number of vertices shown by default.
    max_processes : int
        At most this many process rows: those on the paths, then evenly spaced ones.
    edge_kinds : list of str, optional
        Edge kinds drawn (default ``["p2p", "collective"]``; ``"call"`` adds the intra-process tree edges).
    cmap : str
        Colormap of the nodes.
    title : str, optional
        Figure title.
    width, height : float, optional
        Figure size in inches (default: from the number of columns and rows).
    path : str, optional
        Save the figure there.

    Returns
    -------
    matplotlib.figure.Figure
        Axes 0 holds the nodes (a scatter), one quiver of arrows per edge kind
        (labelled by kind) and one line per path (labelled by the path); axes 1
        is the colorbar.
    """
    who = "plot_parallel_view"
    try:
        pag.check_metric(metric)
    except Exception as exc:
        raise PassError(f"{who}: {exc}") from None
    pl = normalise_paths(pag, paths, who)
    ids, locs = _layout(pag, pl, vertices, names, processes, metric, k, max_processes, who)
    nodes = _nodes(pag, ids, locs)
    vals = pag.metrics[metric].to_numpy(dtype=np.float64)[nodes["row"].to_numpy()]
    import matplotlib

    fig = new_figure(width or max(6.0, 1.3 * len(ids) + 2.5), height or max(3.0, 0.45 * len(locs) + 1.8))
    ax = fig.add_subplot()
    for y in range(len(locs)):
        ax.axhline(y, color="#eeeeee", linewidth=1, zorder=0)
    sc = ax.scatter(
        nodes["x"],
        nodes["y"],
        c=vals,
        cmap=matplotlib.colormaps[cmap],
        s=120,
        edgecolors="black",
        linewidths=0.5,
        zorder=3,
    )
    cb = fig.colorbar(sc, ax=ax)
    unit = pag.metric_info[metric].unit
    cb.set_label(f"{metric} ({unit})" if unit else metric)
    edges = _edges(pag, nodes, edge_kinds or ["p2p", "collective"])
    x, y = nodes["x"].to_numpy(dtype=np.float64), nodes["y"].to_numpy(dtype=np.float64)
    for kind, g in edges.groupby("kind", sort=True):
        s, d = g["s"].to_numpy(), g["d"].to_numpy()
        dx, dy = x[d] - x[s], y[d] - y[s]
        n = np.hypot(dx, dy)
        cut = np.where(n > 0, np.minimum(0.18 / np.maximum(n, 1e-9), 0.4), 0.0)  # stop short of the node markers
        ax.quiver(
            x[s] + cut * dx,
            y[s] + cut * dy,
            (1 - 2 * cut) * dx,
            (1 - 2 * cut) * dy,
            angles="xy",
            scale_units="xy",
            scale=1,
            width=0.004,
            headwidth=4,
            headlength=5,
            color=EDGE_COLORS.get(str(kind), "#555555"),
            alpha=0.8,
            zorder=2,
            label=str(kind),
        )
    for i, (label, p) in enumerate(pl):
        px, py = _path_xy(p, ids, locs)
        c = PATH_COLORS[i % len(PATH_COLORS)]
        ax.plot(px, py, "-", color=c, linewidth=3.5, alpha=0.75, zorder=4, label=label)
        ax.scatter(px, py, s=260, facecolors="none", edgecolors=c, linewidths=2.5, zorder=5)
    ax.set_xticks(np.arange(len(ids)), vertex_labels(pag, ids))
    for t in ax.get_xticklabels():
        t.set_rotation(30)
        t.set_horizontalalignment("right")
    ax.set_yticks(np.arange(len(locs)), _loc_labels(locs))
    ax.set_ylim(len(locs) - 0.5, -0.5)
    ax.set_xlim(-0.6, len(ids) - 0.4)
    ax.set_ylabel("process")
    ax.set_title(title or "parallel view")
    if len(edges) or pl:
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.25), ncol=4, fontsize="small", frameon=False)
    fig.tight_layout()
    save_figure(fig, path)
    return fig


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pass_(version="1", tags=("report",))
def parallel_view_dot(
    pag: PAG,
    paths: PathsInput = None,
    vertices: VertexSet | None = None,
    *,
    names: list[str | int] | None = None,
    processes: list[int] | None = None,
    metric: str = "time_exc",
    k: int = 8,
    max_processes: int = 32,
    edge_kinds: list[str] | None = None,
    name: str = "parallel_view",
    path: str | None = None,
) -> str:
    """A parallel-view subgraph as Graphviz DOT source, with paths highlighted.

    One cluster per process (location) holds its nodes ``n<vertex>_<process>_<thread>``
    in program order (chained by invisible edges); communication edges are
    coloured by kind and labelled with their bytes; consecutive elements of
    each path are joined by a bold coloured edge and path nodes get a coloured
    border. Render with ``dot -Tsvg``.

    Parameters
    ----------
    pag : PAG
        The PAG.
    paths : ParallelVertexSet or DataFrame or list or dict, optional
        As in :func:`plot_parallel_view`.
    vertices : VertexSet, optional
        Vertices to include.
    names, processes, metric, k, max_processes, edge_kinds
        As in :func:`plot_parallel_view`.
    name : str
        Graph name.
    path : str, optional
        Also write the DOT source to this file.

    Returns
    -------
    str
        ``digraph name { ... }``.
    """
    who = "parallel_view_dot"
    try:
        pag.check_metric(metric)
    except Exception as exc:
        raise PassError(f"{who}: {exc}") from None
    pl = normalise_paths(pag, paths, who)
    ids, locs = _layout(pag, pl, vertices, names, processes, metric, k, max_processes, who)
    nodes = _nodes(pag, ids, locs)
    vf = pag.parallel.vertex_frame
    rows = nodes["row"].to_numpy()
    nid = [
        f"n{v}_{p}_{t}"
        for v, p, t in zip(vf["vertex"].to_numpy()[rows], vf["process"].to_numpy()[rows], vf["thread"].to_numpy()[rows])
    ]
    labels = vertex_labels(pag, ids)
    vals = pag.metrics[metric].to_numpy(dtype=np.float64)[rows]
    unit = pag.metric_info[metric].unit
    on_path: dict[str, str] = {}
    for i, (_, p) in enumerate(pl):
        for v, pr, t in p.tolist():
            on_path.setdefault(f"n{v}_{pr}_{t}", PATH_COLORS[i % len(PATH_COLORS)])
    out = [f"digraph {_q(name)} {{", "  rankdir=LR;", '  node [shape=box, style="rounded", fontname="Helvetica"];']
    loc_names = _loc_labels(locs)
    for y, lname in enumerate(loc_names):
        sel = np.flatnonzero(nodes["y"].to_numpy() == y)
        out.append(f"  subgraph cluster_{y} {{")
        out.append(f"    label={_q('process ' + lname)};")
        for j in sel:
            extra = f", color={_q(on_path[nid[j]])}, penwidth=3" if nid[j] in on_path else ""
            lab = f"{labels[nodes['x'].iat[j]]}\n{format_value(vals[j], unit)}"
            out.append(f"    {nid[j]} [label={_q(lab)}{extra}];")
        for a, b in zip(sel[:-1], sel[1:]):
            out.append(f"    {nid[a]} -> {nid[b]} [style=invis];")
        out.append("  }")
    e = _edges(pag, nodes, edge_kinds or ["p2p", "collective"])
    for s, d, kind, nbytes in zip(e["s"], e["d"], e["kind"], e["bytes"]):
        lab = f", label={_q(format_value(nbytes, 'bytes'))}" if nbytes else ""
        out.append(f"  {nid[s]} -> {nid[d]} [color={_q(EDGE_COLORS.get(kind, '#555555'))}, constraint=false{lab}];")
    for i, (label, p) in enumerate(pl):
        c = PATH_COLORS[i % len(PATH_COLORS)]
        names_p = [f"n{v}_{pr}_{t}" for v, pr, t in p.tolist()]
        for a, b in zip(names_p[:-1], names_p[1:]):
            out.append(f"  {a} -> {b} [color={_q(c)}, penwidth=3, constraint=false, tooltip={_q(label)}];")
    out.append("}")
    text = "\n".join(out) + "\n"
    write_text(text, path)
    return text
