"""Per-instance and per-row arithmetic shared by the stages of the trace pipeline.

Region kinds from OTF2 paradigms and roles, exclusive time of instances,
dense keys, the last event time of each location, scattering values onto
metric rows, and metric deltas from Metric events.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._arrays import unique
from .._jit import njit
from ..kinds import VertexKind, classify_region
from ..pag.pag import MetricInfo
from .raw import TABLE_SCHEMAS, RawTrace

__all__ = [
    "region_kinds",
    "exclusive_time",
    "exclusive_from_children",
    "child_time",
    "dense_keys",
    "last_time_per_location",
    "align_rows",
    "metric_deltas",
]

_PARADIGM_KIND = {
    "mpi": VertexKind.MPI,
    "openmp": VertexKind.OPENMP,
    "pthread": VertexKind.THREAD,
    "cuda": VertexKind.GPU,
    "hip": VertexKind.GPU,
    "opencl": VertexKind.GPU,
    "measurement_system": VertexKind.MEASUREMENT,
    "python": VertexKind.PYTHON,
}
_ROLE_KIND = {
    "loop": VertexKind.LOOP,
    "file_io": VertexKind.IO,
    "file_io_metadata": VertexKind.IO,
    "allocate": VertexKind.MEMORY,
    "deallocate": VertexKind.MEMORY,
    "reallocate": VertexKind.MEMORY,
    "artificial": VertexKind.MEASUREMENT,
}


def region_kinds(regions: pd.DataFrame) -> np.ndarray:
    """The :class:`VertexKind` value of each region from its paradigm, role and name."""
    out = []
    for name, role, par in zip(
        regions["name"].astype(str), regions["role"].astype(str), regions["paradigm"].astype(str)
    ):
        k = _PARADIGM_KIND.get(par.lower())
        if k is None or (k is VertexKind.MEASUREMENT and role.lower() != "artificial"):
            k = _ROLE_KIND.get(role.lower())
        if k is None:
            k = classify_region(name, role)
        out.append(k.value)
    return np.asarray(out, dtype=object)


def exclusive_time(inc: np.ndarray, parent: np.ndarray, t_leave: np.ndarray) -> np.ndarray:
    """Exclusive time of each region instance: its inclusive time minus its children's."""
    return exclusive_from_children(inc, child_time(inc, parent), t_leave)


def child_time(inc: np.ndarray, parent: np.ndarray, n: int | None = None) -> np.ndarray:
    """Summed ``inc`` of the children of each of ``n`` parents (default ``len(inc)``); ``parent`` -1 is none."""
    ok = parent >= 0
    return np.bincount(parent[ok], weights=inc[ok], minlength=len(inc) if n is None else n)


def exclusive_from_children(inc: np.ndarray, child_inc: np.ndarray, t_leave: np.ndarray) -> np.ndarray:
    """Inclusive time minus the children's inclusive time (the scan sums those as it goes).

    Children nest inside their parent, so what is left below the timestamps'
    rounding error (relative 1e-12 of the leave time) is zero.
    """
    exc = np.empty(len(inc), dtype=np.float64)
    if len(inc):
        _exclusive(inc, child_inc, t_leave, exc)
    return exc


@njit
def _exclusive(inc, child_inc, t_leave, exc):  # type: ignore[no-untyped-def]
    # one pass (a vectorised form makes four temporaries as long as the instances)
    for i in range(inc.shape[0]):
        e = inc[i] - child_inc[i]
        m = abs(t_leave[i])
        if m < 1.0:
            m = 1.0
        exc[i] = 0.0 if e < 1e-12 * m else e


