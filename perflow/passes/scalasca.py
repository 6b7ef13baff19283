"""perflow's trace analysis under Scalasca's metric names, and as a CUBE4 file for Cube.

Passes
------
scalasca_metrics
    The wait states, critical path and delay costs of a trace as Scalasca's
    metrics (``mpi_latesender``, ``omp_ibarrier_wait``, ``critical_path``,
    ``delay_barrier_longterm``, ...): per metric, per call path, or per call
    path and location, so that a Cube user finds the same number under the
    same name (:mod:`perflow.trace.cubemetrics`).
cube_file
    The same analysis as a CUBE4 file (``.cubex``: Scalasca's metric tree,
    the call tree, processes and threads) that Cube and pycubexr open;
    written to the run's output folder as ``NAME.cubex``, or to ``path``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from perflow.sdk import PAG, PassError, output_path, pass_, settings_keywords
from perflow.sdk.io import cube_archive
from perflow.sdk.render import declare_aggregates, write_bytes
from perflow.sdk.trace import SCALASCA_METRICS as METRICS
from perflow.sdk.trace import ScalascaSettings, call_path_column, check_choice, name_column, require_trace
from perflow.sdk.trace import scalasca_metrics as _metrics

__all__ = ["scalasca_metrics", "cube_file", "CubeFile"]

_BY = ("metric", "call_path", "location")


@pass_(version="1", tags=("trace", "wait-states", "critical-path", "delay", "scalasca"))
@settings_keywords(ScalascaSettings, "settings")
def scalasca_metrics(
    pag: PAG, *, by: str = "metric", metrics: list[str] | None = None, settings: ScalascaSettings
) -> pd.DataFrame:
    """The trace analysis under Scalasca's metric names, as Cube shows it.

    Values are exclusive along the call tree and inclusive along the metric
    tree (``mpi_latesender`` includes its wrong-order part); see
    :mod:`perflow.trace.cubemetrics` for where each metric comes from.
    ``by="metric"``: one row per metric with ``metric``, ``display``,
    ``parent``, ``unit``, ``value`` (summed over call paths and locations),
    in the order of Scalasca's report. ``by="call_path"``: per (metric,
    call path) with ``vertex``, ``name``, ``call_path``, ``value``.
    ``by="location"``: per (metric, call path, process, thread).

    Parameters
    ----------
    by : str
        "metric", "call_path" or "location".
    metrics : list of str, optional
        Only these metrics (unique names), in the given order.
    """
    check_choice("scalasca_metrics", "by", by, _BY)
    require_trace(pag, "scalasca_metrics")
    t = _metrics(pag, settings)
    order = [m.name for m in METRICS]
    if metrics is not None:
        unknown = [m for m in metrics if m not in order]
        if unknown:
            raise PassError(f"pass 'scalasca_metrics': unknown metrics {unknown}; the metrics are {order}")
        t = t[t["metric"].astype(str).isin(metrics)]
        order = list(metrics)
    t = t.assign(metric=pd.Categorical(t["metric"].astype(str), categories=order))
    if by == "metric":
        tot = t.groupby("metric", observed=False)["value"].sum()
        info = {m.name: m for m in METRICS}
        out = pd.DataFrame(
            {
                "metric": order,
                "display": [info[m].display for m in order],
                "parent": [info[m].parent or "" for m in order],
                "unit": [info[m].unit for m in order],
                "value": tot.reindex(order).fillna(0.0).to_numpy(),
            }
        )
        declare_aggregates(out, pag, ["value"])
        return out
    keys = ["metric", "vertex"] if by == "call_path" else ["metric", "vertex", "process", "thread"]
    g = t.groupby(keys, observed=True, sort=True)["value"].sum().reset_index()
    v = g["vertex"].to_numpy().astype(np.int64)
    g.insert(2, "name", name_column(pag, v))
    g.insert(3, "call_path", call_path_column(pag, v))
    return g


class CubeFile:
    """A CUBE4 archive (``.cubex``) a flow writes to its output folder as ``NAME.cubex``.

    Attributes
    ----------
    data : bytes
        The archive.
    metrics, cnodes, locations : int
        What it holds.
    """

    suffix = ".cubex"

    def __init__(self, data: bytes, metrics: int, cnodes: int, locations: int) -> None:
        self.data, self.metrics, self.cnodes, self.locations = data, metrics, cnodes, locations

    def write_file(self, stem: str | Path) -> Path:
        """Write the archive to ``stem`` plus ``.cubex`` (atomically, by the running flow's write policy)."""
        p = Path(stem)
        p = p if p.suffix == self.suffix else p.with_name(p.name + self.suffix)
        write_bytes(self.data, p)
        return p

    def __repr__(self) -> str:
        return (
            f"CUBE4 file: {self.metrics} metrics, {self.cnodes} call paths, {self.locations} locations, "
            f"{len(self.data)} bytes (written as NAME.cubex with --output)"
        )


@pass_(version="1", tags=("trace", "scalasca", "export"), cacheable=False)
@settings_keywords(ScalascaSettings, "settings")
def cube_file(pag: PAG, *, path: str = "", analysis: bool = True, settings: ScalascaSettings) -> CubeFile:
    """perflow's analysis as a CUBE4 file with Scalasca's metric tree (see :func:`scalasca_metrics`).

    Returns the file (a flow writes it to its output folder); with ``path``
    it is also written there (under a flow run, inside the run's output
    folder or a folder allowed to it).

    Parameters
    ----------
    path : str
        Write the file here too ("" none).
    analysis : bool
        Scalasca's trace-analysis metrics (a trace is needed); false: time and visits only.
    """
    if analysis:
        require_trace(pag, "cube_file")
    data = cube_archive(pag, analysis=analysis, settings=settings)
    n_loc = len(pag.metrics.index.to_frame(index=False)[["process", "thread"]].drop_duplicates())
    out = CubeFile(data, len(METRICS) if analysis else 2, pag.n_vertices, n_loc)
    p = output_path(path)
    if p is not None:
        out.write_file(p)
    return out
