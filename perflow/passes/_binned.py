"""Binned summaries of a trace timeline: the share of each category in each (row, time bin).

One vectorised definition serves every timeline: the static PNG (:func:`perflow.passes.timeline.plot_timeline`)
and the interactive HTML timeline (:mod:`perflow.passes.html_timeline`). Zoomed out, a timeline
shows per bin the share of *every* category (as Vampir's summary timeline does), not only the dominant
one; zoomed in, the few instances in view are drawn one by one.

The work is linear in the number of instances and needs no loop over them: each instance adds its
overlap with every bin to its own category and removes it from its parent's (``np.bincount`` for the
first and last bin of each instance, a difference array for the bins it covers fully), so the result
is the *exclusive* time of each category: what a reader sees at that moment is the innermost region.

>>> td = timeline_data(pag)                                   # doctest: +SKIP
>>> shares = td.shares(*td.span, bins=1000)                   # (rows, 1000, categories), fractions of a bin
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from perflow.sdk import PAG, MPIClass, PassError, mpi_class
from perflow.sdk.figures import CATEGORY_COLORS, PLOT_CATEGORIES, palette
from perflow.sdk.profile import device_categories
from perflow.sdk.trace import bin_exclusive, stack_pixels

__all__ = [
    "TimelineData",
    "timeline_data",
    "data_key",
    "share_data",
    "take_shared",
    "aggregate_bins",
    "aggregate_bins_many",
    "interval_categories",
    "instance_categories",
    "span_cover",
    "path_rows",
    "path_runs",
    "share_pixels",
    "location_rows",
]

_MPI_CAT = {
    MPIClass.P2P: "p2p",
    MPIClass.COLLECTIVE: "collective",
    MPIClass.SYNC: "sync",
    MPIClass.WAIT: "wait",
    MPIClass.IO: "io",
}


def interval_categories(pag: PAG, color_by: str, top_regions: int) -> tuple[np.ndarray, list[str], list[Any]]:
    """Category code per *vertex*, the category names and their colours.

    ``color_by="kind"``: computation / p2p / collective / sync / wait / io /
    mpi (other MPI calls). ``color_by="region"``: the ``top_regions`` names with
    the most exclusive time, the rest as ``other``.
    """
    vt = pag.vertex_table
    names = vt["name"].astype(str).to_numpy()
    if color_by == "kind":
        kinds = vt["kind"].astype(str).to_numpy()
        uniq, inv = np.unique(names, return_inverse=True)
        cat_of_name = []
        for n in uniq.tolist():
            c = mpi_class(n)
            cat_of_name.append("computation" if c is None else _MPI_CAT.get(c, "mpi"))
        cats = np.asarray(cat_of_name, dtype=object)[inv]
        cats = np.where((kinds == "io") & (cats == "computation"), "io", cats)
        dev = device_categories(vt["name"], kinds)
        cats = np.where((dev != "") & (cats == "computation"), dev, cats)
        present = [c for c in PLOT_CATEGORIES if c in set(cats.tolist())]
        code = {c: i for i, c in enumerate(present)}
        return np.array([code[c] for c in cats], dtype=np.int64), present, [CATEGORY_COLORS[c] for c in present]
    if color_by == "region":
        tr = pag.trace
        iv = tr.intervals if tr is not None else None
        if iv is not None and len(iv):
            vert = iv["vertex"].to_numpy()
            dur = iv["leave"].to_numpy() - iv["enter"].to_numpy()  # numpy's difference: no Series built
            par = iv["parent"].to_numpy()
            has = par >= 0
            exc = dur - np.bincount(par[has], weights=dur[has], minlength=len(dur))
            per_vertex = np.bincount(vert, weights=exc, minlength=len(names))
            per_name = pd.Series(per_vertex).groupby(names).sum()
        else:
            per_name = pd.Series(dtype=float)
        top = per_name.sort_values(ascending=False, kind="stable").index[:top_regions].tolist()
        labels = [*top, "other"]
        code = {n: i for i, n in enumerate(top)}
        vcode = np.array([code.get(n, len(top)) for n in names], dtype=np.int64)
        return vcode, labels, [*palette(len(top)), CATEGORY_COLORS["other"]]
    raise PassError(f"plot_timeline: color_by must be 'kind' or 'region', not {color_by!r}")


def aggregate_bins(
    row: np.ndarray,
    enter: np.ndarray,
    leave: np.ndarray,
    cat: np.ndarray,
    parent_cat: np.ndarray,
    *,
    n_rows: int,
    n_cats: int,
    t0: float,
    t1: float,
    bins: int,
) -> np.ndarray:
    """Exclusive time per (row, bin, category) of nested intervals clipped to [t0, t1).

    Each interval adds its overlap with each bin to its own category and
    subtracts it from its parent's category (``parent_cat`` -1: no parent).
    Returns an array of shape ``(n_rows, bins, n_cats)`` in seconds.
    """
    (out,) = aggregate_bins_many(row, enter, leave, [(cat, parent_cat, n_cats)], n_rows=n_rows, t0=t0, t1=t1, bins=bins)
    return out


def aggregate_bins_many(
    row: np.ndarray,
    enter: np.ndarray,
    leave: np.ndarray,
    colourings: list[tuple[np.ndarray, np.ndarray, int]],
    *,
    n_rows: int,
    t0: float,
    t1: float,
    bins: int,
) -> list[np.ndarray]:
    """:func:`aggregate_bins` of the same intervals under several colourings, in one pass over the intervals.

    ``colourings`` holds ``(cat, parent_cat, n_cats)`` per colouring (per kind and per function, say);
    the bins each interval covers are found once. Each result equals :func:`aggregate_bins`'s exactly
    (:func:`perflow.sdk.trace.bin_exclusive`: numpy for small inputs, a compiled kernel for large ones).
    """
    return bin_exclusive(row, enter, leave, colourings, n_rows=n_rows, t0=t0, t1=t1, bins=bins)


def span_cover(
    row: np.ndarray, start: np.ndarray, end: np.ndarray, *, n_rows: int, t0: float, t1: float, bins: int
) -> np.ndarray:
    """Fraction of each (row, bin) covered by the spans ``[start, end)`` (overlaps add up; clipped at 1)."""
    none = np.full(len(row), -1, dtype=np.int64)
    cov = aggregate_bins(
        row, start, end, np.zeros(len(row), np.int64), none, n_rows=n_rows, n_cats=1, t0=t0, t1=t1, bins=bins
    )
    return np.clip(cov[:, :, 0] / ((t1 - t0) / bins), 0.0, 1.0)


def path_rows(row: np.ndarray, start: np.ndarray, end: np.ndarray, *, t0: float, t1: float, bins: int) -> np.ndarray:
    """The row a path (non-overlapping segments) is on at each bin's centre; NaN where it is on none."""
    order = np.argsort(start, kind="stable")
    s, e, r = start[order], end[order], row[order].astype(np.float64)
    centre = t0 + (np.arange(bins) + 0.5) * (t1 - t0) / bins
    k = np.searchsorted(s, centre, side="right") - 1
    out = np.full(bins, np.nan)
    ok = k >= 0
    kk = k[ok]
    inside = centre[ok] < e[kk]
    out[np.flatnonzero(ok)[inside]] = r[kk[inside]]
    return out


