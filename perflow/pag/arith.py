"""Arithmetic between PAGs: ``pag_b - pag_a``, ``pag / 8``, ``bytes / time``.

``+ - * /`` between two PAGs align them by call path (:func:`perflow.pag.align.align`)
and return a new PAG whose tree is the union of both trees; with a number
they apply to every metric value. The methods :meth:`Arithmetic.add`,
``sub``, ``mul`` and ``div`` take the choices the operators make by default.

Which metrics
    Metrics with the same name in both PAGs (in the left one's order; those in
    one PAG only are left out and listed in ``attrs["dropped_metrics"]``);
    two PAGs of **one metric each** pair those metrics whatever their names
    (``pag.select_metrics("bytes_sent") / pag.select_metrics("time_exc")``);
    ``metrics=[...]`` names them explicitly.

Units
    ``+`` and ``-`` need equal units (seconds plus bytes is a
    :class:`~perflow.errors.MetricError`); ``*`` and ``/`` derive one:
    ``s / s`` is dimensionless (``""``), ``bytes / s`` is ``"bytes/s"``,
    ``s * s`` is ``"s^2"``, a dimensionless operand keeps the other's unit.
    A number is dimensionless for ``*`` and ``/`` and in the metric's unit
    for ``+`` and ``-``.

Call paths in one PAG only (``fill``)
    Such a path is kept; the missing side is ``fill``: ``0.0`` (the default
    of the operators: the path took no time there) or ``nan`` (the result is
    NaN there: "not comparable"). The vertex table's ``status`` column says
    ``both``, ``only_left`` or ``only_right``.

Processes and threads (``by``)
    ``by="location"`` pairs the rows of the same (call path, process,
    thread); a location without a row for a vertex counts as 0 there, as in
    every PAG (dense semantics), so ``a / b`` is ``inf`` where only ``a``
    ran the vertex on that process. ``by="vertex"`` first aggregates each PAG
    per vertex over its own processes and threads with ``agg`` (``sum`` by
    default) and gives one row per vertex (process 0, thread 0): use it for
    runs at different process counts, and for a ratio of totals rather than
    per-process ratios. ``by="auto"`` (the default) is ``location`` when both
    PAGs have the same (process, thread) locations and an error naming both
    counts otherwise: nothing is paired silently across different scales.

A number combined with a PAG applies to its stored rows, and to the absent
rows (implicit zeros) too when ``op(0, x)`` is not 0 (``pag + 1``,
``1 / pag``): the result then has a row for every (vertex, location).

The result has no trace and no communication edges (they cannot be
subtracted); ``attrs`` records the operation, both sources, ``fill`` and ``by``.

Worked example: ``a`` has ``main`` (2 s on rank 0, 4 s on rank 1) and
``main/x`` (1 s on rank 0); ``b`` has ``main`` (3 s, 5 s) and ``main/y``
(2 s on rank 1). ``b - a`` has ``main`` (1 s, 1 s), ``main/x`` (-1 s on rank
0, status ``only_left``) and ``main/y`` (2 s on rank 1, ``only_right``);
``b.sub(a, fill=nan)`` has NaN for ``main/x`` and ``main/y``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import MetricError, PAGError
from .align import align
from .frames import AGGREGATIONS, make_metrics

if TYPE_CHECKING:  # pragma: no cover
    from .pag import PAG

__all__ = ["Arithmetic", "combine", "apply_scalar", "derive_unit", "BY_CHOICES"]

BY_CHOICES = ("auto", "location", "vertex")
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}
_VERB = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}


def derive_unit(left: str, right: str, op: str) -> str:
    """The unit of ``left op right`` (see the module docstring); raises MetricError for ``+``/``-`` of different units."""
    if op in "+-":
        if left != right:
            raise MetricError(f"units differ: [{left or 'no unit'}] {op} [{right or 'no unit'}]")
        return left
    if op == "*":
        if not left or not right:
            return left or right
        return f"{left}^2" if left == right else f"{left}*{right}"
    if left == right:
        return ""
    if not right:
        return left
    return f"1/{right}" if not left else f"{left}/{right}"


def _pair_metrics(left: PAG, right: PAG, metrics: Sequence[str] | None) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``[(result name, left metric, right metric)]`` and the metrics left out."""
    if metrics is not None:
        names = [metrics] if isinstance(metrics, str) else list(metrics)
        for m in names:
            left.check_metric(m)
            right.check_metric(m)
        return [(m, m, m) for m in names], []
    lm, rm = left.metric_names, right.metric_names
    if len(lm) == 1 and len(rm) == 1:
        return [(lm[0], lm[0], rm[0])], []
    common = [m for m in lm if m in rm]
    if not common:
        raise MetricError(
            f"the PAGs share no metric (left: {', '.join(lm)}; right: {', '.join(rm)}); "
            "name them with metrics=[...] or select one metric of each with pag.select_metrics(name)"
        )
    return [(m, m, m) for m in common], [m for m in lm + rm if m not in common]


