"""PAGs aligned by call path: the union of their calling-context trees.

Two runs of a program (two versions, two scales, two inputs) have different
vertex ids for the same code in the same context. They are compared through
the **call path** of each vertex (``pag.call_paths()``, the names from a
root down, e.g. ``"main/solve/MPI_Allreduce"``): :func:`align` builds one
tree holding every call path of any of the PAGs (the *union*), in order of
first appearance (the first PAG's vertices first, then the new ones of the
second, ...), and for each PAG the union id of each of its vertices.

Rules, the same for PAG arithmetic (:mod:`perflow.pag.arith`) and ensembles
(:mod:`perflow.pag.ensemble`):

* a union vertex takes its attributes (kind, module, file, line) from the
  first PAG that has its call path;
* vertices of one PAG sharing a call path (siblings with the same name) map
  to one union vertex, and their values add up;
* ``presence[u, i]`` says whether PAG ``i`` has call path ``u``; values of an
  absent path are NaN in :meth:`Alignment.matrix`, never a silent 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import PAGError

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = ["Alignment", "align"]

_ATTRS = ("name", "kind", "module", "file", "line")


@dataclass(frozen=True)
class Alignment:
    """Several PAGs aligned by call path.

    Attributes
    ----------
    vertices : pandas.DataFrame
        The union tree: ``name``, ``kind``, ``parent``, ``module``, ``file``,
        ``line`` and ``call_path``, row ``u`` is union vertex ``u``.
    maps : tuple of numpy.ndarray
        For PAG ``i``, the union id of each of its vertices.
    presence : numpy.ndarray
        Boolean ``(union vertices, PAGs)``: whether PAG ``i`` has the call path.
    """

    vertices: pd.DataFrame
    maps: tuple[np.ndarray, ...]
    presence: np.ndarray

    @property
    def n_vertices(self) -> int:
        """Number of union vertices."""
        return len(self.vertices)

    def matrix(self, per_vertex: Sequence[np.ndarray]) -> np.ndarray:
        """Per-vertex values of each PAG as a ``(union vertices, PAGs)`` matrix, NaN where a path is absent.

        Values of vertices of one PAG sharing a call path are added.
        """
        if len(per_vertex) != len(self.maps):
            raise PAGError(f"{len(per_vertex)} value arrays for {len(self.maps)} aligned PAGs")
        out = np.full((self.n_vertices, len(self.maps)), np.nan)
        for i, (m, v) in enumerate(zip(self.maps, per_vertex)):
            out[:, i] = np.where(
                self.presence[:, i],
                np.bincount(m, weights=np.asarray(v, np.float64), minlength=self.n_vertices),
                np.nan,
            )
        return out


def align(pags: Sequence[PAG], sep: str = "/") -> Alignment:
    """Align PAGs by call path (see the module docstring).

    Parameters
    ----------
    pags : sequence of PAG
        At least one PAG.
    sep : str
        Separator of call-path components (a name containing it is still one component).

    Returns
    -------
    Alignment
    """
    if not len(pags):
        raise PAGError("nothing to align: no PAGs given")
    sizes = np.array([p.n_vertices for p in pags], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    paths = (
        np.concatenate([p.call_paths(sep).to_numpy(dtype=object) for p in pags]) if offsets[-1] else np.zeros(0, object)
    )
    codes, uniques = pd.factorize(paths, sort=False)
    codes = codes.astype(np.int64)
    n_u = len(uniques)
    maps = tuple(codes[offsets[i] : offsets[i + 1]] for i in range(len(pags)))
    # the parent of a union vertex: the union id of the parent of its first occurrence
    gparent = np.concatenate(
        [
            np.where((par := p.vertex_table["parent"].to_numpy()) >= 0, m[np.maximum(par, 0)], -1)
            for p, m in zip(pags, maps)
        ]
    )
    _, first = np.unique(codes, return_index=True)
    table = {"parent": gparent[first] if n_u else np.zeros(0, np.int64)}
    tables = [p._vertices for p in pags]  # noqa: SLF001 - read-only, same package
    for c in _ATTRS:
        col = np.concatenate([t[c].to_numpy(dtype=object) for t in tables]) if n_u else np.zeros(0, object)
        table[c] = col[first]
    table["call_path"] = np.asarray(uniques, dtype=object)
    presence = np.zeros((n_u, len(pags)), dtype=bool)
    for i, m in enumerate(maps):
        presence[m, i] = True
    cols = ["name", "kind", "parent", "module", "file", "line", "call_path"]
    return Alignment(pd.DataFrame({c: table[c] for c in cols}), maps, presence)
