"""The top-down tree by name: roots, call paths as strings, a vertex by id, name or path, the networkx face.

:class:`CallPaths` is a base of :class:`~perflow.pag.pag.PAG`: these are the
PAG's ``roots``, ``call_paths()``, ``vertex(key)`` and ``graph``, over its
vertex table (``_vertices``) and its summed metrics.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import PAGError
from .sets import Vertex

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

__all__ = ["CallPaths"]


class CallPaths:
    """The PAG's names of its vertices: call paths, lookup by name or path, and the tree as a networkx graph."""

    @property
    def roots(self) -> np.ndarray:
        """Ids of the root vertices."""
        return np.flatnonzero(self._vertices["parent"].to_numpy() < 0)

    def vertex(self, key: int | str) -> Vertex:
        """One vertex by id, by name (must be unique) or by call path ``"main/solve/MPI_Send"``."""

        if isinstance(key, int | np.integer):
            if not 0 <= int(key) < self.n_vertices:
                raise PAGError(f"no vertex {key}: ids are 0..{self.n_vertices - 1}")
            return Vertex(self, int(key))
        ids = np.flatnonzero(self.call_paths().to_numpy() == key) if "/" in key else None
        if ids is None or not len(ids):
            ids = np.flatnonzero(self._vertices["name"].to_numpy() == key)
        if len(ids) == 0:
            raise PAGError(f"no vertex named {key!r}")
        if len(ids) > 1:
            raise PAGError(f"{len(ids)} vertices are named {key!r} (ids {ids[:5].tolist()}...); use an id or path")
        return Vertex(self, int(ids[0]))

    @functools.cached_property
    def graph(self) -> nx.DiGraph:
        """The top-down view as a networkx DiGraph (built on first access).

        Nodes are vertex ids with attributes ``name``, ``kind``, ``depth``,
        ``file``, ``line`` and each metric summed over processes; edges go from
        parent to child.
        """
        import networkx as nx

        g = nx.DiGraph()
        vt = self._vertices
        sums = {m: self.aggregate(m, "sum").to_numpy() for m in self.metric_names}
        names = vt["name"].astype(str).to_numpy()
        kinds = vt["kind"].astype(str).to_numpy()
        depth = vt["depth"].to_numpy()
        files = vt["file"].astype(str).to_numpy()
        lines = vt["line"].to_numpy()
        g.add_nodes_from(
            (
                i,
                {
                    "name": names[i],
                    "kind": kinds[i],
                    "depth": int(depth[i]),
                    "file": files[i],
                    "line": int(lines[i]),
                    **{m: float(a[i]) for m, a in sums.items()},
                },
            )
            for i in range(len(vt))
        )
        parent = vt["parent"].to_numpy()
        child = np.flatnonzero(parent >= 0)
        g.add_edges_from(zip(parent[child].tolist(), child.tolist()))
        return g

    def call_paths(self, sep: str = "/") -> pd.Series:
        """The call path of every vertex as a string, e.g. ``"main/solve/MPI_Allreduce"``."""
        return self._call_paths(sep)

    @functools.lru_cache(maxsize=2)  # noqa: B019 - a PAG is immutable and long-lived
    def _call_paths(self, sep: str) -> pd.Series:
        names = self._vertices["name"].astype(str).to_numpy().astype(object)
        parent = self._vertices["parent"].to_numpy()
        depth = self._vertices["depth"].to_numpy()
        out = np.empty(len(names), dtype=object)
        order = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
        for d in range(len(bounds) - 1):
            lv = order[bounds[d] : bounds[d + 1]]
            if d == 0:
                out[lv] = names[lv]
            else:
                out[lv] = out[parent[lv]] + sep + names[lv]
        return pd.Series(out, index=self._vertices.index, name="call_path")
