"""Performance models in the normal form of Extra-P, fitted for many call paths at once.

A model of a metric ``f`` (e.g. the time of a call path) as a function of one
execution parameter ``p`` (the process count) is a sum of terms of the
*performance-model normal form* (PMNF, Calotoiu et al., SC'13)::

    f(p) = c0 + sum_k  c_k * p^(i_k) * log2(p)^(j_k)

with exponents from standard sets: ``i`` in ``{0, 1/4, 1/3, 1/2, 2/3, 3/4,
1, 5/4, 4/3, 3/2, 5/3, 7/4, 2, 9/4, 7/3, 5/2, 8/3, 11/4, 3}``, ``j`` in ``{0,
1, 2}`` (:data:`POLY_EXPONENTS`, :data:`LOG_EXPONENTS`; 56 building blocks
``p^i log2(p)^j`` besides the constant). For strong scaling, where times
shrink with ``p``, ``negative=True`` adds the blocks ``p^-i`` (no log
factor). Log factors are left out when a parameter value is below 1.

**Selection.** Every hypothesis (the constant model, ``c0 + c1 t`` for every
block ``t`` and, with ``max_terms=2``, ``c0 + c1 t1 + c2 t2`` for every pair)
is fitted by linear least squares and scored by leave-one-out
cross-validation: each measurement in turn is left out, the hypothesis is
fitted to the others and its prediction of the one left out is compared by
the symmetric relative error ``2 |f - y| / (|f| + |y|)``; the mean over the
points is the hypothesis's ``cv_smape``. The hypothesis with the smallest
``cv_smape`` wins, with guards against over-fitting when there are few
points or noisy ones:

* every fold must determine the coefficients (``k <= n - 1`` coefficients
  from ``n`` points: three points allow ``c0 + c1 t``), two-term models
  need five points, and a model needs three measurements at least;
* a hypothesis with more terms than the best so far must lower the
  cross-validation error by the factor ``1 - margin`` (default 0.4: by
  40 %) to replace it;
* every term must contribute (``max |c_k t_k| / |y| >= min_contribution``
  over the points, as Extra-P requires) and be significant (the t test of
  its coefficient, ``|c_k| / se(c_k)`` against Student's t at level
  ``alpha``, default 0.05), and the terms together must change the value
  by ``min_variation`` (default 2 %) of its mean over the points. Among 75
  candidate shapes one always fits noise a little better than the
  constant; these tests keep flat data constant (a property the tests
  check at 0.5 % noise).

The quality of the chosen model, fitted to all points: ``smape`` (mean of
``2 |f - y| / (|f| + |y|)``, in percent), ``ar2`` (adjusted coefficient of
determination ``1 - (RSS / (n - k)) / (TSS / (n - 1))``, 0 for the constant
model, 1 for an exact fit of varying data), ``rss``, and the chosen
model's own leave-one-out errors (:mod:`perflow.passes._modelquality`, also
when it was selected without cross-validation): ``cv_smape`` (mean over the
points, percent) and ``extrap_smape`` (at the largest process count: the
hypothesis fitted to the smaller scales, extrapolated one step).

**Two parameters** (e.g. processes and problem size), as Extra-P does: the
best single-parameter term of each parameter is found on the measurements
along that parameter (the longest line of points where the other parameter
is fixed; lines of equal length are averaged), then the hypotheses
``c0 + a t1 + b t2``, ``c0 + a t1 t2``, ``c0 + a t1 + b t1 t2`` and
``c0 + a t2 + b t1 t2`` are fitted to all points and the one with the
smallest ``cv_smape`` (or ``smape``, when too few points for
cross-validation) is kept. A parameter whose best term is the constant drops
out.

**Vectorised.** Candidate designs depend only on the parameter values, so
one pseudo-inverse per hypothesis (batched over hypotheses with numpy) fits
every call path with the same measured points at once: a few matrix
products of shape (hypotheses, coefficients, points) x (points, paths),
streamed over chunks of hypotheses. The leave-one-out predictions need no
refit: leaving point ``i`` out turns its residual ``e_i`` into
``e_i / (1 - h_i)``, ``h_i`` its leverage (the diagonal of the hat matrix).
About 1 s for 20,000 call paths at 5 scales (``benchmarks/bench_models.py``).

Worked example: at ``p = 2, 4, 8, 16, 32`` the times ``[3, 5, 9, 17, 33]``
give ``1 + p`` exactly (``smape`` 0, ``ar2`` 1), ``[2, 2, 2, 2, 2]`` the
constant ``2``, and ``[1+2, 1+8, 1+24, 1+64, 1+160]`` give ``1 + p·log2(p)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd

from perflow.sdk import PassError

__all__ = [
    "POLY_EXPONENTS",
    "LOG_EXPONENTS",
    "Models",
    "building_blocks",
    "fit_models",
    "term_text",
    "smape",
]

#: The polynomial exponents ``i`` of the PMNF.
POLY_EXPONENTS: tuple[Fraction, ...] = tuple(
    Fraction(s) for s in "0 1/4 1/3 1/2 2/3 3/4 1 5/4 4/3 3/2 5/3 7/4 2 9/4 7/3 5/2 8/3 11/4 3".split()
)
#: The logarithm exponents ``j`` of the PMNF.
LOG_EXPONENTS: tuple[int, ...] = (0, 1, 2)

#: Default improvement factor a model with more terms must bring (see the module docstring).
MARGIN = 0.4
#: Default smallest contribution ``max |c t| / |y|`` of a term.
MIN_CONTRIBUTION = 1e-3
#: Default significance level of the t test on every term's coefficient.
ALPHA = 0.05
#: Default smallest variation of the terms over the points, relative to the mean value.
MIN_VARIATION = 0.02
#: Hypotheses fitted at once (bounds memory: chunk x paths x points floats per array).
CHUNK = 64


def smape(f: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise symmetric relative error ``2 |f - y| / (|f| + |y|)`` (0 where both are 0)."""
    den = np.abs(f) + np.abs(y)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, 2.0 * np.abs(f - y) / np.where(den > 0, den, 1.0), 0.0)


