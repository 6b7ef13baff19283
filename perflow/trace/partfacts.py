"""Small facts of a trace that the passes read, in one form for a whole trace and one over partitions.

* :func:`exclusive_time`: exclusive time per vertex over all locations, and the time outside every region
  (behind ``trace.exclusive_by_vertex``), from a flat timeline;
* :func:`vertex_spans`: per vertex, the first and last enter and leave of its instances and their number
  (behind ``trace.vertex_spans``: a region of interest's time window);
* the (process, thread) locations (``trace.location_keys``).

The partitioned forms (``*_program``) run on each partition's view (:func:`perflow.trace.criticalparts.part_views`)
and combine small per-vertex arrays: minima, maxima and counts exactly, sums up to rounding (partial sums
added in another order).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..pag.partitioned import Each
from .criticalparts import PartView, global_locations, part_views
from .flat import FlatTimeline, exclusive_sums
from .pipeline import Built

__all__ = [
    "exclusive_time",
    "exclusive_program",
    "vertex_spans",
    "combine_spans",
    "finish_spans",
    "spans_program",
    "location_keys_program",
    "SPAN_COLUMNS",
]

#: the columns of :func:`vertex_spans`
SPAN_COLUMNS = ("first_enter", "last_enter", "first_leave", "last_leave", "count")


def exclusive_time(flat: FlatTimeline, n: int) -> tuple[np.ndarray, float]:
    """Exclusive time per vertex (length ``n``) summed over the locations of ``flat``, and the time outside
    every region (between a location's first and last event)."""
    if len(flat.time) < 2:
        return np.zeros(n), 0.0
    out = exclusive_sums(flat.time, flat.vertex, flat.offsets, int(n))  # one pass, bincount's order
    return out[:n], float(out[n])


def _exclusive_part(v: PartView, n: int) -> tuple[np.ndarray, float]:
    return exclusive_time(v.flat, n)


def exclusive_program(b: Built, n: int) -> tuple[np.ndarray, float]:
    """:func:`exclusive_time` of a built trace, summed over its partitions."""
    parts = b.runtime.gather(b.runtime.map(_exclusive_part, Each(part_views(b)), n))
    return sum((p[0] for p in parts[1:]), parts[0][0].copy()), float(sum(p[1] for p in parts))


def vertex_spans(vertex: np.ndarray, enter: np.ndarray, leave: np.ndarray, n: int) -> pd.DataFrame:
    """Per vertex (``n`` rows): first and last enter and leave of its intervals (NaN without any), and their
    number."""
    v = np.asarray(vertex, dtype=np.int64)
    ok = (v >= 0) & (v < n)
    v, e, lv = v[ok], np.asarray(enter, np.float64)[ok], np.asarray(leave, np.float64)[ok]
    cols = {}
    for name, x, fill, op in (("first_enter", e, np.inf, np.minimum), ("last_enter", e, -np.inf, np.maximum),
                              ("first_leave", lv, np.inf, np.minimum), ("last_leave", lv, -np.inf, np.maximum)):  # fmt: skip
        a = np.full(n, fill)
        op.at(a, v, x)
        cols[name] = a
    cols["count"] = np.bincount(v, minlength=n).astype(np.int64)
    return pd.DataFrame(cols)


def combine_spans(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The spans of several partitions together (each as :func:`vertex_spans` makes them, before :func:`finish`)."""
    out = parts[0].copy()
    for p in parts[1:]:
        for c in ("first_enter", "first_leave"):
            out[c] = np.minimum(out[c].to_numpy(), p[c].to_numpy())
        for c in ("last_enter", "last_leave"):
            out[c] = np.maximum(out[c].to_numpy(), p[c].to_numpy())
        out["count"] = out["count"].to_numpy() + p["count"].to_numpy()
    return out


def finish_spans(s: pd.DataFrame) -> pd.DataFrame:
    """Vertices without intervals get NaN (not infinities)."""
    s = s.copy()
    none = s["count"].to_numpy() == 0
    for c in SPAN_COLUMNS[:4]:
        s[c] = np.where(none, np.nan, s[c].to_numpy())
    return s


def _spans_part(v: PartView, n: int) -> pd.DataFrame:
    iv = v.trace.intervals
    return vertex_spans(iv["vertex"].to_numpy(), iv["enter"].to_numpy(), iv["leave"].to_numpy(), n)


def spans_program(b: Built, n: int) -> pd.DataFrame:
    """:func:`vertex_spans` of a built trace (reduced over its partitions)."""
    return finish_spans(combine_spans(b.runtime.gather(b.runtime.map(_spans_part, Each(part_views(b)), n))))


def location_keys_program(b: Built) -> pd.DataFrame:
    """The (process, thread) locations of a built trace that have intervals, sorted."""
    glocs, _ = global_locations(b)
    return pd.DataFrame({"process": glocs.process, "thread": glocs.thread})
