"""Reading CUBE4 files into one long table (metric, call path, process, thread, value) for comparisons.

Two independent readers: pycubexr (the third-party library) and perflow's own
CUBE reader. Call paths are the region names from the root (``late_sender/main/MPI_Recv``),
locations the (process rank, thread rank) of the system tree, values exclusive along
the call tree and as stored along the metric tree.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

KEYS = ["metric", "call_path", "process", "thread"]


def vertex_paths(vt: pd.DataFrame) -> np.ndarray:
    """``root/.../name`` of every vertex of a vertex table."""
    names = vt["name"].astype(str).to_numpy()
    parent = vt["parent"].to_numpy()
    out = np.empty(len(vt), dtype=object)
    for v in range(len(vt)):  # parents come first in perflow's vertex tables
        p = parent[v]
        out[v] = names[v] if p < 0 else f"{out[p]}/{names[v]}"
    return out


def with_pycubexr(path: Path) -> pd.Series:
    """Every non-zero stored value of every metric with data, through pycubexr."""
    from pycubexr import CubexParser

    rows = []
    with CubexParser(str(path)) as c:
        # a location's process is its location group's rank, its thread its own rank; values are in location-id order
        where: dict[int, tuple[int, int]] = {}
        nodes = list(c._anchor_result.system_tree_nodes)
        while nodes:
            node = nodes.pop()
            nodes.extend(node._system_tree_node_children)
            for lg in node._location_group_children:
                for loc in lg.all_locations():
                    where[int(loc.id)] = (int(lg.rank), int(loc.rank))
        proc = [where[i][0] for i in sorted(where)]
        thr = [where[i][1] for i in sorted(where)]
        cnodes = c.all_cnodes()

        def path_of(n):  # noqa: ANN001, ANN202
            parts = []
            while n is not None:
                parts.append(c.get_region(n).name)
                n = n.parent
            return "/".join(reversed(parts))

        paths = {n.id: path_of(n) for n in cnodes}
        metrics = []
        stack = list(c.get_metrics())
        while stack:  # the metric tree (pycubexr lists its roots)
            m = stack.pop()
            metrics.append(m)
            stack.extend(m.childs)
        for m in metrics:
            try:
                v = c.get_metric_values(m)
            except (AssertionError, Exception):  # noqa: BLE001 - a metric without data files
                continue
            for n in cnodes:
                vals = np.asarray(v.cnode_values(n, convert_to_exclusive=True), dtype=np.float64)
                for i in np.flatnonzero(vals):
                    rows.append((m.name, paths[n.id], proc[i], thr[i], float(vals[i])))
    df = pd.DataFrame(rows, columns=[*KEYS, "value"])
    return df.groupby(KEYS)["value"].sum()


def with_perflow(path: Path) -> pd.Series:
    """Every non-zero value of every stored metric, through perflow's CUBE reader."""
    from perflow.readers import cube

    pag = cube.read(path)
    m = pag.metrics.reset_index().drop(columns=["time_inc"], errors="ignore").rename(columns={"time_exc": "time"})
    m["call_path"] = vertex_paths(pag.vertex_table)[m["vertex"].to_numpy()]
    long = m.drop(columns=["vertex"]).melt(id_vars=["call_path", "process", "thread"], var_name="metric")
    long = long[long["value"].to_numpy() != 0]
    return long.groupby(KEYS)["value"].sum()


def compare(a: pd.Series, b: pd.Series, rtol: float = 1e-6) -> pd.DataFrame:
    """Rows where ``a`` and ``b`` (missing: 0) differ by more than ``rtol`` relative."""
    j = pd.concat([a.rename("a"), b.rename("b")], axis=1).fillna(0.0)
    tol = rtol * np.maximum(j["a"].abs(), j["b"].abs()) + 1e-15
    return j[(j["a"] - j["b"]).abs() > tol]
