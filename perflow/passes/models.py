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
model, 1 for an exact fit of varying data), ``cv_smape`` (percent) and
``rss``.

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

from perflow.errors import PassError

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
        Quality of each row's model (percent for the SMAPEs).
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


# --------------------------------------------------------------------------- fitting one parameter
@dataclass
class _Best:
    """Running best hypothesis per path while hypotheses stream by."""

    cv: np.ndarray
    k: np.ndarray  # terms of the best
    blocks: np.ndarray  # (m, K) block indices (-1 unused)
    coef: np.ndarray  # (m, 1 + K)


def _t_critical(dof: int, alpha: float) -> float:
    """Two-sided critical value of Student's t with ``dof`` degrees of freedom (0 when ``alpha`` is 0)."""
    if alpha <= 0 or dof <= 0:
        return 0.0
    from scipy.special import stdtrit

    return float(stdtrit(dof, 1.0 - alpha / 2.0))


def _fit_batch(
    A: np.ndarray,
    Yt: np.ndarray,
    *,
    cv: bool,
    min_contribution: float,
    alpha: float,
    min_variation: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Least squares of every column of ``Yt`` (n, m) on every design ``A`` (G, n, k), scored and screened.

    Returns the coefficients (G, k, m) and the selection error (G, m): the
    leave-one-out cross-validation SMAPE (with ``cv=False``, the SMAPE of the
    fit to all points), inf where the hypothesis is not admissible (a fold
    without a unique fit, or a term that fails a guard of the module
    docstring). The leave-one-out predictions come in closed form from the
    fit to all points: leaving point ``i`` out of a least-squares fit changes
    its residual ``e_i`` into ``e_i / (1 - h_i)``, with ``h_i`` the leverage
    of the point (the diagonal of the hat matrix ``A A^+``); ``h_i = 1``
    means the other points do not determine the fit.
    """
    G, n, k = A.shape
    scale = np.abs(A).max(axis=1)  # (G, k): columns scaled to 1 for the conditioning
    scale = np.where(scale > 0, scale, 1.0)
    As = A / scale[:, None, :]
    pinv = np.linalg.pinv(As)  # (G, k, n)
    coef = pinv @ Yt  # (G, k, m), for the scaled columns
    fitted = As @ coef  # (G, n, m)
    resid = Yt[None] - fitted
    sv = np.linalg.svd(As, compute_uv=False)
    ok = sv[:, -1] > 1e-9 * sv[:, 0]  # (G,): full column rank
    lev = np.einsum("gnk,gkn->gn", As, pinv)  # leverages
    with np.errstate(divide="ignore", invalid="ignore"):
        if cv:
            ok &= (1.0 - lev).min(axis=1) > 1e-9
            loo = Yt[None] - resid / (1.0 - lev)[:, :, None]
            err = smape(loo, Yt[None]).mean(axis=1)
        else:
            err = smape(fitted, Yt[None]).mean(axis=1)
        # t test of every term's coefficient: |c| / se, se^2 = RSS / (n - k) * diag((A^T A)^-1)
        sigma2 = (resid**2).sum(axis=1) / max(n - k, 1)  # (G, m)
        dinv = (pinv**2).sum(axis=2)  # diag(A^+ A^+^T) = diag((A^T A)^-1), (G, k)
        c = np.abs(coef[:, 1:])  # (G, k-1, m)
        se = np.sqrt(sigma2[:, None, :] * dinv[:, 1:, None])
        tc = _t_critical(n - k, alpha)
        good = np.where(se > 0, c >= tc * se, c > 0).all(axis=1)  # (G, m)
        # every term contributes: max over the points of |c_k t_k| / |y|
        ay = np.abs(Yt)
        inv = np.where(ay > 0, 1.0 / np.where(ay > 0, ay, 1.0), np.inf)  # (n, m)
        for j in range(1, k):
            contrib = (np.abs(As[:, :, j])[:, :, None] * inv[None]).max(axis=1) * c[:, j - 1]
            good &= contrib >= min_contribution
        # together, the terms change the value by min_variation of its mean
        if min_variation > 0 and k > 1:
            v = As[:, :, 1:] @ coef[:, 1:]  # (G, n, m): the model without its constant
            good &= (v.max(axis=1) - v.min(axis=1)) >= min_variation * ay.mean(axis=0)[None]
    err = np.where(ok[:, None] & good, err, np.inf)
    return coef / scale[:, :, None], err


def _hypotheses(n_blocks: int, n_terms: int) -> np.ndarray:
    """Block-index tuples of the hypotheses with ``n_terms`` terms, simplest first."""
    if n_terms == 1:
        return np.arange(n_blocks)[:, None]
    i, j = np.triu_indices(n_blocks, k=1)
    return np.column_stack([i, j])


def _fit_group(
    T: np.ndarray,
    Y: np.ndarray,
    max_terms: int,
    *,
    cv: bool,
    margin: float,
    min_contribution: float,
    alpha: float,
    min_variation: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best hypothesis per row of ``Y`` (m, n) over terms ``T`` (B, n): (block indices (m, K), coef (m, 1+K), cv)."""
    m, n = Y.shape
    B = T.shape[0]
    Yt = np.ascontiguousarray(Y.T)
    K = max_terms
    # the constant model: the mean; its leave-one-out prediction is the mean of the others
    mean = Y.mean(axis=1)
    if cv and n > 1:
        loo = (Y.sum(axis=1, keepdims=True) - Y) / (n - 1)
        cv_const = smape(loo, Y).mean(axis=1)
    else:
        cv_const = smape(mean[:, None], Y).mean(axis=1)
    best = _Best(
        cv=cv_const,
        k=np.zeros(m, dtype=np.int64),
        blocks=np.full((m, K), -1, dtype=np.int64),
        coef=np.column_stack([mean, np.zeros((m, K))]),
    )
    for nt in range(1, K + 1):
        if nt + 1 > n - 1 or (nt > 1 and n < nt + 3):  # determined folds; two terms from five points on
            break
        hyp = _hypotheses(B, nt)
        for start in range(0, len(hyp), CHUNK):
            h = hyp[start : start + CHUNK]
            A = np.concatenate([np.ones((len(h), n, 1)), T[h].transpose(0, 2, 1)], axis=2)  # (G, n, 1+nt)
            coef, err = _fit_batch(
                A, Yt, cv=cv, min_contribution=min_contribution, alpha=alpha, min_variation=min_variation
            )
            g = np.argmin(err, axis=0)  # ties: the simplest (first) hypothesis
            e = err[g, np.arange(m)]
            more = nt > best.k
            better = np.where(more, e < best.cv * (1.0 - margin), e < best.cv)
            if not better.any():
                continue
            rows = np.flatnonzero(better)
            best.cv[rows] = e[rows]
            best.k[rows] = nt
            best.blocks[rows] = -1
            best.blocks[rows, :nt] = h[g[rows]]
            best.coef[rows] = 0.0
            best.coef[rows, : nt + 1] = coef[g[rows], :, rows]
    return best.blocks, best.coef, best.cv


def _fit_single(
    x: np.ndarray,
    Y: np.ndarray,
    blocks: np.ndarray,
    max_terms: int,
    *,
    cv: bool,
    margin: float,
    min_contribution: float,
    alpha: float,
    min_variation: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One parameter: per row, (block indices (m, K), coef (m, 1+K), cv_smape in percent, n_points).

    Missing measurements (nan) are left out; rows are grouped by which points they have.
    """
    m, n = Y.shape
    K = max_terms
    blk = np.full((m, K), -1, dtype=np.int64)
    coef = np.full((m, 1 + K), np.nan)
    cverr = np.full(m, np.nan)
    have = np.isfinite(Y)
    npts = have.sum(axis=1)
    if m == 0:
        return blk, coef, cverr, npts
    keys, inverse = np.unique(np.packbits(have, axis=1), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    T_all = _term_values(x, blocks)
    for gi in range(len(keys)):
        rows = np.flatnonzero(inverse == gi)
        cols = np.flatnonzero(have[rows[0]])
        if len(cols) < 3:
            continue
        b, c, e = _fit_group(
            T_all[:, cols],
            Y[np.ix_(rows, cols)],
            K,
            cv=cv,
            margin=margin,
            min_contribution=min_contribution,
            alpha=alpha,
            min_variation=min_variation,
        )
        blk[rows], coef[rows], cverr[rows] = b, c, 100.0 * e
    return blk, coef, cverr, npts


# --------------------------------------------------------------------------- the public entry point
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
        return _models_1d(Xa[:, 0], Ya, names, max_terms, negative, poly, log, opts)
    return _models_2d(Xa, Ya, names, negative, poly, log, opts)


def _blocks_for(x: np.ndarray, negative: bool, poly: Sequence[float], log: Sequence[int]) -> np.ndarray:
    return building_blocks(poly=poly, log=log, negative=negative, log_terms=bool((x >= 1).all()))


def _finish(
    names: list[str],
    X: np.ndarray,
    Y: np.ndarray,
    coef: np.ndarray,
    expo: np.ndarray,
    cverr: np.ndarray,
    notes: list[str],
) -> Models:
    have = np.isfinite(Y)
    # a constant that is zero up to rounding is zero (models such as ``5·p^(2/3)``)
    with np.errstate(invalid="ignore"):
        level = np.where(have, np.abs(Y), 0.0).sum(axis=1) / np.maximum(have.sum(axis=1), 1)
        tiny = (coef[:, 1:] != 0).any(axis=1) & (np.abs(coef[:, 0]) <= 1e-10 * level)
    coef[tiny, 0] = 0.0
    fitted = evaluate(np.nan_to_num(coef), expo, X)
    k = 1 + (coef[:, 1:] != 0).sum(axis=1)
    ok = np.isfinite(coef[:, 0])
    Yz = np.where(have, Y, 0.0)
    Fz = np.where(have, fitted, 0.0)
    npts = have.sum(axis=1)
    # quality over the measured points of each row (missing points count as exact)
    s = smape(Fz, Yz).sum(axis=1) / np.maximum(npts, 1)
    rss = ((Fz - Yz) ** 2).sum(axis=1)
    ymean = Yz.sum(axis=1) / np.maximum(npts, 1)
    tss = (np.where(have, Y - ymean[:, None], 0.0) ** 2).sum(axis=1)
    dof = npts - k
    flat = tss <= 1e-24 * np.maximum((Yz**2).sum(axis=1), 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        ar2 = 1.0 - (rss / np.where(dof > 0, dof, 1)) / (tss / np.maximum(npts - 1, 1))
    ar2 = np.where(flat, 1.0, np.where(k == 1, 0.0, ar2))
    ar2 = np.where(ok & (dof > 0), ar2, np.nan)
    nan = ~ok
    return Models(
        params=names,
        coef=coef,
        expo=expo,
        n_terms=np.where(ok, k - 1, 0),
        n_points=npts,
        smape=np.where(nan, np.nan, 100.0 * s),
        cv_smape=np.where(nan, np.nan, cverr),
        ar2=ar2,
        rss=np.where(nan, np.nan, rss),
        notes=notes,
    )


def _models_1d(
    x: np.ndarray,
    Y: np.ndarray,
    names: list[str],
    max_terms: int,
    negative: bool,
    poly: Sequence[float],
    log: Sequence[int],
    opts: dict,
) -> Models:
    blocks = _blocks_for(x, negative, poly, log)
    blk, coef, cverr, _ = _fit_single(x, Y, blocks, max_terms, **opts)
    expo = np.zeros((len(Y), max_terms, 1, 2))
    used = blk >= 0
    expo[:, :, 0, :] = np.where(used[..., None], blocks[np.maximum(blk, 0)], 0.0)
    notes = []
    if len(np.unique(x)) < 3:
        notes.append(f"a model needs measurements at three or more values of {names[0]}; got {np.unique(x).tolist()}")
    return _finish(names, x[:, None], Y, coef, expo, cverr, notes)


def _line(X: np.ndarray, Y: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The measurements along parameter ``d``: the longest lines of points with the other parameter fixed, averaged.

    Returns the distinct values of parameter ``d`` on the line and ``Y`` averaged over the lines (m, len).
    """
    other = X[:, 1 - d]
    best_len, lines = 0, []
    for v in np.unique(other):
        sel = np.flatnonzero(other == v)
        ln = len(np.unique(X[sel, d]))
        if ln > best_len:
            best_len, lines = ln, [sel]
        elif ln == best_len:
            lines.append(sel)
    vals = np.unique(X[lines[0], d])
    # keep the lines covering the same values as the first
    lines = [s for s in lines if np.array_equal(np.unique(X[s, d]), vals)]
    acc = np.zeros((Y.shape[0], len(vals)))
    cnt = np.zeros((Y.shape[0], len(vals)))
    for s in lines:
        pos = np.searchsorted(vals, X[s, d])
        for c, p in zip(s, pos):
            ok = np.isfinite(Y[:, c])
            acc[ok, p] += Y[ok, c]
            cnt[ok, p] += 1
    with np.errstate(invalid="ignore"):
        return vals, np.where(cnt > 0, acc / np.where(cnt > 0, cnt, 1), np.nan)


def _models_2d(
    X: np.ndarray,
    Y: np.ndarray,
    names: list[str],
    negative: bool,
    poly: Sequence[float],
    log: Sequence[int],
    opts: dict,
) -> Models:
    m, n = Y.shape
    notes: list[str] = []
    # 1. the best single-parameter term of each parameter, on the line along it
    best_expo = np.zeros((m, 2, 2))  # per row and parameter: (i, j) of its best term
    active = np.zeros((m, 2), dtype=bool)
    for d in range(2):
        vals, Yl = _line(X, Y, d)
        if len(vals) < 3:
            raise PassError(
                f"parameter {names[d]!r}: a line of measurements with the other parameter fixed has only "
                f"{len(vals)} values ({vals.tolist()}); three or more are needed to model it"
            )
        blocks = _blocks_for(vals, negative, poly, log)
        blk, coef, _, _ = _fit_single(vals, Yl, blocks, 1, **opts)
        has = (blk[:, 0] >= 0) & np.isfinite(coef[:, 0])
        active[:, d] = has
        best_expo[has, d] = blocks[blk[has, 0]]
    # 2. combinations, fitted to all points; rows grouped by (term of p, term of n) and measured points
    K = 2
    coef = np.full((m, 1 + K), np.nan)
    expo = np.zeros((m, K, 2, 2))
    cverr = np.full(m, np.nan)
    have = np.isfinite(Y)
    key = np.column_stack([best_expo.reshape(m, 4), active, have]).astype(np.float64)
    keys, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    logx = np.log2(X)
    for gi in range(len(keys)):
        rows = np.flatnonzero(inverse == gi)
        cols = np.flatnonzero(have[rows[0]])
        if len(cols) < 3:
            continue
        Yg = Y[np.ix_(rows, cols)]
        e0 = best_expo[rows[0]]
        act = active[rows[0]]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = [X[cols, d] ** e0[d, 0] * logx[cols, d] ** e0[d, 1] for d in range(2)]
        zero = np.zeros((2, 2))
        cand: list[tuple[np.ndarray, list[np.ndarray]]] = []  # (expo (K, 2, 2), columns)
        if act.all():
            both = np.stack([e0[0], e0[1]])
            only = [np.stack([e0[0], zero[1]]), np.stack([zero[0], e0[1]])]
            cand = [
                (np.stack([only[0], only[1]]), [t[0], t[1]]),  # c0 + a t1 + b t2
                (np.stack([both, zero]), [t[0] * t[1]]),  # c0 + a t1 t2
                (np.stack([only[0], both]), [t[0], t[0] * t[1]]),  # c0 + a t1 + b t1 t2
                (np.stack([only[1], both]), [t[1], t[0] * t[1]]),  # c0 + a t2 + b t1 t2
            ]
        else:
            for d in np.flatnonzero(act):
                e = np.zeros((2, 2))
                e[d] = e0[d]
                cand.append((np.stack([e, zero]), [t[d]]))
        nc = len(cols)
        cand = [(ex, cl) for ex, cl in cand if 1 + len(cl) <= nc - 1]
        # one selection criterion per group: cross-validation when every candidate's folds are determined
        use_cv = bool(opts["cv"]) and all(1 + len(cl) <= nc - 1 for _, cl in cand)
        mean = Yg.mean(axis=1)
        if use_cv:
            best_e = smape((Yg.sum(axis=1, keepdims=True) - Yg) / (nc - 1), Yg).mean(axis=1)
        else:
            best_e = smape(mean[:, None], Yg).mean(axis=1)
        best_c = np.column_stack([mean, np.zeros((len(rows), K))])
        best_x = np.zeros((len(rows), K, 2, 2))
        is_const = np.ones(len(rows), dtype=bool)
        for ex, columns in cand:
            kk = 1 + len(columns)
            A = np.column_stack([np.ones(nc), *columns])[None]
            c, err = _fit_batch(
                A,
                np.ascontiguousarray(Yg.T),
                cv=use_cv,
                min_contribution=opts["min_contribution"],
                alpha=opts["alpha"],
                min_variation=opts["min_variation"],
            )
            err = err[0]
            better = np.where(is_const, err < best_e * (1.0 - opts["margin"]), err < best_e)
            best_e = np.where(better, err, best_e)
            best_c[better] = 0.0
            best_c[better, :kk] = c[0][:, better].T
            best_x[better] = ex
            is_const &= ~better
        coef[rows], expo[rows], cverr[rows] = best_c, best_x, 100.0 * best_e
    return _finish(names, X, Y, coef, expo, cverr, notes)