def _locations_key(pag: PAG) -> set[tuple[int, int]]:
    loc = pag.locations
    return set(zip(loc["process"].tolist(), loc["thread"].tolist()))


def _choose_by(left: PAG, right: PAG, by: str) -> str:
    if by not in BY_CHOICES:
        raise PAGError(f"by must be one of {', '.join(BY_CHOICES)}, not {by!r}")
    if by != "auto":
        return by
    if _locations_key(left) == _locations_key(right):
        return "location"
    nl, nr = len(left.locations), len(right.locations)
    raise PAGError(
        f"the PAGs have different processes and threads (left: {len(left.processes)} processes, {nl} locations; "
        f"right: {len(right.processes)} processes, {nr} locations), so their rows cannot be paired; "
        "pass by='vertex' to aggregate each per vertex first (agg='sum' by default), "
        "or by='location' to pair the locations they share (the others count as zero)"
    )


def _row_keys(pag: PAG, umap: np.ndarray, plut: np.ndarray, tlut: np.ndarray, n_p: int, n_t: int) -> np.ndarray:
    idx = pag._metrics.index  # noqa: SLF001 - read-only, same package
    u = umap[np.asarray(idx.codes[0], dtype=np.int64)]
    p = plut[idx.levels[1].to_numpy().astype(np.int64)[idx.codes[1]]]
    t = tlut[idx.levels[2].to_numpy().astype(np.int64)[idx.codes[2]]]
    return (u * n_p + p) * n_t + t


