"""Build a PAG from a :class:`~perflow.trace.raw.RawTrace`.

Steps, each vectorised or compiled:

1. :func:`~perflow.trace.scan.scan_regions` pairs Enter/Leave events, links
   each region instance to its enclosing one and assigns call paths.
2. Inclusive time per instance is ``leave - enter``; exclusive time subtracts
   the children's inclusive time (one ``bincount``). Both, and visits, are
   summed per (call path, process, thread).
3. Samples extend the calling-context tree below the instance they fell in.
4. Metric events give per-instance deltas of accumulated metrics.
5. :mod:`perflow.trace.match` matches messages and groups collectives.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..kinds import VertexKind, classify_region
from ..pag.frames import make_metrics
from ..pag.pag import PAG, MetricInfo
from .contexts import TreeGrower, attach_region_stacks, attach_samples, stack_frames
from .match import collective_table, message_table
from .raw import RawTrace
from .scan import SCAN_ERRORS, enclosing_instance, scan_regions
from ..pag.instances import Trace

__all__ = [
    "build_pag",
    "enclosing_instance",
    "region_kinds",
    "dense_keys",
    "exclusive_time",
    "last_time_per_location",
    "metric_deltas",
    "align_rows",
]

log = logging.getLogger(__name__)

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
    """Exclusive time of each region instance: its inclusive time minus its children's.

    Children nest inside their parent, so what is left below the timestamps'
    rounding error (relative 1e-12 of the leave time) is zero.
    """
    child_inc = np.bincount(parent[parent >= 0], weights=inc[parent >= 0], minlength=len(inc))
    exc = inc - child_inc
    exc[exc < 1e-12 * np.maximum(np.abs(t_leave), 1.0)] = 0.0
    return exc


def _scan_error(raw: RawTrace, code: int, at: int) -> TraceError:
    src = raw.attrs.get("source", "trace")
    what = SCAN_ERRORS.get(code, f"error {code}")
    if code == 3:
        return TraceError(f"{src}: location {at}: {what}; pass close_open=True to close them at the last event")
    ev = raw.region_events
    loc = int(ev["location"][at])
    reg = int(ev["region"][at])
    rname = raw.regions["name"].iloc[reg] if 0 <= reg < len(raw.regions) else reg
    return TraceError(f"{src}: location {loc}, region event {at} at t={ev['time'][at]:.9f}: {what} (region {rname!r})")


def build_pag(
    raw: RawTrace, *, close_open: bool = False, validate: bool = True, infer_collectives: bool = False
) -> PAG:
    """Turn decoded events into a trace-backed PAG.

    Parameters
    ----------
    raw : RawTrace
        Decoded events and definitions.
    close_open : bool
        Close region instances left open at the end of a location (a
        truncated trace) at that location's last event time, instead of
        raising :class:`~perflow.errors.TraceError`.
    validate : bool
        Check the raw trace's ordering contract first.
    infer_collectives : bool
        For sources that record MPI calls but no collective events (Chrome
        traces, HPCToolkit traces): treat every call to a collective
        operation as an instance on MPI_COMM_WORLD, the k-th call of an
        operation on each process being the k-th instance. MPI_Init and
        MPI_Finalize are always world barriers.

    Returns
    -------
    PAG
        With ``time_inc``, ``time_exc``, ``visits``, byte counts and any
        trace metric, and a :class:`~perflow.pag.instances.Trace`.
    """
    if validate:
        raw.validate()
    ev = raw.region_events
    rloc = ev["location"]
    res = scan_regions(rloc, ev["kind"], ev["region"], close_open=close_open)
    if res.error:
        raise _scan_error(raw, res.error, res.error_at)
    times = ev["time"]
    locs = raw.locations
    loc_proc = locs["process"].to_numpy(dtype=np.int64)
    loc_thr = locs["thread"].to_numpy(dtype=np.int64)

    inst_loc = rloc[res.enter].astype(np.int64)
    t_enter = times[res.enter]
    closed = res.leave >= 0
    if not closed.all():
        last_time = last_time_per_location(raw, len(locs))
        log.warning("%s: closing %d region instances left open", raw.attrs.get("source", "trace"), (~closed).sum())
    t_leave = np.where(closed, times[np.maximum(res.leave, 0)], 0.0)
    if not closed.all():
        t_leave[~closed] = last_time[inst_loc[~closed]]
    inc = t_leave - t_enter

    # --- calling contexts without Enter/Leave events: region call stacks and samples extend the tree
    tree = TreeGrower(res.cp_parent, res.cp_region)
    frames = stack_frames(raw)
    st_v, st_l, st_inc = attach_region_stacks(raw, res, tree, frames)
    samples = attach_samples(raw, res, tree, frames) if len(raw.sample_events["location"]) else None
    cp_parent, cp_region = tree.arrays()

    exc = exclusive_time(inc, res.parent, t_leave)

    # --- aggregate per (call path, location); synthetic vertices add rows without visits
    nloc = max(len(locs), 1)
    parts = [(res.callpath * nloc + inst_loc, inc, exc, np.ones(len(inc)), np.zeros(len(inc)))]
    if len(st_v):
        parts.append((st_v * nloc + st_l, st_inc, np.zeros(len(st_v)), np.zeros(len(st_v)), np.zeros(len(st_v))))
    if samples is not None:
        sv = samples["vertex"] * nloc + samples["location"]
        parts.append((sv, samples["inc"], samples["exc"], np.zeros(len(sv)), samples["n"]))
    allkey = np.concatenate([q[0] for q in parts])
    uniq, inv = dense_keys(allkey)
    names = ["time_inc", "time_exc", "visits", "samples"]
    agg = {
        m: np.bincount(inv, weights=np.concatenate([q[i + 1] for q in parts]), minlength=len(uniq))
        for i, m in enumerate(names)
    }
    if samples is None:
        del agg["samples"]
    elif len(samples["moved"]):
        # sampled time leaves the exclusive time of the instance the sample fell in
        mk = samples["moved_vertex"] * nloc + samples["moved_location"]
        moved = np.bincount(np.searchsorted(uniq, mk), weights=samples["moved"], minlength=len(uniq))
        agg["time_exc"] = np.maximum(agg["time_exc"] - moved, 0.0)
    vertex = uniq // nloc
    loc_of = uniq % nloc

    # --- messages, collectives, metrics
    p2p_open = enclosing_instance(res.open_after, rloc, raw.p2p_events["location"], raw.p2p_events["pos"])
    coll_open = enclosing_instance(res.open_after, rloc, raw.coll_events["location"], raw.coll_events["pos"])
    inst_proc = loc_proc[inst_loc]
    inst_thr = loc_thr[inst_loc]
    intervals = pd.DataFrame(
        {
            "process": inst_proc.astype(np.int32),
            "thread": inst_thr.astype(np.int32),
            "vertex": res.callpath.astype(np.int32),
            "enter": t_enter,
            "leave": t_leave,
            "parent": res.parent,
        },
        copy=False,
    )
    inst_region = cp_region[res.callpath]
    messages, unmatched = message_table(raw, p2p_open, intervals, inst_region)
    collectives = collective_table(raw, coll_open, intervals, inst_region, infer=infer_collectives)
    extra = _byte_metrics(messages, collectives, intervals, nloc, inst_loc, res.callpath)
    metric_cols, metric_info = metric_deltas(raw, res, inst_loc)

    vertices = _vertex_table(raw, cp_parent, cp_region)
    m = make_metrics(vertex, loc_proc[loc_of], loc_thr[loc_of], agg, n_vertices=len(vertices))
    pag_cols: dict[str, np.ndarray] = {}
    for name, (kv, vals) in {**extra, **metric_cols}.items():
        pag_cols[name] = align_rows(m, kv // nloc, loc_proc[kv % nloc], loc_thr[kv % nloc], vals)
    for name, vals in pag_cols.items():
        m[name] = vals
    info = {
        "bytes_sent": MetricInfo("bytes_sent", "bytes", "exclusive", "bytes sent by messages and collectives"),
        "bytes_recv": MetricInfo("bytes_recv", "bytes", "exclusive", "bytes received by messages and collectives"),
        "samples": MetricInfo("samples", "count", "exclusive", "timer samples in the region itself"),
        **metric_info,
    }
    attrs: dict[str, Any] = {k: v for k, v in raw.attrs.items() if isinstance(v, str | int | float | bool)}
    attrs.update(
        {
            "nprocs": int(len(np.unique(loc_proc))) if len(loc_proc) else 0,
            "unmatched_sends": int(unmatched[0]),
            "unmatched_recvs": int(unmatched[1]),
            "clock_violations": int(messages["clock_violation"].sum()),
            "closed_open_instances": int((~closed).sum()),
        }
    )
    if unmatched[0] or unmatched[1]:
        log.warning("%s: %d sends and %d receives found no partner", raw.attrs.get("source", "trace"), *unmatched)
    trace = Trace(intervals, messages, collectives, comms=dict(raw.comms), comm_names=dict(raw.comm_names))
    return PAG(vertices, m, metric_info={k: v for k, v in info.items() if k in m.columns}, trace=trace, attrs=attrs)


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
    for name in ("region_events", "p2p_events", "coll_events", "metric_events", "sample_events", "thread_events"):
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
    out = np.zeros(len(m), dtype=np.float64)
    np.add.at(out, np.searchsorted(mkey, qkey), vals)
    return out


def _byte_metrics(
    messages, collectives, intervals, nloc, inst_loc, callpath
) -> dict[str, tuple[np.ndarray, np.ndarray]]:  # type: ignore[no-untyped-def]
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    sent_k, sent_v, recv_k, recv_v = [], [], [], []
    if len(messages):
        si = messages["send_interval"].to_numpy()
        ri = messages["recv_interval"].to_numpy()
        b = messages["bytes"].to_numpy(dtype=np.float64)
        ok = si >= 0
        sent_k.append(callpath[si[ok]] * nloc + inst_loc[si[ok]])
        sent_v.append(b[ok])
        ok = ri >= 0
        recv_k.append(callpath[ri[ok]] * nloc + inst_loc[ri[ok]])
        recv_v.append(b[ok])
    if len(collectives):
        ci = collectives["interval"].to_numpy()
        ok = ci >= 0
        sent_k.append(callpath[ci[ok]] * nloc + inst_loc[ci[ok]])
        sent_v.append(collectives["sent"].to_numpy(dtype=np.float64)[ok])
        recv_k.append(callpath[ci[ok]] * nloc + inst_loc[ci[ok]])
        recv_v.append(collectives["received"].to_numpy(dtype=np.float64)[ok])
    if sent_k and sum(len(x) for x in sent_k):
        out["bytes_sent"] = (np.concatenate(sent_k), np.concatenate(sent_v))
        out["bytes_recv"] = (np.concatenate(recv_k), np.concatenate(recv_v))
    return out


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
    for mid in np.unique(me["metric"]):
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


def _vertex_table(raw: RawTrace, cp_parent: np.ndarray, cp_region: np.ndarray) -> pd.DataFrame:
    reg = raw.regions
    kinds = region_kinds(reg)
    return pd.DataFrame(
        {
            "name": reg["name"].astype(str).to_numpy()[cp_region],
            "kind": kinds[cp_region],
            "parent": cp_parent,
            "module": reg["module"].astype(str).to_numpy()[cp_region],
            "file": reg["file"].astype(str).to_numpy()[cp_region],
            "line": reg["line"].to_numpy(dtype=np.int64)[cp_region],
            "region": cp_region,
        }
    )