def building_blocks(
    *,
    poly: Sequence[float] = POLY_EXPONENTS,
    log: Sequence[int] = LOG_EXPONENTS,
    negative: bool = False,
    log_terms: bool = True,
) -> np.ndarray:
    """The terms ``p^i log2(p)^j`` a model is built from, as an array of ``(i, j)`` rows.

    Parameters
    ----------
    poly, log : sequence of numbers
        Exponent sets (default the PMNF's).
    negative : bool
        Add ``p^-i`` (without log factor) for every positive ``i``: terms that shrink with ``p``.
    log_terms : bool
        Allow log factors (False when a parameter value is below 1).

    Returns
    -------
    numpy.ndarray
        Shape ``(B, 2)``, ordered by ``i`` then ``j``; ``(0, 0)`` (the constant) is not a block.
    """
    pairs = {(float(i), int(j)) for i in poly for j in log if (i, j) != (0, 0) and (log_terms or j == 0)}
    if negative:
        pairs |= {(-float(i), 0) for i in poly if i > 0}
    return np.array(sorted(pairs), dtype=np.float64).reshape(-1, 2)


def _term_values(x: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """``x^i log2(x)^j`` for every block (rows) and point (columns)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log2(x)
        out = x[None, :] ** blocks[:, :1] * lg[None, :] ** blocks[:, 1:2]
    return out


def _fraction(v: float) -> str:
    f = Fraction(v).limit_denominator(12)
    if f.denominator == 1:
        return str(f.numerator)
    return f"({f.numerator}/{f.denominator})"


def term_text(expo: np.ndarray, names: Sequence[str]) -> str:
    """A product of PMNF factors as text: ``expo`` is ``(D, 2)`` exponents ``(i, j)`` per parameter.

    ``[[1, 1]]`` with ``["p"]`` gives ``p·log2(p)``; ``[[0.5, 0], [1, 0]]`` with ``["p", "n"]`` ``p^(1/2)·n``.
    """
    parts = []
    for (i, j), n in zip(expo, names):
        if i == 1:
            parts.append(n)
        elif i != 0:
            parts.append(f"{n}^{_fraction(i)}")
        if j == 1:
            parts.append(f"log2({n})")
        elif j != 0:
            parts.append(f"log2({n})^{_fraction(j)}")
    return "·".join(parts) or "1"


@dataclass
class Models:
    """Fitted models of ``m`` call paths (rows), see the module docstring.

    Attributes
    ----------
    params : list of str
        Parameter names (e.g. ``["p"]`` or ``["p", "n"]``).
    coef : numpy.ndarray
        ``(m, 1 + K)``: the constant ``c0`` then the coefficient of each term (0 for unused terms; nan: no model).
    expo : numpy.ndarray
        ``(m, K, D, 2)``: exponents ``(i, j)`` of each term and parameter.
    n_terms, n_points : numpy.ndarray
        Terms besides the constant, and measurements used, per row.
    smape, cv_smape, ar2, rss : numpy.ndarray
        Quality of each row's model (percent for the SMAPEs; see the module docstring).
    extrap_smape : numpy.ndarray
        Leave-one-out SMAPE at the largest process count each row was
        measured at (percent): the error of the model's hypothesis, fitted
        to the smaller scales, at the largest one.
    """

    params: list[str]
    coef: np.ndarray
    expo: np.ndarray
    n_terms: np.ndarray
    n_points: np.ndarray
    smape: np.ndarray
    cv_smape: np.ndarray
    ar2: np.ndarray
    rss: np.ndarray
    extrap_smape: np.ndarray
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.coef)

    @property
    def fitted(self) -> np.ndarray:
        """Rows that have a model."""
        return np.isfinite(self.coef[:, 0])

    def evaluate(self, points: np.ndarray | Sequence[float] | float) -> np.ndarray:
        """Each row's model at the given points: shape ``(m, q)`` for ``q`` points of ``D`` parameters.

        A scalar or a 1-D sequence is read as values of a single parameter.
        """
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim == 0:
            pts = pts.reshape(1, 1)
        elif pts.ndim == 1:
            pts = pts[:, None] if len(self.params) == 1 else pts[None, :]
        return evaluate(self.coef, self.expo, pts)

    def text(self) -> np.ndarray:
        """Each row's model as text, e.g. ``2.1 + 0.03·p·log2(p)`` ("" without a model)."""
        return model_texts(self.coef, self.expo, self.params)

    def lead(self) -> np.ndarray:
        """Each row's fastest-growing term with a non-zero coefficient, as text (``1`` for a constant)."""
        m, K = self.coef.shape[0], self.expo.shape[1]
        out = np.full(m, "", dtype=object)
        if K == 0:
            out[self.fitted] = "1"
            return out
        # growth order of a term: sum of polynomial exponents, then of log exponents
        order = self.expo[..., 0].sum(axis=2) * 1e3 + self.expo[..., 1].sum(axis=2)  # (m, K)
        order = np.where(self.coef[:, 1:] != 0, order, -np.inf)
        best = np.argmax(order, axis=1)
        for r in np.flatnonzero(self.fitted):
            k = best[r]
            out[r] = "1" if not np.isfinite(order[r, k]) else term_text(self.expo[r, k], self.params)
        return out

    def frame(self) -> pd.DataFrame:
        """The models as numeric columns ``c0``, ``c1``, ``i1_<param>``, ``j1_<param>`` ... plus quality."""
        d: dict[str, np.ndarray] = {"c0": self.coef[:, 0]}
        for k in range(self.expo.shape[1]):
            d[f"c{k + 1}"] = self.coef[:, k + 1]
            for di, name in enumerate(self.params):
                d[f"i{k + 1}_{name}"] = self.expo[:, k, di, 0]
                d[f"j{k + 1}_{name}"] = self.expo[:, k, di, 1]
        return pd.DataFrame(d)


def evaluate(coef: np.ndarray, expo: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``c0 + sum_k c_k prod_d x_d^i log2(x_d)^j`` per row (``coef`` (m, 1+K), ``expo`` (m, K, D, 2)) at points (q, D)."""
    m, K = coef.shape[0], expo.shape[1]
    out = np.repeat(coef[:, :1], len(points), axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lg = np.log2(points)
        for k in range(K):
            t = np.ones((m, len(points)))
            for d in range(points.shape[1]):
                i, j = expo[:, k, d, 0][:, None], expo[:, k, d, 1][:, None]
                t = t * points[None, :, d] ** i * lg[None, :, d] ** j
            out = out + np.where(coef[:, k + 1 : k + 2] != 0, coef[:, k + 1 : k + 2] * t, 0.0)
    return out


def frame_models(df: pd.DataFrame, params: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``coef`` and ``expo`` of :func:`evaluate` read back from the columns of :meth:`Models.frame`."""
    K = 0
    while f"c{K + 1}" in df.columns:
        K += 1
    coef = np.column_stack([df[f"c{k}"].to_numpy(dtype=np.float64) for k in range(K + 1)])
    expo = np.zeros((len(df), K, len(params), 2))
    for k in range(K):
        for di, name in enumerate(params):
            expo[:, k, di, 0] = df[f"i{k + 1}_{name}"].to_numpy(dtype=np.float64)
            expo[:, k, di, 1] = df[f"j{k + 1}_{name}"].to_numpy(dtype=np.float64)
    return coef, expo


def _coef_text(c: float) -> str:
    return f"{c:.4g}"


def model_texts(coef: np.ndarray, expo: np.ndarray, params: Sequence[str]) -> np.ndarray:
    """Models as text, ``c0 + c1·term + ...`` (terms with a zero coefficient are left out)."""
    out = np.full(len(coef), "", dtype=object)
    for r in range(len(coef)):
        c = coef[r]
        if not np.isfinite(c[0]):
            continue
        s = _coef_text(c[0]) if c[0] != 0 or not np.any(c[1:] != 0) else ""
        for k in range(expo.shape[1]):
            if c[k + 1] == 0:
                continue
            if s:
                s += f"{' - ' if c[k + 1] < 0 else ' + '}{_coef_text(abs(c[k + 1]))}"
            else:
                s = _coef_text(c[k + 1])
            s += f"·{term_text(expo[r, k], params)}"
        out[r] = s
    return out


def fit_models(
    X: np.ndarray | Sequence[float],
    Y: np.ndarray,
    *,
    params: Sequence[str] | None = None,
    max_terms: int = 1,
    negative: bool = False,
    poly: Sequence[float] = POLY_EXPONENTS,
    log: Sequence[int] = LOG_EXPONENTS,
    cv: bool = True,
    margin: float = MARGIN,
    min_contribution: float = MIN_CONTRIBUTION,
    alpha: float = ALPHA,
    min_variation: float = MIN_VARIATION,
) -> Models:
    """Fit a PMNF model to every row of ``Y`` (see the module docstring).

    Parameters
    ----------
    X : array
        Parameter values of the ``n`` measurements: shape ``(n,)`` for one
        parameter or ``(n, D)`` for ``D`` (1 or 2); all positive.
    Y : numpy.ndarray
        Measurements, shape ``(m, n)`` (one row per call path; nan: not measured).
    params : sequence of str, optional
        Parameter names for the text (default ``p``, then ``n``).
    max_terms : int
        Terms besides the constant in single-parameter models (1 or 2).
    negative : bool
        Add the shrinking terms ``p^-i`` (strong scaling).
    poly, log : sequence
        Exponent sets (default the PMNF's).
    cv : bool
        Select by leave-one-out cross-validation (else by the SMAPE of the fit to all points).
    margin : float
        Relative improvement a model with more terms must bring.
    min_contribution : float
        Smallest ``max |c_k t_k| / |y|`` a term must reach.
    alpha : float
        Significance level of the t test every term's coefficient must pass (0: no test).
    min_variation : float
        Smallest variation of a model's terms over the measured points, relative to the mean ``|y|``.

    Returns
    -------
    Models
    """
    Xa = np.asarray(X, dtype=np.float64)
    if Xa.ndim == 1:
        Xa = Xa[:, None]
    Ya = np.asarray(Y, dtype=np.float64)
    if Ya.ndim == 1:
        Ya = Ya[None, :]
    n, D = Xa.shape
    if Ya.shape[1] != n:
        raise PassError(f"{n} parameter points but {Ya.shape[1]} measurements per row")
    if D not in (1, 2):
        raise PassError(f"models of 1 or 2 parameters are supported, not {D}")
    if max_terms not in (1, 2):
        raise PassError(f"max_terms must be 1 or 2, not {max_terms}")
    if not (np.isfinite(Xa).all() and (Xa > 0).all()):
        raise PassError(f"parameter values must be positive numbers, got {Xa.tolist()}")
    names = list(params) if params is not None else ["p", "n"][:D]
    if len(names) != D:
        raise PassError(f"{len(names)} parameter names for {D} parameters")
    if not 0 <= alpha < 1:
        raise PassError(f"alpha must be in [0, 1), not {alpha}")
    opts = {"cv": cv, "margin": float(margin), "min_contribution": float(min_contribution), "alpha": float(alpha)}
    opts["min_variation"] = float(min_variation)
    if D == 1:
        return _modelfit.models_1d(Xa[:, 0], Ya, names, max_terms, negative, poly, log, opts)
    return _modelfit.models_2d(Xa, Ya, names, negative, poly, log, opts)


# The model fit builds on this module (imports it at its top): the module, not its
# names, is imported here, last, so that either can be imported first.
from . import _modelfit  # noqa: E402
