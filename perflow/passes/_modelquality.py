"""Fit quality of chosen performance models: leave-one-out errors in closed form, per row.

:func:`loo_quality` is what :mod:`perflow.passes._modelfit` calls once the
models are chosen, so that every model, however it was selected (by
cross-validation or, with too few points, by the fit to all points), carries
the same two cross-validation figures:

* ``cv_smape``: the mean over the measured points of the leave-one-out
  SMAPE ``2 |f_-i(x_i) - y_i| / (|f_-i(x_i)| + |y_i|)`` (percent), where
  ``f_-i`` is the model's hypothesis fitted without point ``i``;
* ``extrap_smape``: the same error at the points of the largest value of the
  first parameter only (the largest process count): how far the hypothesis
  fitted to the smaller scales misses the largest one, i.e. the error of an
  extrapolation by one step, measured.

Both come from the fit to all points: leaving point ``i`` out of a
least-squares fit turns its residual ``e_i`` into ``e_i / (1 - h_i)``,
``h_i`` the point's leverage (the diagonal of the hat matrix ``A A^+`` of
the model's design). A point with ``h_i = 1`` is not predicted by the others
(the fold leaves the coefficients undetermined): its error, and the figures
that need it, are nan.
"""

from __future__ import annotations

import numpy as np

from .models import smape

__all__ = ["loo_quality"]


def _design(coef: np.ndarray, expo: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Per row, the design ``[1, t_1(x), ..., t_K(x)]`` at the points: shape (m, n, 1 + K); unused terms are 0."""
    m, K = coef.shape[0], expo.shape[1]
    n = X.shape[0]
    A = np.zeros((m, n, 1 + K))
    A[:, :, 0] = 1.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lg = np.log2(X)
        for k in range(K):
            t = np.ones((m, n))
            for d in range(X.shape[1]):
                i, j = expo[:, k, d, 0][:, None], expo[:, k, d, 1][:, None]
                t = t * X[None, :, d] ** i * lg[None, :, d] ** j
            A[:, :, 1 + k] = np.where((coef[:, k + 1] != 0)[:, None], t, 0.0)
    return np.nan_to_num(A, nan=0.0, posinf=0.0, neginf=0.0)


def loo_quality(
    X: np.ndarray, Y: np.ndarray, coef: np.ndarray, expo: np.ndarray, fitted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out SMAPE of each row's model, over all points and at the largest scale (percent).

    Parameters
    ----------
    X : numpy.ndarray
        Parameter values (n, D); the first parameter is the process count.
    Y : numpy.ndarray
        Measurements (m, n), nan where not measured.
    coef, expo : numpy.ndarray
        The chosen models (see :class:`perflow.passes.models.Models`); rows without a model have nan ``coef``.
    fitted : numpy.ndarray
        Each model's value at the points (m, n).

    Returns
    -------
    cv_smape, extrap_smape : numpy.ndarray
        Shape (m,), nan for rows without a model or with a point the others do not determine.
    """
    m, n = Y.shape
    have = np.isfinite(Y)
    ok = np.isfinite(coef[:, 0])
    A = _design(np.nan_to_num(coef), expo, X) * have[:, :, None]  # missing points: zero rows, no influence
    lev = np.zeros((m, n))
    if m:
        lev = np.einsum("mnk,mkn->mn", A, np.linalg.pinv(A))
    y = np.where(have, Y, 0.0)
    resid = y - np.where(have, fitted, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        free = 1.0 - lev
        loo = np.where(free > 1e-9, y - resid / np.where(free > 1e-9, free, 1.0), np.nan)
    err = np.where(have, smape(loo, y), np.nan)
    err = np.where(have & ~np.isfinite(loo), np.inf, err)  # an undetermined fold
    npts = have.sum(axis=1)
    with np.errstate(invalid="ignore"):
        cv = np.where(npts > 0, np.nansum(np.where(have, err, 0.0), axis=1) / np.maximum(npts, 1), np.nan)
        pmax = np.where(have, X[None, :, 0], -np.inf).max(axis=1, initial=-np.inf)
        last = have & (X[None, :, 0] == pmax[:, None])  # the largest process count each row was measured at
        nlast = last.sum(axis=1)
        ex = np.where(nlast > 0, np.where(last, err, 0.0).sum(axis=1) / np.maximum(nlast, 1), np.nan)
    cv = np.where(ok & np.isfinite(cv), 100.0 * cv, np.nan)
    ex = np.where(ok & np.isfinite(ex), 100.0 * ex, np.nan)
    return cv, ex