def dense_keys(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and each element's position among them (like ``np.unique(return_inverse=True)``).

    Linear when the key range is small (a presence table), else a sort.
    """
    if len(key) and key.min() >= 0 and key.max() < max(4 * len(key), 1 << 22):
        present = np.zeros(int(key.max()) + 1, dtype=bool)
        present[key] = True
        uniq = np.flatnonzero(present)
        pos = np.cumsum(present) - 1
        return uniq, pos[key]
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, inv.ravel()


def last_time_per_location(raw: RawTrace, nloc: int) -> np.ndarray:
    last = np.full(nloc, -np.inf)
    for name in TABLE_SCHEMAS:
        t = getattr(raw, name)
        if len(t["location"]):
            np.maximum.at(last, t["location"].astype(np.int64), t["time"])
    return np.where(np.isfinite(last), last, 0.0)


def align_rows(m: pd.DataFrame, v: np.ndarray, p: np.ndarray, t: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Scatter values keyed by (vertex, process, thread) onto the metric rows of ``m``."""
    idx = m.index
    plev = idx.levels[1].to_numpy()
    tlev = idx.levels[2].to_numpy()
    n_p, n_t = max(len(plev), 1), max(len(tlev), 1)
    mkey = (np.asarray(idx.codes[0], np.int64) * n_p + np.asarray(idx.codes[1], np.int64)) * n_t + np.asarray(
        idx.codes[2], np.int64
    )
    qkey = (v * n_p + np.searchsorted(plev, p)) * n_t + np.searchsorted(tlev, t)
    # summed in row order like np.add.at (the same floating-point sums), in one pass
    return np.bincount(np.searchsorted(mkey, qkey), weights=np.asarray(vals, dtype=np.float64), minlength=len(m))


def metric_deltas(
    raw: RawTrace, res: Any, inst_loc: np.ndarray
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, MetricInfo]]:
    """Inclusive per-instance deltas of accumulated metrics from Metric events.

    The value at an instance's start is the last sample taken at or after its
    Enter and before the next region event; the value at its end is the last
    sample before its Leave. The metric's inclusive value is the difference.
    """
    me = raw.metric_events
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    info: dict[str, MetricInfo] = {}
    if not len(me["location"]) or not len(res.enter):
        return out, info
    closed = res.leave >= 0
    nloc = max(len(raw.locations), 1)
    for mid in unique(me["metric"]):
        sel = me["metric"] == mid
        pos = me["pos"][sel]
        val = me["value"][sel]
        # samples are sorted by (location, pos); look up the last one with pos <= q
        loc = me["location"][sel].astype(np.int64)
        skey = loc * (len(raw.region_events["location"]) + 2) + pos
        span = len(raw.region_events["location"]) + 2

        def lookup(i: np.ndarray, skey=skey, loc=loc, val=val) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
            ok = (i >= 0) & (i < len(skey))
            j = np.clip(i, 0, max(len(skey) - 1, 0))
            ok &= loc[j] == inst_loc
            return np.where(ok, val[j], np.nan), ok

        # start: the first sample right after the Enter, else the last one before it
        first_after = np.searchsorted(skey, inst_loc * span + res.enter + 1, side="left")
        start, ok1 = lookup(first_after)
        right_after = ok1 & (pos[np.clip(first_after, 0, max(len(pos) - 1, 0))] == res.enter + 1)
        before, okb = lookup(np.searchsorted(skey, inst_loc * span + res.enter, side="right") - 1)
        start = np.where(right_after, start, before)
        ok1 = right_after | okb
        # end: the last sample before the Leave
        end, ok2 = lookup(np.searchsorted(skey, inst_loc * span + np.where(closed, res.leave, 0), side="right") - 1)
        delta = end - start
        ok = ok1 & ok2 & closed & np.isfinite(delta)
        row = raw.metrics.loc[mid] if mid in raw.metrics.index else None
        name = str(row["name"]) if row is not None else f"metric{mid}"
        out[name] = (res.callpath[ok] * nloc + inst_loc[ok], delta[ok])
        unit = str(row["unit"]) if row is not None else ""
        info[name] = MetricInfo(name, unit, "inclusive", f"{name} accumulated in the region and its callees")
    return out, info
