"""Values checked where they are read: the one validation layer of every reader.

A reader decodes numbers from a file someone else wrote: a damaged or
hand-edited file can hold a negative duration, a NaN, ``1e300``, a time stamp
a million years off, an interval that ends before it starts, or a message sent
outside the call that sends it. Analysed as they are, such values give silent
wrong answers (a function at -27.7 % of the run, every other duration
collapsed to 0 by float64 precision). Every reader therefore runs its times,
durations, counts and bytes through the checks here, and either

* refuses the file with a :class:`~perflow.errors.FormatError` that names the
  file, the record and the value (``run.json (event 12): dur -100 is
  negative``), or,
* where the format allows the damage to be survived (a record that can be
  left out without changing the meaning of the others), drops the record,
  counts it per kind in :class:`Damage`, logs a warning, and records the
  counts in ``pag.attrs["damage"]`` (``perflow info`` prints them).

Three entry points:

:class:`Values`
    Checks of scalars and columns while decoding (finite, non-negative,
    integral and exact in an int64, intervals with ``start <= end``, time
    stamps isolated from the rest of the run).
:func:`check_profile`
    Called by :func:`perflow.readers._common.build_profile` for every profile
    reader: time, count and byte metrics finite and non-negative, at most
    :data:`MAX_SECONDS` per row, exclusive time at most inclusive time, and
    children's inclusive time at most their parent's.
:func:`check_trace`
    Called by :func:`perflow.readers._common.build_trace` for every trace
    reader: event times finite, every event inside its location's stream
    where its ``pos`` puts it, bytes non-negative, and (for sources that
    say so) MPI events inside an MPI call.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from ..errors import FormatError
from ..pag.sites import call_site_paths
from ..trace.raw import TABLE_SCHEMAS
from ..trace.rawcheck import placement_faults
from ..units import show

__all__ = [
    "Values",
    "Damage",
    "check_profile",
    "check_trace",
    "clamp_rounding",
    "show",
    "MAX_SECONDS",
    "MAX_COUNT",
    "OUTLIER_GAP",
]

log = logging.getLogger(__name__)

#: Longest time any row of a profile or event of a trace may cover: ten years (no run lasts that long; a
#: damaged value of 1e300 s or a time stamp in the wrong unit does).
MAX_SECONDS = 10 * 365.25 * 86400.0
#: Largest count or byte total (integers above it are not exact in a float64).
MAX_COUNT = 2.0**53
#: A time stamp this many seconds away from every other of its run (and a thousand times the span of the
#: rest) is an outlier: float64 resolution at that distance collapses the run's durations.
OUTLIER_GAP = 86400.0

RecordName = Callable[[int], str]


class Damage:
    """Records dropped or clamped while reading one source, counted per kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, kind: str, n: int = 1) -> None:
        """Count ``n`` damaged records of ``kind`` (e.g. ``"message flows without a time stamp dropped"``)."""
        if n:
            self.counts[kind] += int(n)

    def __bool__(self) -> bool:
        return bool(self.counts)

    def attach(self, pag: Any, source: Path | str) -> Any:
        """Log one warning per kind and add the counts to ``pag.attrs["damage"]`` (returns ``pag``)."""
        if not self.counts:
            return pag
        have = dict(pag.attrs.get("damage") or {})
        for kind, n in self.counts.items():
            log.warning("%s: %d %s", source, n, kind)
            have[kind] = int(have.get(kind, 0)) + n
        pag.attrs["damage"] = have
        return pag


def _row(i: int) -> str:
    return f"row {i}"


