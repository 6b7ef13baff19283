"""Read-only, zero-copy faces on a PAG's tables, and sub-PAGs: what pass authors use instead of private members.

:class:`MetricRows` (``pag.rows``) shows the metrics table as numpy arrays
that cannot be written to: the vertex id, process code and thread code of
every row (the codes index ``processes``/``threads``), and any metric column.
Nothing is copied; process and thread ids of the rows are made on request.

:func:`subgraph` (``pag.subgraph(ids)``) restricts a PAG to some vertices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .base import read_only
from .tree import ancestors_mask, descendants_mask

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = ["MetricRows", "read_only", "subgraph"]


@dataclass(frozen=True)
class MetricRows:
    """The rows of a PAG's metrics table as read-only arrays (see the module docstring).

    Attributes
    ----------
    vertex : numpy.ndarray
        Vertex id of each row; rows are sorted by (vertex, process, thread).
    process_code, thread_code : numpy.ndarray
        Each row's index into ``processes`` and ``threads``.
    processes, threads : numpy.ndarray
        The distinct process and thread ids, sorted.
    """

    _pag: PAG
    vertex: np.ndarray
    process_code: np.ndarray
    thread_code: np.ndarray
    processes: np.ndarray
    threads: np.ndarray

    @classmethod
    def of(cls, pag: PAG) -> MetricRows:
        """The face on ``pag``'s metrics table."""
        idx = pag._metrics.index
        return cls(
            pag,
            read_only(np.asarray(idx.codes[0])),
            read_only(np.asarray(idx.codes[1])),
            read_only(np.asarray(idx.codes[2])),
            read_only(idx.levels[1].to_numpy()),
            read_only(idx.levels[2].to_numpy()),
        )

    def __len__(self) -> int:
        return len(self.vertex)

    def column(self, metric: str) -> np.ndarray:
        """One metric's values, row by row, read-only (float64 columns are not copied)."""
        self._pag.check_metric(metric)
        return read_only(self._pag._metrics[metric].to_numpy())

    def process(self) -> np.ndarray:
        """The process id of each row (a new array)."""
        return self.processes[self.process_code] if len(self.processes) else np.zeros(0, np.int64)

    def thread(self) -> np.ndarray:
        """The thread id of each row (a new array)."""
        return self.threads[self.thread_code] if len(self.threads) else np.zeros(0, np.int64)


def _kept_comm(pag: PAG, keep: np.ndarray, new_id: np.ndarray) -> pd.DataFrame | None:
    """Communication edges of ``pag`` between kept vertices, renumbered by ``new_id``, as explicit edges."""
    view = pag.parallel
    et = view.edge_table
    comm = et[et["kind"].astype(str).to_numpy() != "call"]
    if not len(comm):
        return None
    vf = view.vertex_frame
    s, d = comm["src"].to_numpy(), comm["dst"].to_numpy()
    sv, dv = vf["vertex"].to_numpy()[s], vf["vertex"].to_numpy()[d]
    ok = keep[sv] & keep[dv]
    if not ok.any():
        return None
    return pd.DataFrame(
        {
            "src_vertex": new_id[sv[ok]],
            "src_process": vf["process"].to_numpy()[s[ok]],
            "src_thread": vf["thread"].to_numpy()[s[ok]],
            "dst_vertex": new_id[dv[ok]],
            "dst_process": vf["process"].to_numpy()[d[ok]],
            "dst_thread": vf["thread"].to_numpy()[d[ok]],
            **{c: comm[c].to_numpy()[ok] for c in ("kind", "count", "bytes", "time", "wait")},
        }
    )


def subgraph(pag: PAG, ids: np.ndarray, *, with_ancestors: bool = True, with_descendants: bool = False) -> PAG:
    """A new PAG restricted to vertices ``ids`` (see :meth:`perflow.PAG.subgraph`)."""

    ids = np.asarray(ids, dtype=np.int64)
    parent = pag._vertices["parent"].to_numpy()
    keep = np.zeros(pag.n_vertices, dtype=bool)
    keep[ids] = True
    if with_ancestors:
        keep |= ancestors_mask(parent, ids)
    if with_descendants and len(ids):
        keep |= descendants_mask(pag.tree_index, ids)
    old = np.flatnonzero(keep)
    new_id = np.full(pag.n_vertices, -1, dtype=np.int64)
    new_id[old] = np.arange(len(old))
    vt = pag._vertices.iloc[old].copy()
    par = vt["parent"].to_numpy()
    vt["parent"] = np.where(par >= 0, new_id[np.maximum(par, 0)], -1)
    vt["orig_vertex"] = old
    vt = vt.reset_index(drop=True)
    rows = pag.rows
    sel = np.flatnonzero(keep[rows.vertex])
    metrics = pag._metrics.iloc[sel].reset_index(drop=True)
    metrics.insert(0, "vertex", new_id[rows.vertex[sel]])
    metrics.insert(1, "process", rows.process()[sel])
    metrics.insert(2, "thread", rows.thread()[sel])
    comm = _kept_comm(pag, keep, new_id)
    attrs = {**pag.attrs, "subgraph_of": str(pag.attrs.get("source", "PAG")), "subgraph_vertices": int(len(old))}
    return _pag.PAG.from_frames(vt, metrics, metric_info=pag.metric_info, comm=comm, attrs=attrs)


# The PAG class builds on this module (imports it at its top): the module, not its
# names, is imported here, last, so that either can be imported first.
from . import pag as _pag  # noqa: E402
