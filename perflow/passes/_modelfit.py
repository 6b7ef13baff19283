"""The fitting engine of :mod:`perflow.passes.models`: batched least squares, closed-form leave-one-out, selection.

:func:`perflow.passes.models.fit_models` checks its inputs and calls
:func:`models_1d` or :func:`models_2d` here; the module docstring of
:mod:`perflow.passes.models` describes the hypotheses, the guards and the
vectorisation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perflow.sdk import PassError

from . import _modelquality
from .models import CHUNK, Models, _term_values, building_blocks, evaluate, smape

__all__ = ["models_1d", "models_2d"]


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


def _blocks_for(x: np.ndarray, negative: bool, poly: Sequence[float], log: Sequence[int]) -> np.ndarray:
    return building_blocks(poly=poly, log=log, negative=negative, log_terms=bool((x >= 1).all()))


def _finish(
    names: list[str],
    X: np.ndarray,
    Y: np.ndarray,
    coef: np.ndarray,
    expo: np.ndarray,
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
    # the chosen model's own leave-one-out errors, whatever the selection criterion was
    cv_all, extrap = _modelquality.loo_quality(X, Y, coef, expo, fitted)
    return Models(
        params=names,
        coef=coef,
        expo=expo,
        n_terms=np.where(ok, k - 1, 0),
        n_points=npts,
        smape=np.where(nan, np.nan, 100.0 * s),
        cv_smape=cv_all,
        ar2=ar2,
        rss=np.where(nan, np.nan, rss),
        extrap_smape=extrap,
        notes=notes,
    )


def models_1d(
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
    blk, coef, _, _ = _fit_single(x, Y, blocks, max_terms, **opts)
    expo = np.zeros((len(Y), max_terms, 1, 2))
    used = blk >= 0
    expo[:, :, 0, :] = np.where(used[..., None], blocks[np.maximum(blk, 0)], 0.0)
    notes = []
    if len(np.unique(x)) < 3:
        notes.append(f"a model needs measurements at three or more values of {names[0]}; got {np.unique(x).tolist()}")
    return _finish(names, x[:, None], Y, coef, expo, notes)


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


def models_2d(
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
        coef[rows], expo[rows] = best_c, best_x
    return _finish(names, X, Y, coef, expo, notes)