def _filled(t: np.ndarray, lo: float, hi: float) -> bool:
    """Whether a time stamp lies strictly inside ``(lo + w/1000, hi - w/1000)``, ``w = hi - lo``.

    A gap between sorted neighbours of at least a thousand times the span of
    the rest covers more than 1000/1001 of ``[lo, hi]``, so every time stamp
    then lies within ``w/1001`` of ``lo`` or of ``hi``: one inside this middle
    band rules such a gap out. Checked on a strided sample first (a trace's
    time stamps fill its span), then on everything.
    """
    w = hi - lo
    a, b = lo + w / 1000.0, hi - w / 1000.0
    for x in (t[:: max(1, len(t) // 4096)], t):
        if np.any((x > a) & (x < b)):
            return True
    return False


class Values:
    """The value checks of one file being read.

    Parameters
    ----------
    path : path-like
        The file the values come from (every error names it).
    damage : Damage, optional
        Where survivable damage is counted (a new one by default).
    """

    def __init__(self, path: Path | str, damage: Damage | None = None) -> None:
        self.path = path
        self.damage = damage if damage is not None else Damage()

    def fail(self, record: str, message: str) -> NoReturn:
        """Refuse the file: a FormatError naming the record."""
        raise FormatError(self.path, f"{record}: {message}", where=None)

    # ------------------------------------------------------------------------------------------- scalars
    def number(
        self,
        x: Any,
        record: str,
        field: str,
        *,
        lo: float | None = 0.0,
        hi: float | None = None,
        integer: bool = False,
    ) -> float:
        """``x`` as a float, finite, at least ``lo`` (``None``: no bound), at most ``hi``, integral if asked."""
        if isinstance(x, bool) or not isinstance(x, int | float | np.integer | np.floating):
            self.fail(record, f"{field} {x!r} is not a number")
        f = float(x) if not isinstance(x, int) or abs(x) < 2**1023 else math.inf
        if not math.isfinite(f):
            self.fail(record, f"{field} {show(x)} is not a finite number")
        if lo is not None and f < lo:
            self.fail(record, f"{field} {show(x)} is {'negative' if lo == 0 else f'below {show(lo)}'}")
        if hi is not None and f > hi:
            self.fail(record, f"{field} {show(x)} exceeds {show(hi)}")
        if integer and f != int(f):
            self.fail(record, f"{field} {show(x)} is not a whole number")
        return f

    def seconds(self, x: Any, record: str, field: str) -> float:
        """A duration or inclusive time in seconds: finite, non-negative, at most :data:`MAX_SECONDS`."""
        return self.number(x, record, field, lo=0.0, hi=MAX_SECONDS)

    def count(self, x: Any, record: str, field: str) -> float:
        """A count (visits, calls, samples, bytes): a finite non-negative whole number at most :data:`MAX_COUNT`."""
        return self.number(x, record, field, lo=0.0, hi=MAX_COUNT, integer=True)

    # ------------------------------------------------------------------------------------------- columns
    def column(
        self,
        x: Any,
        field: str,
        record: RecordName = _row,
        *,
        lo: float | None = 0.0,
        hi: float | None = None,
        integer: bool = False,
    ) -> np.ndarray:
        """A column as float64: every value finite, within ``[lo, hi]``, integral if asked; else refuse the first."""
        a = np.asarray(x, dtype=np.float64)
        bad = ~np.isfinite(a)
        if lo is not None:
            bad |= a < lo
        if hi is not None:
            bad |= a > hi
        if integer:
            with np.errstate(invalid="ignore"):
                bad |= a != np.round(a)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self.number(a[i], record(i), field, lo=lo, hi=hi, integer=integer)  # raises with the reason
            self.fail(record(i), f"{field} {show(a[i])} is out of range")  # pragma: no cover
        return a

    def int_column(self, x: Any, field: str, record: RecordName = _row, *, lo: int | None = 0) -> np.ndarray:
        """A column of whole numbers as int64, exactly (a REAL ``1e300`` is refused, never wrapped)."""
        raw = np.asarray(x)
        if raw.dtype.kind in "iu":
            a = raw.astype(np.int64)
            if raw.dtype.kind == "u" and len(raw) and raw.max() > np.iinfo(np.int64).max:
                i = int(np.argmax(raw))
                self.fail(record(i), f"{field} {int(raw[i])} does not fit a signed 64-bit integer")
        else:
            f = np.asarray(raw, dtype=np.float64)
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(f) | (np.abs(f) >= 2.0**63) | (f != np.round(f))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                self.fail(record(i), f"{field} {show(raw[i])} is not a whole number that fits 64 bits")
            a = f.astype(np.int64)
        if lo is not None and len(a) and a.min() < lo:
            i = int(np.argmin(a))
            self.fail(record(i), f"{field} {int(a[i])} is {'negative' if lo == 0 else f'below {lo}'}")
        return a

    def intervals(self, start: np.ndarray, end: np.ndarray, record: RecordName = _row, *, what: str = "") -> None:
        """Every interval finite with ``start <= end``."""
        s, e = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
        bad = ~np.isfinite(s) | ~np.isfinite(e)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self.fail(
                record(i), f"{what + ' ' if what else ''}from {show(start[i])} to {show(end[i])}: a time is not finite"
            )
        back = e < s
        if back.any():
            i = int(np.flatnonzero(back)[0])
            self.fail(
                record(i), f"{what + ' ' if what else ''}ends ({show(end[i])}) before it starts ({show(start[i])})"
            )

    def span(self, times: np.ndarray, record: RecordName = _row, *, unit: float = 1.0, field: str = "time") -> None:
        """Refuse a time stamp far outside the span of the rest of the run (``unit``: seconds per tick).

        The time stamps sorted, the widest gap between neighbours must not be
        both at least :data:`OUTLIER_GAP` and a thousand times the span of
        the rest; the run must not span more than :data:`MAX_SECONDS`.
        Names the time stamp on the smaller side of the gap.
        """
        t = np.asarray(times, dtype=np.float64)
        if len(t) < 2:
            return
        lo, hi = float(t.min()), float(t.max())
        total = (hi - lo) * unit
        if total < OUTLIER_GAP or (total <= MAX_SECONDS and _filled(t, lo, hi)):
            return  # no gap can be that wide (the usual case, decided in linear time without sorting)
        order = np.argsort(t, kind="stable")
        st = t[order]
        gaps = np.diff(st) * unit
        k = int(np.argmax(gaps))
        gap = float(gaps[k])
        total = float(st[-1] - st[0]) * unit
        rest = total - gap
        small_low = k + 1 <= len(st) - (k + 1)  # fewer time stamps below the gap than above it
        far = int(order[0 if small_low else -1])
        if gap >= OUTLIER_GAP and gap >= 1000.0 * rest:
            self.fail(
                record(far),
                f"{field} {show(t[far])} lies {show(gap)} s away from every other time stamp of the run "
                f"(which span {show(rest)} s): damaged, or in the wrong unit",
            )
        if total > MAX_SECONDS:
            self.fail(record(far), f"{field} {show(t[far])}: the run would span {show(total)} s (over ten years)")

    def drop(self, kind: str, mask: np.ndarray) -> np.ndarray:
        """Count the records where ``mask`` is true as survivable damage of ``kind``; return the mask of kept ones."""
        m = np.asarray(mask, dtype=bool)
        self.damage.add(kind, int(m.sum()))
        return ~m


# ---------------------------------------------------------------------------------------------- profiles
_COUNT_NAMES = ("visits", "calls", "samples", "count", "subrs", "child_calls")


def _kind_of(name: str, info: Any) -> str:
    """``"time"``, ``"count"``, ``"bytes"`` or ``""`` (no sign rule) for a profile metric."""
    unit = (getattr(info, "unit", "") or "").lower()
    mode = getattr(info, "mode", "")
    low = name.lower()
    if unit in ("s", "sec", "seconds") or low in ("time_inc", "time_exc") or low.startswith("time_"):
        return "time"
    if "bytes" in low or unit in ("b", "bytes", "byte"):
        return "bytes"
    if low in _COUNT_NAMES or mode == "count":
        return "count"
    return ""


def _profile_record(pag: Any, row: int) -> str:
    idx = pag.metrics.index
    v, p, t = (int(idx.get_level_values(k)[row]) for k in ("vertex", "process", "thread"))

    path = call_site_paths(pag)[v]
    return f"call path {path!r}, process {p}, thread {t}"


#: A negative time no larger than this fraction of its column's largest magnitude is float rounding (a
#: profiler subtracting two sums, as Score-P and Scalasca do for exclusive times), not damage.
ROUNDING = 1e-9


def clamp_rounding(pag: Any) -> Any:
    """``pag`` with rounding-sized negative times set to 0 (a new PAG; the same one if none).

    A writer that derives a time by subtracting sums stores ``-1.7e-13`` where the true value is 0.
    Such a value is within :data:`ROUNDING` of its column's largest magnitude; it is clamped (and
    counted in a debug message) so that :func:`check_profile` refuses only real damage.
    """
    m = pag.metrics
    fixed: dict[str, np.ndarray] = {}
    for name in m.columns:
        if _kind_of(str(name), pag.metric_info.get(name)) != "time":
            continue
        col = m[name].to_numpy(dtype=np.float64, na_value=np.nan)
        neg = col < 0
        if not neg.any():
            continue
        tol = ROUNDING * float(np.nanmax(np.abs(col), initial=0.0))
        tiny = neg & (col >= -tol)
        if tiny.any():
            fixed[str(name)] = np.where(tiny, 0.0, col)
            log.debug("%s: %d rounding-sized negative values (>= -%g s) clamped to 0", name, int(tiny.sum()), tol)
    return pag.with_metrics(**fixed) if fixed else pag


def check_profile(pag: Any, source: Path | str | None, *, derived: Mapping[str, bool] | None = None) -> None:
    """Refuse a profile whose time, count or byte metrics are not finite, negative or inconsistent.

    Parameters
    ----------
    pag : PAG
        The profile as built (``time_exc``/``time_inc`` completed).
    source : path-like or None
        The file it was read from (named by the error; ``None``: the PAG's ``source``).
    derived : mapping, optional
        ``{"time_exc": True}`` when that metric was derived by subtraction (a negative value then means the
        children's inclusive time exceeds the parent's).
    """
    src = source if source is not None else pag.attrs.get("source", "profile")
    chk = Values(src)
    m = pag.metrics
    if not len(m):
        return
    info = pag.metric_info

    def rec(i: int) -> str:
        return _profile_record(pag, i)

    for name in m.columns:
        kind = _kind_of(str(name), info.get(name))
        col = m[name].to_numpy(dtype=np.float64, na_value=np.nan)
        if derived and derived.get(name):
            inc = m["time_inc"].to_numpy(dtype=np.float64)
            bad = col < -(1e-6 * np.abs(inc) + 1e-9)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                chk.fail(
                    rec(i),
                    f"the children's inclusive time exceeds this call path's time_inc {show(inc[i])} s "
                    f"by {show(-col[i])} s (a damaged value below it)",
                )
            continue
        if kind == "time":
            chk.column(col, str(name), rec, lo=0.0, hi=MAX_SECONDS)
        elif kind in ("count", "bytes"):
            chk.column(col, str(name), rec, lo=0.0, hi=MAX_COUNT)
        else:
            chk.column(col, str(name), rec, lo=None)
    if "time_inc" in m.columns and "time_exc" in m.columns and not (derived and any(derived.values())):
        inc = m["time_inc"].to_numpy(dtype=np.float64)
        exc = m["time_exc"].to_numpy(dtype=np.float64)
        over = exc > inc * (1 + 1e-6) + 1e-9
        if over.any():
            i = int(np.flatnonzero(over)[0])
            chk.fail(rec(i), f"time_exc {show(exc[i])} s exceeds time_inc {show(inc[i])} s")


# ------------------------------------------------------------------------------------------------ traces
_MPI_PREFIXES = ("MPI_", "PMPI_", "mpi_", "pmpi_")


def check_trace(raw: Any, source: Path | str, *, mpi_inside_calls: bool = False, placement: bool = True) -> None:
    """Refuse a raw trace whose times, bytes or event placement are damaged.

    Checks: every event time finite; region events within :data:`MAX_SECONDS`
    of each other and with no isolated outlier (:meth:`Values.span`); every
    other event between the region events its ``pos`` places it between on
    its location; message and collective bytes non-negative; with
    ``mpi_inside_calls`` (OTF2, perflow's recorder: the formats record MPI
    events inside the call that made them), every point-to-point and
    collective event inside an MPI call. Without ``placement`` (a reader that
    places events by its own rule, e.g. a Charm++ receive in the idle time
    before its entry method), events are not checked against their ``pos``.
    """
    raw.validate()  # the ordering contract first (a TraceError: the caller says "inconsistent events")
    chk = Values(source)
    ev = raw.region_events
    t = np.asarray(ev["time"], dtype=np.float64)
    loc = np.asarray(ev["location"])  # compared, never widened (a copy of 8 bytes per event)
    kind, rid = np.asarray(ev["kind"]), np.asarray(ev["region"])
    is_mpi: np.ndarray | None = None

    def region_rec(i: int) -> str:
        return f"region event {i} (location {int(loc[i])})"

    chk.column(t, "time", region_rec, lo=None)
    chk.span(t, region_rec)
    n = len(t)
    for name, table in _tables(raw):
        if name == "region_events" or not len(table.get("time", ())):
            continue
        tt = np.asarray(table["time"], dtype=np.float64)
        tl = np.asarray(table["location"])
        pos = np.asarray(table["pos"])

        def rec(i: int, name: str = name, tl: np.ndarray = tl) -> str:
            return f"{name.replace('_', ' ').rstrip('s')} {i} (location {int(tl[i])})"

        chk.column(tt, "time", rec, lo=None)
        # between the region event before it and the one after it, on its own location; inside an MPI call
        mpi = mpi_inside_calls and name in ("p2p_events", "coll_events")
        if mpi and is_mpi is None:
            is_mpi = _mpi_regions(raw.regions)
        i, j, outside = placement_faults(tt, tl, pos, t, loc, kind, rid, is_mpi if mpi else None)
        if placement and i >= 0:
            early = j == int(pos[i]) - 1
            side = "before the region event it follows" if early else "after the region event it precedes"
            chk.fail(rec(i), f"time {show(tt[i])} s is {side} (region event {j} at {show(t[j])} s)")
        for col in ("bytes", "sent", "received"):
            if col in table and name in ("p2p_events", "coll_events"):
                chk.int_column(table[col], col, rec, lo=0)
        if outside >= 0:
            why = "an MPI event outside any MPI call (the trace has no MPI regions)"
            if n and is_mpi is not None and len(is_mpi):
                why = "recorded outside any MPI call (the format records it inside the call that made it)"
            chk.fail(rec(outside), why)


def _tables(raw: Any) -> list[tuple[str, Mapping[str, np.ndarray]]]:

    return [(name, getattr(raw, name)) for name in TABLE_SCHEMAS]


def _mpi_regions(regions: Any) -> np.ndarray:
    """Per region id, whether it is an MPI call (named MPI_..., or of the MPI paradigm)."""
    names = regions["name"].astype(str).to_numpy() if "name" in regions.columns else np.array([], dtype=str)
    is_mpi_region = np.array([s.startswith(_MPI_PREFIXES) for s in names], dtype=bool)
    if "paradigm" in regions.columns:
        is_mpi_region |= regions["paradigm"].astype(str).str.lower().to_numpy() == "mpi"
    return is_mpi_region