def path_runs(rows: np.ndarray, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of bins on the same row of :func:`path_rows`: start and end times and the row of each run."""
    bins = len(rows)
    edges = np.linspace(t0, t1, bins + 1)
    same = (rows[1:] == rows[:-1]) | (np.isnan(rows[1:]) & np.isnan(rows[:-1]))
    first = np.flatnonzero(np.r_[True, ~same])
    last = np.r_[first[1:], bins]
    keep = np.isfinite(rows[first])
    first, last = first[keep], last[keep]
    return edges[first], edges[last], rows[first]


def share_pixels(shares: np.ndarray, sub: int) -> np.ndarray:
    """A category index per pixel: each row a band of ``sub`` pixels stacking its bins' shares.

    ``shares`` is ``(rows, bins, categories)`` in fractions of a bin; the result is
    ``(rows * sub, bins)`` of ``int16`` with the first category at the bottom of each band and
    ``categories`` (one past the last) where the bin is idle. Every category with at least half a
    pixel's share of a bin gets its pixels, so no category disappears at any zoom.
    """
    return stack_pixels(shares, sub)


def location_rows(process: np.ndarray, thread: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """The distinct (process, thread) locations in order, and each item's row among them (one pass when sorted)."""
    key = process.astype(np.int64) << 32 | (thread.astype(np.int64) & 0xFFFFFFFF)
    if len(key) and bool(np.all(key[1:] >= key[:-1])):
        change = np.r_[True, key[1:] != key[:-1]]
        uniq = key[change]
        row = np.cumsum(change) - 1
    else:
        uniq, row = np.unique(key, return_inverse=True)
    locs = pd.DataFrame({"process": (uniq >> 32).astype(np.int64), "thread": (uniq & 0xFFFFFFFF).astype(np.int64)})
    return locs, row.astype(np.int64)


@dataclass
class TimelineData:
    """The instances of a timeline as columns, ready to bin or draw.

    Attributes
    ----------
    locs : DataFrame
        ``process``, ``thread`` of each row, top to bottom.
    index : ndarray
        Row number in ``pag.trace.intervals`` of each kept instance.
    row, enter, leave, cat, parent_cat, vertex : ndarray
        Per kept instance: its row, times, category code, its parent's category (-1: none), call path.
    names, colors : list
        Category names and colours.
    span : tuple of float
        First enter and last leave of the kept instances.
    extra : list of str
        Per row, the location's name when it is not a CPU thread (a GPU stream), else ``""``.
    """

    locs: pd.DataFrame
    index: np.ndarray
    row: np.ndarray
    enter: np.ndarray
    leave: np.ndarray
    cat: np.ndarray
    parent_cat: np.ndarray
    vertex: np.ndarray
    names: list[str]
    colors: list[Any]
    span: tuple[float, float]
    extra: list[str] = field(default_factory=list)

    @property
    def n_rows(self) -> int:
        return len(self.locs)

    def labels(self) -> list[str]:
        """Row labels: ``"3"`` or ``"3.1"`` (process.thread) when any thread is not 0, GPU streams named."""
        threaded = bool((self.locs["thread"] != 0).any())
        out = [f"{p}.{t}" if threaded else str(p) for p, t in zip(self.locs["process"], self.locs["thread"])]
        return [f"{o} {x}" if x else o for o, x in zip(out, self.extra or [""] * len(out))]

    def in_window(self, t0: float, t1: float) -> np.ndarray:
        """Positions (into the kept instances) of those overlapping ``[t0, t1)``."""
        return np.flatnonzero((self.leave > t0) & (self.enter < t1))

    def shares(self, t0: float, t1: float, bins: int, sel: np.ndarray | None = None) -> np.ndarray:
        """Share of each category in each (row, bin) of ``[t0, t1)``: ``(rows, bins, categories)``, 0..1."""
        return self.shares_with([], t0, t1, bins, sel)[0]

    def shares_with(
        self, others: list[TimelineData], t0: float, t1: float, bins: int, sel: np.ndarray | None = None
    ) -> list[np.ndarray]:
        """:meth:`shares` of this colouring and of ``others`` (the same instances coloured otherwise), in one pass."""
        if any(len(o.row) != len(self.row) for o in others):
            raise ValueError("shares_with: the other colourings must hold the same instances")
        if sel is None and (t0 > self.span[0] or t1 < self.span[1]):
            sel = self.in_window(t0, t1)
        pick = (lambda a: a) if sel is None else (lambda a: a[sel])
        covs = aggregate_bins_many(
            pick(self.row),
            pick(self.enter),
            pick(self.leave),
            [(pick(td.cat), pick(td.parent_cat), len(td.names)) for td in (self, *others)],
            n_rows=self.n_rows,
            t0=t0,
            t1=t1,
            bins=bins,
        )
        return [np.clip(cov / ((t1 - t0) / bins), 0.0, 1.0) for cov in covs]

    def rows_of(self, process: np.ndarray, thread: np.ndarray) -> np.ndarray:
        """Row of each (process, thread); -1 for locations not shown."""
        key = self.locs["process"].to_numpy(np.int64) << 32 | self.locs["thread"].to_numpy(np.int64)
        q = np.asarray(process, np.int64) << 32 | np.asarray(thread, np.int64)
        pos = np.searchsorted(key, q)
        pos_c = np.minimum(pos, max(len(key) - 1, 0))
        hit = (pos < len(key)) & (key[pos_c] == q) if len(key) else np.zeros(len(q), bool)
        return np.where(hit, pos_c, -1).astype(np.int64)


def timeline_data(
    pag: PAG,
    *,
    processes: list[int] | None = None,
    color_by: str = "kind",
    top_regions: int = 10,
    who: str = "plot_timeline",
) -> TimelineData:
    """Columns of a timeline of ``pag``'s trace: rows, categories and times of every instance shown."""
    if pag.trace is None or not len(pag.trace.intervals):
        raise PassError(f"{who}: the PAG has no trace instances (pag.trace is empty); a timeline needs a trace")
    vcat, names, colors = interval_categories(pag, color_by, top_regions)
    iv = pag.trace.intervals
    locs, row = location_rows(iv["process"].to_numpy(), iv["thread"].to_numpy())
    index = np.arange(len(iv))
    if processes is not None:
        keep_rows = np.flatnonzero(locs["process"].isin(list(processes)).to_numpy())
        if not len(keep_rows):
            raise PassError(f"{who}: none of the processes {processes} has trace data")
        lut = np.full(len(locs), -1, dtype=np.int64)
        lut[keep_rows] = np.arange(len(keep_rows))
        row = lut[row]
        index = np.flatnonzero(row >= 0)
        row = row[index]
        locs = locs.iloc[keep_rows].reset_index(drop=True)
    # every instance kept (no process filter): the columns themselves, not copies gathered through an arange
    pick = (lambda a: a) if processes is None else (lambda a: a[index])
    vert_all = iv["vertex"].to_numpy()
    vert = pick(vert_all).astype(np.int64, copy=False)
    cat, parent_cat = instance_categories(pag, vcat, index)
    enter = pick(iv["enter"].to_numpy())
    leave = pick(iv["leave"].to_numpy())
    return TimelineData(
        locs=locs,
        index=index,
        row=row,
        enter=enter,
        leave=leave,
        cat=cat,
        parent_cat=parent_cat,
        vertex=vert,
        names=list(names),
        colors=list(colors),
        span=(float(enter.min()), float(leave.max())),
        extra=_location_names(pag, locs),
    )


def instance_categories(pag: PAG, vcat: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The category of each instance at ``index`` (positions in ``pag.trace.intervals``) and of its parent.

    ``vcat``: a category code per vertex (:func:`interval_categories`); the parent's is -1 where an
    instance has none. When ``index`` keeps every instance, the columns are taken without a gather.
    """
    iv = pag.trace.intervals  # type: ignore[union-attr]
    cat_all = vcat[iv["vertex"].to_numpy()]
    par = iv["parent"].to_numpy()
    if len(index) != len(par):
        par = par[index]
    parent_cat = np.where(par >= 0, cat_all[np.maximum(par, 0)], -1)
    return (cat_all if len(index) == len(cat_all) else cat_all[index]), parent_cat


#: The attribute of an object (a flow run's timeline figure) holding its TimelineData for the run's page.
_SHARED = "_perflow_timeline_data"


def _lost() -> None:
    return None


@dataclass
class _Kept:
    """What :func:`share_data` keeps on a figure; never pickled (a cached or sent figure arrives without it)."""

    pag: Any
    iv: Any
    key: tuple[Any, ...]
    td: TimelineData

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_lost, ())


def data_key(processes: list[int] | None, color_by: str, top_regions: int) -> tuple[Any, ...]:
    """The settings of :func:`timeline_data` that decide its result, as a key for :func:`take_shared`."""
    return (None if processes is None else tuple(int(p) for p in processes), color_by, int(top_regions))


def share_data(holder: Any, pag: PAG, td: TimelineData, key: tuple[Any, ...]) -> None:
    """Keep ``td`` (made by :func:`timeline_data` with the settings ``key``) on ``holder`` for :func:`take_shared`.

    A flow run's static timeline keeps its columns on the figure, so the run's page (which draws the
    interactive timeline of the same PAG) does not build them again. Held weakly on the PAG and its
    instances: a changed trace is never matched.
    """
    iv = pag.trace.intervals if pag.trace is not None else None
    try:
        setattr(holder, _SHARED, _Kept(weakref.ref(pag), weakref.ref(iv), key, td))
    except (AttributeError, TypeError):  # an object that takes no attributes: nothing is shared
        pass


def take_shared(holders: Iterable[Any], pag: PAG, key: tuple[Any, ...]) -> TimelineData | None:
    """The TimelineData one of ``holders`` keeps for ``pag`` and ``key`` (:func:`share_data`), removed from it.

    ``None`` when none has it. Taken once: the holder no longer keeps the columns alive.
    """
    iv = pag.trace.intervals if pag.trace is not None else None
    for h in holders:
        got = getattr(h, _SHARED, None)
        if isinstance(got, _Kept) and got.pag() is pag and got.iv() is iv and got.key == key:
            delattr(h, _SHARED)
            return got.td
    return None


def _location_names(pag: PAG, locs: pd.DataFrame) -> list[str]:
    """The name of each row's location when it is not a CPU thread (``trace.locations``), else ``""``."""
    tl = pag.trace.locations if pag.trace is not None else None
    if tl is None or not len(tl) or bool((tl["type"] == "cpu").all()):
        return [""] * len(locs)
    other = tl[tl["type"] != "cpu"]
    names = dict(zip(zip(other["process"].tolist(), other["thread"].tolist()), other["name"].astype(str)))
    return [names.get((int(p), int(t)), "") for p, t in zip(locs["process"], locs["thread"])]