def _union_keys(kl: np.ndarray, kr: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted distinct keys of both sides, and the position of each side's keys among them.

    Linear (a presence array) when the key range is small against the number of rows, else by sorting.
    """
    if bound <= max(8 * (len(kl) + len(kr)), 1 << 20):
        present = np.zeros(bound, dtype=bool)
        present[kl] = True
        present[kr] = True
        rank = np.cumsum(present, dtype=np.int64) - 1
        return np.flatnonzero(present), rank[kl], rank[kr]
    allk = np.sort(np.concatenate([kl, kr]))
    keys = allk[np.r_[True, allk[1:] != allk[:-1]]] if len(allk) else allk
    return keys, np.searchsorted(keys, kl), np.searchsorted(keys, kr)


def _lut(levels: np.ndarray) -> np.ndarray:
    lut = np.zeros(int(levels.max(initial=0)) + 1, dtype=np.int64)
    lut[levels] = np.arange(len(levels))
    return lut


def combine(
    left: PAG,
    right: PAG,
    op: str,
    *,
    fill: float = 0.0,
    by: str = "auto",
    agg: str = "sum",
    metrics: Sequence[str] | None = None,
) -> PAG:
    """``left op right`` aligned by call path (see the module docstring for every rule).

    Parameters
    ----------
    left, right : PAG
        The operands.
    op : {"+", "-", "*", "/"}
        The operation.
    fill : float
        Value of the missing side for a call path in one PAG only (0.0 or nan).
    by : {"auto", "location", "vertex"}
        Pair rows per (call path, process, thread), or per call path after aggregating with ``agg``.
    agg : str
        Aggregation over processes and threads for ``by="vertex"``.
    metrics : list of str, optional
        Metrics to combine (default: the shared ones).

    Returns
    -------
    PAG
    """
    if op not in _OPS:
        raise PAGError(f"unknown operation {op!r}; choose one of {', '.join(_OPS)}")
    if not isinstance(right, Arithmetic):
        raise PAGError(f"cannot {_VERB[op]} a PAG and a {type(right).__name__}")
    pairs, dropped = _pair_metrics(left, right, metrics)
    li, ri = left.metric_info, right.metric_info
    units = {}
    for name, lm, rm in pairs:
        try:
            units[name] = derive_unit(li[lm].unit, ri[rm].unit, op)
        except MetricError as exc:
            raise MetricError(f"cannot {_VERB[op]} {lm!r} and {rm!r}: {exc}") from None
    how = _choose_by(left, right, by)
    if how == "vertex" and agg not in AGGREGATIONS:
        raise PAGError(f"unknown aggregation {agg!r}; choose one of {', '.join(AGGREGATIONS)}")
    al = align([left, right])
    n_u = al.n_vertices
    in_l, in_r = al.presence[:, 0], al.presence[:, 1]
    fn = _OPS[op]
    cols: dict[str, np.ndarray] = {}
    if how == "vertex":
        u = np.arange(n_u, dtype=np.int64)
        p = np.zeros(n_u, dtype=np.int64)
        t = np.zeros(n_u, dtype=np.int64)
        for name, lm, rm in pairs:
            mat = al.matrix([left.aggregate(lm, agg).to_numpy(), right.aggregate(rm, agg).to_numpy()])
            mat[~al.presence] = fill
            with np.errstate(divide="ignore", invalid="ignore"):
                cols[name] = fn(mat[:, 0], mat[:, 1])
    else:
        plev = np.union1d(left.locations["process"].to_numpy(), right.locations["process"].to_numpy())
        tlev = np.union1d(left.locations["thread"].to_numpy(), right.locations["thread"].to_numpy())
        n_p, n_t = max(len(plev), 1), max(len(tlev), 1)
        plut, tlut = _lut(plev), _lut(tlev)
        kl = _row_keys(left, al.maps[0], plut, tlut, n_p, n_t)
        kr = _row_keys(right, al.maps[1], plut, tlut, n_p, n_t)
        keys, pl, pr = _union_keys(kl, kr, n_u * n_p * n_t)
        u = keys // (n_p * n_t)
        p = plev[(keys // n_t) % n_p] if len(plev) else np.zeros(len(keys), np.int64)
        t = tlev[keys % n_t] if len(tlev) else np.zeros(len(keys), np.int64)
        absent_l, absent_r = ~in_l[u], ~in_r[u]
        lrows, rrows = left._metrics, right._metrics  # noqa: SLF001 - read-only, same package
        for name, lm, rm in pairs:
            a = np.bincount(pl, weights=lrows[lm].to_numpy(dtype=np.float64, na_value=np.nan), minlength=len(keys))
            b = np.bincount(pr, weights=rrows[rm].to_numpy(dtype=np.float64, na_value=np.nan), minlength=len(keys))
            a[absent_l] = fill
            b[absent_r] = fill
            with np.errstate(divide="ignore", invalid="ignore"):
                cols[name] = fn(a, b)
    info = {}
    for name, lm, rm in pairs:
        mode = li[lm].mode if op in "+-" and li[lm].mode == ri[rm].mode else "other"
        label = lm if lm == rm else f"{lm} {op} {rm}"
        info[name] = _pag.MetricInfo(name, units[name], mode, f"{label}: left {op} right, aligned by call path")
    vt = al.vertices.drop(columns="call_path")
    vt["status"] = np.where(in_l & in_r, "both", np.where(in_l, "only_left", "only_right"))
    attrs = {
        "operation": f"left {op} right",
        "left": left.attrs.get("source", ""),
        "right": right.attrs.get("source", ""),
        "fill": fill,
        "by": how,
        "format": "derived",
    }
    if how == "vertex":
        attrs["aggregated"] = f"{agg} over the processes and threads of each side"
    elif left.n_processes == right.n_processes:
        attrs["nprocs"] = left.n_processes
    if dropped:
        attrs["dropped_metrics"] = dropped
    mt = make_metrics(u, p, t, cols, n_vertices=n_u, duplicates="error")
    return _pag.PAG(vt, mt, metric_info=info, attrs=attrs)


def _dense(pag: PAG) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (vertex, location) pair: keys and, for each, the position of its stored row (-1 if none)."""
    loc = pag.locations
    n_l = len(loc)
    v = np.repeat(np.arange(pag.n_vertices, dtype=np.int64), n_l)
    p = np.tile(loc["process"].to_numpy(), pag.n_vertices)
    t = np.tile(loc["thread"].to_numpy(), pag.n_vertices)
    idx = pag._metrics.index  # noqa: SLF001
    plev = loc["process"].to_numpy()
    lkey = pd.MultiIndex.from_arrays([plev, loc["thread"].to_numpy()])
    lpos = lkey.get_indexer(
        pd.MultiIndex.from_arrays([idx.levels[1].to_numpy()[idx.codes[1]], idx.levels[2].to_numpy()[idx.codes[2]]])
    )
    row = np.full(len(v), -1, dtype=np.int64)
    row[np.asarray(idx.codes[0], dtype=np.int64) * n_l + lpos] = np.arange(len(idx))
    return v, p, t, row


def apply_scalar(pag: PAG, op: str, x: float, *, reverse: bool = False) -> PAG:
    """``pag op x`` (or ``x op pag`` with ``reverse``) for a number ``x`` (see the module docstring)."""
    if isinstance(x, bool) or not isinstance(x, int | float | np.integer | np.floating):
        raise PAGError(f"cannot {_VERB.get(op, op)} a PAG and a {type(x).__name__}")
    fn = _OPS[op]
    x = float(x)

    def f(a: Any) -> Any:
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(x, a) if reverse else fn(a, x)

    f0 = f(np.float64(0.0))
    m = pag._metrics  # noqa: SLF001
    info = {}
    for name, mi in pag.metric_info.items():
        unit = mi.unit
        if op == "/" and reverse:
            unit = derive_unit("", unit, "/")
        mode = mi.mode if op == "*" or (op == "/" and not reverse) else "other"  # scaling keeps additivity
        info[name] = _pag.MetricInfo(name, unit, mode, mi.description)
    if f0 == 0.0 and not math.isnan(f0):
        cols = {c: f(m[c].to_numpy(dtype=np.float64, na_value=np.nan)) for c in m.columns}
        idx = m.index
        v = np.asarray(idx.codes[0], dtype=np.int64)
        p = idx.levels[1].to_numpy()[idx.codes[1]]
        t = idx.levels[2].to_numpy()[idx.codes[2]]
    else:  # the absent rows change too: one row per (vertex, location)
        v, p, t, row = _dense(pag)
        cols = {}
        for c in m.columns:
            a = np.zeros(len(v))
            has = row >= 0
            a[has] = m[c].to_numpy(dtype=np.float64, na_value=np.nan)[row[has]]
            cols[c] = f(a)
    mt = make_metrics(v, p, t, cols, n_vertices=pag.n_vertices, duplicates="error")
    expr = f"{x:g} {op} pag" if reverse else f"pag {op} {x:g}"
    attrs = {**pag.attrs, "operation": expr, "format": "derived"}
    return _pag.PAG(pag._vertices, mt, metric_info=info, attrs=attrs)  # noqa: SLF001


class Arithmetic:
    """``+ - * /`` for PAGs (mixed into :class:`~perflow.pag.pag.PAG`; see :mod:`perflow.pag.arith`)."""

    __array_ufunc__ = None  # ``numpy.float64(2) * pag`` calls pag.__rmul__, not a ufunc over an object array

    def _op(self, other: Any, op: str, reverse: bool = False) -> PAG:
        if isinstance(other, Arithmetic):
            return combine(other, self, op) if reverse else combine(self, other, op)  # type: ignore[arg-type]
        if isinstance(other, int | float | np.integer | np.floating) and not isinstance(other, bool):
            return apply_scalar(self, op, other, reverse=reverse)  # type: ignore[arg-type]
        return NotImplemented

    def add(self, other: Any, *, fill: float = 0.0, by: str = "auto", agg: str = "sum", metrics: Any = None) -> PAG:
        """``self + other`` with explicit choices: ``fill`` for call paths in one PAG only, ``by``, ``agg``, ``metrics``."""
        return self._arith(other, "+", fill, by, agg, metrics)

    def sub(self, other: Any, *, fill: float = 0.0, by: str = "auto", agg: str = "sum", metrics: Any = None) -> PAG:
        """``self - other`` (see :meth:`add` for the choices)."""
        return self._arith(other, "-", fill, by, agg, metrics)

    def mul(self, other: Any, *, fill: float = 0.0, by: str = "auto", agg: str = "sum", metrics: Any = None) -> PAG:
        """``self * other`` (see :meth:`add` for the choices)."""
        return self._arith(other, "*", fill, by, agg, metrics)

    def div(self, other: Any, *, fill: float = 0.0, by: str = "auto", agg: str = "sum", metrics: Any = None) -> PAG:
        """``self / other`` (see :meth:`add` for the choices)."""
        return self._arith(other, "/", fill, by, agg, metrics)

    def _arith(self, other: Any, op: str, fill: float, by: str, agg: str, metrics: Any) -> PAG:
        if isinstance(other, Arithmetic):
            return combine(self, other, op, fill=fill, by=by, agg=agg, metrics=metrics)  # type: ignore[arg-type]
        return apply_scalar(self, op, other)  # type: ignore[arg-type]

    def __add__(self, other: Any) -> PAG:
        return self._op(other, "+")

    def __radd__(self, other: Any) -> PAG:
        return self._op(other, "+", reverse=True)

    def __sub__(self, other: Any) -> PAG:
        return self._op(other, "-")

    def __rsub__(self, other: Any) -> PAG:
        return self._op(other, "-", reverse=True)

    def __mul__(self, other: Any) -> PAG:
        return self._op(other, "*")

    def __rmul__(self, other: Any) -> PAG:
        return self._op(other, "*", reverse=True)

    def __truediv__(self, other: Any) -> PAG:
        return self._op(other, "/")

    def __rtruediv__(self, other: Any) -> PAG:
        return self._op(other, "/", reverse=True)

    def __neg__(self) -> PAG:
        return apply_scalar(self, "*", -1.0)  # type: ignore[arg-type]

    def select_metrics(self, *names: str) -> PAG:
        """A PAG with only the metrics ``names`` (same vertices and rows; e.g. to divide one metric by another)."""
        pag: PAG = self  # type: ignore[assignment]
        if not names:
            raise MetricError("select_metrics needs at least one metric name")
        for n in names:
            pag.check_metric(n)
        info = pag.metric_info
        m = pag._metrics[list(names)]  # noqa: SLF001
        return _pag.PAG(pag._vertices, m, metric_info={n: info[n] for n in names}, attrs=pag.attrs)  # noqa: SLF001


# The PAG class builds on this module (its Arithmetic mixin): the module, not
# its names, is imported here, last, so that either can be imported first.
from . import pag as _pag  # noqa: E402
